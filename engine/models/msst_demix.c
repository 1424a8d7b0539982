/* MSST's demix (utils/model_utils.py, generic mode) streamed, for every family of MSST
 * (msst_demix.h):
 *
 *   C = chunk_size (inference.chunk_size, else audio.chunk_size), step = C / num_overlap,
 *   border = C - step, fade = C / 10; a file longer than 2 border is reflect-padded by border at
 *   both ends; chunks start at 0, step, 2 step, ... while inside the padded file; a short last
 *   chunk is padded to C by reflecting itself when it is longer than C / 2, else by zeros;
 *   each chunk's output is weighted by a window that fades in and out linearly over fade
 *   samples (linspace(0, 1, fade)), summed, and divided by the summed weights (0 where they are
 *   0); the border is cut off again. The reference groups chunks into batches of
 *   inference.batch_size and shapes the window per batch: a batch that ends at the first chunk
 *   has no fade-in, the last batch has no fade-out in any of its chunks. Those windows are
 *   reproduced here whatever batches this engine runs, so the stems do not depend on the device.
 *   With inference.normalize the mix is normalised by the mean and (population) std of its
 *   channel average first and the stems scaled back (inference.py's normalize_audio).
 *
 * Streaming: chunks run in order, a window of C + B step samples per stem is kept, and every
 * sample before the next chunk's start goes to the sink: memory is flat in the file's length.
 *
 * Channels: a stereo model given mono duplicates it (as MSST does) and averages its output; a
 * mono model given stereo separates each channel on its own.
 */
#include "models/demucs/safetensors.h"
#include "models/msst_demix.h"
#include "models/resident.h"
#include "models/share.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_msst_net net;
	sb_msst_common m;
	sb_kept kept;                       /* the net placed on the devices the caller keeps open */
	int residual;                       /* the target model's second stem: mix - target */
	int out_of[SB_MSST_MAX_STEMS + 1];  /* canonical stem of each output (and the residual) */
} msst_model;

/* ---- demix ---- */

/* torch.linspace(a, b, n)[i] in float32, as ATen computes it: from the start in the first
 * half, from the end in the second */
static float torch_linspace(float a, float b, int64_t n, int64_t i)
{
	if (n == 1)
		return a;
	const float step = (b - a) / (float)(n - 1);
	return i < n / 2 ? a + step * (float)i : b - step * (float)(n - i - 1);
}

typedef struct {
	const sb_msst_net *net;
	const sb_run_ctx *ctx;
	sb_source *in;
	sb_sink *out;
	int ic, mc, lanes, S, B;
	int64_t N, C, step, border, fade, Np, off, n_chunks, cap, E;
	int bs; /* the reference's batch size, for its windows */
	double mean, std_;
	int normalize;
	float *window;  /* [C] */
	float *acc;     /* [S][lanes][mc][cap], padded positions E .. */
	float *wsum;    /* [cap] */
	float *raw;     /* [(2 C) ic]: a chunk's frames, and the span its reflections read */
	float *w;       /* [C]: a chunk's window */
	float *emit;    /* [cap ic] */
	float *mix;     /* [cap ic] */
	const int *out_of;
	int residual;
} demix;

/* padded position p (reflect padding by border when the file is padded) -> file frame */
static int64_t file_frame(const demix *d, int64_t p)
{
	int64_t k = p - d->off;
	if (k < 0)
		k = -k;
	if (k >= d->N)
		k = 2 * (d->N - 1) - k;
	return k;
}

