/* One file's work shared among the devices of a job (share.h): blocks made in order by the
 * model, tasks taken by free devices under the rate rule, backups, commits in order.
 *
 * Threads: each device's worker (the calling thread drives the first) only runs tasks; a host
 * thread makes the blocks ahead of them (one waiting task per device) and commits the
 * finished ones behind them, each without the lock, so a device goes from one task to the
 * next without waiting for the file's reading, blending or writing. Only the host thread calls
 * make() and commit(), so they never run at once. Where no host thread can be started, the
 * first device does that work itself between its tasks, alone. */
#include "models/share.h"

#include "core/pace.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct block block;
typedef struct worker worker;

typedef struct {
	block *blk;
	int index;            /* which task of the block */
	int taken, done;
	int runs;             /* devices running it now (2 with a backup) */
	worker *first;        /* the device that took it first */
	double started;       /* when it did */
	float *out;           /* the winning run's output */
} task;

struct block {
	void *u;              /* the model's block */
	int units;
	int n_tasks, n_done;
	int committed;        /* committed and out of the list, kept while a losing run of one of
	                         its tasks has not come back (free_block_if_idle) */
	task tasks[SB_SHARE_MAX_TASKS];
	block *next;
};

typedef struct {
	const sb_share_ops *ops;
	void *user;
	const sb_run_ctx *ctx;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* the devices wait on it */
	pthread_cond_t host_cond; /* the host thread waits on it */
	block *head, *tail;   /* made and not yet committed, in order */
	int n_blocks;
	int64_t units_total, units_done, units_untaken;
	long backups, backups_won;
	int generated_all;
	int host;             /* a host thread makes and commits (else the first worker does) */
	sb_status err;        /* a failure that ends the job (not a device's) */
	sb_status last_dev_err;
	char last_dev_why[512];
	int active;           /* workers still taking tasks */
	worker *w;
	int n_w;
} sched;

struct worker {
	sched *s;
	int dev;              /* index into ctx->dev */
	void *dstate;         /* the model's state for this device */
	long done;            /* units finished */
	double busy;
	double wait;          /* between the end of one run and the start of its next */
	double ran_until;     /* when its last run ended, 0 before its first */
	double per_task;      /* measured seconds per unit, 0 before the first (or kept from an
	                         earlier job: ctx->pace) */
	double kept;          /* its pace from earlier jobs (ctx->pace), 0 unknown */
	long runs;            /* runs begun, backups and lost ones included */
	double steady_busy;   /* seconds of its finished runs but the first it began */
	long steady_done;     /* their units */
	double lost_per;      /* the longest run it lost, seconds a unit: at least that slow */
	int declined;         /* the sharing rule left it out, said once */
	int leaving;
	pthread_t thread;
	int started;
	task *cur;            /* the task it runs now */
	double cur_since;     /* since when */
	atomic_int lost_race; /* another device finished cur first: stop */
	float *buf;           /* where its runs write (the winner's becomes the task's) */
	size_t buf_n;
};

/* Under the lock: something changed that the devices or the host thread wait for. */
static void wake(sched *s)
{
	pthread_cond_broadcast(&s->cond);
	if (s->host)
		pthread_cond_signal(&s->host_cond);
}

/* Under the lock: the file ends with st (its first failure is kept); runs going on elsewhere
 * stop at their next check, as a lost race's do, instead of finishing work nobody will use. */
static void fail(sched *s, sb_status st)
{
	if (s->err != SB_OK)
		return;
	s->err = st;
	for (int i = 0; i < s->n_w; i++)
		if (s->w[i].cur)
			atomic_store(&s->w[i].lost_race, 1);
}

/* Under the lock: the model's next block, made without it (the lock is held again on
 * return). 0 when none (or on failure: s->err). */
