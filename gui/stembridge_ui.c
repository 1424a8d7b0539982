/* Stembridge's LV2 UI: plain Xlib + cairo (as x42's robtk), embedded in the host's window
 * (ui:parent), so it works in every X11 host through suil.
 *
 * It talks to the plugin only through ports and atoms (the URIs in plugin/uris.h): control
 * ports it writes with write_function (Audition included: the S and M buttons set the control
 * the plugin reads), patch:Set for installModel and uiScale, a patch:Get when it opens, and the
 * messages the plugin sends on its notify port: patch:Set for writable properties, patch:Put for
 * read-only ones (deviceList, deviceInUse, stems, stemViews, takeWave, manifest, lastError,
 * modelNotice, jobTake, queueAhead, ...). Its size is its window's (XSizeHints), not the
 * deprecated ui:resize; its scale the zoom chosen in it (saved with the session through
 * uiScale), else the host's ui:scaleFactor, else Xft.dpi.
 *
 * What it shows is computed by the plain C units (ui_status, ui_labels, ui_layout), drawn by
 * ui_draw.c into a back buffer (ui_x11.c) and shown whole. Every call here runs on the host's
 * UI thread; idle() only drains pending X events (XPending never blocks) and redraws.
 */
/* LV2's headers before X11's, whose Bool macro would break the forge's field of that name */
#include <lv2/atom/atom.h>
#include <lv2/atom/forge.h>
#include <lv2/atom/util.h>
#include <lv2/options/options.h>
#include <lv2/patch/patch.h>
#include <lv2/ui/ui.h>
#include <lv2/urid/urid.h>

#include "ui_content.h"
#include "ui_draw.h"
#include "ui_labels.h"
#include "ui_layout.h"
#include "ui_logic.h"
#include "ui_messages.h"
#include "ui_status.h"
#include "ui_x11.h"

#include "../plugin/uris.h"

#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/keysym.h>
#include <cairo.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOOLTIP_DELAY_S 0.5
#define NOTE_S 4.0 /* how long "Copied" and a note stay */

typedef struct {
	LV2UI_Write_Function write;
	LV2UI_Controller controller;
	LV2_URID_Map* map;
	sbui_uris u;
	LV2_Atom_Forge forge;

	Display* dpy;
	Window win;
	sbui_x11 x;
	cairo_surface_t* measure_surface;
	cairo_t* measure;
	int width, height;        /* pixels */
	double host_scale, xft_dpi, scale;
	const char* scale_source;
	bool dirty, closed;

	sbui_model model;
	int channels;             /* 1 or 2: where the guitar and piano ports are */
	float ports[SB_N_PORTS_ALL_STEREO];

	/* what is shown, where, as drawn */
	sbui_shown shown;
	sbui_layout layout;
	sbui_view view;
	sbui_textlog log;
	char tip[1024];             /* the tooltip shown */
	char described[65536];      /* the window's description, as last made (publish) */

	/* the pointer, the keyboard, the list, the tooltip, notes */
	int hover, focus;
	bool focus_visible;
	double mouse_x, mouse_y;  /* unscaled */
	double hover_since;
	bool tip_shown;
	bool popup_open;
	int popup_hover;
	double copied_until, note_until;
	char note[SBUI_TEXT];
} sb_ui;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- talking to the plugin ---- */

static void write_port(sb_ui* ui, uint32_t port, float v)
{
	ui->ports[port] = v;
	sbui_set_port(&ui->model, port, v);
	ui->write(ui->controller, port, sizeof v, 0, &v);
	ui->dirty = true;
}

/* A patch:Set on the control port: installModel (the download runs on the plugin's side, off
 * the audio thread) or uiScale (saved with the session). */
static void send_set(sb_ui* ui, LV2_URID key, const char* text, const float* number)
{
	uint8_t buf[256];
	lv2_atom_forge_set_buffer(&ui->forge, buf, sizeof buf);
	LV2_Atom_Forge_Frame frame;
	LV2_Atom* msg = (LV2_Atom*)lv2_atom_forge_object(&ui->forge, &frame, 0, ui->u.patch_Set);
	lv2_atom_forge_key(&ui->forge, ui->u.patch_property);
	lv2_atom_forge_urid(&ui->forge, key);
	lv2_atom_forge_key(&ui->forge, ui->u.patch_value);
	if (text)
		lv2_atom_forge_string(&ui->forge, text, (uint32_t)strlen(text));
	else
		lv2_atom_forge_float(&ui->forge, *number);
	lv2_atom_forge_pop(&ui->forge, &frame);
	ui->write(ui->controller, SB_PORT_CONTROL, lv2_atom_total_size(msg),
	          ui->u.atom_eventTransfer, msg);
}

