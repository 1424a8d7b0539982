/* Where everything in the window goes. See ui_layout.h. */
#include "ui_layout.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026 */
#define MARGIN 14.0
#define GAP 6.0
#define LABEL_W 60.0   /* "Device", "Model", "Stems" before their controls */
#define BUTTON_H 28.0
#define TOGGLE_H 26.0
#define PAD 22.0       /* a button's label to its edges, both sides together */

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

static double width_of(const sbui_measure* me, const char* s, size_t n, double size)
{
	char buf[SBUI_LINE * 4];
	if (n >= sizeof buf)
		n = sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return me->width(me->user, buf, size);
}

/* The byte offset just after the k-th character of s (k counted from the start, or from the
 * end when from_end). */
static size_t char_offset(const char* s, size_t len, size_t k, bool from_end)
{
	if (!from_end) {
		size_t i = 0;
		for (size_t c = 0; c < k && i < len; c++)
			do
				i++;
			while (i < len && is_cont((unsigned char)s[i]));
		return i;
	}
	size_t i = len;
	for (size_t c = 0; c < k && i > 0; c++)
		do
			i--;
		while (i > 0 && is_cont((unsigned char)s[i]));
	return i;
}

static size_t char_count(const char* s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += !is_cont((unsigned char)s[i]);
	return n;
}

void sbui_elide(const sbui_measure* me, const char* text, double size, double w, bool keep_end,
                char* out, int outsize)
{
	const size_t len = strlen(text);
	if (me->width(me->user, text, size) <= w) {
		snprintf(out, (size_t)outsize, "%s", text);
		return;
	}
	/* the most characters that fit beside the ellipsis: a binary search over whole ones */
	size_t lo = 0, hi = char_count(text, len);
	char buf[SBUI_LINE * 4];
	while (lo < hi) {
		const size_t mid = (lo + hi + 1) / 2;
		const size_t at = char_offset(text, len, mid, keep_end);
		if (keep_end)
			snprintf(buf, sizeof buf, "%s%s", ELLIPSIS, text + at);
		else
			snprintf(buf, sizeof buf, "%.*s%s", (int)at, text, ELLIPSIS);
		if (me->width(me->user, buf, size) <= w)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo == 0 && me->width(me->user, ELLIPSIS, size) > w) {
		out[0] = '\0';
		return;
	}
	const size_t at = char_offset(text, len, lo, keep_end);
	if (keep_end) {
		snprintf(out, (size_t)outsize, "%s%s", ELLIPSIS, text + at);
	} else {
		size_t n = at;
		while (n > 0 && text[n - 1] == ' ')
			n--;
		snprintf(out, (size_t)outsize, "%.*s%s", (int)n, text, ELLIPSIS);
	}
}

/* The longest run of whole characters from s (at most len bytes) that fits w, preferring to
 * end after a '/', '-' or '_' when that keeps at least half of it (paths and long names). At
 * least one character. */
static size_t cut_word(const sbui_measure* me, const char* s, size_t len, double size, double w)
{
	size_t lo = 1, hi = char_count(s, len);
	while (lo < hi) {
		const size_t mid = (lo + hi + 1) / 2;
		if (width_of(me, s, char_offset(s, len, mid, false), size) <= w)
			lo = mid;
		else
			hi = mid - 1;
	}
	const size_t at = char_offset(s, len, lo, false);
	for (size_t i = at; i > at / 2; i--)
		if (s[i - 1] == '/' || s[i - 1] == '-' || s[i - 1] == '_')
			return i;
	return at;
}

static void put_line(char line[SBUI_LINE], const char* s, size_t n)
{
	if (n >= SBUI_LINE)
		n = char_offset(s, n, char_count(s, SBUI_LINE - 1) - 1, false);
	memcpy(line, s, n);
	line[n] = '\0';
}

