/* Where everything in the window goes, at any width from the minimum up: rows that reflow
 * (buttons wrap onto a second row rather than shrink below their labels), texts that wrap in
 * full (errors, notices, a silent take's advice) or are cut with an ellipsis at a character
 * boundary (never a word cut mid-letter, never a clip), the take lane and the stem rows taking
 * the height that is left. Also where the device list, a tooltip and the window's scale go.
 *
 * Text is measured through a callback (cairo in the window, a fixed advance in the tests), so
 * this is pure arithmetic (tests/gui/test_ui_layout.c). All units are the window's unscaled
 * ones: the drawing scales them by the window's scale factor.
 *
 * Thread: the host's UI thread; nothing here allocates or blocks.
 */
#ifndef SBUI_LAYOUT_H
#define SBUI_LAYOUT_H

#include <stdbool.h>

#define SBUI_BASE_W 600.0  /* the window's size at scale 1 */
#define SBUI_BASE_H 600.0
#define SBUI_MIN_W 380.0   /* its smallest */
#define SBUI_MIN_H 460.0
#define SBUI_LINE 512      /* bytes of one line of text */
#define SBUI_WRAP_MAX 16   /* lines of one wrapped text */
#define SBUI_ROWS 6        /* stem rows */

typedef struct {
	double x, y, w, h;
} sbui_rect;

typedef double (*sbui_measure_fn)(void* user, const char* text, double size);
typedef struct {
	sbui_measure_fn width; /* the advance of 'text' at font size 'size' */
	void* user;
} sbui_measure;

/* Fits text on one line of width w: whole, or cut at a character boundary with "…" at its end
 * (keep_end: at its start, so a path keeps its file name). */
void sbui_elide(const sbui_measure* me, const char* text, double size, double w, bool keep_end,
                char* out, int outsize);
/* Splits text into lines no wider than w, at spaces and at '\n'; a word wider than a line is
 * cut at a character boundary and goes on on the next line. Returns the number of lines (at
 * most max; when more are needed, the last one ends in "…"). */
int sbui_wrap(const sbui_measure* me, const char* text, double size, double w,
              char lines[][SBUI_LINE], int max);

/* The window's parts. Wrapped texts: IN_USE, NOTICE, DETAIL, BADGE. */
typedef enum {
	SBUI_W_TITLE = 0, SBUI_W_ZOOM,
	SBUI_W_DEVICE_LABEL, SBUI_W_DEVICE, SBUI_W_IN_USE,
	SBUI_W_RECORD, SBUI_W_MODE, SBUI_W_PRECISION, SBUI_W_KEEP,
	SBUI_W_MODEL_LABEL, SBUI_W_MODEL, SBUI_W_INSTALL, SBUI_W_NOTICE,
	SBUI_W_TOGGLES_LABEL, SBUI_W_TOGGLE0, /* .. SBUI_W_TOGGLE0 + 5: vocals .. piano */
	SBUI_W_LANE = SBUI_W_TOGGLE0 + SBUI_ROWS, SBUI_W_LANE_CAPTION,
	SBUI_W_STATUS, SBUI_W_DETAIL,
	SBUI_W_STEMS_HEADING, SBUI_W_OPEN, SBUI_W_COPY, SBUI_W_FOLDER,
	SBUI_W_ROW0, /* five parts a row (SBUI_ROW_*), SBUI_ROWS rows */
	SBUI_W_MORE = SBUI_W_ROW0 + 5 * SBUI_ROWS, SBUI_W_BADGE,
	SBUI_W_COUNT
} sbui_widget;
enum { SBUI_ROW_NAME = 0, SBUI_ROW_WAVE, SBUI_ROW_LEVELS, SBUI_ROW_SOLO, SBUI_ROW_MUTE };
static inline int sbui_row_part(int row, int part) { return SBUI_W_ROW0 + 5 * row + part; }

/* Whether a part is a button (focus, clicks), a text drawn on one line, or wrapped. */
bool sbui_widget_is_button(int w);
bool sbui_widget_is_wrapped(int w);
/* The font size each part's text is drawn at. */
double sbui_widget_font(int w);
/* The line height of a wrapped text at 'size'. */
double sbui_line_height(double size);

/* What the window shows now: each part's text (a button's label, a line, a wrapped message;
 * NULL: not shown). The lane (its text may be "") and a row's wave ("") are shown when set. */
typedef struct {
	const char* text[SBUI_W_COUNT];
} sbui_content;

enum { SBUI_WRAP_IN_USE = 0, SBUI_WRAP_NOTICE, SBUI_WRAP_DETAIL, SBUI_WRAP_BADGE, SBUI_WRAPS };

typedef struct {
	double width, height;
	sbui_rect r[SBUI_W_COUNT];
	bool placed[SBUI_W_COUNT];
	/* the wrapped texts' lines, by SBUI_WRAP_* */
	int n_lines[SBUI_WRAPS];
	char lines[SBUI_WRAPS][SBUI_WRAP_MAX][SBUI_LINE];
	int rows_shown, rows_hidden; /* stem rows placed, and those the height left no room for */
	char more[64];               /* "2 more stems: make the window taller" */
	double bottom;               /* the lowest edge placed */
} sbui_layout;

/* Places what c shows in a window of width x height (unscaled). */
void sbui_layout_make(const sbui_measure* me, const sbui_content* c, double width, double height,
                      sbui_layout* out);
/* A part's name, as the window's description of itself says it (ui_x11.h): "device",
 * "toggle:vocals", "solo:drums" (row_stem: the stem of a row's part), "popup" (-2), "tooltip"
 * (-3). */
void sbui_widget_name(int w, const char* row_stem, char* out, int size);
/* Which wrap slot a wrapped part uses, -1 for others. */
int sbui_wrap_slot(int w);

/* The device list: n entries under (or above, when there is no room below) the anchor, inside
 * the window; each entry's height comes back in *entry_h (two lines each, one when the window
 * is too low for two). */
sbui_rect sbui_popup_place(sbui_rect anchor, int n, double width, double height, double* entry_h);

/* A tooltip of size w x h for a pointer at (px, py): below and right of it, moved and, failing
 * that, shrunk to stay inside the window. */
sbui_rect sbui_tooltip_place(double px, double py, double w, double h, double width, double height);

/* The window's scale: the zoom chosen in the window (own > 0, saved with the session), else the
 * host's ui:scaleFactor (host > 0), else Xft.dpi / 96 (dpi > 0), else 1; *source says which
 * ("zoom", "host", "Xft.dpi", "default"). Clamped to 0.5 .. 4. */
double sbui_scale_pick(double own, double host, double dpi, const char** source);
/* The zoom button's next choice: auto (0), 100, 125, 150, 175, 200 %, and around. */
double sbui_zoom_step(double own, int dir);

#endif