/* Asks the plugin for every property (answered with patch:Set and patch:Put messages). */
static void send_get(sb_ui* ui)
{
	uint8_t buf[128];
	lv2_atom_forge_set_buffer(&ui->forge, buf, sizeof buf);
	LV2_Atom_Forge_Frame frame;
	LV2_Atom* msg = (LV2_Atom*)lv2_atom_forge_object(&ui->forge, &frame, 0, ui->u.patch_Get);
	lv2_atom_forge_pop(&ui->forge, &frame);
	ui->write(ui->controller, SB_PORT_CONTROL, lv2_atom_total_size(msg),
	          ui->u.atom_eventTransfer, msg);
}

static const char* const stem_keys[SBUI_STEM_KINDS] = {"vocals", "drums", "bass", "other",
                                                       "guitar", "piano"};

/* Everything the window says now, then where it goes. */
static void build(sb_ui* ui)
{
	const double t = now_s();
	const sbui_show_in in = {ui->ports, ui->channels, ui->width / ui->scale, ui->scale,
	                         t < ui->copied_until, t < ui->note_until ? ui->note : NULL};
	sbui_shown_make(&ui->model, &in, &ui->shown);
	const sbui_measure me = {sbui_draw_measure, ui->measure};
	sbui_layout_make(&me, &ui->shown.content, ui->width / ui->scale, ui->height / ui->scale,
	                 &ui->layout);
	if (ui->focus >= 0 && !ui->layout.placed[ui->focus])
		ui->focus = -1;
}

/* The device list's entries, where it opens. */
static void build_popup(sb_ui* ui)
{
	sbui_view* v = &ui->view;
	v->popup_open = ui->popup_open;
	if (!ui->popup_open)
		return;
	const sbui_model* m = &ui->model;
	v->popup_n = sbui_device_choices(m, v->popup_values);
	for (int i = 0; i < v->popup_n; i++) {
		sbui_device_entry(m, v->popup_values[i], v->popup_title[i], SBUI_TEXT, v->popup_detail[i],
		                  SBUI_TEXT);
		v->popup_chosen[i] = lrintf(v->popup_values[i]) == lrintf(m->device_port);
		v->popup_in_use[i] = sbui_device_entry_in_use(m, v->popup_values[i]);
	}
	v->popup = sbui_popup_place(ui->layout.r[SBUI_W_DEVICE], v->popup_n, ui->layout.width,
	                            ui->layout.height, &v->popup_entry_h);
	v->popup_hover = ui->popup_hover;
}

/* ---- the window's own description, for tests and tools ---- */

/* In window pixels: each part, each text with its box and ink, the focus, the list, the
 * tooltip (_STEMBRIDGE_LAYOUT). */
static void name_of(const sb_ui* ui, int w, char* out, int size)
{
	const int row = w >= SBUI_W_ROW0 && w < SBUI_W_MORE ? (w - SBUI_W_ROW0) / 5 : 0;
	const int s = ui->shown.row_stem[row];
	sbui_widget_name(w, s >= 0 ? stem_keys[s] : NULL, out, size);
}