/* the samples of chunk q, [lanes][mc][C], as the reference pads them */
static sb_status read_chunk(demix *d, int64_t q, float *dst)
{
	const int64_t start = q * d->step, len = d->Np - start < d->C ? d->Np - start : d->C;
	const int ic = d->ic;
	/* the padded positions [start, start + len) from the file: one contiguous read where no
	 * position is reflected; else the file frames they reflect to, read as one span into the
	 * second half of raw and placed from there (a read a frame took 0.4 s a chunk). The span
	 * is no wider than len <= C: positions reflect once at either end, into frames the
	 * interval's own part, or the reflected part of the other side, already spans. */
	const int64_t a = start - d->off, b = start + len - d->off;
	sb_status st = SB_OK;
	if (a >= 0 && b <= d->N) {
		st = d->in->read(d->in, a, len, d->raw);
	} else {
		int64_t lo = INT64_MAX, hi = -1;
		for (int64_t i = 0; i < len; i++) {
			const int64_t k = file_frame(d, start + i);
			lo = k < lo ? k : lo;
			hi = k > hi ? k : hi;
		}
		if (hi - lo + 1 > d->C)
			return SB_ERR_INVALID; /* not reached (above): raw's second half holds C frames */
		float *span = d->raw + d->C * ic;
		st = d->in->read(d->in, lo, hi - lo + 1, span);
		for (int64_t i = 0; i < len && st == SB_OK; i++)
			memcpy(d->raw + i * ic, span + (file_frame(d, start + i) - lo) * ic,
			       sizeof(float) * (size_t)ic);
	}
	if (st != SB_OK)
		return st;
	const int reflect = len > d->C / 2;
	for (int64_t i = 0; i < d->C; i++) {
		int64_t k = i;
		int zero = 0;
		if (i >= len) {
			if (reflect)
				k = 2 * (len - 1) - i;
			else
				zero = 1;
		}
		for (int l = 0; l < d->lanes; l++)
			for (int c = 0; c < d->mc; c++) {
				float v = 0.f;
				if (!zero) {
					const int src = d->lanes > 1 ? l : (ic == 1 ? 0 : c);
					v = d->raw[k * ic + src];
					if (d->normalize)
						v = (float)((v - d->mean) / d->std_);
				}
				dst[((int64_t)l * d->mc + c) * d->C + i] = v;
			}
	}
	return SB_OK;
}

/* the window of chunk q: fades, without the fade-in when its reference batch ends at the first
 * chunk, without the fade-out in the last batch */
static void chunk_window(const demix *d, int64_t q, float *w)
{
	const int64_t last_of_batch = (q / d->bs + 1) * d->bs - 1 < d->n_chunks - 1
	                                  ? (q / d->bs + 1) * d->bs - 1 : d->n_chunks - 1;
	memcpy(w, d->window, sizeof(float) * (size_t)d->C);
	if (last_of_batch == 0)
		for (int64_t i = 0; i < d->fade; i++)
			w[i] = 1.f;
	else if (last_of_batch == d->n_chunks - 1)
		for (int64_t i = d->C - d->fade; i < d->C; i++)
			w[i] = 1.f;
}

/* writes padded positions [E, F) that fall inside the file to the sink; slides the window */
static sb_status emit_until(demix *d, int64_t F)
{
	if (F > d->Np)
		F = d->Np;
	if (F <= d->E)
		return SB_OK;
	const int64_t n = F - d->E;
	const int ic = d->ic, S = d->S;
	/* the part of [E, F) inside the file: [lo, hi) in padded positions */
	const int64_t lo = d->E > d->off ? d->E : d->off,
	              hi = F < d->off + d->N ? F : d->off + d->N;
	sb_status st = SB_OK;
	if (hi > lo) {
		const int64_t m = hi - lo, skip = lo - d->E;
		if (d->residual)
			st = d->in->read(d->in, lo - d->off, m, d->mix);
		const int n_sink = d->out->n_stems;
		for (int stem = 0; stem < n_sink && st == SB_OK; stem++) {
			int has = 0;
			for (int s = 0; s <= S; s++)
				has |= (s < S || d->residual) && d->out_of[s] == stem;
			if (!has)
				continue;
			memset(d->emit, 0, sizeof(float) * (size_t)m * ic);
			for (int s = 0; s <= S; s++) {
				if (d->out_of[s] != stem || (s == S && !d->residual))
					continue;
				/* the residual is the mix minus the target (output 0) */
				const int o = s == S ? 0 : s;
				const float sign = s == S ? -1.f : 1.f;
				for (int64_t i = 0; i < m; i++) {
					const int64_t at = skip + i;
					const float ws = d->wsum[at];
					for (int c = 0; c < ic; c++) {
						float v;
						if (d->lanes > 1) {
							v = d->acc[(((int64_t)o * d->lanes + c) * d->mc) * d->cap + at];
							v = ws > 0 ? v / ws : 0.f;
						} else if (d->mc == ic) {
							v = d->acc[((int64_t)o * d->mc + c) * d->cap + at];
							v = ws > 0 ? v / ws : 0.f;
						} else { /* stereo model, mono input: the channels' average */
							const float v0 = d->acc[((int64_t)o * 2) * d->cap + at],
							            v1 = d->acc[((int64_t)o * 2 + 1) * d->cap + at];
							v = ws > 0 ? 0.5f * (v0 / ws + v1 / ws) : 0.f;
						}
						if (d->normalize)
							v = (float)(v * d->std_ + d->mean);
						if (s == S)
							v = d->mix[i * ic + c] + sign * v;
						d->emit[i * ic + c] += v;
					}
				}
			}
			st = d->out->write(d->out, stem, d->emit, m);
		}
	}
	if (st != SB_OK)
		return st;
	const int64_t keep = d->cap - n;
	const int planes = S * d->lanes * d->mc;
	for (int pl = 0; pl < planes; pl++) {
		float *a = d->acc + (int64_t)pl * d->cap;
		memmove(a, a + n, sizeof(float) * (size_t)keep);
		memset(a + keep, 0, sizeof(float) * (size_t)n);
	}
	memmove(d->wsum, d->wsum + n, sizeof(float) * (size_t)keep);
	memset(d->wsum + keep, 0, sizeof(float) * (size_t)n);
	d->E = F;
	return SB_OK;
}

