/* The engine (stembridge.h: sb_engine_*): workers, queues and the devices they run on.
 * README.md here tells how it schedules and what each lock guards. */
#include "sb_common.h"

#include "backend/backend.h"
#include "core/pace.h"
#include "io/audio_file.h"
#include "models/model.h"
#include "jobs/job_run.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sb_job sb_job;
typedef struct sb_worker sb_worker;

struct sb_job {
	sb_job_id id;
	sb_job_spec spec;          /* strings point into 'strings' */
	char *strings[8];
	char requested[640];       /* what the job asked for, for the result */
	sb_device_set set;         /* resolved entries, with their fallbacks' reasons */
	sb_job_progress progress;
	sb_job_outcome result;
	atomic_int cancel;
	int ended;
	int released;              /* released while running: freed by its worker when it ends */
	int input_released;
	pthread_cond_t done;
	int pooled;                /* waits in the engine's pool for a free device of 'want' */
	sb_device_set want;        /* a pooled job: the devices it asked for */
	double units;              /* its audio in seconds, what the sharing rule counts */
	int shares;                /* its model deals segments out to several devices (not the
	                              built-in, which runs on the first device of a set) */
	sb_job *next_in_table;
	sb_job *next_in_queue;
};

struct sb_worker {
	sb_engine *e;
	pthread_t thread;
	int started;
	uint64_t key;              /* the set's entries as bits; 0: each job's own (sequential) */
	sb_model_keep *keep;       /* its last job's model: touched by its thread, or by another
	                              holding the locks of every device in kept_mask (run_job) */
	uint64_t kept_mask;        /* the devices (not the CPU) the kept model's weights are on */
	sb_job *head, *tail;
	pthread_cond_t wake;
	/* a device of the engine's set: it also takes pooled jobs (jobs without a device) */
	int pool;
	size_t dev;                /* its device entry */
	double ran_s, audio_s;     /* pooled jobs it ran alone: seconds taken, audio's seconds */
	double busy_since;         /* when its current job started, 0 when idle */
	double busy_units;         /* and that job's units */
	sb_job_id lent_to;         /* its device is lent to this job (a lone one), 0 when not */
	sb_worker *next;
};

typedef struct {
	pthread_mutex_t lock;      /* held by the job that uses the device */
	sb_exec x;                 /* opened, or not yet (tried 0) or failed to (why) */
	int tried;
	char why[512];
} dev_slot;

struct sb_engine {
	sb_engine_opts opts;
	char **model_path;
	sb_device_list *devices;
	size_t *set;
	size_t n_set, rr;          /* rr: the next device of the set in sequential mode */
	dev_slot *dev;             /* one per device entry */
	pthread_mutex_t lock;
	int stopping;
	sb_job *jobs;
	sb_worker *workers;
	sb_job *pool_head, *pool_tail; /* jobs for the free devices of the sets they name */
	int paused;                /* sb_engine_pause(): no job starts */
	sb_job_id next_id;
};

static void release_input(sb_job *j)
{
	if (!j->input_released && j->spec.samples && j->spec.input_free)
		j->spec.input_free(j->spec.input_user, j->spec.samples);
	j->input_released = 1;
}

static void job_free(sb_job *j)
{
	release_input(j);
	for (size_t i = 0; i < sizeof j->strings / sizeof j->strings[0]; i++)
		free(j->strings[i]);
	pthread_cond_destroy(&j->done);
	free(j);
}

/* The devices one job opened for itself: the native CPU (each job gets its own threads). */
typedef struct {
	sb_engine *e;
	sb_exec own[4];
	int n_own;
	int bf16;                  /* the job asks for bf16 products */
	int gpus;                  /* the job's GPUs that run (job_run.h: sb_device_access.gpus) */
	int others;                /* the engine's other GPUs, which other jobs may run meanwhile */
} job_devices;

/* In parallel mode, the GPUs of the engine's set outside the job's own: other workers may run
 * jobs on them while this job's CPU computes. The CPU leaves a core to each GPU that runs
 * beside it and runs below their feeding threads (backend.h: sb_open_opts.beside). */
static int other_gpus(const sb_engine *e, const sb_device_set *set)
{
	int n = 0;
	for (size_t k = 0; e->opts.mode == SB_MODE_PARALLEL && k < e->n_set; k++) {
		int mine = 0;
		for (size_t m = 0; m < set->n && !mine; m++)
			mine = set->index[m] == e->set[k];
		n += !mine && sb_device_is_gpu(sb_devices_get(e->devices, e->set[k]));
	}
	return n;
}

