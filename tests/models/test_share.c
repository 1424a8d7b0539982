/* A file's work shared among devices (models/share.h) with a stand-in model whose blocks and
 * devices the test controls, on what a user of a fast GPU would notice:
 *   overlap  a device (one, then two) never waits for the file's reading and writing: the
 *            next block is read while a device runs one, and a finished block is written
 *            while the next runs (each side waits up to 10 s for the other; in turn, they
 *            would wait out the 10 s and fail)
 *   order    two devices, two tasks a block: every block committed once, in order, with the
 *            outputs of its own tasks, whoever ran them
 *   diskfull a commit failing (the disk full) ends the file with that error: nothing after it
 *            is committed, nothing hangs
 *   badread  reading the input failing ends the file with that error
 *   cancel   a cancel during a run ends the file with SB_ERR_CANCELLED
 *   lost     a device lost mid-file: the other finishes it, every block committed in order
 *   benched  a device whose kept pace is under a sixth of the other's (core/pace.h) runs
 *            nothing beside it, and says so in its measured pace; when the fast one is lost
 *            mid-file, the benched one takes the file over
 * Run: test_share CASE */
#include "../check.h"
#include "models/share.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OUT_N = 64, MAX_BLOCKS = 64 };

typedef struct {
	int n_blocks, n_tasks;
	int overlap;           /* make and commit each wait for the device to be busy */
	int fail_commit_at;    /* -1: never */
	int fail_make_at;      /* -1: never */
	int lose_dev;          /* -1: none; else its runs fail from its second on */
	int cancel_at;         /* -1: never; else the run of this block sets the cancel flag */
	atomic_int *cancel;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int made, started, committed;
	int committed_ids[MAX_BLOCKS];
	int dev_runs[SB_SHARE_MAX_DEVS];
	int timeouts;
	char why[256];
} fake;

typedef struct {
	int id;
} fblock;

/* under f->lock: waits until cond() holds or 10 s pass; 0 on a timeout */
static int wait_for(fake *f, int (*cond)(const fake *, int), int arg)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	while (!cond(f, arg))
		if (pthread_cond_timedwait(&f->cond, &f->lock, &until) != 0)
			return cond(f, arg);
	return 1;
}

static int runs_started(const fake *f, int n) { return f->started >= n; }
static int blocks_made(const fake *f, int n) { return f->made >= n; }

static void *f_make(void *user, int *n_tasks, int *units, sb_status *st)
{
	fake *f = user;
	pthread_mutex_lock(&f->lock);
	const int id = f->made;
	pthread_mutex_unlock(&f->lock);
	if (id >= f->n_blocks)
		return NULL;
	if (id == f->fail_make_at) {
		*st = SB_ERR_FORMAT;
		return NULL;
	}
	fblock *b = malloc(sizeof *b);
	if (!b) {
		*st = SB_ERR_NOMEM;
		return NULL;
	}
	b->id = id;
	*n_tasks = f->n_tasks;
	*units = 1;
	pthread_mutex_lock(&f->lock);
	f->made++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return b;
}

static size_t f_out_floats(void *user, const void *blk, int t)
{
	(void)user;
	(void)blk;
	(void)t;
	return OUT_N;
}

static sb_status f_run(void *user, int dev, void **dstate, const void *blk, int t, float *out,
                       const atomic_int *lost)
{
	(void)lost;
	fake *f = user;
	const fblock *b = blk;
	if (!*dstate)
		*dstate = malloc(1);
	pthread_mutex_lock(&f->lock);
	f->started++;
	const int nth = ++f->dev_runs[dev];
	pthread_cond_broadcast(&f->cond);
	/* the next block is read while this one runs */
	if (f->overlap && b->id + 1 < f->n_blocks && !wait_for(f, blocks_made, b->id + 2)) {
		f->timeouts++;
		snprintf(f->why, sizeof f->why, "block %d was read only after block %d had run",
		         b->id + 1, b->id);
	}
	pthread_mutex_unlock(&f->lock);
	if (dev == f->lose_dev && nth > 1)
		return SB_ERR_DEVICE_LOST;
	if (b->id == f->cancel_at) {
		atomic_store(f->cancel, 1);
		return SB_ERR_CANCELLED;
	}
	struct timespec ts = {0, 2000000}; /* 2 ms of "work" */
	nanosleep(&ts, NULL);
	for (int i = 0; i < OUT_N; i++)
		out[i] = (float)(b->id * 100 + t * 10) + (float)i / OUT_N;
	return SB_OK;
}

