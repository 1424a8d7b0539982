/* xping: how long a GUI goes without handling events, measured from outside it.
 *
 * Under Xvfb with no window manager, xping becomes a minimal one (it maps and configures what
 * clients ask for) and sends every top-level window that speaks _NET_WM_PING (GTK's windows do)
 * a ping every 10 ms; a client answers only from its event loop, so the longest time a ping
 * waits for its answer is the longest freeze of that client's GUI. On SIGINT or SIGTERM it
 * prints one line: pings sent and answered, the longest wait, the 99th percentile, and when
 * the longest one started (seconds since xping started); -l FILE also logs every answer: when
 * its ping was sent (CLOCK_MONOTONIC seconds, Ardour's monotonic_time), the window, the wait.
 *
 * usage: xping [-l FILE]     (DISPLAY names the X server)
 * The protocol: Extended Window Manager Hints, "_NET_WM_PING". */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <X11/Xutil.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WIN 64
#define MAX_WAITS 200000

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
	Window w;
	int pinging;    /* a ping is out, sent at `sent` */
	double sent;
	unsigned long serial;
} client;

static client clients[MAX_WIN];
static int n_clients;
static double waits[MAX_WAITS];
static int n_waits;

static int speaks_ping(Display *d, Window w, Atom ping)
{
	Atom *protocols = NULL;
	int n = 0, yes = 0;
	if (XGetWMProtocols(d, w, &protocols, &n)) {
		for (int i = 0; i < n; i++)
			yes |= protocols[i] == ping;
		XFree(protocols);
	}
	return yes;
}

static int by_value(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int ignore_errors(Display *d, XErrorEvent *e) { (void)d; (void)e; return 0; }

int main(int argc, char **argv)
{
	FILE *logf = NULL;
	if (argc == 3 && !strcmp(argv[1], "-l"))
		logf = fopen(argv[2], "w");
	Display *d = XOpenDisplay(NULL);
	if (!d) {
		fprintf(stderr, "xping: cannot open the display\n");
		return 2;
	}
	XSetErrorHandler(ignore_errors);
	const Window root = DefaultRootWindow(d);
	const Atom wm_protocols = XInternAtom(d, "WM_PROTOCOLS", False);
	const Atom ping = XInternAtom(d, "_NET_WM_PING", False);
	XSelectInput(d, root, SubstructureRedirectMask | SubstructureNotifyMask);
	XSync(d, False);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	const double t0 = now();
	double longest = 0, longest_at = 0;
	unsigned long sent = 0, serial = 0;
	while (!stop) {
		/* a ping to each top-level client that answers pings and has none out */
		Window r, parent, *kids = NULL;
		unsigned int nk = 0;
		if (XQueryTree(d, root, &r, &parent, &kids, &nk)) {
			for (unsigned int i = 0; i < nk; i++) {
				XWindowAttributes a;
				if (!XGetWindowAttributes(d, kids[i], &a) || a.map_state != IsViewable ||
				    a.override_redirect || !speaks_ping(d, kids[i], ping))
					continue;
				int k = 0;
				while (k < n_clients && clients[k].w != kids[i])
					k++;
				if (k == n_clients) {
					if (n_clients == MAX_WIN)
						continue;
					clients[n_clients++] = (client){ .w = kids[i] };
				}
				if (clients[k].pinging)
					continue;
				XEvent e;
				memset(&e, 0, sizeof e);
				e.xclient.type = ClientMessage;
				e.xclient.window = kids[i];
				e.xclient.message_type = wm_protocols;
				e.xclient.format = 32;
				e.xclient.data.l[0] = (long)ping;
				e.xclient.data.l[1] = (long)++serial; /* stands in for the timestamp */
				e.xclient.data.l[2] = (long)kids[i];
				XSendEvent(d, kids[i], False, NoEventMask, &e);
				clients[k].pinging = 1;
				clients[k].sent = now();
				clients[k].serial = serial;
				sent++;
			}
			if (kids)
				XFree(kids);
		}
		XFlush(d);
		/* answers, and a window manager's duties, for 10 ms */
		const double until = now() + 0.010;
		while (now() < until && !stop) {
			while (XPending(d)) {
				XEvent e;
				XNextEvent(d, &e);
				if (e.type == MapRequest) {
					XMapWindow(d, e.xmaprequest.window);
				} else if (e.type == ConfigureRequest) {
					XWindowChanges c = { .x = e.xconfigurerequest.x, .y = e.xconfigurerequest.y,
					                     .width = e.xconfigurerequest.width,
					                     .height = e.xconfigurerequest.height,
					                     .border_width = e.xconfigurerequest.border_width,
					                     .sibling = e.xconfigurerequest.above,
					                     .stack_mode = e.xconfigurerequest.detail };
					XConfigureWindow(d, e.xconfigurerequest.window,
					                 (unsigned int)e.xconfigurerequest.value_mask, &c);
				} else if (e.type == ClientMessage && e.xclient.message_type == wm_protocols &&
				           (Atom)e.xclient.data.l[0] == ping) {
					const Window w = (Window)e.xclient.data.l[2];
					for (int k = 0; k < n_clients; k++) {
						if (clients[k].w != w || !clients[k].pinging ||
						    (unsigned long)e.xclient.data.l[1] != clients[k].serial)
							continue;
						const double wait = now() - clients[k].sent;
						clients[k].pinging = 0;
						if (n_waits < MAX_WAITS)
							waits[n_waits++] = wait;
						if (wait > longest) {
							longest = wait;
							longest_at = clients[k].sent - t0;
						}
						if (logf)
							fprintf(logf, "%.4f 0x%lx %.4f\n", clients[k].sent, w, wait);
					}
				} else if (e.type == DestroyNotify || e.type == UnmapNotify) {
					const Window w = e.type == DestroyNotify ? e.xdestroywindow.window
					                                         : e.xunmap.window;
					for (int k = 0; k < n_clients; k++)
						if (clients[k].w == w)
							clients[k] = clients[--n_clients];
				}
			}
			struct pollfd p = { .fd = ConnectionNumber(d), .events = POLLIN };
			poll(&p, 1, 2);
		}
	}
	/* a ping still out counts for as long as it has waited */
	for (int k = 0; k < n_clients; k++)
		if (clients[k].pinging && now() - clients[k].sent > longest) {
			longest = now() - clients[k].sent;
			longest_at = clients[k].sent - t0;
		}
	double p99 = 0;
	if (n_waits) {
		qsort(waits, (size_t)n_waits, sizeof *waits, by_value);
		p99 = waits[(n_waits * 99) / 100 < n_waits ? (n_waits * 99) / 100 : n_waits - 1];
	}
	printf("xping: %lu pings, %d answered, longest wait %.3f s (from %.2f s), 99th percentile "
	       "%.3f s\n", sent, n_waits, longest, longest_at, p99);
	if (logf)
		fclose(logf);
	XCloseDisplay(d);
	return 0;
}