/* The job runner's way to a device (job_run.h: sb_device_access): a GPU-like device is
 * opened once, through its backend, the first time a job asks, and kept; a device that failed
 * to open, or was lost, says why. Called by the job that holds the device's lock. The native
 * CPU is opened for each job that asks (its own thread pool), so no job waits for another's. */
static sb_status open_device(void *user, size_t i, sb_exec *out, char *why, size_t wlen)
{
	job_devices *jd = user;
	sb_engine *e = jd->e;
	const sb_device *d = sb_devices_get(e->devices, i);
	if (sb_device_is_native(d)) {
		if (jd->n_own == 4)
			return SB_ERR_INVALID;
		const sb_open_opts o = {e->opts.cpu_threads, jd->bf16 ? SB_PREC_BF16 : SB_PREC_FP32,
		                        jd->gpus + jd->others};
		sb_status st = sb_exec_open(d, &o, &e->opts.log, &jd->own[jd->n_own]);
		if (st != SB_OK) {
			snprintf(why, wlen, "%s could not be started (%s)", d->label, sb_status_str(st));
			return st;
		}
		*out = jd->own[jd->n_own++];
		return SB_OK;
	}
	dev_slot *s = &e->dev[i];
	if (!s->tried) {
		s->tried = 1;
		/* opened once and kept for every job, each job's precision set below */
		const sb_open_opts o = {e->opts.cpu_threads, SB_PREC_FP32, 0};
		sb_status st = sb_exec_open(d, &o, &e->opts.log, &s->x);
		if (st != SB_OK) {
			s->x.d = NULL;
			snprintf(s->why, sizeof s->why, "%s could not be opened (%s)", d->label,
			         sb_status_str(st));
		}
	}
	/* opened once, so the job's precision is set each time (the job holds its lock) */
	if (s->x.d && s->x.be->set_precision)
		s->x.be->set_precision(s->x.d, jd->bf16 ? SB_PREC_BF16 : SB_PREC_FP32);
	if (s->x.d && s->x.be->lost(s->x.d))
		snprintf(s->why, sizeof s->why, "%s was lost earlier in this session", d->label);
	snprintf(why, wlen, "%s", s->why);
	if (!s->x.d || s->x.be->lost(s->x.d))
		return SB_ERR_DEVICE;
	*out = s->x;
	return SB_OK;
}

/* Under e->lock: a job released while it ran is unlinked and freed once it has ended. */
static void forget_if_released(sb_engine *e, sb_job *j)
{
	if (!j->released)
		return;
	for (sb_job **pp = &e->jobs; *pp; pp = &(*pp)->next_in_table)
		if (*pp == j) {
			*pp = j->next_in_table;
			break;
		}
	job_free(j);
}

typedef struct {
	sb_engine *e;
	sb_job *j;
} progress_target;

static void progress_cb(void *user, const sb_job_progress *p)
{
	progress_target *t = user;
	pthread_mutex_lock(&t->e->lock);
	sb_job_state keep = t->j->progress.state;
	t->j->progress = *p;
	/* A job ends (DONE, FAILED, CANCELLED) only when its result can be read: run_job() sets
	 * that state together with the result, never the runner's progress report. */
	if (p->state >= SB_JOB_DONE)
		t->j->progress.state = keep;
	pthread_mutex_unlock(&t->e->lock);
}

/* the set's devices other than the native CPU, as bits (the ones with a lock) */
static uint64_t locked_mask(const sb_engine *e, const sb_device_set *s)
{
	uint64_t m = 0;
	for (size_t k = 0; k < s->n; k++)
		if (s->index[k] < 64 && !sb_device_is_native(sb_devices_get(e->devices, s->index[k])))
			m |= (uint64_t)1 << s->index[k];
	return m;
}

static void lock_devices(sb_engine *e, uint64_t m)
{
	for (size_t i = 0; i < sb_devices_count(e->devices) && i < 64; i++)
		if (m & ((uint64_t)1 << i))
			pthread_mutex_lock(&e->dev[i].lock);
}

static void unlock_devices(sb_engine *e, uint64_t m)
{
	for (size_t i = sb_devices_count(e->devices); i-- > 0;)
		if (i < 64 && (m & ((uint64_t)1 << i)))
			pthread_mutex_unlock(&e->dev[i].lock);
}