static void publish(sb_ui* ui)
{
	char* buf = ui->described;
	const size_t cap = sizeof ui->described;
	size_t at = 0;
	const double s = ui->scale;
	char name[64];
#define OUT(...)                                                                         \
	do {                                                                                 \
		const int n_ = snprintf(buf + at, cap - at, __VA_ARGS__);                        \
		if (n_ > 0 && (size_t)n_ < cap - at)                                             \
			at += (size_t)n_;                                                            \
	} while (0)
	OUT("window %d %d scale %.3f source %s\n", ui->width, ui->height, s, ui->scale_source);
	name_of(ui, ui->focus, name, sizeof name);
	OUT("focus %s %d\n", ui->focus >= 0 ? name : "none", ui->focus_visible);
	if (ui->view.popup_open) {
		const sbui_rect r = ui->view.popup;
		OUT("popup %.0f %.0f %.0f %.0f %d %.0f\n", r.x * s, r.y * s, r.w * s, r.h * s,
		    ui->view.popup_n, ui->view.popup_entry_h * s);
	}
	if (ui->view.tip) {
		const sbui_rect r = ui->view.tip_rect;
		OUT("tip %.0f %.0f %.0f %.0f\n", r.x * s, r.y * s, r.w * s, r.h * s);
	}
	for (int w = 0; w < SBUI_W_COUNT; w++) {
		if (!ui->layout.placed[w])
			continue;
		const sbui_rect r = ui->layout.r[w];
		name_of(ui, w, name, sizeof name);
		OUT("w %s %.0f %.0f %.0f %.0f %d\n", name, r.x * s, r.y * s, r.w * s, r.h * s,
		    ui->view.on[w]);
	}
	for (int i = 0; i < ui->log.n; i++) {
		const sbui_text_entry* e = &ui->log.e[i];
		name_of(ui, e->widget, name, sizeof name);
		OUT("t %s %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %s\n", name, e->box.x * s, e->box.y * s,
		    e->box.w * s, e->box.h * s, e->ink.x * s, e->ink.y * s, e->ink.w * s, e->ink.h * s,
		    e->text);
	}
#undef OUT
	sbui_x11_publish(&ui->x, buf);
}

/* ---- drawing ---- */

static void draw(sb_ui* ui)
{
	build(ui);
	build_popup(ui);
	cairo_surface_t* back = sbui_x11_back(&ui->x, ui->width, ui->height);
	if (!back)
		return;
	sbui_view* v = &ui->view;
	v->m = &ui->model;
	v->status = &ui->shown.status;
	v->c = &ui->shown.content;
	memcpy(v->on, ui->shown.on, sizeof v->on);
	memcpy(v->on_rgb, ui->shown.on_rgb, sizeof v->on_rgb);
	v->fallback = ui->shown.fallback;
	v->notice_rgb = ui->shown.notice_rgb;
	v->folder_note = ui->shown.folder_note;
	v->l = &ui->layout;
	v->scale = ui->scale;
	memcpy(v->row_stem, ui->shown.row_stem, sizeof v->row_stem);
	v->hover = ui->hover;
	v->focus = ui->focus;
	v->focus_visible = ui->focus_visible;
	char* tip = ui->tip;
	v->tip = NULL;
	if (ui->tip_shown && !ui->popup_open) {
		const int row = ui->hover >= SBUI_W_ROW0 && ui->hover < SBUI_W_MORE
		                    ? (ui->hover - SBUI_W_ROW0) / 5
		                    : 0;
		sbui_tooltip(&ui->model, ui->hover, ui->shown.row_stem[row], ui->shown.row_path[row], ui->scale,
		             ui->scale_source, tip, (int)sizeof ui->tip);
		if (tip[0]) {
			v->tip = tip;
			v->tip_x = ui->mouse_x;
			v->tip_y = ui->mouse_y;
		}
	}
	cairo_t* cr = cairo_create(back);
	cairo_scale(cr, ui->scale, ui->scale);
	sbui_draw(cr, v, &ui->log);
	cairo_destroy(cr);
	sbui_x11_show(&ui->x);
	publish(ui);
	ui->dirty = false;
}

/* ---- the window's size and scale ---- */

static void size_hints(sb_ui* ui)
{
	XSizeHints hints;
	memset(&hints, 0, sizeof hints);
	hints.flags = PMinSize | PBaseSize;
	hints.min_width = (int)lrint(SBUI_MIN_W * ui->scale);
	hints.min_height = (int)lrint(SBUI_MIN_H * ui->scale);
	hints.base_width = (int)lrint(SBUI_BASE_W * ui->scale);
	hints.base_height = (int)lrint(SBUI_BASE_H * ui->scale);
	XSetWMNormalHints(ui->dpy, ui->win, &hints);
}

