/* The words and numbers the window shows. See ui_labels.h. */
#include "ui_labels.h"

#include "../plugin/uris.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* const stem_titles[SBUI_STEM_KINDS] = {"Vocals", "Drums", "Bass", "Other",
                                                         "Guitar", "Piano"};
static const char* const stem_words[SBUI_STEM_KINDS] = {"vocals", "drums", "bass", "other",
                                                        "guitar", "piano"};

static int port_int(float v) { return (int)lrintf(v); }

const char* sbui_stem_title(int stem)
{
	return stem >= 0 && stem < SBUI_STEM_KINDS ? stem_titles[stem] : "?";
}

int sbui_device_choices(const sbui_model* m, float* values)
{
	int n = sbui_device_count(m);
	bool chosen = false;
	for (int i = 0; i < n; i++) {
		/* the order the button steps through: Auto, CPU, Device 1.., All devices */
		values[i] = (float)(i < SB_DEVICE_FIRST_ACCEL + m->n_devices ? i : SB_DEVICE_ALL);
		chosen = chosen || port_int(values[i]) == port_int(m->device_port);
	}
	/* a choice this machine lacks (a session from another) stays in the list, as chosen */
	if (!chosen)
		values[n++] = (float)port_int(m->device_port);
	return n;
}

static const sbui_device* device_of(const sbui_model* m, int v)
{
	const int i = v - SB_DEVICE_FIRST_ACCEL;
	return i >= 0 && i < m->n_devices ? &m->devices[i] : NULL;
}

void sbui_memory_text(int64_t bytes, char* out, int size)
{
	if (bytes < 0)
		snprintf(out, (size_t)size, "%s", "");
	else if (bytes >= (int64_t)1 << 30)
		snprintf(out, (size_t)size, "%.1f GiB", (double)bytes / (1024.0 * 1024 * 1024));
	else
		snprintf(out, (size_t)size, "%.0f MiB", (double)bytes / (1024.0 * 1024));
}

void sbui_device_entry(const sbui_model* m, float value, char* title, int tsize, char* detail,
                       int dsize)
{
	const int v = port_int(value);
	sbui_device_label(m, value, title, tsize);
	const sbui_device* d = device_of(m, v);
	if (v == SB_DEVICE_AUTO)
		snprintf(detail, (size_t)dsize, "the best device here, else the CPU");
	else if (v == SB_DEVICE_CPU)
		snprintf(detail, (size_t)dsize, "the native engine on the host's processor");
	else if (v == SB_DEVICE_ALL)
		snprintf(detail, (size_t)dsize, "every GPU and the CPU share each take");
	else if (!d)
		snprintf(detail, (size_t)dsize, "not on this machine: the CPU runs instead");
	else {
		char mem[32];
		sbui_memory_text(d->memory_bytes, mem, sizeof mem);
		snprintf(detail, (size_t)dsize, "%s%s%s%s%s", d->type[0] ? d->type : "unknown type",
		         mem[0] ? " · " : "", mem, d->platform[0] ? " · " : "", d->platform);
	}
}

bool sbui_device_entry_in_use(const sbui_model* m, float value)
{
	return m->device_out_port >= 0 && port_int(m->device_out_port) == port_int(value);
}

static bool is_gpu(const sbui_device* d)
{
	return strstr(d->type, "GPU") || !strcmp(d->type, "accelerator");
}

/* The devices that are processors too (PoCL): said, since their names look like GPUs' slots. */
static int count_opencl_cpus(const sbui_model* m)
{
	int n = 0;
	for (int i = 0; i < m->n_devices; i++)
		n += !strcmp(m->devices[i].type, "OpenCL CPU");
	return n;
}

