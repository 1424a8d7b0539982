/* Test host on lilv; see host.h. */
#include "host.h"

#include "uris.h"

#include <lv2/atom/forge.h>
#include <lv2/atom/util.h>
#include <lv2/log/log.h>
#include <lv2/patch/patch.h>
#include <lv2/state/state.h>
#include <lv2/time/time.h>
#include <lv2/worker/worker.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CONTROL_CAP 8192
#define NOTIFY_CAP 65536

LilvWorld *host_world;
int host_no_worker;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static char **uris;
static size_t n_uris;
static int log_warnings;

static LV2_URID map_uri(LV2_URID_Map_Handle h, const char *uri)
{
	(void)h;
	pthread_mutex_lock(&map_lock);
	for (size_t i = 0; i < n_uris; i++) {
		if (!strcmp(uris[i], uri)) {
			pthread_mutex_unlock(&map_lock);
			return (LV2_URID)(i + 1);
		}
	}
	uris = realloc(uris, (n_uris + 1) * sizeof *uris);
	uris[n_uris] = strdup(uri);
	LV2_URID r = (LV2_URID)++n_uris;
	pthread_mutex_unlock(&map_lock);
	return r;
}

static const char *unmap_uri(LV2_URID_Unmap_Handle h, LV2_URID u)
{
	(void)h;
	pthread_mutex_lock(&map_lock);
	const char *r = u >= 1 && u <= n_uris ? uris[u - 1] : NULL;
	pthread_mutex_unlock(&map_lock);
	return r;
}

LV2_URID host_map(const char *uri) { return map_uri(NULL, uri); }
const char *host_unmap(LV2_URID u) { return unmap_uri(NULL, u); }
int host_log_warnings(void) { return log_warnings; }

/* The plugin's log lines since the start, for tests that check what it said (the end is kept
 * when there is more than fits). */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 18];
static size_t log_len;

static int log_vprintf(LV2_Log_Handle h, LV2_URID type, const char *fmt, va_list ap)
{
	(void)h;
	if (type == host_map(LV2_LOG__Warning) || type == host_map(LV2_LOG__Error))
		__atomic_add_fetch(&log_warnings, 1, __ATOMIC_SEQ_CST);
	char line[8192];
	const int n = vsnprintf(line, sizeof line, fmt, ap);
	pthread_mutex_lock(&log_lock);
	const size_t k = n < 0 ? 0 : strlen(line);
	if (log_len + k >= sizeof log_text)
		log_len = 0; /* start again: the tests look at recent lines */
	memcpy(log_text + log_len, line, k + 1);
	log_len += k;
	pthread_mutex_unlock(&log_lock);
	fprintf(stderr, "[log %s] %s", host_unmap(type), line);
	return n;
}

bool host_log_has(const char *text)
{
	pthread_mutex_lock(&log_lock);
	const bool has = strstr(log_text, text) != NULL;
	pthread_mutex_unlock(&log_lock);
	return has;
}

static int log_printf(LV2_Log_Handle h, LV2_URID type, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = log_vprintf(h, type, fmt, ap);
	va_end(ap);
	return r;
}

static LV2_URID_Map map = {NULL, map_uri};
static LV2_URID_Unmap unmap = {NULL, unmap_uri};
static LV2_Log_Log logf_ = {NULL, log_printf, log_vprintf};
LV2_URID_Map *host_map_feature(void) { return &map; }
LV2_URID_Unmap *host_unmap_feature(void) { return &unmap; }

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(path, 0777);
		*p = '/';
	}
	return 0;
}

/* Ardour's shape: <session>/plugins/<insert id>/scratch/<path>, parents created.
 * Carla's: <cwd>/<client>.tmp/<plugin>/<path>. */
static char *make_path(LV2_State_Make_Path_Handle handle, const char *path)
{
	host_plugin *h = handle;
	char *r = malloc(4096);
	if (h->path_mode == HOST_PATH_ARDOUR)
		snprintf(r, 4096, "%s/plugins/7/scratch/%s", h->scratch, path);
	else
		snprintf(r, 4096, "%s/client.tmp/stembridge/%s", h->scratch, path);
	mkdir_p(r);
	return r;
}

/* work:schedule as jalv's: the message is kept (no allocation, no lock: this runs inside run())
 * and handed to the plugin's work() after run() returns, off the audio path. */
static LV2_Worker_Status schedule_work(LV2_Worker_Schedule_Handle handle, uint32_t size,
                                       const void *data)
{
	host_plugin *h = handle;
	if (h->work_pending || size > sizeof h->work_msg)
		return LV2_WORKER_ERR_NO_SPACE;
	memcpy(h->work_msg, data, size);
	h->work_size = size;
	h->work_pending = 1;
	return LV2_WORKER_SUCCESS;
}

