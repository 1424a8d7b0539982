/* A small LV2 host with a real X11 window, for the UI test under Xvfb (ui_xvfb_test.py).
 *
 * It loads the stereo plugin from the build dir (LV2_PATH) through lilv, runs it in blocks of
 * 512 frames in real time on its own thread, and embeds the plugin's X11 UI in its window
 * through suil, as Ardour, Carla and jalv do: ui:parent, ui:scaleFactor and sampleRate
 * options, the idle interface, port events for control outputs and every message on the notify
 * port. It never gives the UI instance-access, nor the deprecated ui:resize: it sizes its window
 * from the UI's window and resizes the UI's window with its own, as suil's X11 embedding does.
 * The plugin gets work:schedule; its work() runs on the main thread, off the audio thread.
 *
 * Commands on stdin, one per line; answers on stdout:
 *   geometry            -> "GEOMETRY x y w h" of the UI's window on the screen
 *   status              -> "STATUS device D state S jobs J device_out O fallback F devices N"
 *   set PORT VALUE      -> the host changes an input control (automation, generic UI, preset);
 *                          the UI gets a port event
 *   roll SECONDS [FROM] -> transport rolls from sample FROM (48000) for SECONDS, then stops
 *   save DIR            -> lilv state of the running instance (save() included) in DIR/state.ttl
 *   resize W H          -> the host resizes its window and the embedded UI window with it
 *   input tone|silent   -> what the track plays: a tone with a changing level, or silence
 *   heard               -> "HEARD N": samples of the output that differed from the input since
 *                          the last roll (audition playing a stem in place of the input)
 *   layout              -> the UI window's _STEMBRIDGE_LAYOUT property, between "LAYOUT" and
 *                          "END" lines (what the window says is where)
 *   uiwindow            -> "UIWINDOW geometry" of the UI's own window (it may resize itself)
 *   clipboard           -> "CLIPBOARD text" of the CLIPBOARD selection (asked as a client)
 *   quit
 * Unprompted lines: "READY", "UI_WRITE port value" for each control the UI writes.
 * Usage: ui_host [SCALE|none [XFT_DPI]]   (none: no ui:scaleFactor option, as some hosts; XFT_DPI:
 *        the desktop's Xft.dpi, set in the root window's RESOURCE_MANAGER before the UI opens)
 */
#include "../../plugin/uris.h"

#include <lilv/lilv.h>
#include <lv2/atom/forge.h>
#include <lv2/atom/util.h>
#include <lv2/log/log.h>
#include <lv2/options/options.h>
#include <lv2/patch/patch.h>
#include <lv2/state/state.h>
#include <lv2/time/time.h>
#include <lv2/ui/ui.h>
#include <lv2/urid/urid.h>
#include <lv2/worker/worker.h>
#include <suil/suil.h>

#include <X11/Xatom.h>
#include <X11/Xlib.h>

#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 512
#define RATE 48000.0
#define CONTROL_CAP 16384
#define NOTIFY_CAP 65536
#define N_PORTS SB_N_PORTS_ALL_STEREO /* every port of the stereo plugin */

/* ---- URID map, shared by plugin and UI ---- */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static char **uris;
static size_t n_uris;

static LV2_URID map_uri(LV2_URID_Map_Handle h, const char *uri)
{
	(void)h;
	pthread_mutex_lock(&map_lock);
	for (size_t i = 0; i < n_uris; i++)
		if (!strcmp(uris[i], uri)) {
			pthread_mutex_unlock(&map_lock);
			return (LV2_URID)(i + 1);
		}
	uris = realloc(uris, (n_uris + 1) * sizeof *uris);
	uris[n_uris] = strdup(uri);
	LV2_URID r = (LV2_URID)++n_uris;
	pthread_mutex_unlock(&map_lock);
	return r;
}

static const char *unmap_uri(LV2_URID_Unmap_Handle h, LV2_URID u)
{
	(void)h;
	pthread_mutex_lock(&map_lock);
	const char *r = u >= 1 && u <= n_uris ? uris[u - 1] : NULL;
	pthread_mutex_unlock(&map_lock);
	return r;
}

