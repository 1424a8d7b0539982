/* A model resident on a device: its weight arrays copied (or wrapped in place) there, and the
 * activation buffers a forward pass takes and gives back, kept from one pass to the next so
 * that a pass allocates nothing after the first. Every model family's forward pass is written
 * against it (HTDemucs, the RoFormers).
 *
 * Errors: the first failure of a pass (host or device) is kept; sb_resident_status() reads it, so
 * a forward pass reads as straight-line code that checks before it reads results back.
 * Threads: one pass at a time per placement. */
#ifndef SB_RESIDENT_H
#define SB_RESIDENT_H

#include "backend/backend.h"

#include <stdatomic.h>

#define SB_RESIDENT_MAX_BLOCKS 256

/* A model's weight arrays in host memory, every one of them, for placing on a device. */
typedef struct {
	float **p;
	size_t *n;   /* floats in each */
	int count, cap;
} sb_weights;

/* a new array of n floats (zeroed) in the list; NULL without memory */
float *sb_weights_new(sb_weights *w, size_t n);
/* frees one array of the list (a raw tensor once repacked) */
void sb_weights_drop(sb_weights *w, const float *p);
void sb_weights_free(sb_weights *w);

typedef struct {
	sb_bbuf *b;
	size_t floats;
	int used;
} sb_resident_block;

typedef struct {
	sb_exec x;
	const sb_ops *o;
	const sb_logger *log;
	const char *who;            /* the family's name, for messages */
	sb_bbuf **wbuf;             /* one device buffer per weight array, sorted by host address */
	const float **wptr;
	size_t *wlen;
	int n_w;
	sb_resident_block blocks[SB_RESIDENT_MAX_BLOCKS];
	int n_blocks;
	sb_status st;               /* host-side failure of the current pass */
	const atomic_int *stop[2];  /* set: the pass ends at the next check (sb_resident_stopped) */
} sb_resident;

/* Puts every array of w on the device. */
sb_status sb_resident_init(sb_resident *p, const sb_weights *w, const sb_exec *dev,
                        const sb_logger *log, const char *who);
void sb_resident_fini(sb_resident *p);

/* A new pass: every activation buffer free again, the kept failure cleared, the device's
 * begin_chunk() hook called. */
sb_status sb_resident_begin(sb_resident *p);
/* the device copy of a host weight array (or of a place inside one) */
sb_dv sb_resident_w(sb_resident *p, const float *host);
/* an activation buffer of at least floats (a cached one when it fits) */
sb_dv sb_resident_a(sb_resident *p, size_t floats);
/* gives a buffer back for the rest of the pass to reuse */
void sb_resident_r(sb_resident *p, sb_dv v);
sb_status sb_resident_status(sb_resident *p);
void sb_resident_fail(sb_resident *p, sb_status st);
/* A stop flag set: the pass's status becomes SB_ERR_CANCELLED and 1 is returned. */
int sb_resident_stopped(sb_resident *p);
/* The pass's one wait, before its results are read back: for the device to finish what the
 * pass enqueued, or for a stop flag, whichever comes first (SB_ERR_CANCELLED, kept as the
 * pass's status; the device goes on with the pass's work, which nobody waits for). */
sb_status sb_resident_drain(sb_resident *p);

/* A pass whose results come back by read-backs enqueued in it (sb_resident_fetch), ended without a
 * wait where the device pipelines (backend.h: pass_end): the next pass is enqueued before it is
 * waited for (sb_resident_wait), and the device goes from one to the next without waiting for
 * the host (issue #50). Elsewhere sb_resident_end waits as sb_resident_drain does, and
 * sb_resident_wait returns what it found. */
typedef struct {
	sb_bpass *bp;               /* ended, not yet waited for; NULL: st says how it ended */
	sb_status st;
} sb_resident_pass;

/* n floats of src into dst once the pass has been waited for with SB_OK (backend.h: fetch) */
void sb_resident_fetch(sb_resident *p, float *dst, sb_dv src, size_t n);
sb_resident_pass sb_resident_end(sb_resident *p);
/* once for each pass sb_resident_end returned, in their order */
sb_status sb_resident_wait(sb_resident *p, sb_resident_pass *pp);

/* Placements a model keeps from one separate() call to the next, on the devices the caller
 * keeps open (sb_run_ctx.keep), one state per device found by its handle (the job runner's kept
 * model, #24: the second song on a GPU uploads nothing).
 *
 * Threads: a call takes its devices' states out on its own thread before it shares out the
 * work and puts back what it keeps after its device threads have ended, so the table is only
 * touched by one thread. A kept placement logs through 'log', which forwards to the logger of
 * the call in progress (sb_kept_begin) and drops messages between calls: a call's logger may
 * live on its caller's stack. */
#define SB_KEPT_MAX 16

typedef struct {
	const sb_backend *be[SB_KEPT_MAX];
	const sb_bdev *dev[SB_KEPT_MAX];
	void *state[SB_KEPT_MAX];
	int n;
	void (*free_state)(void *state);
	const sb_logger *to;        /* the call in progress's logger, NULL between calls */
	sb_logger log;              /* what kept placements log through */
} sb_kept;

void sb_kept_init(sb_kept *k, void (*free_state)(void *state));
void sb_kept_begin(sb_kept *k, const sb_logger *log);
void sb_kept_end(sb_kept *k);
/* the state kept for dev, taken out of the table; NULL when there is none */
void *sb_kept_take(sb_kept *k, const sb_exec *dev);
/* keeps state for dev (a state kept for it before is freed) */
void sb_kept_put(sb_kept *k, const sb_exec *dev, void *state);
/* frees every kept state: before the devices close, and before what the states point into */
void sb_kept_clear(sb_kept *k);

#endif
