/* The window's layout (gui/ui_layout.h) at every width from the minimum up and at several
 * heights, in the states a user meets (idle; done with six stems, a fallback, a notice, a long
 * error, a badge): nothing outside the window, no two parts on top of each other, every label
 * and every wrapped line inside its box, no text cut mid-character, the spare height given to
 * the take lane rather than left empty, the rows kept whole. Text is measured with fixed
 * advances per character class (close to DejaVu Sans), so the checks do not hang on a font. */
#include "ui_layout.h"

#include "../check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double advance(void* user, const char* s, double size)
{
	(void)user;
	double w = 0;
	for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
		const unsigned char c = *p;
		if ((c & 0xC0) == 0x80)
			continue; /* a UTF-8 continuation: counted with its lead byte */
		if (c >= 0x80)
			w += 0.9;
		else if (strchr("iljtf.,:;'|! ", c))
			w += 0.32;
		else if (strchr("mwMW", c))
			w += 0.9;
		else if (c >= 'A' && c <= 'Z')
			w += 0.68;
		else
			w += 0.58;
	}
	return w * size;
}

static const sbui_measure me = {advance, NULL};

/* A string is whole UTF-8: no character cut in two. */
static int utf8_whole(const char* s)
{
	for (const unsigned char* p = (const unsigned char*)s; *p;) {
		int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
		if (!n)
			return 0;
		for (int i = 1; i < n; i++)
			if ((p[i] & 0xC0) != 0x80)
				return 0;
		p += n;
	}
	return 1;
}

static const char* const LONG_ERROR =
	"HTDemucs 6 stems is not installed: install it from the plugin's window (Install), or run "
	"`stembridge models install htdemucs_6s`; take Lead-Vocals-take12 was not separated; the "
	"take's recording is kept at /home/someone/Music/Sessions/A Rather Long Session "
	"Name/plugins/17/scratch/stembridge/Lead-Vocals-take12/Lead-Vocals-take12-recording.wav";

static void full_content(sbui_content* c)
{
	memset(c, 0, sizeof *c);
	c->text[SBUI_W_TITLE] = "Stembridge";
	c->text[SBUI_W_ZOOM] = "Zoom auto (200 %)";
	c->text[SBUI_W_DEVICE_LABEL] = "Device";
	c->text[SBUI_W_DEVICE] = "Device 8 (not present)";
	c->text[SBUI_W_IN_USE] = "In use: CPU (2 threads), fallback\nDevice 8 is not on this machine (it "
	                         "has 2 devices besides the CPU): the CPU ran the take instead";
	c->text[SBUI_W_RECORD] = "\xe2\x97\x8f Armed";
	c->text[SBUI_W_MODE] = "Sequential";
	c->text[SBUI_W_PRECISION] = "BF16 (fast)";
	c->text[SBUI_W_KEEP] = "\xe2\x98\x90 Keep take";
	c->text[SBUI_W_MODEL_LABEL] = "Model";
	c->text[SBUI_W_MODEL] = "HTDemucs 6 stems (not installed)";
	c->text[SBUI_W_INSTALL] = "Install (55 MB)";
	c->text[SBUI_W_NOTICE] = "HTDemucs 6 stems is not installed: install it from the plugin's "
	                         "window (Install), or run `stembridge models install htdemucs_6s`";
	c->text[SBUI_W_TOGGLES_LABEL] = "Stems";
	static const char* const t[6] = {"\xe2\x98\x91 Vocals", "\xe2\x98\x91 Drums", "\xe2\x98\x91 Bass",
	                                 "\xe2\x98\x91 Other", "\xe2\x98\x90 Guitar", "\xe2\x98\x91 Piano"};
	for (int s = 0; s < 6; s++)
		c->text[SBUI_W_TOGGLE0 + s] = t[s];
	c->text[SBUI_W_LANE] = "";
	c->text[SBUI_W_LANE_CAPTION] = "Take 12 · 3:12.400 from 1:05.000 · peak -0.3 dB";
	c->text[SBUI_W_STATUS] = "Take 12 failed";
	c->text[SBUI_W_DETAIL] = LONG_ERROR;
	c->text[SBUI_W_STEMS_HEADING] = "Previous: take 11";
	c->text[SBUI_W_OPEN] = "Open folder";
	c->text[SBUI_W_COPY] = "Copy path";
	c->text[SBUI_W_FOLDER] = "/home/someone/Music/Sessions/A Rather Long Session Name/plugins/17/"
	                         "scratch/stembridge/Lead-Vocals-take11";
	static const char* const names[6] = {"Vocals", "Drums", "Bass", "Other", "Guitar", "Piano"};
	for (int k = 0; k < 6; k++) {
		c->text[sbui_row_part(k, SBUI_ROW_NAME)] = names[k];
		c->text[sbui_row_part(k, SBUI_ROW_WAVE)] = "";
		c->text[sbui_row_part(k, SBUI_ROW_LEVELS)] = "peak -12.3 dB · RMS -31.8 dB";
		c->text[sbui_row_part(k, SBUI_ROW_SOLO)] = "S";
		c->text[sbui_row_part(k, SBUI_ROW_MUTE)] = "M";
	}
	c->text[SBUI_W_BADGE] = "Playing the mix without drums in take 11 (1:05.000 to 4:17.400), "
	                        "while the transport is there";
}

