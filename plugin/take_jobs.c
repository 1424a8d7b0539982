/* Takes to jobs: a take run() finished becomes one piece of memory with its journal, goes on
 * disk in its own folder (take_store.c), then to the engine with the model its Model control
 * chose, or waits for that model's install, or fails saying why. Takes a stopped host left
 * unfinished are resumed from their recordings; when the plugin goes, its jobs are cancelled
 * and takes that just ended stay on disk to run when the session opens again.
 *
 * Threads: the service thread, and cleanup (sb_takes_stop). Never run().
 */
#include "service.h"

#include "models.h"

#include "stembridge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_samples(void *user, const float *samples)
{
	(void)user;
	free((void *)samples);
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

/* The Model control value a journal's model name stands for. */
static int model_choice_of(const char *name)
{
	for (int i = 0; i < SB_N_MODEL_CHOICES; i++)
		if (!strcmp(sb_model_choice_names[i], name))
			return i;
	return SB_MODEL_AUTO;
}

void sb_take_failed_text(sb_instance *self, sb_take_files *f, const char *dir, bool made_root,
                         const char *msg, char *text, size_t len)
{
	if (f->audio[0]) {
		char why[600] = "";
		if (sb_take_failed(f, msg, why, sizeof why) != SB_OK)
			lv2_log_error(&self->logger, "stembridge: %s\n", why);
		snprintf(text, len, "%.1200s; the take's recording is kept at %.2600s", msg, f->audio);
	} else {
		sb_take_release(f);
		if (dir[0])
			sb_take_folder_remove(dir, made_root);
		snprintf(text, len, "%s", msg);
	}
}

/* The take's job could not run or failed: the recording stays with its journal marked failed,
 * and the message says where it is; a take that never reached the disk leaves no folder. */
static void fail_take(sb_instance *self, ready_take *r, const char *msg)
{
	free(r->samples);
	r->samples = NULL;
	char text[SB_TEXT];
	sb_take_failed_text(self, &r->f, r->j.out_dir, r->made_root, msg, text, sizeof text);
	lv2_log_error(&self->logger, "stembridge: take %s: %s\n", r->j.id, text);
	self->nrt_state = SB_STATE_ERROR;
	self->nrt_take = (int)sb_take_number(r->j.id, r->j.track);
	self->nrt_ahead = 0;
	sb_service_post(self, SB_MSG_ERROR, text);
}

/* Keeps a take until the install of its model ends (sb_takes_install_ended() then runs or
 * fails it). */
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
		self->nrt_take = (int)sb_take_number(w->j.id, w->j.track);
		self->nrt_ahead = 0;
		self->nrt_progress = 0.0f;
		self->nrt_time_left = -1.0f;
		sb_service_post(self, SB_MSG_STATUS, NULL);
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
	sb_engine *e = sb_service_engine();
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
	/* the stems beyond the six toggles (a karaoke model's lead and backing vocals, a drum
	 * model's kit pieces) have none: the model makes them, they are written */
	stems |= mc.stems & ~((1u << SB_PLUGIN_STEMS) - 1);
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
	/* the engine decides whether a take shares its devices or takes turns on them */
	spec.device = j->device;
	spec.in_turn = j->sequential;
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
	self->jobs[slot].last_ahead = -1;
	self->jobs[slot].take_no = (int)sb_take_number(j->id, j->track);
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
	self->nrt_take = self->jobs[slot].take_no;
	self->nrt_ahead = sb_service_jobs_before(id);
	sb_service_post(self, SB_MSG_STATUS, NULL);
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
	self->nrt_take = 0; /* it has no folder, so no number */
	self->nrt_ahead = 0;
	self->nrt_progress = 0.0f;
	self->nrt_time_left = -1.0f;
	sb_service_post(self, SB_MSG_SILENT, msg);
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
	sb_take_folder_track(self, &pr, j->track, sizeof j->track);
	if (!sb_take_folder_root(self, &pr, root, sizeof root, session, sizeof session) ||
	    !sb_take_folder_make(self, root, session, j->track, j->take, sizeof j->take, j->out_dir,
	                         sizeof j->out_dir, &r->made_root)) {
		j->out_dir[0] = '\0';
		return false;
	}
	snprintf(j->id, sizeof j->id, "%s-%s", j->track, j->take);
	char why[SB_TEXT];
	const sb_status st = sb_take_save(j, r->samples, sb_service_refill_pools, NULL, &r->f, why,
	                                  sizeof why);
	if (st == SB_OK)
		return true;
	char msg[SB_TEXT];
	snprintf(msg, sizeof msg, "take %.300s was not saved to disk (%.3000s): it is separated "
	         "from memory, and would be lost if the host stopped before its stems are written",
	         j->id, why);
	lv2_log_error(&self->logger, "stembridge: %s\n", msg);
	sb_service_post(self, SB_MSG_ERROR, msg);
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
	sb_blocks_give_back(self, t->first);
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
		sb_service_post(self, SB_MSG_ERROR, msg);
	}
	if (!samples) {
		self->nrt_state = SB_STATE_ERROR;
		sb_service_post(self, SB_MSG_ERROR, "out of memory for the take");
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
		sb_service_post(self, SB_MSG_ERROR, "out of memory for the take");
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

void sb_takes_submit(sb_instance *self, sb_take *t)
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
void sb_takes_install_ended(sb_instance *self, const char *name, sb_status result,
                            const char *why)
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

/* One journal a scan found (sb_takes_resume). */
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
		sb_service_post(self, SB_MSG_ERROR, msg);
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
	} else if (sb_take_read_audio(&r->f, j, &r->samples, &(const sb_logger){sb_service_log, NULL},
	                              why, sizeof why) != SB_OK) {
		char msg[SB_TEXT + 200];
		snprintf(msg, sizeof msg, "take %.300s cannot be resumed: %.3700s; its files are kept",
		         j->id, why);
		lv2_log_error(&self->logger, "stembridge: %s\n", msg);
		self->nrt_state = SB_STATE_ERROR;
		sb_service_post(self, SB_MSG_ERROR, msg);
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
void sb_takes_resume(sb_instance *self)
{
	sb_props pr;
	sb_props_read(self, &pr);
	char root[SB_TEXT], session[SB_TEXT], track[256];
	sb_take_folder_track(self, &pr, track, sizeof track);
	if (!sb_take_folder_root(self, &pr, root, sizeof root, session, sizeof session))
		return;
	sb_take_scan(root, track, resume_one, self);
}

/* Cleanup, under the service lock: the jobs, the takes that ended and the takes waiting. */
void sb_takes_stop(sb_instance *self, sb_engine *e)
{
	/* A job still running for a removed track is cancelled; the engine removes its
	 * temporary files and leaves no half stem. */
	for (int i = 0; i < SB_MAX_JOBS; i++) {
		if (!self->jobs[i].active || !e)
			continue;
		sb_engine_cancel(e, self->jobs[i].id);
		/* cancel is checked between chunks: a few seconds at most, but never hang the host */
		bool committed = false;
		if (sb_engine_wait(e, self->jobs[i].id, 60.0) == SB_OK) {
			sb_job_result *res = calloc(1, sizeof *res);
			committed = res && sb_engine_result(e, self->jobs[i].id, res) == SB_OK &&
			            res->status == SB_OK;
			free(res);
			sb_engine_release(e, self->jobs[i].id);
			if (committed)
				sb_take_done(&self->jobs[i].files, self->jobs[i].keep_audio ||
				                                       atomic_load(&self->keep_take) == 1);
			sb_take_folder_remove(self->jobs[i].dir, self->jobs[i].made_root); /* if empty */
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
			sb_take_folder_remove(r->j.out_dir, r->made_root);
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
}
