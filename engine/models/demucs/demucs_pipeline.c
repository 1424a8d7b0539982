/* The whole-file pipeline of demucs.separate (demucs/separate.py, demucs/apply.py apply_model
 * with split=True), streamed:
 *
 *   x = (mix - mean(ref)) / std(ref), ref = the mix averaged over channels, std unbiased;
 *   for each model of the bag and each shift: cut x into segments of the model's length at a
 *   stride of (1 - overlap) * length, run the model on each (a short last chunk is centred in
 *   a full segment read from its neighbourhood, zeros outside the file), blend the segments
 *   with the triangular weight [1 .. L/2, L - L/2 .. 1] / max, divide by the summed weights;
 *   with shifts, pad by 0.5 s of zeros and start the cut at a random offset in [0, 0.5 s];
 *   average the shifts, weight the models per source (bag_weights) and divide by the total;
 *   stems = result * std(ref) + mean(ref).
 *
 * Streaming: every (model, shift) pair is a "grid" of segments; grids with the same offsets
 * and length (all the models of a bag without shifts) share one accumulator. The grid whose
 * next segment starts first runs next, and everything before the earliest next start is
 * final and goes to the sink. Each accumulator is a window of one segment's length, so memory
 * is one segment's activations plus a segment of audio per grid, whatever the song's length.
 *
 * Several devices (ctx->dev[0 .. n_dev)) share one file: the work is cut into tasks, B
 * consecutive segments of one grid for one model (B: the job's batch, else the largest the
 * devices ask for), in the order above; each device takes the next task when it is free, so a
 * fast device does more. Results are committed in task order whatever order they finish in,
 * so the stems are the same however the work was shared (the blend sums in the same order).
 *
 * Sharing never makes a file slower than its fastest device alone:
 *   - a device takes a task only if, at its measured rate (its first task's time, then the
 *     mean of its tasks), it would finish before the others, at theirs, would have done
 *     everything left; otherwise it stops taking work;
 *   - a device that finds nothing left to take runs again a task still running on a device
 *     that will finish it later than this one would (a backup task, as MapReduce's, Dean and
 *     Ghemawat, OSDI 2004): the first result wins, and the other run is stopped at its next
 *     layer (sb_htdemucs_on_stop) and thrown away, so nobody waits for a slow device's last
 *     segment.
 * A device that fails (lost, out of memory at one segment per pass) hands its task back and
 * stops; the others finish the file; only when every device has failed does the error go back
 * to the job runner (which falls back to the CPU). The calling thread drives ctx->dev[0]; each
 * other device has a thread of its own.
 */
#include "models/demucs/demucs_internal.h"
#include "models/share.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GRIDS 256

typedef struct {
	int64_t Ls, stride, s0, length; /* segment, stride, origin and length in file frames */
	int64_t next, n_segs;          /* next segment to hand out, and how many */
	int64_t committed;             /* segments blended into the window */
	int n_nets;
	int nets[64];
	double *coef;  /* [n_nets][S]: bag weight / total / shifts */
	float *acc;    /* [S][ac][Ls]: frames E .. E + Ls */
	float *wsum;   /* [Ls] */
	float *weight; /* [Ls] triangle */
} grid;

void sb_demucs_opts_default(sb_demucs_opts *o)
{
	o->shifts = 0;
	o->overlap = 0.25;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}


typedef struct {
	const sb_demucs_bag *bag;
	const sb_run_ctx *ctx;
	sb_source *in;
	sb_sink *out;
	int S, ac, out_ch;
	int stem_of[SB_HTDEMUCS_MAX_SOURCES]; /* sink stem for each source, -1: dropped */
	double mean, std_;
	grid *g;
	int n_grids;
	int64_t E, N, cap;
	float *emit; /* [cap * out_ch] */
	float *stem; /* [S][ac][cap]: combined estimate of the frames being emitted */
} pipeline;