/* Idle, nothing recorded yet. */
static void idle_content(sbui_content* c)
{
	full_content(c);
	c->text[SBUI_W_DEVICE] = "Auto";
	c->text[SBUI_W_IN_USE] = "In use: none yet\nAuto will use the CPU: no GPU here";
	c->text[SBUI_W_MODEL] = "Auto: Built-in";
	c->text[SBUI_W_INSTALL] = NULL;
	c->text[SBUI_W_NOTICE] = NULL;
	c->text[SBUI_W_TOGGLE0 + 4] = c->text[SBUI_W_TOGGLE0 + 5] = NULL; /* a four-stem model */
	c->text[SBUI_W_LANE_CAPTION] = NULL;
	c->text[SBUI_W_STATUS] = "Ready";
	c->text[SBUI_W_DETAIL] = "Arm Record and play the region: each stretch the transport rolls "
	                         "becomes a take, separated when it stops.";
	c->text[SBUI_W_STEMS_HEADING] = c->text[SBUI_W_OPEN] = c->text[SBUI_W_COPY] = NULL;
	c->text[SBUI_W_FOLDER] = NULL;
	for (int k = 0; k < 30; k++)
		c->text[SBUI_W_ROW0 + k] = NULL;
	c->text[SBUI_W_BADGE] = NULL;
}

/* Done with four stems, nothing wrong. */
static void done_content(sbui_content* c)
{
	full_content(c);
	c->text[SBUI_W_DEVICE] = "CPU";
	c->text[SBUI_W_IN_USE] = "In use: CPU (2 threads)";
	c->text[SBUI_W_MODEL] = "Auto: Built-in";
	c->text[SBUI_W_INSTALL] = c->text[SBUI_W_NOTICE] = NULL;
	c->text[SBUI_W_TOGGLE0 + 4] = c->text[SBUI_W_TOGGLE0 + 5] = NULL;
	c->text[SBUI_W_STATUS] = "Done: take 1, 4 stems";
	c->text[SBUI_W_DETAIL] = NULL;
	c->text[SBUI_W_STEMS_HEADING] = "Stems of take 1";
	for (int k = 4; k < 6; k++)
		for (int p = 0; p < 5; p++)
			c->text[sbui_row_part(k, p)] = NULL;
	c->text[SBUI_W_BADGE] = NULL;
}

static int overlap(sbui_rect a, sbui_rect b)
{
	const double e = 0.01;
	return a.x + e < b.x + b.w && b.x + e < a.x + a.w && a.y + e < b.y + b.h && b.y + e < a.y + a.h;
}

/* Every check that does not depend on the state; 'fits': the whole content fits the height. */
static void check_layout(const char* what, const sbui_content* c, double w, double h, bool fits)
{
	static sbui_layout l;
	sbui_layout_make(&me, c, w, h, &l);
	int bad = 0;
	for (int i = 0; i < SBUI_W_COUNT && bad < 3; i++) {
		if (!l.placed[i])
			continue;
		const sbui_rect r = l.r[i];
		if (r.x < 0 || r.y < 0 || r.x + r.w > w + 0.01 || r.w <= 0 || r.h <= 0 ||
		    (fits && r.y + r.h > h + 0.01)) {
			CHECK(0, "%s at %gx%g: part %d at %g,%g %gx%g is outside the window", what, w, h, i,
			      r.x, r.y, r.w, r.h);
			bad++;
		}
		for (int j = i + 1; j < SBUI_W_COUNT; j++)
			if (l.placed[j] && overlap(r, l.r[j])) {
				CHECK(0, "%s at %gx%g: parts %d and %d overlap", what, w, h, i, j);
				bad++;
			}
		/* one-line texts: as drawn (elided to the box, buttons with their padding) */
		if (!sbui_widget_is_wrapped(i) && c->text[i] && c->text[i][0]) {
			const double room = r.w - (sbui_widget_is_button(i) ? 12 : 0);
			char fit[SBUI_LINE];
			sbui_elide(&me, c->text[i], sbui_widget_font(i), room, i == SBUI_W_FOLDER, fit,
			           sizeof fit);
			CHECK(fit[0] && advance(NULL, fit, sbui_widget_font(i)) <= room + 0.01 &&
			      utf8_whole(fit),
			      "%s at %gx%g: part %d's text '%s' does not fit %g", what, w, h, i, fit, room);
		}
		const int slot = sbui_wrap_slot(i);
		for (int k = 0; slot >= 0 && k < l.n_lines[slot]; k++)
			CHECK(advance(NULL, l.lines[slot][k], sbui_widget_font(i)) <= r.w + 0.01 &&
			      utf8_whole(l.lines[slot][k]),
			      "%s at %gx%g: line '%s' of part %d is wider than %g", what, w, h,
			      l.lines[slot][k], i, r.w);
	}
	if (fits)
		CHECK(l.bottom <= h, "%s at %gx%g: the content ends at %g", what, w, h, l.bottom);
}