static int make_block(sched *s)
{
	int n_tasks = 0, units = 0;
	sb_status st = SB_OK;
	pthread_mutex_unlock(&s->lock);
	void *u = s->ops->make(s->user, &n_tasks, &units, &st);
	pthread_mutex_lock(&s->lock);
	if (!u) {
		if (st != SB_OK)
			fail(s, st);
		else
			s->generated_all = 1;
		return 0;
	}
	block *b = calloc(1, sizeof *b);
	if (!b || n_tasks < 1 || n_tasks > SB_SHARE_MAX_TASKS) {
		s->ops->free_block(s->user, u);
		free(b);
		fail(s, b ? SB_ERR_INVALID : SB_ERR_NOMEM);
		return 0;
	}
	b->u = u;
	b->units = units;
	b->n_tasks = n_tasks;
	for (int t = 0; t < n_tasks; t++) {
		b->tasks[t].blk = b;
		b->tasks[t].index = t;
	}
	if (s->tail)
		s->tail->next = b;
	else
		s->head = b;
	s->tail = b;
	s->n_blocks++;
	return 1;
}

/* Under the lock: tasks made and not taken. */
static int untaken(const sched *s)
{
	int n = 0;
	for (const block *b = s->head; b; b = b->next)
		for (int t = 0; t < b->n_tasks; t++)
			n += !b->tasks[t].taken;
	return n;
}

/* Under the lock: whether another block may be made (memory allows, the file is not done) */
static int can_make(const sched *s)
{
	return !s->generated_all && s->err == SB_OK && s->n_blocks < SB_SHARE_MAX_BLOCKS;
}

/* Under the lock: the next task nobody has; without a host thread, blocks are made here as
 * they are needed. */
static task *next_task(sched *s)
{
	for (;;) {
		for (block *b = s->head; b; b = b->next)
			for (int t = 0; t < b->n_tasks; t++)
				if (!b->tasks[t].taken)
					return &b->tasks[t];
		if (s->host || !can_make(s) || !make_block(s))
			return NULL;
	}
}

static void block_free(sched *s, block *b)
{
	for (int t = 0; t < b->n_tasks; t++)
		free(b->tasks[t].out);
	s->ops->free_block(s->user, b->u);
	free(b);
}

/* Under the lock: frees a committed block unless a run of one of its tasks is still going
 * (the loser of a backup race, stopping): that run frees it when it comes back. */
static void free_block_if_idle(sched *s, block *b)
{
	if (!b->committed)
		return;
	for (int t = 0; t < b->n_tasks; t++)
		if (b->tasks[t].runs > 0)
			return;
	block_free(s, b);
}

/* Under the lock: whether the block at the head is finished, to be committed */
static int head_done(const sched *s)
{
	return s->head && s->head->n_done == s->head->n_tasks;
}

/* Under the lock: the finished block at the head to the model, without the lock (its outputs
 * no longer change; the lock is held again on return). Out of the list first, so that no
 * device looks at it meanwhile; freed after, unless a losing run of it is still going. */
static sb_status commit_head(sched *s)
{
	block *b = s->head;
	float *outs[SB_SHARE_MAX_TASKS];
	for (int t = 0; t < b->n_tasks; t++)
		outs[t] = b->tasks[t].out;
	s->head = b->next;
	if (!s->head)
		s->tail = NULL;
	s->n_blocks--;
	pthread_mutex_unlock(&s->lock);
	const sb_status st = s->ops->commit(s->user, b->u, outs);
	pthread_mutex_lock(&s->lock);
	b->committed = 1;
	free_block_if_idle(s, b);
	return st;
}

/* Under the lock: the finished blocks at the head, in order, to the model. */
static sb_status commit(sched *s)
{
	while (head_done(s)) {
		const sb_status st = commit_head(s);
		if (st != SB_OK)
			return st;
	}
	return SB_OK;
}