/* Takes the locks of j's devices (in table order) and frees the models other workers keep on
 * any of them, so that a device holds one kept model at most: a worker whose device is lent to
 * a shared job, or a shared job's worker when one of its devices runs a job of its own, would
 * otherwise leave a second copy of the weights there. Such a model may reach past j's devices,
 * so their locks are taken too (every worker's jobs run on the devices its model is kept on, so
 * holding them keeps its owner away; they are let go once it is freed). Returns the devices
 * locked: j's. */
static uint64_t lock_and_clear(sb_engine *e, sb_worker *w, const sb_device_set *set)
{
	const uint64_t mine = locked_mask(e, set);
	uint64_t held = 0;
	int locked = 0;
	sb_model_keep *drop[64];
	int n_drop = 0;
	for (;;) {
		pthread_mutex_lock(&e->lock);
		uint64_t need = mine;
		for (sb_worker *o = e->workers; o; o = o->next)
			if (o != w && (o->kept_mask & mine))
				need |= o->kept_mask;
		if (locked && !(need & ~held)) {
			for (sb_worker *o = e->workers; o && n_drop < 64; o = o->next)
				if (o != w && (o->kept_mask & mine)) {
					o->kept_mask = 0;
					drop[n_drop++] = o->keep;
				}
			pthread_mutex_unlock(&e->lock);
			break;
		}
		pthread_mutex_unlock(&e->lock);
		/* a model kept past the devices locked: lock them all again, in table order */
		unlock_devices(e, held);
		held = need;
		lock_devices(e, held);
		locked = 1;
	}
	for (int i = 0; i < n_drop; i++)
		sb_model_keep_drop(drop[i]);
	/* the others' devices were locked only for that: the job holds its own */
	unlock_devices(e, held & ~mine);
	return mine;
}

/* runs j on w's thread; its status (j itself may be gone once it has ended), and in *ran the
 * seconds it ran once its devices were free (the pace counts no wait for another's job) */
static sb_status run_job(sb_worker *w, sb_job *j, double *ran)
{
	sb_engine *e = w->e;
	/* the job's shared devices, locked in table order (the CPU is each job's own) */
	const uint64_t held = lock_and_clear(e, w, &j->set);
	const double t0 = sb_now();
	progress_target t = {e, j};
	job_devices jd = {e, {{0}}, 0, j->spec.bf16, 0, other_gpus(e, &j->set)};
	const sb_device_access access = {e->devices, open_device, &jd, &jd.gpus};
	sb_job_env env = {
		.devices = &j->set,
		.access = &access,
		.requested = j->requested,
		.log = &e->opts.log,
		.cancel = &j->cancel,
		.progress = progress_cb,
		.progress_user = &t,
		.cpu_threads = e->opts.cpu_threads,
		.batch = e->opts.batch,
		.model_path = (const char *const *)e->model_path,
		.keep = w->keep,
	};
	sb_job_outcome *r = malloc(sizeof *r);
	if (r)
		sb_job_run(&j->spec, &env, r);
	*ran = sb_now() - t0;
	for (int i = 0; i < jd.n_own; i++)
		sb_exec_close(&jd.own[i]);
	const int kept = sb_model_keep_holds(w->keep);
	pthread_mutex_lock(&e->lock);
	w->kept_mask = kept ? locked_mask(e, &j->set) : 0;
	pthread_mutex_unlock(&e->lock);
	unlock_devices(e, held);
	/* The samples are no longer needed: give them back before the job is seen to end (once it
	 * has, its owner may release and free it at any moment). */
	release_input(j);
	pthread_mutex_lock(&e->lock);
	if (r) {
		j->result = *r;
	} else {
		j->result.status = SB_ERR_NOMEM;
		snprintf(j->result.message, sizeof j->result.message, "out of memory");
	}
	const sb_status st = j->result.status;
	j->progress.state = st == SB_OK ? SB_JOB_DONE
	                  : st == SB_ERR_CANCELLED ? SB_JOB_CANCELLED : SB_JOB_FAILED;
	if (st == SB_OK)
		j->progress.fraction = 1.0;
	j->ended = 1;
	pthread_cond_broadcast(&j->done);
	forget_if_released(e, j);
	pthread_mutex_unlock(&e->lock);
	free(r);
	return st;
}

