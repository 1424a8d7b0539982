/* Stembridge's LV2 UI: plain Xlib + cairo (as x42's robtk), embedded in the host's window
 * (ui:parent), so it works in every X11 host through suil.
 *
 * It talks to the plugin only through ports and atoms (the URIs in plugin/uris.h): control
 * ports it writes with write_function, a patch:Get it sends on the control port when it opens,
 * and the messages the plugin sends on its notify port: patch:Set for writable properties,
 * patch:Put for read-only ones (deviceList, deviceInUse, stems, manifest, recordedFrames,
 * lastError). Its size is its window's (XSizeHints; the host embeds it through suil), not the
 * deprecated ui:resize. Every call here runs on the host's UI thread;
 * idle() only drains pending X events (XPending never blocks) and redraws, so the host's thread
 * is never held.
 */
#include "ui_logic.h"

#include "../plugin/uris.h"

#include <lv2/atom/atom.h>
#include <lv2/atom/forge.h>
#include <lv2/atom/util.h>
#include <lv2/options/options.h>
#include <lv2/patch/patch.h>
#include <lv2/ui/ui.h>
#include <lv2/urid/urid.h>

#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <cairo-xlib.h>
#include <cairo.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE_W 540
#define BASE_H 440

typedef struct {
	LV2_URID atom_eventTransfer, atom_Object, atom_Tuple, atom_String, atom_Path, atom_Long,
	    atom_Int, atom_Float, atom_URID, patch_Set, patch_Get, patch_Put, patch_body, patch_property,
	    patch_value, device_list,
	    device_in_use, stems, last_error, manifest, recorded_frames, dev_key, dev_name,
	    dev_platform, dev_type, dev_memory, dev_units, dev_driver, model_list, install_model,
	    install_status;
} ui_uris;

/* Clickable areas, in unscaled units, laid out by layout(). */
typedef enum {
	HIT_NONE = -1, HIT_DEVICE, HIT_RECORD, HIT_MODE, HIT_PRECISION, HIT_KEEP_TAKE, HIT_MODEL,
	HIT_INSTALL, HIT_STEM0, HIT_STEM1, HIT_STEM2, HIT_STEM3, HIT_STEM4, HIT_STEM5, HIT_COUNT
} hit_id;

typedef struct { double x, y, w, h; } rect;

typedef struct {
	LV2UI_Write_Function write;
	LV2UI_Controller controller;
	LV2_URID_Map* map;
	ui_uris u;
	LV2_Atom_Forge forge;

	Display* dpy;
	Window win;
	cairo_surface_t* surface;
	cairo_t* cr;
	int width, height;
	double scale;
	bool dirty;
	bool closed;

	sbui_model model;
	int channels;             /* 1 or 2: where the guitar and piano ports are */
	float ports[SB_N_PORTS_ALL_STEREO];
	rect hits[HIT_COUNT];
	int hover;                /* hit_id under the pointer */
	double mouse_x, mouse_y;  /* unscaled */
} sb_ui;

static const char* const stem_names[SB_PLUGIN_STEMS] = {"Vocals", "Drums", "Bass", "Other",
                                                         "Guitar", "Piano"};

static void map_uris(ui_uris* u, LV2_URID_Map* map)
{
#define M(f, uri) u->f = map->map(map->handle, uri)
	M(atom_eventTransfer, LV2_ATOM__eventTransfer);
	M(atom_Object, LV2_ATOM__Object);
	M(atom_Tuple, LV2_ATOM__Tuple);
	M(atom_String, LV2_ATOM__String);
	M(atom_Path, LV2_ATOM__Path);
	M(atom_Long, LV2_ATOM__Long);
	M(atom_Int, LV2_ATOM__Int);
	M(atom_Float, LV2_ATOM__Float);
	M(atom_URID, LV2_ATOM__URID);
	M(patch_Set, LV2_PATCH__Set);
	M(patch_Get, LV2_PATCH__Get);
	M(patch_Put, LV2_PATCH__Put);
	M(patch_body, LV2_PATCH__body);
	M(patch_property, LV2_PATCH__property);
	M(patch_value, LV2_PATCH__value);
	M(device_list, SB__deviceList);
	M(device_in_use, SB__deviceInUse);
	M(stems, SB__stems);
	M(last_error, SB__lastError);
	M(manifest, SB__manifest);
	M(recorded_frames, SB__recordedFrames);
	M(dev_key, SB__deviceKey);
	M(dev_name, SB__deviceName);
	M(dev_platform, SB__devicePlatform);
	M(dev_type, SB__deviceType);
	M(dev_memory, SB__deviceMemory);
	M(dev_units, SB__deviceUnits);
	M(dev_driver, SB__deviceDriver);
	M(model_list, SB__modelList);
	M(install_model, SB__installModel);
	M(install_status, SB__installStatus);
#undef M
}

