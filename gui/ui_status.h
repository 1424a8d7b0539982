/* What the window says the plugin is doing: a headline on the progress bar, the message in
 * full beneath it (an error, a silent take's advice, a take that hears nothing yet), how
 * serious it is, and what the stems on show are ("Previous: take 1" while another take is
 * recorded or separated). Honest by construction: an error belongs to the take that had it and
 * goes with the next take; a model that is not installed is a notice beside the Model control,
 * never a status; a queued take says how many are ahead, a running one its time left.
 * Pure data in, strings out (tests/gui/test_ui_status.c).
 *
 * Thread: the host's UI thread; nothing here allocates or blocks.
 */
#ifndef SBUI_STATUS_H
#define SBUI_STATUS_H

#include "ui_logic.h"

typedef enum {
	SBUI_SEV_INFO = 0, /* idle, done */
	SBUI_SEV_BUSY,     /* recording, queued, separating */
	SBUI_SEV_WARN,     /* a silent take, a take that hears nothing yet */
	SBUI_SEV_ERROR     /* a take failed */
} sbui_severity;

/* A recording below this for its first second says so while it records (the plugin's own
 * threshold for a silent take, SB_SILENT_DBFS). */
#define SBUI_HEARS_NOTHING_AFTER_S 1.0

typedef struct {
	char headline[SBUI_TEXT];       /* "Separating take 3: 42 %, 0:31 left" */
	char detail[SBUI_LONG_TEXT];    /* wraps in full beneath; "" none */
	sbui_severity severity;
	float progress;                 /* the bar's fill, 0..1 */
	char stems_heading[SBUI_TEXT];  /* "Stems of take 2", "Previous: take 1"; "" no stems */
	bool stems_previous;            /* the stems are not of the take the status speaks of */
} sbui_status;

void sbui_status_make(const sbui_model* m, sbui_status* out);

#endif