void sbui_auto_text(const sbui_model* m, char* out, int size)
{
	out[0] = '\0';
	if (port_int(m->device_port) != SB_DEVICE_AUTO)
		return;
	if (!m->devices_known) {
		snprintf(out, (size_t)size, "Auto takes the best GPU, else the CPU");
		return;
	}
	int gpus = 0, first = -1;
	for (int i = 0; i < m->n_devices; i++)
		if (is_gpu(&m->devices[i])) {
			gpus++;
			if (first < 0)
				first = i;
		}
	const int cpus = count_opencl_cpus(m);
	char why[160] = "";
	if (gpus == 0 && cpus == 1)
		snprintf(why, sizeof why, "no GPU here (its OpenCL device is a processor too)");
	else if (gpus == 0 && cpus > 1)
		snprintf(why, sizeof why, "no GPU here (its %d OpenCL devices are processors too)", cpus);
	else if (gpus == 0)
		snprintf(why, sizeof why, "no GPU here");
	const bool ran = m->device_out_port >= 0;
	const int out_v = port_int(m->device_out_port);
	if (ran && out_v == SB_DEVICE_ALL) {
		snprintf(out, (size_t)size, "Auto shares each take among the %d GPUs", gpus);
	} else if (ran && out_v == SB_DEVICE_CPU) {
		snprintf(out, (size_t)size, "Auto chose the CPU%s%s", why[0] ? ": " : "", why);
	} else if (ran && device_of(m, out_v)) {
		const sbui_device* d = device_of(m, out_v);
		snprintf(out, (size_t)size, "Auto chose Device %d, the first %s here",
		         out_v - SB_DEVICE_FIRST_ACCEL + 1, d->type[0] ? d->type : "GPU");
	} else if (gpus > 1) {
		snprintf(out, (size_t)size, "Auto will share each take among the %d GPUs", gpus);
	} else if (gpus == 1) {
		snprintf(out, (size_t)size, "Auto will use Device %d, the %s", first + 1,
		         m->devices[first].type);
	} else {
		snprintf(out, (size_t)size, "Auto will use the CPU: %s", why);
	}
}

/* The engine's reason with its "device:N" (counted from 0) as the window counts: "Device N+1". */
static void user_words(const char* reason, char* out, size_t size)
{
	size_t at = 0;
	out[0] = '\0';
	for (const char* p = reason; *p && at + 1 < size;) {
		char* end = NULL;
		if (!strncmp(p, "device:", 7) && p[7] >= '0' && p[7] <= '9') {
			const long n = strtol(p + 7, &end, 10);
			const int w = snprintf(out + at, size - at, "Device %ld", n + 1);
			if (w < 0 || (size_t)w >= size - at)
				break;
			at += (size_t)w;
			p = end;
			continue;
		}
		out[at++] = *p++;
		out[at] = '\0';
	}
}

void sbui_fallback_text(const sbui_model* m, char* out, int size)
{
	out[0] = '\0';
	if (m->fallback_port <= 0.5f)
		return;
	char ran[SBUI_TEXT] = "the CPU";
	const int out_v = port_int(m->device_out_port);
	if (out_v >= SB_DEVICE_FIRST_ACCEL && out_v != SB_DEVICE_ALL)
		sbui_device_label(m, m->device_out_port, ran, sizeof ran);
	/* the reason is the last job's, whatever the Device control shows now: the words come from
	 * it, not from the control */
	const char* tag = strstr(m->device_in_use, "(fallback: ");
	char reason[SBUI_TEXT] = "";
	if (tag) {
		snprintf(reason, sizeof reason, "%s", tag + 11);
		const size_t n = strlen(reason);
		if (n && reason[n - 1] == ')')
			reason[n - 1] = '\0';
	}
	int asked = -1, have = -1;
	if (sscanf(reason, "device:%d not found: %d", &asked, &have) == 2 && asked >= 0) {
		snprintf(out, (size_t)size,
		         "Device %d is not on this machine (it has %d device%s besides the CPU): %s ran "
		         "the take instead", asked + 1, have, have == 1 ? "" : "s", ran);
		return;
	}
	char words[SBUI_TEXT];
	user_words(reason, words, sizeof words);
	if (words[0])
		snprintf(out, (size_t)size, "Fallback: %s; %s ran the take instead", words, ran);
	else
		snprintf(out, (size_t)size, "Fallback: the device asked for could not run the take; %s "
		         "ran it instead", ran);
}

void sbui_db_text(float linear, char* out, int size)
{
	if (!(linear > 0.0f))
		snprintf(out, (size_t)size, "silent");
	else
		snprintf(out, (size_t)size, "%.1f dB", 20.0 * log10((double)linear));
}