/* Write frames [E, F) of every grid's window to the sink and slide the windows. */
static sb_status emit_until(pipeline *p, int64_t F)
{
	if (F > p->N)
		F = p->N;
	if (F <= p->E)
		return SB_OK;
	const int64_t n = F - p->E;
	const int S = p->S, ac = p->ac;
	const size_t plane = (size_t)p->cap;
	memset(p->stem, 0, sizeof(float) * (size_t)S * ac * plane);
	for (int gi = 0; gi < p->n_grids; gi++) {
		const grid *g = &p->g[gi];
		for (int s = 0; s < S; s++)
			for (int c = 0; c < ac; c++) {
				const float *a = g->acc + ((size_t)s * ac + c) * plane;
				float *o = p->stem + ((size_t)s * ac + c) * plane;
				for (int64_t i = 0; i < n; i++)
					o[i] += a[i] / g->wsum[i];
			}
	}
	/* stems in sink order; extra sources fold into the stem they map to; a sink stem that no
	 * source maps to gets nothing */
	for (int stem = 0; stem < p->out->n_stems; stem++) {
		int has = 0;
		for (int s = 0; s < S; s++)
			has |= p->stem_of[s] == stem;
		if (!has)
			continue;
		memset(p->emit, 0, sizeof(float) * (size_t)n * p->out_ch);
		for (int s = 0; s < S; s++) {
			if (p->stem_of[s] != stem)
				continue;
			for (int64_t i = 0; i < n; i++) {
				float v[2];
				for (int c = 0; c < ac; c++)
					v[c] = (float)(p->stem[((size_t)s * ac + c) * plane + i] * p->std_ + p->mean);
				if (p->out_ch == ac) {
					for (int c = 0; c < ac; c++)
						p->emit[i * ac + c] += v[c];
				} else if (p->out_ch == 1) {
					p->emit[i] += 0.5f * (v[0] + v[1]);
				} else {
					p->emit[2 * i] += v[0];
					p->emit[2 * i + 1] += v[0];
				}
			}
		}
		sb_status st = p->out->write(p->out, stem, p->emit, n);
		if (st != SB_OK)
			return st;
	}
	for (int gi = 0; gi < p->n_grids; gi++) {
		grid *g = &p->g[gi];
		const int64_t keep = p->cap - n;
		for (int sc = 0; sc < S * ac; sc++) {
			float *a = g->acc + (size_t)sc * plane;
			memmove(a, a + n, sizeof(float) * (size_t)keep);
			memset(a + keep, 0, sizeof(float) * (size_t)n);
		}
		memmove(g->wsum, g->wsum + n, sizeof(float) * (size_t)keep);
		memset(g->wsum + keep, 0, sizeof(float) * (size_t)n);
	}
	p->E = F;
	return SB_OK;
}

/* Read frames [start, start + Ls) normalised, planar [ac][Ls]; outside the file: zeros (the
 * reference pads the normalised mix with zeros). */
static sb_status read_chunk(pipeline *p, int64_t start, int64_t Ls, float *raw, float *x)
{
	sb_status st = p->in->read(p->in, start, Ls, raw);
	if (st != SB_OK)
		return st;
	const int ic = p->in->channels, ac = p->ac;
	const float mean = (float)p->mean, inv = (float)(1.0 / p->std_);
	for (int64_t i = 0; i < Ls; i++) {
		const int64_t f = start + i;
		const int inside = f >= 0 && f < p->N;
		for (int c = 0; c < ac; c++) {
			float v;
			if (ic == ac)
				v = raw[i * ic + c];
			else if (ic == 1)
				v = raw[i];
			else
				v = 0.5f * (raw[i * ic] + raw[i * ic + 1]);
			x[(size_t)c * Ls + i] = inside ? (v - mean) * inv : 0.f;
		}
	}
	return SB_OK;
}

