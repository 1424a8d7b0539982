/* What the window says (gui/ui_labels.h): a device list whose entries a user can tell apart
 * (two PoCL devices of one name included), the in-use mark, Auto's choice and why, a fallback
 * in the user's words (the Device number the button shows, never the engine's "device:7"),
 * levels, times, the take lane's caption, the audition badge, the zoom button. */
#include "ui_labels.h"

#include "../../plugin/uris.h"
#include "../check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sbui_device dev(const char* name, const char* type, int64_t mem)
{
	sbui_device d;
	memset(&d, 0, sizeof d);
	snprintf(d.key, sizeof d.key, "opencl|Portable Computing Language|%s|0", name);
	snprintf(d.name, sizeof d.name, "%s", name);
	snprintf(d.platform, sizeof d.platform, "Portable Computing Language");
	snprintf(d.type, sizeof d.type, "%s", type);
	d.memory_bytes = mem;
	return d;
}

/* The machine of the issue: two PoCL devices with the same name. */
static void two_pocl(sbui_model* m)
{
	sbui_model_init(m, 48000);
	sbui_clear_devices(m);
	sbui_device a = dev("pthread-skylake-avx512-AMD EPYC", "OpenCL CPU", (int64_t)7 << 30);
	sbui_add_device(m, &a);
	sbui_add_device(m, &a);
}

static void test_device_list(void)
{
	sbui_model m;
	two_pocl(&m);
	float v[16];
	const int n = sbui_device_choices(&m, v);
	CHECK(n == 5 && v[0] == SB_DEVICE_AUTO && v[1] == SB_DEVICE_CPU && v[2] == 2 && v[3] == 3 &&
	      v[4] == SB_DEVICE_ALL, "%d choices: %g %g %g %g %g", n, v[0], v[1], v[2], v[3], v[4]);
	char t[SBUI_MAX_DEVICES + 4][SBUI_TEXT], d[SBUI_MAX_DEVICES + 4][SBUI_TEXT];
	for (int i = 0; i < n; i++)
		sbui_device_entry(&m, v[i], t[i], SBUI_TEXT, d[i], SBUI_TEXT);
	/* every entry distinct; the two devices by number, with type and memory */
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			CHECK(strcmp(t[i], t[j]), "entries %d and %d both read '%s'", i, j, t[i]);
	CHECK(!strcmp(t[2], "Device 1: pthread-skylake-avx512-AMD EPYC") &&
	      !strcmp(t[3], "Device 2: pthread-skylake-avx512-AMD EPYC"), "'%s' / '%s'", t[2], t[3]);
	CHECK(strstr(d[2], "OpenCL CPU") && strstr(d[2], "7.0 GiB") &&
	      strstr(d[2], "Portable Computing Language"), "detail '%s'", d[2]);
	CHECK(strstr(d[0], "best") && strstr(d[4], "share"), "'%s' / '%s'", d[0], d[4]);
	/* the in-use mark follows the device-in-use output */
	CHECK(!sbui_device_entry_in_use(&m, 1), "marked in use before any job");
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, 3);
	CHECK(sbui_device_entry_in_use(&m, 3) && !sbui_device_entry_in_use(&m, 2) &&
	      !sbui_device_entry_in_use(&m, 1), "the mark is not on Device 2 alone");
	/* a device this machine lacks, chosen (a session from another machine): listed last, as
	 * itself */
	sbui_set_port(&m, SB_PORT_DEVICE, 9);
	CHECK(sbui_device_choices(&m, v) == 6 && v[5] == 9, "%g", v[5]);
	sbui_device_entry(&m, 9, t[0], SBUI_TEXT, d[0], SBUI_TEXT);
	CHECK(!strcmp(t[0], "Device 8 (not present)") && strstr(d[0], "not on this machine"),
	      "'%s' / '%s'", t[0], d[0]);
	char mem[32];
	sbui_memory_text(512 << 20, mem, sizeof mem);
	CHECK(!strcmp(mem, "512 MiB"), "%s", mem);
	sbui_memory_text(-1, mem, sizeof mem);
	CHECK(!mem[0], "%s", mem);
}

static void test_auto_and_fallback(void)
{
	sbui_model m;
	char s[SBUI_TEXT];
	two_pocl(&m);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Auto will use the CPU: no GPU here (its 2 OpenCL devices are processors "
	                 "too)"), "'%s'", s);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, SB_DEVICE_CPU);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!strncmp(s, "Auto chose the CPU: no GPU here", 31), "'%s'", s);
	/* a machine with a GPU: Auto names it by the number the list shows */
	sbui_device g = dev("Radeon RX 7900", "discrete GPU", (int64_t)24 << 30);
	sbui_clear_devices(&m);
	sbui_add_device(&m, &g);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, -1);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Auto will use Device 1, the discrete GPU"), "'%s'", s);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, 2);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Auto chose Device 1, the first discrete GPU here"), "'%s'", s);
	sbui_add_device(&m, &g);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, SB_DEVICE_ALL);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Auto shares each take among the 2 GPUs"), "'%s'", s);
	/* not on Auto: nothing to explain */
	sbui_set_port(&m, SB_PORT_DEVICE, SB_DEVICE_CPU);
	sbui_auto_text(&m, s, sizeof s);
	CHECK(!s[0], "'%s'", s);

	/* the fallback: Device 8 chosen, two devices here; the plugin says "device:7" */
	two_pocl(&m);
	sbui_set_port(&m, SB_PORT_DEVICE, 9);
	sbui_set_port(&m, SB_PORT_DEVICE_OUT, SB_DEVICE_CPU);
	sbui_fallback_text(&m, s, sizeof s);
	CHECK(!s[0], "a fallback said before the plugin reports one: '%s'", s);
	sbui_set_port(&m, SB_PORT_FALLBACK_OUT, 1);
	sbui_set_text(m.device_in_use, "CPU (2 threads) (fallback: device:7 not found: 2 accelerators "
	                               "present)", -1);
	sbui_fallback_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Device 8 is not on this machine (it has 2 devices besides the CPU): the "
	                 "CPU ran the take instead"), "'%s'", s);
	CHECK(!strstr(s, "device:7"), "'%s'", s);
	/* the words are the last job's: the Device control moved since does not change them */
	sbui_set_port(&m, SB_PORT_DEVICE, 2);
	char again[SBUI_TEXT];
	sbui_fallback_text(&m, again, sizeof again);
	CHECK(!strcmp(again, s), "'%s' after the control moved", again);
	/* a device that failed: the engine's reason, its "device:N" as the button numbers it */
	sbui_set_text(m.device_in_use, "CPU (2 threads) (fallback: device:0 ran out of memory even "
	                               "with small chunks)", -1);
	sbui_fallback_text(&m, s, sizeof s);
	CHECK(!strcmp(s, "Fallback: Device 1 ran out of memory even with small chunks; the CPU ran "
	                 "the take instead"), "'%s'", s);
}

