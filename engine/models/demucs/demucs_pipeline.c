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
 */
#include "models/demucs/demucs_internal.h"
#include "backend/cpu/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GRIDS 256

typedef struct {
	int64_t Ls, stride, s0, length; /* segment, stride, origin and length in file frames */
	int64_t next, n_segs;
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

static int64_t grid_next_start(const grid *g)
{
	return g->next < g->n_segs ? g->s0 + g->next * g->stride : INT64_MAX;
}

/* Mean and unbiased std of the channel-averaged model input over the whole file, one block
 * at a time (Chan et al.'s pairwise update of mean and M2). */
static sb_status file_stats(sb_source *in, const atomic_int *cancel, double *mean,
                            double *std_)
{
	enum { B = 65536 };
	float *buf = malloc(sizeof(float) * B * (size_t)in->channels);
	if (!buf)
		return SB_ERR_NOMEM;
	double n = 0, m = 0, m2 = 0;
	sb_status st = SB_OK;
	for (int64_t at = 0; at < in->frames && st == SB_OK; at += B) {
		if (cancel && atomic_load(cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		const int64_t nb = in->frames - at < B ? in->frames - at : B;
		st = in->read(in, at, nb, buf);
		if (st != SB_OK)
			break;
		/* the reference's ref is the mean of the model's input channels: a stereo input is
		 * averaged either way, a mono one duplicated (or kept) */
		double s = 0;
		for (int64_t i = 0; i < nb; i++)
			s += in->channels == 2 ? 0.5 * ((double)buf[2 * i] + buf[2 * i + 1]) : buf[i];
		const double bm = s / (double)nb;
		double bq = 0;
		for (int64_t i = 0; i < nb; i++) {
			const double v = in->channels == 2 ? 0.5 * ((double)buf[2 * i] + buf[2 * i + 1])
			                                   : buf[i];
			bq += (v - bm) * (v - bm);
		}
		const double tot = n + (double)nb, d = bm - m;
		m += d * (double)nb / tot;
		m2 += bq + d * d * n * (double)nb / tot;
		n = tot;
	}
	free(buf);
	*mean = m;
	*std_ = n > 1 ? sqrt(m2 / (n - 1)) : 0;
	return st;
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
} pipe;

/* Write frames [E, F) of every grid's window to the sink and slide the windows. */
static sb_status emit_until(pipe *p, int64_t F)
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
static sb_status read_chunk(pipe *p, int64_t start, int64_t Ls, float *raw, float *x)
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

static sb_status silent_input(pipe *p)
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

/* Each source goes to the sink's stem of its canonical name (core/stream.h); a source whose
 * name is not canonical, or whose stem the sink has no room for (a four-stem sink and
 * htdemucs_6s's guitar and piano), folds into "other", so that the stems keep summing to the
 * mix. Two sources of one name add up. */
static void map_stems(pipe *p, const sb_htdemucs_config *cfg)
{
	const int n_out = p->out->n_stems;
	for (int s = 0; s < p->S; s++) {
		const int k = sb_stem_index(cfg->sources[s]);
		p->stem_of[s] = k >= 0 && k < n_out ? k : n_out > SB_STEM_OTHER ? SB_STEM_OTHER : -1;
	}
}

sb_status sb_demucs_separate(const sb_demucs_bag *bag, const sb_demucs_opts *opts,
                             const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	const sb_logger *log = ctx ? ctx->log : NULL;
	const sb_htdemucs_config *c0 = sb_htdemucs_cfg(bag->nets[0]);
	sb_demucs_opts o;
	sb_demucs_opts_default(&o);
	if (opts)
		o = *opts;
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
	pipe p = {0};
	p.bag = bag;
	p.ctx = ctx;
	p.in = in;
	p.out = out;
	p.S = c0->n_sources;
	p.ac = c0->audio_channels;
	p.out_ch = out->channels;
	p.N = in->frames;
	map_stems(&p, c0);
	const atomic_int *cancel = ctx ? ctx->cancel : NULL;
	sb_status st = file_stats(in, cancel, &p.mean, &p.std_);
	if (st != SB_OK) {
		if (st == SB_ERR_NOMEM)
			sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory");
		return st;
	}
	if (!(p.std_ > 0))
		return silent_input(&p);

	/* grids: one per (model, shift) unless offsets and lengths coincide */
	const int shifts = o.shifts > 0 ? o.shifts : 1;
	const int64_t max_shift = o.shifts > 0 ? (int64_t)(0.5 * c0->samplerate) : 0;
	uint64_t rng = ctx ? ctx->seed : 0;
	grid *grids = calloc(MAX_GRIDS, sizeof *grids);
	float *raw = NULL, *x = NULL, *seg = NULL;
	sb_pool *pool = NULL;
	sb_htdemucs_ws *ws = NULL;
	sb_htdemucs_cl *on_dev[64] = {0};
	if (!grids)
		return SB_ERR_NOMEM;
	p.g = grids;
	int64_t total = 0, done = 0;
	for (int k = 0; k < bag->n && st == SB_OK; k++) {
		const sb_htdemucs_config *ck = sb_htdemucs_cfg(bag->nets[k]);
		double tot[SB_HTDEMUCS_MAX_SOURCES];
		for (int s = 0; s < p.S; s++) {
			tot[s] = 0;
			for (int j = 0; j < bag->n; j++)
				tot[s] += bag->weights[j * p.S + s];
		}
		for (int sh = 0; sh < shifts && st == SB_OK; sh++) {
			const int64_t off = max_shift ? (int64_t)(splitmix64(&rng) % (uint64_t)(max_shift + 1)) : 0;
			const int64_t Ls = ck->segment_length, s0 = off - max_shift;
			int gi = 0;
			while (gi < p.n_grids && !(grids[gi].Ls == Ls && grids[gi].s0 == s0 &&
			                           grids[gi].n_nets < 64))
				gi++;
			if (gi == MAX_GRIDS) {
				sb_log(log, SB_LOG_ERROR, "htdemucs: %d models x %d shifts is more than %d runs "
				       "over the file", bag->n, shifts, MAX_GRIDS);
				st = SB_ERR_INVALID;
				break;
			}
			grid *g = &grids[gi];
			if (gi == p.n_grids) {
				p.n_grids++;
				g->Ls = Ls;
				g->s0 = s0;
				g->stride = (int64_t)((1.0 - o.overlap) * (double)Ls);
				if (g->stride < 1)
					g->stride = 1;
				g->length = p.N - s0;
				g->n_segs = (g->length + g->stride - 1) / g->stride;
				g->coef = calloc((size_t)64 * p.S, sizeof(double));
				g->acc = calloc((size_t)p.S * p.ac * (size_t)Ls, sizeof(float));
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
				if (Ls > p.cap)
					p.cap = Ls;
			}
			for (int s = 0; s < p.S; s++)
				g->coef[(size_t)g->n_nets * p.S + s] = bag->weights[k * p.S + s] / tot[s] / shifts;
			g->nets[g->n_nets++] = k;
			total += g->n_segs;
		}
	}
	/* every grid's window must be as long as the longest segment */
	for (int gi = 0; gi < p.n_grids && st == SB_OK; gi++) {
		grid *g = &grids[gi];
		if (g->Ls < p.cap) {
			float *a = calloc((size_t)p.S * p.ac * (size_t)p.cap, sizeof(float));
			float *w = calloc((size_t)p.cap, sizeof(float));
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
		p.emit = malloc(sizeof(float) * (size_t)p.cap * p.out_ch);
		p.stem = malloc(sizeof(float) * (size_t)p.S * p.ac * (size_t)p.cap);
		raw = malloc(sizeof(float) * (size_t)p.cap * in->channels);
		x = malloc(sizeof(float) * (size_t)p.ac * p.cap);
		seg = malloc(sizeof(float) * (size_t)p.S * p.ac * p.cap);
		if (!p.emit || !p.stem || !raw || !x || !seg)
			st = SB_ERR_NOMEM;
	}
	if (st == SB_OK)
		st = sb_pool_new(ctx ? ctx->threads : 0, &pool);
	if (st == SB_OK && !(ws = sb_htdemucs_ws_new()))
		st = SB_ERR_NOMEM;
	/* on a device: every model's weights go there once for the whole file */
	for (int k = 0; st == SB_OK && ctx && ctx->cl && k < bag->n && k < 64; k++)
		st = sb_htdemucs_cl_new(bag->nets[k], ctx->cl, log, &on_dev[k]);
	sb_gemm_init();

	while (st == SB_OK) {
		int gi = -1;
		for (int i = 0; i < p.n_grids; i++)
			if (grid_next_start(&grids[i]) != INT64_MAX &&
			    (gi < 0 || grid_next_start(&grids[i]) < grid_next_start(&grids[gi])))
				gi = i;
		if (gi < 0)
			break;
		grid *g = &grids[gi];
		const int64_t a = g->next * g->stride;                 /* in the grid's frames */
		const int64_t cl = g->length - a < g->Ls ? g->length - a : g->Ls;
		const int64_t delta = g->Ls - cl;
		const int64_t os = g->s0 + a;                          /* in file frames */
		st = read_chunk(&p, os - delta / 2, g->Ls, raw, x);
		for (int ni = 0; ni < g->n_nets && st == SB_OK; ni++) {
			if (cancel && atomic_load(cancel)) {
				st = SB_ERR_CANCELLED;
				break;
			}
			const int k = g->nets[ni];
			if (on_dev[k])
				st = sb_htdemucs_forward_cl(on_dev[k], pool, ws, x, seg, NULL, NULL, log);
			else
				st = sb_htdemucs_forward(bag->nets[k], pool, ws, x, seg, NULL, NULL, log);
			if (st != SB_OK)
				break;
			const double *coef = g->coef + (size_t)ni * p.S;
			for (int s = 0; s < p.S; s++)
				for (int c = 0; c < p.ac; c++) {
					const float *src = seg + ((size_t)s * p.ac + c) * g->Ls + delta / 2;
					float *acc = g->acc + ((size_t)s * p.ac + c) * p.cap;
					const float cf = (float)coef[s];
					for (int64_t i = 0; i < cl; i++) {
						const int64_t f = os + i;
						if (f >= p.E && f < p.N)
							acc[f - p.E] += cf * g->weight[i] * src[i];
					}
				}
			done++;
			if (ctx && ctx->progress)
				ctx->progress(ctx->progress_user, (double)done / (double)total, "separating");
		}
		if (st != SB_OK)
			break;
		for (int64_t i = 0; i < cl; i++) {
			const int64_t f = os + i;
			if (f >= p.E && f < p.N)
				g->wsum[f - p.E] += g->weight[i];
		}
		g->next++;
		int64_t F = INT64_MAX;
		for (int i = 0; i < p.n_grids; i++) {
			const int64_t ns = grid_next_start(&grids[i]);
			F = ns < F ? ns : F;
		}
		st = emit_until(&p, F);
	}
	if (st == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory");
	for (int k = 0; k < 64; k++)
		sb_htdemucs_cl_free(on_dev[k]);
	sb_pool_free(pool);
	sb_htdemucs_ws_free(ws);
	for (int i = 0; i < p.n_grids; i++) {
		free(grids[i].coef);
		free(grids[i].acc);
		free(grids[i].wsum);
		free(grids[i].weight);
	}
	free(grids);
	free(p.emit);
	free(p.stem);
	free(raw);
	free(x);
	free(seg);
	return st;
}