static sb_status silent_input(pipeline *p)
{
	/* a constant input has no std to normalise by (the reference divides by zero): give every
	 * stem an equal share of it, so that the stems still sum to the mix */
	enum { B = 16384 };
	float *buf = malloc(sizeof(float) * B * (size_t)p->in->channels);
	if (!buf)
		return SB_ERR_NOMEM;
	sb_status st = SB_OK;
	int n_used = 0;
	for (int stem = 0; stem < p->out->n_stems; stem++)
		for (int s = 0; s < p->S; s++)
			if (p->stem_of[s] == stem) {
				n_used++;
				break;
			}
	for (int stem = 0; stem < p->out->n_stems && st == SB_OK; stem++) {
		int has = 0;
		for (int s = 0; s < p->S; s++)
			has |= p->stem_of[s] == stem;
		for (int64_t at = 0; has && at < p->N && st == SB_OK; at += B) {
			const int64_t nb = p->N - at < B ? p->N - at : B;
			st = p->in->read(p->in, at, nb, buf);
			for (int64_t i = 0; st == SB_OK && i < nb * p->in->channels; i++)
				buf[i] = buf[i] / (float)n_used;
			if (st == SB_OK)
				st = p->out->write(p->out, stem, buf, nb);
		}
	}
	free(buf);
	return st;
}

/* Each source goes to the sink's stem of its canonical name (stembridge.h); a source whose
 * name is not canonical, or whose stem the sink has no room for (a four-stem sink and
 * htdemucs_6s's guitar and piano), folds into "other", so that the stems keep summing to the
 * mix. Two sources of one name add up. */
static void map_stems(pipeline *p, const sb_htdemucs_config *cfg)
{
	const int n_out = p->out->n_stems;
	for (int s = 0; s < p->S; s++) {
		const int k = sb_stem_index(cfg->sources[s]);
		p->stem_of[s] = k >= 0 && k < n_out ? k : n_out > SB_STEM_OTHER ? SB_STEM_OTHER : -1;
	}
}

/* ---- segments shared among devices (models/share.h) ---- */

#define MAX_DEVS SB_SHARE_MAX_DEVS

/* B consecutive segments of one grid, for each model of the grid */
typedef struct {
	int gi;
	int64_t s0;           /* first segment of the grid */
	int nb;               /* segments */
	float *in;            /* [nb][ac][Ls] */
} block;

/* what a device keeps for the file: the nets placed on it */
typedef struct {
	sb_htdemucs_on *on[64];
	int batch;            /* segments per pass on this device */
} devstate;

typedef struct {
	pipeline *p;
	grid *grids;
	int B;                /* segments per block */
	int batch[MAX_DEVS];  /* each device's segments per pass */
	sb_kept *kept;        /* where placements on ctx->keep's devices stay, or NULL */
	sb_htdemucs_on **pre[MAX_DEVS]; /* each device's placements kept from the last call: taken
	                                  by its thread at its first task */
} share_user;

static int keeps(const share_user *u, int dev)
{
	return u->kept && dev < 32 && (u->p->ctx->keep >> dev & 1u);
}

void sb_demucs_kept_free(void *state)
{
	sb_htdemucs_on **on = state;
	for (int k = 0; k < 64; k++)
		sb_htdemucs_unplace(on[k]);
	free(on);
}

static int64_t grid_next_take(const grid *g)
{
	return g->next < g->n_segs ? g->s0 + g->next * g->stride : INT64_MAX;
}

/* the next block in the sequential order (the grid whose next segment starts first), its
 * input read */
static void *sh_make(void *user, int *n_tasks, int *units, sb_status *st)
{
	share_user *u = user;
	pipeline *p = u->p;
	int gi = -1;
	for (int i = 0; i < p->n_grids; i++)
		if (grid_next_take(&u->grids[i]) != INT64_MAX &&
		    (gi < 0 || grid_next_take(&u->grids[i]) < grid_next_take(&u->grids[gi])))
			gi = i;
	if (gi < 0)
		return NULL;
	grid *g = &u->grids[gi];
	block *b = calloc(1, sizeof *b);
	const int nb = (int)(g->n_segs - g->next < u->B ? g->n_segs - g->next : u->B);
	if (b)
		b->in = malloc(sizeof(float) * (size_t)nb * p->ac * (size_t)g->Ls);
	float *raw = malloc(sizeof(float) * (size_t)g->Ls * p->in->channels);
	*st = b && b->in && raw ? SB_OK : SB_ERR_NOMEM;
	if (*st == SB_OK) {
		b->gi = gi;
		b->s0 = g->next;
		b->nb = nb;
	}
	for (int j = 0; j < nb && *st == SB_OK; j++) {
		const int64_t a = (b->s0 + j) * g->stride;
		const int64_t cl = g->length - a < g->Ls ? g->length - a : g->Ls;
		const int64_t delta = g->Ls - cl;
		*st = read_chunk(p, g->s0 + a - delta / 2, g->Ls, raw,
		                 b->in + (size_t)j * p->ac * (size_t)g->Ls);
	}
	free(raw);
	if (*st != SB_OK) {
		if (b)
			free(b->in);
		free(b);
		return NULL;
	}
	g->next += nb;
	*n_tasks = g->n_nets;
	*units = nb;
	return b;
}

