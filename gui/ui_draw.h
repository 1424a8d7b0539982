/* Drawing the window with cairo from what it shows (a view: the model, the status, the texts
 * and where they go), and the device list and tooltips over it. Every text is fitted to its box
 * (ui_layout.h) and noted with the box and its ink, so a test can see that none runs outside.
 *
 * Thread: the host's UI thread.
 */
#ifndef SBUI_DRAW_H
#define SBUI_DRAW_H

#include "ui_labels.h"
#include "ui_layout.h"
#include "ui_logic.h"
#include "ui_status.h"

#include <cairo.h>

#define SBUI_POPUP_MAX (SBUI_MAX_DEVICES + 4)
#define SBUI_TEXTLOG_MAX 200

/* One text as drawn: its part, the box it was fitted to, where its ink went, and its start. */
typedef struct {
	int widget;
	sbui_rect box, ink;
	char text[120];
} sbui_text_entry;

typedef struct {
	int n;
	sbui_text_entry e[SBUI_TEXTLOG_MAX];
} sbui_textlog;

typedef struct {
	const sbui_model* m;
	const sbui_status* status;
	const sbui_content* c;
	const sbui_layout* l;
	double scale;
	int row_stem[SBUI_ROWS];      /* the stem each row shows */
	bool on[SBUI_W_COUNT];        /* buttons lit: toggles on, armed, audition */
	unsigned on_rgb[SBUI_W_COUNT];
	bool fallback;                /* the in-use lines in the warning colour */
	unsigned notice_rgb;          /* the model notice's colour */
	bool folder_note;             /* the folder line says something else for a moment */
	int hover, focus;             /* parts, -1 none */
	bool focus_visible;           /* after a key: the focus ring shows */
	/* the device list */
	bool popup_open;
	sbui_rect popup;
	double popup_entry_h;
	int popup_n, popup_hover;
	float popup_values[SBUI_POPUP_MAX];
	char popup_title[SBUI_POPUP_MAX][SBUI_TEXT], popup_detail[SBUI_POPUP_MAX][SBUI_TEXT];
	bool popup_chosen[SBUI_POPUP_MAX], popup_in_use[SBUI_POPUP_MAX];
	/* a tooltip, shown */
	const char* tip;
	double tip_x, tip_y;
	sbui_rect tip_rect;           /* where it went (out) */
} sbui_view;

/* The colour of each stem (0xRRGGBB). */
unsigned sbui_stem_rgb(int stem);

/* Draws the whole window into cr (already scaled: one unit is one unscaled pixel); notes each
 * text in log. */
void sbui_draw(cairo_t* cr, sbui_view* v, sbui_textlog* log);

/* Measures text as sbui_draw draws it (hinting of metrics off, so a text's width scales with
 * the window). user: a cairo_t. */
double sbui_draw_measure(void* user, const char* text, double size);
/* The font options both use. */
void sbui_draw_font(cairo_t* cr);

#endif