int sbui_wrap(const sbui_measure* me, const char* text, double size, double w,
              char lines[][SBUI_LINE], int max)
{
	int n = 0;
	const char* p = text;
	while (*p && n < max) {
		while (*p == ' ')
			p++;
		if (*p == '\n') { /* a paragraph's end */
			p++;
			continue;
		}
		if (!*p)
			break;
		/* the most whole words that fit */
		const char* best = NULL;
		for (const char* q = p;;) {
			const char* e = q;
			while (*e && *e != ' ' && *e != '\n')
				e++;
			if (width_of(me, p, (size_t)(e - p), size) > w)
				break;
			best = e;
			if (*e != ' ')
				break;
			q = e;
			while (*q == ' ')
				q++;
			if (!*q || *q == '\n')
				break;
		}
		const char* end = best;
		if (!end) { /* one word wider than the line: cut at a character */
			const char* e = p;
			while (*e && *e != ' ' && *e != '\n')
				e++;
			end = p + cut_word(me, p, (size_t)(e - p), size, w);
		}
		/* the last line there is room for, and more to come: the rest, with an ellipsis */
		const char* rest = end;
		while (*rest == ' ' || *rest == '\n')
			rest++;
		if (n == max - 1 && *rest) {
			char flat[SBUI_LINE * 4];
			snprintf(flat, sizeof flat, "%s", p);
			for (char* f = flat; *f; f++)
				if (*f == '\n')
					*f = ' ';
			sbui_elide(me, flat, size, w, false, lines[n++], SBUI_LINE);
			return n;
		}
		put_line(lines[n++], p, (size_t)(end - p));
		p = end;
	}
	return n;
}

bool sbui_widget_is_button(int w)
{
	if (w >= SBUI_W_ROW0 && w < SBUI_W_MORE) {
		const int part = (w - SBUI_W_ROW0) % 5;
		return part == SBUI_ROW_SOLO || part == SBUI_ROW_MUTE;
	}
	return w == SBUI_W_ZOOM || w == SBUI_W_DEVICE || w == SBUI_W_RECORD || w == SBUI_W_MODE ||
	       w == SBUI_W_PRECISION || w == SBUI_W_KEEP || w == SBUI_W_MODEL ||
	       w == SBUI_W_INSTALL || (w >= SBUI_W_TOGGLE0 && w < SBUI_W_TOGGLE0 + SBUI_ROWS) ||
	       w == SBUI_W_OPEN || w == SBUI_W_COPY;
}

int sbui_wrap_slot(int w)
{
	return w == SBUI_W_IN_USE ? SBUI_WRAP_IN_USE
	     : w == SBUI_W_NOTICE ? SBUI_WRAP_NOTICE
	     : w == SBUI_W_DETAIL ? SBUI_WRAP_DETAIL
	     : w == SBUI_W_BADGE  ? SBUI_WRAP_BADGE
	                          : -1;
}

bool sbui_widget_is_wrapped(int w) { return sbui_wrap_slot(w) >= 0; }

double sbui_widget_font(int w)
{
	if (w == SBUI_W_TITLE)
		return 17.0;
	if (w == SBUI_W_ZOOM || w == SBUI_W_LANE_CAPTION || w == SBUI_W_FOLDER || w == SBUI_W_MORE)
		return 11.5;
	if (w >= SBUI_W_ROW0 && w < SBUI_W_MORE) {
		const int part = (w - SBUI_W_ROW0) % 5;
		return part == SBUI_ROW_NAME ? 12.5 : part == SBUI_ROW_LEVELS ? 11.5 : 12.0;
	}
	if (sbui_widget_is_wrapped(w) || w == SBUI_W_STATUS)
		return 12.0;
	return 13.0;
}

double sbui_line_height(double size) { return ceil(size * 1.35); }

static void place(sbui_layout* l, int w, double x, double y, double wd, double h)
{
	l->r[w] = (sbui_rect){x, y, wd, h};
	l->placed[w] = true;
	if (y + h > l->bottom)
		l->bottom = y + h;
}

static double text_w(const sbui_measure* me, const char* s, int w)
{
	return s ? me->width(me->user, s, sbui_widget_font(w)) : 0.0;
}

