/* The UI's logic: device cycling, labels, the stage from port events. See ui_logic.h. */
#include "ui_logic.h"

#include "../plugin/uris.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbui_set_text_n(char* dst, int cap, const char* src, int len)
{
	size_t n = len < 0 ? strlen(src) : (size_t)len;
	if (n > (size_t)cap - 1)
		n = (size_t)cap - 1;
	/* never end on half a UTF-8 character */
	if (n < strlen(src))
		while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
			n--;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

void sbui_set_text(char* dst, const char* src, int len)
{
	sbui_set_text_n(dst, SBUI_TEXT, src, len);
}

void sbui_model_init(sbui_model* m, double sample_rate)
{
	memset(m, 0, sizeof *m);
	m->device_out_port = -1.0f;
	m->time_left_port = -1.0f;
	m->model_port = (float)SB_MODEL_AUTO;
	m->sample_rate = sample_rate > 0 ? sample_rate : 48000.0;
	m->stems_start = -1;
}

int sbui_device_count(const sbui_model* m)
{
	return SB_DEVICE_FIRST_ACCEL + m->n_devices + (m->n_devices > 0);
}

static int port_to_int(float v) { return (int)lrintf(v); }

/* the port value of the i-th choice the button cycles through */
static int device_choice(const sbui_model* m, int i)
{
	return i < SB_DEVICE_FIRST_ACCEL + m->n_devices ? i : SB_DEVICE_ALL;
}

float sbui_device_step(const sbui_model* m, int dir)
{
	int n = sbui_device_count(m);
	int cur = port_to_int(m->device_port);
	int at = -1;
	for (int i = 0; i < n; i++)
		if (device_choice(m, i) == cur) at = i;
	if (at < 0) /* not present: next is Auto, back is the last listed */
		return (float)device_choice(m, dir > 0 ? 0 : n - 1);
	return (float)device_choice(m, ((at + (dir > 0 ? 1 : -1)) % n + n) % n);
}

static const sbui_device* device_at(const sbui_model* m, int v)
{
	int i = v - SB_DEVICE_FIRST_ACCEL;
	return i >= 0 && i < m->n_devices ? &m->devices[i] : NULL;
}

void sbui_device_label(const sbui_model* m, float port_value, char* out, int size)
{
	int v = port_to_int(port_value);
	const sbui_device* d = device_at(m, v);
	if (v == SB_DEVICE_AUTO)
		snprintf(out, (size_t)size, "Auto");
	else if (v == SB_DEVICE_CPU)
		snprintf(out, (size_t)size, "CPU");
	else if (v == SB_DEVICE_ALL)
		snprintf(out, (size_t)size, "All devices");
	else if (d) /* the number first: two devices of one name stay apart */
		snprintf(out, (size_t)size, "Device %d: %s", v - SB_DEVICE_FIRST_ACCEL + 1,
		         d->name[0] ? d->name : d->key);
	else if (!m->devices_known && v > SB_DEVICE_CPU)
		snprintf(out, (size_t)size, "Device %d", v - SB_DEVICE_FIRST_ACCEL + 1);
	else
		snprintf(out, (size_t)size, "Device %d (not present)", v - SB_DEVICE_FIRST_ACCEL + 1);
}

void sbui_device_tooltip(const sbui_model* m, float port_value, char* out, int size)
{
	int v = port_to_int(port_value);
	const sbui_device* d = device_at(m, v);
	if (v == SB_DEVICE_AUTO) {
		snprintf(out, (size_t)size, "Auto: the best device available, falling back to the CPU");
		return;
	}
	if (v == SB_DEVICE_CPU) {
		snprintf(out, (size_t)size, "CPU: the native engine on the host's processor");
		return;
	}
	if (v == SB_DEVICE_ALL) {
		snprintf(out, (size_t)size,
		         "All devices: every GPU and the CPU share each take, segment by segment; "
		         "a faster device does more");
		return;
	}
	if (!d && !m->devices_known) {
		snprintf(out, (size_t)size, "Device %d: waiting for the plugin's device list",
		         v - SB_DEVICE_FIRST_ACCEL + 1);
		return;
	}
	if (!d) {
		snprintf(out, (size_t)size,
		         "Device %d is not on this machine; the plugin falls back to the CPU",
		         v - SB_DEVICE_FIRST_ACCEL + 1);
		return;
	}
	char mem[64] = "unknown", units[32] = "unknown";
	if (d->memory_bytes >= 0)
		snprintf(mem, sizeof mem, "%.1f GiB", (double)d->memory_bytes / (1024.0 * 1024 * 1024));
	if (d->compute_units >= 0)
		snprintf(units, sizeof units, "%d", d->compute_units);
	snprintf(out, (size_t)size,
	         "Name: %s\nPlatform: %s\nType: %s\nMemory: %s\nCompute units: %s\nDriver: %s",
	         d->name, d->platform[0] ? d->platform : "unknown", d->type[0] ? d->type : "unknown",
	         mem, units, d->driver[0] ? d->driver : "unknown");
}

void sbui_in_use_label(const sbui_model* m, char* out, int size, bool* warn)
{
	*warn = m->fallback_port > 0.5f;
	if (m->device_in_use[0]) {
		snprintf(out, (size_t)size, "%s", m->device_in_use);
		return;
	}
	if (m->device_out_port < 0) {
		snprintf(out, (size_t)size, "none yet");
		return;
	}
	char name[SBUI_TEXT];
	sbui_device_label(m, m->device_out_port, name, sizeof name);
	snprintf(out, (size_t)size, "%s%s", name, *warn ? " (fallback)" : "");
}

void sbui_in_use_parts(const sbui_model* m, char* device, char* reason, int size, bool* warn)
{
	char all[SBUI_TEXT * 2];
	sbui_in_use_label(m, all, sizeof all, warn);
	reason[0] = '\0';
	const char* tag = " (fallback: ";
	char* at = strstr(all, tag);
	if (at && all[strlen(all) - 1] == ')') {
		all[strlen(all) - 1] = '\0';
		snprintf(reason, (size_t)size, "%s", at + strlen(tag));
		*at = '\0';
		snprintf(device, (size_t)size, "%s, fallback", all);
		return;
	}
	snprintf(device, (size_t)size, "%s", all);
}

sbui_stage sbui_model_stage(const sbui_model* m)
{
	switch (port_to_int(m->state_port)) {
	case SB_STATE_RECORDING: return SBUI_RECORDING;
	case SB_STATE_QUEUED: return SBUI_QUEUED;
	case SB_STATE_SEPARATING: return m->progress_port >= 0.999f ? SBUI_WRITING : SBUI_SEPARATING;
	case SB_STATE_DONE: return SBUI_DONE;
	case SB_STATE_ERROR: return SBUI_ERROR;
	case SB_STATE_SILENT: return SBUI_SILENT;
	case SB_STATE_RESUMED: return SBUI_RESUMED;
	default: return SBUI_IDLE;
	}
}

float sbui_progress(const sbui_model* m)
{
	switch (sbui_model_stage(m)) {
	case SBUI_DONE: return 1.0f;
	case SBUI_SEPARATING:
	case SBUI_RESUMED:
	case SBUI_WRITING: {
		float p = m->progress_port;
		return p < 0 ? 0 : p > 1 ? 1 : p;
	}
	default: return 0.0f;
	}
}

static const char* const stem_keys[SB_PLUGIN_STEMS] = {"vocals", "drums", "bass", "other",
                                                        "guitar", "piano"};

/* the order the Model button steps through */
static const int model_order[SB_N_MODEL_CHOICES] = {SB_MODEL_AUTO, SB_MODEL_BUILTIN,
                                                    SB_MODEL_HTDEMUCS, SB_MODEL_HTDEMUCS_FT,
                                                    SB_MODEL_HTDEMUCS_6S};

float sbui_model_step(float port_value, int dir)
{
	int v = port_to_int(port_value), at = 0;
	for (int i = 0; i < SB_N_MODEL_CHOICES; i++)
		if (model_order[i] == v)
			at = i;
	at = ((at + (dir > 0 ? 1 : -1)) % SB_N_MODEL_CHOICES + SB_N_MODEL_CHOICES) % SB_N_MODEL_CHOICES;
	return (float)model_order[at];
}

const sbui_modelinfo* sbui_model_info(const sbui_model* m, float port_value)
{
	const int v = port_to_int(port_value);
	if (v < 0 || v >= SB_N_MODEL_CHOICES)
		return NULL;
	for (int i = 0; i < m->n_models; i++)
		if (!strcmp(m->models[i].name, sb_model_choice_names[v]))
			return &m->models[i];
	return NULL;
}

void sbui_model_label(const sbui_model* m, float port_value, char* out, int size)
{
	static const char* const fallback[SB_N_MODEL_CHOICES] = {
		"Built-in", "HTDemucs", "HTDemucs fine-tuned", "HTDemucs 6 stems", "Auto"};
	const int v = port_to_int(port_value);
	const sbui_modelinfo* i = sbui_model_info(m, port_value);
	if (v < 0 || v >= SB_N_MODEL_CHOICES)
		snprintf(out, (size_t)size, "?");
	else if (!i)
		snprintf(out, (size_t)size, "%s", fallback[v]);
	else
		snprintf(out, (size_t)size, "%s%s", i->title, i->installed ? "" : " (not installed)");
}

bool sbui_installing(const sbui_model* m)
{
	const char* s = m->install_status;
	return strstr(s, ": downloading") || strstr(s, ": checking") || strstr(s, ": converting") ||
	       strstr(s, ": waiting to install");
}

bool sbui_model_install_offer(const sbui_model* m, char* out, int size, int64_t* bytes)
{
	const sbui_modelinfo* i = sbui_model_info(m, m->model_port);
	if (!i || i->installed)
		return false;
	/* an install of it in progress: its status shows, no button */
	char head[80];
	snprintf(head, sizeof head, "%s:", i->name);
	if (sbui_installing(m) && !strncmp(m->install_status, head, strlen(head)))
		return false;
	snprintf(out, (size_t)size, "%s", i->name);
	if (bytes)
		*bytes = i->bytes;
	return true;
}

bool sbui_model_makes(const sbui_model* m, int stem)
{
	const sbui_modelinfo* i = sbui_model_info(m, m->model_port);
	return !i || !i->stems || (i->stems & (1u << stem));
}

void sbui_set_model_list(sbui_model* m, const char* text)
{
	m->n_models = 0;
	for (const char* line = text; *line && m->n_models < SBUI_MAX_MODELS;) {
		const char* end = strchr(line, '\n');
		const size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[512];
		snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
		char* f[5] = {0};
		char* p = buf;
		for (int k = 0; k < 5 && p; k++) {
			f[k] = p;
			p = strchr(p, '\t');
			if (p)
				*p++ = '\0';
		}
		if (f[4]) {
			sbui_modelinfo* i = &m->models[m->n_models++];
			memset(i, 0, sizeof *i);
			snprintf(i->name, sizeof i->name, "%.63s", f[0]);
			snprintf(i->title, sizeof i->title, "%.63s", f[1]);
			for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
				const char* at = strstr(f[2], stem_keys[s]);
				const size_t n = strlen(stem_keys[s]);
				if (at && (at == f[2] || at[-1] == ',') && (at[n] == ',' || at[n] == '\0'))
					i->stems |= 1u << s;
			}
			i->installed = f[3][0] == '1';
			i->bytes = strtoll(f[4], NULL, 10);
		}
		line += len + (end ? 1 : 0);
	}
}