static void test_numbers(void)
{
	char s[64];
	sbui_db_text(1.0f, s, sizeof s);
	CHECK(!strcmp(s, "0.0 dB"), "%s", s);
	sbui_db_text(0.5f, s, sizeof s);
	CHECK(!strcmp(s, "-6.0 dB"), "%s", s);
	sbui_db_text(0.0f, s, sizeof s);
	CHECK(!strcmp(s, "silent"), "%s", s);
	sbui_levels_text(0.5f, 0.1f, false, s, sizeof s);
	CHECK(!strcmp(s, "peak -6.0 dB · RMS -20.0 dB"), "%s", s);
	sbui_levels_text(0.5f, 0.1f, true, s, sizeof s);
	CHECK(!strcmp(s, "-6.0 / -20.0 dB"), "%s", s);
	sbui_time_text(48000 * 65 + 12000, 48000, s, sizeof s);
	CHECK(!strcmp(s, "1:05.250"), "%s", s);
	sbui_time_text((int64_t)44100 * 3725, 44100, s, sizeof s);
	CHECK(!strcmp(s, "1:02:05.000"), "%s", s);
	sbui_zoom_label(1.25f, 1.25f, s, sizeof s);
	CHECK(!strcmp(s, "Zoom 125 %"), "%s", s);
	sbui_zoom_label(0.0f, 2.0f, s, sizeof s);
	CHECK(!strcmp(s, "Zoom auto (200 %)"), "%s", s);
	CHECK(!strcmp(sbui_stem_title(4), "Guitar") && !strcmp(sbui_stem_title(9), "?"), "titles");
}

static void test_lane_and_badge(void)
{
	sbui_model m;
	char s[SBUI_TEXT];
	sbui_model_init(&m, 48000);
	sbui_lane_caption(&m, s, sizeof s);
	CHECK(!s[0], "a caption with no take: '%s'", s);
	/* recording: the length so far, the start, the peak heard */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_RECORDING);
	m.lane.valid = true;
	m.lane.start = 48000 * 65;
	m.lane.frames = 48000 * 12 + 19200;
	m.lane.cols = 2;
	m.lane.lohi[0] = -0.25f;
	m.lane.lohi[1] = 0.5f;
	m.lane.lohi[2] = -0.1f;
	m.lane.lohi[3] = 0.1f;
	sbui_lane_caption(&m, s, sizeof s);
	CHECK(!strcmp(s, "Recording · 0:12.400 from 1:05.000 · peak -6.0 dB"), "'%s'", s);
	/* separated: the stems of that region name the take */
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_DONE);
	sbui_add_stem(&m, "/s/stembridge/Lead-take3/Lead-take3-vocals.wav");
	m.stems_start = m.lane.start;
	m.stems_frames = m.lane.frames;
	sbui_lane_caption(&m, s, sizeof s);
	CHECK(!strcmp(s, "Take 3 · 0:12.400 from 1:05.000 · peak -6.0 dB"), "'%s'", s);
	/* a newer take recorded and silent, from the same place: not called take 3 */
	m.lane.frames = 48000 * 2;
	m.lane.lohi[0] = m.lane.lohi[1] = m.lane.lohi[2] = m.lane.lohi[3] = 0.0f;
	sbui_set_port(&m, SB_PORT_STATE_OUT, SB_STATE_SILENT);
	sbui_lane_caption(&m, s, sizeof s);
	CHECK(!strcmp(s, "Last take · 0:02.000 from 1:05.000 · silent"), "'%s'", s);

	sbui_audition_badge(&m, s, sizeof s);
	CHECK(!s[0], "a badge with audition off: '%s'", s);
	sbui_set_port(&m, SB_PORT_AUDITION, sb_audition_value(0, 0));
	sbui_audition_badge(&m, s, sizeof s);
	CHECK(!strcmp(s, "Playing vocals alone in take 3 (1:05.000 to 1:17.400), while the transport "
	                 "is there"), "'%s'", s);
	sbui_set_port(&m, SB_PORT_AUDITION, sb_audition_value(5, 1));
	sbui_audition_badge(&m, s, sizeof s);
	CHECK(!strncmp(s, "Playing the mix without piano in take 3", 39), "'%s'", s);
}

int main(void)
{
	test_device_list();
	test_auto_and_fallback();
	test_numbers();
	test_lane_and_badge();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		fprintf(stderr, "ui_labels: ok\n");
	return failures ? 1 : 0;
}
