/* What the window says the plugin is doing (gui/ui_status.h), through the takes of the issue:
 * a take, a second take while the first one's stems are on show, a take that fails and the
 * next one, a missing model, a silent take, a queue, a take that hears nothing yet. Each check
 * is a sentence a user reads. */
#include "ui_status.h"

#include "../../plugin/uris.h"
#include "../check.h"

#include <stdio.h>
#include <string.h>

static sbui_status st;

static const sbui_status* status(const sbui_model* m)
{
	sbui_status_make(m, &st);
	return &st;
}

static void stems_of(sbui_model* m, int take)
{
	static const char* const k[4] = {"vocals", "drums", "bass", "other"};
	sbui_clear_stems(m);
	for (int s = 0; s < 4; s++) {
		char p[SBUI_TEXT];
		snprintf(p, sizeof p, "/data/stembridge/stems/Lead-take%d/Lead-take%d-%s.wav", take, take,
		         k[s]);
		sbui_add_stem(m, p);
	}
}

static void test_takes(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	CHECK(!strcmp(status(&m)->headline, "Ready") && strstr(st.detail, "Arm Record") &&
	      !st.stems_heading[0], "'%s' / '%s'", st.headline, st.detail);

	/* take 1 */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	m.recorded_frames = 48000 * 12;
	CHECK(!strcmp(status(&m)->headline, "Recording a take: 0:12") && st.severity == SBUI_SEV_BUSY,
	      "'%s'", st.headline);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_QUEUED);
	m.job_take = 1;
	m.queue_ahead = 0;
	CHECK(!strcmp(status(&m)->headline, "Take 1 queued: next"), "'%s'", st.headline);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SEPARATING);
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 0.42f);
	CHECK(!strcmp(status(&m)->headline, "Separating take 1: 42 %, estimating the time left"),
	      "'%s'", st.headline);
	sbui_set_time_left(&m, 31.2f);
	CHECK(!strcmp(status(&m)->headline, "Separating take 1: 42 %, 0:31 left") &&
	      st.progress > 0.41f && st.progress < 0.43f, "'%s' %g", st.headline, st.progress);
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 1.0f);
	CHECK(!strcmp(status(&m)->headline, "Writing the stems of take 1"), "'%s'", st.headline);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	stems_of(&m, 1);
	CHECK(!strcmp(status(&m)->headline, "Done: take 1, 4 stems") &&
	      !strcmp(st.stems_heading, "Stems of take 1") && !st.stems_previous && !st.detail[0],
	      "'%s' / '%s'", st.headline, st.stems_heading);

	/* take 2 while take 1's stems are on show: they are said to be the previous take's */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	CHECK(!strcmp(status(&m)->stems_heading, "Previous: take 1") && st.stems_previous, "'%s'",
	      st.stems_heading);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_QUEUED);
	m.job_take = 2;
	m.queue_ahead = 3;
	CHECK(!strcmp(status(&m)->headline, "Take 2 queued: 3 takes ahead") &&
	      !strcmp(st.stems_heading, "Previous: take 1"), "'%s' / '%s'", st.headline,
	      st.stems_heading);
	m.queue_ahead = 1;
	CHECK(!strcmp(status(&m)->headline, "Take 2 queued: 1 take ahead"), "'%s'", st.headline);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SEPARATING);
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 0.02f);
	sbui_set_time_left(&m, 3725.0f);
	CHECK(!strcmp(status(&m)->headline, "Separating take 2: 2 %, 1:02:05 left") &&
	      !strcmp(st.stems_heading, "Previous: take 1"), "'%s' / '%s'", st.headline,
	      st.stems_heading);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	stems_of(&m, 2);
	CHECK(!strcmp(status(&m)->stems_heading, "Stems of take 2") && !st.stems_previous, "'%s'",
	      st.stems_heading);

	/* take 3 fails: the error in full, with its take; take 2's stems are the previous ones */
	const char* err = "HTDemucs 6 stems is not installed: install it from the plugin's window "
	                  "(Install), or run `stembridge models install htdemucs_6s`; take Lead-take3 "
	                  "was not separated; the take's recording is kept at /data/stembridge/stems/"
	                  "Lead-take3/Lead-take3-recording.wav";
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_ERROR);
	m.job_take = 3;
	sbui_set_text_n(m.last_error, sizeof m.last_error, err, -1);
	CHECK(!strcmp(status(&m)->headline, "Take 3 failed") && !strcmp(st.detail, err) &&
	      st.severity == SBUI_SEV_ERROR && !strcmp(st.stems_heading, "Previous: take 2"),
	      "'%s' / '%s' / '%s'", st.headline, st.detail, st.stems_heading);
	/* the next take: the error is gone at once, not after its job */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	CHECK(!status(&m)->detail[0] && !m.last_error[0] && st.severity == SBUI_SEV_BUSY,
	      "a stale error survived a new take: '%s'", st.detail);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	m.job_take = 4;
	stems_of(&m, 4);
	CHECK(!strcmp(status(&m)->headline, "Done: take 4, 4 stems") && !st.detail[0], "'%s' / '%s'",
	      st.headline, st.detail);
	/* a model that is not installed is no status at all (a notice beside the Model control) */
	sbui_set_text_n(m.model_notice, sizeof m.model_notice, "HTDemucs is not installed", -1);
	CHECK(!strcmp(status(&m)->headline, "Done: take 4, 4 stems") && !st.detail[0] &&
	      st.severity == SBUI_SEV_INFO, "'%s' / '%s'", st.headline, st.detail);
	/* an old error text left when the state is Done again (a queued take ended) is not shown */
	sbui_set_text_n(m.last_error, sizeof m.last_error, "take 3 failed long ago", -1);
	CHECK(!status(&m)->detail[0], "'%s'", st.detail);
	/* a take written from memory only: said while it is separated */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SEPARATING);
	sbui_set_text_n(m.last_error, sizeof m.last_error, "take 5 was not saved to disk", -1);
	CHECK(!strcmp(status(&m)->detail, "Take 5 was not saved to disk"), "'%s'", st.detail);
}