static int log_vprintf(LV2_Log_Handle h, LV2_URID type, const char *fmt, va_list ap)
{
	(void)h;
	fprintf(stderr, "[plugin %s] ", unmap_uri(NULL, type));
	return vfprintf(stderr, fmt, ap);
}

static int log_printf(LV2_Log_Handle h, LV2_URID type, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = log_vprintf(h, type, fmt, ap);
	va_end(ap);
	return r;
}

static LV2_URID_Map map = {NULL, map_uri};
static LV2_URID_Unmap unmap = {NULL, unmap_uri};
static LV2_Log_Log logger = {NULL, log_printf, log_vprintf};

/* ---- the host ---- */
typedef struct {
	LilvWorld *world;
	const LilvPlugin *plugin;
	LilvInstance *inst;
	float ctl[N_PORTS];
	float in[2][BLOCK], out[2][BLOCK];
	uint8_t *control, *notify;

	/* UI -> plugin: atom messages, queued for the next run (under lock) */
	pthread_mutex_t lock;
	uint8_t *pending;       /* an atom sequence (calloc: aligned for atoms) */
	int64_t roll_until;     /* transport rolls while pos < this */
	int64_t pos;
	bool rolling, send_pos;

	/* plugin -> UI: notify events, copied under lock, delivered on the UI thread */
	uint8_t *to_ui, *batch; /* padded atoms back to back, TO_UI_CAP bytes each */
	uint32_t to_ui_size;
	float sent[N_PORTS];    /* output values last sent to the UI */
	int n_devices;          /* devices in the last deviceList seen, -1 none yet */

	atomic_int quit;
	atomic_int silent;      /* the input is silence */
	atomic_long heard;      /* output samples unlike the input since the last roll */
	bool want_clip;
	SuilInstance *ui;
	Display *dpy;
	Window win;
	Window ui_window;     /* the embedded UI's own window */
	int ui_w, ui_h;
	LV2_URID atom_Sequence, atom_eventTransfer, atom_Tuple, atom_Object, patch_Set,
		patch_property, patch_value, patch_Put, patch_body, sb_deviceList, atom_Float;
} host;

static host H;
#define PENDING H.pending
#define TO_UI H.to_ui
#define TO_UI_CAP (NOTIFY_CAP * 4)

static void forge_position(LV2_Atom_Forge *f, int64_t frame, float speed)
{
	LV2_Atom_Forge_Frame fr;
	lv2_atom_forge_frame_time(f, 0);
	lv2_atom_forge_object(f, &fr, 0, map_uri(NULL, LV2_TIME__Position));
	lv2_atom_forge_key(f, map_uri(NULL, LV2_TIME__frame));
	lv2_atom_forge_long(f, frame);
	lv2_atom_forge_key(f, map_uri(NULL, LV2_TIME__speed));
	lv2_atom_forge_float(f, speed);
	lv2_atom_forge_pop(f, &fr);
}

/* The deviceList the plugin announces (read-only: in a patch:Put's body). */
static void count_devices(const LV2_Atom_Object *obj)
{
	const LV2_Atom *body = NULL, *value = NULL;
	if (obj->body.otype != H.patch_Put)
		return;
	lv2_atom_object_get(obj, H.patch_body, &body, 0);
	if (!body || body->type != H.atom_Object)
		return;
	lv2_atom_object_get((const LV2_Atom_Object *)body, H.sb_deviceList, &value, 0);
	if (!value || value->type != H.atom_Tuple)
		return;
	int n = 0;
	LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple *)value, it)
		n += it->type == H.atom_Object;
	H.n_devices = n;
}

