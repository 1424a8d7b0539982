/* What the window needs from X11 besides drawing: a back buffer (each frame is drawn off-screen
 * and shown whole), the clipboard (the window owns the selection it copied; no clipboard
 * manager is assumed), Xft.dpi, the desktop's file manager (xdg-open), and a window property
 * that tells what is where (_STEMBRIDGE_LAYOUT, for tests and tools that look at the window as
 * a person does).
 *
 * Thread: the host's UI thread. Nothing here waits for another process: xdg-open is started
 * through a shell that returns at once.
 */
#ifndef SBUI_X11_H
#define SBUI_X11_H

#include <X11/Xlib.h>
#include <cairo.h>

#include <stdbool.h>

typedef struct {
	Display* dpy;
	Window win;
	Visual* visual;
	int depth;
	Pixmap pixmap;            /* the back buffer, the window's size */
	cairo_surface_t* surface; /* on the pixmap */
	int width, height;
	GC gc;
	/* the clipboard: what this window copied, owned until another client takes it */
	Atom clipboard, targets, utf8, text, layout_prop;
	char* copied;             /* NULL when the window owns no selection */
	char* layout;             /* the layout property as last set */
} sbui_x11;

bool sbui_x11_init(sbui_x11* x, Display* dpy, Window win, int width, int height);
void sbui_x11_free(sbui_x11* x);
/* The back buffer at the window's size (made again after a resize). NULL on failure. */
cairo_surface_t* sbui_x11_back(sbui_x11* x, int width, int height);
/* Shows the back buffer: the whole frame at once. */
void sbui_x11_show(sbui_x11* x);

/* Xft.dpi from the X resources (RESOURCE_MANAGER), 0 when not set. */
double sbui_x11_xft_dpi(Display* dpy);

/* Copies text to the clipboard and the primary selection. false: another client would not let
 * the window own them. */
bool sbui_x11_copy(sbui_x11* x, const char* text);
/* A selection event for the window (SelectionRequest, SelectionClear): answered; true when it
 * was one. */
bool sbui_x11_selection_event(sbui_x11* x, const XEvent* ev);

/* Opens a folder in the desktop's file manager (xdg-open, from xdg-utils). false with why
 * when there is no xdg-open or it cannot be started. */
bool sbui_x11_open_folder(const char* dir, char* why, int wsize);

/* Sets the layout property when it changed. */
void sbui_x11_publish(sbui_x11* x, const char* text);

#endif