/* The scale the window's choices give now; a change resizes the window to keep its layout. */
static void apply_scale(sb_ui* ui)
{
	const double s = sbui_scale_pick(ui->model.ui_scale, ui->host_scale, ui->xft_dpi,
	                                 &ui->scale_source);
	if (fabs(s - ui->scale) < 1e-6)
		return;
	const double uw = ui->width / ui->scale, uh = ui->height / ui->scale;
	ui->scale = s;
	size_hints(ui);
	XResizeWindow(ui->dpy, ui->win, (unsigned)lrint(uw * s), (unsigned)lrint(uh * s));
	XFlush(ui->dpy);
	ui->dirty = true;
}

static void set_zoom(sb_ui* ui, float z)
{
	ui->model.ui_scale = z;
	send_set(ui, ui->u.ui_scale, NULL, &z);
	apply_scale(ui);
	ui->dirty = true;
}

/* ---- input ---- */

static int hit_at(const sb_ui* ui, double x, double y)
{
	for (int i = 0; i < SBUI_W_COUNT; i++) {
		if (!ui->layout.placed[i])
			continue;
		const bool pointable = sbui_widget_is_button(i) || i == SBUI_W_LANE ||
		                       (i >= SBUI_W_ROW0 && i < SBUI_W_MORE);
		const sbui_rect r = ui->layout.r[i];
		if (pointable && x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h)
			return i;
	}
	return -1;
}

static int popup_entry_at(const sb_ui* ui, double x, double y)
{
	const sbui_rect r = ui->view.popup;
	if (!ui->popup_open || x < r.x || x >= r.x + r.w || y < r.y + 4)
		return -1;
	const int i = (int)((y - r.y - 4) / ui->view.popup_entry_h);
	return i >= 0 && i < ui->view.popup_n ? i : -1;
}

static void toggle(sb_ui* ui, uint32_t port)
{
	write_port(ui, port, ui->ports[port] > 0.5f ? 0.0f : 1.0f);
}

static void audition(sb_ui* ui, int row, bool mute)
{
	if (row < 0 || row >= SBUI_ROWS || ui->shown.row_stem[row] < 0)
		return;
	write_port(ui, SB_PORT_AUDITION,
	           sbui_audition_click(ui->ports[SB_PORT_AUDITION], ui->shown.row_stem[row], mute));
}

static void open_popup(sb_ui* ui, bool open)
{
	ui->popup_open = open;
	ui->popup_hover = -1;
	if (open) { /* start on the chosen one, for the keyboard */
		float values[SBUI_POPUP_MAX];
		const int n = sbui_device_choices(&ui->model, values);
		for (int i = 0; i < n; i++)
			if (lrintf(values[i]) == lrintf(ui->model.device_port))
				ui->popup_hover = i;
	}
	ui->tip_shown = false;
	ui->dirty = true;
}

static void choose_popup(sb_ui* ui, int i)
{
	float values[SBUI_POPUP_MAX];
	const int n = sbui_device_choices(&ui->model, values);
	if (i >= 0 && i < n)
		write_port(ui, SB_PORT_DEVICE, values[i]);
	open_popup(ui, false);
}

static void copy_path(sb_ui* ui)
{
	if (sbui_x11_copy(&ui->x, ui->shown.folder))
		ui->copied_until = now_s() + NOTE_S;
	ui->dirty = true;
}

static void open_folder(sb_ui* ui)
{
	char why[SBUI_TEXT];
	if (!sbui_x11_open_folder(ui->shown.folder, why, sizeof why)) {
		/* no file manager to hand: the path goes to the clipboard, and the window says so */
		snprintf(ui->note, sizeof ui->note, "%.200s: the path is copied instead", why);
		ui->note_until = now_s() + NOTE_S;
		copy_path(ui);
	}
	ui->dirty = true;
}