static void test_silence(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	/* recording, and nothing heard after a second: said while it records */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	m.lane.valid = true;
	m.lane.cols = 10;
	m.recorded_frames = 48000 / 2;
	CHECK(!status(&m)->detail[0], "half a second of silence said: '%s'", st.detail);
	m.recorded_frames = 48000 * 2;
	CHECK(strstr(status(&m)->detail, "Nothing heard yet") && strstr(st.detail, "Monitoring") &&
	      st.severity == SBUI_SEV_WARN, "'%s'", st.detail);
	m.lane.lohi[5] = 0.01f; /* something heard */
	CHECK(!status(&m)->detail[0], "'%s'", st.detail);
	/* the silent take: the plugin's whole advice, nothing cut */
	const char* why = "the take at 0:01.000 (2.0 s) is silent (peak digital silence, below -90 "
	                  "dBFS): nothing was separated. A recording track feeds its plugins silence "
	                  "while the audio hardware does the monitoring: in Ardour set Preferences > "
	                  "Monitoring > Record monitoring handled by: Ardour";
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SILENT);
	sbui_set_text_n(m.last_error, sizeof m.last_error, why, -1);
	CHECK(!strcmp(status(&m)->headline, "Silent take: not separated") &&
	      !strncmp(st.detail, "The take at", 11) && !strcmp(st.detail + 1, why + 1) &&
	      st.severity == SBUI_SEV_WARN, "'%s' / '%s'", st.headline, st.detail);
	/* with earlier stems on show, they are the previous take's */
	stems_of(&m, 1);
	CHECK(!strcmp(status(&m)->stems_heading, "Previous: take 1"), "'%s'", st.stems_heading);
}

int main(void)
{
	test_takes();
	test_silence();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		fprintf(stderr, "ui_status: ok\n");
	return failures ? 1 : 0;
}
