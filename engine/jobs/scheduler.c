/* The engine's scheduler (engine_internal.h; README.md: scheduling): one worker thread per
 * device set in use, each with a FIFO of jobs, and in parallel mode the engine's pool, which the
 * devices of a job's set take from as they come free (the sharing rule of core/pace.h). Every
 * function here runs under e->lock unless it says otherwise; a job runs without it. */
#include "jobs/engine_internal.h"

#include "core/pace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sb_sched_release_input(sb_job *j)
{
	if (!j->input_released && j->spec.samples && j->spec.input_free)
		j->spec.input_free(j->spec.input_user, j->spec.samples);
	j->input_released = 1;
}

void sb_sched_job_free(sb_job *j)
{
	sb_sched_release_input(j);
	for (size_t i = 0; i < sizeof j->strings / sizeof j->strings[0]; i++)
		free(j->strings[i]);
	pthread_cond_destroy(&j->done);
	free(j);
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
	sb_sched_job_free(j);
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

/* A job that overlaps another (overlapped()) holds its devices, in the order its worker took
 * them, only from its input's reading to its separation's end (job_run.h: sb_job_env.hold). */
typedef struct {
	sb_worker *w;
	sb_job *j;
	unsigned long ticket;
	uint64_t held;             /* the devices it locked */
	int holding, had_turn;
	double t0;                 /* when it got them */
} job_hold;

static void hold_devices(void *user)
{
	job_hold *h = user;
	sb_engine *e = h->w->e;
	pthread_mutex_lock(&e->lock);
	while (h->w->turn != h->ticket)
		pthread_cond_wait(&h->w->turned, &e->lock);
	pthread_mutex_unlock(&e->lock);
	h->had_turn = 1;
	h->held = sb_slots_lock(e, h->w, &h->j->set);
	h->holding = 1;
	h->t0 = sb_now();
}

/* the next job's turn, once this one has had its own (one that ended before it held any waits
 * for it too) */
static void pass_turn(job_hold *h)
{
	sb_engine *e = h->w->e;
	pthread_mutex_lock(&e->lock);
	while (!h->had_turn && h->w->turn != h->ticket)
		pthread_cond_wait(&h->w->turned, &e->lock);
	h->had_turn = 1;
	h->w->turn++;
	pthread_cond_broadcast(&h->w->turned);
	pthread_mutex_unlock(&e->lock);
}

static void let_devices_go(void *user)
{
	job_hold *h = user;
	sb_engine *e = h->w->e;
	const int kept = sb_model_cache_holds(h->w->keep);
	pthread_mutex_lock(&e->lock);
	h->w->kept_mask = kept ? sb_slots_mask(e, &h->j->set) : 0;
	pthread_mutex_unlock(&e->lock);
	sb_slots_unlock(e, h->held);
	h->holding = 0;
	pass_turn(h);
}

/* runs j on the calling thread (w's own, or a job thread's for an overlapped job: h); its status
 * (j itself may be gone once it has ended), and in *ran the seconds it ran once its devices were
 * free (the pace counts no wait for another's job) */
static sb_status run_job(sb_worker *w, sb_job *j, job_hold *h, double *ran)
{
	sb_engine *e = w->e;
	/* the job's shared devices, locked in table order (the CPU is each job's own): for the
	 * whole job, or for its device stage only */
	const uint64_t held = h ? 0 : sb_slots_lock(e, w, &j->set);
	const double t0 = sb_now();
	progress_target t = {e, j};
	job_devices jd = {e, {{0}}, 0, j->spec.bf16, 0, sb_slots_other_gpus(e, &j->set)};
	const sb_device_access access = {e->devices, sb_slots_open, &jd, &jd.gpus};
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
		.choice = &j->choice,
		.keep = w->keep,
		.hold = h ? hold_devices : NULL,
		.let_go = h ? let_devices_go : NULL,
		.hold_user = h,
	};
	sb_job_outcome *r = malloc(sizeof *r);
	if (r)
		sb_job_run(&j->spec, &env, r);
	*ran = sb_now() - (h && h->t0 > 0 ? h->t0 : t0);
	for (int i = 0; i < jd.n_own; i++)
		sb_exec_close(&jd.own[i]);
	if (h) {
		if (h->holding) /* the runner lets go itself; this is for a path that did not */
			let_devices_go(h);
		else if (!h->had_turn)
			pass_turn(h);
	} else {
		const int kept = sb_model_cache_holds(w->keep);
		pthread_mutex_lock(&e->lock);
		w->kept_mask = kept ? sb_slots_mask(e, &j->set) : 0;
		pthread_mutex_unlock(&e->lock);
		sb_slots_unlock(e, held);
	}
	/* The samples are no longer needed: give them back before the job is seen to end (once it
	 * has, its owner may release and free it at any moment). */
	sb_sched_release_input(j);
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
void sb_sched_append(sb_job **head, sb_job **tail, sb_job *j)
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
	sb_worker *sw = n_idle ? sb_sched_worker_for(e, &j->set) : NULL;
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
	sb_sched_append(&sw->head, &sw->tail, j);
	pthread_cond_signal(&sw->wake);
	return NULL;
}