/* A part pressed: button 1 left, 3 right, 4/5 the wheel up/down; from the keyboard, 1. */
static void activate(sb_ui* ui, int id, unsigned button)
{
	const int dir = (button == 1 || button == 5) ? +1 : (button == 3 || button == 4) ? -1 : 0;
	if (dir == 0)
		return;
	if (id >= SBUI_W_TOGGLE0 && id < SBUI_W_TOGGLE0 + SBUI_ROWS) {
		if (button == 1)
			toggle(ui, sb_port_stem(ui->channels, id - SBUI_W_TOGGLE0));
		return;
	}
	if (id >= SBUI_W_ROW0 && id < SBUI_W_MORE) {
		const int part = (id - SBUI_W_ROW0) % 5;
		if (button == 1 && (part == SBUI_ROW_SOLO || part == SBUI_ROW_MUTE))
			audition(ui, (id - SBUI_W_ROW0) / 5, part == SBUI_ROW_MUTE);
		return;
	}
	switch (id) {
	case SBUI_W_DEVICE:
		if (button == 1)
			open_popup(ui, true);
		else
			write_port(ui, SB_PORT_DEVICE, sbui_device_step(&ui->model, dir));
		break;
	case SBUI_W_ZOOM: set_zoom(ui, (float)sbui_zoom_step(ui->model.ui_scale, dir)); break;
	case SBUI_W_RECORD: if (button == 1) toggle(ui, SB_PORT_RECORD); break;
	case SBUI_W_MODE: if (button == 1 || button == 3) toggle(ui, SB_PORT_MODE); break;
	case SBUI_W_PRECISION:
		if (button == 1 || button == 3) toggle(ui, sb_port_precision(ui->channels));
		break;
	case SBUI_W_KEEP: if (button == 1) toggle(ui, sb_port_keep_take(ui->channels)); break;
	case SBUI_W_MODEL:
		write_port(ui, SB_PORT_MODEL, sbui_model_step(ui->ports[SB_PORT_MODEL], dir));
		break;
	case SBUI_W_INSTALL: {
		char name[64];
		if (button == 1 && sbui_model_install_offer(&ui->model, name, sizeof name, NULL)) {
			send_set(ui, ui->u.install_model, name, NULL);
			snprintf(ui->model.install_status, sizeof ui->model.install_status,
			         "%s: waiting to install", name);
			ui->dirty = true;
		}
		break;
	}
	case SBUI_W_OPEN: if (button == 1) open_folder(ui); break;
	case SBUI_W_COPY: if (button == 1) copy_path(ui); break;
	default: break;
	}
}

/* The parts the keyboard reaches, in reading order. */
static int focus_next(const sb_ui* ui, int from, int dir)
{
	static const int order[] = {SBUI_W_DEVICE, SBUI_W_RECORD, SBUI_W_MODE, SBUI_W_PRECISION,
	                            SBUI_W_KEEP, SBUI_W_MODEL, SBUI_W_INSTALL};
	int list[64], n = 0;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
		list[n++] = order[i];
	for (int s = 0; s < SBUI_ROWS; s++)
		list[n++] = SBUI_W_TOGGLE0 + s;
	list[n++] = SBUI_W_OPEN;
	list[n++] = SBUI_W_COPY;
	for (int k = 0; k < SBUI_ROWS; k++) {
		list[n++] = sbui_row_part(k, SBUI_ROW_SOLO);
		list[n++] = sbui_row_part(k, SBUI_ROW_MUTE);
	}
	list[n++] = SBUI_W_ZOOM;
	int at = -1;
	for (int i = 0; i < n; i++)
		if (list[i] == from)
			at = i;
	for (int step = 1; step <= n; step++) {
		const int i = at < 0 ? (dir > 0 ? step - 1 : n - step)
		                     : ((at + dir * step) % n + n) % n;
		if (ui->layout.placed[list[i]])
			return list[i];
	}
	return -1;
}

