/* The UI's logic (gui/ui_logic.h) without a display: what the device button cycles through
 * with and without devices, what the labels and the tooltip say, and how port events move the
 * stage. Each check is something a user sees on the button or the progress bar. */
#include "ui_logic.h"

#include "../../plugin/uris.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                               \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, "\n");                                         \
			failures++;                                                    \
		}                                                                      \
	} while (0)

static const char *label(const sbui_model *m, float port)
{
	static char buf[SBUI_TEXT];
	sbui_device_label(m, port, buf, sizeof buf);
	return buf;
}

/* Clicks from the current port value n times in direction dir; returns the values seen. */
static void walk(sbui_model *m, int dir, int n, float *seen)
{
	for (int i = 0; i < n; i++) {
		float v = sbui_device_step(m, dir);
		sbui_set_port(m, SB_PORT_DEVICE, v);
		seen[i] = v;
	}
}

static sbui_device gpu(const char *name, const char *platform, int64_t mem, int units)
{
	sbui_device d;
	memset(&d, 0, sizeof d);
	snprintf(d.key, sizeof d.key, "opencl|%s|Vendor|%s|0", platform, name);
	snprintf(d.name, sizeof d.name, "%s", name);
	snprintf(d.platform, sizeof d.platform, "%s", platform);
	snprintf(d.type, sizeof d.type, "discrete GPU");
	snprintf(d.driver, sizeof d.driver, "580.1");
	d.memory_bytes = mem;
	d.compute_units = units;
	return d;
}

static void test_no_devices(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	/* before the plugin sends its list: Auto and CPU only */
	CHECK(sbui_device_count(&m) == 2, "count %d", sbui_device_count(&m));
	CHECK(!strcmp(label(&m, SB_DEVICE_AUTO), "Auto"), "%s", label(&m, 0));
	CHECK(!strcmp(label(&m, SB_DEVICE_CPU), "CPU"), "%s", label(&m, 1));
	/* a preset's "Device 1" is named as the TTL names it, not yet "not present" */
	CHECK(!strcmp(label(&m, 2), "Device 1"), "%s", label(&m, 2));
	float seen[4];
	walk(&m, +1, 4, seen);
	CHECK(seen[0] == 1 && seen[1] == 0 && seen[2] == 1 && seen[3] == 0,
	      "click order %g %g %g %g", seen[0], seen[1], seen[2], seen[3]);
	walk(&m, -1, 2, seen);
	CHECK(seen[0] == 1 && seen[1] == 0, "right-click order %g %g", seen[0], seen[1]);

	/* the plugin says there are none: a saved "Device 1" is shown as missing */
	sbui_clear_devices(&m);
	CHECK(m.devices_known, "list not marked known");
	CHECK(!strcmp(label(&m, 2), "Device 1 (not present)"), "%s", label(&m, 2));
	char tip[512];
	sbui_device_tooltip(&m, 2, tip, sizeof tip);
	CHECK(strstr(tip, "not on this machine") && strstr(tip, "CPU"), "tooltip '%s'", tip);
}

