/* The plugin service: one non-real-time thread per process, shared by every instance
 * (reference counted by instantiate/cleanup), owning the one sb_engine so that all tracks
 * share the devices under the chosen mode.
 *
 * Every few milliseconds it, for each instance: keeps the block pool full (deeper while the
 * host freewheels, since run() is then called faster than real time), turns finished takes
 * into engine jobs, polls their progress and posts status back to run(), and reads finished
 * stems back for audition. It never touches an instance's rt_* fields.
 *
 * Locks: life (attach/detach) > svc.lock (list, engine) > instance nrt_lock; log_lock alone.
 */
#include "instance.h"
#include "models.h"

#include "backend/backend.h"
#include "backend/device.h"
#include "io/stream.h"
#include "io/temp_file.h"
#include "jobs/engine.h"
#include "take_store.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct {
	pthread_mutex_t life;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool started;           /* the thread runs (sb_service_start) */
	bool stop;
	int refs;
	sb_instance *list;
	sb_engine *engine;
	bool engine_failed;
	pthread_mutex_t log_lock;
	sb_instance *log_target;
} svc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
         0, false, false, 0, NULL, NULL, false, PTHREAD_MUTEX_INITIALIZER, NULL};


/* Engine messages go to the LV2 log of some live instance: the engine is shared. */
static void engine_log(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	pthread_mutex_lock(&svc.log_lock);
	if (svc.log_target) {
		LV2_Log_Logger *l = &svc.log_target->logger;
		if (level == SB_LOG_ERROR)
			lv2_log_error(l, "stembridge: %s\n", msg);
		else if (level == SB_LOG_WARNING)
			lv2_log_warning(l, "stembridge: %s\n", msg);
		else if (level == SB_LOG_INFO)
			lv2_log_note(l, "stembridge: %s\n", msg);
	}
	pthread_mutex_unlock(&svc.log_lock);
}

/* Under svc.lock. NULL (logged once) when the engine cannot start. */
static sb_engine *engine_get(void)
{
	if (!svc.engine && !svc.engine_failed) {
		sb_engine_opts o;
		memset(&o, 0, sizeof o);
		o.mode = SB_MODE_PARALLEL;
		o.log.fn = engine_log;
		sb_status st = sb_engine_new(&o, &svc.engine);
		if (st != SB_OK) {
			svc.engine = NULL;
			svc.engine_failed = true;
			engine_log(NULL, SB_LOG_ERROR, "the separation engine did not start");
		}
	}
	return svc.engine;
}

/* The name state saves for a device: its name and platform, and no figure that changes from
 * one save to the next (the label's memory, which some drivers report as what is free). */
static void sb_device_saved_name(const sb_device_props *d, char *name, size_t len)
{
	if (d->platform[0])
		snprintf(name, len, "%.200s (%.120s)", d->name, d->platform);
	else
		snprintf(name, len, "%s", d->name);
}

/* The Device control is only how a generic host UI shows the choice: Auto, CPU, All devices,
 * or Device k, the k-th device of the table the plugin announced (deviceList: every device
 * but the native CPU, in the engine's order). A job asks for the device by its stable key;
 * "device k" of a table the plugin does not know yet (a preset from another machine) is asked
 * for as the k-th, and the engine says when it is not there. */
const char *sb_device_port_request(int port, char *buf, size_t len)
{
	if (port <= SB_DEVICE_AUTO)
		snprintf(buf, len, "auto");
	else if (port == SB_DEVICE_CPU)
		snprintf(buf, len, "cpu");
	else if (port == SB_DEVICE_ALL)
		snprintf(buf, len, "all");
	else
		snprintf(buf, len, "device:%d", port - SB_DEVICE_FIRST_ACCEL);
	return buf;
}

/* A saved device key the engine can resolve: auto, cpu, all, device:N, or a registered
 * backend's "<name>:N" or stable key "<name>|..." (any backend, not only today's). */
bool sb_device_key_valid(const char *k)
{
	if (!strcmp(k, "auto") || !strcmp(k, "cpu") || !strcmp(k, "all"))
		return true;
	const size_t nl = strcspn(k, ":|");
	if (!k[nl] || !k[nl + 1] || nl == 0 || nl >= 32)
		return false;
	char name[32];
	memcpy(name, k, nl);
	name[nl] = '\0';
	if (k[nl] == ':') {
		char *end = NULL;
		const long n = strtol(k + nl + 1, &end, 10);
		if (!end || *end || n < 0)
			return false;
		if (!strcmp(name, "device"))
			return true;
	}
	const sb_backend *be = sb_backend_by_name(name);
	return be && be != sb_backend_cpu();
}

/* the Device control value that shows a device key (-1: none), from the announced table */
static int port_of_device_key(sb_instance *self, const char *key)
{
	if (!key[0])
		return -1;
	if (strcmp(key, "cpu") == 0)
		return SB_DEVICE_CPU;
	int port = -1;
	pthread_mutex_lock(&self->nrt_lock);
	for (int k = 0; k < SB_DEVICE_N_ACCEL && port < 0; k++)
		if (self->nrt_keys[k][0] && !strcmp(self->nrt_keys[k], key))
			port = SB_DEVICE_FIRST_ACCEL + k;
	pthread_mutex_unlock(&self->nrt_lock);
	return port;
}

void sb_service_device_key(sb_instance *self, int port, char *key, size_t klen, char *name,
                           size_t nlen)
{
	char req[32];
	sb_device_port_request(port, req, sizeof req);
	snprintf(key, klen, "%s", req);
	snprintf(name, nlen, "%s", port <= 0 ? "Auto" : port == 1 ? "CPU"
	                                      : port == SB_DEVICE_ALL ? "All devices" : req);
	if (port < SB_DEVICE_FIRST_ACCEL || port >= SB_DEVICE_FIRST_ACCEL + SB_DEVICE_N_ACCEL)
		return;
	const int k = port - SB_DEVICE_FIRST_ACCEL;
	pthread_mutex_lock(&self->nrt_lock);
	bool have = self->nrt_have_keys;
	if (have && self->nrt_keys[k][0]) {
		snprintf(key, klen, "%s", self->nrt_keys[k]);
		snprintf(name, nlen, "%s", self->nrt_names[k]);
	}
	pthread_mutex_unlock(&self->nrt_lock);
	if (have)
		return;
	/* The service has not listed this instance's devices yet: read the engine's table when
	 * there is one, but never start the engine from save() (a host that saves a plugin it only
	 * looked at starts nothing); the port value's own form ("device:N") stands in. */
	pthread_mutex_lock(&svc.lock);
	const sb_device_list *l = svc.engine ? sb_engine_devices(svc.engine) : NULL;
	const sb_device_props *d = l ? sb_devices_accel(l, (size_t)k) : NULL;
	if (d) {
		snprintf(key, klen, "%s", d->key);
		sb_device_saved_name(d, name, nlen);
	}
	pthread_mutex_unlock(&svc.lock);
}


static void post(sb_instance *self, sb_msg_kind kind, const char *text)
{
	sb_msg m;
	memset(&m, 0, offsetof(sb_msg, text));
	m.kind = kind;
	m.state = self->nrt_state;
	m.progress = self->nrt_progress;
	m.time_left = self->nrt_time_left;
	m.device = self->nrt_dev;
	m.fallback = self->nrt_fallback;
	m.jobs_done = self->jobs_done;
	snprintf(m.text, sizeof m.text, "%s", text ? text : "");
	if (!sb_ring_push(&self->status, &m))
		lv2_log_warning(&self->logger, "stembridge: status ring full, message dropped\n");
}

/* Removes the folders makePath made for a path we will not use (Carla's
 * "<project or cwd>/<client>.tmp/<plugin>/stembridge"): ours, the plugin's folder when it is
 * empty, and the client's ".tmp" folder when that is empty too. rmdir() leaves anything that is
 * not empty. */