/* ---- talking to the plugin ---- */

static void write_port(sb_ui* ui, uint32_t port, float v)
{
	ui->ports[port] = v;
	sbui_set_port(&ui->model, port, v);
	ui->write(ui->controller, port, sizeof v, 0, &v);
	ui->dirty = true;
}

/* Asks the plugin to install a model (patch:Set installModel): the download runs on the
 * plugin's side, off the audio thread; installStatus tells how it goes. */
static void send_install(sb_ui* ui, const char* name)
{
	uint8_t buf[256];
	lv2_atom_forge_set_buffer(&ui->forge, buf, sizeof buf);
	LV2_Atom_Forge_Frame frame;
	LV2_Atom* msg = (LV2_Atom*)lv2_atom_forge_object(&ui->forge, &frame, 0, ui->u.patch_Set);
	lv2_atom_forge_key(&ui->forge, ui->u.patch_property);
	lv2_atom_forge_urid(&ui->forge, ui->u.install_model);
	lv2_atom_forge_key(&ui->forge, ui->u.patch_value);
	lv2_atom_forge_string(&ui->forge, name, (uint32_t)strlen(name));
	lv2_atom_forge_pop(&ui->forge, &frame);
	ui->write(ui->controller, SB_PORT_CONTROL, lv2_atom_total_size(msg),
	          ui->u.atom_eventTransfer, msg);
}

/* Asks the plugin for every property (answered with patch:Set and patch:Put messages on notify). */
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

static bool is_text(const ui_uris* u, const LV2_Atom* a)
{
	return a && (a->type == u->atom_String || a->type == u->atom_Path);
}

static void copy_text(char* dst, const LV2_Atom* a)
{
	/* atom strings are NUL-terminated inside their size; do not trust it blindly */
	const char* s = (const char*)LV2_ATOM_BODY_CONST(a);
	sbui_set_text(dst, s, (int)strnlen(s, a->size));
}

static int64_t atom_number(const ui_uris* u, const LV2_Atom* a, int64_t fallback)
{
	if (!a)
		return fallback;
	if (a->type == u->atom_Long)
		return ((const LV2_Atom_Long*)a)->body;
	if (a->type == u->atom_Int)
		return ((const LV2_Atom_Int*)a)->body;
	if (a->type == u->atom_Float)
		return (int64_t)((const LV2_Atom_Float*)a)->body;
	return fallback;
}

static void read_device(sb_ui* ui, const LV2_Atom_Object* obj)
{
	const ui_uris* u = &ui->u;
	const LV2_Atom *key = NULL, *name = NULL, *platform = NULL, *type = NULL, *memory = NULL,
	               *units = NULL, *driver = NULL;
	lv2_atom_object_get(obj, u->dev_key, &key, u->dev_name, &name, u->dev_platform, &platform,
	                    u->dev_type, &type, u->dev_memory, &memory, u->dev_units, &units,
	                    u->dev_driver, &driver, 0);
	sbui_device d;
	memset(&d, 0, sizeof d);
	if (is_text(u, key)) copy_text(d.key, key);
	if (is_text(u, name)) copy_text(d.name, name);
	if (is_text(u, platform)) copy_text(d.platform, platform);
	if (is_text(u, type)) copy_text(d.type, type);
	if (is_text(u, driver)) copy_text(d.driver, driver);
	d.memory_bytes = atom_number(u, memory, -1);
	d.compute_units = (int)atom_number(u, units, -1);
	sbui_add_device(&ui->model, &d);
}

/* One property the plugin announced: a patch:Set's (writable properties) or one key of a
 * patch:Put's body (read-only ones). */