void sbui_levels_text(float peak, float rms, bool compact, char* out, int size)
{
	char p[24], r[24];
	sbui_db_text(peak, p, sizeof p);
	sbui_db_text(rms, r, sizeof r);
	if (!compact)
		snprintf(out, (size_t)size, "peak %s · RMS %s", p, r);
	else if (!(peak > 0.0f))
		snprintf(out, (size_t)size, "silent");
	else /* "-3.2 / -18.5 dB" */
		snprintf(out, (size_t)size, "%.1f / %s", 20.0 * log10((double)peak), r);
}

void sbui_time_text(int64_t frames, double rate, char* out, int size)
{
	if (rate <= 0)
		rate = 48000;
	const int64_t ms = (int64_t)llround((double)(frames < 0 ? 0 : frames) * 1000.0 / rate);
	const int64_t s = ms / 1000;
	if (s >= 3600)
		snprintf(out, (size_t)size, "%lld:%02lld:%02lld.%03lld", (long long)(s / 3600),
		         (long long)(s / 60 % 60), (long long)(s % 60), (long long)(ms % 1000));
	else
		snprintf(out, (size_t)size, "%lld:%02lld.%03lld", (long long)(s / 60), (long long)(s % 60),
		         (long long)(ms % 1000));
}

/* The take the lane shows, when the window can tell: the stems' take when the lane is that
 * region, else the take the state speaks of while it is being separated; 0 unknown. */
static int lane_take(const sbui_model* m)
{
	if (m->lane.start == m->stems_start && m->lane.frames == m->stems_frames &&
	    sbui_stems_take(m) > 0)
		return sbui_stems_take(m);
	const sbui_stage st = sbui_model_stage(m);
	if (m->job_take > 0 && (st == SBUI_QUEUED || st == SBUI_SEPARATING || st == SBUI_WRITING ||
	                        st == SBUI_RESUMED || st == SBUI_ERROR))
		return m->job_take;
	return 0;
}

void sbui_lane_caption(const sbui_model* m, char* out, int size)
{
	const bool rec = sbui_model_stage(m) == SBUI_RECORDING;
	out[0] = '\0';
	if (!m->lane.valid && !rec)
		return;
	const int64_t frames = rec && m->recorded_frames > m->lane.frames ? m->recorded_frames
	                                                                  : m->lane.frames;
	char len[32], at[32], db[24], peak[32];
	sbui_time_text(frames, m->sample_rate, len, sizeof len);
	sbui_time_text(m->lane.start, m->sample_rate, at, sizeof at);
	sbui_db_text(sbui_lane_peak(&m->lane), db, sizeof db);
	snprintf(peak, sizeof peak, "%s%s", sbui_lane_peak(&m->lane) > 0.0f ? "peak " : "", db);
	char who[32];
	const int take = rec ? 0 : lane_take(m);
	if (rec)
		snprintf(who, sizeof who, "Recording");
	else if (take > 0)
		snprintf(who, sizeof who, "Take %d", take);
	else
		snprintf(who, sizeof who, "Last take");
	snprintf(out, (size_t)size, "%s · %s from %s · %s", who, len, at, peak);
}

void sbui_audition_badge(const sbui_model* m, char* out, int size)
{
	int without = 0;
	const int s = sb_audition_stem(port_int(m->audition_port), &without);
	out[0] = '\0';
	if (s < 0 || s >= SBUI_STEM_KINDS)
		return;
	char what[64];
	if (without)
		snprintf(what, sizeof what, "the mix without %s", stem_words[s]);
	else
		snprintf(what, sizeof what, "%s alone", stem_words[s]);
	const int take = sbui_stems_take(m);
	char where[128] = "inside the take";
	if (m->stems_start >= 0 && m->stems_frames > 0) {
		char a[32], b[32];
		sbui_time_text(m->stems_start, m->sample_rate, a, sizeof a);
		sbui_time_text(m->stems_start + m->stems_frames, m->sample_rate, b, sizeof b);
		if (take > 0)
			snprintf(where, sizeof where, "in take %d (%s to %s)", take, a, b);
		else
			snprintf(where, sizeof where, "from %s to %s", a, b);
	}
	snprintf(out, (size_t)size, "Playing %s %s, while the transport is there", what, where);
}