static void unmake_host_path(char *p)
{
	for (int level = 0; level < 3; level++) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			return;
		*slash = '\0';
		if (level == 2) {
			size_t n = strlen(p);
			if (n < 4 || strcmp(p + n - 4, ".tmp") != 0)
				return;
		}
		if (rmdir(p) != 0)
			return;
	}
}

/* The folder this instance's take folders go in. Ardour's makePath gives
 * <session>/plugins/<insert id>/scratch/<path>, which lasts with the session; other hosts'
 * folders may not (Carla deletes its own: ../shared/HOSTS.md), so only a path of that shape is
 * used, and what another host's makePath created is removed again and not asked for twice.
 * Otherwise the outputDir property, or the default under $XDG_DATA_HOME. *session gets the
 * Ardour session folder ("" elsewhere): its imported files count for take numbers too. */
static bool take_root(sb_instance *self, const sb_props *pr, char *root, size_t len,
                      char *session, size_t slen)
{
	session[0] = '\0';
	if (self->make_path && self->nrt_scratch >= 0) {
		char *p = self->make_path->path(self->make_path->handle, "stembridge/takes");
		const char *plugins = p ? strstr(p, "/plugins/") : NULL;
		const size_t n = p ? strlen(p) : 0;
		static const char tail[] = "/scratch/stembridge/takes";
		const bool lasting = p && p[0] == '/' && plugins && n > sizeof tail &&
		                     strcmp(p + n - (sizeof tail - 1), tail) == 0 && n < len;
		if (lasting) {
			snprintf(root, len, "%.*s", (int)(n - strlen("/takes")), p);
			snprintf(session, slen, "%.*s", (int)(plugins - p), p);
			self->nrt_scratch = 1;
		} else if (p && p[0] == '/') {
			lv2_log_note(&self->logger, "stembridge: the host's scratch folder (%s) does not "
			             "last with a project; stems go to the output folder\n", p);
			unmake_host_path(p);
			self->nrt_scratch = -1;
		}
		if (p && self->free_path)
			self->free_path->free_path(self->free_path->handle, p);
		else
			free(p);
		if (lasting)
			return true;
	}
	int w;
	struct stat st;
	if (pr->output_dir[0] == '/') {
		w = snprintf(root, len, "%s", pr->output_dir);
		/* a file (one without an extension: set_path() took it for a folder) stands for the
		 * folder it is in */
		char *slash = strrchr(root, '/');
		if (stat(root, &st) == 0 && !S_ISDIR(st.st_mode) && slash)
			*(slash == root ? slash + 1 : slash) = '\0';
	} else {
		const char *xdg = getenv("XDG_DATA_HOME");
		const char *home = getenv("HOME");
		if (xdg && xdg[0] == '/')
			w = snprintf(root, len, "%s/stembridge/stems", xdg);
		else
			w = snprintf(root, len, "%s/.local/share/stembridge/stems", home ? home : "/tmp");
	}
	return w > 0 && (size_t)w < len;
}

static uint32_t max_take_in(const char *dir, const char *track)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint32_t best = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint32_t n = sb_take_number(e->d_name, track);
		best = n > best ? n : best;
	}
	closedir(d);
	return best;
}

/* Ardour copies imported stems into <session>/interchange/<name>/audiofiles under their own
 * names: a take number used there is used (importing a name the session holds asks a modal
 * question). */
static uint32_t max_take_in_session(const char *session, const char *track)
{
	char dir[SB_TEXT];
	if (snprintf(dir, sizeof dir, "%s/interchange", session) >= (int)sizeof dir)
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint32_t best = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[SB_TEXT];
		if (snprintf(sub, sizeof sub, "%s/%s/audiofiles", dir, e->d_name) >= (int)sizeof sub)
			continue;
		uint32_t n = max_take_in(sub, track);
		best = n > best ? n : best;
	}
	closedir(d);
	return best;
}

/* What a host killed mid-take left in this track's take folders: temporary files (removed when
 * their writer is gone; never a live writer's), and the folder when that emptied it (its number
 * is free again: nothing was written under it). */