/* Under e->lock: j at the end of the queue head..tail (the pool, or a worker's own) */
static void append(sb_job **head, sb_job **tail, sb_job *j)
{
	j->next_in_queue = NULL;
	*(*tail ? &(*tail)->next_in_queue : head) = j;
	*tail = j;
}

/* Under e->lock: j out of the queue head..tail; 0 when it is not in it */
static int unlink_job(sb_job **head, sb_job **tail, sb_job *j)
{
	sb_job *prev = NULL;
	for (sb_job *q = *head; q; prev = q, q = q->next_in_queue)
		if (q == j) {
			*(prev ? &prev->next_in_queue : head) = j->next_in_queue;
			if (*tail == j)
				*tail = prev;
			j->next_in_queue = NULL;
			return 1;
		}
	return 0;
}

static int in_set(const sb_device_set *s, size_t dev)
{
	for (size_t k = 0; k < s->n; k++)
		if (s->index[k] == dev)
			return 1;
	return 0;
}

/* A device's pace: seconds it takes a second of audio, from the pooled jobs it ran alone; 0
 * before the first. */
static double pace(const sb_worker *w)
{
	return w->audio_s > 0 ? w->ran_s / w->audio_s : 0;
}

/* Under e->lock. Whether free device w takes pooled job j now, by the sharing rule (pace.h)
 * among the devices j asked for, with 'waiting' seconds of audio in the jobs that wait for w's
 * device. A take of ten seconds and a song of five minutes count as what they are. */
static int worth_taking(const sb_engine *e, const sb_worker *w, const sb_job *j,
                        double waiting)
{
	if (e->stopping)
		return 1;
	const double now = sb_now();
	sb_pace_other others[SB_MAX_SET];
	int k = 0;
	for (const sb_worker *o = e->workers; o && k < SB_MAX_SET; o = o->next)
		if (o != w && o->pool && in_set(&j->want, o->dev))
			others[k++] = (sb_pace_other){
				pace(o), sb_pace_left(pace(o), o->busy_units,
				                      o->busy_since > 0 ? now - o->busy_since : -1)};
	return sb_pace_take(pace(w), j->units, others, k, waiting);
}

/* Under e->lock: j's entry for table entry dev, with its fallback's reason, added to j->set */
static void set_take(sb_job *j, size_t dev)
{
	for (size_t k = 0; k < j->want.n; k++)
		if (j->want.index[k] == dev) {
			j->set.index[j->set.n] = dev;
			snprintf(j->set.reason[j->set.n], sizeof j->set.reason[0], "%s", j->want.reason[k]);
			j->set.fell_back |= j->want.reason[k][0] != 0;
			j->set.n++;
		}
}

static sb_worker *worker_for(sb_engine *e, const sb_device_set *set);

/* Under e->lock. The next job for w: its own queue first, then the first pooled job that names
 * w's device. A pooled job that no other waiting job competes with is not left to one device
 * while others of its set stand idle: w and those devices are lent to the worker of that set
 * of devices, which runs it and shares its segments among them (share.h's rule then decides
 * how many each one gets), and w takes nothing until the job ends. The set's own worker, not
 * w, runs it so that every worker's kept model stays on the devices it locks for its jobs. */
static sb_job *next_job(sb_engine *e, sb_worker *w)
{
	if ((e->paused || w->lent_to) && !e->stopping)
		return NULL;
	sb_job *j = w->head;
	if (j) {
		unlink_job(&w->head, &w->tail, j);
		return j;
	}
	if (!w->pool)
		return NULL;
	double waiting = 0;
	for (sb_job *q = e->pool_head; q; q = q->next_in_queue)
		if (in_set(&q->want, w->dev)) {
			j = j ? j : q;
			waiting += q->units;
		}
	/* a cancelled job is taken by any device of its set, to end it now */
	if (!j || (!atomic_load(&j->cancel) && !worth_taking(e, w, j, waiting)))
		return NULL;
	unlink_job(&e->pool_head, &e->pool_tail, j);
	/* idle devices are lent only to a model that can use them */
	int alone = j->shares && !e->stopping && !atomic_load(&j->cancel);
	for (const sb_job *q = e->pool_head; q && alone; q = q->next_in_queue)
		for (size_t k = 0; k < q->want.n && alone; k++)
			alone = !in_set(&j->want, q->want.index[k]);
	/* the set's order, so that a job's devices are listed as it asked for them */
	sb_worker *idle[SB_MAX_SET];
	int n_idle = 0;
	memset(&j->set, 0, sizeof j->set);
	for (size_t k = 0; k < j->want.n; k++) {
		const size_t d = j->want.index[k];
		if (d == w->dev) {
			set_take(j, d);
			continue;
		}
		for (sb_worker *o = e->workers; alone && o && n_idle < SB_MAX_SET; o = o->next)
			if (o->pool && o->dev == d && o != w && !o->lent_to && o->busy_since <= 0 &&
			    !o->head) {
				idle[n_idle++] = o;
				set_take(j, d);
				break;
			}
	}
	sb_worker *sw = n_idle ? worker_for(e, &j->set) : NULL;
	if (!sw) {
		/* alone on w (or no thread for the set: w runs it by itself) */
		memset(&j->set, 0, sizeof j->set);
		set_take(j, w->dev);
		return j;
	}
	idle[n_idle++] = w;
	const double now = sb_now();
	for (int i = 0; i < n_idle; i++) {
		idle[i]->lent_to = j->id;
		idle[i]->busy_since = now;
		idle[i]->busy_units = j->units;
	}
	append(&sw->head, &sw->tail, j);
	pthread_cond_signal(&sw->wake);
	return NULL;
}