static LV2_Worker_Status work_respond(LV2_Worker_Respond_Handle handle, uint32_t size,
                                      const void *data)
{
	(void)handle;
	(void)size;
	(void)data;
	return LV2_WORKER_SUCCESS;
}

void host_do_work(host_plugin *h)
{
	if (!h->work_pending)
		return;
	const LV2_Worker_Interface *w =
		lilv_instance_get_extension_data(h->inst, LV2_WORKER__interface);
	if (w && w->work)
		w->work(lilv_instance_get_handle(h->inst), work_respond, h, h->work_size, h->work_msg);
	h->work_pending = 0;
	h->works_done++;
}

void host_init(void)
{
	host_world = lilv_world_new();
	lilv_world_load_all(host_world);
}

void host_fini(void)
{
	lilv_world_free(host_world);
	host_world = NULL;
}

static host_plugin *host_new_full(bool stereo, uint32_t block, host_path_mode mode,
                                  const char *scratch, bool listen);

host_plugin *host_new(bool stereo, uint32_t block, host_path_mode mode, const char *scratch)
{
	return host_new_full(stereo, block, mode, scratch, true);
}

host_plugin *host_new_quiet(bool stereo, uint32_t block, host_path_mode mode, const char *scratch)
{
	return host_new_full(stereo, block, mode, scratch, false);
}

static host_plugin *host_new_full(bool stereo, uint32_t block, host_path_mode mode,
                                  const char *scratch, bool listen)
{
	host_plugin *h = calloc(1, sizeof *h);
	h->channels = stereo ? 2 : 1;
	h->block = block;
	h->n_device_list = -1;
	h->job_take = h->queue_ahead = -1;
	h->path_mode = mode;
	snprintf(h->scratch, sizeof h->scratch, "%s", scratch ? scratch : "/tmp");
	LilvNode *uri = lilv_new_uri(host_world, stereo ? SB_URI_STEREO : SB_URI_MONO);
	h->plugin = lilv_plugins_get_by_uri(lilv_world_get_all_plugins(host_world), uri);
	lilv_node_free(uri);
	if (!h->plugin) {
		fprintf(stderr, "plugin not found: is LV2_PATH set to the build's lv2 folder?\n");
		free(h);
		return NULL;
	}
	static LV2_Feature map_f = {LV2_URID__map, &map};
	static LV2_Feature unmap_f = {LV2_URID__unmap, &unmap};
	static LV2_Feature log_f = {LV2_LOG__log, &logf_};
	LV2_State_Make_Path *mp = calloc(1, sizeof *mp);
	mp->handle = h;
	mp->path = make_path;
	LV2_Feature *mp_f = calloc(1, sizeof *mp_f);
	mp_f->URI = LV2_STATE__makePath;
	mp_f->data = mp;
	LV2_Worker_Schedule *ws = calloc(1, sizeof *ws);
	ws->handle = h;
	ws->schedule_work = schedule_work;
	LV2_Feature *ws_f = calloc(1, sizeof *ws_f);
	ws_f->URI = LV2_WORKER__schedule;
	ws_f->data = ws;
	const LV2_Feature *features[6] = {&map_f, &unmap_f, &log_f, NULL, NULL, NULL};
	int nf = 3;
	if (!host_no_worker)
		features[nf++] = ws_f;
	if (mode != HOST_PATH_NONE)
		features[nf++] = mp_f;
	h->inst = lilv_plugin_instantiate(h->plugin, 48000.0, features);
	/* lilv keeps no copy of the feature array; the plugin may keep mp and ws: leak them with h. */
	if (!h->inst) {
		free(h);
		return NULL;
	}
	h->n_ports = lilv_plugin_get_num_ports(h->plugin);
	float mins[32], maxs[32], defs[32];
	lilv_plugin_get_port_ranges_float(h->plugin, mins, maxs, defs);
	for (uint32_t i = 0; i < h->n_ports && i < 32; i++)
		h->ctl[i] = isnan(defs[i]) ? 0.0f : defs[i];
	h->control_buf = calloc(1, CONTROL_CAP);
	h->notify_buf = calloc(1, NOTIFY_CAP);
	for (int c = 0; c < h->channels; c++) {
		h->in[c] = calloc(block, sizeof(float));
		h->out[c] = calloc(block, sizeof(float));
	}
	lilv_instance_connect_port(h->inst, SB_PORT_CONTROL, h->control_buf);
	lilv_instance_connect_port(h->inst, SB_PORT_NOTIFY, h->notify_buf);
	for (uint32_t p = SB_PORT_RECORD; p <= SB_PORT_JOBS_DONE_OUT; p++)
		lilv_instance_connect_port(h->inst, p, &h->ctl[p]);
	if (h->channels == 1) {
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_IN_1, h->in[0]);
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_IN_1 + 1, h->out[0]);
		lilv_instance_connect_port(h->inst, SB_PORT_FREEWHEEL_MONO, &h->freewheel);
		for (uint32_t p = SB_PORT_STEM_GUITAR_MONO; p <= SB_PORT_KEEP_TAKE_MONO; p++)
			lilv_instance_connect_port(h->inst, p, &h->ctl[p]);
	} else {
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_IN_1, h->in[0]);
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_IN_1 + 1, h->in[1]);
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_OUT_1_STEREO, h->out[0]);
		lilv_instance_connect_port(h->inst, SB_PORT_AUDIO_OUT_2_STEREO, h->out[1]);
		lilv_instance_connect_port(h->inst, SB_PORT_FREEWHEEL_STEREO, &h->freewheel);
		for (uint32_t p = SB_PORT_STEM_GUITAR_STEREO; p <= SB_PORT_KEEP_TAKE_STEREO; p++)
			lilv_instance_connect_port(h->inst, p, &h->ctl[p]);
	}
	LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)h->control_buf;
	seq->atom.type = host_map(LV2_ATOM__Sequence);
	seq->atom.size = sizeof(LV2_Atom_Sequence_Body);
	lilv_instance_activate(h->inst);
	h->listening = listen;
	if (listen)
		host_get(h);
	return h;
}