/* The audio thread: one block every 10.7 ms, the way a sound card would ask. */
static void *audio_main(void *arg)
{
	(void)arg;
	LV2_Atom_Forge forge;
	lv2_atom_forge_init(&forge, &map);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load(&H.quit)) {
		/* control input: the transport, then what the UI sent */
		lv2_atom_forge_set_buffer(&forge, H.control, CONTROL_CAP);
		LV2_Atom_Forge_Frame seq;
		lv2_atom_forge_sequence_head(&forge, &seq, 0);
		pthread_mutex_lock(&H.lock);
		bool rolling = H.pos < H.roll_until;
		if (rolling != H.rolling || H.send_pos) {
			forge_position(&forge, H.pos, rolling ? 1.0f : 0.0f);
			H.rolling = rolling;
			H.send_pos = false;
		}
		LV2_ATOM_SEQUENCE_FOREACH ((LV2_Atom_Sequence *)PENDING, ev) {
			lv2_atom_forge_frame_time(&forge, 0);
			lv2_atom_forge_write(&forge, &ev->body, lv2_atom_total_size(&ev->body));
			lv2_atom_forge_pad(&forge, lv2_atom_total_size(&ev->body));
		}
		((LV2_Atom_Sequence *)PENDING)->atom.size = sizeof(LV2_Atom_Sequence_Body);
		pthread_mutex_unlock(&H.lock);
		lv2_atom_forge_pop(&forge, &seq);

		/* a tone whose level swells and fades twice a second, with a beat every half second:
		 * a take whose waveform shows its shape */
		const bool quiet = atomic_load(&H.silent);
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < BLOCK; i++) {
				const double t = (double)(H.pos + i) / RATE;
				const double env = 0.15 + 0.25 * (0.5 + 0.5 * sin(2 * M_PI * 0.7 * t)) +
				                   0.4 * exp(-fmod(t, 0.5) * 18.0);
				H.in[c][i] = rolling && !quiet
				                 ? (float)(env * sin((double)(H.pos + i) * 0.05 * (c + 1)))
				                 : 0.0f;
			}
		LV2_Atom_Sequence *n = (LV2_Atom_Sequence *)H.notify;
		n->atom.type = 0;
		n->atom.size = NOTIFY_CAP - sizeof(LV2_Atom);
		lilv_instance_run(H.inst, BLOCK);
		long differ = 0;
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < BLOCK; i++)
				differ += H.out[c][i] != H.in[c][i];
		if (differ)
			atomic_fetch_add(&H.heard, differ);
		if (rolling)
			H.pos += BLOCK;

		/* notify: copy every event for the UI thread */
		pthread_mutex_lock(&H.lock);
		LV2_ATOM_SEQUENCE_FOREACH (n, ev) {
			uint32_t size = lv2_atom_total_size(&ev->body);
			if (ev->body.type == H.atom_Object)
				count_devices((const LV2_Atom_Object *)&ev->body);
			if (H.to_ui_size + lv2_atom_pad_size(size) <= TO_UI_CAP) {
				memcpy(TO_UI + H.to_ui_size, &ev->body, size);
				H.to_ui_size += lv2_atom_pad_size(size);
			}
		}
		pthread_mutex_unlock(&H.lock);

		next.tv_nsec += (long)(BLOCK / RATE * 1e9);
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	return NULL;
}

/* UI -> host: a control value or an atom message for the plugin. */
static void ui_write(SuilController c, uint32_t port, uint32_t size, uint32_t protocol,
                     const void *buf)
{
	(void)c;
	if (protocol == 0 && size == sizeof(float) && port < N_PORTS) {
		H.ctl[port] = *(const float *)buf;
		H.sent[port] = H.ctl[port];
		printf("UI_WRITE %u %g\n", port, (double)H.ctl[port]);
		fflush(stdout);
	} else if (protocol == H.atom_eventTransfer && port == SB_PORT_CONTROL) {
		pthread_mutex_lock(&H.lock);
		LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)PENDING;
		uint32_t at = sizeof(LV2_Atom) + seq->atom.size;
		if (at + sizeof(LV2_Atom_Event) + size <= CONTROL_CAP) {
			LV2_Atom_Event *ev = (LV2_Atom_Event *)(PENDING + at);
			ev->time.frames = 0;
			memcpy(&ev->body, buf, size);
			seq->atom.size += lv2_atom_pad_size(sizeof(LV2_Atom_Event) + size - sizeof(LV2_Atom));
		}
		pthread_mutex_unlock(&H.lock);
	}
}

