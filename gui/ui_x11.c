/* What the window needs from X11 besides drawing. See ui_x11.h. */
#include "ui_x11.h"

#include <X11/Xatom.h>
#include <X11/Xresource.h>
#include <cairo-xlib.h>

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

bool sbui_x11_init(sbui_x11* x, Display* dpy, Window win, int width, int height)
{
	memset(x, 0, sizeof *x);
	x->dpy = dpy;
	x->win = win;
	XWindowAttributes wa;
	if (!XGetWindowAttributes(dpy, win, &wa))
		return false;
	x->visual = wa.visual;
	x->depth = wa.depth;
	x->gc = XCreateGC(dpy, win, 0, NULL);
	x->clipboard = XInternAtom(dpy, "CLIPBOARD", False);
	x->targets = XInternAtom(dpy, "TARGETS", False);
	x->utf8 = XInternAtom(dpy, "UTF8_STRING", False);
	x->text = XInternAtom(dpy, "TEXT", False);
	x->layout_prop = XInternAtom(dpy, "_STEMBRIDGE_LAYOUT", False);
	/* no background: the server never clears the window to a colour before a frame comes */
	XSetWindowBackgroundPixmap(dpy, win, None);
	return sbui_x11_back(x, width, height) != NULL;
}

void sbui_x11_free(sbui_x11* x)
{
	if (x->surface)
		cairo_surface_destroy(x->surface);
	if (x->pixmap)
		XFreePixmap(x->dpy, x->pixmap);
	if (x->gc)
		XFreeGC(x->dpy, x->gc);
	free(x->copied);
	free(x->layout);
	memset(x, 0, sizeof *x);
}

cairo_surface_t* sbui_x11_back(sbui_x11* x, int width, int height)
{
	if (width < 1)
		width = 1;
	if (height < 1)
		height = 1;
	if (x->surface && width == x->width && height == x->height)
		return x->surface;
	if (x->surface)
		cairo_surface_destroy(x->surface);
	if (x->pixmap)
		XFreePixmap(x->dpy, x->pixmap);
	x->pixmap = XCreatePixmap(x->dpy, x->win, (unsigned)width, (unsigned)height,
	                          (unsigned)x->depth);
	x->surface = cairo_xlib_surface_create(x->dpy, x->pixmap, x->visual, width, height);
	x->width = width;
	x->height = height;
	if (cairo_surface_status(x->surface) != CAIRO_STATUS_SUCCESS) {
		cairo_surface_destroy(x->surface);
		x->surface = NULL;
	}
	return x->surface;
}

void sbui_x11_show(sbui_x11* x)
{
	if (!x->surface)
		return;
	cairo_surface_flush(x->surface);
	XCopyArea(x->dpy, x->pixmap, x->win, x->gc, 0, 0, (unsigned)x->width, (unsigned)x->height, 0,
	          0);
	XFlush(x->dpy);
}

double sbui_x11_xft_dpi(Display* dpy)
{
	const char* rm = XResourceManagerString(dpy);
	if (!rm)
		return 0;
	XrmInitialize();
	XrmDatabase db = XrmGetStringDatabase(rm);
	if (!db)
		return 0;
	char* type = NULL;
	XrmValue v = {0, NULL};
	double dpi = 0;
	if (XrmGetResource(db, "Xft.dpi", "Xft.Dpi", &type, &v) && v.addr)
		dpi = strtod(v.addr, NULL);
	XrmDestroyDatabase(db);
	return dpi > 0 && dpi < 1000 ? dpi : 0;
}

bool sbui_x11_copy(sbui_x11* x, const char* text)
{
	char* copy = strdup(text);
	if (!copy)
		return false;
	free(x->copied);
	x->copied = copy;
	XSetSelectionOwner(x->dpy, x->clipboard, x->win, CurrentTime);
	XSetSelectionOwner(x->dpy, XA_PRIMARY, x->win, CurrentTime);
	XFlush(x->dpy);
	return XGetSelectionOwner(x->dpy, x->clipboard) == x->win;
}

bool sbui_x11_selection_event(sbui_x11* x, const XEvent* ev)
{
	if (ev->type == SelectionClear) {
		/* another client copied something: ours is no longer on offer */
		if (XGetSelectionOwner(x->dpy, x->clipboard) != x->win &&
		    XGetSelectionOwner(x->dpy, XA_PRIMARY) != x->win) {
			free(x->copied);
			x->copied = NULL;
		}
		return true;
	}
	if (ev->type != SelectionRequest)
		return false;
	const XSelectionRequestEvent* rq = &ev->xselectionrequest;
	XSelectionEvent reply;
	memset(&reply, 0, sizeof reply);
	reply.type = SelectionNotify;
	reply.display = rq->display;
	reply.requestor = rq->requestor;
	reply.selection = rq->selection;
	reply.target = rq->target;
	reply.time = rq->time;
	/* an old client names no property: the target is the property */
	const Atom prop = rq->property != None ? rq->property : rq->target;
	reply.property = None;
	if (x->copied) {
		if (rq->target == x->targets) {
			const Atom offer[4] = {x->targets, x->utf8, XA_STRING, x->text};
			XChangeProperty(x->dpy, rq->requestor, prop, XA_ATOM, 32, PropModeReplace,
			                (const unsigned char*)offer, 4);
			reply.property = prop;
		} else if (rq->target == x->utf8 || rq->target == XA_STRING || rq->target == x->text) {
			XChangeProperty(x->dpy, rq->requestor, prop,
			                rq->target == x->text ? x->utf8 : rq->target, 8, PropModeReplace,
			                (const unsigned char*)x->copied, (int)strlen(x->copied));
			reply.property = prop;
		}
	}
	XSendEvent(x->dpy, rq->requestor, False, 0, (XEvent*)&reply);
	XFlush(x->dpy);
	return true;
}

bool sbui_x11_open_folder(const char* dir, char* why, int wsize)
{
	/* the shell looks xdg-open up on the PATH (127: not there), starts it in the background and
	 * ends at once: the file manager lives on its own, and nothing is left for the host to reap */
	char* const argv[] = {"sh", "-c",
	                      "command -v xdg-open >/dev/null || exit 127; "
	                      "xdg-open \"$1\" >/dev/null 2>&1 </dev/null &",
	                      "sh", (char*)dir, NULL};
	pid_t pid;
	const int r = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
	if (r != 0) {
		snprintf(why, (size_t)wsize, "cannot start xdg-open: %s", strerror(r));
		return false;
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		snprintf(why, (size_t)wsize, "xdg-open is not installed (package xdg-utils)");
		return false;
	}
	return true;
}

void sbui_x11_publish(sbui_x11* x, const char* text)
{
	if (x->layout && !strcmp(x->layout, text))
		return;
	free(x->layout);
	x->layout = strdup(text);
	XChangeProperty(x->dpy, x->win, x->layout_prop, x->utf8, 8, PropModeReplace,
	                (const unsigned char*)text, (int)strlen(text));
}