/* A row of buttons, equal widths, as many a row as fit their labels: n ids from first, those
 * with a text. Returns the height used. */
static double flow(const sbui_measure* me, const sbui_content* c, sbui_layout* l, const int* ids,
                   int n, double x, double y, double wd, double h)
{
	int shown[SBUI_ROWS + 4], k = 0;
	double widest = 0;
	for (int i = 0; i < n; i++)
		if (c->text[ids[i]]) {
			shown[k++] = ids[i];
			widest = fmax(widest, text_w(me, c->text[ids[i]], ids[i]) + PAD);
		}
	if (!k)
		return 0;
	const double gap = 8.0;
	int per = k;
	while (per > 1 && (wd - gap * (per - 1)) / per < widest)
		per--;
	/* even rows: 6 as 3 + 3 rather than 5 + 1 */
	const int rows = (k + per - 1) / per;
	per = (k + rows - 1) / rows;
	const double cell = (wd - gap * (per - 1)) / per;
	for (int i = 0; i < k; i++)
		place(l, shown[i], x + (i % per) * (cell + gap), y + (i / per) * (h + gap), cell, h);
	return rows * h + (rows - 1) * gap;
}

static double wrapped(const sbui_measure* me, const sbui_content* c, sbui_layout* l, int w,
                      double x, double y, double wd, int max)
{
	const int slot = sbui_wrap_slot(w);
	if (!c->text[w] || !c->text[w][0]) {
		l->n_lines[slot] = 0;
		return 0;
	}
	const double size = sbui_widget_font(w);
	l->n_lines[slot] = sbui_wrap(me, c->text[w], size, wd, l->lines[slot], max);
	const double h = l->n_lines[slot] * sbui_line_height(size);
	place(l, w, x, y, wd, h);
	return h;
}

/* Everything from the top, the lane lane_h high and each stem row row_h, at most max_rows
 * rows. Returns the bottom edge. */
