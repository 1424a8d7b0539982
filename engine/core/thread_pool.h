/* A fork-join pool for the Demucs engine's native CPU path: the caller and threads-1 workers
 * split a range into chunks and run one function over them, then the caller continues.
 *
 * Threads: one pool per job, used from the job's thread only (never from the audio thread).
 * A NULL pool runs everything on the calling thread, so every op works with or without one.
 */
#ifndef SB_DEMUCS_THREAD_POOL_H
#define SB_DEMUCS_THREAD_POOL_H

#include "sb_common.h"

#include <stdint.h>

typedef struct sb_pool sb_pool;

/* Work on [begin, end); 'worker' is 0..threads-1, for per-thread scratch. */
typedef void (*sb_pool_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* threads: total including the caller (>= 1); 0 = the number of online CPUs. nice > 0: the
 * workers (not the caller) run that much below the priority of the thread that creates the
 * pool (setpriority), for a pool that must yield to other threads of the process: a GPU's
 * feeding thread (issue #24). */
sb_status sb_pool_new(int threads, int nice, sb_pool **out);
void sb_pool_free(sb_pool *p);
int sb_pool_threads(const sb_pool *p);

/* Run fn over [0, n) in chunks of at least 'grain' items and wait for all of them. */
void sb_pool_for(sb_pool *p, int64_t n, int64_t grain, sb_pool_fn fn, void *ctx);

#endif