static void clean_take_folders(const char *root, const char *track)
{
	DIR *d = opendir(root);
	if (!d)
		return;
	const sb_logger log = {engine_log, NULL};
	struct dirent *e;
	while ((e = readdir(d))) {
		char sub[SB_TEXT];
		if (!sb_take_number(e->d_name, track) ||
		    snprintf(sub, sizeof sub, "%s/%s", root, e->d_name) >= (int)sizeof sub)
			continue;
		struct stat st;
		if (stat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		/* a folder emptied here was a killed take's; an empty one is another take's */
		if (sb_temp_clean_stale(sub, &log) > 0)
			rmdir(sub);
	}
	closedir(d);
}

/* The name a take's files carry: the trackName, or "track-<instanceId>" (stable: the id is
 * saved with the session). File-name safe. */
static void stem_track_name(sb_instance *self, const sb_props *pr, char *out, size_t len)
{
	if (pr->track[0]) {
		snprintf(out, len, "%s", pr->track);
	} else {
		pthread_mutex_lock(&self->nrt_lock);
		snprintf(out, len, "track-%s", self->nrt_id);
		pthread_mutex_unlock(&self->nrt_lock);
	}
	for (char *c = out; *c; c++)
		if (*c == '/' || *c == '\\' || *c == ':' || (unsigned char)*c < 32)
			*c = '_';
	if (out[0] == '.')
		out[0] = '_';
}

/* Makes the take's own folder "<root>/<track>-take<N>", N one past any this instance, the
 * folder or (Ardour) the session used: the folder is reserved before the job writes into it, so
 * two takes never share one. *made_root: the root did not exist before. */
static bool make_take_folder(sb_instance *self, const char *root, const char *session,
                             const char *track, char *take, size_t tlen, char *dir, size_t dlen,
                             bool *made_root)
{
	struct stat st;
	*made_root = stat(root, &st) != 0;
	char tmp[SB_TEXT + 8];
	snprintf(tmp, sizeof tmp, "%s/x", root);
	if (sb_make_parents(tmp) != 0) {
		lv2_log_error(&self->logger, "stembridge: cannot create %s: %s\n", root, strerror(errno));
		return false;
	}
	clean_take_folders(root, track);
	pthread_mutex_lock(&self->nrt_lock);
	uint32_t n = self->nrt_last_take;
	pthread_mutex_unlock(&self->nrt_lock);
	uint32_t m = max_take_in(root, track);
	n = m > n ? m : n;
	if (session[0]) {
		m = max_take_in_session(session, track);
		n = m > n ? m : n;
	}
	for (int tries = 0; tries < 1000; tries++) {
		n++;
		snprintf(take, tlen, "take%u", n);
		if (snprintf(dir, dlen, "%s/%s-%s", root, track, take) >= (int)dlen) {
			lv2_log_error(&self->logger, "stembridge: output folder name too long\n");
			break;
		}
		if (mkdir(dir, 0777) == 0) {
			pthread_mutex_lock(&self->nrt_lock);
			self->nrt_last_take = n;
			pthread_mutex_unlock(&self->nrt_lock);
			return true;
		}
		if (errno != EEXIST) {
			lv2_log_error(&self->logger, "stembridge: cannot create %s: %s\n", dir,
			              strerror(errno));
			break;
		}
	}
	if (*made_root)
		rmdir(root);
	return false;
}

static void free_samples(void *user, const float *samples)
{
	(void)user;
	free((void *)samples);
}

static void block_release(sb_instance *self, sb_block *b)
{
	while (b) {
		sb_block *next = b->next;
		b->next = self->spare;
		self->spare = b;
		b = next;
	}
}

/* A take folder whose job wrote nothing goes again, and the root when the take made it. */
static void remove_take_folder(const char *dir, bool made_root)
{
	if (rmdir(dir) != 0 || !made_root)
		return;
	char root[SB_TEXT];
	snprintf(root, sizeof root, "%s", dir);
	char *slash = strrchr(root, '/');
	if (slash && slash != root) {
		*slash = '\0';
		rmdir(root);
	}
}

/* A take in memory with what its job needs (its journal, kept on disk beside its recording
 * in the take's folder: take_store.h), until it goes to the engine. */
typedef struct sb_ready_take {
	float *samples;
	bool resumed;           /* read back from disk after the host stopped */
	bool made_root;         /* its folder's making made the root too */
	char waits_for[64];     /* the model whose install it waits for */
	sb_take_journal j;
	sb_take_files f;
} ready_take;

static void refill(sb_instance *self);

/* The Model control value a journal's model name stands for. */
static int model_choice_of(const char *name)
{
	for (int i = 0; i < SB_N_MODEL_CHOICES; i++)
		if (!strcmp(sb_model_choice_names[i], name))
			return i;
	return SB_MODEL_AUTO;
}

/* The take's job could not run or failed: the recording stays with its journal marked failed,
 * and the message says where it is; a take that never reached the disk leaves no folder. */
static void fail_take(sb_instance *self, ready_take *r, const char *msg)
{
	free(r->samples);
	r->samples = NULL;
	char text[SB_TEXT];
	if (r->f.audio[0]) {
		char why[600] = "";
		if (sb_take_failed(&r->f, msg, why, sizeof why) != SB_OK)
			lv2_log_error(&self->logger, "stembridge: %s\n", why);
		snprintf(text, sizeof text, "%.1500s; the take's recording is kept at %.2400s", msg,
		         r->f.audio);
	} else {
		sb_take_release(&r->f);
		if (r->j.out_dir[0])
			remove_take_folder(r->j.out_dir, r->made_root);
		snprintf(text, sizeof text, "%s", msg);
	}
	lv2_log_error(&self->logger, "stembridge: take %s: %s\n", r->j.id, text);
	self->nrt_state = SB_STATE_ERROR;
	post(self, SB_MSG_ERROR, text);
}

/* Keeps a take until the install of its model ends (install_ended() then runs or fails it). */
static void wait_for_install(sb_instance *self, ready_take *r, const char *name)
{
	for (int i = 0; i < SB_TAKES; i++) {
		if (self->waiting[i])
			continue;
		ready_take *w = malloc(sizeof *w);
		if (!w)
			break;
		*w = *r;
		snprintf(w->waits_for, sizeof w->waits_for, "%s", name);
		self->waiting[i] = w;
		r->samples = NULL;
		sb_take_files_init(&r->f);
		lv2_log_note(&self->logger, "stembridge: take %s waits for %s to install\n", w->j.id,
		             name);
		self->nrt_state = w->resumed ? SB_STATE_RESUMED : SB_STATE_QUEUED;
		self->nrt_progress = 0.0f;
		self->nrt_time_left = -1.0f;
		post(self, SB_MSG_STATUS, NULL);
		return;
	}
	fail_take(self, r, "too many takes wait for a model to install");
}

/* Submits a take to the engine with the model its Model control chose (or waits for that
 * model's install, or fails saying how to install it: never another model in its place). The
 * take's folder exists and, unless writing it failed, holds its recording and journal. */
static void start_take(sb_instance *self, ready_take *r)
{
	const sb_take_journal *j = &r->j;
	int slot = -1;
	for (int i = 0; i < SB_MAX_JOBS && slot < 0; i++)
		if (!self->jobs[i].active)
			slot = i;
	sb_engine *e = engine_get();
	if (slot < 0 || !e) {
		fail_take(self, r, !e ? "the separation engine did not start"
		                      : "too many jobs queued for this track");
		return;
	}
	const sb_logger log = {NULL, NULL};
	sb_model_choice mc;
	sb_models_resolve(model_choice_of(j->model), j->model_file, &log, &mc);
	if (mc.missing[0]) {
		if (sb_models_installing(mc.missing)) {
			wait_for_install(self, r, mc.missing);
			return;
		}
		char msg[1024], hint[256];
		sb_models_install_hint(mc.missing, hint, sizeof hint);
		snprintf(msg, sizeof msg, "%s is not installed: %s; take %s was not separated",
		         mc.title, hint, j->id);
		fail_take(self, r, msg);
		return;
	}
	/* stems the model does not make (guitar and piano of a four-stem model) are left out */
	unsigned stems = j->stems ? j->stems : (1u << SB_PLUGIN_STEMS) - 1;
	if (mc.stems && (stems & ~mc.stems)) {
		char dropped[96] = "";
		for (int s = 0, at = 0; s < SB_PLUGIN_STEMS; s++)
			if (stems & ~mc.stems & (1u << s))
				at += snprintf(dropped + at, sizeof dropped - (size_t)at, "%s%s", at ? " and " : "",
				               sb_stem_names[s]);
		lv2_log_note(&self->logger, "stembridge: %s makes no %s stem: that toggle is ignored\n",
		             mc.title, dropped);
		stems &= mc.stems;
	}
	if (!stems) {
		fail_take(self, r, "no stem chosen that the model makes: turn on at least one");
		return;
	}

	sb_job_spec spec;
	memset(&spec, 0, sizeof spec);
	spec.samples = r->samples;
	spec.frames = j->frames;
	spec.channels = j->channels;
	spec.rate = j->rate;
	spec.input_free = free_samples;
	spec.track = j->track;
	spec.take = j->take;
	/* Auto in parallel mode spreads jobs over the engine's device set. */
	spec.device = (j->device_port == SB_DEVICE_AUTO && !j->sequential &&
	               strcmp(j->device, "auto") == 0) ? NULL : j->device;
	spec.model = mc.run;
	spec.bf16 = j->bf16;
	spec.stems = stems;
	spec.out_dir = j->out_dir;
	spec.name_template = "{track}-{take}-{stem}.{ext}";
	spec.manifest_name = "{track}-{take}-manifest.json";
	spec.format = SB_FORMAT_WAVF32;
	spec.overwrite = 0;
	spec.timeline_start = j->timeline_start;
	sb_job_id id = 0;
	sb_status st = sb_engine_submit(e, &spec, &id);
	if (st != SB_OK) {
		char msg[300];
		snprintf(msg, sizeof msg, "job not accepted: %s", sb_status_str(st));
		fail_take(self, r, msg);
		return;
	}
	r->samples = NULL; /* the engine's now */
	self->jobs[slot].id = id;
	self->jobs[slot].active = true;
	self->jobs[slot].start = j->timeline_start;
	self->jobs[slot].frames = j->frames;
	self->jobs[slot].stems = stems;
	self->jobs[slot].last_state = -1;
	self->jobs[slot].last_progress = -1.0f;
	self->jobs[slot].last_eta = -2.0f;
	self->jobs[slot].last_n_devices = 0;
	snprintf(self->jobs[slot].take, sizeof self->jobs[slot].take, "%s", j->take);
	snprintf(self->jobs[slot].dir, sizeof self->jobs[slot].dir, "%s", j->out_dir);
	self->jobs[slot].made_root = r->made_root;
	self->jobs[slot].files = r->f;
	self->jobs[slot].keep_audio = j->keep_audio;
	self->jobs[slot].resumed = r->resumed;
	sb_take_files_init(&r->f);
	self->nrt_state = r->resumed ? SB_STATE_RESUMED : SB_STATE_QUEUED;
	self->nrt_progress = 0.0f;
	self->nrt_time_left = -1.0f;
	post(self, SB_MSG_STATUS, NULL);
}

/* A take below SB_SILENT_DBFS throughout is not separated: its stems would be silence
 * pretending to be a separation. Said in the state port (Silent take), lastError and the log,
 * with the usual cause. */
static void silent_take(sb_instance *self, const sb_take *t, int64_t frames)
{
	const double at = (double)t->timeline_start / self->rate;
	const double len = (double)frames / self->rate;
	char peak[32];
	if (t->peak > 0.0f)
		snprintf(peak, sizeof peak, "%.1f dBFS", 20.0 * log10((double)t->peak));
	else
		snprintf(peak, sizeof peak, "digital silence");
	char msg[700];
	snprintf(msg, sizeof msg,
	         "the take at %d:%06.3f (%.1f s) is silent (peak %s, below %.0f dBFS): nothing was "
	         "separated. A recording track feeds its plugins silence while the audio hardware "
	         "does the monitoring: in Ardour set Preferences > Monitoring > Record monitoring "
	         "handled by: Ardour",
	         (int)(at / 60.0), fmod(at, 60.0), len, peak, SB_SILENT_DBFS);
	lv2_log_warning(&self->logger, "stembridge: %s\n", msg);
	self->nrt_state = SB_STATE_SILENT;
	self->nrt_progress = 0.0f;
	self->nrt_time_left = -1.0f;
	post(self, SB_MSG_SILENT, msg);
}

/* Between pieces of a take's write: every instance's record pool stays full (the service is
 * theirs too, and a long take takes a while to write). */
static void keep_pools_full(void *user)
{
	(void)user;
	for (sb_instance *i = svc.list; i; i = i->next)
		refill(i);
}

/* Reserves the take's folder and puts the take on disk before its job starts: the recording,
 * then the journal (take_store.h). A take that cannot be written (a full disk) still runs from
 * memory, and the log and lastError say it would not survive the host. false: no folder. */
static bool save_take(sb_instance *self, ready_take *r)
{
	sb_take_journal *j = &r->j;
	sb_props pr;
	sb_props_read(self, &pr);
	char root[SB_TEXT], session[SB_TEXT];
	stem_track_name(self, &pr, j->track, sizeof j->track);
	if (!take_root(self, &pr, root, sizeof root, session, sizeof session) ||
	    !make_take_folder(self, root, session, j->track, j->take, sizeof j->take, j->out_dir,
	                      sizeof j->out_dir, &r->made_root)) {
		j->out_dir[0] = '\0';
		return false;
	}
	snprintf(j->id, sizeof j->id, "%s-%s", j->track, j->take);
	char why[SB_TEXT];
	const sb_status st = sb_take_save(j, r->samples, keep_pools_full, NULL, &r->f, why,
	                                  sizeof why);
	if (st == SB_OK)
		return true;
	char msg[SB_TEXT];
	snprintf(msg, sizeof msg, "take %.300s was not saved to disk (%.3000s): it is separated "
	         "from memory, and would be lost if the host stopped before its stems are written",
	         j->id, why);
	lv2_log_error(&self->logger, "stembridge: %s\n", msg);
	post(self, SB_MSG_ERROR, msg);
	return true;
}

/* A take run() handed over, as one piece of memory with its journal filled in (its folder and
 * names come with save_take()); NULL when there is nothing to separate (empty, silent: said). */
static ready_take *take_ready(sb_instance *self, sb_take *t)
{
	const int ch = self->channels;
	const int64_t frames = t->frames;
	float *samples = NULL;
	if (frames > 0)
		samples = malloc((size_t)frames * ch * sizeof(float));
	if (samples) {
		int64_t at = 0;
		for (sb_block *b = t->first; b; b = b->next) {
			memcpy(samples + at * ch, b->data, (size_t)b->used * ch * sizeof(float));
			at += b->used;
		}
	}
	block_release(self, t->first);
	sb_take copy = *t;
	t->first = t->last = NULL;
	sb_ring_push(&self->free_takes, &t);
	if (frames <= 0)
		return NULL;
	sb_props lim;
	sb_props_read(self, &lim);
	if (frames >= (int64_t)(lim.max_minutes * 60.0 * self->rate))
		lv2_log_warning(&self->logger,
		                "stembridge: take %u reached the recording limit (%.1f min) and was ended\n",
		                copy.serial, lim.max_minutes);
	if (copy.lost > 0) {
		char msg[256];
		snprintf(msg, sizeof msg, "take %u lost %lld samples: the memory pool ran dry",
		         copy.serial, (long long)copy.lost);
		lv2_log_error(&self->logger, "stembridge: %s\n", msg);
		self->nrt_state = SB_STATE_ERROR;
		post(self, SB_MSG_ERROR, msg);
	}
	if (!samples) {
		self->nrt_state = SB_STATE_ERROR;
		post(self, SB_MSG_ERROR, "out of memory for the take");
		return NULL;
	}
	if (!(copy.peak >= SB_SILENT_PEAK)) {
		silent_take(self, &copy, frames);
		free(samples);
		return NULL;
	}
	ready_take *r = calloc(1, sizeof *r);
	if (!r) {
		free(samples);
		self->nrt_state = SB_STATE_ERROR;
		post(self, SB_MSG_ERROR, "out of memory for the take");
		return NULL;
	}
	r->samples = samples;
	sb_take_files_init(&r->f);
	sb_take_journal *j = &r->j;
	snprintf(j->id, sizeof j->id, "%u", copy.serial); /* until its folder names it */
	sb_props pr;
	sb_props_read(self, &pr);
	pthread_mutex_lock(&self->nrt_lock);
	snprintf(j->instance, sizeof j->instance, "%s", self->nrt_id);
	/* The saved stable key wins while the port still shows the value it was saved with; else
	 * the key of the device the port shows, from the table this plugin announced. */
	const int k = copy.device_port - SB_DEVICE_FIRST_ACCEL;
	if (self->nrt_device_key[0] && self->nrt_device_port == copy.device_port)
		snprintf(j->device, sizeof j->device, "%s", self->nrt_device_key);
	else if (k >= 0 && k < SB_DEVICE_N_ACCEL && self->nrt_keys[k][0])
		snprintf(j->device, sizeof j->device, "%s", self->nrt_keys[k]);
	else
		sb_device_port_request(copy.device_port, j->device, sizeof j->device);
	pthread_mutex_unlock(&self->nrt_lock);
	j->rate = self->rate;
	j->channels = ch;
	j->frames = frames;
	j->timeline_start = copy.timeline_start;
	const int model = copy.model >= 0 && copy.model < SB_N_MODEL_CHOICES ? copy.model
	                                                                      : SB_MODEL_AUTO;
	snprintf(j->model, sizeof j->model, "%s", sb_model_choice_names[model]);
	snprintf(j->model_file, sizeof j->model_file, "%s", pr.model_file);
	j->stems = copy.stems;
	j->device_port = copy.device_port;
	j->sequential = copy.mode == SB_MODE_CTL_SEQUENTIAL;
	j->bf16 = copy.bf16;
	j->keep_audio = atomic_load(&self->keep_take) == 1;
	snprintf(j->status, sizeof j->status, "pending");
	return r;
}

static void submit_take(sb_instance *self, sb_take *t)
{
	ready_take *r = take_ready(self, t);
	if (!r)
		return;
	if (save_take(self, r))
		start_take(self, r);
	else
		fail_take(self, r, "cannot create the stems folder (see the log)");
	free(r->samples);
	free(r);
}

/* An install ended: the takes that waited for that model run now, or fail with its reason. */
static void install_ended(sb_instance *self, const char *name, sb_status result, const char *why)
{
	for (int i = 0; i < SB_TAKES; i++) {
		ready_take *r = self->waiting[i];
		if (!r || strcmp(r->waits_for, name))
			continue;
		self->waiting[i] = NULL;
		if (result == SB_OK) {
			start_take(self, r);
		} else {
			char msg[1024];
			snprintf(msg, sizeof msg, "take %s was not separated: %.600s", r->j.id, why);
			fail_take(self, r, msg);
		}
		free(r->samples);
		free(r);
	}
}

static void audition_free(sb_audition *a)
{
	if (!a)
		return;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		free(a->stem[s]);
	free(a);
}

/* The stems of a finished job, from the stems.txt the engine writes beside the manifest
 * ("<...>manifest.json" -> "<...>stems.txt": a "timeline_start N" line, then one absolute path
 * per line). Each path lands in paths[stem] by the stem name that ends its file name. */
static int read_stems_txt(const char *manifest, char paths[SB_PLUGIN_STEMS][SB_TEXT])
{
	char txt[SB_TEXT];
	const char *tail = "manifest.json";
	size_t n = strlen(manifest), k = strlen(tail);
	if (n < k || strcmp(manifest + n - k, tail) != 0 || n - k + 10 >= sizeof txt)
		return 0;
	memcpy(txt, manifest, n - k);
	memcpy(txt + n - k, "stems.txt", 10);
	FILE *f = fopen(txt, "r");
	if (!f)
		return 0;
	int found = 0;
	char line[SB_TEXT];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] != '/')
			continue;
		const char *base = strrchr(line, '/') + 1;
		const char *dot = strrchr(base, '.');
		for (int s = 0; s < SB_PLUGIN_STEMS && dot; s++) {
			size_t sl = strlen(sb_stem_names[s]);
			if ((size_t)(dot - base) >= sl && !strncmp(dot - sl, sb_stem_names[s], sl) &&
			    !paths[s][0]) {
				snprintf(paths[s], SB_TEXT, "%s", line);
				found++;
			}
		}
	}
	fclose(f);
	return found;
}