static void test_widths(void)
{
	sbui_content full, idle, done;
	full_content(&full);
	idle_content(&idle);
	done_content(&done);
	for (double w = SBUI_MIN_W; w <= 1600; w += 10) {
		check_layout("idle", &idle, w, SBUI_MIN_H, true);
		check_layout("done", &done, w, SBUI_MIN_H, true);
		check_layout("done", &done, w, SBUI_BASE_H, true);
		check_layout("everything", &full, w, 900, true);
		/* at the smallest height the worst case may not fit: still nothing overlaps */
		check_layout("everything", &full, w, SBUI_MIN_H, false);
	}
}

/* The lower part of the window is not left empty: spare height goes to the lane; at the
 * default size the four rows of a done take and its lane are all there, the status message is
 * whole (not cut after three lines). */
static void test_heights(void)
{
	sbui_content done, full;
	done_content(&done);
	full_content(&full);
	static sbui_layout l;
	for (double h = SBUI_BASE_H; h <= 1400; h += 50) {
		sbui_layout_make(&me, &done, SBUI_BASE_W, h, &l);
		const double lane = l.r[SBUI_W_LANE].h;
		CHECK(l.rows_shown == 4 && l.rows_hidden == 0, "done at %g high: %d rows shown", h,
		      l.rows_shown);
		CHECK(l.bottom >= h - 16 || lane >= 0.42 * h - 0.01,
		      "done at %g high: the content ends at %g with a lane of %g", h, l.bottom, lane);
	}
	sbui_layout_make(&me, &full, SBUI_BASE_W, 900, &l);
	CHECK(l.rows_shown == 6 && l.placed[SBUI_W_BADGE], "everything at 600x900: %d rows, badge %d",
	      l.rows_shown, l.placed[SBUI_W_BADGE]);
	/* the error wraps in full: its last word is on its last line */
	const int n = l.n_lines[SBUI_WRAP_DETAIL];
	CHECK(n >= 4 && strstr(l.lines[SBUI_WRAP_DETAIL][n - 1], "recording.wav") &&
	      !strstr(l.lines[SBUI_WRAP_DETAIL][n - 1], "\xe2\x80\xa6"),
	      "the error's %d lines end with '%s'", n, n ? l.lines[SBUI_WRAP_DETAIL][n - 1] : "");
	/* a window too low for every row says how many it could not show */
	sbui_layout_make(&me, &full, SBUI_MIN_W, SBUI_MIN_H, &l);
	CHECK(l.rows_shown + l.rows_hidden == 6 && (l.rows_hidden == 0 || (l.placed[SBUI_W_MORE] &&
	                                                                   strstr(l.more, "more stem"))),
	      "at the minimum size: %d rows, %d hidden, '%s'", l.rows_shown, l.rows_hidden, l.more);
	/* buttons reflow: at the minimum width the four of the record row take two rows */
	sbui_layout_make(&me, &full, SBUI_MIN_W, 900, &l);
	CHECK(l.r[SBUI_W_PRECISION].y > l.r[SBUI_W_RECORD].y, "the record row did not wrap at %g",
	      SBUI_MIN_W);
	sbui_layout_make(&me, &full, SBUI_BASE_W, 900, &l);
	CHECK(l.r[SBUI_W_KEEP].y == l.r[SBUI_W_RECORD].y, "the record row wrapped at %g", SBUI_BASE_W);
}

/* text without its spaces */
static void squeeze(const char* s, char* out)
{
	for (; *s; s++)
		if (*s != ' ')
			*out++ = *s;
	*out = '\0';
}