static size_t sh_out_floats(void *user, const void *blk, int t)
{
	(void)t;
	const share_user *u = user;
	const block *b = blk;
	return (size_t)b->nb * u->p->S * u->p->ac * (size_t)u->grids[b->gi].Ls;
}

/* task t (the t-th model of the grid) on device dev, in passes of its batch (one segment a
 * pass after an out-of-memory at more) */
static sb_status sh_run(void *user, int dev, void **dstate, const void *blk, int t, float *out,
                        const atomic_int *lost)
{
	share_user *u = user;
	const pipeline *p = u->p;
	const block *b = blk;
	const grid *g = &u->grids[b->gi];
	const sb_run_ctx *ctx = p->ctx;
	devstate *d = *dstate;
	if (!d) {
		d = calloc(1, sizeof *d);
		if (!d)
			return SB_ERR_NOMEM;
		*dstate = d;
		d->batch = u->batch[dev];
		if (u->pre[dev]) {
			memcpy(d->on, u->pre[dev], sizeof d->on);
			free(u->pre[dev]);
			u->pre[dev] = NULL;
		}
	}
	const int k = g->nets[t];
	sb_status st = SB_OK;
	if (!d->on[k]) {
		/* a placement that outlives the call logs through the kept table's relay: ctx->log
		 * may be gone by the next call */
		st = sb_htdemucs_place(p->bag->nets[k], &ctx->dev[dev],
		                       keeps(u, dev) ? &u->kept->log : ctx->log, &d->on[k]);
		if (st != SB_OK)
			return st;
	}
	sb_htdemucs_on_stop(d->on[k], ctx->cancel, lost);
	const size_t in_seg = (size_t)p->ac * (size_t)g->Ls;
	const size_t out_seg = (size_t)p->S * in_seg;
	for (int j = 0; j < b->nb && st == SB_OK;) {
		const int n = b->nb - j < d->batch ? b->nb - j : d->batch;
		st = sb_htdemucs_forward(d->on[k], n, b->in + (size_t)j * in_seg,
		                         out + (size_t)j * out_seg, NULL, NULL);
		if (st == SB_ERR_DEVICE_OOM && d->batch > 1) {
			sb_log(ctx->log, SB_LOG_WARNING, "%s ran out of memory at %d segments per pass: "
			       "one at a time from now on", ctx->dev[dev].props->label, d->batch);
			d->batch = 1;
			st = SB_OK;
			continue;
		}
		j += n;
	}
	return st;
}