static void on_property(sb_ui* ui, LV2_URID key, const LV2_Atom* value)
{
	const ui_uris* u = &ui->u;
	sbui_model* m = &ui->model;
	if (key == u->device_list && value->type == u->atom_Tuple) {
		sbui_clear_devices(m);
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple*)value, it)
			if (it->type == u->atom_Object)
				read_device(ui, (const LV2_Atom_Object*)it);
	} else if (key == u->stems && value->type == u->atom_Tuple) {
		sbui_clear_stems(m);
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple*)value, it)
			if (is_text(u, it)) {
				char path[SBUI_TEXT];
				copy_text(path, it);
				sbui_add_stem(m, path);
			}
	} else if (key == u->device_in_use && is_text(u, value)) {
		copy_text(m->device_in_use, value);
	} else if (key == u->last_error && is_text(u, value)) {
		copy_text(m->last_error, value);
	} else if (key == u->manifest && is_text(u, value)) {
		copy_text(m->manifest, value);
	} else if (key == u->recorded_frames) {
		m->recorded_frames = atom_number(u, value, m->recorded_frames);
	} else if (key == u->model_list && is_text(u, value)) {
		char text[4096];
		const char* b = (const char*)LV2_ATOM_BODY_CONST(value);
		snprintf(text, sizeof text, "%.*s", (int)strnlen(b, value->size), b);
		sbui_set_model_list(m, text);
	} else if (key == u->install_status && is_text(u, value)) {
		char text[SBUI_TEXT + 16];
		const char* b = (const char*)LV2_ATOM_BODY_CONST(value);
		snprintf(text, sizeof text, "%.*s", (int)strnlen(b, value->size), b);
		sbui_set_install_status(m, text);
	}
	ui->dirty = true;
}

static void on_patch(sb_ui* ui, const LV2_Atom_Object* obj)
{
	const ui_uris* u = &ui->u;
	if (obj->body.otype == u->patch_Set) {
		const LV2_Atom *prop = NULL, *value = NULL;
		lv2_atom_object_get(obj, u->patch_property, &prop, u->patch_value, &value, 0);
		if (prop && prop->type == u->atom_URID && value)
			on_property(ui, ((const LV2_Atom_URID*)prop)->body, value);
	} else if (obj->body.otype == u->patch_Put) {
		const LV2_Atom* body = NULL;
		lv2_atom_object_get(obj, u->patch_body, &body, 0);
		if (body && body->type == u->atom_Object)
			LV2_ATOM_OBJECT_FOREACH ((const LV2_Atom_Object*)body, p)
				on_property(ui, p->key, &p->value);
	}
}

/* ---- drawing ---- */

static void set_rgb(cairo_t* cr, unsigned rgb)
{
	cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
	                     (rgb & 255) / 255.0);
}

static void rounded(cairo_t* cr, rect r, double rad)
{
	cairo_new_sub_path(cr);
	cairo_arc(cr, r.x + r.w - rad, r.y + rad, rad, -M_PI / 2, 0);
	cairo_arc(cr, r.x + r.w - rad, r.y + r.h - rad, rad, 0, M_PI / 2);
	cairo_arc(cr, r.x + rad, r.y + r.h - rad, rad, M_PI / 2, M_PI);
	cairo_arc(cr, r.x + rad, r.y + rad, rad, M_PI, 3 * M_PI / 2);
	cairo_close_path(cr);
}

static void text_at(cairo_t* cr, double x, double y, const char* s, double size, unsigned rgb)
{
	cairo_set_font_size(cr, size);
	set_rgb(cr, rgb);
	cairo_move_to(cr, x, y);
	cairo_show_text(cr, s);
}

/* A text clipped to a width with an ellipsis, so nothing spills over: paths lose their front
 * (the file name stays), sentences their end. Cuts whole UTF-8 characters only. */
static void text_fit_end(cairo_t* cr, double x, double y, double w, const char* s, double size,
                         unsigned rgb, bool keep_end)
{
	char buf[SBUI_TEXT * 2 + 8];
	snprintf(buf, sizeof buf, "%s", s);
	cairo_set_font_size(cr, size);
	cairo_text_extents_t ext;
	cairo_text_extents(cr, buf, &ext);
	size_t n = strlen(buf);
	while (ext.x_advance > w && n > 4) {
		if (keep_end) {
			size_t cut = 1; /* bytes of the character after the "..." */
			while (3 + cut < n && ((unsigned char)buf[3 + cut] & 0xC0) == 0x80)
				cut++;
			memmove(buf + 3, buf + 3 + cut, n - 3 - cut + 1);
			buf[0] = buf[1] = buf[2] = '.';
			n -= cut;
		} else {
			size_t end = n - (n >= 3 && !strcmp(buf + n - 3, "...") ? 3 : 0);
			do
				end--;
			while (end > 0 && ((unsigned char)buf[end] & 0xC0) == 0x80);
			memcpy(buf + end, "...", 4);
			n = end + 3;
		}
		cairo_text_extents(cr, buf, &ext);
	}
	text_at(cr, x, y, buf, size, rgb);
}