void sbui_set_install_status(sbui_model* m, const char* text)
{
	const char* tab = strchr(text, '\t');
	m->install_fraction = tab ? strtof(text, NULL) : 0.0f;
	if (!(m->install_fraction >= 0.0f && m->install_fraction <= 1.0f))
		m->install_fraction = 0.0f;
	sbui_set_text(m->install_status, tab ? tab + 1 : text, -1);
}

void sbui_set_port(sbui_model* m, uint32_t port, float value)
{
	switch (port) {
	case SB_PORT_DEVICE: m->device_port = value; break;
	case SB_PORT_MODEL: m->model_port = value; break;
	case SB_PORT_STATE_OUT:
		/* a new take: its clock starts, and the last take's error is no longer news (the
		 * plugin clears it too; this does not wait for its message) */
		if (port_to_int(value) == SB_STATE_RECORDING &&
		    port_to_int(m->state_port) != SB_STATE_RECORDING) {
			m->recorded_frames = 0;
			m->last_error[0] = '\0';
		}
		m->state_port = value;
		break;
	case SB_PORT_AUDITION: m->audition_port = value; break;
	case SB_PORT_PROGRESS_OUT: m->progress_port = value; break;
	case SB_PORT_DEVICE_OUT: m->device_out_port = value; break;
	case SB_PORT_FALLBACK_OUT: m->fallback_port = value; break;
	default: break;
	}
}