void host_free(host_plugin *h)
{
	if (!h)
		return;
	lilv_instance_deactivate(h->inst);
	lilv_instance_free(h->inst);
	free(h->control_buf);
	free(h->notify_buf);
	for (int c = 0; c < h->channels; c++) {
		free(h->in[c]);
		free(h->out[c]);
	}
	free(h);
}

static LV2_Atom_Forge *forge_for(host_plugin *h, LV2_Atom_Forge *f)
{
	lv2_atom_forge_init(f, &map);
	LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)h->control_buf;
	/* append after the events already queued for the next run */
	lv2_atom_forge_set_buffer(f, h->control_buf, CONTROL_CAP);
	f->offset = sizeof(LV2_Atom) + seq->atom.size;
	return f;
}

static void seq_grow(host_plugin *h, LV2_Atom_Forge *f)
{
	LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)h->control_buf;
	seq->atom.size = (uint32_t)(f->offset - sizeof(LV2_Atom));
}

static void set_begin(host_plugin *h, LV2_Atom_Forge *f, LV2_Atom_Forge_Frame *fr, const char *prop)
{
	forge_for(h, f);
	lv2_atom_forge_frame_time(f, 0);
	lv2_atom_forge_object(f, fr, 0, host_map(LV2_PATCH__Set));
	lv2_atom_forge_key(f, host_map(LV2_PATCH__property));
	lv2_atom_forge_urid(f, host_map(prop));
	lv2_atom_forge_key(f, host_map(LV2_PATCH__value));
}

void host_set_text(host_plugin *h, const char *prop, const char *type, const char *text)
{
	LV2_Atom_Forge f;
	LV2_Atom_Forge_Frame fr;
	set_begin(h, &f, &fr, prop);
	lv2_atom_forge_typed_string(&f, host_map(type), text, (uint32_t)strlen(text));
	lv2_atom_forge_pop(&f, &fr);
	seq_grow(h, &f);
}

void host_set_atom(host_plugin *h, const char *prop, const char *type, const void *body,
                   uint32_t size)
{
	LV2_Atom_Forge f;
	LV2_Atom_Forge_Frame fr;
	set_begin(h, &f, &fr, prop);
	lv2_atom_forge_atom(&f, size, host_map(type));
	lv2_atom_forge_write(&f, body, size);
	lv2_atom_forge_pad(&f, size);
	lv2_atom_forge_pop(&f, &fr);
	seq_grow(h, &f);
}

void host_set_float(host_plugin *h, const char *prop, float v)
{
	LV2_Atom_Forge f;
	LV2_Atom_Forge_Frame fr;
	set_begin(h, &f, &fr, prop);
	lv2_atom_forge_float(&f, v);
	lv2_atom_forge_pop(&f, &fr);
	seq_grow(h, &f);
}