/* Audition keeps every stem of the take in memory, as float: bounded, so a long take does not
 * take the host's memory with it (the stems are still written and announced). */
#define SB_AUDITION_MAX_BYTES ((int64_t)1 << 30)

/* Reads a finished take's stems into memory and offers them to run(). */
static void audition_load(sb_instance *self, int slot, char paths[SB_PLUGIN_STEMS][SB_TEXT])
{
	const int64_t frames = self->jobs[slot].frames;
	int n = 0;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		n += paths[s][0] != '\0';
	if (frames * self->channels * (int64_t)sizeof(float) * n > SB_AUDITION_MAX_BYTES) {
		lv2_log_note(&self->logger, "stembridge: take too long to audition in memory (%lld "
		             "frames); its stems are on disk\n", (long long)frames);
		return;
	}
	sb_audition *a = calloc(1, sizeof *a);
	if (!a)
		return;
	a->start = self->jobs[slot].start;
	a->frames = frames;
	a->channels = self->channels;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		if (!paths[s][0])
			continue;
		SF_INFO info;
		memset(&info, 0, sizeof info);
		SNDFILE *f = sf_open(paths[s], SFM_READ, &info);
		if (!f) {
			lv2_log_warning(&self->logger, "stembridge: cannot read %s for audition: %s\n",
			                paths[s], sf_strerror(NULL));
			continue;
		}
		if (info.channels == a->channels) {
			a->stem[s] = calloc((size_t)a->frames * a->channels, sizeof(float));
			if (a->stem[s])
				sf_readf_float(f, a->stem[s], a->frames);
		} else {
			lv2_log_warning(&self->logger, "stembridge: %s has %d channels, expected %d\n",
			                paths[s], info.channels, a->channels);
		}
		sf_close(f);
	}
	audition_free(atomic_exchange(&self->audition_pending, a));
}