static double place_all(const sbui_measure* me, const sbui_content* c, sbui_layout* l,
                        double lane_h, double row_h, int max_rows)
{
	const double width = l->width;
	memset(l->placed, 0, sizeof l->placed);
	l->bottom = 0;
	const double x0 = MARGIN, W = width - 2 * MARGIN;
	double y = 10;

	/* title, and the zoom at the right */
	const double zw = c->text[SBUI_W_ZOOM] ? text_w(me, c->text[SBUI_W_ZOOM], SBUI_W_ZOOM) + 18 : 0;
	place(l, SBUI_W_TITLE, x0, y, fmin(text_w(me, c->text[SBUI_W_TITLE], SBUI_W_TITLE) + 4,
	                                   W - zw - 8), 24);
	if (zw)
		place(l, SBUI_W_ZOOM, x0 + W - zw, y + 2, zw, 22);
	y += 32;

	/* the device, what ran and why */
	place(l, SBUI_W_DEVICE_LABEL, x0, y, LABEL_W - 4, BUTTON_H);
	place(l, SBUI_W_DEVICE, x0 + LABEL_W, y, W - LABEL_W, BUTTON_H);
	y += BUTTON_H + 4;
	const double iu = wrapped(me, c, l, SBUI_W_IN_USE, x0 + LABEL_W, y, W - LABEL_W, 6);
	y += iu ? iu + GAP : 2;

	/* record, mode, precision, keep */
	static const int row_ids[4] = {SBUI_W_RECORD, SBUI_W_MODE, SBUI_W_PRECISION, SBUI_W_KEEP};
	y += flow(me, c, l, row_ids, 4, x0, y, W, BUTTON_H) + 8;

	/* the model, its install button, its notice */
	place(l, SBUI_W_MODEL_LABEL, x0, y, LABEL_W - 4, BUTTON_H);
	const double iw = c->text[SBUI_W_INSTALL] ? text_w(me, c->text[SBUI_W_INSTALL], SBUI_W_INSTALL) + PAD
	                                          : 0;
	if (iw && W - LABEL_W - iw - 8 >= 150) {
		place(l, SBUI_W_MODEL, x0 + LABEL_W, y, W - LABEL_W - iw - 8, BUTTON_H);
		place(l, SBUI_W_INSTALL, x0 + W - iw, y, iw, BUTTON_H);
		y += BUTTON_H + 4;
	} else {
		place(l, SBUI_W_MODEL, x0 + LABEL_W, y, W - LABEL_W, BUTTON_H);
		y += BUTTON_H + 4;
		if (iw) {
			place(l, SBUI_W_INSTALL, x0 + LABEL_W, y, fmin(iw, W - LABEL_W), BUTTON_H);
			y += BUTTON_H + 4;
		}
	}
	const double nh = wrapped(me, c, l, SBUI_W_NOTICE, x0 + LABEL_W, y, W - LABEL_W, 6);
	y += nh ? nh + GAP : 2;

	/* the stems to write */
	int toggles[SBUI_ROWS];
	bool any = false;
	for (int s = 0; s < SBUI_ROWS; s++) {
		toggles[s] = SBUI_W_TOGGLE0 + s;
		any = any || c->text[toggles[s]];
	}
	if (any) {
		place(l, SBUI_W_TOGGLES_LABEL, x0, y, LABEL_W - 4, TOGGLE_H);
		y += flow(me, c, l, toggles, SBUI_ROWS, x0 + LABEL_W, y, W - LABEL_W, TOGGLE_H) + 10;
	}

	/* the take lane and its caption */
	if (c->text[SBUI_W_LANE]) {
		place(l, SBUI_W_LANE, x0, y, W, lane_h);
		y += lane_h + 3;
		if (c->text[SBUI_W_LANE_CAPTION]) {
			place(l, SBUI_W_LANE_CAPTION, x0, y, W, 16);
			y += 16;
		}
		y += 6;
	}

	/* the status, its message in full */
	place(l, SBUI_W_STATUS, x0, y, W, 24);
	y += 24 + 4;
	const double dh = wrapped(me, c, l, SBUI_W_DETAIL, x0, y, W, SBUI_WRAP_MAX);
	y += dh ? dh + GAP : 2;

	/* the stems: their heading, where they are, a row each */
	l->rows_shown = l->rows_hidden = 0;
	if (c->text[SBUI_W_STEMS_HEADING]) {
		const double ow = c->text[SBUI_W_OPEN] ? text_w(me, c->text[SBUI_W_OPEN], SBUI_W_OPEN) + PAD : 0;
		const double cw = c->text[SBUI_W_COPY] ? text_w(me, c->text[SBUI_W_COPY], SBUI_W_COPY) + PAD : 0;
		const double hw = text_w(me, c->text[SBUI_W_STEMS_HEADING], SBUI_W_STEMS_HEADING) + 4;
		const double bw = ow + cw + (ow && cw ? 6 : 0);
		if (hw + 10 + bw <= W) {
			place(l, SBUI_W_STEMS_HEADING, x0, y, W - bw - 10, 26);
			if (ow)
				place(l, SBUI_W_OPEN, x0 + W - bw, y, ow, 26);
			if (cw)
				place(l, SBUI_W_COPY, x0 + W - cw, y, cw, 26);
			y += 26 + 4;
		} else { /* the buttons under the heading, halves of the width */
			place(l, SBUI_W_STEMS_HEADING, x0, y, W, 20);
			y += 20 + 4;
			const double half = (W - 6) / 2;
			if (ow)
				place(l, SBUI_W_OPEN, x0, y, cw ? half : W, 26);
			if (cw)
				place(l, SBUI_W_COPY, ow ? x0 + half + 6 : x0, y, ow ? half : W, 26);
			y += 26 + 4;
		}
		if (c->text[SBUI_W_FOLDER]) {
			place(l, SBUI_W_FOLDER, x0, y, W, 16);
			y += 16 + 4;
		}
		/* a row: name, waveform, levels, S, M */
		double name_w = 0, levels_w = 0;
		for (int k = 0; k < SBUI_ROWS; k++) {
			const int nm = sbui_row_part(k, SBUI_ROW_NAME), lv = sbui_row_part(k, SBUI_ROW_LEVELS);
			name_w = fmax(name_w, text_w(me, c->text[nm], nm) + 8);
			levels_w = fmax(levels_w, text_w(me, c->text[lv], lv) + 8);
		}
		const double sm = 28, gap = 6;
		name_w = fmin(name_w, W * 0.22);
		levels_w = fmin(levels_w, W * 0.34);
		const double wave_w = W - name_w - levels_w - 2 * sm - 4 * gap;
		for (int k = 0; k < SBUI_ROWS; k++) {
			if (!c->text[sbui_row_part(k, SBUI_ROW_NAME)])
				continue;
			if (l->rows_shown >= max_rows) {
				l->rows_hidden++;
				continue;
			}
			double x = x0;
			place(l, sbui_row_part(k, SBUI_ROW_NAME), x, y, name_w, row_h);
			x += name_w + gap;
			place(l, sbui_row_part(k, SBUI_ROW_WAVE), x, y + 2, wave_w, row_h - 4);
			x += wave_w + gap;
			place(l, sbui_row_part(k, SBUI_ROW_LEVELS), x, y, levels_w, row_h);
			x += levels_w + gap;
			place(l, sbui_row_part(k, SBUI_ROW_SOLO), x, y + 2, sm, row_h - 4);
			place(l, sbui_row_part(k, SBUI_ROW_MUTE), x + sm + gap, y + 2, sm, row_h - 4);
			y += row_h + 2;
			l->rows_shown++;
		}
		if (l->rows_hidden) {
			snprintf(l->more, sizeof l->more, "%d more stem%s: make the window taller",
			         l->rows_hidden, l->rows_hidden == 1 ? "" : "s");
			place(l, SBUI_W_MORE, x0, y, W, 16);
			y += 16 + 2;
		}
		y += 4;
	}
	const double bh = wrapped(me, c, l, SBUI_W_BADGE, x0, y, W, 3);
	y += bh;
	return y;
}