static uint32_t ui_index(SuilController c, const char *symbol)
{
	(void)c;
	LilvNode *s = lilv_new_string(H.world, symbol);
	const LilvPort *p = lilv_plugin_get_port_by_symbol(H.plugin, s);
	lilv_node_free(s);
	return p ? lilv_port_get_index(H.plugin, p) : LV2UI_INVALID_PORT_INDEX;
}

/* work:schedule: the message waits (no lock, no allocation: this runs inside run()) for the
 * main loop, which hands it to the plugin's work(). */
static struct {
	uint8_t msg[64];
	uint32_t size;
	atomic_int pending;
} W;

static LV2_Worker_Status schedule_work(LV2_Worker_Schedule_Handle h, uint32_t size,
                                       const void *data)
{
	(void)h;
	if (atomic_load(&W.pending) || size > sizeof W.msg)
		return LV2_WORKER_ERR_NO_SPACE;
	memcpy(W.msg, data, size);
	W.size = size;
	atomic_store(&W.pending, 1);
	return LV2_WORKER_SUCCESS;
}

static LV2_Worker_Status work_respond(LV2_Worker_Respond_Handle h, uint32_t size, const void *d)
{
	(void)h;
	(void)size;
	(void)d;
	return LV2_WORKER_SUCCESS;
}

static void do_work(void)
{
	if (!atomic_load(&W.pending))
		return;
	const LV2_Worker_Interface *w = lilv_instance_get_extension_data(H.inst, LV2_WORKER__interface);
	if (w && w->work)
		w->work(lilv_instance_get_handle(H.inst), work_respond, NULL, W.size, W.msg);
	atomic_store(&W.pending, 0);
}

/* Host -> UI: changed control outputs and inputs, then the plugin's messages. */
static void deliver_to_ui(void)
{
	for (uint32_t p = SB_PORT_RECORD; p <= SB_PORT_JOBS_DONE_OUT; p++) {
		if (H.ctl[p] != H.sent[p]) {
			H.sent[p] = H.ctl[p];
			suil_instance_port_event(H.ui, p, sizeof(float), 0, &H.ctl[p]);
		}
	}
	uint8_t *batch = H.batch;
	pthread_mutex_lock(&H.lock);
	uint32_t n = H.to_ui_size;
	memcpy(batch, TO_UI, n);
	H.to_ui_size = 0;
	pthread_mutex_unlock(&H.lock);
	for (uint32_t at = 0; at < n;) {
		const LV2_Atom *a = (const LV2_Atom *)(batch + at);
		suil_instance_port_event(H.ui, SB_PORT_NOTIFY, lv2_atom_total_size(a),
		                         H.atom_eventTransfer, a);
		at += lv2_atom_pad_size(lv2_atom_total_size(a));
	}
}

static const void *port_value(const char *sym, void *user, uint32_t *size, uint32_t *type)
{
	(void)user;
	uint32_t i = ui_index(NULL, sym);
	if (i == LV2UI_INVALID_PORT_INDEX || i >= N_PORTS)
		return NULL;
	const LilvPort *p = lilv_plugin_get_port_by_index(H.plugin, i);
	LilvNode *input = lilv_new_uri(H.world, LV2_CORE__InputPort);
	LilvNode *control = lilv_new_uri(H.world, LV2_CORE__ControlPort);
	bool ok = lilv_port_is_a(H.plugin, p, input) && lilv_port_is_a(H.plugin, p, control);
	lilv_node_free(input);
	lilv_node_free(control);
	if (!ok)
		return NULL;
	*size = sizeof(float);
	*type = H.atom_Float;
	return &H.ctl[i];
}

/* The UI window's description of itself (gui/ui_x11.h: _STEMBRIDGE_LAYOUT). */
static void print_layout(void)
{
	Atom type;
	int format;
	unsigned long n = 0, after = 0;
	unsigned char *data = NULL;
	printf("LAYOUT\n");
	if (XGetWindowProperty(H.dpy, H.ui_window, XInternAtom(H.dpy, "_STEMBRIDGE_LAYOUT", False), 0,
	                       1 << 20, False, AnyPropertyType, &type, &format, &n, &after,
	                       &data) == Success && data) {
		fwrite(data, 1, n, stdout);
		XFree(data);
	}
	printf("\nEND\n");
}

