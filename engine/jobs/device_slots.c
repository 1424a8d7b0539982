/* The engine's devices (engine_internal.h): each opened once, the first time a job needs it,
 * and kept open; a job holds its devices' locks while it runs (taken in table order), so a
 * device never runs two jobs at once and holds one cached model at most. The native CPU is
 * opened for each job that asks (its own thread pool), so no job waits for another's. */
#include "jobs/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sb_status sb_slots_new(sb_engine *e, size_t n)
{
	e->dev = calloc(n, sizeof *e->dev);
	if (!e->dev)
		return SB_ERR_NOMEM;
	for (size_t i = 0; i < n; i++)
		pthread_mutex_init(&e->dev[i].lock, NULL);
	return SB_OK;
}

void sb_slots_free(sb_engine *e)
{
	if (e->dev)
		for (size_t i = 0; i < sb_devices_count(e->devices); i++) {
			sb_exec_close(&e->dev[i].x);
			pthread_mutex_destroy(&e->dev[i].lock);
		}
	free(e->dev);
	e->dev = NULL;
}

/* In parallel mode, the GPUs of the engine's set outside the job's own: other workers may run
 * jobs on them while this job's CPU computes. The CPU leaves a core to each GPU that runs
 * beside it and runs below their feeding threads (backend.h: sb_open_opts.beside). */
int sb_slots_other_gpus(const sb_engine *e, const sb_device_set *set)
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
sb_status sb_slots_open(void *user, size_t i, sb_exec *out, char *why, size_t wlen)
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
	sb_slot *s = &e->dev[i];
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

/* the set's devices other than the native CPU, as bits (the ones with a lock) */
uint64_t sb_slots_mask(const sb_engine *e, const sb_device_set *s)
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

void sb_slots_unlock(sb_engine *e, uint64_t m)
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
uint64_t sb_slots_lock(sb_engine *e, sb_worker *w, const sb_device_set *set)
{
	const uint64_t mine = sb_slots_mask(e, set);
	uint64_t held = 0;
	int locked = 0;
	sb_model_cache *drop[64];
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
		sb_slots_unlock(e, held);
		held = need;
		lock_devices(e, held);
		locked = 1;
	}
	for (int i = 0; i < n_drop; i++)
		sb_model_cache_drop(drop[i]);
	/* the others' devices were locked only for that: the job holds its own */
	sb_slots_unlock(e, held & ~mine);
	return mine;
}