static void text_fit(cairo_t* cr, double x, double y, double w, const char* s, double size,
                     unsigned rgb)
{
	text_fit_end(cr, x, y, w, s, size, rgb, true);
}

/* Splits a sentence into at most max_lines lines of width w at spaces (the last one ends in an
 * ellipsis when the rest does not fit). Returns the number of lines. */
#define WRAP_MAX 3
static int text_wrap(cairo_t* cr, double w, const char* s, double size,
                     char lines[WRAP_MAX][SBUI_TEXT * 2 + 8])
{
	cairo_set_font_size(cr, size);
	int n = 0;
	while (*s && n < WRAP_MAX) {
		while (*s == ' ')
			s++;
		size_t len = strlen(s), fit = 0;
		for (size_t i = 0; i <= len && i < SBUI_TEXT * 2; i++) {
			if (s[i] != ' ' && s[i] != '\0')
				continue;
			char buf[SBUI_TEXT * 2 + 8];
			snprintf(buf, sizeof buf, "%.*s", (int)i, s);
			cairo_text_extents_t ext;
			cairo_text_extents(cr, buf, &ext);
			if (ext.x_advance > w && fit)
				break;
			fit = i;
			if (ext.x_advance > w)
				break;
		}
		if (!fit || n == WRAP_MAX - 1)
			fit = len; /* one long word, or the last line: text_fit_end cuts it */
		snprintf(lines[n++], SBUI_TEXT * 2 + 8, "%.*s", (int)fit, s);
		s += fit;
	}
	return n;
}

/* A button; 'on' fills it with on_rgb (blue for a chosen stem, red for record armed). */
static void button_rgb(sb_ui* ui, hit_id id, rect r, const char* label, bool on, unsigned on_rgb)
{
	cairo_t* cr = ui->cr;
	ui->hits[id] = r;
	rounded(cr, r, 4);
	set_rgb(cr, on ? on_rgb : (ui->hover == (int)id ? 0x3a3f47 : 0x2c3036));
	cairo_fill_preserve(cr);
	set_rgb(cr, 0x5a616b);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	cairo_set_font_size(cr, 13);
	cairo_text_extents_t ext;
	cairo_text_extents(cr, label, &ext);
	double tx = r.x + (r.w - ext.x_advance) / 2;
	if (tx < r.x + 6)
		tx = r.x + 6;
	cairo_save(cr);
	cairo_rectangle(cr, r.x + 2, r.y, r.w - 4, r.h);
	cairo_clip(cr);
	text_at(cr, tx, r.y + r.h / 2 + 4.5, label, 13, on ? 0xffffff : 0xe8e8e8);
	cairo_restore(cr);
}

static void button(sb_ui* ui, hit_id id, rect r, const char* label, bool on)
{
	button_rgb(ui, id, r, label, on, 0x2e6e9e);
}

static void draw_tooltip(sb_ui* ui)
{
	cairo_t* cr = ui->cr;
	char tip[1024];
	sbui_device_tooltip(&ui->model, ui->model.device_port, tip, sizeof tip);
	double lw = ui->width / ui->scale;
	/* measure the lines */
	cairo_set_font_size(cr, 12);
	int lines = 1;
	double maxw = 0;
	for (char *s = tip, *e;; s = e + 1) {
		e = strchr(s, '\n');
		if (e) *e = '\0';
		cairo_text_extents_t ext;
		cairo_text_extents(cr, s, &ext);
		if (ext.x_advance > maxw) maxw = ext.x_advance;
		if (!e) break;
		*e = '\n';
		lines++;
	}
	rect r = {ui->mouse_x + 12, ui->mouse_y + 16, maxw + 16, lines * 16 + 8};
	if (r.x + r.w > lw - 4) r.x = lw - 4 - r.w;
	if (r.x < 4) r.x = 4;
	rounded(cr, r, 4);
	set_rgb(cr, 0xf4f1d6);
	cairo_fill_preserve(cr);
	set_rgb(cr, 0x807a50);
	cairo_stroke(cr);
	double y = r.y + 16;
	for (char *s = tip, *e;; s = e + 1) {
		e = strchr(s, '\n');
		if (e) *e = '\0';
		text_at(cr, r.x + 8, y, s, 12, 0x202020);
		y += 16;
		if (!e) break;
	}
}

