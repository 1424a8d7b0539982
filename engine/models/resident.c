/* Weights and activation buffers of a model resident on a device (resident.h). */
#include "models/resident.h"

#include <stdlib.h>
#include <string.h>

static int cmp_ptr(const void *a, const void *b)
{
	const float *x = *(const float *const *)a, *y = *(const float *const *)b;
	return x < y ? -1 : x > y;
}

void sb_resident_fail(sb_resident *p, sb_status st)
{
	if (p->st == SB_OK)
		p->st = st;
}

sb_status sb_resident_status(sb_resident *p)
{
	if (p->st != SB_OK)
		return p->st;
	return p->x.be->status(p->x.d);
}

int sb_resident_stopped(sb_resident *p)
{
	if (!sb_stop_set(p->stop, 2))
		return 0;
	sb_resident_fail(p, SB_ERR_CANCELLED);
	return 1;
}

sb_status sb_resident_drain(sb_resident *p)
{
	if (p->st != SB_OK)
		return p->st;
	const sb_status st = p->x.be->drain(p->x.d, p->stop, 2);
	sb_resident_fail(p, st);
	return st;
}

void sb_resident_fetch(sb_resident *p, float *dst, sb_dv src, size_t n)
{
	if (sb_resident_status(p) == SB_OK)
		p->x.be->fetch(p->x.d, dst, src, n);
}

sb_resident_pass sb_resident_end(sb_resident *p)
{
	sb_resident_pass pp = {NULL, sb_resident_status(p)};
	if (pp.st != SB_OK || !p->x.be->pass_end) {
		pp.st = sb_resident_drain(p); /* a failed pass: its failure, without a wait */
		return pp;
	}
	if (!(pp.bp = p->x.be->pass_end(p->x.d)))
		pp.st = sb_resident_status(p);
	return pp;
}

sb_status sb_resident_wait(sb_resident *p, sb_resident_pass *pp)
{
	if (!pp->bp)
		return pp->st;
	pp->st = p->x.be->pass_wait(p->x.d, pp->bp, p->stop, 2);
	pp->bp = NULL;
	return pp->st;
}

void sb_resident_fini(sb_resident *p)
{
	if (!p)
		return;
	/* No wait for the device after a pass that ended well or was stopped: a buffer released
	 * while queued work still uses it lives until that work has run (OpenCL's rule; the CPU's
	 * work is done on return), and no host memory is read by queued work (backend.h: upload,
	 * wrap). A pass another device won may still be running here when its file is done. After
	 * a failure (out of device memory: the job runner places the model again with smaller
	 * chunks) the failed pass's buffers are given back before anything is placed again. */
	if (p->x.d) {
		const sb_status st = sb_resident_status(p);
		if (st != SB_OK && st != SB_ERR_CANCELLED)
			p->x.be->finish(p->x.d);
	}
	for (int i = 0; i < p->n_blocks; i++)
		p->x.be->release(p->x.d, p->blocks[i].b);
	for (int i = 0; p->wbuf && i < p->n_w; i++)
		if (p->wbuf[i])
			p->x.be->release(p->x.d, p->wbuf[i]);
	free(p->wbuf);
	free(p->wptr);
	free(p->wlen);
	p->wbuf = NULL;
	p->wptr = NULL;
	p->wlen = NULL;
	p->n_w = p->n_blocks = 0;
}

float *sb_weights_new(sb_weights *w, size_t n)
{
	if (w->count == w->cap) {
		const int cap = w->cap ? 2 * w->cap : 256;
		float **p = realloc(w->p, sizeof *p * (size_t)cap);
		if (p)
			w->p = p;
		size_t *q = realloc(w->n, sizeof *q * (size_t)cap);
		if (q)
			w->n = q;
		if (!p || !q)
			return NULL;
		w->cap = cap;
	}
	float *m = calloc(n ? n : 1, sizeof(float));
	if (m) {
		w->n[w->count] = n ? n : 1;
		w->p[w->count++] = m;
	}
	return m;
}

void sb_weights_drop(sb_weights *w, const float *p)
{
	for (int i = w->count - 1; p && i >= 0; i--)
		if (w->p[i] == p) {
			free(w->p[i]);
			w->count--;
			w->p[i] = w->p[w->count];
			w->n[i] = w->n[w->count];
			return;
		}
}

void sb_weights_free(sb_weights *w)
{
	for (int i = 0; i < w->count; i++)
		free(w->p[i]);
	free(w->p);
	free(w->n);
	memset(w, 0, sizeof *w);
}

sb_status sb_resident_init(sb_resident *p, const sb_weights *w, const sb_exec *dev,
                        const sb_logger *log, const char *who)
{
	float *const *owned = w->p;
	const size_t *owned_n = w->n;
	const int n = w->count;
	memset(p, 0, sizeof *p);
	p->x = *dev;
	p->o = dev->be->ops;
	p->log = log;
	p->who = who;
	p->n_w = n;
	p->wbuf = calloc((size_t)n + 1, sizeof *p->wbuf);
	p->wptr = malloc(sizeof *p->wptr * ((size_t)n + 1));
	p->wlen = malloc(sizeof *p->wlen * ((size_t)n + 1));
	sb_status st = p->wbuf && p->wptr && p->wlen ? SB_OK : SB_ERR_NOMEM;
	if (st == SB_OK) {
		for (int i = 0; i < n; i++)
			p->wptr[i] = owned[i];
		qsort(p->wptr, (size_t)n, sizeof *p->wptr, cmp_ptr);
	}
	/* every array the model owns, on the device (a CPU backend uses them in place) */
	for (int i = 0; st == SB_OK && i < n; i++) {
		int j = 0;
		while (owned[j] != p->wptr[i])
			j++;
		p->wlen[i] = owned_n[j];
		st = dev->be->wrap(dev->d, p->wptr[i], p->wlen[i], &p->wbuf[i]);
	}
	/* one wait for every weight's copy (a backend that copies them does so without waiting
	 * for each: backend.h, wrap), those before a failure too */
	const sb_status copied = dev->be->finish(dev->d);
	if (st == SB_OK)
		st = copied;
	if (st != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "%s: cannot place the weights on %s (%s)", who,
		       dev->props ? dev->props->label : "the device", sb_status_str(st));
		sb_resident_fini(p);
	}
	return st;
}