/* the CLOCK_REALTIME time s seconds from now, for pthread_cond_timedwait */
static struct timespec deadline_in(double s)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	const double at = (double)t.tv_sec + t.tv_nsec * 1e-9 + s;
	t.tv_sec = (time_t)at;
	t.tv_nsec = (long)((at - (double)t.tv_sec) * 1e9);
	return t;
}

/* Under e->lock: every device of the set looks at the pool again */
static void wake_pool(sb_engine *e)
{
	for (sb_worker *o = e->workers; o; o = o->next)
		if (o->pool)
			pthread_cond_signal(&o->wake);
}

/* Under e->lock: the devices lent to job id are free again */
static void end_lending(sb_engine *e, sb_job_id id)
{
	for (sb_worker *o = e->workers; o; o = o->next)
		if (o->lent_to == id) {
			o->lent_to = 0;
			o->busy_since = 0;
			pthread_cond_signal(&o->wake);
		}
}

/* Under e->lock: j taken out of the pool or a worker's queue, where it waits; 0 when it is in
 * neither (running, or ended). */
static int unqueue(sb_engine *e, sb_job *j)
{
	if (unlink_job(&e->pool_head, &e->pool_tail, j))
		return 1;
	for (sb_worker *w = e->workers; w; w = w->next)
		if (unlink_job(&w->head, &w->tail, j))
			return 1;
	return 0;
}

/* Under e->lock: j, cancelled before any device took it, ends now (its result can be read;
 * devices lent to it are free again). */
static void end_unstarted(sb_engine *e, sb_job *j)
{
	j->result.status = SB_ERR_CANCELLED;
	snprintf(j->result.message, sizeof j->result.message, "cancelled before it started");
	j->progress.state = SB_JOB_CANCELLED;
	j->progress.stage = "cancelled";
	j->ended = 1;
	pthread_cond_broadcast(&j->done);
	end_lending(e, j->id);
}

static void *worker_main(void *arg)
{
	sb_worker *w = arg;
	sb_engine *e = w->e;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		sb_job *j;
		while (!(j = next_job(e, w)) && !e->stopping) {
			if (w->pool && e->pool_head && !w->lent_to) {
				/* it left a pooled job to a faster device: look again as time goes by */
				const struct timespec until = deadline_in(0.2);
				pthread_cond_timedwait(&w->wake, &e->lock, &until);
			} else {
				pthread_cond_wait(&w->wake, &e->lock);
			}
		}
		if (!j)
			break;
		if (atomic_load(&j->cancel)) {
			end_unstarted(e, j);
			forget_if_released(e, j);
			continue;
		}
		j->progress.state = SB_JOB_RUNNING;
		j->progress.stage = "starting";
		const int pooled = j->pooled;
		w->busy_since = sb_now();
		w->busy_units = j->units;
		const double units = j->units;
		const size_t n_used = j->set.n;
		const sb_job_id id = j->id;
		pthread_mutex_unlock(&e->lock);
		double ran = 0;
		const sb_status st = run_job(w, j, &ran);
		pthread_mutex_lock(&e->lock);
		w->busy_since = 0;
		/* a pooled job that ran to its end on this device alone sets the device's pace */
		if (pooled && n_used == 1 && st == SB_OK) {
			w->ran_s += ran;
			w->audio_s += units;
		}
		end_lending(e, id);
		if (e->pool_head)
			wake_pool(e);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Under e->lock. The worker for a device set (parallel) or the one worker (sequential). */
static sb_worker *worker_for(sb_engine *e, const sb_device_set *set)
{
	uint64_t key = 0;
	for (size_t k = 0; k < set->n; k++)
		key |= (uint64_t)1 << (set->index[k] < 63 ? set->index[k] : 63);
	if (e->opts.mode == SB_MODE_SEQUENTIAL)
		key = 0;
	for (sb_worker *w = e->workers; w; w = w->next)
		if (w->key == key)
			return w;
	sb_worker *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->e = e;
	w->key = key;
	/* without memory for a keep, the worker opens each job's model for that job alone */
	w->keep = sb_model_keep_new();
	pthread_cond_init(&w->wake, NULL);
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
		pthread_cond_destroy(&w->wake);
		sb_model_keep_free(w->keep);
		free(w);
		sb_log(&e->opts.log, SB_LOG_ERROR, "cannot start a worker thread");
		return NULL;
	}
	w->started = 1;
	w->next = e->workers;
	e->workers = w;
	return w;
}