static void draw(sb_ui* ui)
{
	cairo_t* cr = ui->cr;
	const sbui_model* m = &ui->model;
	double lw = ui->width / ui->scale, lh = ui->height / ui->scale;
	char buf[SBUI_TEXT * 2];

	cairo_save(cr);
	cairo_scale(cr, ui->scale, ui->scale);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	set_rgb(cr, 0x1d2024);
	cairo_paint(cr);

	double x = 14, w = lw - 28, y = 14;
	text_at(cr, x, y + 14, "Stembridge", 18, 0xffffff);
	y += 30;

	/* device row */
	text_at(cr, x, y + 19, "Device", 13, 0xb0b6bf);
	sbui_device_label(m, m->device_port, buf, sizeof buf);
	button(ui, HIT_DEVICE, (rect){x + 64, y, w - 64, 28}, buf, false);
	y += 34;
	bool warn = false;
	char reason[SBUI_TEXT];
	sbui_in_use_parts(m, buf, reason, SBUI_TEXT, &warn);
	text_at(cr, x, y + 12, "In use", 12, 0xb0b6bf);
	text_fit_end(cr, x + 64, y + 12, w - 64, buf, 12, warn ? 0xf0a030 : 0x8fd18f, false);
	if (reason[0]) {
		y += 16;
		text_fit_end(cr, x + 64, y + 12, w - 64, reason, 11.5, 0xf0a030, false);
	}
	y += 24;

	/* record, mode, precision, keep each take's recording */
	double bw = (w - 24) / 4;
	const bool armed = ui->ports[SB_PORT_RECORD] > 0.5f;
	button_rgb(ui, HIT_RECORD, (rect){x, y, bw, 28}, armed ? "● Armed" : "○ Record", armed,
	           0xa82b2b);
	button(ui, HIT_MODE, (rect){x + bw + 8, y, bw, 28},
	       ui->ports[SB_PORT_MODE] > 0.5f ? "Sequential" : "Parallel", false);
	button(ui, HIT_PRECISION, (rect){x + 2 * (bw + 8), y, bw, 28},
	       ui->ports[sb_port_precision(ui->channels)] > 0.5f ? "BF16 (fast)" : "FP32", false);
	const bool keep = ui->ports[sb_port_keep_take(ui->channels)] > 0.5f;
	button(ui, HIT_KEEP_TAKE, (rect){x + 3 * (bw + 8), y, bw, 28},
	       keep ? "☑ Keep take" : "☐ Keep take", keep);
	y += 36;

	/* model, and what it takes to get it */
	text_at(cr, x, y + 19, "Model", 13, 0xb0b6bf);
	char offer[64];
	int64_t bytes = 0;
	const bool can_install = sbui_model_install_offer(m, offer, sizeof offer, &bytes);
	const double iw = can_install ? 150 : 0;
	sbui_model_label(m, ui->ports[SB_PORT_MODEL], buf, sizeof buf);
	button(ui, HIT_MODEL, (rect){x + 64, y, w - 64 - (iw ? iw + 8 : 0), 28}, buf, false);
	ui->hits[HIT_INSTALL] = (rect){0, 0, 0, 0};
	if (can_install) {
		snprintf(buf, sizeof buf, "Install (%.0f MB)", (double)bytes / 1e6);
		button_rgb(ui, HIT_INSTALL, (rect){x + w - iw, y, iw, 28}, buf, true, 0x2f7a3f);
	}
	y += 34;
	if (m->install_status[0]) {
		const bool busy = sbui_installing(m);
		if (busy) {
			rect ib = {x + 64, y + 2, w - 64, 4};
			set_rgb(cr, 0x2c3036);
			cairo_rectangle(cr, ib.x, ib.y, ib.w, ib.h);
			cairo_fill(cr);
			set_rgb(cr, 0x3f8f5f);
			cairo_rectangle(cr, ib.x, ib.y, ib.w * m->install_fraction, ib.h);
			cairo_fill(cr);
		}
		const bool failed = strstr(m->install_status, "not installed") != NULL;
		text_fit_end(cr, x + 64, y + 18, w - 64, m->install_status, 11.5,
		             failed ? 0xff7070 : busy ? 0xd8dce2 : 0x8fd18f, false);
		y += 24;
	}

	/* stems: guitar and piano dimmed (and ignored) when the model makes only four */
	double sw = (w - 5 * 6) / SB_PLUGIN_STEMS;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		const unsigned port = sb_port_stem(ui->channels, s);
		bool on = ui->ports[port] > 0.5f;
		const bool makes = sbui_model_makes(m, s);
		snprintf(buf, sizeof buf, "%s %s", on ? "☑" : "☐", stem_names[s]);
		button_rgb(ui, (hit_id)(HIT_STEM0 + s), (rect){x + s * (sw + 6), y, sw, 26}, buf,
		           on && makes, 0x2e6e9e);
		if (!makes) {
			rounded(cr, ui->hits[HIT_STEM0 + s], 4);
			cairo_set_source_rgba(cr, 0.11, 0.12, 0.14, 0.55);
			cairo_fill(cr);
		}
	}
	y += 36;

	/* progress */
	rect bar = {x, y, w, 22};
	rounded(cr, bar, 3);
	set_rgb(cr, 0x2c3036);
	cairo_fill(cr);
	float p = sbui_progress(m);
	if (p > 0) {
		rounded(cr, (rect){bar.x, bar.y, bar.w * p, bar.h}, 3);
		set_rgb(cr, sbui_model_stage(m) == SBUI_ERROR ? 0xa03030 : 0x3f8f5f);
		cairo_fill(cr);
	}
	if (sbui_model_stage(m) == SBUI_RECORDING) {
		rounded(cr, bar, 3);
		cairo_set_source_rgba(cr, 0.8, 0.15, 0.15, 0.5);
		cairo_fill(cr);
	}
	sbui_stage_text(m, buf, sizeof buf);
	text_fit_end(cr, bar.x + 8, bar.y + 15.5, bar.w - 16, buf, 12, 0xffffff, false);
	y += 32;

	/* stems produced: their folder once (its end kept when it does not fit), then each file */
	if (m->n_stems) {
		const char* slash = strrchr(m->stems[0], '/');
		int dl = slash ? (int)(slash - m->stems[0]) : 0;
		text_at(cr, x, y + 12, "Stems in", 12, 0xb0b6bf);
		cairo_text_extents_t ext;
		cairo_text_extents(cr, "Stems in ", &ext);
		snprintf(buf, sizeof buf, "%.*s", dl, m->stems[0]);
		text_fit(cr, x + ext.x_advance, y + 12, w - ext.x_advance, buf, 12, 0xd8dce2);
	} else {
		text_at(cr, x, y + 12, "Stems: none yet", 12, 0xb0b6bf);
	}
	y += 18;
	/* the last error (a silent take's says why) wraps over up to three lines at the bottom */
	char err[WRAP_MAX][SBUI_TEXT * 2 + 8];
	int n_err = 0;
	if (m->last_error[0]) {
		char full[SBUI_TEXT + 16];
		snprintf(full, sizeof full, "%s%s", sbui_model_stage(m) == SBUI_SILENT ? "" : "Last error: ",
		         m->last_error);
		n_err = text_wrap(cr, w, full, 12, err);
	}
	for (int i = 0; i < m->n_stems && y + 14 < lh - 24 - 16 * (n_err > 1 ? n_err - 1 : 0);
	     i++, y += 16) {
		const char* base = strrchr(m->stems[i], '/');
		text_fit(cr, x + 8, y + 12, w - 8, base ? base + 1 : m->stems[i], 11.5, 0xd8dce2);
	}

	/* last error, pinned to the bottom */
	for (int i = 0; i < n_err; i++)
		text_fit_end(cr, x, lh - 10 - 16 * (n_err - 1 - i), w, err[i], 12,
		             sbui_model_stage(m) == SBUI_SILENT ? 0xe0b050 : 0xff7070, false);

	if (ui->hover == HIT_DEVICE)
		draw_tooltip(ui);
	cairo_restore(cr);
	cairo_surface_flush(ui->surface);
	XFlush(ui->dpy);
	ui->dirty = false;
}