void sbui_layout_make(const sbui_measure* me, const sbui_content* c, double width, double height,
                      sbui_layout* out)
{
	out->width = width;
	out->height = height;
	out->more[0] = '\0';
	/* the lane and the rows give up height first, then the last rows go */
	static const double lanes[] = {72, 60, 48, 40}, rows[] = {28, 26, 24, 22};
	const double lane_max = fmax(72, 0.42 * height);
	for (int i = 0; i < 4; i++) {
		const double bottom = place_all(me, c, out, lanes[i], rows[i], SBUI_ROWS);
		if (bottom > height - 8)
			continue;
		/* height to spare goes to the lane (the take is what the window is about), up to
		 * lane_max; the rest stays below the last row */
		if (i == 0 && c->text[SBUI_W_LANE] && bottom < height - 8)
			place_all(me, c, out, fmin(lane_max, lanes[0] + height - 8 - bottom), rows[0],
			          SBUI_ROWS);
		return;
	}
	for (int max = SBUI_ROWS - 1; max >= 0; max--)
		if (place_all(me, c, out, 40, 22, max) <= height - 8 || max == 0)
			return;
}

sbui_rect sbui_popup_place(sbui_rect anchor, int n, double width, double height, double* entry_h)
{
	double eh = 38;
	const double room = height - 16;
	if (n * eh > room)
		eh = fmax(22, floor(room / n));
	*entry_h = eh;
	sbui_rect r = {anchor.x, anchor.y + anchor.h + 2, fmax(anchor.w, fmin(320, width - 16)),
	               n * eh + 8};
	if (r.x + r.w > width - 8)
		r.x = width - 8 - r.w;
	if (r.x < 8) {
		r.x = 8;
		r.w = fmin(r.w, width - 16);
	}
	if (r.y + r.h > height - 8) /* above the anchor, else as low as fits */
		r.y = anchor.y - 2 - r.h >= 8 ? anchor.y - 2 - r.h : fmax(8, height - 8 - r.h);
	if (r.h > height - 16)
		r.h = height - 16;
	return r;
}