/* ---- chunks shared among devices (models/share.h) ---- */

typedef struct {
	int64_t q0;     /* first chunk */
	int nb;         /* chunks */
	float *items;   /* [nb lanes][mc][C] */
} rf_block;

typedef struct {
	void *on;       /* the net placed on the device */
	int batch;      /* chunks per pass */
} rf_dev;

/* passes a device has enqueued and not yet waited for, at most; a block holds as many passes of
 * the device that takes the most chunks a pass, where the net can pipeline (sb_msst_net.submit) */
#define RF_IN_FLIGHT 2

typedef struct {
	demix *d;
	const sb_exec *dev;
	int B;                        /* chunks per block */
	int batch[SB_SHARE_MAX_DEVS]; /* each device's chunks per pass */
	int64_t next;                 /* the next chunk to hand out */
	sb_kept *kept;                /* where placements on the kept devices stay, or NULL */
	unsigned keep;                /* the devices' sb_run_ctx.keep */
	void *pre[SB_SHARE_MAX_DEVS]; /* kept from the last call (a kept_on), taken by the
	                                 device's thread at its first task */
} rf_share;

static int rf_keeps(const rf_share *u, int dev)
{
	return u->kept && dev < 32 && (u->keep >> dev & 1u);
}

/* a placement in the kept table (models/resident.h), which frees it by itself */
typedef struct {
	const sb_msst_net *net;
	void *on;
} kept_on;

static void rf_kept_free(void *state)
{
	kept_on *k = state;
	k->net->unplace(k->on);
	free(k);
}

/* the placement a kept_on holds, the wrapper freed */
static void *unwrap(kept_on *k)
{
	void *on = k ? k->on : NULL;
	free(k);
	return on;
}

static void *rf_make(void *user, int *n_tasks, int *units, sb_status *st)
{
	rf_share *u = user;
	demix *d = u->d;
	if (u->next >= d->n_chunks)
		return NULL;
	const int nb = d->n_chunks - u->next < u->B ? (int)(d->n_chunks - u->next) : u->B;
	const size_t item = (size_t)d->lanes * d->mc * (size_t)d->C;
	rf_block *b = calloc(1, sizeof *b);
	if (b)
		b->items = malloc(sizeof(float) * (size_t)nb * item);
	*st = b && b->items ? SB_OK : SB_ERR_NOMEM;
	for (int j = 0; j < nb && *st == SB_OK; j++)
		*st = read_chunk(d, u->next + j, b->items + (size_t)j * item);
	if (*st != SB_OK) {
		if (b)
			free(b->items);
		free(b);
		return NULL;
	}
	b->q0 = u->next;
	b->nb = nb;
	u->next += nb;
	*n_tasks = 1;
	*units = nb;
	return b;
}