sb_status sb_engine_new(const sb_engine_opts *opts, sb_engine **out)
{
	if (!opts || !out)
		return SB_ERR_INVALID;
	sb_engine *e = calloc(1, sizeof *e);
	if (!e)
		return SB_ERR_NOMEM;
	e->opts = *opts;
	e->opts.devices = NULL;
	e->opts.model_path = NULL;
	e->next_id = 1;
	pthread_mutex_init(&e->lock, NULL);
	sb_status st = sb_devices_enumerate(&e->opts.log, &e->devices);
	if (st != SB_OK) {
		pthread_mutex_destroy(&e->lock);
		free(e);
		return st;
	}
	size_t nd = sb_devices_count(e->devices);
	e->dev = calloc(nd, sizeof *e->dev);
	for (size_t i = 0; e->dev && i < nd; i++)
		pthread_mutex_init(&e->dev[i].lock, NULL);
	e->set = calloc(nd + 1, sizeof *e->set);
	size_t np = 0;
	while (opts->model_path && opts->model_path[np])
		np++;
	e->model_path = calloc(np + 1, sizeof *e->model_path);
	if (!e->dev || !e->set || !e->model_path) {
		sb_engine_free(e);
		return SB_ERR_NOMEM;
	}
	for (size_t i = 0; i < np; i++)
		if (!(e->model_path[i] = strdup(opts->model_path[i]))) {
			sb_engine_free(e);
			return SB_ERR_NOMEM;
		}
	/* The device set for jobs without a device of their own. */
	for (size_t i = 0; i < opts->n_devices; i++) {
		sb_device_set ds;
		if (sb_devices_resolve_set(e->devices, opts->devices[i], &ds) != SB_OK) {
			char forms[256];
			sb_devices_request_forms(forms, sizeof forms);
			sb_log(&e->opts.log, SB_LOG_ERROR,
			       "unknown device '%s' (use %s)", opts->devices[i], forms);
			sb_engine_free(e);
			return SB_ERR_INVALID;
		}
		for (size_t k = 0; k < ds.n; k++) {
			if (ds.reason[k][0])
				sb_log(&e->opts.log, SB_LOG_WARNING, "%s: using the CPU instead", ds.reason[k]);
			int dup = 0;
			for (size_t m = 0; m < e->n_set; m++)
				dup |= e->set[m] == ds.index[k];
			if (!dup && e->n_set < nd)
				e->set[e->n_set++] = ds.index[k];
		}
	}
	if (e->n_set == 0 && opts->mode == SB_MODE_PARALLEL)
		for (size_t i = 0; i < nd; i++)
			if (sb_device_is_gpu(sb_devices_get(e->devices, i)))
				e->set[e->n_set++] = i;
	if (e->n_set == 0)
		e->set[e->n_set++] = sb_devices_auto(e->devices);
	*out = e;
	return SB_OK;
}

