/* What each part of the window says (gui/ui_content.h) in the states of the issue: the stem
 * toggles of a four-stem model (guitar and piano hidden, not greyed) and of a six-stem one, a
 * row per stem written with S and M lit as the Audition control says, a missing model's notice
 * with its Install button, the fallback's colour, "Copied", a note in place of the folder. */
#include "ui_content.h"

#include "../../plugin/uris.h"
#include "../check.h"

#include <stdio.h>
#include <string.h>

static sbui_shown out;
static float ports[SB_N_PORTS_ALL_STEREO];

static const sbui_shown* show(const sbui_model* m, bool copied, const char* note)
{
	const sbui_show_in in = {ports, 2, 600, 1.0, copied, note};
	sbui_shown_make(m, &in, &out);
	return &out;
}

static const char* text(int w) { return out.content.text[w] ? out.content.text[w] : "(none)"; }

int main(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	for (int s = 0; s < 6; s++)
		ports[sb_port_stem(2, s)] = 1.0f;
	ports[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	sbui_set_port(&m, SB_PORT_MODEL, SB_MODEL_HTDEMUCS);
	sbui_set_model_list(&m, "htdemucs\tHTDemucs\tvocals,drums,bass,other\t0\t84141911\n"
	                        "htdemucs_6s\tHTDemucs 6 stems\tvocals,drums,bass,other,guitar,piano\t1\t0\n");
	sbui_set_text_n(m.model_notice, sizeof m.model_notice,
	                "HTDemucs is not installed: install it from the plugin's window (Install)", -1);
	show(&m, false, NULL);
	/* a four-stem model: no guitar or piano toggle at all */
	CHECK(out.content.text[SBUI_W_TOGGLE0 + 3] && !out.content.text[SBUI_W_TOGGLE0 + 4] &&
	      !out.content.text[SBUI_W_TOGGLE0 + 5], "toggles: '%s' '%s'", text(SBUI_W_TOGGLE0 + 4),
	      text(SBUI_W_TOGGLE0 + 5));
	CHECK(out.on[SBUI_W_TOGGLE0] && strstr(text(SBUI_W_TOGGLE0), "Vocals"), "vocals lit");
	/* the missing model: its notice and its Install button, and no stems yet */
	CHECK(strstr(text(SBUI_W_NOTICE), "not installed") && strstr(text(SBUI_W_INSTALL), "84 MB") &&
	      out.on[SBUI_W_INSTALL], "notice '%s', install '%s'", text(SBUI_W_NOTICE),
	      text(SBUI_W_INSTALL));
	CHECK(!out.content.text[SBUI_W_STEMS_HEADING] && !out.content.text[sbui_row_part(0, 0)],
	      "rows before any stems");
	/* six stems: every toggle */
	ports[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS_6S;
	sbui_set_port(&m, SB_PORT_MODEL, SB_MODEL_HTDEMUCS_6S);
	m.model_notice[0] = '\0';
	show(&m, false, NULL);
	CHECK(out.content.text[SBUI_W_TOGGLE0 + 4] && out.content.text[SBUI_W_TOGGLE0 + 5] &&
	      !out.content.text[SBUI_W_NOTICE] && !out.content.text[SBUI_W_INSTALL],
	      "six-stem toggles, no notice");

	/* the stems of take 3, guitar written, piano not: a row each in canonical order */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	m.job_take = 3;
	static const char* const files[] = {"bass", "vocals", "guitar", "other", "drums"};
	for (int i = 0; i < 5; i++) {
		char p[SBUI_TEXT];
		snprintf(p, sizeof p, "/music/stembridge/Lead-take3/Lead-take3-%s.wav", files[i]);
		sbui_add_stem(&m, p);
	}
	m.views[0].valid = true;
	m.views[0].peak = 0.5f;
	m.views[0].rms = 0.1f;
	sbui_set_port(&m, SB_PORT_AUDITION, sb_audition_value(4, 1)); /* the mix without guitar */
	show(&m, false, NULL);
	const int want[5] = {0, 1, 2, 3, 4};
	for (int k = 0; k < 5; k++)
		CHECK(out.row_stem[k] == want[k], "row %d shows stem %d", k, out.row_stem[k]);
	CHECK(out.row_stem[5] == -1 && !out.content.text[sbui_row_part(5, SBUI_ROW_NAME)],
	      "a row for the piano stem that was not written");
	CHECK(!strcmp(text(sbui_row_part(0, SBUI_ROW_NAME)), "Vocals") &&
	      !strcmp(text(sbui_row_part(0, SBUI_ROW_LEVELS)), "peak -6.0 dB · RMS -20.0 dB"),
	      "'%s' '%s'", text(sbui_row_part(0, SBUI_ROW_NAME)), text(sbui_row_part(0, SBUI_ROW_LEVELS)));
	CHECK(out.on[sbui_row_part(4, SBUI_ROW_MUTE)] && !out.on[sbui_row_part(4, SBUI_ROW_SOLO)] &&
	      !out.on[sbui_row_part(0, SBUI_ROW_MUTE)], "only guitar's M lit");
	CHECK(strstr(text(SBUI_W_BADGE), "the mix without guitar"), "badge '%s'", text(SBUI_W_BADGE));
	CHECK(!strcmp(text(SBUI_W_STEMS_HEADING), "Stems of take 3") &&
	      !strcmp(text(SBUI_W_FOLDER), "/music/stembridge/Lead-take3") &&
	      !strcmp(text(SBUI_W_COPY), "Copy path"), "'%s' '%s'", text(SBUI_W_STEMS_HEADING),
	      text(SBUI_W_FOLDER));
	show(&m, true, "xdg-open is not installed (package xdg-utils): the path is copied instead");
	CHECK(!strcmp(text(SBUI_W_COPY), "Copied") && strstr(text(SBUI_W_FOLDER), "xdg-utils") &&
	      out.folder_note, "'%s' '%s'", text(SBUI_W_COPY), text(SBUI_W_FOLDER));

	/* a fallback colours the in-use lines */
	sbui_set_port(&m, SB_PORT_FALLBACK_OUT, 1);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, SB_DEVICE_CPU);
	sbui_set_text(m.device_in_use, "CPU (2 threads) (fallback: device:7 not found: 2 accelerators "
	                               "present)", -1);
	show(&m, false, NULL);
	CHECK(out.fallback && strstr(text(SBUI_W_IN_USE), "In use: CPU (2 threads), fallback\n"
	                                                   "Device 8 is not on this machine"),
	      "'%s'", text(SBUI_W_IN_USE));
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		fprintf(stderr, "ui_content: ok\n");
	return failures ? 1 : 0;
}