static void test_with_devices(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	sbui_clear_devices(&m);
	sbui_device a = gpu("NVIDIA H100 80GB HBM3", "NVIDIA CUDA", (int64_t)80 << 30, 132);
	sbui_device b = gpu("Radeon RX 7900", "AMD APP", (int64_t)24 << 30, 96);
	CHECK(sbui_add_device(&m, &a) && sbui_add_device(&m, &b), "add");
	CHECK(sbui_device_count(&m) == 5, "count %d", sbui_device_count(&m));
	/* click: Auto, CPU, then each device by name, All devices, then around */
	float seen[6];
	walk(&m, +1, 6, seen);
	CHECK(seen[0] == 1 && seen[1] == 2 && seen[2] == 3 && seen[3] == SB_DEVICE_ALL &&
	      seen[4] == 0 && seen[5] == 1, "click order %g %g %g %g %g %g", seen[0], seen[1],
	      seen[2], seen[3], seen[4], seen[5]);
	CHECK(!strcmp(label(&m, 2), "Device 1: NVIDIA H100 80GB HBM3"), "%s", label(&m, 2));
	CHECK(!strcmp(label(&m, 3), "Device 2: Radeon RX 7900"), "%s", label(&m, 3));
	CHECK(!strcmp(label(&m, SB_DEVICE_ALL), "All devices"), "%s", label(&m, SB_DEVICE_ALL));
	/* right-click / scroll: back, around the other way */
	sbui_set_port(&m, SB_PORT_DEVICE, 0);
	walk(&m, -1, 5, seen);
	CHECK(seen[0] == SB_DEVICE_ALL && seen[1] == 3 && seen[2] == 2 && seen[3] == 1 &&
	      seen[4] == 0, "back order %g %g %g %g %g", seen[0], seen[1], seen[2], seen[3],
	      seen[4]);
	/* hover: every detail the issue names */
	char tip[1024];
	sbui_device_tooltip(&m, 2, tip, sizeof tip);
	CHECK(strstr(tip, "NVIDIA H100 80GB HBM3") && strstr(tip, "NVIDIA CUDA") &&
	      strstr(tip, "discrete GPU") && strstr(tip, "80.0 GiB") && strstr(tip, "132") &&
	      strstr(tip, "580.1"), "tooltip '%s'", tip);
	sbui_device_tooltip(&m, 0, tip, sizeof tip);
	CHECK(strstr(tip, "Auto"), "auto tooltip '%s'", tip);
	sbui_device_tooltip(&m, SB_DEVICE_ALL, tip, sizeof tip);
	CHECK(strstr(tip, "every GPU and the CPU"), "all devices tooltip '%s'", tip);
	/* a device without a name shows its key rather than nothing */
	sbui_device c = gpu("", "PoCL", -1, -1);
	sbui_add_device(&m, &c);
	CHECK(strstr(label(&m, 4), "opencl|PoCL"), "%s", label(&m, 4));
	sbui_device_tooltip(&m, 4, tip, sizeof tip);
	CHECK(strstr(tip, "Memory: unknown") && strstr(tip, "Compute units: unknown"), "'%s'", tip);

	/* a port value beyond the list (a session from a machine with more GPUs) */
	sbui_set_port(&m, SB_PORT_DEVICE, 7);
	CHECK(!strcmp(label(&m, 7), "Device 6 (not present)"), "%s", label(&m, 7));
	CHECK(sbui_device_step(&m, +1) == 0, "next from missing: %g", sbui_device_step(&m, +1));
	CHECK(sbui_device_step(&m, -1) == SB_DEVICE_ALL, "back from missing: %g",
	      sbui_device_step(&m, -1));

	/* a list longer than the port's range is cut at Device 8 */
	sbui_clear_devices(&m);
	int added = 0;
	for (int i = 0; i < 10; i++)
		added += sbui_add_device(&m, &a);
	CHECK(added == SBUI_MAX_DEVICES && sbui_device_count(&m) == SB_DEVICE_FIRST_ACCEL + 8 + 1,
	      "added %d", added);
	/* a new list replaces the old one */
	sbui_clear_devices(&m);
	sbui_add_device(&m, &b);
	CHECK(sbui_device_count(&m) == 4 && !strcmp(label(&m, 2), "Device 1: Radeon RX 7900"),
	      "replaced");
}

/* The stage from the State and Progress outputs (ui_status.h says it in words). */
static void test_stage_from_ports(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	CHECK(sbui_model_stage(&m) == SBUI_IDLE && sbui_progress(&m) == 0, "idle");
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	m.recorded_frames = 48000 * 75 + 100; /* recordedFrames from the plugin */
	CHECK(sbui_model_stage(&m) == SBUI_RECORDING, "recording");
	/* a new take restarts the clock, before the plugin's first count arrives */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_QUEUED);
	CHECK(sbui_model_stage(&m) == SBUI_QUEUED && sbui_progress(&m) == 0, "queued");
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	CHECK(m.recorded_frames == 0, "the clock did not restart: %lld", (long long)m.recorded_frames);
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SEPARATING);
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 0.42f);
	CHECK(sbui_model_stage(&m) == SBUI_SEPARATING && sbui_progress(&m) > 0.41f &&
	      sbui_progress(&m) < 0.43f, "separating %g", sbui_progress(&m));
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 1.0f);
	CHECK(sbui_model_stage(&m) == SBUI_WRITING && sbui_progress(&m) == 1.0f, "writing");
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 7.0f); /* out of range from a bad host */
	CHECK(sbui_progress(&m) == 1.0f, "progress %g", sbui_progress(&m));
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	CHECK(sbui_model_stage(&m) == SBUI_DONE && sbui_progress(&m) == 1.0f, "done");
	for (int i = 0; i < 12; i++)
		sbui_add_stem(&m, "x.wav");
	CHECK(m.n_stems == SBUI_MAX_STEMS, "%d stems kept", m.n_stems);
	sbui_clear_stems(&m);
	CHECK(m.n_stems == 0, "stems not cleared");
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_ERROR);
	CHECK(sbui_model_stage(&m) == SBUI_ERROR && sbui_progress(&m) == 0, "error");
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SILENT);
	CHECK(sbui_model_stage(&m) == SBUI_SILENT, "silent");
	/* a take a stopped host left unfinished, separated again after the session reopened */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RESUMED);
	sbui_set_port(&m, SB_PORT_PROGRESS_OUT, 0.25f);
	CHECK(sbui_model_stage(&m) == SBUI_RESUMED && sbui_progress(&m) == 0.25f, "resumed");
	/* an unknown state value from a newer plugin reads as idle, not garbage */
	sbui_set_port(&m, SB_PORT_STATE_OUT, 42);
	CHECK(sbui_model_stage(&m) == SBUI_IDLE, "state 42");
}