void host_get(host_plugin *h)
{
	LV2_Atom_Forge f;
	LV2_Atom_Forge_Frame fr;
	forge_for(h, &f);
	lv2_atom_forge_frame_time(&f, 0);
	lv2_atom_forge_object(&f, &fr, 0, host_map(LV2_PATCH__Get));
	lv2_atom_forge_pop(&f, &fr);
	seq_grow(h, &f);
}

void host_transport(host_plugin *h, int64_t pos, float speed)
{
	h->pos = pos;
	h->speed = speed;
	LV2_Atom_Forge f;
	LV2_Atom_Forge_Frame fr;
	forge_for(h, &f);
	lv2_atom_forge_frame_time(&f, 0);
	lv2_atom_forge_object(&f, &fr, 0, host_map(LV2_TIME__Position));
	lv2_atom_forge_key(&f, host_map(LV2_TIME__frame));
	lv2_atom_forge_long(&f, pos);
	lv2_atom_forge_key(&f, host_map(LV2_TIME__speed));
	lv2_atom_forge_float(&f, speed);
	lv2_atom_forge_pop(&f, &fr);
	seq_grow(h, &f);
}

/* One property the plugin announced (a patch:Set's property and value, or one key of a
 * patch:Put's body). */
static void read_property(host_plugin *h, LV2_URID key, const LV2_Atom *value, bool put)
{
	const char *text = (const char *)LV2_ATOM_BODY_CONST(value);
	if (key == host_map(SB__manifest))
		snprintf(h->manifest, sizeof h->manifest, "%s", text);
	else if (key == host_map(SB__deviceInUse))
		snprintf(h->device_in_use, sizeof h->device_in_use, "%s", text);
	else if (key == host_map(SB__lastError))
		snprintf(h->last_error, sizeof h->last_error, "%s", text);
	else if (key == host_map(SB__timelineStart))
		h->timeline_start = ((const LV2_Atom_Long *)value)->body;
	if (key == host_map(SB__stems) && value->type == host_map(LV2_ATOM__Tuple)) {
		h->n_stems = 0;
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple *)value, it)
			if (it->type == host_map(LV2_ATOM__Path) && h->n_stems < 8)
				snprintf(h->stems[h->n_stems++], sizeof h->stems[0], "%s",
				         (const char *)LV2_ATOM_BODY_CONST(it));
	}
	if (key == host_map(SB__deviceList) && value->type == host_map(LV2_ATOM__Tuple)) {
		h->n_device_list = 0;
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple *)value, it)
			h->n_device_list += it->type == host_map(LV2_ATOM__Object);
	}
	if (key == host_map(SB__modelFile) && value->type == host_map(LV2_ATOM__Path))
		snprintf(h->model_file, sizeof h->model_file, "%s", text);
	if (key == host_map(SB__outputDir) && value->type == host_map(LV2_ATOM__Path))
		snprintf(h->output_dir, sizeof h->output_dir, "%s", text);
	if (key == host_map(SB__modelList) && value->type == host_map(LV2_ATOM__String))
		snprintf(h->model_list, sizeof h->model_list, "%s", text);
	if (key == host_map(SB__installStatus) && value->type == host_map(LV2_ATOM__String))
		snprintf(h->install_status, sizeof h->install_status, "%s", text);
	if (key == host_map(SB__modelNotice) && value->type == host_map(LV2_ATOM__String))
		snprintf(h->model_notice, sizeof h->model_notice, "%s", text);
	if (key == host_map(SB__jobTake) && value->type == host_map(LV2_ATOM__Int))
		h->job_take = ((const LV2_Atom_Int *)value)->body;
	if (key == host_map(SB__queueAhead) && value->type == host_map(LV2_ATOM__Int))
		h->queue_ahead = ((const LV2_Atom_Int *)value)->body;
	if (key == host_map(SB__uiScale) && value->type == host_map(LV2_ATOM__Float))
		h->ui_scale = ((const LV2_Atom_Float *)value)->body;
	if (key == host_map(SB__takeWaveFrames) && value->type == host_map(LV2_ATOM__Int))
		h->wave_per_col = ((const LV2_Atom_Int *)value)->body;
	if (key == host_map(SB__takeStart) && value->type == host_map(LV2_ATOM__Long))
		h->wave_start = ((const LV2_Atom_Long *)value)->body;
	if (key == host_map(SB__takeFrames) && value->type == host_map(LV2_ATOM__Long))
		h->wave_frames = ((const LV2_Atom_Long *)value)->body;
	if (key == host_map(SB__takeWave) && value->type == host_map(LV2_ATOM__Vector)) {
		const LV2_Atom_Vector *v = (const LV2_Atom_Vector *)value;
		const uint32_t n = (v->atom.size - sizeof v->body) / sizeof(float);
		if (v->body.child_type == host_map(LV2_ATOM__Float) && n <= 2 * 1024 && n % 2 == 0) {
			memcpy(h->wave, v + 1, n * sizeof(float));
			h->wave_cols = (int)(n / 2);
			h->waves_seen++;
		}
	}
	if (key == host_map(SB__stemViews) && value->type == host_map(LV2_ATOM__Tuple)) {
		h->n_views = 0;
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple *)value, it) {
			if (it->type != host_map(LV2_ATOM__Object) || h->n_views >= 8)
				continue;
			const LV2_Atom *idx = NULL, *peak = NULL, *rms = NULL, *wave = NULL;
			lv2_atom_object_get((const LV2_Atom_Object *)it, host_map(SB__stemIndex), &idx,
			                    host_map(SB__stemPeak), &peak, host_map(SB__stemRms), &rms,
			                    host_map(SB__stemWave), &wave, 0);
			if (!idx || !peak || !rms || !wave || wave->type != host_map(LV2_ATOM__Vector))
				continue;
			const LV2_Atom_Vector *v = (const LV2_Atom_Vector *)wave;
			const uint32_t n = (v->atom.size - sizeof v->body) / sizeof(float);
			if (n > 2 * 512)
				continue;
			h->views[h->n_views].stem = ((const LV2_Atom_Int *)idx)->body;
			h->views[h->n_views].peak = ((const LV2_Atom_Float *)peak)->body;
			h->views[h->n_views].rms = ((const LV2_Atom_Float *)rms)->body;
			h->views[h->n_views].cols = (int)(n / 2);
			memcpy(h->views[h->n_views].wave, v + 1, n * sizeof(float));
			h->n_views++;
		}
		h->views_seen++;
	}
	const bool writable = key == host_map(SB__outputDir) || key == host_map(SB__modelFile) ||
	                      key == host_map(SB__trackName) || key == host_map(SB__maxMinutes) ||
	                      key == host_map(SB__uiScale);
	/* Ardour 7.3 warns about a patch:Set of anything it may not write */
	if (!put && !writable)
		h->sets_not_writable++;
	if (key != host_map(SB__manifest) && !writable)
		h->other_sets++;
}