static void report(sched *s, worker *w, sb_status dropped, const char *why)
{
	const sb_run_ctx *ctx = s->ctx;
	if (ctx && !ctx->device_report && dropped != SB_OK)
		sb_log(ctx->log, SB_LOG_WARNING, "%s", why); /* no runner to record it */
	if (!ctx || !ctx->device_report)
		return;
	sb_device_report r = {w->dev, w->done, (long)s->units_total, w->busy, w->wait, dropped, why};
	ctx->device_report(ctx->progress_user, &r);
}

static int device_failure(sb_status st)
{
	return st == SB_ERR_DEVICE || st == SB_ERR_DEVICE_LOST || st == SB_ERR_DEVICE_OOM;
}

/* a device's failure in words, after its name */
static const char *failed_how(sb_status st)
{
	return st == SB_ERR_DEVICE_LOST ? "was lost" : st == SB_ERR_DEVICE_OOM ? "ran out of memory"
	                                                                     : "failed";
}

/* Under the lock: whether the file has ended (a cancel ends it here), for a device's thread
 * and the host's alike */
static int ended(sched *s)
{
	const atomic_int *cancel = s->ctx->cancel;
	if (cancel && atomic_load(cancel))
		fail(s, SB_ERR_CANCELLED);
	return s->err != SB_OK;
}

/* Runs one task on the worker's device into the worker's buffer. */
static sb_status run_task(worker *w, task *t)
{
	sched *s = w->s;
	return s->ops->run(s->user, w->dev, &w->dstate, t->blk->u, t->index, w->buf, &w->lost_race);
}

/* Under the lock: a task to run again because w, idle, would finish it before the device
 * running it (whose rate is unknown, or slower): the oldest such. NULL when none. */
static task *backup_task(sched *s, worker *w)
{
	if (!(w->per_task > 0))
		return NULL; /* no rate of its own yet to compare */
	const double now = sb_now();
	for (block *b = s->head; b; b = b->next)
		for (int i = 0; i < b->n_tasks; i++) {
			task *t = &b->tasks[i];
			if (!t->taken || t->done || t->runs != 1 || t->first == w)
				continue;
			const worker *o = t->first;
			const double theirs = o->per_task > 0 ? t->started + o->per_task * b->units : INFINITY;
			if (now + w->per_task * b->units < theirs)
				return t;
		}
	return NULL;
}

/* Runs t on w without the lock; what it returns, with the lock held again. */
static sb_status run_unlocked(sched *s, worker *w, task *t, double *dt)
{
	const size_t need = s->ops->out_floats(s->user, t->blk->u, t->index);
	if (w->buf_n < need) {
		free(w->buf);
		w->buf = malloc(sizeof(float) * need);
		w->buf_n = w->buf ? need : 0;
	}
	w->cur = t;
	w->runs++;
	w->cur_since = sb_now();
	if (w->ran_until > 0)
		w->wait += w->cur_since - w->ran_until;
	atomic_store(&w->lost_race, 0);
	pthread_mutex_unlock(&s->lock);
	const double t0 = w->cur_since;
	sb_status st = w->buf ? run_task(w, t) : SB_ERR_NOMEM;
	*dt = sb_now() - t0;
	pthread_mutex_lock(&s->lock);
	w->ran_until = t0 + *dt;
	w->cur = NULL;
	t->runs--;
	return st;
}

/* Under the lock: t finished on w first. w's buffer becomes the task's output (w makes another
 * for its next run), the other run (a backup's or the first's) is told to stop. */
static void won(sched *s, worker *w, task *t)
{
	assert(!t->out); /* a task is won once */
	t->out = w->buf;
	w->buf = NULL;
	w->buf_n = 0;
	t->done = 1;
	for (int i = 0; i < s->n_w; i++)
		if (&s->w[i] != w && s->w[i].cur == t)
			atomic_store(&s->w[i].lost_race, 1);
}

/* Under the lock: t's first result, from w after dt seconds: it becomes the task's, the
 * device's rate counts it, finished blocks go to the sink, the progress moves. */