static size_t rf_out_floats(void *user, const void *blk, int t)
{
	(void)t;
	const demix *d = ((const rf_share *)user)->d;
	return (size_t)((const rf_block *)blk)->nb * d->lanes * d->S * d->mc * (size_t)d->C;
}

static sb_status rf_run(void *user, int dev, void **dstate, const void *blk, int t, float *out,
                        const atomic_int *lost)
{
	(void)t;
	rf_share *u = user;
	const demix *d = u->d;
	const sb_run_ctx *ctx = d->ctx;
	const rf_block *b = blk;
	rf_dev *x = *dstate;
	if (!x) {
		if (!(x = calloc(1, sizeof *x)))
			return SB_ERR_NOMEM;
		*dstate = x;
		x->batch = u->batch[dev];
		sb_status st = SB_OK;
		if (u->pre[dev]) {
			x->on = unwrap(u->pre[dev]);
			u->pre[dev] = NULL;
		} else {
			/* a placement that outlives the call logs through the kept table's relay */
			st = d->net->place(d->net->net, &u->dev[dev],
			                   rf_keeps(u, dev) ? &u->kept->log : ctx->log, &x->on);
		}
		if (st != SB_OK)
			return st;
	}
	d->net->on_stop(x->on, ctx->cancel, lost);
	const size_t in_item = (size_t)d->lanes * d->mc * (size_t)d->C;
	const size_t out_item = (size_t)d->lanes * d->S * d->mc * (size_t)d->C;
	const sb_msst_net *net = d->net;
	/* the block's passes in order, the next one enqueued before the last is waited for where
	 * the net and the device pipeline (RF_IN_FLIGHT; sb_resident_end): the device goes from one
	 * pass to the next without waiting for the host */
	sb_resident_pass q[RF_IN_FLIGHT];
	int head = 0, out_n = 0;
	const int depth = net->submit ? RF_IN_FLIGHT : 1;
	sb_status st = SB_OK;
	for (int j = 0; (j < b->nb || out_n) && st == SB_OK;) {
		if (j < b->nb && out_n < depth) {
			const int n = b->nb - j < x->batch ? b->nb - j : x->batch;
			const float *in = b->items + (size_t)j * in_item;
			float *o = out + (size_t)j * out_item;
			sb_resident_pass *pp = &q[(head + out_n) % RF_IN_FLIGHT];
			sb_status s2 = net->submit ? net->submit(x->on, n * d->lanes, in, o, pp)
			                           : net->forward(x->on, n * d->lanes, in, o);
			if (net->submit)
				out_n++;
			if (s2 == SB_OK) {
				j += n;
				continue;
			}
			/* the passes before it and its own, waited for (or dropped) first */
			for (; out_n; out_n--, head = (head + 1) % RF_IN_FLIGHT) {
				const sb_status s3 = net->collect(x->on, &q[head]);
				if (s3 != SB_OK && st == SB_OK && out_n > 1) /* not the failed one (last) */
					st = s3;
			}
			if (st == SB_OK && s2 == SB_ERR_DEVICE_OOM && x->batch > 1) {
				sb_log(ctx->log, SB_LOG_WARNING, "%s ran out of memory at %d chunks per pass: "
				       "one at a time from now on", u->dev[dev].props ? u->dev[dev].props->label
				       : "a device", x->batch);
				x->batch = 1;
				continue; /* again from chunk j */
			}
			if (st == SB_OK)
				st = s2;
			break;
		}
		st = net->collect(x->on, &q[head]);
		head = (head + 1) % RF_IN_FLIGHT;
		out_n--;
	}
	/* after a failure, the passes still on the device are given up */
	for (; out_n; out_n--, head = (head + 1) % RF_IN_FLIGHT)
		net->collect(x->on, &q[head]);
	return st;
}

/* a block's chunks, in order, weighted by their windows into the accumulators; what comes
 * before its first chunk is final and goes to the sink first */