/* The CLIPBOARD's text, asked for by "clipboard", has come (or not). */
static void clipboard_answer(const XSelectionEvent *ev)
{
	if (!H.want_clip)
		return;
	H.want_clip = false;
	Atom type;
	int format;
	unsigned long n = 0, after = 0;
	unsigned char *data = NULL;
	if (ev->property != None &&
	    XGetWindowProperty(H.dpy, H.win, ev->property, 0, 1 << 16, True, AnyPropertyType, &type,
	                       &format, &n, &after, &data) == Success && data) {
		printf("CLIPBOARD %.*s\n", (int)n, (const char *)data);
		XFree(data);
	} else {
		printf("CLIPBOARD_NONE\n");
	}
	fflush(stdout);
}

static void command(char *line)
{
	line[strcspn(line, "\r\n")] = '\0';
	char arg[2048];
	unsigned port;
	float v, secs;
	if (!strcmp(line, "quit")) {
		atomic_store(&H.quit, 1);
	} else if (!strcmp(line, "geometry")) {
		Window child;
		int x = 0, y = 0;
		XTranslateCoordinates(H.dpy, H.win, DefaultRootWindow(H.dpy), 0, 0, &x, &y, &child);
		printf("GEOMETRY %d %d %d %d\n", x, y, H.ui_w, H.ui_h);
	} else if (!strcmp(line, "status")) {
		printf("STATUS device %g state %g jobs %g device_out %g fallback %g devices %d "
		       "audition %g record %g model %g\n",
		       (double)H.ctl[SB_PORT_DEVICE], (double)H.ctl[SB_PORT_STATE_OUT],
		       (double)H.ctl[SB_PORT_JOBS_DONE_OUT], (double)H.ctl[SB_PORT_DEVICE_OUT],
		       (double)H.ctl[SB_PORT_FALLBACK_OUT], H.n_devices, (double)H.ctl[SB_PORT_AUDITION],
		       (double)H.ctl[SB_PORT_RECORD], (double)H.ctl[SB_PORT_MODEL]);
	} else if (sscanf(line, "set %u %f", &port, &v) == 2 && port < N_PORTS) {
		H.ctl[port] = v;
		printf("SET %u %g\n", port, (double)v);
	} else if (!strcmp(line, "input silent") || !strcmp(line, "input tone")) {
		atomic_store(&H.silent, !strcmp(line, "input silent"));
		printf("INPUT\n");
	} else if (!strcmp(line, "heard")) {
		printf("HEARD %ld\n", atomic_load(&H.heard));
	} else if (!strcmp(line, "layout")) {
		print_layout();
	} else if (!strcmp(line, "uiwindow")) {
		Window child;
		int x = 0, y = 0;
		XWindowAttributes wa;
		XGetWindowAttributes(H.dpy, H.ui_window, &wa);
		XTranslateCoordinates(H.dpy, H.ui_window, DefaultRootWindow(H.dpy), 0, 0, &x, &y, &child);
		printf("UIWINDOW %d %d %d %d\n", x, y, wa.width, wa.height);
	} else if (!strcmp(line, "clipboard")) {
		/* the answer comes as a SelectionNotify in the main loop */
		XConvertSelection(H.dpy, XInternAtom(H.dpy, "CLIPBOARD", False),
		                  XInternAtom(H.dpy, "UTF8_STRING", False),
		                  XInternAtom(H.dpy, "UI_HOST_CLIP", False), H.win, CurrentTime);
		XFlush(H.dpy);
		H.want_clip = true;
		return;
	} else if (sscanf(line, "roll %f", &secs) == 1) {
		long from = 48000;
		sscanf(line, "roll %*f %ld", &from);
		atomic_store(&H.heard, 0);
		pthread_mutex_lock(&H.lock);
		H.pos = from;
		H.roll_until = H.pos + (int64_t)(secs * RATE);
		H.send_pos = true;
		pthread_mutex_unlock(&H.lock);
		printf("ROLLING\n");
	} else if (sscanf(line, "resize %u %f", &port, &v) == 2) {
		H.ui_w = (int)port;
		H.ui_h = (int)v;
		XResizeWindow(H.dpy, H.win, (unsigned)H.ui_w, (unsigned)H.ui_h);
		XResizeWindow(H.dpy, H.ui_window, (unsigned)H.ui_w, (unsigned)H.ui_h);
		XFlush(H.dpy);
		printf("RESIZED %d %d\n", H.ui_w, H.ui_h);
	} else if (sscanf(line, "save %2047s", arg) == 1) {
		/* save() may run while run() runs (the plugin reads a consistent copy) */
		LilvState *st = lilv_state_new_from_instance(H.plugin, H.inst, &map, NULL, arg, arg,
		                                             arg, port_value, NULL,
		                                             LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE,
		                                             NULL);
		int r = st ? lilv_state_save(H.world, &map, &unmap, st, NULL, arg, "state.ttl") : -1;
		lilv_state_free(st);
		printf(r == 0 ? "SAVED %s/state.ttl\n" : "SAVE_FAILED %s\n", arg);
	} else {
		printf("UNKNOWN %s\n", line);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const bool no_scale = argc > 1 && !strcmp(argv[1], "none");
	float scale = argc > 1 && !no_scale ? strtof(argv[1], NULL) : 1.0f;
	pthread_mutex_init(&H.lock, NULL);
	H.n_devices = -1;
	H.atom_Sequence = map_uri(NULL, LV2_ATOM__Sequence);
	H.atom_eventTransfer = map_uri(NULL, LV2_ATOM__eventTransfer);
	H.atom_Tuple = map_uri(NULL, LV2_ATOM__Tuple);
	H.atom_Object = map_uri(NULL, LV2_ATOM__Object);
	H.atom_Float = map_uri(NULL, LV2_ATOM__Float);
	H.patch_Set = map_uri(NULL, LV2_PATCH__Set);
	H.patch_property = map_uri(NULL, LV2_PATCH__property);
	H.patch_value = map_uri(NULL, LV2_PATCH__value);
	H.patch_Put = map_uri(NULL, LV2_PATCH__Put);
	H.patch_body = map_uri(NULL, LV2_PATCH__body);
	H.sb_deviceList = map_uri(NULL, SB__deviceList);

	H.dpy = XOpenDisplay(NULL);
	if (!H.dpy) {
		fprintf(stderr, "ui_host: no X display\n");
		return 1;
	}
	if (argc > 2) { /* what a desktop's settings daemon sets for a 2x screen: Xft.dpi 192 */
		char rm[64];
		snprintf(rm, sizeof rm, "Xft.dpi:\t%s\n", argv[2]);
		XChangeProperty(H.dpy, DefaultRootWindow(H.dpy), XA_RESOURCE_MANAGER, XA_STRING, 8,
		                PropModeReplace, (const unsigned char *)rm, (int)strlen(rm));
		XSync(H.dpy, False);
	}
	H.world = lilv_world_new();
	lilv_world_load_all(H.world);
	LilvNode *uri = lilv_new_uri(H.world, SB_URI_STEREO);
	H.plugin = lilv_plugins_get_by_uri(lilv_world_get_all_plugins(H.world), uri);
	lilv_node_free(uri);
	if (!H.plugin) {
		fprintf(stderr, "ui_host: plugin not found on LV2_PATH\n");
		return 1;
	}
	static LV2_Feature map_f = {LV2_URID__map, &map}, unmap_f = {LV2_URID__unmap, &unmap},
	                   log_f = {LV2_LOG__log, &logger};
	static LV2_Worker_Schedule sched = {NULL, schedule_work};
	static LV2_Feature sched_f = {LV2_WORKER__schedule, &sched};
	const LV2_Feature *pfeatures[] = {&map_f, &unmap_f, &log_f, &sched_f, NULL};
	H.inst = lilv_plugin_instantiate(H.plugin, RATE, pfeatures);
	if (!H.inst) {
		fprintf(stderr, "ui_host: instantiate failed\n");
		return 1;
	}
	float mins[N_PORTS], maxs[N_PORTS], defs[N_PORTS];
	lilv_plugin_get_port_ranges_float(H.plugin, mins, maxs, defs);
	for (int i = 0; i < N_PORTS; i++) {
		H.ctl[i] = isnan(defs[i]) ? 0.0f : defs[i];
		H.sent[i] = NAN;
	}
	H.control = calloc(1, CONTROL_CAP);
	H.notify = calloc(1, NOTIFY_CAP);
	H.pending = calloc(1, CONTROL_CAP);
	H.to_ui = calloc(1, TO_UI_CAP);
	H.batch = calloc(1, TO_UI_CAP);
	LV2_Atom_Sequence *pend = (LV2_Atom_Sequence *)PENDING;
	pend->atom.type = H.atom_Sequence;
	pend->atom.size = sizeof(LV2_Atom_Sequence_Body);
	lilv_instance_connect_port(H.inst, SB_PORT_CONTROL, H.control);
	lilv_instance_connect_port(H.inst, SB_PORT_NOTIFY, H.notify);
	for (uint32_t p = SB_PORT_RECORD; p <= SB_PORT_JOBS_DONE_OUT; p++)
		lilv_instance_connect_port(H.inst, p, &H.ctl[p]);
	lilv_instance_connect_port(H.inst, SB_PORT_AUDIO_IN_1, H.in[0]);
	lilv_instance_connect_port(H.inst, SB_PORT_AUDIO_IN_1 + 1, H.in[1]);
	lilv_instance_connect_port(H.inst, SB_PORT_AUDIO_OUT_1_STEREO, H.out[0]);
	lilv_instance_connect_port(H.inst, SB_PORT_AUDIO_OUT_2_STEREO, H.out[1]);
	/* the freewheel input and the controls after the audio ports (guitar, piano, time left,
	 * precision) */
	for (uint32_t p = SB_PORT_FREEWHEEL_STEREO; p < SB_N_PORTS_ALL_STEREO; p++)
		lilv_instance_connect_port(H.inst, p, &H.ctl[p]);
	lilv_instance_activate(H.inst);

	/* the host's window, the UI's parent */
	H.ui_w = 400;
	H.ui_h = 300;
	H.win = XCreateSimpleWindow(H.dpy, DefaultRootWindow(H.dpy), 0, 0, (unsigned)H.ui_w,
	                            (unsigned)H.ui_h, 0, 0, 0x808080);
	XStoreName(H.dpy, H.win, "Stembridge test host");
	XMapRaised(H.dpy, H.win);
	XSync(H.dpy, False);

	/* the UI, through suil, with what Ardour and jalv give it */
	LilvUIs *uis = lilv_plugin_get_uis(H.plugin);
	LilvNode *x11 = lilv_new_uri(H.world, LV2_UI__X11UI);
	const LilvUI *ui = NULL;
	LILV_FOREACH (uis, i, uis)
		if (lilv_ui_is_a(lilv_uis_get(uis, i), x11))
			ui = lilv_uis_get(uis, i);
	if (!ui) {
		fprintf(stderr, "ui_host: the plugin names no X11 UI\n");
		return 1;
	}
	SuilHost *sh = suil_host_new(ui_write, ui_index, NULL, NULL);
	float rate = (float)RATE;
	LV2_Options_Option options[] = {
		{LV2_OPTIONS_INSTANCE, 0, map_uri(NULL, "http://lv2plug.in/ns/ext/parameters#sampleRate"),
		 sizeof(float), H.atom_Float, &rate},
		{LV2_OPTIONS_INSTANCE, 0, map_uri(NULL, LV2_UI__scaleFactor), sizeof(float), H.atom_Float,
		 &scale},
		{LV2_OPTIONS_INSTANCE, 0, 0, 0, 0, NULL},
	};
	if (no_scale) /* the list ends before the scale factor */
		memset(&options[1], 0, sizeof options[1]);
	LV2_Feature parent_f = {LV2_UI__parent, (void *)(uintptr_t)H.win};
	LV2_Feature options_f = {LV2_OPTIONS__options, options};
	LV2_Feature idle_f = {LV2_UI__idleInterface, NULL};
	const LV2_Feature *ufeatures[] = {&map_f, &unmap_f, &log_f, &parent_f, &options_f, &idle_f,
	                                  NULL};
	char *bundle = lilv_file_uri_parse(lilv_node_as_uri(lilv_ui_get_bundle_uri(ui)), NULL);
	char *binary = lilv_file_uri_parse(lilv_node_as_uri(lilv_ui_get_binary_uri(ui)), NULL);
	H.ui = suil_instance_new(sh, NULL, LV2_UI__X11UI, SB_URI_STEREO,
	                         lilv_node_as_uri(lilv_ui_get_uri(ui)), LV2_UI__X11UI, bundle, binary,
	                         ufeatures);
	lilv_free(bundle);
	lilv_free(binary);
	if (!H.ui) {
		fprintf(stderr, "ui_host: suil could not instantiate the UI\n");
		return 1;
	}
	/* the host's window takes the UI window's size (what suil's X11 embedding reads) */
	H.ui_window = (Window)(uintptr_t)suil_instance_get_widget(H.ui);
	XWindowAttributes wa;
	if (H.ui_window && XGetWindowAttributes(H.dpy, H.ui_window, &wa)) {
		H.ui_w = wa.width;
		H.ui_h = wa.height;
		XResizeWindow(H.dpy, H.win, (unsigned)H.ui_w, (unsigned)H.ui_h);
		/* and follows it when the UI resizes itself (its zoom), as suil's X11 wrappers size
		 * their socket from the plugin's window */
		XSelectInput(H.dpy, H.ui_window, StructureNotifyMask);
		XFlush(H.dpy);
	}
	const LV2UI_Idle_Interface *idle =
		suil_instance_extension_data(H.ui, LV2_UI__idleInterface);
	if (!idle) {
		fprintf(stderr, "ui_host: the UI has no idle interface\n");
		return 1;
	}

	pthread_t audio;
	pthread_create(&audio, NULL, audio_main, NULL);
	int frames = 0;
	while (!atomic_load(&H.quit)) {
		do_work();
		deliver_to_ui();
		if (idle->idle(suil_instance_get_handle(H.ui)))
			break;
		while (XPending(H.dpy)) {
			XEvent ev;
			XNextEvent(H.dpy, &ev);
			if (ev.type == SelectionNotify)
				clipboard_answer(&ev.xselection);
			if (ev.type == ConfigureNotify && ev.xconfigure.window == H.ui_window &&
			    (ev.xconfigure.width != H.ui_w || ev.xconfigure.height != H.ui_h)) {
				H.ui_w = ev.xconfigure.width;
				H.ui_h = ev.xconfigure.height;
				XResizeWindow(H.dpy, H.win, (unsigned)H.ui_w, (unsigned)H.ui_h);
			}
		}
		if (++frames == 20) {
			printf("READY\n");
			fflush(stdout);
		}
		/* commands: read() what is there, run each complete line (no stdio buffering, so
		 * poll() sees every line) */
		static char line[4096];
		static size_t have;
		struct pollfd pfd = {0, POLLIN, 0};
		if (poll(&pfd, 1, 15) > 0) {
			ssize_t r = read(0, line + have, sizeof line - 1 - have);
			if (r <= 0)
				break;
			have += (size_t)r;
			line[have] = '\0';
			char *nl;
			while ((nl = strchr(line, '\n'))) {
				*nl = '\0';
				command(line);
				have -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, have + 1);
			}
			if (have == sizeof line - 1)
				have = 0; /* a line longer than any command: drop it */
		}
	}
	atomic_store(&H.quit, 1);
	pthread_join(audio, NULL);
	suil_instance_free(H.ui);
	suil_host_free(sh);
	lilv_uis_free(uis);
	lilv_node_free(x11);
	lilv_instance_deactivate(H.inst);
	lilv_instance_free(H.inst);
	XDestroyWindow(H.dpy, H.win);
	XCloseDisplay(H.dpy);
	lilv_world_free(H.world);
	free(H.control);
	free(H.notify);
	free(H.pending);
	free(H.to_ui);
	free(H.batch);
	return 0;
}