sb_status sb_resident_begin(sb_resident *p)
{
	for (int i = 0; i < p->n_blocks; i++) /* a pass owns every buffer, even after a failure */
		p->blocks[i].used = 0;
	p->st = SB_OK;
	p->x.be->clear(p->x.d);
	return p->x.be->begin_chunk(p->x.d);
}

sb_dv sb_resident_w(sb_resident *p, const float *host)
{
	int lo = 0, hi = p->n_w - 1, at = -1;
	while (lo <= hi) {
		const int mid = (lo + hi) / 2;
		if (p->wptr[mid] <= host) {
			at = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (at >= 0 && host < p->wptr[at] + p->wlen[at])
		return (sb_dv){p->wbuf[at], (size_t)(host - p->wptr[at])};
	/* an array that is not one of the model's: a bug, reported rather than crashing */
	if (p->st == SB_OK)
		sb_log(p->log, SB_LOG_ERROR, "%s: internal error: a weight not on the device", p->who);
	sb_resident_fail(p, SB_ERR_INVALID);
	return (sb_dv){p->n_w ? p->wbuf[0] : NULL, 0};
}

sb_dv sb_resident_a(sb_resident *p, size_t floats)
{
	sb_dv none = {NULL, 0};
	if (sb_resident_status(p) != SB_OK)
		return none;
	floats = floats ? floats : 16;
	int best = -1;
	for (int i = 0; i < p->n_blocks; i++)
		if (!p->blocks[i].used && p->blocks[i].floats >= floats &&
		    (best < 0 || p->blocks[i].floats < p->blocks[best].floats))
			best = i;
	if (best >= 0 && p->blocks[best].floats <= 2 * floats + 16384) {
		p->blocks[best].used = 1;
		return (sb_dv){p->blocks[best].b, 0};
	}
	if (p->n_blocks == SB_RESIDENT_MAX_BLOCKS) {
		int drop = -1;
		for (int i = 0; i < p->n_blocks; i++)
			if (!p->blocks[i].used && (drop < 0 || p->blocks[i].floats > p->blocks[drop].floats))
				drop = i;
		if (drop < 0) {
			sb_log(p->log, SB_LOG_ERROR, "%s: too many device buffers", p->who);
			sb_resident_fail(p, SB_ERR_DEVICE);
			return none;
		}
		p->x.be->release(p->x.d, p->blocks[drop].b);
		p->blocks[drop] = p->blocks[--p->n_blocks];
	}
	sb_bbuf *b = NULL;
	sb_status st = p->x.be->alloc(p->x.d, floats, &b);
	if (st != SB_OK && p->n_blocks) {
		/* out of device memory: give back the cached buffers no one uses, then try again */
		for (int i = p->n_blocks - 1; i >= 0; i--)
			if (!p->blocks[i].used) {
				p->x.be->release(p->x.d, p->blocks[i].b);
				p->blocks[i] = p->blocks[--p->n_blocks];
			}
		st = p->x.be->alloc(p->x.d, floats, &b);
	}
	if (st != SB_OK) {
		sb_resident_fail(p, st);
		return none;
	}
	p->blocks[p->n_blocks++] = (sb_resident_block){b, floats, 1};
	return (sb_dv){b, 0};
}

void sb_resident_r(sb_resident *p, sb_dv v)
{
	for (int i = 0; v.buf && i < p->n_blocks; i++)
		if (p->blocks[i].b == v.buf) {
			p->blocks[i].used = 0;
			return;
		}
}

/* ---- placements kept between calls ---- */

static void kept_relay(void *user, sb_log_level level, const char *msg)
{
	const sb_kept *k = user;
	if (k->to && k->to->fn)
		k->to->fn(k->to->user, level, msg);
}

void sb_kept_init(sb_kept *k, void (*free_state)(void *state))
{
	memset(k, 0, sizeof *k);
	k->free_state = free_state;
	k->log = (sb_logger){kept_relay, k};
}

void sb_kept_begin(sb_kept *k, const sb_logger *log)
{
	k->to = log;
}

void sb_kept_end(sb_kept *k)
{
	k->to = NULL;
}

void *sb_kept_take(sb_kept *k, const sb_exec *dev)
{
	for (int i = 0; i < k->n; i++)
		if (k->dev[i] == dev->d && k->be[i] == dev->be) {
			void *s = k->state[i];
			k->n--;
			k->be[i] = k->be[k->n];
			k->dev[i] = k->dev[k->n];
			k->state[i] = k->state[k->n];
			return s;
		}
	return NULL;
}

void sb_kept_put(sb_kept *k, const sb_exec *dev, void *state)
{
	if (!state)
		return;
	void *old = sb_kept_take(k, dev);
	if (old)
		k->free_state(old);
	if (k->n == SB_KEPT_MAX) {
		k->free_state(state);
		return;
	}
	k->be[k->n] = dev->be;
	k->dev[k->n] = dev->d;
	k->state[k->n++] = state;
}

void sb_kept_clear(sb_kept *k)
{
	for (int i = 0; i < k->n; i++)
		k->free_state(k->state[i]);
	k->n = 0;
}