static sb_status rf_commit(void *user, const void *blk, float *const *outs)
{
	demix *d = ((rf_share *)user)->d;
	const rf_block *b = blk;
	sb_status st = emit_until(d, b->q0 * d->step);
	for (int j = 0; j < b->nb && st == SB_OK; j++) {
		const int64_t q = b->q0 + j, start = q * d->step;
		const int64_t len = d->Np - start < d->C ? d->Np - start : d->C;
		chunk_window(d, q, d->w);
		const int64_t at = start - d->E;
		for (int l = 0; l < d->lanes; l++)
			for (int s = 0; s < d->S; s++)
				for (int cc = 0; cc < d->mc; cc++) {
					/* forward's output: [item = chunk lanes + lane][S][mc][C] */
					const float *y = outs[0] + ((((size_t)j * d->lanes + l) * d->S + s) * d->mc + cc) *
					                               (size_t)d->C;
					float *a = d->acc + (((size_t)s * d->lanes + l) * d->mc + cc) * d->cap + at;
					for (int64_t i = 0; i < len; i++)
						a[i] += y[i] * d->w[i];
				}
		for (int64_t i = 0; i < len; i++)
			d->wsum[at + i] += d->w[i];
	}
	return st;
}

static void rf_free_block(void *user, void *blk)
{
	(void)user;
	rf_block *b = blk;
	free(b->items);
	free(b);
}

/* after every device thread has ended: a placement on a device the caller keeps open goes back
 * to the kept table */
static void rf_release(void *user, int dev, void *dstate)
{
	rf_share *u = user;
	rf_dev *x = dstate;
	const sb_msst_net *net = u->d->net;
	kept_on *k = x->on && rf_keeps(u, dev) ? malloc(sizeof *k) : NULL;
	if (k) {
		net->on_stop(x->on, NULL, NULL); /* this call's flags end with it */
		k->net = net;
		k->on = x->on;
		sb_kept_put(u->kept, &u->dev[dev], k);
		x->on = NULL;
	}
	if (x->on)
		net->unplace(x->on);
	free(x);
}

static const sb_share_ops rf_share_ops = {"msst", "chunk", rf_make, rf_out_floats, rf_run,
                                          rf_commit, rf_free_block, rf_release};