/* The devices a job runs on, in words: "CPU + Radeon RX 7900"; with shares: "CPU 5 segments +
 * Radeon RX 7900 12 segments". */
static void devices_text(const sb_job_progress *p, bool shares, char *out, size_t len)
{
	out[0] = '\0';
	if (p->n_devices <= 1) {
		snprintf(out, len, "%s", p->device_name);
		return;
	}
	size_t at = 0;
	for (int d = 0; d < p->n_devices && d < SB_JOB_MAX_DEVICES; d++) {
		const sb_job_device *jd = &p->devices[d];
		int w = shares ? snprintf(out + at, len - at, "%s%s %ld segment%s%s", d ? " + " : "",
		                          jd->name, jd->done, jd->done == 1 ? "" : "s",
		                          jd->dropped ? " (dropped)" : "")
		               : snprintf(out + at, len - at, "%s%s", d ? " + " : "", jd->name);
		if (w < 0 || (size_t)w >= len - at)
			break;
		at += (size_t)w;
	}
}

static void poll_jobs(sb_instance *self, sb_engine *e)
{
	for (int i = 0; i < SB_MAX_JOBS; i++) {
		if (!self->jobs[i].active)
			continue;
		sb_job_progress p;
		if (sb_engine_progress(e, self->jobs[i].id, &p) != SB_OK)
			continue;
		int state = p.state == SB_JOB_QUEUED ? SB_STATE_QUEUED
		          : p.state <= SB_JOB_WRITING ? SB_STATE_SEPARATING
		          : p.state == SB_JOB_DONE ? SB_STATE_DONE : SB_STATE_ERROR;
		/* a take run again after the host stopped says so while it runs */
		if (self->jobs[i].resumed && (state == SB_STATE_QUEUED || state == SB_STATE_SEPARATING))
			state = SB_STATE_RESUMED;
		/* one device: its port value and name; several sharing the take: All devices, and
		 * their names */
		const int dev = p.n_devices > 1 ? SB_DEVICE_ALL : port_of_device_key(self, p.device_key);
		if (p.device_id[0] && (state != self->jobs[i].last_state ||
		                       p.n_devices != self->jobs[i].last_n_devices)) {
			self->nrt_dev = dev;
			self->nrt_fallback = p.fell_back;
			char names[SB_TEXT];
			devices_text(&p, false, names, sizeof names);
			char text[SB_TEXT + 16];
			snprintf(text, sizeof text, "%s%s", names, p.fell_back ? " (fallback)" : "");
			snprintf(self->nrt_dev_label, sizeof self->nrt_dev_label, "%s", names);
			self->jobs[i].last_n_devices = p.n_devices;
			post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		if (state == SB_STATE_QUEUED || state == SB_STATE_SEPARATING ||
		    state == SB_STATE_RESUMED) {
			const float eta = p.eta_s >= 0 ? (float)p.eta_s : -1.0f;
			if (state != self->jobs[i].last_state ||
			    p.fraction - self->jobs[i].last_progress >= 0.01 ||
			    fabsf(eta - self->jobs[i].last_eta) >= 1.0f) {
				self->nrt_state = state;
				self->nrt_progress = (float)p.fraction;
				self->nrt_time_left = eta;
				self->jobs[i].last_state = state;
				self->jobs[i].last_progress = (float)p.fraction;
				self->jobs[i].last_eta = eta;
				post(self, SB_MSG_STATUS, NULL);
			}
			continue;
		}
		/* Finished only when its result can be read: the runner reports "done" in its
		 * progress a moment before the engine has closed the job. */
		sb_job_result *r = calloc(1, sizeof *r);
		if (!r)
			continue;
		if (sb_engine_result(e, self->jobs[i].id, r) != SB_OK) {
			free(r);
			continue;
		}
		sb_engine_release(e, self->jobs[i].id);
		self->jobs[i].active = false;
		/* the device the job ended on, with the reason in words when it was a fallback */
		if (r->fallback_reason[0]) {
			char text[SB_TEXT + sizeof r->fallback_reason + 16];
			snprintf(text, sizeof text, "%s (fallback: %s)", self->nrt_dev_label,
			         r->fallback_reason);
			self->nrt_fallback = 1;
			post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		/* a take several devices shared: each one's part, in words */
		if (r->status == SB_OK && p.n_devices > 1 && !r->fallback_reason[0]) {
			char text[SB_TEXT];
			devices_text(&p, true, text, sizeof text);
			post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		if (r->status == SB_OK) {
			/* the stems are committed: the take's journal goes, and its recording unless the
			 * user keeps it, before anyone hears that the stems are ready */
			const bool keep = self->jobs[i].keep_audio || atomic_load(&self->keep_take) == 1;
			sb_take_done(&self->jobs[i].files, keep);
			if (self->jobs[i].resumed)
				lv2_log_note(&self->logger, "stembridge: resumed take %s: stems complete\n",
				             strrchr(self->jobs[i].dir, '/') + 1);
			self->jobs_done++;
			self->nrt_state = SB_STATE_DONE;
			self->nrt_progress = 1.0f;
			self->nrt_time_left = 0.0f;
			pthread_mutex_lock(&self->nrt_lock);
			snprintf(self->nrt_manifest, sizeof self->nrt_manifest, "%s", r->manifest_path);
			pthread_mutex_unlock(&self->nrt_lock);
			char paths[SB_PLUGIN_STEMS][SB_TEXT];
			memset(paths, 0, sizeof paths);
			if (read_stems_txt(r->manifest_path, paths) == 0)
				lv2_log_warning(&self->logger, "stembridge: no stems listed beside %s\n",
				                r->manifest_path);
			audition_load(self, i, paths);
			char list[SB_TEXT] = "";
			for (int s = 0, at = 0; s < SB_PLUGIN_STEMS; s++) {
				if (!paths[s][0])
					continue;
				int w = snprintf(list + at, sizeof list - (size_t)at, "%s\n", paths[s]);
				if (w < 0 || (size_t)w >= sizeof list - (size_t)at) {
					list[at] = '\0';
					break;
				}
				at += w;
			}
			post(self, SB_MSG_STEMS, list);
			/* The manifest message carries the region so the UI can place it. */
			sb_msg mm;
			memset(&mm, 0, offsetof(sb_msg, text));
			mm.kind = SB_MSG_MANIFEST;
			mm.state = self->nrt_state;
			mm.progress = 1.0f;
			mm.device = self->nrt_dev;
			mm.fallback = self->nrt_fallback;
			mm.jobs_done = self->jobs_done;
			mm.start = self->jobs[i].start;
			mm.frames = self->jobs[i].frames;
			snprintf(mm.text, sizeof mm.text, "%s", r->manifest_path);
			sb_ring_push(&self->status, &mm);
			lv2_log_note(&self->logger, "stembridge: stems ready: %s\n", r->manifest_path);
		} else {
			self->nrt_state = SB_STATE_ERROR;
			/* the engine removed its temporary files; the take's recording stays, its
			 * journal marked failed, and the message says where; a take that never reached
			 * the disk leaves no folder */
			char text[SB_TEXT];
			sb_take_files *f = &self->jobs[i].files;
			if (f->audio[0]) {
				char why[600] = "";
				if (sb_take_failed(f, r->message, why, sizeof why) != SB_OK)
					lv2_log_error(&self->logger, "stembridge: %s\n", why);
				snprintf(text, sizeof text, "%.1200s; the take's recording is kept at %.2600s",
				         r->message, f->audio);
			} else {
				sb_take_release(f);
				remove_take_folder(self->jobs[i].dir, self->jobs[i].made_root);
				snprintf(text, sizeof text, "%s", r->message);
			}
			lv2_log_error(&self->logger, "stembridge: job failed: %s\n", text);
			post(self, SB_MSG_ERROR, text);
		}
		free(r);
	}
}

/* patch:Put of the deviceList: the accelerators in port order ("Device k" = device:k-1), each an
 * object with the keys in uris.h. Built once per instance with its own URIDs, published
 * through an atomic pointer, freed at detach. */
static void publish_device_list(sb_instance *self, sb_engine *e)
{
	const sb_device_list *l = sb_engine_devices(e);
	if (!l)
		return;
	const size_t cap = 64 * 1024;
	uint8_t *buf = calloc(1, cap);
	if (!buf)
		return;
	const sb_urids *u = &self->u;
	LV2_Atom_Forge *f = &self->nrt_forge;
	lv2_atom_forge_set_buffer(f, buf, cap);
	LV2_Atom_Forge_Frame obj, body, tup, dev;
	LV2_Atom_Forge_Ref ref = lv2_atom_forge_object(f, &obj, 0, u->patch_Put);
	lv2_atom_forge_key(f, u->patch_body);
	lv2_atom_forge_object(f, &body, 0, 0);
	lv2_atom_forge_key(f, u->sb_deviceList);
	lv2_atom_forge_tuple(f, &tup);
	for (int k = 0; k < SB_DEVICE_N_ACCEL; k++) {
		const sb_device_props *d = sb_devices_accel(l, (size_t)k);
		if (!d)
			break;
		pthread_mutex_lock(&self->nrt_lock);
		snprintf(self->nrt_keys[k], sizeof self->nrt_keys[k], "%s", d->key);
		sb_device_saved_name(d, self->nrt_names[k], sizeof self->nrt_names[k]);
		pthread_mutex_unlock(&self->nrt_lock);
		const char *type = sb_device_type_str(d->type);
		lv2_atom_forge_object(f, &dev, 0, 0);
		lv2_atom_forge_key(f, u->sb_deviceKey);
		lv2_atom_forge_string(f, d->key, (uint32_t)strlen(d->key));
		lv2_atom_forge_key(f, u->sb_deviceName);
		lv2_atom_forge_string(f, d->name, (uint32_t)strlen(d->name));
		lv2_atom_forge_key(f, u->sb_devicePlatform);
		lv2_atom_forge_string(f, d->platform, (uint32_t)strlen(d->platform));
		lv2_atom_forge_key(f, u->sb_deviceType);
		lv2_atom_forge_string(f, type, (uint32_t)strlen(type));
		lv2_atom_forge_key(f, u->sb_deviceMemory);
		lv2_atom_forge_long(f, (int64_t)d->global_mem);
		lv2_atom_forge_key(f, u->sb_deviceUnits);
		lv2_atom_forge_int(f, (int32_t)d->compute_units);
		lv2_atom_forge_key(f, u->sb_deviceDriver);
		lv2_atom_forge_string(f, d->driver, (uint32_t)strlen(d->driver));
		lv2_atom_forge_pop(f, &dev);
	}
	lv2_atom_forge_pop(f, &tup);
	lv2_atom_forge_pop(f, &body);
	lv2_atom_forge_pop(f, &obj);
	pthread_mutex_lock(&self->nrt_lock);
	self->nrt_have_keys = true;
	pthread_mutex_unlock(&self->nrt_lock);
	if (!ref || f->offset > cap - 64) { /* 8 devices fit many times over; never expected */
		lv2_log_error(&self->logger, "stembridge: device list too large to announce\n");
		free(buf);
		return;
	}
	const LV2_Atom *old = atomic_exchange(&self->device_list, (const LV2_Atom *)buf);
	free((void *)old);
}

static void resolve_saved_device(sb_instance *self, sb_engine *e)
{
	char key[640];
	pthread_mutex_lock(&self->nrt_lock);
	self->nrt_resolve = false;
	snprintf(key, sizeof key, "%s", self->nrt_device_key);
	pthread_mutex_unlock(&self->nrt_lock);
	if (!key[0])
		return;
	const sb_device_list *l = sb_engine_devices(e);
	sb_device_resolution res;
	if (!l || sb_devices_resolve(l, key, &res) != SB_OK)
		return;
	const sb_device_props *d = sb_devices_get(l, res.index);
	self->nrt_dev = port_of_device_key(self, d->key);
	self->nrt_fallback = res.fell_back;
	char text[SB_TEXT];
	if (res.fell_back) {
		snprintf(text, sizeof text, "%s (fallback: %s)", d->label, res.reason);
		lv2_log_warning(&self->logger, "stembridge: saved device not here: %s\n", res.reason);
	} else {
		snprintf(text, sizeof text, "%s", d->label);
	}
	post(self, SB_MSG_DEVICE_IN_USE, text);
}

static void refill(sb_instance *self)
{
	const uint32_t target = atomic_load(&self->freewheeling) ? SB_POOL_FREEWHEEL
	                                                         : SB_POOL_REALTIME;
	const size_t bytes = sizeof(sb_block) + (size_t)SB_BLOCK_FRAMES * self->channels * sizeof(float);
	while (sb_ring_count(&self->free_blocks) < target) {
		sb_block *b = self->spare;
		if (b) {
			self->spare = b->next;
		} else {
			b = malloc(bytes);
			if (!b)
				break;
			memset(b, 0, bytes); /* touch every page here, not in run() */
			self->pool_blocks++;
		}
		b->next = NULL;
		sb_ring_push(&self->free_blocks, &b);
	}
	/* Give back what a long freewheel left spare once playing in real time again. */
	while (self->spare && !atomic_load(&self->freewheeling)) {
		sb_block *b = self->spare;
		self->spare = b->next;
		free(b);
		self->pool_blocks--;
	}
}

/* The Model control names a model that is not installed: say so, with how to install it,
 * before a take needs it (a generic host UI shows the state and lastError, the log has it). */
static void watch_models(sb_instance *self)
{
	/* the list again after each install here, and every two seconds for models installed
	 * outside the plugin (the CLI, by hand); run() hears of it only when it changed */
	const unsigned gen = sb_models_generation() + 1;
	const double now = sb_now();
	if (self->nrt_models_gen != gen || now - self->nrt_models_checked > 2.0) {
		char *text = malloc(SB_TEXT);
		if (text) {
			sb_models_list_text(text, SB_TEXT);
			if (strcmp(text, self->nrt_models_text)) {
				snprintf(self->nrt_models_text, sizeof self->nrt_models_text, "%s", text);
				post(self, SB_MSG_MODELS, text);
				self->nrt_model_port = -1; /* look at the choice again: installed now? */
			}
			free(text);
		}
		self->nrt_models_gen = gen;
		self->nrt_models_checked = now;
	}
	char status[512];
	float fraction = 0;
	const unsigned ig = sb_models_status(status, sizeof status, &fraction);
	if (ig != self->nrt_install_gen) {
		char text[600];
		snprintf(text, sizeof text, "%.3f\t%s", (double)fraction, status);
		post(self, SB_MSG_INSTALL, text);
		self->nrt_install_gen = ig;
		self->nrt_model_port = -1; /* a missing model being installed is no longer an error */
	}
	const int mp = atomic_load(&self->model_port);
	if (mp < 0 || mp == self->nrt_model_port)
		return;
	self->nrt_model_port = mp;
	sb_props pr;
	sb_props_read(self, &pr);
	const sb_logger quiet = {NULL, NULL};
	sb_model_choice mc;
	sb_models_resolve(mp, pr.model_file, &quiet, &mc);
	const bool missing = mc.missing[0] && !sb_models_installing(mc.missing);
	if (missing) {
		char msg[512], hint[256];
		sb_models_install_hint(mc.missing, hint, sizeof hint);
		snprintf(msg, sizeof msg, "%s is not installed: %s", mc.title, hint);
		lv2_log_warning(&self->logger, "stembridge: %s\n", msg);
		/* a take that just failed with its reason (a failed install) keeps that message */
		const bool other_error = self->nrt_state == SB_STATE_ERROR && !self->nrt_model_missing;
		if (!other_error) {
			if (self->nrt_state != SB_STATE_QUEUED && self->nrt_state != SB_STATE_SEPARATING)
				self->nrt_state = SB_STATE_ERROR;
			post(self, SB_MSG_ERROR, msg);
		}
	} else if (self->nrt_model_missing && self->nrt_state == SB_STATE_ERROR) {
		self->nrt_state = SB_STATE_IDLE;
		post(self, SB_MSG_STATUS, NULL);
	}
	self->nrt_model_missing = missing;
}

/* One journal a scan found (resume_takes). */
static void resume_one(void *user, const char *path)
{
	sb_instance *self = user;
	ready_take *r = calloc(1, sizeof *r);
	if (!r)
		return;
	char why[SB_TEXT];
	const sb_status st = sb_take_open(path, &r->j, &r->f, why, sizeof why);
	const sb_take_journal *j = &r->j;
	char id[16];
	pthread_mutex_lock(&self->nrt_lock);
	snprintf(id, sizeof id, "%s", self->nrt_id);
	pthread_mutex_unlock(&self->nrt_lock);
	if (st == SB_ERR_EXISTS) {
		/* running: in this process (another instance with the same id) or another host */
	} else if (st != SB_OK) {
		/* never deleted: the user may want what is in it; said each time the session opens */
		char msg[SB_TEXT + 200];
		snprintf(msg, sizeof msg, "a take's journal %.3800s: the take was not resumed, and its "
		         "files are kept", why);
		lv2_log_error(&self->logger, "stembridge: %s\n", msg);
		self->nrt_state = SB_STATE_ERROR;
		post(self, SB_MSG_ERROR, msg);
	} else if (j->instance[0] && strcmp(j->instance, id) != 0) {
		sb_take_release(&r->f); /* another instance's take in a shared folder */
	} else if (sb_take_committed(j)) {
		/* the host stopped between the commit and the cleanup: the stems are complete */
		lv2_log_note(&self->logger, "stembridge: take %s: stems already complete\n", j->id);
		sb_take_done(&r->f, j->keep_audio || atomic_load(&self->keep_take) == 1);
	} else if (!strcmp(j->status, "failed")) {
		lv2_log_note(&self->logger, "stembridge: take %s failed before (%s); its recording is "
		             "kept at %s\n", j->id, j->error, r->f.audio[0] ? r->f.audio : "(missing)");
		sb_take_release(&r->f);
	} else if (sb_take_read_audio(&r->f, j, &r->samples,
	                              &(const sb_logger){engine_log, NULL}, why, sizeof why) != SB_OK) {
		char msg[SB_TEXT + 200];
		snprintf(msg, sizeof msg, "take %.300s cannot be resumed: %.3700s; its files are kept",
		         j->id, why);
		lv2_log_error(&self->logger, "stembridge: %s\n", msg);
		self->nrt_state = SB_STATE_ERROR;
		post(self, SB_MSG_ERROR, msg);
		sb_take_release(&r->f);
	} else {
		r->resumed = true;
		const uint32_t n = sb_take_number(j->id, j->track);
		pthread_mutex_lock(&self->nrt_lock);
		if (n > self->nrt_last_take)
			self->nrt_last_take = n;
		pthread_mutex_unlock(&self->nrt_lock);
		const double at = j->timeline_start > 0 ? (double)j->timeline_start / j->rate : 0.0;
		lv2_log_note(&self->logger, "stembridge: resumed take %s (%.1f s at %d:%06.3f), left "
		             "unfinished when the host stopped: separating it again from %s\n", j->id,
		             (double)j->frames / j->rate, (int)(at / 60.0), fmod(at, 60.0), r->f.audio);
		start_take(self, r);
	}
	sb_take_release(&r->f);
	free(r->samples);
	free(r);
}

/* After a restore (the session reopened, an instance given a saved state): the takes of this
 * instance's track that a host left unfinished (a journal, no committed stems) run again from
 * their recordings. The folder is the one new takes would go to, asked when the service runs,
 * not in restore(): Ardour's makePath has the insert's final id only once the session loaded. */
static void resume_takes(sb_instance *self)
{
	sb_props pr;
	sb_props_read(self, &pr);
	char root[SB_TEXT], session[SB_TEXT], track[256];
	stem_track_name(self, &pr, track, sizeof track);
	if (!take_root(self, &pr, root, sizeof root, session, sizeof session))
		return;
	sb_take_scan(root, track, resume_one, self);
}

static void tick(sb_instance *self)
{
	atomic_store_explicit(&self->service_running, 1, memory_order_release);
	sb_request req;
	while (sb_ring_pop(&self->requests, &req)) {
		req.install[sizeof req.install - 1] = '\0';
		const sb_logger log = {engine_log, NULL};
		char why[256];
		if (sb_models_request(req.install, &log, why, sizeof why)) {
			lv2_log_note(&self->logger, "stembridge: installing %s\n", req.install);
		} else {
			char text[300];
			snprintf(text, sizeof text, "0\t%s", why);
			post(self, SB_MSG_INSTALL, text);
		}
	}
	watch_models(self);
	refill(self);
	sb_take *t;
	while (sb_ring_pop(&self->finished, &t))
		submit_take(self, t);
	if (atomic_exchange(&self->resume_scan, 0))
		resume_takes(self);
	refill(self);
	if (atomic_exchange(&self->lost_frames_alarm, 0))
		lv2_log_error(&self->logger, "stembridge: recording lost samples: pool ran dry\n");
	audition_free(atomic_exchange(&self->audition_retired, NULL));
	sb_engine *e = svc.engine;
	bool resolve;
	pthread_mutex_lock(&self->nrt_lock);
	resolve = self->nrt_resolve;
	pthread_mutex_unlock(&self->nrt_lock);
	if (resolve)
		e = engine_get();
	/* the table first: a saved device is shown as the Device control value of its key */
	if (e && !atomic_load(&self->device_list))
		publish_device_list(self, e);
	if (resolve && e)
		resolve_saved_device(self, e);
	const int bad_path = atomic_exchange(&self->bad_path_alarm, 0);
	if (bad_path == 1)
		lv2_log_warning(&self->logger, "stembridge: ignoring a damaged modelFile (it must be "
		                "an absolute path to a converted .safetensors model; a PyTorch checkpoint "
		                "is converted by 'stembridge models install'); the model stays as it "
		                "was\n");
	else if (bad_path == 2)
		lv2_log_warning(&self->logger, "stembridge: ignoring a damaged outputDir (it must be an "
		                "absolute path); the output folder stays as it was\n");
	if (atomic_exchange(&self->folder_from_model_slot, 0)) {
		sb_props pr;
		sb_props_read(self, &pr);
		lv2_log_note(&self->logger, "stembridge: the file chosen is not a model: stems go to "
		             "its folder, %s\n", pr.output_dir);
	}
	if (atomic_exchange(&self->no_take_alarm, 0))
		lv2_log_error(&self->logger, "stembridge: a take was not recorded: four takes are "
		              "still being handed over\n");
	if (e)
		poll_jobs(self, e);
}

static void *service_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&svc.lock);
	engine_get();
	while (!svc.stop) {
		char done[64], why[600];
		sb_status result = SB_OK;
		const sb_logger log = {engine_log, NULL};
		if (sb_models_poll(&log, done, sizeof done, &result, why, sizeof why))
			for (sb_instance *i = svc.list; i; i = i->next)
				install_ended(i, done, result, why);
		for (sb_instance *i = svc.list; i; i = i->next)
			tick(i);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 2000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&svc.wake, &svc.lock, &ts);
	}
	pthread_mutex_unlock(&svc.lock);
	return NULL;
}