static void read_notify(host_plugin *h)
{
	LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)h->notify_buf;
	LV2_ATOM_SEQUENCE_FOREACH (seq, ev) {
		const LV2_Atom_Object *obj = (const LV2_Atom_Object *)&ev->body;
		if (obj->body.otype == host_map(LV2_PATCH__Set)) {
			const LV2_Atom *prop = NULL, *value = NULL;
			lv2_atom_object_get(obj, host_map(LV2_PATCH__property), &prop,
			                    host_map(LV2_PATCH__value), &value, 0);
			if (prop && value && prop->type == host_map(LV2_ATOM__URID))
				read_property(h, ((const LV2_Atom_URID *)prop)->body, value, false);
		} else if (obj->body.otype == host_map(LV2_PATCH__Put)) {
			const LV2_Atom *body = NULL;
			lv2_atom_object_get(obj, host_map(LV2_PATCH__body), &body, 0);
			if (!body || body->type != host_map(LV2_ATOM__Object))
				continue;
			LV2_ATOM_OBJECT_FOREACH ((const LV2_Atom_Object *)body, p)
				read_property(h, p->key, &p->value, true);
		}
	}
}

void host_run(host_plugin *h)
{
	LV2_Atom_Sequence *n = (LV2_Atom_Sequence *)h->notify_buf;
	n->atom.type = 0;
	n->atom.size = NOTIFY_CAP - sizeof(LV2_Atom);
	rt_trap_enter();
	lilv_instance_run(h->inst, h->block);
	rt_trap_leave();
	if (!h->hold_work)
		host_do_work(h);
	read_notify(h);
	LV2_Atom_Sequence *seq = (LV2_Atom_Sequence *)h->control_buf;
	seq->atom.size = sizeof(LV2_Atom_Sequence_Body);
	if (h->speed != 0.0f)
		h->pos += h->block;
}

void host_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

double host_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int host_wait_jobs(host_plugin *h, int n, double timeout_s)
{
	double end = host_now() + timeout_s;
	while (host_now() < end) {
		host_run(h);
		if ((int)h->ctl[SB_PORT_JOBS_DONE_OUT] >= n) {
			/* the manifest's message may come a block after the count: wait for it too */
			for (double m_end = host_now() + 5; !h->manifest[0] && host_now() < m_end;) {
				host_sleep_ms(2);
				host_run(h);
			}
			return 1;
		}
		if ((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR)
			return 0;
		host_sleep_ms(5);
	}
	return 0;
}