static sb_status run_demix(msst_model *rm, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	const sb_msst_net *net = &rm->net;
	const sb_msst_common *c = &rm->m;
	if (in->channels < 1 || in->channels > 2 || out->channels != in->channels) {
		sb_log(ctx->log, SB_LOG_ERROR, "%s: takes 1 or 2 channels (given %d)",
		       net->label, in->channels);
		return SB_ERR_INVALID;
	}
	demix d = {0};
	d.net = net;
	d.ctx = ctx;
	d.in = in;
	d.out = out;
	d.ic = in->channels;
	d.mc = net->channels;
	d.lanes = d.mc == 1 && d.ic == 2 ? 2 : 1;
	d.S = net->outputs;
	d.N = in->frames;
	d.C = c->chunk_size;
	d.step = d.C / c->num_overlap;
	d.border = d.C - d.step;
	d.fade = d.C / 10;
	const int padded = d.N > 2 * d.border && d.border > 0;
	d.off = padded ? d.border : 0;
	d.Np = d.N + 2 * d.off;
	d.n_chunks = (d.Np + d.step - 1) / d.step;
	d.bs = c->batch_size;
	d.out_of = rm->out_of;
	d.residual = rm->residual;
	d.normalize = c->normalize;
	sb_run_devices rd;
	sb_status st = sb_run_devices_open(ctx, &rd);
	if (st != SB_OK)
		return st;
	/* chunks per pass on each device: the job's choice, else the device's, as many as a
	 * quarter of its memory holds (the net's pass_bytes a chunk), no more than its largest
	 * buffer; a block is the most any device takes in RF_IN_FLIGHT passes where it pipelines,
	 * in one elsewhere */
	rf_share su = {&d, rd.ctx.dev, 1, {0}, 0, &rm->kept, rd.ctx.keep, {NULL}};
	const int n_dev = rd.ctx.n_dev < SB_SHARE_MAX_DEVS ? rd.ctx.n_dev : SB_SHARE_MAX_DEVS;
	for (int i = 0; i < n_dev; i++) {
		const sb_exec *dev = &rd.ctx.dev[i];
		int B = rd.ctx.batch > 0 ? rd.ctx.batch : dev->be->batch(dev->d);
		B = B < 1 ? 1 : B > 8 ? 8 : B;
		const double mem = dev->props && dev->props->global_mem ? (double)dev->props->global_mem
		                                                        : 0;
		const double big = dev->props && dev->props->max_alloc ? (double)dev->props->max_alloc : 0;
		while (B > 1 && ((mem > 0 && B * net->pass_bytes > mem / 4) ||
		                 (big > 0 && B * net->largest_bytes > big)))
			B--;
		su.batch[i] = B;
		const int passes = net->submit && dev->be->pass_end ? RF_IN_FLIGHT : 1;
		su.B = B * passes > su.B ? B * passes : su.B;
	}
	if (su.B > d.n_chunks)
		su.B = (int)d.n_chunks;
	d.B = su.B;
	d.cap = d.C + (int64_t)d.B * d.step;
	const size_t planes = (size_t)d.S * d.lanes * d.mc;
	d.window = malloc(sizeof(float) * (size_t)d.C);
	d.acc = calloc(planes * (size_t)d.cap, sizeof(float));
	d.wsum = calloc((size_t)d.cap, sizeof(float));
	d.raw = malloc(sizeof(float) * 2 * (size_t)d.C * d.ic);
	d.emit = malloc(sizeof(float) * (size_t)d.cap * d.ic);
	d.mix = malloc(sizeof(float) * (size_t)d.cap * d.ic);
	d.w = malloc(sizeof(float) * (size_t)d.C);
	if (!d.window || !d.acc || !d.wsum || !d.raw || !d.emit || !d.mix || !d.w) {
		st = SB_ERR_NOMEM;
		goto out;
	}
	/* _getWindowingArray: ones, the last fade values torch.linspace(1, 0, fade), the first
	 * torch.linspace(0, 1, fade) */
	for (int64_t i = 0; i < d.C; i++)
		d.window[i] = 1.f;
	for (int64_t i = 0; i < d.fade; i++) {
		d.window[d.C - d.fade + i] = torch_linspace(1.f, 0.f, d.fade, i);
		d.window[i] = torch_linspace(0.f, 1.f, d.fade, i);
	}
	if (d.normalize) {
		/* the mix's mean and population std, as MSST's normalize_audio takes them (model.h):
		 * read with the job's input, or here */
		sb_input_stats whole;
		if (ctx->input)
			whole = *ctx->input;
		else
			st = sb_input_stats_read(in, NULL, &whole);
		if (st != SB_OK)
			goto out;
		d.mean = whole.frames_mean;
		d.std_ = whole.frames_std;
		if (!(d.std_ > 0))
			d.normalize = 0; /* a constant input: nothing to scale */
	}
	if (n_dev > 1)
		sb_log(ctx->log, SB_LOG_INFO, "%s: %lld chunks shared among %d devices, %d per task",
		       net->label, (long long)d.n_chunks, n_dev, d.B);
	sb_kept_begin(&rm->kept, ctx->log);
	for (int i = 0; i < n_dev; i++)
		if (rf_keeps(&su, i) && (su.pre[i] = sb_kept_take(&rm->kept, &rd.ctx.dev[i])))
			sb_log(ctx->log, SB_LOG_INFO, "%s: weights already on %s (kept from the last song)",
			       net->label,
			       rd.ctx.dev[i].props ? rd.ctx.dev[i].props->label : "the device");
	st = sb_share_run(&rf_share_ops, &su, &rd.ctx, d.n_chunks);
	/* a device that took no chunk this time keeps what it had */
	for (int i = 0; i < n_dev; i++)
		if (su.pre[i])
			sb_kept_put(&rm->kept, &rd.ctx.dev[i], su.pre[i]);
	sb_kept_end(&rm->kept);
	if (st == SB_OK)
		st = emit_until(&d, d.Np);
out:
	sb_run_devices_close(&rd);
	free(d.window);
	free(d.acc);
	free(d.wsum);
	free(d.raw);
	free(d.emit);
	free(d.mix);
	free(d.w);
	return st;
}

