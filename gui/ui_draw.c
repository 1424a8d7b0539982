/* Drawing the window with cairo. See ui_draw.h. Colours after x42's dark meters: a dark
 * ground, one accent per meaning (green busy and fine, orange warnings, red errors and
 * recording), each stem in its own colour throughout.
 */
#include "ui_draw.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const unsigned stem_rgb[SBUI_STEM_KINDS] = {0xe06c75, 0xe5c07b, 0x61afef,
                                                   0x98c379, 0xc678dd, 0x56b6c2};

enum {
	BG = 0x1d2024, PANEL = 0x24282e, BUTTON = 0x2c3036, BUTTON_HOVER = 0x3a3f47,
	BORDER = 0x5a616b, TEXT = 0xe8e8e8, DIM = 0xb0b6bf, SOFT = 0xd8dce2, OK = 0x8fd18f,
	WARN = 0xf0a030, AMBER = 0xe0b050, ERR = 0xff8080, FOCUS = 0x5fb3ff, LANE = 0x8ab4f8
};

unsigned sbui_stem_rgb(int stem)
{
	return stem >= 0 && stem < SBUI_STEM_KINDS ? stem_rgb[stem] : DIM;
}

static void rgb(cairo_t* cr, unsigned c)
{
	cairo_set_source_rgb(cr, ((c >> 16) & 255) / 255.0, ((c >> 8) & 255) / 255.0,
	                     (c & 255) / 255.0);
}

static void rgba(cairo_t* cr, unsigned c, double a)
{
	cairo_set_source_rgba(cr, ((c >> 16) & 255) / 255.0, ((c >> 8) & 255) / 255.0,
	                      (c & 255) / 255.0, a);
}

static void rounded(cairo_t* cr, sbui_rect r, double rad)
{
	rad = fmin(rad, fmin(r.w, r.h) / 2);
	cairo_new_sub_path(cr);
	cairo_arc(cr, r.x + r.w - rad, r.y + rad, rad, -M_PI / 2, 0);
	cairo_arc(cr, r.x + r.w - rad, r.y + r.h - rad, rad, 0, M_PI / 2);
	cairo_arc(cr, r.x + rad, r.y + r.h - rad, rad, M_PI / 2, M_PI);
	cairo_arc(cr, r.x + rad, r.y + rad, rad, M_PI, 3 * M_PI / 2);
	cairo_close_path(cr);
}

void sbui_draw_font(cairo_t* cr)
{
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	cairo_font_options_t* fo = cairo_font_options_create();
	cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
	cairo_set_font_options(cr, fo);
	cairo_font_options_destroy(fo);
}

double sbui_draw_measure(void* user, const char* text, double size)
{
	cairo_t* cr = user;
	cairo_set_font_size(cr, size);
	cairo_text_extents_t e;
	cairo_text_extents(cr, text, &e);
	/* the advance or the ink, whichever reaches further (a glyph may overhang its advance) */
	return fmax(e.x_advance, e.x_bearing + e.width);
}

typedef enum { LEFT = 0, CENTER, RIGHT } align;

/* A text fitted to its box (cut with an ellipsis at a character when it is too wide), centred
 * on the box's height, noted in the log. */
static void text_box(cairo_t* cr, sbui_textlog* log, int widget, sbui_rect box, const char* s,
                     double size, unsigned colour, align al, bool keep_end)
{
	if (!s || !s[0] || box.w <= 0)
		return;
	char fit[SBUI_LINE];
	const sbui_measure me = {sbui_draw_measure, cr};
	sbui_elide(&me, s, size, box.w, keep_end, fit, sizeof fit);
	if (!fit[0])
		return;
	cairo_set_font_size(cr, size);
	cairo_font_extents_t fe;
	cairo_font_extents(cr, &fe);
	cairo_text_extents_t te;
	cairo_text_extents(cr, fit, &te);
	const double w = fmax(te.x_advance, te.x_bearing + te.width);
	double x = box.x;
	if (al == CENTER)
		x = box.x + (box.w - w) / 2;
	else if (al == RIGHT)
		x = box.x + box.w - w;
	const double base = box.y + box.h / 2 + (fe.ascent - fe.descent) / 2;
	rgb(cr, colour);
	cairo_move_to(cr, x, base);
	cairo_show_text(cr, fit);
	if (log && log->n < SBUI_TEXTLOG_MAX) {
		sbui_text_entry* e = &log->e[log->n++];
		e->widget = widget;
		e->box = box;
		e->ink = (sbui_rect){x + te.x_bearing, base + te.y_bearing, te.width, te.height};
		sbui_set_text_n(e->text, (int)sizeof e->text, fit, -1);
	}
}

