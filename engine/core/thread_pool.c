/* Fork-join pool, see thread_pool.h. Workers sleep on a condition variable between jobs; a
 * job is split into about four chunks per thread, taken from an atomic counter so that a
 * thread slowed by another process on the machine does not hold the others up. */
#include "core/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct sb_pool {
	int threads;
	pthread_t *tid;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	uint64_t generation; /* bumped per job, under lock */
	int quit;
	int busy; /* workers still in the current job, under lock */
	/* the current job */
	sb_pool_fn fn;
	void *ctx;
	int64_t n, chunk, n_chunks;
	atomic_llong next;
};

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
	uint64_t seen = 0;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->quit && p->generation == seen)
			pthread_cond_wait(&p->wake, &p->lock);
		if (p->quit)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->lock);
		run_chunks(p, worker);
		pthread_mutex_lock(&p->lock);
		if (--p->busy == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

sb_status sb_pool_new(int threads, sb_pool **out)
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
	*out = p;
	return SB_OK;
}

void sb_pool_free(sb_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->quit = 1;
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
	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->chunk = chunk;
	p->n_chunks = (n + chunk - 1) / chunk;
	atomic_store(&p->next, 0);
	p->busy = p->threads - 1;
	p->generation++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	run_chunks(p, 0);
	pthread_mutex_lock(&p->lock);
	while (p->busy > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