/* ---- input ---- */

static int hit_at(const sb_ui* ui, double x, double y)
{
	for (int i = 0; i < HIT_COUNT; i++) {
		rect r = ui->hits[i];
		if (x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h)
			return i;
	}
	return HIT_NONE;
}

static void toggle(sb_ui* ui, uint32_t port)
{
	write_port(ui, port, ui->ports[port] > 0.5f ? 0.0f : 1.0f);
}

/* button: 1 left, 3 right, 4/5 wheel up/down */
static void on_press(sb_ui* ui, int id, unsigned button)
{
	int dir = (button == 1 || button == 4) ? +1 : (button == 3 || button == 5) ? -1 : 0;
	if (dir == 0)
		return;
	/* the wheel: up is back, down is next, like a list */
	if (button == 4) dir = -1;
	else if (button == 5) dir = +1;
	switch (id) {
	case HIT_DEVICE: write_port(ui, SB_PORT_DEVICE, sbui_device_step(&ui->model, dir)); break;
	case HIT_RECORD: if (button == 1) toggle(ui, SB_PORT_RECORD); break;
	case HIT_MODE: if (button == 1 || button == 3) toggle(ui, SB_PORT_MODE); break;
	case HIT_PRECISION:
		if (button == 1 || button == 3) toggle(ui, sb_port_precision(ui->channels));
		break;
	case HIT_KEEP_TAKE:
		if (button == 1) toggle(ui, sb_port_keep_take(ui->channels));
		break;
	case HIT_MODEL:
		write_port(ui, SB_PORT_MODEL, sbui_model_step(ui->ports[SB_PORT_MODEL], dir));
		break;
	case HIT_INSTALL: {
		char name[64];
		if (button == 1 && sbui_model_install_offer(&ui->model, name, sizeof name, NULL)) {
			send_install(ui, name);
			snprintf(ui->model.install_status, sizeof ui->model.install_status,
			         "%s: waiting to install", name);
			ui->dirty = true;
		}
		break;
	}
	case HIT_STEM0: case HIT_STEM1: case HIT_STEM2: case HIT_STEM3: case HIT_STEM4:
	case HIT_STEM5:
		if (button == 1) toggle(ui, sb_port_stem(ui->channels, id - HIT_STEM0));
		break;
	default: break;
	}
}