/* A wrapped text's lines, one box each. */
static void text_lines(cairo_t* cr, const sbui_view* v, sbui_textlog* log, int widget,
                       unsigned first, unsigned rest)
{
	const int slot = sbui_wrap_slot(widget);
	if (slot < 0 || !v->l->placed[widget])
		return;
	const double size = sbui_widget_font(widget), lh = sbui_line_height(size);
	const sbui_rect r = v->l->r[widget];
	for (int i = 0; i < v->l->n_lines[slot]; i++)
		text_box(cr, log, widget, (sbui_rect){r.x, r.y + i * lh, r.w, lh}, v->l->lines[slot][i],
		         size, i == 0 ? first : rest, LEFT, false);
}

static void button(cairo_t* cr, const sbui_view* v, sbui_textlog* log, int w, bool caret)
{
	if (!v->l->placed[w])
		return;
	const sbui_rect r = v->l->r[w];
	rounded(cr, r, 4);
	rgb(cr, v->on[w] ? v->on_rgb[w] : v->hover == w ? BUTTON_HOVER : BUTTON);
	cairo_fill_preserve(cr);
	rgb(cr, BORDER);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	sbui_rect inner = {r.x + 6, r.y, r.w - 12, r.h};
	if (caret) { /* a small triangle at the right: this opens a list */
		const double cx = r.x + r.w - 12, cy = r.y + r.h / 2;
		cairo_move_to(cr, cx - 4, cy - 2);
		cairo_line_to(cr, cx + 4, cy - 2);
		cairo_line_to(cr, cx, cy + 3);
		cairo_close_path(cr);
		rgb(cr, DIM);
		cairo_fill(cr);
		inner.w -= 14;
		inner.x += 7;
	}
	const bool dark_text = v->on[w] && (v->on_rgb[w] == 0xe5c07b);
	text_box(cr, log, w, inner, v->c->text[w], sbui_widget_font(w),
	         dark_text ? 0x1d2024 : v->on[w] ? 0xffffff : TEXT, CENTER, false);
}

static void label(cairo_t* cr, const sbui_view* v, sbui_textlog* log, int w, unsigned colour,
                  align al, bool keep_end)
{
	if (v->l->placed[w])
		text_box(cr, log, w, v->l->r[w], v->c->text[w], sbui_widget_font(w), colour, al,
		         keep_end);
}

/* min/max columns over [0, cols) drawn across r: one bar per device pixel column. */
static void wave(cairo_t* cr, sbui_rect r, const float* lohi, int cols, double fill, double scale,
                 unsigned colour)
{
	if (cols <= 0 || fill <= 0)
		return;
	const double mid = r.y + r.h / 2, half = r.h / 2 - 1;
	const double step = 1.0 / scale; /* one device pixel */
	const double width = r.w * fmin(fill, 1.0);
	rgb(cr, colour);
	for (double x = 0; x < width; x += step) {
		const int c0 = (int)(x / width * cols), c1 = (int)fmin(cols, ceil((x + step) / width * cols));
		float lo = 0, hi = 0;
		for (int c = c0; c < (c1 > c0 ? c1 : c0 + 1) && c < cols; c++) {
			lo = fminf(lo, lohi[2 * c]);
			hi = fmaxf(hi, lohi[2 * c + 1]);
		}
		lo = fmaxf(lo, -1.0f);
		hi = fminf(hi, 1.0f);
		const double top = mid - hi * half, bottom = mid - lo * half;
		cairo_rectangle(cr, r.x + x, top, step, fmax(bottom - top, step));
	}
	cairo_fill(cr);
}