static void on_key(sb_ui* ui, XKeyEvent* ev)
{
	const KeySym k = XLookupKeysym(ev, 0);
	const bool shift = ev->state & ShiftMask, ctrl = ev->state & ControlMask;
	ui->focus_visible = true;
	ui->tip_shown = false;
	ui->dirty = true;
	if (ui->popup_open) {
		const int n = ui->view.popup_n;
		if (k == XK_Escape)
			open_popup(ui, false);
		else if (k == XK_Down || k == XK_Tab)
			ui->popup_hover = n ? (ui->popup_hover + 1) % n : -1;
		else if (k == XK_Up || k == XK_ISO_Left_Tab)
			ui->popup_hover = n ? (ui->popup_hover - 1 + n) % n : -1;
		else if (k == XK_Return || k == XK_KP_Enter || k == XK_space)
			choose_popup(ui, ui->popup_hover);
		return;
	}
	if (ctrl && (k == XK_plus || k == XK_equal || k == XK_KP_Add)) {
		set_zoom(ui, (float)sbui_zoom_step(ui->model.ui_scale > 0 ? ui->model.ui_scale : 1.0, +1));
	} else if (ctrl && (k == XK_minus || k == XK_KP_Subtract)) {
		const double z = ui->model.ui_scale > 0 ? ui->model.ui_scale : ui->scale;
		set_zoom(ui, z > 1.0 ? (float)sbui_zoom_step(z, -1) : 1.0f);
	} else if (ctrl && (k == XK_0 || k == XK_KP_0)) {
		set_zoom(ui, 0.0f);
	} else if (k == XK_Tab || k == XK_ISO_Left_Tab) {
		ui->focus = focus_next(ui, ui->focus, (k == XK_ISO_Left_Tab || shift) ? -1 : +1);
	} else if (k == XK_space || k == XK_Return || k == XK_KP_Enter) {
		if (ui->focus >= 0)
			activate(ui, ui->focus, 1);
	} else if ((k == XK_Left || k == XK_Right) &&
	           (ui->focus == SBUI_W_DEVICE || ui->focus == SBUI_W_MODEL || ui->focus == SBUI_W_ZOOM)) {
		activate(ui, ui->focus, k == XK_Right ? 5 : 4);
	} else if (k == XK_Down && ui->focus == SBUI_W_DEVICE) {
		open_popup(ui, true);
	} else if (k == XK_r || k == XK_R) {
		toggle(ui, SB_PORT_RECORD);
	} else if (k >= XK_1 && k <= XK_6) {
		audition(ui, (int)(k - XK_1), shift);
	} else if (k == XK_0 || k == XK_Escape) {
		if (ui->ports[SB_PORT_AUDITION] != SB_AUDITION_OFF)
			write_port(ui, SB_PORT_AUDITION, SB_AUDITION_OFF);
		else if (k == XK_Escape)
			ui->focus_visible = false;
	}
}

static int ignore_x_error(Display* d, XErrorEvent* e)
{
	(void)d;
	(void)e;
	return 0;
}

/* Keys come to the window once it is clicked (hosts that forward keys, as suil's GTK wrappers
 * do, need nothing). A window not viewable yet would be an X error: ignored, not fatal. */
static void take_focus(sb_ui* ui)
{
	XWindowAttributes wa;
	if (!XGetWindowAttributes(ui->dpy, ui->win, &wa) || wa.map_state != IsViewable)
		return;
	XSync(ui->dpy, False);
	int (*old)(Display*, XErrorEvent*) = XSetErrorHandler(ignore_x_error);
	XSetInputFocus(ui->dpy, ui->win, RevertToParent, CurrentTime);
	XSync(ui->dpy, False);
	XSetErrorHandler(old);
}

static void on_press(sb_ui* ui, const XButtonEvent* ev)
{
	const double x = ev->x / ui->scale, y = ev->y / ui->scale;
	take_focus(ui);
	ui->focus_visible = false;
	ui->tip_shown = false;
	if (ui->popup_open) {
		const int i = popup_entry_at(ui, x, y);
		if (i >= 0 && ev->button == 1)
			choose_popup(ui, i);
		else if (i < 0)
			open_popup(ui, false);
		return;
	}
	const int id = hit_at(ui, x, y);
	ui->focus = id >= 0 && sbui_widget_is_button(id) ? id : -1;
	activate(ui, id, ev->button);
	ui->dirty = true;
}

static void on_motion(sb_ui* ui, double x, double y)
{
	ui->mouse_x = x;
	ui->mouse_y = y;
	if (ui->popup_open) {
		const int i = popup_entry_at(ui, x, y);
		if (i != ui->popup_hover && i >= 0) {
			ui->popup_hover = i;
			ui->dirty = true;
		}
		return;
	}
	const int h = hit_at(ui, x, y);
	if (h != ui->hover) {
		ui->hover = h;
		ui->hover_since = now_s();
		if (ui->tip_shown) {
			ui->tip_shown = false;
			ui->dirty = true;
		}
		ui->dirty = true;
	}
}