static sb_status f_commit(void *user, const void *blk, float *const *outs)
{
	fake *f = user;
	const fblock *b = blk;
	for (int t = 0; t < f->n_tasks; t++)
		for (int i = 0; i < OUT_N; i++)
			if (outs[t][i] != (float)(b->id * 100 + t * 10) + (float)i / OUT_N) {
				CHECK(0, "block %d task %d: output %d is %g", b->id, t, i, outs[t][i]);
				break;
			}
	if (b->id == f->fail_commit_at)
		return SB_ERR_NOSPACE;
	pthread_mutex_lock(&f->lock);
	/* the block is written while the device runs the next one */
	if (f->overlap && b->id + 1 < f->n_blocks && !wait_for(f, runs_started, b->id + 2)) {
		f->timeouts++;
		snprintf(f->why, sizeof f->why, "block %d was written before block %d started",
		         b->id, b->id + 1);
	}
	if (f->committed < MAX_BLOCKS)
		f->committed_ids[f->committed] = b->id;
	f->committed++;
	pthread_mutex_unlock(&f->lock);
	return SB_OK;
}

static void f_free_block(void *user, void *blk)
{
	(void)user;
	free(blk);
}

static void f_release(void *user, int dev, void *dstate)
{
	(void)user;
	(void)dev;
	free(dstate);
}

static const sb_share_ops ops = {"test", "block", f_make, f_out_floats, f_run, f_commit,
                                 f_free_block, f_release};

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	fprintf(stderr, "  log: %s\n", msg);
}

static sb_status run_paced(fake *f, int n_dev, sb_pace_entry *pace)
{
	static sb_device props[SB_SHARE_MAX_DEVS];
	sb_exec dev[SB_SHARE_MAX_DEVS];
	memset(dev, 0, sizeof dev);
	for (int i = 0; i < n_dev; i++) {
		snprintf(props[i].label, sizeof props[i].label, "device %d", i);
		props[i].type = SB_DEV_GPU_DISCRETE;
		dev[i].props = &props[i];
	}
	const sb_logger log = {log_fn, NULL};
	static atomic_int cancel;
	atomic_store(&cancel, 0);
	f->cancel = &cancel;
	const sb_run_ctx ctx = {.log = &log, .cancel = &cancel, .dev = dev, .n_dev = n_dev,
	                        .pace = pace};
	return sb_share_run(&ops, f, &ctx, (int64_t)f->n_blocks * f->n_tasks); /* a unit a task */
}

static sb_status run(fake *f, int n_dev)
{
	return run_paced(f, n_dev, NULL);
}

static void fake_init(fake *f, int n_blocks, int n_tasks)
{
	memset(f, 0, sizeof *f);
	f->n_blocks = n_blocks;
	f->n_tasks = n_tasks;
	f->fail_commit_at = f->fail_make_at = f->lose_dev = f->cancel_at = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
}