static void lane(cairo_t* cr, const sbui_view* v, sbui_textlog* log)
{
	if (!v->l->placed[SBUI_W_LANE])
		return;
	const sbui_model* m = v->m;
	const sbui_rect r = v->l->r[SBUI_W_LANE];
	const bool rec = sbui_model_stage(m) == SBUI_RECORDING;
	rounded(cr, r, 4);
	rgb(cr, PANEL);
	cairo_fill_preserve(cr);
	rgba(cr, rec ? 0xd04040 : BORDER, rec ? 0.9 : 0.6);
	cairo_set_line_width(cr, rec ? 1.5 : 1);
	cairo_stroke(cr);
	const sbui_rect in = {r.x + 4, r.y + 4, r.w - 8, r.h - 8};
	rgba(cr, BORDER, 0.5);
	cairo_rectangle(cr, in.x, in.y + in.h / 2, in.w, 1.0 / v->scale);
	cairo_fill(cr);
	const sbui_lane* ln = &m->lane;
	if (!ln->valid || ln->cols <= 0 || ln->frames <= 0) {
		text_box(cr, log, SBUI_W_LANE, in, rec ? "Waiting for the first samples"
		                                       : "No take yet: arm Record and play the region",
		         12, DIM, CENTER, false);
		return;
	}
	/* the columns cover cols * per_col frames; while recording the take grows to the right
	 * across a span of 2, 5, 10, 20, 30 s, 1, 2, 5, 10, 20, 30 min ... (more than half of it
	 * filled), then the whole take fits the lane */
	const double covered = (double)ln->cols * ln->per_col;
	double span = (double)ln->frames;
	if (rec) {
		static const double spans[] = {2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800};
		double secs = span / m->sample_rate;
		size_t i = 0;
		while (i < sizeof spans / sizeof spans[0] && spans[i] < secs)
			i++;
		secs = i < sizeof spans / sizeof spans[0] ? spans[i] : ceil(secs / 3600) * 3600;
		span = fmax(span, secs * m->sample_rate);
	}
	wave(cr, in, ln->lohi, ln->cols, covered / span, v->scale, rec ? 0xf08a8a : LANE);
	if (rec) { /* the recording head */
		const double x = in.x + in.w * fmin(1.0, covered / span);
		rgb(cr, 0xff5050);
		cairo_rectangle(cr, x - 1, in.y, 2, in.h);
		cairo_fill(cr);
	}
}

static void status_bar(cairo_t* cr, const sbui_view* v, sbui_textlog* log)
{
	const sbui_rect bar = v->l->r[SBUI_W_STATUS];
	const sbui_status* s = v->status;
	rounded(cr, bar, 3);
	rgb(cr, BUTTON);
	cairo_fill(cr);
	const unsigned fill = s->severity == SBUI_SEV_ERROR ? 0xa03030
	                    : s->severity == SBUI_SEV_WARN  ? 0x9a6f1c
	                                                     : 0x3f8f5f;
	double p = s->progress;
	if (s->severity == SBUI_SEV_ERROR || s->severity == SBUI_SEV_WARN)
		p = 1.0;
	if (p > 0) {
		rounded(cr, (sbui_rect){bar.x, bar.y, bar.w * p, bar.h}, 3);
		rgb(cr, fill);
		cairo_fill(cr);
	}
	if (sbui_model_stage(v->m) == SBUI_RECORDING) {
		rounded(cr, bar, 3);
		rgba(cr, 0xcc2626, 0.55);
		cairo_fill(cr);
	}
	text_box(cr, log, SBUI_W_STATUS, (sbui_rect){bar.x + 8, bar.y, bar.w - 16, bar.h},
	         v->c->text[SBUI_W_STATUS], sbui_widget_font(SBUI_W_STATUS), 0xffffff, LEFT, false);
}