void sbui_zoom_label(float own, float effective, char* out, int size)
{
	if (own > 0.0f)
		snprintf(out, (size_t)size, "Zoom %d %%", (int)lrintf(own * 100.0f));
	else
		snprintf(out, (size_t)size, "Zoom auto (%d %%)", (int)lrintf(effective * 100.0f));
}

void sbui_tooltip(const sbui_model* m, int w, int row_stem, const char* row_path, double scale,
                  const char* scale_source, char* out, int osize)
{
	const size_t size = (size_t)osize;
	out[0] = '\0';
	if (w >= SBUI_W_ROW0 && w < SBUI_W_MORE) {
		const int k = (w - SBUI_W_ROW0) / 5, part = (w - SBUI_W_ROW0) % 5;
		const int s = row_stem;
		if (s < 0)
			return;
		if (part == SBUI_ROW_SOLO)
			snprintf(out, size, "Play %s alone inside the take, in place of the input (key %d). "
			         "Click again to stop.", stem_words[s], k + 1);
		else if (part == SBUI_ROW_MUTE)
			snprintf(out, size, "Play the mix without %s inside the take (Shift+%d). Click again "
			         "to stop.", stem_words[s], k + 1);
		else if (part == SBUI_ROW_WAVE || part == SBUI_ROW_NAME)
			snprintf(out, size, "%s", row_path ? row_path : "");
		else
			snprintf(out, size, "The %s stem's peak and RMS level, in dB below full scale",
			         stem_words[s]);
		return;
	}
	if (w >= SBUI_W_TOGGLE0 && w < SBUI_W_TOGGLE0 + SBUI_ROWS) {
		snprintf(out, size, "Write the %s stem of each take", stem_words[w - SBUI_W_TOGGLE0]);
		return;
	}
	switch (w) {
	case SBUI_W_DEVICE: {
		char d[900];
		sbui_device_tooltip(m, m->device_port, d, sizeof d);
		snprintf(out, size, "%s\n(click: the device list; wheel or arrow keys: the next one)", d);
		break;
	}
	case SBUI_W_ZOOM:
		snprintf(out, size, "The window's zoom, saved with the session: now %d %%, from %s. "
		         "Auto follows the host's scale factor, else Xft.dpi. Keys: Ctrl+plus, "
		         "Ctrl+minus, Ctrl+0 (auto).", (int)lrint(scale * 100),
		         !strcmp(scale_source, "zoom")      ? "this button"
		         : !strcmp(scale_source, "host")    ? "the host"
		         : !strcmp(scale_source, "Xft.dpi") ? "Xft.dpi"
		                                            : "no setting");
		break;
	case SBUI_W_RECORD:
		snprintf(out, size, "Armed, each stretch the transport rolls is recorded as a take and "
		         "separated when it stops (key R)");
		break;
	case SBUI_W_MODE:
		snprintf(out, size, "Parallel: takes of several tracks run on several devices at once. "
		         "Sequential: one take at a time.");
		break;
	case SBUI_W_PRECISION:
		snprintf(out, size, "FP32 products, or BF16 inputs with FP32 sums: about twice as fast "
		         "where the device has them, stems within about 0.5 %%");
		break;
	case SBUI_W_KEEP:
		snprintf(out, size, "Keep each take's recording beside its stems (off: it goes once the "
		         "stems are complete)");
		break;
	case SBUI_W_MODEL:
		snprintf(out, size, "The separation model; Auto is the best one installed (click: next, "
		         "right-click: back)");
		break;
	case SBUI_W_INSTALL:
		snprintf(out, size, "Download, check and install the model; a take recorded meanwhile "
		         "waits for it");
		break;
	case SBUI_W_OPEN:
		snprintf(out, size, "Open the stems' folder in the file manager");
		break;
	case SBUI_W_COPY:
		snprintf(out, size, "Copy the folder's path to the clipboard");
		break;
	case SBUI_W_LANE:
		snprintf(out, size, "The take's waveform: the loudest and the quietest sample of each "
		         "slice, live while it records");
		break;
	default: break;
	}
}
