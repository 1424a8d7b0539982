/* What the window says the plugin is doing. See ui_status.h. */
#include "ui_status.h"

#include "stembridge.h" /* SB_SILENT_*: the constants alone; the UI links no engine */
#include "../plugin/uris.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void time_left(float seconds, char* out, size_t size)
{
	const long s = lrintf(seconds);
	if (s >= 3600)
		snprintf(out, size, "%ld:%02ld:%02ld left", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(out, size, "%ld:%02ld left", s / 60, s % 60);
}

/* "take 3" or "the take" when its number is not known. */
static void take_words(int take, char* out, size_t size)
{
	if (take > 0)
		snprintf(out, size, "take %d", take);
	else
		snprintf(out, size, "the take");
}

static void headline(const sbui_model* m, sbui_status* s)
{
	const int pct = (int)lrintf(sbui_progress(m) * 100.0f);
	char take[32], left[48] = "estimating the time left";
	take_words(m->job_take, take, sizeof take);
	if (m->time_left_port >= 0.5f)
		time_left(m->time_left_port, left, sizeof left);
	switch (sbui_model_stage(m)) {
	case SBUI_RECORDING: {
		const long secs = (long)((double)m->recorded_frames / m->sample_rate);
		snprintf(s->headline, sizeof s->headline, "Recording a take: %ld:%02ld", secs / 60,
		         secs % 60);
		s->severity = SBUI_SEV_BUSY;
		break;
	}
	case SBUI_QUEUED:
		if (m->job_take > 0 && m->queue_ahead > 0)
			snprintf(s->headline, sizeof s->headline, "Take %d queued: %d take%s ahead",
			         m->job_take, m->queue_ahead, m->queue_ahead == 1 ? "" : "s");
		else if (m->job_take > 0)
			snprintf(s->headline, sizeof s->headline, "Take %d queued: next", m->job_take);
		else
			snprintf(s->headline, sizeof s->headline, "Take queued");
		s->severity = SBUI_SEV_BUSY;
		break;
	case SBUI_SEPARATING:
		snprintf(s->headline, sizeof s->headline, "Separating %s: %d %%, %s", take, pct, left);
		s->severity = SBUI_SEV_BUSY;
		break;
	case SBUI_RESUMED:
		snprintf(s->headline, sizeof s->headline, "Resumed %s: separating %d %%, %s", take, pct,
		         left);
		s->severity = SBUI_SEV_BUSY;
		break;
	case SBUI_WRITING:
		snprintf(s->headline, sizeof s->headline, "Writing the stems of %s", take);
		s->severity = SBUI_SEV_BUSY;
		break;
	case SBUI_DONE:
		if (m->job_take > 0)
			snprintf(s->headline, sizeof s->headline, "Done: take %d, %d stem%s", m->job_take,
			         m->n_stems, m->n_stems == 1 ? "" : "s");
		else
			snprintf(s->headline, sizeof s->headline, "Done: %d stem%s", m->n_stems,
			         m->n_stems == 1 ? "" : "s");
		break;
	case SBUI_ERROR:
		if (m->job_take > 0)
			snprintf(s->headline, sizeof s->headline, "Take %d failed", m->job_take);
		else
			snprintf(s->headline, sizeof s->headline, "The last take failed");
		s->severity = SBUI_SEV_ERROR;
		break;
	case SBUI_SILENT:
		snprintf(s->headline, sizeof s->headline, "Silent take: not separated");
		s->severity = SBUI_SEV_WARN;
		break;
	default:
		snprintf(s->headline, sizeof s->headline, "Ready");
		break;
	}
}

static void detail(const sbui_model* m, sbui_status* s)
{
	const sbui_stage st = sbui_model_stage(m);
	s->detail[0] = '\0';
	if (st == SBUI_ERROR || st == SBUI_SILENT) {
		if (m->last_error[0])
			snprintf(s->detail, sizeof s->detail, "%s", m->last_error);
		else if (st == SBUI_ERROR)
			snprintf(s->detail, sizeof s->detail, "The plugin's log says why.");
		return;
	}
	if (st == SBUI_RECORDING) {
		const double secs = (double)m->recorded_frames / m->sample_rate;
		const float peak = sbui_lane_peak(&m->lane);
		if (secs >= SBUI_HEARS_NOTHING_AFTER_S && m->lane.valid && peak < SB_SILENT_PEAK) {
			snprintf(s->detail, sizeof s->detail,
			         "Nothing heard yet (below %.0f dBFS): a silent take is not separated. A "
			         "recording track feeds its plugins silence while the audio hardware does "
			         "the monitoring: in Ardour set Preferences > Monitoring > Record "
			         "monitoring handled by: Ardour, or play the recorded region back with "
			         "Record armed here.", SB_SILENT_DBFS);
			s->severity = SBUI_SEV_WARN;
		}
		return;
	}
	/* a warning about the take in hand (written from memory only: lost if the host stops
	 * before its stems) matters until its stems are there, and not after */
	if (m->last_error[0] && (st == SBUI_QUEUED || st == SBUI_SEPARATING || st == SBUI_WRITING ||
	                         st == SBUI_RESUMED))
		snprintf(s->detail, sizeof s->detail, "%s", m->last_error);
	else if (st == SBUI_IDLE && !m->n_stems && !m->lane.valid)
		snprintf(s->detail, sizeof s->detail,
		         "Arm Record and play the region: each stretch the transport rolls becomes a "
		         "take, separated when it stops.");
}

static void stems_heading(const sbui_model* m, sbui_status* s)
{
	s->stems_heading[0] = '\0';
	s->stems_previous = false;
	if (!m->n_stems)
		return;
	const int take = sbui_stems_take(m);
	const sbui_stage st = sbui_model_stage(m);
	/* the status speaks of another take than the stems' (recording one, separating one, one
	 * that failed or was silent): the stems are the previous take's, and say so */
	const bool other = st == SBUI_RECORDING || st == SBUI_SILENT ||
	                   ((st == SBUI_QUEUED || st == SBUI_SEPARATING || st == SBUI_WRITING ||
	                     st == SBUI_RESUMED || st == SBUI_ERROR) &&
	                    m->job_take != take);
	s->stems_previous = other;
	if (other && take > 0)
		snprintf(s->stems_heading, sizeof s->stems_heading, "Previous: take %d", take);
	else if (other)
		snprintf(s->stems_heading, sizeof s->stems_heading, "Previous take");
	else if (take > 0)
		snprintf(s->stems_heading, sizeof s->stems_heading, "Stems of take %d", take);
	else
		snprintf(s->stems_heading, sizeof s->stems_heading, "Stems");
}

void sbui_status_make(const sbui_model* m, sbui_status* out)
{
	memset(out, 0, sizeof *out);
	out->severity = SBUI_SEV_INFO;
	out->progress = sbui_progress(m);
	headline(m, out);
	detail(m, out);
	/* the plugin's messages are clauses ("the take at 0:01 ... is silent"): a sentence here */
	if (out->detail[0] >= 'a' && out->detail[0] <= 'z')
		out->detail[0] = (char)(out->detail[0] - 'a' + 'A');
	stems_heading(m, out);
}