static void rows(cairo_t* cr, const sbui_view* v, sbui_textlog* log)
{
	for (int k = 0; k < SBUI_ROWS; k++) {
		const int nm = sbui_row_part(k, SBUI_ROW_NAME);
		if (!v->l->placed[nm])
			continue;
		const int s = v->row_stem[k];
		label(cr, v, log, nm, sbui_stem_rgb(s), LEFT, false);
		const sbui_rect wr = v->l->r[sbui_row_part(k, SBUI_ROW_WAVE)];
		rounded(cr, wr, 3);
		rgb(cr, PANEL);
		cairo_fill(cr);
		const sbui_rect in = {wr.x + 2, wr.y + 2, wr.w - 4, wr.h - 4};
		if (s >= 0 && v->m->views[s].valid)
			wave(cr, in, v->m->views[s].lohi, v->m->views[s].cols, 1.0, v->scale, sbui_stem_rgb(s));
		else { /* its picture is on its way: a line where it will be */
			rgba(cr, sbui_stem_rgb(s), 0.5);
			cairo_rectangle(cr, in.x, in.y + in.h / 2, in.w, 1.0 / v->scale);
			cairo_fill(cr);
		}
		label(cr, v, log, sbui_row_part(k, SBUI_ROW_LEVELS), DIM, RIGHT, false);
		button(cr, v, log, sbui_row_part(k, SBUI_ROW_SOLO), false);
		button(cr, v, log, sbui_row_part(k, SBUI_ROW_MUTE), false);
	}
}

static void focus_ring(cairo_t* cr, const sbui_view* v)
{
	if (!v->focus_visible || v->focus < 0 || !v->l->placed[v->focus] || v->popup_open)
		return;
	const sbui_rect r = v->l->r[v->focus];
	rounded(cr, (sbui_rect){r.x - 2, r.y - 2, r.w + 4, r.h + 4}, 5);
	rgb(cr, FOCUS);
	cairo_set_line_width(cr, 2);
	cairo_stroke(cr);
}

static void popup(cairo_t* cr, const sbui_view* v, sbui_textlog* log)
{
	if (!v->popup_open)
		return;
	const sbui_rect r = v->popup;
	rounded(cr, (sbui_rect){r.x + 2, r.y + 3, r.w, r.h}, 5);
	rgba(cr, 0x000000, 0.45);
	cairo_fill(cr);
	rounded(cr, r, 5);
	rgb(cr, 0x262a30);
	cairo_fill_preserve(cr);
	rgb(cr, BORDER);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	const double eh = v->popup_entry_h;
	const bool two = eh >= 34;
	for (int i = 0; i < v->popup_n; i++) {
		const sbui_rect e = {r.x + 4, r.y + 4 + i * eh, r.w - 8, eh};
		if (i == v->popup_hover) {
			rounded(cr, e, 3);
			rgb(cr, 0x3a4350);
			cairo_fill(cr);
		}
		/* a tick on the chosen one, a mark on the one in use */
		const double tick = 18;
		if (v->popup_chosen[i])
			text_box(cr, log, -2, (sbui_rect){e.x + 3, e.y, tick - 3, two ? eh / 2 + 4 : eh},
			         "\xe2\x9c\x93", 13, OK, LEFT, false);
		double right = 0;
		if (v->popup_in_use[i]) {
			const char* tag = "\xe2\x97\x8f in use";
			const sbui_measure me = {sbui_draw_measure, cr};
			right = me.width(me.user, tag, 11.5) + 8;
			text_box(cr, log, -2, (sbui_rect){e.x + e.w - right, e.y, right - 6,
			                                  two ? eh / 2 + 4 : eh},
			         tag, 11.5, OK, RIGHT, false);
		}
		const sbui_rect title = {e.x + tick, e.y + (two ? 2 : 0), e.w - tick - right - 4,
		                         two ? eh / 2 : eh};
		text_box(cr, log, -2, title, v->popup_title[i], 13, TEXT, LEFT, false);
		if (two)
			text_box(cr, log, -2, (sbui_rect){e.x + tick, e.y + eh / 2, e.w - tick - 6, eh / 2 - 2},
			         v->popup_detail[i], 11.5, DIM, LEFT, false);
	}
}