static void test_text(void)
{
	char out[SBUI_LINE];
	/* whole when it fits; cut with an ellipsis at a character boundary otherwise */
	sbui_elide(&me, "Vocals", 12, 200, false, out, sizeof out);
	CHECK(!strcmp(out, "Vocals"), "'%s'", out);
	const char* s = "Gr\xc3\xbc\xc3\x9f" "e aus K\xc3\xb6ln \xe2\x99\xab \xe2\x99\xab \xe2\x99\xab";
	for (double w = 0; w <= 200; w += 1) {
		sbui_elide(&me, s, 12, w, false, out, sizeof out);
		CHECK(utf8_whole(out) && advance(NULL, out, 12) <= w + 0.01, "at %g: '%s'", w, out);
		sbui_elide(&me, s, 12, w, true, out, sizeof out);
		CHECK(utf8_whole(out) && advance(NULL, out, 12) <= w + 0.01, "end at %g: '%s'", w, out);
	}
	/* a path keeps its file name */
	sbui_elide(&me, "/very/long/folder/of/the/session/take3/Lead-take3-vocals.wav", 12, 190, true,
	           out, sizeof out);
	CHECK(!strncmp(out, "\xe2\x80\xa6", 3) && strstr(out, "Lead-take3-vocals.wav"), "'%s'", out);

	/* wrapping: every word kept, in order, each line inside the width */
	char lines[SBUI_WRAP_MAX][SBUI_LINE];
	for (double w = 60; w <= 600; w += 7) {
		const int n = sbui_wrap(&me, LONG_ERROR, 12, w, lines, SBUI_WRAP_MAX);
		char back[4096] = "";
		for (int i = 0; i < n; i++) {
			CHECK(advance(NULL, lines[i], 12) <= w + 0.01 && utf8_whole(lines[i]),
			      "at %g: line '%s'", w, lines[i]);
			strcat(back, lines[i]);
		}
		char want[4096], got[4096];
		squeeze(LONG_ERROR, want);
		squeeze(back, got);
		CHECK(n == SBUI_WRAP_MAX || !strcmp(got, want), "at %g: %d lines lost text", w, n);
	}
	/* more lines than allowed: the last one ends in an ellipsis */
	const int n = sbui_wrap(&me, LONG_ERROR, 12, 120, lines, 3);
	CHECK(n == 3 && strstr(lines[2], "\xe2\x80\xa6"), "%d lines, last '%s'", n, lines[n - 1]);
	/* paragraphs */
	const int p = sbui_wrap(&me, "In use: CPU\nAuto chose the CPU", 12, 500, lines, 4);
	CHECK(p == 2 && !strcmp(lines[0], "In use: CPU") && !strcmp(lines[1], "Auto chose the CPU"),
	      "%d: '%s' '%s'", p, lines[0], lines[1]);
}

static void test_popup_tooltip_scale(void)
{
	double eh = 0;
	for (double h = SBUI_MIN_H; h <= 1000; h += 20)
		for (double w = SBUI_MIN_W; w <= 1200; w += 40) {
			const sbui_rect anchor = {74, 42, w - 88, 28};
			const sbui_rect r = sbui_popup_place(anchor, 11, w, h, &eh);
			CHECK(r.x >= 0 && r.y >= 0 && r.x + r.w <= w && r.y + r.h <= h && eh >= 22 &&
			      11 * eh <= r.h + 0.01,
			      "popup at %gx%g: %g,%g %gx%g, entries %g", w, h, r.x, r.y, r.w, r.h, eh);
			for (double px = 0; px <= w; px += w / 7)
				for (double py = 0; py <= h; py += h / 7) {
					const sbui_rect t = sbui_tooltip_place(px, py, 330, 110, w, h);
					CHECK(t.x >= 4 - 0.01 && t.y >= 4 - 0.01 && t.x + t.w <= w - 4 + 0.01 &&
					      t.y + t.h <= h - 4 + 0.01,
					      "tooltip for %g,%g in %gx%g: %g,%g %gx%g", px, py, w, h, t.x, t.y, t.w,
					      t.h);
				}
		}
	const char* src = NULL;
	CHECK(sbui_scale_pick(0, 2, 192, &src) == 2 && !strcmp(src, "host"), "host first: %s", src);
	CHECK(sbui_scale_pick(0, 0, 144, &src) == 1.5 && !strcmp(src, "Xft.dpi"), "then Xft.dpi");
	CHECK(sbui_scale_pick(0, 0, 0, &src) == 1 && !strcmp(src, "default"), "then 1");
	CHECK(sbui_scale_pick(1.25, 2, 192, &src) == 1.25 && !strcmp(src, "zoom"),
	      "the zoom chosen wins");
	CHECK(sbui_scale_pick(0, 9, 0, NULL) == 4 && sbui_scale_pick(0, 0, 10, NULL) == 0.5,
	      "clamped");
	double z = 0;
	const double want[] = {1.0, 1.25, 1.5, 1.75, 2.0, 0};
	for (int i = 0; i < 6; i++) {
		z = sbui_zoom_step(z, +1);
		CHECK(z == want[i], "zoom step %d: %g", i, z);
	}
	CHECK(sbui_zoom_step(0, -1) == 2.0, "back from auto");
}

int main(void)
{
	test_text();
	test_widths();
	test_heights();
	test_popup_tooltip_scale();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		fprintf(stderr, "ui_layout: ok\n");
	return failures ? 1 : 0;
}