static void test_in_use(void)
{
	sbui_model m;
	char s[SBUI_TEXT];
	bool warn = true;
	sbui_model_init(&m, 48000);
	sbui_in_use_label(&m, s, sizeof s, &warn);
	CHECK(!strcmp(s, "none yet") && !warn, "'%s' %d", s, warn);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, SB_DEVICE_CPU);
	sbui_in_use_label(&m, s, sizeof s, &warn);
	CHECK(!strcmp(s, "CPU") && !warn, "'%s' %d", s, warn);
	/* a fallback is drawn in the warning colour and says so */
	sbui_set_port(&m, SB_PORT_FALLBACK_OUT, 1);
	sbui_in_use_label(&m, s, sizeof s, &warn);
	CHECK(strstr(s, "fallback") && warn, "'%s' %d", s, warn);
	/* the plugin's words, reason included, win over the port number */
	sbui_set_text(m.device_in_use, "CPU (fallback: opencl:3 not found: 2 OpenCL devices present)", -1);
	sbui_in_use_label(&m, s, sizeof s, &warn);
	CHECK(strstr(s, "opencl:3 not found") && warn, "'%s'", s);
	/* drawn on two lines: the device, then the reason */
	char dev[SBUI_TEXT], why[SBUI_TEXT];
	sbui_in_use_parts(&m, dev, why, SBUI_TEXT, &warn);
	CHECK(!strcmp(dev, "CPU, fallback") && !strcmp(why, "opencl:3 not found: 2 OpenCL devices present") &&
	      warn, "'%s' / '%s'", dev, why);
	sbui_set_text(m.device_in_use, "NVIDIA H100 (NVIDIA CUDA, 79.1 GiB)", -1);
	sbui_set_port(&m, SB_PORT_FALLBACK_OUT, 0);
	sbui_in_use_parts(&m, dev, why, SBUI_TEXT, &warn);
	CHECK(!strcmp(dev, "NVIDIA H100 (NVIDIA CUDA, 79.1 GiB)") && !why[0] && !warn, "'%s' / '%s'",
	      dev, why);
}

static void test_port_events(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	sbui_clear_devices(&m);
	sbui_device a = gpu("GPU A", "P", 1 << 30, 8);
	sbui_add_device(&m, &a);
	/* a preset or automation moves the device port: the button follows, and a click goes on
	 * from there */
	sbui_set_port(&m, SB_PORT_DEVICE, 2);
	CHECK(!strcmp(label(&m, m.device_port), "Device 1: GPU A"), "%s", label(&m, m.device_port));
	CHECK(sbui_device_step(&m, +1) == SB_DEVICE_ALL, "next after host change %g",
	      sbui_device_step(&m, 1));
	sbui_set_port(&m, SB_PORT_DEVICE, SB_DEVICE_ALL);
	CHECK(sbui_device_step(&m, +1) == 0, "next after All devices %g", sbui_device_step(&m, 1));
	sbui_set_port(&m, SB_PORT_DEVICE, 2);
	/* hosts send floats: 1.9999 is device 2 */
	sbui_set_port(&m, SB_PORT_DEVICE, 1.9999f);
	CHECK(!strcmp(label(&m, m.device_port), "Device 1: GPU A"), "%s", label(&m, m.device_port));
	/* ports the model does not track leave it alone */
	sbui_model before = m;
	sbui_set_port(&m, SB_PORT_AUDIO_IN_1, 0.5f);
	sbui_set_port(&m, 999, 3.0f);
	CHECK(!memcmp(&before, &m, sizeof m), "an unrelated port changed the model");
	/* text from atoms is cut, never overrun */
	char big[600];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	sbui_set_text(m.manifest, big, -1);
	CHECK(strlen(m.manifest) == SBUI_TEXT - 1, "%zu", strlen(m.manifest));
	sbui_set_text(m.manifest, "abcdef", 3);
	CHECK(!strcmp(m.manifest, "abc"), "'%s'", m.manifest);
}