static void tooltip(cairo_t* cr, sbui_view* v, sbui_textlog* log)
{
	if (!v->tip || !v->tip[0])
		return;
	const sbui_measure me = {sbui_draw_measure, cr};
	const double size = 12, lh = sbui_line_height(size);
	const double maxw = fmin(340, v->l->width - 24);
	char lines[SBUI_WRAP_MAX][SBUI_LINE];
	const int n = sbui_wrap(&me, v->tip, size, maxw, lines, 10);
	double w = 0;
	for (int i = 0; i < n; i++)
		w = fmax(w, me.width(me.user, lines[i], size));
	const sbui_rect r = sbui_tooltip_place(v->tip_x, v->tip_y, w + 16, n * lh + 10, v->l->width,
	                                       v->l->height);
	v->tip_rect = r;
	rounded(cr, r, 4);
	rgb(cr, 0xf4f1d6);
	cairo_fill_preserve(cr);
	rgb(cr, 0x807a50);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	for (int i = 0; i < n && 5 + (i + 1) * lh <= r.h + 0.01; i++)
		text_box(cr, log, -3, (sbui_rect){r.x + 8, r.y + 5 + i * lh, r.w - 16, lh}, lines[i], size,
		         0x202020, LEFT, false);
}

void sbui_draw(cairo_t* cr, sbui_view* v, sbui_textlog* log)
{
	const sbui_layout* l = v->l;
	log->n = 0;
	sbui_draw_font(cr);
	rgb(cr, BG);
	cairo_paint(cr);

	label(cr, v, log, SBUI_W_TITLE, 0xffffff, LEFT, false);
	button(cr, v, log, SBUI_W_ZOOM, false);
	label(cr, v, log, SBUI_W_DEVICE_LABEL, DIM, LEFT, false);
	button(cr, v, log, SBUI_W_DEVICE, true);
	text_lines(cr, v, log, SBUI_W_IN_USE, v->fallback ? WARN : OK, v->fallback ? WARN : DIM);
	button(cr, v, log, SBUI_W_RECORD, false);
	button(cr, v, log, SBUI_W_MODE, false);
	button(cr, v, log, SBUI_W_PRECISION, false);
	button(cr, v, log, SBUI_W_KEEP, false);
	label(cr, v, log, SBUI_W_MODEL_LABEL, DIM, LEFT, false);
	button(cr, v, log, SBUI_W_MODEL, false);
	button(cr, v, log, SBUI_W_INSTALL, false);
	text_lines(cr, v, log, SBUI_W_NOTICE, v->notice_rgb, v->notice_rgb);
	label(cr, v, log, SBUI_W_TOGGLES_LABEL, DIM, LEFT, false);
	for (int s = 0; s < SBUI_ROWS; s++)
		button(cr, v, log, SBUI_W_TOGGLE0 + s, false);
	lane(cr, v, log);
	label(cr, v, log, SBUI_W_LANE_CAPTION, DIM, LEFT, false);
	status_bar(cr, v, log);
	const unsigned dc = v->status->severity == SBUI_SEV_ERROR ? ERR
	                  : v->status->severity == SBUI_SEV_WARN  ? AMBER
	                                                          : SOFT;
	text_lines(cr, v, log, SBUI_W_DETAIL, dc, dc);
	label(cr, v, log, SBUI_W_STEMS_HEADING, v->status->stems_previous ? AMBER : 0xffffff, LEFT,
	      false);
	button(cr, v, log, SBUI_W_OPEN, false);
	button(cr, v, log, SBUI_W_COPY, false);
	label(cr, v, log, SBUI_W_FOLDER, v->folder_note ? AMBER : DIM, LEFT, !v->folder_note);
	rows(cr, v, log);
	if (l->placed[SBUI_W_MORE])
		text_box(cr, log, SBUI_W_MORE, l->r[SBUI_W_MORE], l->more, sbui_widget_font(SBUI_W_MORE),
		         DIM, LEFT, false);
	text_lines(cr, v, log, SBUI_W_BADGE, 0xe5c07b, 0xe5c07b);
	focus_ring(cr, v);
	popup(cr, v, log);
	tooltip(cr, v, log);
}