static void resize(sb_ui* ui, int w, int h)
{
	if (w == ui->width && h == ui->height)
		return;
	ui->width = w;
	ui->height = h;
	ui->dirty = true;
}

static void handle_events(sb_ui* ui)
{
	while (XPending(ui->dpy) > 0) {
		XEvent ev;
		XNextEvent(ui->dpy, &ev);
		if (sbui_x11_selection_event(&ui->x, &ev))
			continue;
		switch (ev.type) {
		case Expose:
			/* the last frame again, whole; a new one only when something changed */
			if (ev.xexpose.count == 0 && !ui->dirty)
				sbui_x11_show(&ui->x);
			break;
		case ConfigureNotify: resize(ui, ev.xconfigure.width, ev.xconfigure.height); break;
		case ButtonPress: on_press(ui, &ev.xbutton); break;
		case MotionNotify: on_motion(ui, ev.xmotion.x / ui->scale, ev.xmotion.y / ui->scale); break;
		case LeaveNotify:
			ui->hover = -1;
			ui->tip_shown = false;
			ui->dirty = true;
			break;
		case KeyPress: on_key(ui, &ev.xkey); break;
		default: break;
		}
	}
	/* a tooltip after the pointer rested half a second */
	if (!ui->tip_shown && ui->hover >= 0 && !ui->popup_open &&
	    now_s() - ui->hover_since >= TOOLTIP_DELAY_S) {
		ui->tip_shown = true;
		ui->dirty = true;
	}
	/* "Copied" and notes go after a while */
	const double t = now_s();
	if ((ui->copied_until > 0 && t >= ui->copied_until) || (ui->note_until > 0 && t >= ui->note_until)) {
		if (t >= ui->copied_until)
			ui->copied_until = 0;
		if (t >= ui->note_until)
			ui->note_until = 0;
		ui->dirty = true;
	}
}

/* ---- LV2 UI ---- */

static LV2UI_Handle instantiate(const LV2UI_Descriptor* desc, const char* plugin_uri,
                                const char* bundle_path, LV2UI_Write_Function write,
                                LV2UI_Controller controller, LV2UI_Widget* widget,
                                const LV2_Feature* const* features)
{
	(void)desc;
	(void)bundle_path;
	if (strncmp(plugin_uri, SB_URI, strlen(SB_URI)) != 0)
		return NULL;
	sb_ui* ui = calloc(1, sizeof *ui);
	if (!ui)
		return NULL;
	ui->write = write;
	ui->controller = controller;
	ui->hover = ui->focus = ui->popup_hover = -1;
	Window parent = 0;
	const LV2_Options_Option* options = NULL;
	for (int i = 0; features && features[i]; i++) {
		if (!strcmp(features[i]->URI, LV2_URID__map)) ui->map = features[i]->data;
		else if (!strcmp(features[i]->URI, LV2_UI__parent)) parent = (Window)(uintptr_t)features[i]->data;
		else if (!strcmp(features[i]->URI, LV2_OPTIONS__options)) options = features[i]->data;
	}
	if (!ui->map) {
		fprintf(stderr, "stembridge UI: the host does not provide urid:map\n");
		free(ui);
		return NULL;
	}
	sbui_uris_map(&ui->u, ui->map);
	lv2_atom_forge_init(&ui->forge, ui->map);
	double rate = 48000.0;
	if (options) {
		LV2_URID scale = ui->map->map(ui->map->handle, LV2_UI__scaleFactor);
		LV2_URID srate = ui->map->map(ui->map->handle, "http://lv2plug.in/ns/ext/parameters#sampleRate");
		for (const LV2_Options_Option* o = options; o->key; o++) {
			if (o->key == scale && o->type == ui->u.atom_Float) {
				const float f = *(const float*)o->value;
				if (f >= 0.5f && f <= 4.0f)
					ui->host_scale = f;
			} else if (o->key == srate && o->type == ui->u.atom_Float) {
				rate = *(const float*)o->value;
			}
		}
	}
	sbui_model_init(&ui->model, rate);
	ui->channels = strcmp(plugin_uri, SB_URI_MONO) == 0 ? 1 : 2;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		ui->ports[sb_port_stem(ui->channels, s)] = 1.0f;
	ui->ports[SB_PORT_MODEL] = (float)SB_MODEL_AUTO;

	ui->dpy = XOpenDisplay(NULL);
	if (!ui->dpy) {
		fprintf(stderr, "stembridge UI: cannot open the X display\n");
		free(ui);
		return NULL;
	}
	ui->xft_dpi = sbui_x11_xft_dpi(ui->dpy);
	ui->scale = sbui_scale_pick(0, ui->host_scale, ui->xft_dpi, &ui->scale_source);
	const int screen = DefaultScreen(ui->dpy);
	if (!parent)
		parent = RootWindow(ui->dpy, screen);
	ui->width = (int)lrint(SBUI_BASE_W * ui->scale);
	ui->height = (int)lrint(SBUI_BASE_H * ui->scale);
	ui->win = XCreateSimpleWindow(ui->dpy, parent, 0, 0, (unsigned)ui->width,
	                              (unsigned)ui->height, 0, 0, 0x1d2024);
	XSelectInput(ui->dpy, ui->win, ExposureMask | StructureNotifyMask | ButtonPressMask |
	                                   PointerMotionMask | LeaveWindowMask | KeyPressMask);
	size_hints(ui);
	XStoreName(ui->dpy, ui->win, "Stembridge");
	ui->measure_surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
	ui->measure = cairo_create(ui->measure_surface);
	sbui_draw_font(ui->measure);
	if (!sbui_x11_init(&ui->x, ui->dpy, ui->win, ui->width, ui->height)) {
		fprintf(stderr, "stembridge UI: cannot make the window's back buffer\n");
		cairo_destroy(ui->measure);
		cairo_surface_destroy(ui->measure_surface);
		XDestroyWindow(ui->dpy, ui->win);
		XCloseDisplay(ui->dpy);
		free(ui);
		return NULL;
	}
	XMapRaised(ui->dpy, ui->win);
	XFlush(ui->dpy);
	*widget = (LV2UI_Widget)(uintptr_t)ui->win;
	ui->dirty = true;
	send_get(ui);
	return ui;
}