int sb_service_attach(sb_instance *self)
{
	pthread_mutex_lock(&svc.life);
	pthread_mutex_lock(&svc.lock);
	refill(self); /* recording can start at the first run(), before the service runs */
	if (svc.refs == 0) {
		svc.engine_failed = false;
	}
	svc.refs++;
	self->next = svc.list;
	svc.list = self;
	pthread_mutex_unlock(&svc.lock);
	pthread_mutex_lock(&svc.log_lock);
	if (!svc.log_target || !svc.log_target->logger.log)
		svc.log_target = self;
	pthread_mutex_unlock(&svc.log_lock);
	pthread_mutex_unlock(&svc.life);
	return 1;
}

int sb_service_start(sb_instance *self)
{
	int ok = 1;
	pthread_mutex_lock(&svc.life);
	pthread_mutex_lock(&svc.lock);
	if (!svc.started) {
		svc.stop = false;
		if (pthread_create(&svc.thread, NULL, service_main, NULL) == 0) {
			svc.started = true;
		} else {
			ok = 0;
			lv2_log_error(&self->logger, "stembridge: cannot start the service thread\n");
		}
	}
	pthread_cond_signal(&svc.wake);
	pthread_mutex_unlock(&svc.lock);
	pthread_mutex_unlock(&svc.life);
	return ok;
}

