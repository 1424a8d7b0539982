/* Fork-join pool, see thread_pool.h. A job is split into about four chunks per thread, taken
 * from an atomic counter so that a thread slowed by another process on the machine does not
 * hold the others up.
 *
 * Waking: a model's forward pass is thousands of short operations back to back, and a futex
 * wake-up per operation (tens of microseconds on a virtual machine) would cost more than most
 * of them. So a worker that finished a job, and the caller waiting for the workers, spin for a
 * short while (SPIN_NS) on the generation and busy counters before they sleep on the condition
 * variables; a job that comes within that time starts without a system call. The spin is short
 * so that an idle pool gives its cores back at once (a DAW's audio thread may need them).
 */
#include "core/thread_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 50000 /* 50 us */

struct sb_pool {
	int threads;
	int nice;          /* workers' priority below the caller's */
	atomic_int ready;  /* workers that have set it */
	pthread_t *tid;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	atomic_uint_fast64_t generation; /* bumped per job, after the job's fields are set */
	atomic_int quit;
	atomic_int busy;   /* workers still in the current job */
	atomic_int sleepers; /* workers asleep on wake, the caller asleep on done (+1000) */
	/* the current job */
	sb_pool_fn fn;
	void *ctx;
	int64_t n, chunk, n_chunks;
	atomic_llong next;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until cond(p, arg) holds or SPIN_NS pass; 1 when it holds. */
static int spin_until(sb_pool *p, int (*cond)(sb_pool *, uint64_t), uint64_t arg)
{
	const int64_t end = now_ns() + SPIN_NS;
	for (int i = 0;; i++) {
		if (cond(p, arg))
			return 1;
		cpu_relax();
		if ((i & 63) == 63 && now_ns() > end)
			return cond(p, arg);
	}
}

/* Sequentially consistent throughout: a sleeper counts itself before it checks, the other side
 * publishes before it looks for sleepers, so one of them always sees the other. */
static int new_job(sb_pool *p, uint64_t seen)
{
	return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

static int all_done(sb_pool *p, uint64_t unused)
{
	(void)unused;
	return atomic_load(&p->busy) == 0;
}

static void run_chunks(sb_pool *p, int worker)
{
	for (;;) {
		const int64_t c = atomic_fetch_add(&p->next, 1);
		if (c >= p->n_chunks)
			break;
		const int64_t b = c * p->chunk;
		const int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
		p->fn(p->ctx, b, e, worker);
	}
}

typedef struct {
	sb_pool *p;
	int worker;
} worker_arg;

static void *worker_main(void *arg)
{
	worker_arg *wa = arg;
	sb_pool *p = wa->p;
	const int worker = wa->worker;
	free(wa);
	if (p->nice > 0) {
		/* Linux keeps a nice value per thread: this one only. A refusal (a sandbox) leaves the
		 * pool as fast as before and the other threads as slowed by it as before. */
		const id_t tid = (id_t)syscall(SYS_gettid);
		errno = 0;
		const int now = getpriority(PRIO_PROCESS, tid);
		if (errno == 0)
			(void)setpriority(PRIO_PROCESS, tid, now + p->nice);
	}
	atomic_fetch_add(&p->ready, 1);
	uint64_t seen = 0;
	for (;;) {
		if (!spin_until(p, new_job, seen)) {
			pthread_mutex_lock(&p->lock);
			atomic_fetch_add(&p->sleepers, 1);
			while (!new_job(p, seen))
				pthread_cond_wait(&p->wake, &p->lock);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->lock);
		}
		if (atomic_load(&p->quit))
			break;
		seen = atomic_load(&p->generation);
		run_chunks(p, worker);
		if (atomic_fetch_sub(&p->busy, 1) == 1 &&
		    atomic_load(&p->sleepers) >= 1000) {
			/* the caller went to sleep: wake it under the lock it waits with */
			pthread_mutex_lock(&p->lock);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->lock);
		}
	}
	return NULL;
}

sb_status sb_pool_new(int threads, int nice, sb_pool **out)
{
	*out = NULL;
	if (threads <= 0) {
		const long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (int)n : 1;
	}
	if (threads > 256)
		threads = 256;
	sb_pool *p = calloc(1, sizeof *p);
	if (!p)
		return SB_ERR_NOMEM;
	p->threads = 1;
	p->nice = nice > 0 ? nice : 0;
	atomic_init(&p->generation, 0);
	atomic_init(&p->quit, 0);
	atomic_init(&p->busy, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->next, 0);
	atomic_init(&p->ready, 0);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	p->tid = calloc((size_t)threads, sizeof *p->tid);
	if (!p->tid) {
		sb_pool_free(p);
		return SB_ERR_NOMEM;
	}
	for (int i = 1; i < threads; i++) {
		worker_arg *wa = malloc(sizeof *wa);
		if (!wa)
			break;
		wa->p = p;
		wa->worker = i;
		if (pthread_create(&p->tid[i], NULL, worker_main, wa) != 0) {
			free(wa);
			break; /* run with the threads we got */
		}
		p->threads++;
	}
	/* the pool is ready when its workers run at the priority asked for */
	while (atomic_load(&p->ready) < p->threads - 1) {
		const struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
	*out = p;
	return SB_OK;
}

void sb_pool_free(sb_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->quit, 1);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (int i = 1; i < p->threads; i++)
		pthread_join(p->tid[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->done);
	free(p->tid);
	free(p);
}

int sb_pool_threads(const sb_pool *p)
{
	return p ? p->threads : 1;
}

void sb_pool_for(sb_pool *p, int64_t n, int64_t grain, sb_pool_fn fn, void *ctx)
{
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (!p || p->threads == 1 || n <= grain) {
		fn(ctx, 0, n, 0);
		return;
	}
	int64_t chunk = (n + 4 * p->threads - 1) / (4 * p->threads);
	if (chunk < grain)
		chunk = grain;
	/* The workers are between jobs (busy is 0): the fields are ours until the release below. */
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->chunk = chunk;
	p->n_chunks = (n + chunk - 1) / chunk;
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	atomic_store_explicit(&p->busy, p->threads - 1, memory_order_relaxed);
	atomic_fetch_add(&p->generation, 1);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_broadcast(&p->wake);
		pthread_mutex_unlock(&p->lock);
	}
	run_chunks(p, 0);
	if (!spin_until(p, all_done, 0)) {
		pthread_mutex_lock(&p->lock);
		atomic_fetch_add(&p->sleepers, 1000);
		while (!all_done(p, 0))
			pthread_cond_wait(&p->done, &p->lock);
		atomic_fetch_sub(&p->sleepers, 1000);
		pthread_mutex_unlock(&p->lock);
	}
}