static void check_in_order(const fake *f, int n)
{
	CHECK(f->committed == n, "%d blocks committed of %d", f->committed, n);
	for (int i = 0; i < f->committed && i < MAX_BLOCKS; i++)
		CHECK(f->committed_ids[i] == i, "commit %d was block %d", i, f->committed_ids[i]);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	fake f;
	sb_status st;
	if (!strcmp(c, "overlap")) {
		for (int n_dev = 1; n_dev <= 2; n_dev++) {
			fake_init(&f, 6 * n_dev, 1);
			f.overlap = 1;
			st = run(&f, n_dev);
			CHECK(st == SB_OK, "%d device(s): status %s", n_dev, sb_status_str(st));
			CHECK(f.timeouts == 0, "%d device(s) waited for the host %d times: %s", n_dev,
			      f.timeouts, f.why);
			check_in_order(&f, 6 * n_dev);
		}
	} else if (!strcmp(c, "order")) {
		fake_init(&f, 24, 2);
		st = run(&f, 2);
		CHECK(st == SB_OK, "status %s", sb_status_str(st));
		check_in_order(&f, 24);
		CHECK(f.dev_runs[0] + f.dev_runs[1] >= 48, "%d + %d runs for 48 tasks", f.dev_runs[0],
		      f.dev_runs[1]);
	} else if (!strcmp(c, "diskfull")) {
		fake_init(&f, 10, 1);
		f.fail_commit_at = 3;
		st = run(&f, 2);
		CHECK(st == SB_ERR_NOSPACE, "status %s, not the disk's", sb_status_str(st));
		check_in_order(&f, 3);
	} else if (!strcmp(c, "badread")) {
		fake_init(&f, 10, 1);
		f.fail_make_at = 4;
		st = run(&f, 2);
		CHECK(st == SB_ERR_FORMAT, "status %s, not the input's", sb_status_str(st));
		CHECK(f.committed <= 4, "%d blocks committed of the 4 read", f.committed);
		for (int i = 0; i < f.committed; i++)
			CHECK(f.committed_ids[i] == i, "commit %d was block %d", i, f.committed_ids[i]);
	} else if (!strcmp(c, "cancel")) {
		fake_init(&f, 10, 1);
		f.cancel_at = 2;
		st = run(&f, 1);
		CHECK(st == SB_ERR_CANCELLED, "status %s", sb_status_str(st));
		CHECK(f.committed <= 2, "%d blocks committed after a cancel at block 2", f.committed);
	} else if (!strcmp(c, "lost")) {
		fake_init(&f, 12, 1);
		f.lose_dev = 1;
		st = run(&f, 2);
		CHECK(st == SB_OK, "status %s", sb_status_str(st));
		check_in_order(&f, 12);
	} else if (!strcmp(c, "benched")) {
		/* kept paces: device 0 at 2 ms a task (its runs take about that), device 1 at 1 s */
		sb_pace_entry pace[2] = {{.kept = 0.002}, {.kept = 1.0}};
		fake_init(&f, 12, 1);
		st = run_paced(&f, 2, pace);
		CHECK(st == SB_OK, "status %s", sb_status_str(st));
		check_in_order(&f, 12);
		CHECK(f.dev_runs[1] == 0 && pace[1].runs == 0 && pace[1].measured == 0,
		      "the benched device ran %d tasks (runs %ld, measured %g)", f.dev_runs[1],
		      pace[1].runs, pace[1].measured);
		CHECK(pace[0].runs == 12 && pace[0].measured > 0, "the fast device: runs %ld, "
		      "measured %g", pace[0].runs, pace[0].measured);
		/* the fast device lost at its second run: the benched one finishes the file */
		sb_pace_entry again[2] = {{.kept = 0.002}, {.kept = 1.0}};
		fake_init(&f, 12, 1);
		f.lose_dev = 0;
		st = run_paced(&f, 2, again);
		CHECK(st == SB_OK, "fast device lost: status %s", sb_status_str(st));
		check_in_order(&f, 12);
		CHECK(f.dev_runs[1] >= 11, "the benched device ran %d of 12 tasks after the fast one was "
		      "lost", f.dev_runs[1]);
	} else {
		fprintf(stderr, "usage: test_share overlap|order|diskfull|badread|cancel|lost|benched\n");
		return 2;
	}
	printf("share %s: %d failure(s)\n", c, failures);
	return failures ? 1 : 0;
}