/* The Model button, the model list the plugin sends, the install offer and the stems a model
 * makes. */
static void test_models(void)
{
	sbui_model m;
	sbui_model_init(&m, 48000);
	char buf[SBUI_TEXT];
	/* the button's order: Auto, Built-in, HTDemucs, fine-tuned, 6 stems, and around */
	float v = (float)SB_MODEL_AUTO;
	const int want[] = {SB_MODEL_BUILTIN, SB_MODEL_HTDEMUCS, SB_MODEL_HTDEMUCS_FT,
	                    SB_MODEL_HTDEMUCS_6S, SB_MODEL_AUTO};
	for (int i = 0; i < 5; i++) {
		v = sbui_model_step(v, +1);
		CHECK((int)v == want[i], "step %d: %g, want %d", i, v, want[i]);
	}
	CHECK((int)sbui_model_step(SB_MODEL_AUTO, -1) == SB_MODEL_HTDEMUCS_6S, "back from Auto");
	/* before the list: plain names, nothing to install, every stem allowed */
	sbui_model_label(&m, SB_MODEL_HTDEMUCS, buf, sizeof buf);
	CHECK(!strcmp(buf, "HTDemucs"), "label before the list: %s", buf);
	CHECK(sbui_model_makes(&m, 4), "guitar allowed while the model is unknown");
	sbui_set_model_list(&m, "auto\tAuto: HTDemucs\tvocals,drums,bass,other\t1\t0\n"
	                        "builtin\tBuilt-in\tvocals,drums,bass,other\t1\t0\n"
	                        "htdemucs\tHTDemucs\tvocals,drums,bass,other\t1\t84141911\n"
	                        "htdemucs_ft\tHTDemucs fine-tuned\tvocals,drums,bass,other\t0\t336000000\n"
	                        "htdemucs_6s\tHTDemucs 6 stems\tvocals,drums,bass,other,guitar,piano\t0\t55000000\n"
	                        "broken line without fields\n");
	CHECK(m.n_models == 5, "%d models parsed", m.n_models);
	sbui_model_label(&m, SB_MODEL_AUTO, buf, sizeof buf);
	CHECK(!strcmp(buf, "Auto: HTDemucs"), "Auto's label: %s", buf);
	sbui_model_label(&m, SB_MODEL_HTDEMUCS_6S, buf, sizeof buf);
	CHECK(!strcmp(buf, "HTDemucs 6 stems (not installed)"), "6 stems' label: %s", buf);
	int64_t bytes = 0;
	sbui_set_port(&m, SB_PORT_MODEL, SB_MODEL_HTDEMUCS);
	CHECK(!sbui_model_install_offer(&m, buf, sizeof buf, &bytes), "an installed model offered");
	CHECK(!sbui_model_makes(&m, 4) && !sbui_model_makes(&m, 5) && sbui_model_makes(&m, 3),
	      "htdemucs makes no guitar or piano, and makes other");
	sbui_set_port(&m, SB_PORT_MODEL, SB_MODEL_HTDEMUCS_6S);
	CHECK(sbui_model_install_offer(&m, buf, sizeof buf, &bytes) && !strcmp(buf, "htdemucs_6s") &&
	      bytes == 55000000, "install offer: %s, %lld bytes", buf, (long long)bytes);
	CHECK(sbui_model_makes(&m, 4) && sbui_model_makes(&m, 5), "htdemucs_6s makes guitar and piano");
	/* while it installs, no button: its status instead, with the fraction */
	sbui_set_install_status(&m, "0.420\thtdemucs_6s: downloading 42% (23.1 of 55.0 MB, 11.0 MB/s, 0:02 left)");
	CHECK(sbui_installing(&m) && fabsf(m.install_fraction - 0.42f) < 1e-6f &&
	      !strncmp(m.install_status, "htdemucs_6s: downloading 42%", 28), "status %s %g",
	      m.install_status, m.install_fraction);
	CHECK(!sbui_model_install_offer(&m, buf, sizeof buf, NULL), "offered while installing");
	/* another model installing does not hide this one's button */
	sbui_set_install_status(&m, "0.1\thtdemucs_ft: downloading 10%");
	CHECK(sbui_model_install_offer(&m, buf, sizeof buf, NULL), "hidden by another's install");
	sbui_set_install_status(&m, "0\thtdemucs_6s not installed: the server answered HTTP 404");
	CHECK(!sbui_installing(&m) && sbui_model_install_offer(&m, buf, sizeof buf, NULL),
	      "a failed install offers the button again");
	sbui_set_install_status(&m, "9.5\tgarbage fraction");
	CHECK(m.install_fraction == 0.0f, "a fraction out of range: %g", m.install_fraction);
}