/* the block's segments, every model's, into the accumulators and the sink */
static sb_status sh_commit(void *user, const void *blk, float *const *outs)
{
	share_user *u = user;
	pipeline *p = u->p;
	const block *b = blk;
	grid *g = &u->grids[b->gi];
	for (int j = 0; j < b->nb; j++) {
		const int64_t a = (b->s0 + j) * g->stride;
		const int64_t cl = g->length - a < g->Ls ? g->length - a : g->Ls;
		const int64_t delta = g->Ls - cl;
		const int64_t os = g->s0 + a;
		for (int ni = 0; ni < g->n_nets; ni++) {
			const float *seg = outs[ni] + (size_t)j * p->S * p->ac * (size_t)g->Ls;
			const double *coef = g->coef + (size_t)ni * p->S;
			for (int st_ = 0; st_ < p->S; st_++)
				for (int c = 0; c < p->ac; c++) {
					const float *src = seg + ((size_t)st_ * p->ac + c) * g->Ls + delta / 2;
					float *acc = g->acc + ((size_t)st_ * p->ac + c) * p->cap;
					const float cf = (float)coef[st_];
					for (int64_t i = 0; i < cl; i++) {
						const int64_t f = os + i;
						if (f >= p->E && f < p->N)
							acc[f - p->E] += cf * g->weight[i] * src[i];
					}
				}
		}
		for (int64_t i = 0; i < cl; i++) {
			const int64_t f = os + i;
			if (f >= p->E && f < p->N)
				g->wsum[f - p->E] += g->weight[i];
		}
		g->committed = b->s0 + j + 1;
		int64_t F = INT64_MAX;
		for (int i = 0; i < p->n_grids; i++) {
			const grid *gg = &u->grids[i];
			const int64_t ns = gg->committed < gg->n_segs ? gg->s0 + gg->committed * gg->stride
			                                              : INT64_MAX;
			F = ns < F ? ns : F;
		}
		sb_status st = emit_until(p, F);
		if (st != SB_OK)
			return st;
	}
	return SB_OK;
}

static void sh_free_block(void *user, void *blk)
{
	(void)user;
	block *b = blk;
	free(b->in);
	free(b);
}

/* after every device thread has ended: the placements on a device the caller keeps open go
 * back to the kept table */
static void sh_release(void *user, int dev, void *dstate)
{
	share_user *u = user;
	devstate *d = dstate;
	sb_htdemucs_on **keep = keeps(u, dev) ? calloc(64, sizeof *keep) : NULL;
	if (keep) {
		for (int k = 0; k < 64; k++)
			if (d->on[k])
				sb_htdemucs_on_stop(d->on[k], NULL, NULL); /* this call's flags end with it */
		memcpy(keep, d->on, sizeof d->on);
		memset(d->on, 0, sizeof d->on);
		sb_kept_put(u->kept, &u->p->ctx->dev[dev], keep);
	}
	for (int k = 0; k < 64; k++)
		sb_htdemucs_unplace(d->on[k]);
	free(d);
}

static const sb_share_ops share_ops = {"htdemucs", "segment", sh_make, sh_out_floats, sh_run,
                                       sh_commit, sh_free_block, sh_release};

/* segments per pass: the job's choice, else the device's, within half its memory */
static int device_batch(const sb_run_ctx *ctx, int dev, int64_t Ls)
{
	const sb_exec *x = &ctx->dev[dev];
	int b = ctx->batch > 0 ? ctx->batch : x->be->batch ? x->be->batch(x->d) : 1;
	/* about 600 bytes of activations per input frame of a released-size segment */
	const double per = 600.0 * (double)Ls;
	if (x->props && x->props->global_mem && x->props->type != SB_DEV_CPU_NATIVE) {
		const int fit = (int)((double)x->props->global_mem / 2 / per);
		b = b > fit ? (fit > 0 ? fit : 1) : b;
	}
	return b < 1 ? 1 : b > 16 ? 16 : b;
}

/* The grids the file is cut into: one per (model, shift) unless offsets and lengths coincide,
 * each with its triangular weights and a window as long as the longest segment; *total: the
 * segments of all of them. */