sbui_rect sbui_tooltip_place(double px, double py, double w, double h, double width, double height)
{
	sbui_rect r = {px + 12, py + 18, fmin(w, width - 8), fmin(h, height - 8)};
	if (r.x + r.w > width - 4)
		r.x = width - 4 - r.w;
	if (r.x < 4)
		r.x = 4;
	if (r.y + r.h > height - 4) /* above the pointer */
		r.y = py - 8 - r.h;
	if (r.y < 4)
		r.y = 4;
	return r;
}

double sbui_scale_pick(double own, double host, double dpi, const char** source)
{
	double s = 1.0;
	const char* from = "default";
	if (own > 0) {
		s = own;
		from = "zoom";
	} else if (host > 0) {
		s = host;
		from = "host";
	} else if (dpi > 0) {
		s = dpi / 96.0;
		from = "Xft.dpi";
	}
	if (source)
		*source = from;
	return s < 0.5 ? 0.5 : s > 4.0 ? 4.0 : s;
}

double sbui_zoom_step(double own, int dir)
{
	static const double steps[] = {0, 1.0, 1.25, 1.5, 1.75, 2.0};
	const int n = (int)(sizeof steps / sizeof steps[0]);
	int at = 0;
	for (int i = 0; i < n; i++)
		if (fabs(steps[i] - own) < 1e-3)
			at = i;
	return steps[((at + (dir >= 0 ? 1 : -1)) % n + n) % n];
}

void sbui_widget_name(int w, const char* row_stem, char* out, int osize)
{
	const size_t size = (size_t)osize;
	static const char* const names[] = {
		[SBUI_W_TITLE] = "title", [SBUI_W_ZOOM] = "zoom", [SBUI_W_DEVICE_LABEL] = "device-label",
		[SBUI_W_DEVICE] = "device", [SBUI_W_IN_USE] = "in-use", [SBUI_W_RECORD] = "record",
		[SBUI_W_MODE] = "mode", [SBUI_W_PRECISION] = "precision", [SBUI_W_KEEP] = "keep",
		[SBUI_W_MODEL_LABEL] = "model-label", [SBUI_W_MODEL] = "model",
		[SBUI_W_INSTALL] = "install", [SBUI_W_NOTICE] = "notice",
		[SBUI_W_TOGGLES_LABEL] = "stems-label", [SBUI_W_LANE] = "lane",
		[SBUI_W_LANE_CAPTION] = "lane-caption", [SBUI_W_STATUS] = "status",
		[SBUI_W_DETAIL] = "detail", [SBUI_W_STEMS_HEADING] = "stems-heading",
		[SBUI_W_OPEN] = "open-folder", [SBUI_W_COPY] = "copy-path", [SBUI_W_FOLDER] = "folder",
		[SBUI_W_MORE] = "more", [SBUI_W_BADGE] = "badge"};
	static const char* const parts[5] = {"name", "wave", "levels", "solo", "mute"};
	if (w == -2) {
		snprintf(out, size, "popup");
	} else if (w == -3) {
		snprintf(out, size, "tooltip");
	} else if (w >= SBUI_W_TOGGLE0 && w < SBUI_W_TOGGLE0 + SBUI_ROWS) {
		static const char* const keys[SBUI_ROWS] = {"vocals", "drums", "bass", "other", "guitar",
		                                            "piano"};
		snprintf(out, size, "toggle:%s", keys[w - SBUI_W_TOGGLE0]);
	} else if (w >= SBUI_W_ROW0 && w < SBUI_W_MORE) {
		snprintf(out, size, "%s:%s", parts[(w - SBUI_W_ROW0) % 5], row_stem ? row_stem : "?");
	} else if (w >= 0 && w < (int)(sizeof names / sizeof names[0]) && names[w]) {
		snprintf(out, size, "%s", names[w]);
	} else {
		snprintf(out, size, "w%d", w);
	}
}