static void resize_surface(sb_ui* ui, int w, int h)
{
	if (w == ui->width && h == ui->height)
		return;
	ui->width = w;
	ui->height = h;
	cairo_xlib_surface_set_size(ui->surface, w, h);
	ui->dirty = true;
}

static void handle_events(sb_ui* ui)
{
	while (XPending(ui->dpy) > 0) {
		XEvent ev;
		XNextEvent(ui->dpy, &ev);
		switch (ev.type) {
		case Expose:
			if (ev.xexpose.count == 0) ui->dirty = true;
			break;
		case ConfigureNotify:
			resize_surface(ui, ev.xconfigure.width, ev.xconfigure.height);
			break;
		case ButtonPress: {
			double x = ev.xbutton.x / ui->scale, y = ev.xbutton.y / ui->scale;
			on_press(ui, hit_at(ui, x, y), ev.xbutton.button);
			break;
		}
		case MotionNotify: {
			ui->mouse_x = ev.xmotion.x / ui->scale;
			ui->mouse_y = ev.xmotion.y / ui->scale;
			int h = hit_at(ui, ui->mouse_x, ui->mouse_y);
			if (h != ui->hover || h == HIT_DEVICE) ui->dirty = true;
			ui->hover = h;
			break;
		}
		case LeaveNotify:
			ui->hover = HIT_NONE;
			ui->dirty = true;
			break;
		default: break;
		}
	}
}

/* ---- LV2 UI ---- */