static void finished(sched *s, worker *w, task *t, double dt)
{
	const sb_run_ctx *ctx = s->ctx;
	won(s, w, t);
	t->blk->n_done++;
	if (w->runs > 1) { /* the first run a device begins pays its kernel builds and weights */
		w->steady_busy += dt;
		w->steady_done += t->blk->units;
	}
	w->done += t->blk->units;
	w->busy += dt;
	/* its pace: past its first run once it has one; until then a kept pace stands, else the
	 * first run's (kernel builds and all: slower than it will be) */
	if (w->steady_done > 0)
		w->per_task = w->steady_busy / (double)w->steady_done;
	else if (!(w->kept > 0))
		w->per_task = w->busy / (double)w->done;
	s->units_done += t->blk->units;
	const sb_status st = s->host ? SB_OK : commit(s);
	if (st != SB_OK)
		fail(s, st);
	if (ctx->progress)
		ctx->progress(ctx->progress_user, (double)s->units_done / (double)s->units_total,
		              "separating");
	report(s, w, SB_OK, NULL);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	sched *s = w->s;
	const sb_run_ctx *ctx = s->ctx;
	const sb_device *props = ctx->dev[w->dev].props;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (ended(s))
			break;
		task *t = next_task(s);
		if (!t && s->host && can_make(s)) {
			pthread_cond_signal(&s->host_cond); /* the host thread makes the next block */
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		if (!t) {
			task *bt = s->err == SB_OK ? backup_task(s, w) : NULL;
			if (bt) {
				bt->runs++;
				s->backups++;
				sb_log(ctx->log, SB_LOG_INFO, "%s runs again a %s %s is still on",
				       props->label, s->ops->unit, ctx->dev[bt->first->dev].props->label);
				double dt = 0;
				sb_status st = run_unlocked(s, w, bt, &dt);
				if (st == SB_OK && !bt->done) {
					s->backups_won++;
					finished(s, w, bt, dt);
				} else {
					/* a failed or lost backup changes nothing for the file: the first run
					 * goes on */
					free_block_if_idle(s, bt->blk);
					if (device_failure(st) && s->n_w > 1) {
						snprintf(s->last_dev_why, sizeof s->last_dev_why, "%s %s: the other "
						         "devices finish the file", props->label, failed_how(st));
						report(s, w, st, s->last_dev_why);
						wake(s);
						break;
					}
				}
				wake(s);
				continue;
			}
			if (s->generated_all || s->err != SB_OK) {
				/* nothing to take or back up; a run still going elsewhere ends the file */
				break;
			}
			pthread_cond_wait(&s->cond, &s->lock); /* blocks in flight: wait for a commit */
			continue;
		}
		/* the tail: leave what is left to the others when, by the sharing rule (pace.h), they
		 * would finish it sooner than this device would finish one more task */
		if (s->active > 1) {
			sb_pace_other others[SB_SHARE_MAX_DEVS];
			int n = 0;
			const double now = sb_now();
			for (int i = 0; i < s->n_w && n < SB_SHARE_MAX_DEVS; i++) {
				const worker *o = &s->w[i];
				if (o != w && !o->leaving)
					others[n++] = (sb_pace_other){
						o->per_task, o->cur ? sb_pace_left(o->per_task, o->cur->blk->units,
						                                   now - o->cur_since) : 0};
			}
			if (!sb_pace_take(w->per_task, t->blk->units, others, n,
			                  (double)s->units_untaken)) {
				/* it waits rather than leaves: a device that fails hands its work back, and
				 * with fewer others the rule may give this one work again */
				if (!w->declined)
					sb_log(ctx->log, SB_LOG_INFO, "%s leaves %lld %ss to the faster devices "
					       "(%.2f s a %s %s)", props->label, (long long)s->units_untaken,
					       s->ops->unit, w->per_task, s->ops->unit,
					       w->runs ? "here" : "from an earlier job");
				w->declined = 1;
				/* woken by every change; and looks again now and then, as a device that is
				 * stuck on its piece counts as slower the longer it runs (core/pace.h) */
				const struct timespec until = sb_deadline(CLOCK_REALTIME, 100);
				pthread_cond_timedwait(&s->cond, &s->lock, &until);
				continue;
			}
		}
		t->taken = 1;
		t->runs = 1;
		t->first = w;
		t->started = sb_now();
		s->units_untaken -= t->blk->units;
		if (s->host)
			pthread_cond_signal(&s->host_cond); /* it reads the next one meanwhile */
		double dt = 0;
		sb_status st = run_unlocked(s, w, t, &dt);
		if (t->done) {
			/* a backup finished it first: this run's result (or its stop) is thrown away;
			 * its time still says how slow this device is */
			const double per = dt / t->blk->units;
			if (w->per_task < per && w->done == 0)
				w->per_task = per;
			if (w->lost_per < per)
				w->lost_per = per;
			free_block_if_idle(s, t->blk);
			if (device_failure(st) && s->n_w > 1) {
				report(s, w, st, "failed on work another device had already finished");
				break;
			}
			wake(s);
			continue;
		}
		if (st == SB_OK) {
			finished(s, w, t, dt);
			wake(s);
			continue;
		}
		if (device_failure(st) && s->n_w > 1) {
			/* hand the task back to the others (unless a backup runs it) and stop taking
			 * work */
			if (t->runs == 0) {
				t->taken = 0;
				s->units_untaken += t->blk->units;
			}
			snprintf(s->last_dev_why, sizeof s->last_dev_why, "%s %s: its %s went to the "
			         "other devices", props->label, failed_how(st), s->ops->unit);
			s->last_dev_err = st;
			report(s, w, st, s->last_dev_why); /* the job runner logs and records it */
			wake(s);
			break;
		}
		/* a device's failure first is what the runner's fallback to the CPU reads; one
		 * after another failure (a cancel, a full disk) changes nothing */
		if (device_failure(st))
			s->last_dev_err = st;
		fail(s, st);
		wake(s);
		break;
	}
	w->leaving = 1;
	s->active--;
	wake(s);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* The host thread: a block made ahead for each device still taking work that has none
 * waiting, the finished blocks committed behind them, until every device has stopped. */
static void *host_main(void *arg)
{
	sched *s = arg;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (ended(s))
			break;
		if (can_make(s) && untaken(s) < s->active) {
			make_block(s);
		} else if (head_done(s)) {
			const sb_status st = commit_head(s);
			if (st != SB_OK)
				fail(s, st);
		} else if (s->active == 0) {
			break;
		} else {
			pthread_cond_wait(&s->host_cond, &s->lock);
			continue;
		}
		pthread_cond_broadcast(&s->cond);
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

sb_status sb_share_run(const sb_share_ops *ops, void *user, const sb_run_ctx *ctx,
                       int64_t units_total)
{
	const sb_logger *log = ctx ? ctx->log : NULL;
	if (!ctx || ctx->n_dev < 1 || ctx->n_dev > SB_SHARE_MAX_DEVS) {
		sb_log(log, SB_LOG_ERROR, "%s: no device to run on", ops->who);
		return SB_ERR_INVALID;
	}
	sb_status st = SB_OK;
	sched s;
	memset(&s, 0, sizeof s);
	worker w[SB_SHARE_MAX_DEVS];
	memset(w, 0, sizeof w);
	s.ops = ops;
	s.user = user;
	s.ctx = ctx;
	s.w = w;
	s.n_w = ctx->n_dev;
	s.units_total = units_total;
	s.units_untaken = units_total;
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	pthread_cond_init(&s.host_cond, NULL);
	for (int i = 0; i < s.n_w; i++) {
		w[i].s = &s;
		w[i].dev = i;
		/* a pace from earlier jobs: the rule's start until this job measures one */
		if (ctx->pace && s.n_w > 1 && ctx->pace[i].kept > 0)
			w[i].per_task = w[i].kept = ctx->pace[i].kept;
	}
	if (s.n_w > 1) {
		/* a CPU behind a GPU API computes on the same cores as the native CPU: the rate rule
		 * cannot see that each of its units slows the CPU's */
		int native = 0, cpu_behind = -1;
		for (int i = 0; i < s.n_w; i++) {
			const sb_device *dp = ctx->dev[i].props;
			native |= dp && dp->type == SB_DEV_CPU_NATIVE;
			if (dp && dp->type == SB_DEV_OPENCL_CPU && cpu_behind < 0)
				cpu_behind = i;
		}
		if (native && cpu_behind >= 0)
			sb_log(log, SB_LOG_WARNING, "%s runs on the same processor as the CPU device: "
			       "sharing a file between them gains nothing over the CPU alone",
			       ctx->dev[cpu_behind].props->label);
	}
	s.active = s.n_w;
	pthread_t host;
	s.host = pthread_create(&host, NULL, host_main, &s) == 0;
	if (!s.host && s.n_w > 1) {
		/* the first device alone makes and commits between its tasks, as no other thread
		 * could do either at the same time */
		sb_log(log, SB_LOG_WARNING, "%s: no thread for the file's reading and writing; %s "
		       "runs alone", ops->who, ctx->dev[0].props->label);
		for (int i = 1; i < s.n_w; i++)
			w[i].leaving = 1;
		s.active = 1;
	}
	for (int i = 1; i < s.n_w && s.host; i++) {
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) == 0) {
			w[i].started = 1;
		} else {
			pthread_mutex_lock(&s.lock);
			s.active--;
			w[i].leaving = 1;
			wake(&s); /* a device waiting beside it may take its share now */
			pthread_mutex_unlock(&s.lock);
			sb_log(log, SB_LOG_WARNING, "%s: no thread for %s; it sits this one out", ops->who,
			       ctx->dev[i].props->label);
		}
	}
	worker_main(&w[0]);
	for (int i = 1; i < s.n_w; i++)
		if (w[i].started)
			pthread_join(w[i].thread, NULL);
	if (s.host)
		pthread_join(host, NULL);
	/* every device that was left stopped: say why the file is not done */
	pthread_mutex_lock(&s.lock);
	if (s.backups > 0)
		sb_log(log, SB_LOG_INFO, "%s: %ld task%s run again on a device that had nothing left, "
		       "%ld finished first there", ops->who, s.backups, s.backups == 1 ? "" : "s",
		       s.backups_won);
	st = s.err;
	/* what each device measured past its first run (a run it lost: at least that slow) */
	for (int i = 0; ctx->pace && s.n_w > 1 && i < s.n_w; i++) {
		const worker *v = &w[i];
		sb_pace_entry *e = &ctx->pace[i];
		e->runs = v->runs;
		e->declined = v->declined;
		/* past its first run; else its first run's, slower than it will be, where nothing
		 * better is kept; a run it lost: at least that slow */
		e->measured = v->steady_done > 0 ? v->steady_busy / (double)v->steady_done
		              : v->done > 0      ? (v->kept > 0 ? 0 : v->busy / (double)v->done)
		              : v->lost_per > 0  ? fmax(v->lost_per, v->kept) : 0;
	}
	if (st == SB_OK && s.units_done < s.units_total)
		st = s.last_dev_err != SB_OK ? s.last_dev_err : SB_ERR_DEVICE;
	pthread_mutex_unlock(&s.lock);
	while (s.head) {
		block *b = s.head;
		s.head = b->next;
		block_free(&s, b);
	}
	for (int i = 0; i < s.n_w; i++) {
		if (w[i].dstate)
			ops->release(user, i, w[i].dstate);
		free(w[i].buf);
	}
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	pthread_cond_destroy(&s.host_cond);
	return st;
}