void sb_engine_free(sb_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = 1;
	for (sb_job *j = e->jobs; j; j = j->next_in_table)
		atomic_store(&j->cancel, 1);
	for (sb_worker *w = e->workers; w; w = w->next)
		pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&e->lock);
	sb_worker *w = e->workers;
	while (w) {
		sb_worker *n = w->next;
		if (w->started)
			pthread_join(w->thread, NULL);
		sb_model_keep_free(w->keep); /* its weights on the devices go before the devices */
		pthread_cond_destroy(&w->wake);
		free(w);
		w = n;
	}
	sb_job *j = e->jobs;
	while (j) {
		sb_job *n = j->next_in_table;
		job_free(j);
		j = n;
	}
	if (e->dev)
		for (size_t i = 0; i < sb_devices_count(e->devices); i++) {
			sb_exec_close(&e->dev[i].x);
			pthread_mutex_destroy(&e->dev[i].lock);
		}
	free(e->dev);
	free(e->set);
	if (e->model_path)
		for (size_t i = 0; e->model_path[i]; i++)
			free(e->model_path[i]);
	free(e->model_path);
	sb_devices_free(e->devices);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

const struct sb_device_list *sb_engine_devices(const sb_engine *e)
{
	return e ? e->devices : NULL;
}

static sb_job *find(sb_engine *e, sb_job_id id)
{
	for (sb_job *j = e->jobs; j; j = j->next_in_table)
		if (j->id == id)
			return j;
	return NULL;
}

void sb_engine_pause(sb_engine *e, int paused)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->paused = paused != 0;
	if (!e->paused)
		for (sb_worker *w = e->workers; w; w = w->next)
			pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&e->lock);
}

sb_status sb_engine_submit(sb_engine *e, const sb_job_spec *spec, sb_job_id *id)
{
	if (!e || !spec || !spec->out_dir || !*spec->out_dir)
		return SB_ERR_INVALID;
	if (!spec->input_path && (!spec->samples || spec->channels < 1 || !(spec->rate > 0)))
		return SB_ERR_INVALID;
	if (!spec->input_path && spec->frames <= 0)
		return SB_ERR_EMPTY;
	sb_job *j = calloc(1, sizeof *j);
	if (!j)
		return SB_ERR_NOMEM;
	j->spec = *spec;
	const char *src[8] = {spec->input_path, spec->track, spec->take, spec->device, spec->model,
	                      spec->out_dir, spec->name_template, spec->manifest_name};
	for (int i = 0; i < 8; i++)
		if (src[i] && !(j->strings[i] = strdup(src[i]))) {
			j->spec.samples = NULL; /* the caller keeps its samples when submit fails */
			job_free(j);
			return SB_ERR_NOMEM;
		}
	j->spec.input_path = j->strings[0];
	j->spec.track = j->strings[1];
	j->spec.take = j->strings[2];
	j->spec.device = j->strings[3];
	j->spec.model = j->strings[4];
	j->spec.out_dir = j->strings[5];
	j->spec.name_template = j->strings[6];
	j->spec.manifest_name = j->strings[7];
	pthread_cond_init(&j->done, NULL);
	/* What the sharing rule of parallel mode reads (sequential mode has no pool): the job's
	 * length (a file's from its header; a nominal minute when that cannot be read: such a file
	 * fails at once anyway), and whether its model can share (every model file can, the
	 * built-in cannot; nothing is logged: the job says why when its model is missing). */
	j->units = 60;
	if (e->opts.mode == SB_MODE_PARALLEL) {
		const double secs = spec->input_path ? sb_audio_file_seconds(spec->input_path)
		                                     : (double)spec->frames / spec->rate;
		if (secs > 0)
			j->units = secs;
		char real[256], file[4352];
		const sb_logger quiet = {NULL, NULL};
		j->shares = !spec->in_turn &&
		            sb_model_locate(spec->model, (const char *const *)e->model_path, &quiet,
		                            real, sizeof real, file, sizeof file) == SB_OK && file[0];
	}

	pthread_mutex_lock(&e->lock);
	/* what it asks for: its own request, else the engine's set */
	sb_device_set want;
	memset(&want, 0, sizeof want);
	if (spec->device) {
		if (sb_devices_resolve_set(e->devices, spec->device, &want) != SB_OK) {
			pthread_mutex_unlock(&e->lock);
			char forms[256];
			sb_devices_request_forms(forms, sizeof forms);
			sb_log(&e->opts.log, SB_LOG_ERROR, "unknown device '%s' (use %s, or several of "
			       "them separated by commas)", spec->device, forms);
			j->spec.samples = NULL;
			job_free(j);
			return SB_ERR_INVALID;
		}
		snprintf(j->requested, sizeof j->requested, "%s", spec->device);
	} else if (e->opts.mode == SB_MODE_PARALLEL) {
		for (size_t k = 0; k < e->n_set; k++)
			want.index[want.n++] = e->set[k];
		snprintf(j->requested, sizeof j->requested, "auto (parallel set)");
	} else {
		want.n = 1;
		want.index[0] = e->set[e->rr++ % e->n_set];
		snprintf(j->requested, sizeof j->requested, "auto");
	}
	/* Parallel mode: a job asking for several devices waits in the pool for a free one, or
	 * for all that are free when nothing else waits for them (next_job). Sequential mode, a
	 * job that runs in turn, or one device: the job takes all it asked for, after the jobs
	 * before it. */
	j->pooled = e->opts.mode == SB_MODE_PARALLEL && !spec->in_turn && want.n > 1;
	sb_worker *w = NULL;
	if (j->pooled) {
		j->want = want;
		/* a worker for each device of the set, taking pooled jobs besides its own */
		for (size_t k = 0; k < want.n; k++) {
			sb_device_set one;
			memset(&one, 0, sizeof one);
			one.n = 1;
			one.index[0] = want.index[k];
			sb_worker *o = worker_for(e, &one);
			if (!o)
				break;
			o->pool = 1;
			o->dev = want.index[k];
			w = o;
		}
	} else {
		j->set = want;
		w = worker_for(e, &j->set);
	}
	if (!w) {
		pthread_mutex_unlock(&e->lock);
		j->spec.samples = NULL;
		job_free(j);
		return SB_ERR_NOMEM;
	}
	j->id = e->next_id++;
	sb_job_progress_init(&j->progress);
	j->next_in_table = e->jobs;
	e->jobs = j;
	if (j->pooled) {
		append(&e->pool_head, &e->pool_tail, j);
		wake_pool(e);
	} else {
		append(&w->head, &w->tail, j);
		pthread_cond_signal(&w->wake);
	}
	if (id)
		*id = j->id;
	pthread_mutex_unlock(&e->lock);
	return SB_OK;
}

