/* What each part of the window says now, from the model and the controls: the texts the
 * layout places and the drawing shows, which buttons are lit and in what colour, the colours
 * that carry a meaning (a fallback, a notice). Plain C: no X11, no cairo.
 *
 * Thread: the host's UI thread.
 */
#ifndef SBUI_CONTENT_H
#define SBUI_CONTENT_H

#include "ui_layout.h"
#include "ui_logic.h"
#include "ui_status.h"

typedef struct {
	const float* ports;       /* the controls as the window knows them (SB_PORT_*) */
	int channels;             /* where the guitar and piano toggles are */
	double width;             /* the window's unscaled width: compact levels below 560 */
	double scale;             /* for the zoom's label */
	bool copied;              /* the Copy path button says it copied */
	const char* note;         /* says something in place of the folder's line; NULL none */
} sbui_show_in;

typedef struct {
	sbui_status status;
	sbui_content content;     /* its texts point into the fields below and into the model */
	char text[SBUI_W_COUNT][SBUI_TEXT];
	char in_use[SBUI_LONG_TEXT + SBUI_TEXT + 16], badge[SBUI_TEXT + 8], folder[SBUI_TEXT];
	int row_stem[SBUI_ROWS];  /* the stem each row shows, -1 none */
	char row_path[SBUI_ROWS][SBUI_TEXT];
	bool on[SBUI_W_COUNT];    /* buttons lit */
	unsigned on_rgb[SBUI_W_COUNT];
	bool fallback;            /* the device in use is a fallback */
	bool folder_note;         /* the folder's line is the note */
	unsigned notice_rgb;      /* the model notice's colour */
} sbui_shown;

void sbui_shown_make(const sbui_model* m, const sbui_show_in* in, sbui_shown* out);

#endif