/* S and M set the audition control the plugin reads: one at a time, a second click off; the
 * stems' files name their stem and take. */
static void test_audition_and_paths(void)
{
	/* S of vocals plays vocals (1); M of drums the mix without drums (6); guitar and piano take
	 * the values after the first eight (9, 10; 11, 12) */
	CHECK(sbui_audition_click(0, 0, false) == 1 && sbui_audition_click(0, 1, true) == 6 &&
	      sbui_audition_click(0, 4, false) == 9 && sbui_audition_click(0, 5, true) == 12,
	      "values");
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		for (int mute = 0; mute < 2; mute++) {
			const float on = sbui_audition_click(0, s, mute);
			int without = -1;
			CHECK(sb_audition_stem((int)on, &without) == s && without == mute,
			      "stem %d %s: %g plays another", s, mute ? "M" : "S", on);
			CHECK(sbui_audition_is(on, s, mute) && !sbui_audition_is(on, s, !mute),
			      "stem %d: which button is lit", s);
			/* a second click turns it off; a click on another moves it there */
			CHECK(sbui_audition_click(on, s, mute) == 0, "second click on %g", on);
			CHECK(sbui_audition_click(on, (s + 1) % 6, mute) != 0 &&
			      !sbui_audition_is(sbui_audition_click(on, (s + 1) % 6, mute), s, mute),
			      "another stem's button");
		}
	CHECK(!sbui_audition_is(0, 0, false) && !sbui_audition_is(0, 0, true), "off lights nothing");
	sbui_model m;
	sbui_model_init(&m, 48000);
	sbui_set_port(&m, SB_PORT_AUDITION, 6);
	CHECK(m.audition_port == 6, "the control's value from the host: %g", m.audition_port);

	CHECK(sbui_stem_of_path("/s/x/Lead-take3/Lead-take3-vocals.wav") == 0 &&
	      sbui_stem_of_path("/s/x/Lead-take3/Lead-take3-other.wav") == 3 &&
	      sbui_stem_of_path("/s/vocals-take1/vocals-take1-piano.wav") == 5 &&
	      sbui_stem_of_path("/s/x/notes.wav") == -1, "stem of path");
	CHECK(sbui_take_of_path("/s/stembridge/Lead-take12/Lead-take12-bass.wav") == 12 &&
	      sbui_take_of_path("/s/my-takeover/Lead-take3-bass.wav") == 3 &&
	      sbui_take_of_path("/s/x/bass.wav") == 0, "take of path");
	sbui_add_stem(&m, "/s/stembridge/Lead-take12/Lead-take12-bass.wav");
	CHECK(sbui_stems_take(&m) == 12, "%d", sbui_stems_take(&m));
	/* a long message is kept whole (the silent take's advice is longer than a label) */
	char big[1500];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	sbui_set_text_n(m.last_error, sizeof m.last_error, big, -1);
	CHECK(strlen(m.last_error) == sizeof big - 1, "%zu of %zu kept", strlen(m.last_error),
	      sizeof big - 1);
	/* and cut, when it must be, between characters */
	sbui_set_text_n(m.manifest, 5, "ab\xc3\xa9\xc3\xa9", -1);
	CHECK(!strcmp(m.manifest, "ab\xc3\xa9"), "'%s'", m.manifest);
}

int main(void)
{
	test_audition_and_paths();
	test_models();
	test_no_devices();
	test_with_devices();
	test_stage_from_ports();
	test_in_use();
	test_port_events();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		fprintf(stderr, "ui_logic: ok\n");
	return failures ? 1 : 0;
}