static sb_status plan_grids(pipeline *p, const sb_demucs_opts *o, int64_t *total)
{
	const sb_demucs_bag *bag = p->bag;
	const sb_htdemucs_config *c0 = sb_htdemucs_cfg(bag->nets[0]);
	const sb_logger *log = p->ctx->log;
	const int shifts = o->shifts > 0 ? o->shifts : 1;
	const int64_t max_shift = o->shifts > 0 ? (int64_t)(0.5 * c0->samplerate) : 0;
	uint64_t rng = p->ctx->seed;
	grid *grids = p->g;
	sb_status st = SB_OK;
	for (int k = 0; k < bag->n && st == SB_OK; k++) {
		const sb_htdemucs_config *ck = sb_htdemucs_cfg(bag->nets[k]);
		double tot[SB_HTDEMUCS_MAX_SOURCES];
		for (int s = 0; s < p->S; s++) {
			tot[s] = 0;
			for (int j = 0; j < bag->n; j++)
				tot[s] += bag->weights[j * p->S + s];
		}
		for (int sh = 0; sh < shifts && st == SB_OK; sh++) {
			const int64_t off = max_shift ? (int64_t)(splitmix64(&rng) % (uint64_t)(max_shift + 1)) : 0;
			const int64_t Ls = ck->segment_length, s0 = off - max_shift;
			int gi = 0;
			while (gi < p->n_grids && !(grids[gi].Ls == Ls && grids[gi].s0 == s0 &&
			                           grids[gi].n_nets < 64))
				gi++;
			if (gi == MAX_GRIDS) {
				sb_log(log, SB_LOG_ERROR, "htdemucs: %d models x %d shifts is more than %d runs "
				       "over the file", bag->n, shifts, MAX_GRIDS);
				st = SB_ERR_INVALID;
				break;
			}
			grid *g = &grids[gi];
			if (gi == p->n_grids) {
				p->n_grids++;
				g->Ls = Ls;
				g->s0 = s0;
				g->stride = (int64_t)((1.0 - o->overlap) * (double)Ls);
				if (g->stride < 1)
					g->stride = 1;
				g->length = p->N - s0;
				g->n_segs = (g->length + g->stride - 1) / g->stride;
				g->coef = calloc((size_t)64 * p->S, sizeof(double));
				g->acc = calloc((size_t)p->S * p->ac * (size_t)Ls, sizeof(float));
				g->wsum = calloc((size_t)Ls, sizeof(float));
				g->weight = malloc(sizeof(float) * (size_t)Ls);
				if (!g->coef || !g->acc || !g->wsum || !g->weight) {
					st = SB_ERR_NOMEM;
					break;
				}
				/* th.cat([arange(1, L//2 + 1), arange(L - L//2, 0, -1)]) / max */
				const int64_t h = Ls / 2;
				const float mx = (float)(h > Ls - h ? h : Ls - h);
				for (int64_t i = 0; i < Ls; i++)
					g->weight[i] = (float)(i < h ? i + 1 : Ls - i) / mx;
				if (Ls > p->cap)
					p->cap = Ls;
			}
			for (int s = 0; s < p->S; s++)
				g->coef[(size_t)g->n_nets * p->S + s] = bag->weights[k * p->S + s] / tot[s] / shifts;
			g->nets[g->n_nets++] = k;
			*total += g->n_segs;
		}
	}
	/* every grid's window must be as long as the longest segment */
	for (int gi = 0; gi < p->n_grids && st == SB_OK; gi++) {
		grid *g = &grids[gi];
		if (g->Ls < p->cap) {
			float *a = calloc((size_t)p->S * p->ac * (size_t)p->cap, sizeof(float));
			float *w = calloc((size_t)p->cap, sizeof(float));
			if (!a || !w) {
				free(a);
				free(w);
				st = SB_ERR_NOMEM;
				break;
			}
			free(g->acc);
			free(g->wsum);
			g->acc = a;
			g->wsum = w;
		}
	}
	if (st == SB_OK) {
		p->emit = malloc(sizeof(float) * (size_t)p->cap * p->out_ch);
		p->stem = malloc(sizeof(float) * (size_t)p->S * p->ac * (size_t)p->cap);
		if (!p->emit || !p->stem)
			st = SB_ERR_NOMEM;
	}

	return st;
}