static void cleanup(LV2UI_Handle handle)
{
	sb_ui* ui = handle;
	sbui_x11_free(&ui->x);
	cairo_destroy(ui->measure);
	cairo_surface_destroy(ui->measure_surface);
	XDestroyWindow(ui->dpy, ui->win);
	XCloseDisplay(ui->dpy);
	free(ui);
}

static void port_event(LV2UI_Handle handle, uint32_t port, uint32_t size, uint32_t format,
                       const void* buffer)
{
	sb_ui* ui = handle;
	if (format == 0 && size == sizeof(float) && port < SB_N_PORTS_ALL_STEREO) {
		const float v = *(const float*)buffer;
		if (ui->ports[port] != v)
			ui->dirty = true;
		ui->ports[port] = v;
		sbui_set_port(&ui->model, port, v);
		if (port == sb_port_time_left(ui->channels))
			sbui_set_time_left(&ui->model, v);
	} else if (format == ui->u.atom_eventTransfer && size >= sizeof(LV2_Atom)) {
		const LV2_Atom* a = buffer;
		if (a->type == ui->u.atom_Object && lv2_atom_total_size(a) <= size) {
			const float zoom = ui->model.ui_scale;
			sbui_message_read(&ui->u, &ui->model, (const LV2_Atom_Object*)buffer);
			ui->dirty = true;
			if (ui->model.ui_scale != zoom) /* the session's zoom came back */
				apply_scale(ui);
		}
	}
}

static int ui_idle(LV2UI_Handle handle)
{
	sb_ui* ui = handle;
	if (ui->closed)
		return 1;
	handle_events(ui);
	if (ui->dirty)
		draw(ui);
	return 0;
}

static const void* extension_data(const char* uri)
{
	static const LV2UI_Idle_Interface idle = {ui_idle};
	if (!strcmp(uri, LV2_UI__idleInterface))
		return &idle;
	return NULL;
}

static const LV2UI_Descriptor descriptor = {SB_URI_UI, instantiate, cleanup, port_event,
                                            extension_data};

LV2_SYMBOL_EXPORT const LV2UI_Descriptor* lv2ui_descriptor(uint32_t index)
{
	return index == 0 ? &descriptor : NULL;
}
