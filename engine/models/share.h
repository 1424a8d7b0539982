/* One file's work shared among the devices of a job (ctx->dev[0 .. n_dev)), for every model
 * family that cuts a file into units (HTDemucs's segments, a RoFormer's chunks):
 *
 *   - the model makes blocks of work in the file's order (a few units each, their input read),
 *     each of one or more tasks (a bag's models); each device takes the next task when it is
 *     free, so a fast device does more; blocks are committed in order whatever order their
 *     tasks finish in, so the output does not depend on how the work was shared;
 *   - a device takes a task only if, at its measured rate (its first task's time, then the
 *     mean of its tasks), it would finish before the others, at theirs, would have done
 *     everything left; otherwise it stops taking work;
 *   - a device that finds nothing left to take runs again a task still running on a device
 *     that will finish it later than this one would (a backup task, as MapReduce's, Dean and
 *     Ghemawat, OSDI 2004): the first result wins, the other run is told to stop (its 'lost'
 *     flag) and its result is thrown away;
 *   - a device that fails (lost, out of memory) hands its task back and stops; the others
 *     finish the file; only when every device has failed does the error go back to the job
 *     runner (which falls back to the CPU).
 * The calling thread drives ctx->dev[0]; each other device has a thread of its own; a host
 * thread makes the next blocks while the devices run (a task waiting for each device, as the
 * bound below allows) and commits finished ones behind them, so a device goes from one task
 * straight to the next (HTDemucs: 5.6 ms of reading, blending and writing a segment on a
 * Zen 4 core, which a GPU at 60-90 ms a segment would otherwise sit out). Where no host
 * thread can be started, the first device does that work between its tasks and runs alone.
 * Memory is bounded: at most SB_SHARE_MAX_BLOCKS blocks are made and not yet committed (a
 * committed block lives on only while a losing backup run of it has not come back).
 */
#ifndef SB_SHARE_H
#define SB_SHARE_H

#include "models/model.h"

#include <stdatomic.h>

#define SB_SHARE_MAX_DEVS 16
#define SB_SHARE_MAX_BLOCKS 8
#define SB_SHARE_MAX_TASKS 64

typedef struct {
	const char *who;  /* the model family, for messages: "htdemucs" */
	const char *unit; /* what a unit is called: "segment" */
	/* On the host thread (or the first device's, where there is none), never under the
	 * scheduler's lock; make and commit are never called at once: the next block in the
	 * file's order, its input read, with *n_tasks tasks (1 .. SB_SHARE_MAX_TASKS) of *units
	 * units each; NULL when there is none left, or on a failure (*st set). */
	void *(*make)(void *user, int *n_tasks, int *units, sb_status *st);
	/* floats the output of task t of blk needs (on a device's thread, beside make and
	 * commit: it reads the block only) */
	size_t (*out_floats)(void *user, const void *blk, int t);
	/* On device dev's thread, without the lock: task t of blk into out. *dstate: the device's
	 * own state for this file (placed weights, workspaces), NULL before its first run, given
	 * to release() at the end. lost: set when another device finished the task first; the
	 * run stops at its next check (as it does for ctx->cancel) with SB_ERR_CANCELLED. */
	sb_status (*run)(void *user, int dev, void **dstate, const void *blk, int t, float *out,
	                 const atomic_int *lost);
	/* Where make is called, blocks in order once every task of theirs is done: outs[t] is
	 * task t's output. Runs of later blocks go on meanwhile: run() must not touch what make()
	 * and commit() change. */
	sb_status (*commit)(void *user, const void *blk, float *const *outs);
	/* on any of the threads, beside make and commit (a losing backup run frees the block it
	 * comes back from): it frees the block only */
	void (*free_block)(void *user, void *blk);
	void (*release)(void *user, int dev, void *dstate);
} sb_share_ops;

/* Runs every block to the end on the devices of ctx; units_total: the units of the whole
 * file (for rates, progress and the device reports). */
sb_status sb_share_run(const sb_share_ops *ops, void *user, const sb_run_ctx *ctx,
                       int64_t units_total);

#endif