void sbui_set_time_left(sbui_model* m, float seconds) { m->time_left_port = seconds; }

void sbui_clear_devices(sbui_model* m)
{
	m->n_devices = 0;
	m->devices_known = true;
}

bool sbui_add_device(sbui_model* m, const sbui_device* d)
{
	if (m->n_devices >= SBUI_MAX_DEVICES)
		return false;
	m->devices[m->n_devices++] = *d;
	return true;
}

void sbui_clear_stems(sbui_model* m) { m->n_stems = 0; }

bool sbui_add_stem(sbui_model* m, const char* path)
{
	if (m->n_stems >= SBUI_MAX_STEMS)
		return false;
	sbui_set_text(m->stems[m->n_stems++], path, -1);
	return true;
}

int sbui_stem_of_path(const char* path)
{
	const char* base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char* dot = strrchr(base, '.');
	const size_t end = dot ? (size_t)(dot - base) : strlen(base);
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		const size_t n = strlen(stem_keys[s]);
		if (end >= n && !strncmp(base + end - n, stem_keys[s], n) &&
		    (end == n || base[end - n - 1] == '-' || base[end - n - 1] == '_' ||
		     base[end - n - 1] == '/'))
			return s;
	}
	return -1;
}

int sbui_take_of_path(const char* path)
{
	/* the last "-take<N>" followed by '/' or '-' (the folder or the file name) */
	int take = 0;
	for (const char* p = strstr(path, "-take"); p; p = strstr(p + 1, "-take")) {
		char* end = NULL;
		const long n = strtol(p + 5, &end, 10);
		if (end != p + 5 && n > 0 && n < 10000000 && (*end == '/' || *end == '-'))
			take = (int)n;
	}
	return take;
}

int sbui_stems_take(const sbui_model* m)
{
	return m->n_stems ? sbui_take_of_path(m->stems[0]) : 0;
}

float sbui_audition_click(float current, int stem, bool mute)
{
	const int want = sb_audition_value(stem, mute);
	return port_to_int(current) == want ? (float)SB_AUDITION_OFF : (float)want;
}

bool sbui_audition_is(float current, int stem, bool mute)
{
	const int v = port_to_int(current);
	return v != SB_AUDITION_OFF && v == sb_audition_value(stem, mute);
}

float sbui_lane_peak(const sbui_lane* l)
{
	float p = 0.0f;
	for (int c = 0; l->valid && c < l->cols; c++) {
		p = fmaxf(p, fabsf(l->lohi[2 * c]));
		p = fmaxf(p, fabsf(l->lohi[2 * c + 1]));
	}
	return p;
}