/* ---- the model ---- */

static sb_status mm_separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	return run_demix(m->impl, ctx, in, out);
}

static void mm_free(sb_model *m)
{
	if (!m)
		return;
	msst_model *mm = m->impl;
	if (mm) {
		sb_kept_clear(&mm->kept); /* the placements point into the net's weights */
		if (mm->net.net)
			mm->net.free_net(mm->net.net);
	}
	free(mm);
	free(m);
}

static const sb_model_vtable mm_vt = {mm_separate, mm_free};

sb_status sb_msst_model_new(const sb_msst_net *net, const sb_msst_common *c, const char *name,
                            const char *path, const char *what, unsigned ops, sb_model **out)
{
	*out = NULL;
	sb_model *m = calloc(1, sizeof *m);
	msst_model *mm = calloc(1, sizeof *mm);
	if (!m || !mm) {
		free(m);
		free(mm);
		net->free_net(net->net);
		return SB_ERR_NOMEM;
	}
	m->vt = &mm_vt;
	m->impl = mm;
	mm->net = *net;
	mm->m = *c;
	sb_kept_init(&mm->kept, rf_kept_free);
	const char *names[SB_MSST_MAX_STEMS];
	const int n = sb_msst_stems(c, names);
	unsigned mask = 0;
	char list[256] = "";
	for (int s = 0; s < n; s++) {
		const int k = sb_stem_index(names[s]);
		mm->out_of[s] = k >= 0 ? k : SB_STEM_OTHER;
		mask |= 1u << mm->out_of[s];
		const size_t at = strlen(list);
		snprintf(list + at, sizeof list - at, "%s%s", s ? ", " : "", names[s]);
	}
	/* one target: the other instruments are the mix minus it, named after the other
	 * instrument where there is one ([vocals, other], [vocals, instrumental]), else "other" */
	if (c->target[0]) {
		const char *other = NULL;
		int others = 0;
		for (int i = 0; i < c->n_instruments; i++)
			if (strcmp(c->instruments[i], c->target) && !others++)
				other = c->instruments[i];
		if (others > 1)
			other = "other";
		const int k = other ? sb_stem_index(other) : -1;
		mm->residual = 1;
		mm->out_of[n] = k >= 0 && k != mm->out_of[0] ? k : SB_STEM_OTHER;
		if (mm->out_of[n] == mm->out_of[0]) /* a target called "other": the rest is vocals */
			mm->out_of[n] = SB_STEM_VOCALS;
		mask |= 1u << mm->out_of[n];
		const size_t at = strlen(list);
		snprintf(list + at, sizeof list - at, ", %s (the mix minus %s)",
		         other ? other : "other", c->target);
	}
	sb_model_info *info = &m->info;
	snprintf(info->name, sizeof info->name, "%s", name);
	snprintf(info->path, sizeof info->path, "%s", path);
	snprintf(info->description, sizeof info->description, "%s: %s", what, list);
	info->native_rate = c->audio_rate;
	int k2 = 0;
	for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
		if (mask & (1u << k))
			info->stem_names[k2++] = sb_stem_names[k];
	info->n_stems = k2;
	info->stems = mask;
	info->stems_sum = mm->residual;
	info->shares_devices = 1; /* chunks dealt out to every device (models/share.h) */
	info->default_chunk_frames = c->chunk_size;
	info->ops = ops;
	*out = m;
	return SB_OK;
}

const sb_msst_net *sb_msst_model_net(const sb_model *m)
{
	return m && m->vt == &mm_vt ? &((const msst_model *)m->impl)->net : NULL;
}

int sb_msst_file_is(const char *path, const char *const *families)
{
	sb_safetensors *st = NULL;
	if (sb_safetensors_open(path, NULL, &st) != SB_OK)
		return 0;
	const char *f = sb_safetensors_meta(st, "family");
	int yes = 0;
	for (const char *const *q = families; f && *q && !yes; q++)
		yes = !strcmp(f, *q);
	sb_safetensors_close(st);
	return yes;
}