/* the CLOCK_REALTIME time s seconds from now, for pthread_cond_timedwait */
struct timespec sb_sched_deadline(double s)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	const double at = (double)t.tv_sec + t.tv_nsec * 1e-9 + s;
	t.tv_sec = (time_t)at;
	t.tv_nsec = (long)((at - (double)t.tv_sec) * 1e9);
	return t;
}

/* Under e->lock: every device of the set looks at the pool again */
void sb_sched_wake_pool(sb_engine *e)
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
int sb_sched_unqueue(sb_engine *e, sb_job *j)
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
void sb_sched_end_unstarted(sb_engine *e, sb_job *j)
{
	j->result.status = SB_ERR_CANCELLED;
	snprintf(j->result.message, sizeof j->result.message, "cancelled before it started");
	j->progress.state = SB_JOB_CANCELLED;
	j->progress.stage = "cancelled";
	j->ended = 1;
	pthread_cond_broadcast(&j->done);
	end_lending(e, j->id);
}

/* Under e->lock: whether j, the next of w's own queue, may run beside the job w runs now: a job
 * of parallel mode on a set with a GPU (on the CPU its reading and writing would take the
 * cores the separation computes on), not one dealt out of the pool (those run alone, and set
 * a device's pace), nor one asked to run in turn (one job at a time, the low-memory choice) */
static int overlapped(const sb_engine *e, const sb_job *j)
{
	return e->opts.mode == SB_MODE_PARALLEL && !j->pooled && !j->spec.in_turn &&
	       sb_slots_mask(e, &j->set) != 0;
}

typedef struct {
	sb_worker *w;
	sb_job *j;
	job_hold h;
} job_thread;

/* an overlapped job on a thread of its own (worker_main) */
static void *job_thread_main(void *arg)
{
	job_thread *t = arg;
	sb_worker *w = t->w;
	sb_engine *e = w->e;
	const sb_job_id id = t->j->id;
	double ran = 0;
	run_job(w, t->j, &t->h, &ran);
	pthread_mutex_lock(&e->lock);
	if (!--w->in_flight)
		w->busy_since = 0;
	end_lending(e, id);
	pthread_cond_broadcast(&w->wake);
	if (e->pool_head)
		sb_sched_wake_pool(e);
	pthread_mutex_unlock(&e->lock);
	free(t);
	return NULL;
}

/* Under e->lock: j started on a job thread of w's; 0 when no thread could be started (w runs
 * it itself) */
static int start_job_thread(sb_worker *w, sb_job *j)
{
	job_thread *t = calloc(1, sizeof *t);
	if (!t)
		return 0;
	*t = (job_thread){w, j, {w, j, w->tickets, 0, 0, 0, 0}};
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	const int ok = pthread_create(&th, &a, job_thread_main, t) == 0;
	pthread_attr_destroy(&a);
	if (!ok) {
		free(t);
		return 0;
	}
	w->tickets++;
	w->in_flight++;
	return 1;
}

static void *worker_main(void *arg)
{
	sb_worker *w = arg;
	sb_engine *e = w->e;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		/* while its jobs run on job threads it takes only the next of its own queue that may
		 * run beside them, one at a time ahead */
		if (w->in_flight &&
		    (w->in_flight >= 2 || !w->head || !overlapped(e, w->head) || e->paused)) {
			pthread_cond_wait(&w->wake, &e->lock);
			continue;
		}
		sb_job *j;
		while (!(j = next_job(e, w)) && !e->stopping) {
			if (w->pool && e->pool_head && !w->lent_to) {
				/* it left a pooled job to a faster device: look again as time goes by */
				const struct timespec until = sb_sched_deadline(0.2);
				pthread_cond_timedwait(&w->wake, &e->lock, &until);
			} else {
				pthread_cond_wait(&w->wake, &e->lock);
			}
		}
		if (!j) {
			while (w->in_flight) /* its job threads end before it does */
				pthread_cond_wait(&w->wake, &e->lock);
			break;
		}
		if (atomic_load(&j->cancel)) {
			sb_sched_end_unstarted(e, j);
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
		if (overlapped(e, j) && start_job_thread(w, j))
			continue; /* busy until its job threads have ended */
		pthread_mutex_unlock(&e->lock);
		double ran = 0;
		const sb_status st = run_job(w, j, NULL, &ran);
		pthread_mutex_lock(&e->lock);
		w->busy_since = 0;
		/* a pooled job that ran to its end on this device alone sets the device's pace */
		if (pooled && n_used == 1 && st == SB_OK) {
			w->ran_s += ran;
			w->audio_s += units;
		}
		end_lending(e, id);
		if (e->pool_head)
			sb_sched_wake_pool(e);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Under e->lock. The worker for a device set (parallel) or the one worker (sequential). */
sb_worker *sb_sched_worker_for(sb_engine *e, const sb_device_set *set)
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
	w->keep = sb_model_cache_new();
	pthread_cond_init(&w->wake, NULL);
	pthread_cond_init(&w->turned, NULL);
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
		pthread_cond_destroy(&w->wake);
		pthread_cond_destroy(&w->turned);
		sb_model_cache_free(w->keep);
		free(w);
		sb_log(&e->opts.log, SB_LOG_ERROR, "cannot start a worker thread");
		return NULL;
	}
	w->started = 1;
	w->next = e->workers;
	e->workers = w;
	return w;
}