static LV2UI_Handle instantiate(const LV2UI_Descriptor* desc, const char* plugin_uri,
                                const char* bundle_path, LV2UI_Write_Function write,
                                LV2UI_Controller controller, LV2UI_Widget* widget,
                                const LV2_Feature* const* features)
{
	(void)desc; (void)bundle_path;
	if (strncmp(plugin_uri, SB_URI, strlen(SB_URI)) != 0)
		return NULL;
	sb_ui* ui = calloc(1, sizeof *ui);
	if (!ui)
		return NULL;
	ui->write = write;
	ui->controller = controller;
	ui->scale = 1.0;
	ui->hover = HIT_NONE;
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
	map_uris(&ui->u, ui->map);
	lv2_atom_forge_init(&ui->forge, ui->map);
	double rate = 48000.0;
	if (options) {
		LV2_URID scale = ui->map->map(ui->map->handle, LV2_UI__scaleFactor);
		LV2_URID srate = ui->map->map(ui->map->handle, "http://lv2plug.in/ns/ext/parameters#sampleRate");
		for (const LV2_Options_Option* o = options; o->key; o++) {
			if (o->key == scale && o->type == ui->u.atom_Float) {
				float f = *(const float*)o->value;
				if (f >= 0.5f && f <= 4.0f) ui->scale = f;
			} else if (o->key == srate && o->type == ui->u.atom_Float) {
				rate = *(const float*)o->value;
			}
		}
	}
	sbui_model_init(&ui->model, rate);
	ui->channels = strcmp(plugin_uri, SB_URI_MONO) == 0 ? 1 : 2;
	for (int i = 0; i < SB_N_PORTS_ALL_STEREO; i++) ui->ports[i] = 0.0f;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) ui->ports[sb_port_stem(ui->channels, s)] = 1.0f;
	ui->ports[SB_PORT_MODEL] = (float)SB_MODEL_AUTO;

	ui->dpy = XOpenDisplay(NULL);
	if (!ui->dpy) {
		fprintf(stderr, "stembridge UI: cannot open the X display\n");
		free(ui);
		return NULL;
	}
	int screen = DefaultScreen(ui->dpy);
	if (!parent)
		parent = RootWindow(ui->dpy, screen);
	ui->width = (int)lrint(BASE_W * ui->scale);
	ui->height = (int)lrint(BASE_H * ui->scale);
	ui->win = XCreateSimpleWindow(ui->dpy, parent, 0, 0, (unsigned)ui->width,
	                              (unsigned)ui->height, 0, 0, 0x1d2024);
	XSelectInput(ui->dpy, ui->win, ExposureMask | StructureNotifyMask | ButtonPressMask |
	                                   PointerMotionMask | LeaveWindowMask);
	XSizeHints hints = {0};
	hints.flags = PMinSize | PBaseSize;
	hints.min_width = (int)lrint(360 * ui->scale);
	hints.min_height = (int)lrint(300 * ui->scale);
	hints.base_width = ui->width;
	hints.base_height = ui->height;
	XSetWMNormalHints(ui->dpy, ui->win, &hints);
	XStoreName(ui->dpy, ui->win, "Stembridge");
	XMapRaised(ui->dpy, ui->win);
	ui->surface = cairo_xlib_surface_create(ui->dpy, ui->win, DefaultVisual(ui->dpy, screen),
	                                        ui->width, ui->height);
	ui->cr = cairo_create(ui->surface);
	XFlush(ui->dpy);
	*widget = (LV2UI_Widget)(uintptr_t)ui->win;
	ui->dirty = true;
	send_get(ui);
	return ui;
}

static void cleanup(LV2UI_Handle handle)
{
	sb_ui* ui = handle;
	cairo_destroy(ui->cr);
	cairo_surface_destroy(ui->surface);
	XDestroyWindow(ui->dpy, ui->win);
	XCloseDisplay(ui->dpy);
	free(ui);
}

static void port_event(LV2UI_Handle handle, uint32_t port, uint32_t size, uint32_t format,
                       const void* buffer)
{
	sb_ui* ui = handle;
	if (format == 0 && size == sizeof(float) && port < SB_N_PORTS_ALL_STEREO) {
		float v = *(const float*)buffer;
		if (ui->ports[port] != v) ui->dirty = true;
		ui->ports[port] = v;
		sbui_set_port(&ui->model, port, v);
		if (port == sb_port_time_left(ui->channels)) sbui_set_time_left(&ui->model, v);
	} else if (format == ui->u.atom_eventTransfer && size >= sizeof(LV2_Atom)) {
		const LV2_Atom* a = buffer;
		if (a->type == ui->u.atom_Object && lv2_atom_total_size(a) <= size) {
			const LV2_Atom_Object* obj = buffer;
			on_patch(ui, obj);
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
	if (!strcmp(uri, LV2_UI__idleInterface)) return &idle;
	return NULL;
}

static const LV2UI_Descriptor descriptor = {SB_URI_UI, instantiate, cleanup, port_event,
                                            extension_data};

LV2_SYMBOL_EXPORT const LV2UI_Descriptor* lv2ui_descriptor(uint32_t index)
{
	return index == 0 ? &descriptor : NULL;
}