sb_status sb_demucs_separate_kept(const sb_demucs_bag *bag, const sb_demucs_opts *opts,
                                  const sb_run_ctx *ctx, sb_kept *kept, sb_source *in,
                                  sb_sink *out)
{
	const sb_logger *log = ctx ? ctx->log : NULL;
	const sb_htdemucs_config *c0 = sb_htdemucs_cfg(bag->nets[0]);
	sb_demucs_opts o;
	sb_demucs_opts_default(&o);
	if (opts)
		o = *opts;
	if (!ctx || ctx->n_dev < 1 || ctx->n_dev > MAX_DEVS) {
		sb_log(log, SB_LOG_ERROR, "htdemucs: no device to run on");
		return SB_ERR_INVALID;
	}
	if (o.shifts < 0 || o.shifts > 32 || !(o.overlap >= 0 && o.overlap < 1)) {
		sb_log(log, SB_LOG_ERROR, "demucs: shifts must be 0..32 and overlap in [0, 1)");
		return SB_ERR_INVALID;
	}
	if (in->channels < 1 || in->channels > 2 || out->channels != in->channels) {
		sb_log(log, SB_LOG_ERROR, "htdemucs separates mono or stereo audio; this input has %d "
		       "channels (and the output %d)", in->channels, out->channels);
		return SB_ERR_UNSUPPORTED;
	}
	if (fabs(in->rate - c0->samplerate) > 1e-6) {
		sb_log(log, SB_LOG_ERROR, "htdemucs runs at %d Hz; the input is at %g Hz (the job runner "
		       "resamples it)", c0->samplerate, in->rate);
		return SB_ERR_INVALID;
	}
	pipeline p = {0};
	p.bag = bag;
	p.ctx = ctx;
	p.in = in;
	p.out = out;
	p.S = c0->n_sources;
	p.ac = c0->audio_channels;
	p.out_ch = out->channels;
	p.N = in->frames;
	map_stems(&p, c0);
	const atomic_int *cancel = ctx->cancel;
	/* the mix's mean and unbiased std, as demucs.separate takes them (model.h): read with the
	 * job's input, or here */
	sb_input_stats whole;
	sb_status st = SB_OK;
	if (ctx->input)
		whole = *ctx->input;
	else
		st = sb_input_stats_read(in, cancel, &whole);
	if (st != SB_OK) {
		if (st == SB_ERR_NOMEM)
			sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory");
		return st;
	}
	p.mean = whole.blocks_mean;
	p.std_ = whole.blocks_std;
	if (!(p.std_ > 0))
		return silent_input(&p);

	grid *grids = calloc(MAX_GRIDS, sizeof *grids);
	if (!grids)
		return SB_ERR_NOMEM;
	p.g = grids;
	int64_t total = 0;
	st = plan_grids(&p, &o, &total);

	/* the devices: segments per block, the most any device asks for */
	share_user su = {&p, grids, 1, {0}, kept, {NULL}};
	for (int i = 0; i < ctx->n_dev; i++) {
		su.batch[i] = device_batch(ctx, i, c0->segment_length);
		su.B = su.batch[i] > su.B ? su.batch[i] : su.B;
	}
	if (st == SB_OK && ctx->n_dev > 1)
		sb_log(log, SB_LOG_INFO, "htdemucs: %lld segments shared among %d devices, %d per task",
		       (long long)total, ctx->n_dev, su.B);
	if (kept) {
		sb_kept_begin(kept, log);
		for (int i = 0; i < ctx->n_dev; i++)
			if (keeps(&su, i) && (su.pre[i] = sb_kept_take(kept, &ctx->dev[i])))
				sb_log(log, SB_LOG_INFO, "htdemucs: weights already on %s (kept from the "
				       "last song)", ctx->dev[i].props ? ctx->dev[i].props->label : "the device");
	}
	if (st == SB_OK)
		st = sb_share_run(&share_ops, &su, ctx, total);
	if (kept) {
		/* a device that took no task this time keeps what it had */
		for (int i = 0; i < ctx->n_dev; i++)
			if (su.pre[i])
				sb_kept_put(kept, &ctx->dev[i], su.pre[i]);
		sb_kept_end(kept);
	}
	if (st == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory");
	for (int i = 0; i < p.n_grids; i++) {
		free(grids[i].coef);
		free(grids[i].acc);
		free(grids[i].wsum);
		free(grids[i].weight);
	}
	free(grids);
	free(p.emit);
	free(p.stem);
	return st;
}