sb_status sb_engine_progress(sb_engine *e, sb_job_id id, sb_job_progress *out)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	if (j)
		*out = j->progress;
	pthread_mutex_unlock(&e->lock);
	return j ? SB_OK : SB_ERR_INVALID;
}

sb_status sb_engine_cancel(sb_engine *e, sb_job_id id)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	if (j)
		atomic_store(&j->cancel, 1);
	/* one still waiting ends now, not when a device comes free */
	if (j && !j->ended && unqueue(e, j))
		end_unstarted(e, j);
	pthread_mutex_unlock(&e->lock);
	return j ? SB_OK : SB_ERR_INVALID;
}

sb_status sb_engine_wait(sb_engine *e, sb_job_id id, double timeout_s)
{
	const struct timespec until = deadline_in(timeout_s >= 0 ? timeout_s : 0);
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	sb_status st = j ? SB_OK : SB_ERR_INVALID;
	while (j && !j->ended) {
		if (timeout_s < 0)
			pthread_cond_wait(&j->done, &e->lock);
		else if (pthread_cond_timedwait(&j->done, &e->lock, &until) != 0)
			break;
	}
	if (j && !j->ended)
		st = SB_ERR_TIMEOUT;
	pthread_mutex_unlock(&e->lock);
	return st;
}

sb_status sb_engine_result(sb_engine *e, sb_job_id id, sb_job_result *out)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	sb_status st = SB_ERR_INVALID;
	if (j && j->ended) {
		sb_job_outcome_view(&j->result, out);
		st = SB_OK;
	}
	pthread_mutex_unlock(&e->lock);
	return st;
}

void sb_engine_release(sb_engine *e, sb_job_id id)
{
	pthread_mutex_lock(&e->lock);
	sb_job **pp = &e->jobs;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next_in_table;
	sb_job *j = *pp;
	if (j && !j->ended && unqueue(e, j)) {
		atomic_store(&j->cancel, 1);
		end_unstarted(e, j); /* and freed below */
	}
	if (j && !j->ended) {
		/* running: cancel it; its worker frees it when it ends */
		atomic_store(&j->cancel, 1);
		j->released = 1;
		pthread_mutex_unlock(&e->lock);
		return;
	}
	if (j)
		*pp = j->next_in_table;
	pthread_mutex_unlock(&e->lock);
	if (j)
		job_free(j);
}