static void free_take_blocks(sb_block *b)
{
	while (b) {
		sb_block *n = b->next;
		free(b);
		b = n;
	}
}

void sb_service_detach(sb_instance *self)
{
	pthread_mutex_lock(&svc.life);
	pthread_mutex_lock(&svc.log_lock);
	if (svc.log_target == self) {
		svc.log_target = NULL;
		for (sb_instance *i = svc.list; i; i = i->next)
			if (i != self)
				svc.log_target = i;
	}
	pthread_mutex_unlock(&svc.log_lock);

	pthread_mutex_lock(&svc.lock);
	for (sb_instance **p = &svc.list; *p; p = &(*p)->next) {
		if (*p == self) {
			*p = self->next;
			break;
		}
	}
	/* A job still running for a removed track is cancelled; the engine removes its
	 * temporary files and leaves no half stem. */
	for (int i = 0; i < SB_MAX_JOBS; i++) {
		if (!self->jobs[i].active || !svc.engine)
			continue;
		sb_engine_cancel(svc.engine, self->jobs[i].id);
		/* cancel is checked between chunks: a few seconds at most, but never hang the host */
		bool committed = false;
		if (sb_engine_wait(svc.engine, self->jobs[i].id, 60.0) == SB_OK) {
			sb_job_result *res = calloc(1, sizeof *res);
			committed = res && sb_engine_result(svc.engine, self->jobs[i].id, res) == SB_OK &&
			            res->status == SB_OK;
			free(res);
			sb_engine_release(svc.engine, self->jobs[i].id);
			if (committed)
				sb_take_done(&self->jobs[i].files, self->jobs[i].keep_audio ||
				                                       atomic_load(&self->keep_take) == 1);
			remove_take_folder(self->jobs[i].dir, self->jobs[i].made_root); /* if empty */
		} else {
			lv2_log_error(&self->logger, "stembridge: a cancelled job did not stop within "
			              "60 s; leaving it to the engine\n");
		}
		/* a host that closes the session stops its takes: each stays pending on disk and runs
		 * again when the session is opened (a removed plugin's stays for the user) */
		if (!committed && self->jobs[i].files.journal[0])
			lv2_log_note(&self->logger, "stembridge: take %s stopped before its stems were "
			             "written: its recording stays in %s and it resumes when the session "
			             "is opened again\n", strrchr(self->jobs[i].dir, '/') + 1,
			             self->jobs[i].dir);
		sb_take_release(&self->jobs[i].files);
		self->jobs[i].active = false;
	}
	/* takes that ended as the plugin goes (the host quits while recording, or just after):
	 * on disk, pending, to run when the session is opened again */
	sb_take *t;
	while (sb_ring_pop(&self->finished, &t)) {
		ready_take *r = take_ready(self, t);
		if (!r)
			continue;
		if (save_take(self, r) && r->f.journal[0])
			lv2_log_note(&self->logger, "stembridge: take %s ended as the plugin was removed: "
			             "its recording stays in %s and it is separated when the session is "
			             "opened again\n", r->j.id, r->j.out_dir);
		else if (r->j.out_dir[0])
			remove_take_folder(r->j.out_dir, r->made_root);
		sb_take_release(&r->f);
		free(r->samples);
		free(r);
	}
	for (int i = 0; i < SB_TAKES; i++) {
		if (!self->waiting[i])
			continue;
		sb_take_release(&self->waiting[i]->f);
		free(self->waiting[i]->samples);
		free(self->waiting[i]);
		self->waiting[i] = NULL;
	}
	sb_block *b;
	while (sb_ring_pop(&self->free_blocks, &b))
		free(b);
	free_take_blocks(self->spare);
	free_take_blocks(self->rt_block);
	self->spare = self->rt_block = NULL;
	audition_free(self->rt_audition);
	audition_free(atomic_exchange(&self->audition_pending, NULL));
	audition_free(atomic_exchange(&self->audition_retired, NULL));
	self->rt_audition = NULL;
	free((void *)atomic_exchange(&self->device_list, NULL));
	bool last = --svc.refs == 0;
	bool join = last && svc.started;
	if (last)
		svc.stop = true;
	pthread_cond_signal(&svc.wake);
	pthread_mutex_unlock(&svc.lock);
	if (join) {
		pthread_join(svc.thread, NULL);
		svc.started = false;
	}
	if (last) {
		sb_models_stop();
		if (svc.engine)
			sb_engine_free(svc.engine);
		svc.engine = NULL;
	}
	pthread_mutex_unlock(&svc.life);
}
