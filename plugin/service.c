/* The plugin service: one non-real-time thread per process, shared by every instance
 * (reference counted by instantiate/cleanup), owning the one sb_engine so that all tracks
 * share the devices under the chosen mode.
 *
 * Every few milliseconds it, for each instance: keeps the block pool full (deeper while the
 * host freewheels, since run() is then called faster than real time), turns finished takes
 * into engine jobs, polls their progress and posts status back to run(), and reads finished
 * stems back for audition. It never touches an instance's rt_* fields. This file is the thread
 * and the instances' life with it; service.h lists the files that do each part.
 *
 * Locks: life (attach/detach) > svc.lock (list, engine) > instance nrt_lock; log_lock alone.
 */
#include "service.h"

#include "models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
void sb_service_log(void *user, sb_log_level level, const char *msg)
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
sb_engine *sb_service_engine(void)
{
	if (!svc.engine && !svc.engine_failed) {
		sb_engine_opts o;
		memset(&o, 0, sizeof o);
		o.mode = SB_MODE_PARALLEL;
		o.log.fn = sb_service_log;
		sb_status st = sb_engine_new(&o, &svc.engine);
		if (st != SB_OK) {
			svc.engine = NULL;
			svc.engine_failed = true;
			sb_service_log(NULL, SB_LOG_ERROR, "the separation engine did not start");
		}
	}
	return svc.engine;
}

/* For save(), on a host thread: the engine's table when there is one, but never starting the
 * engine (a host that saves a plugin it only looked at starts nothing). */
bool sb_service_accel_key(size_t k, char *key, size_t klen, char *name, size_t nlen)
{
	pthread_mutex_lock(&svc.lock);
	const sb_device_list *l = svc.engine ? sb_engine_devices(svc.engine) : NULL;
	const sb_device *d = l ? sb_devices_accel(l, k) : NULL;
	if (d) {
		snprintf(key, klen, "%s", sb_device_get_key(d));
		sb_device_saved_name(d, name, nlen);
	}
	pthread_mutex_unlock(&svc.lock);
	return d != NULL;
}

void sb_service_post(sb_instance *self, sb_msg_kind kind, const char *text)
{
	sb_msg m;
	memset(&m, 0, offsetof(sb_msg, text));
	m.kind = kind;
	m.take = self->nrt_take;
	m.ahead = self->nrt_ahead;
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

int sb_service_jobs_before(sb_job_id id)
{
	int n = 0;
	for (sb_instance *i = svc.list; i; i = i->next)
		for (int k = 0; k < SB_MAX_JOBS; k++)
			n += i->jobs[k].active && i->jobs[k].id < id;
	return n;
}

/* Between pieces of a take's write: every instance's record pool stays full (the service is
 * theirs too, and a long take takes a while to write). */
void sb_service_refill_pools(void *user)
{
	(void)user;
	for (sb_instance *i = svc.list; i; i = i->next)
		sb_blocks_refill(i);
}

static void tick(sb_instance *self)
{
	atomic_store_explicit(&self->service_running, 1, memory_order_release);
	sb_model_watch(self);
	sb_blocks_refill(self);
	sb_take *t;
	while (sb_ring_pop(&self->finished, &t))
		sb_takes_submit(self, t);
	if (atomic_exchange(&self->resume_scan, 0))
		sb_takes_resume(self);
	sb_blocks_refill(self);
	if (atomic_exchange(&self->lost_frames_alarm, 0))
		lv2_log_error(&self->logger, "stembridge: recording lost samples: pool ran dry\n");
	sb_audition_free(atomic_exchange(&self->audition_retired, NULL));
	sb_engine *e = svc.engine;
	bool resolve;
	pthread_mutex_lock(&self->nrt_lock);
	resolve = self->nrt_resolve;
	pthread_mutex_unlock(&self->nrt_lock);
	if (resolve)
		e = sb_service_engine();
	/* the table first: a saved device is shown as the Device control value of its key */
	if (e && !atomic_load(&self->device_list))
		sb_device_list_publish(self, e);
	if (resolve && e)
		sb_device_resolve_saved(self, e);
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
		sb_jobs_poll(self, e);
}

static void *service_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&svc.lock);
	sb_service_engine();
	while (!svc.stop) {
		char done[64], why[600];
		sb_status result = SB_OK;
		const sb_logger log = {sb_service_log, NULL};
		if (sb_models_poll(&log, done, sizeof done, &result, why, sizeof why))
			for (sb_instance *i = svc.list; i; i = i->next)
				sb_takes_install_ended(i, done, result, why);
		for (sb_instance *i = svc.list; i; i = i->next)
			tick(i);
		const struct timespec ts = sb_deadline(CLOCK_REALTIME, 2);
		pthread_cond_timedwait(&svc.wake, &svc.lock, &ts);
	}
	pthread_mutex_unlock(&svc.lock);
	return NULL;
}

int sb_service_attach(sb_instance *self)
{
	pthread_mutex_lock(&svc.life);
	pthread_mutex_lock(&svc.lock);
	sb_blocks_refill(self); /* recording can start at the first run(), before the service runs */
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
	sb_takes_stop(self, svc.engine);
	sb_blocks_free(self);
	sb_audition_free(self->rt_audition);
	sb_audition_free(atomic_exchange(&self->audition_pending, NULL));
	sb_audition_free(atomic_exchange(&self->audition_retired, NULL));
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
