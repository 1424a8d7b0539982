/* The cross-domain transformer of HTDemucs (demucs/transformer.py, CrossTransformerEncoder with
 * the released settings: sine embeddings, LayerNorm on input, pre-norm layers with LayerScale
 * and a final GroupNorm(1, D) per layer, GELU feed-forward, self-attention layers at even
 * indices and cross-attention layers at odd ones, where the frequency tokens attend to the
 * time tokens and the time tokens to the frequency tokens of before that layer).
 *
 * Tokens are rows: x [Fr * T1][D] (token t1 * Fr + fr, the reference's "b (t1 fr) c"),
 * xt [T2][D]. Attention runs one (head, block of query rows) per task, so a task's score
 * block (QB x keys) stays in cache through scale, softmax and the product with V.
 */
#include "backend/cpu/gemm.h"
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QB 256 /* query rows per attention task: fewer repacks of K than 128, still in cache */

typedef struct {
	float *x;
	const float *y, *w, *b, *g;
	int D, cols;
	float *out;
	int64_t n;
	double *sum, *sq;
	double mean, rstd;
} tok_job;

static void layernorm_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	const int D = j->D;
	for (int64_t r = b; r < e; r++) {
		const float *x = j->x + r * D;
		float *o = j->out + r * D;
		double s = 0, q = 0;
		for (int d = 0; d < D; d++)
			s += x[d];
		const double mean = s / D;
		for (int d = 0; d < D; d++)
			q += (x[d] - mean) * (x[d] - mean);
		const float rstd = (float)(1.0 / sqrt(q / D + 1e-5));
		const float m = (float)mean;
		for (int d = 0; d < D; d++)
			o[d] = (x[d] - m) * rstd * j->w[d] + j->b[d];
	}
}

/* out = LayerNorm(x) over the last dimension (eps 1e-5); out may be x */
static void layernorm(sb_pool *pool, const float *x, float *out, int64_t n, int D, const float *w,
                      const float *b)
{
	tok_job j = {0};
	j.x = (float *)x;
	j.out = out;
	j.D = D;
	j.w = w;
	j.b = b;
	sb_pool_for(pool, n, 16, layernorm_part, &j);
}

static void bias_cols_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->cols;
		for (int c = 0; c < j->cols; c++)
			x[c] += j->b[c];
	}
}

static void bias_gelu_cols_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		hd_vbias_gelu_cols(j->x + r * j->cols, j->cols, j->b);
	}
}

/* y [n][out] = x [n][in] W^T + b, as nn.Linear; optional GELU */
static void linear(sb_pool *pool, const float *x, int64_t n, int in, const float *w,
                   const float *b, int out, float *y, int gelu)
{
	sb_sgemm_par(pool, 0, 1, (int)n, out, in, 1.f, x, in, w, in, 0.f, y, out);
	tok_job j = {0};
	j.x = y;
	j.b = b;
	j.cols = out;
	sb_pool_for(pool, n, 16, gelu ? bias_gelu_cols_part : bias_cols_part, &j);
}

static void scale_add_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->D;
		const float *y = j->y + r * j->D;
		for (int d = 0; d < j->D; d++)
			x[d] += j->g[d] * y[d];
	}
}

/* x += g * y (LayerScale on a residual branch) */
static void scale_add(sb_pool *pool, float *x, const float *y, const float *g, int64_t n, int D)
{
	tok_job j = {0};
	j.x = x;
	j.y = y;
	j.g = g;
	j.D = D;
	sb_pool_for(pool, n, 16, scale_add_part, &j);
}

static void gn_stats_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		hd_vsum_sq(j->x + r * j->D, j->D, &j->sum[r], &j->sq[r]);
	}
}

static void gn_apply_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const tok_job *j = vj;
	const float m = (float)j->mean, rs = (float)j->rstd;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->D;
		for (int d = 0; d < j->D; d++)
			x[d] = (x[d] - m) * rs * j->w[d] + j->b[d];
	}
}

/* MyGroupNorm(1, D): one mean and variance over all tokens and channels, affine per channel */
static sb_status groupnorm_tokens(sb_pool *pool, sb_htdemucs_ws *ws, float *x, int64_t n, int D, const float *w,
                                  const float *b)
{
	double *buf = hd_alloc(ws, sizeof(double) * 2 * (size_t)n);
	if (!buf)
		return SB_ERR_NOMEM;
	tok_job j = {0};
	j.x = x;
	j.D = D;
	j.w = w;
	j.b = b;
	j.sum = buf;
	j.sq = buf + n;
	sb_pool_for(pool, n, 16, gn_stats_part, &j);
	double s = 0, q = 0;
	for (int64_t r = 0; r < n; r++) {
		s += buf[r];
		q += buf[n + r];
	}
	const double cnt = (double)n * D;
	j.mean = s / cnt;
	double var = q / cnt - j.mean * j.mean;
	j.rstd = 1.0 / sqrt((var > 0 ? var : 0) + 1e-5);
	sb_pool_for(pool, n, 16, gn_apply_part, &j);
	hd_free(ws, buf);
	return SB_OK;
}

typedef struct {
	const float *q, *k, *v; /* row strides ldq, ldkv; head h at column h * hd */
	int ldq, ldkv;
	float *o; /* [nq][D] */
	int64_t nq, nk;
	int heads, hd, D, nblocks;
	float *scratch; /* per worker QB x nk */
	float scale;
} attn_job;

static void attn_part(void *vj, int64_t b, int64_t e, int worker)
{
	const attn_job *j = vj;
	float *s = j->scratch + (size_t)worker * QB * (size_t)j->nk;
	const int nk = (int)j->nk;
	for (int64_t task = b; task < e; task++) {
		const int h = (int)(task / j->nblocks);
		const int64_t q0 = (task % j->nblocks) * QB;
		const int nq = (int)(q0 + QB <= j->nq ? QB : j->nq - q0);
		sb_sgemm(0, 1, nq, nk, j->hd, j->scale, j->q + q0 * j->ldq + h * j->hd, j->ldq,
		         j->k + h * j->hd, j->ldkv, 0.f, s, nk);
		for (int r = 0; r < nq; r++) {
			float *row = s + (size_t)r * nk;
			const float sum = hd_vexp_sum(row, nk, hd_vmax(row, nk));
			hd_vscale(row, nk, 1.f / sum);
		}
		sb_sgemm(0, 0, nq, j->hd, nk, 1.f, s, nk, j->v + h * j->hd, j->ldkv, 0.f,
		         j->o + q0 * j->D + h * j->hd, j->D);
	}
}

/* softmax(Q K^T / sqrt(hd)) V per head, into o [nq][D] */
static sb_status attention(sb_pool *pool, sb_htdemucs_ws *ws, const float *q, int ldq, const float *k,
                           const float *v, int ldkv, int64_t nq, int64_t nk, int heads, int D,
                           float *o)
{
	attn_job j = {q, k, v, ldq, ldkv, o, nq, nk, heads, D / heads, D,
	              (int)((nq + QB - 1) / QB), NULL, 0};
	j.scale = 1.f / sqrtf((float)j.hd);
	j.scratch = hd_alloc(ws, sizeof(float) * QB * (size_t)nk * (size_t)sb_pool_threads(pool));
	if (!j.scratch)
		return SB_ERR_NOMEM;
	sb_pool_for(pool, (int64_t)heads * j.nblocks, 1, attn_part, &j);
	hd_free(ws, j.scratch);
	return SB_OK;
}

/* One layer (self-attention when kv is NULL, else cross-attention to kv), in place on x.
 * buf: n * (3D + hidden) + nkv * 2D floats of scratch. */
static sb_status run_layer(const sb_htdemucs *net, const hd_tlayer *L, sb_pool *pool,
                           sb_htdemucs_ws *ws, float *x,
                           int64_t n, const float *kv, int64_t nkv, float *buf)
{
	const int D = net->dim, Hd = net->hidden, heads = net->cfg.t_heads;
	float *h = buf;                     /* n x D: normalised input */
	float *a = h + (size_t)n * D;       /* n x D: attention output */
	float *big = a + (size_t)n * D;     /* n x 3D (qkv) or n x Hd (feed-forward) */
	sb_status st;
	layernorm(pool, x, h, n, D, L->n1w, L->n1b);
	if (!kv) {
		linear(pool, h, n, D, L->in_w, L->in_b, 3 * D, big, 0);
		st = attention(pool, ws, big, 3 * D, big + D, big + 2 * D, 3 * D, n, n, heads, D, h);
	} else {
		float *hk = big + (size_t)n * D;     /* nkv x D */
		float *kvp = hk + (size_t)nkv * D;   /* nkv x 2D */
		layernorm(pool, kv, hk, nkv, D, L->n2w, L->n2b);
		linear(pool, h, n, D, L->in_w, L->in_b, D, big, 0);
		linear(pool, hk, nkv, D, L->in_w + (size_t)D * D, L->in_b + D, 2 * D, kvp, 0);
		st = attention(pool, ws, big, D, kvp, kvp + D, 2 * D, n, nkv, heads, D, h);
	}
	if (st != SB_OK)
		return st;
	linear(pool, h, n, D, L->out_w, L->out_b, D, a, 0);
	scale_add(pool, x, a, L->g1, n, D);
	layernorm(pool, x, h, n, D, kv ? L->n3w : L->n2w, kv ? L->n3b : L->n2b);
	linear(pool, h, n, D, L->l1w, L->l1b, Hd, big, 1);
	linear(pool, big, n, Hd, L->l2w, L->l2b, D, a, 0);
	scale_add(pool, x, a, L->g2, n, D);
	return groupnorm_tokens(pool, ws, x, n, D, L->now, L->nob);
}

/* transformer.py create_2d_sin_embedding, in float as the reference computes it */
void hd_pos_2d(float *x, int D, int Fr, int T1)
{
	const int half = D / 2;
	const float k = (float)(-(log(10000.0) / half));
	for (int t = 0; t < T1; t++)
		for (int f = 0; f < Fr; f++) {
			float *row = x + ((size_t)t * Fr + f) * D;
			for (int i = 0; i < half / 2; i++) {
				const float div = expf((float)(2 * i) * k);
				row[2 * i] += sinf((float)t * div);
				row[2 * i + 1] += cosf((float)t * div);
				row[half + 2 * i] += sinf((float)f * div);
				row[half + 2 * i + 1] += cosf((float)f * div);
			}
		}
}

/* transformer.py create_sin_embedding (shift 0): [cos(phase), sin(phase)] */
void hd_pos_1d(float *x, int D, int T2)
{
	const int half = D / 2;
	for (int i = 0; i < half; i++) {
		const float p = powf(10000.f, (float)i / (float)(half - 1));
		for (int t = 0; t < T2; t++) {
			const float ph = (float)t / p;
			x[(size_t)t * D + i] += cosf(ph);
			x[(size_t)t * D + half + i] += sinf(ph);
		}
	}
}

sb_status hd_transformer(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws, float *x,
                         int Fr, int T1, float *xt, int T2)
{
	const int D = net->dim, Hd = net->hidden;
	const int64_t n1 = (int64_t)Fr * T1, n2 = T2;
	const int64_t nmax = n1 > n2 ? n1 : n2;
	/* h, a, max(3D, Hd, D + 2D for kv) per token of the larger side, plus the other side */
	const size_t per = (size_t)nmax * (2 * D + (3 * D > Hd ? 3 * D : Hd)) +
	                   (size_t)nmax * 3 * D;
	float *buf = hd_alloc(ws, sizeof(float) * per);
	float *old = hd_alloc(ws, sizeof(float) * (size_t)n1 * D);
	if (!buf || !old) {
		hd_free(ws, buf);
		hd_free(ws, old);
		return SB_ERR_NOMEM;
	}
	layernorm(pool, x, x, n1, D, net->nin_w, net->nin_b);
	hd_pos_2d(x, D, Fr, T1);
	layernorm(pool, xt, xt, n2, D, net->nint_w, net->nint_b);
	hd_pos_1d(xt, D, T2);
	sb_status st = SB_OK;
	for (int i = 0; i < net->cfg.t_layers && st == SB_OK; i++) {
		if (i % 2 == 0) {
			st = run_layer(net, &net->layers[i], pool, ws, x, n1, NULL, 0, buf);
			if (st == SB_OK)
				st = run_layer(net, &net->layers_t[i], pool, ws, xt, n2, NULL, 0, buf);
		} else {
			memcpy(old, x, sizeof(float) * (size_t)n1 * D);
			st = run_layer(net, &net->layers[i], pool, ws, x, n1, xt, n2, buf);
			if (st == SB_OK)
				st = run_layer(net, &net->layers_t[i], pool, ws, xt, n2, old, n1, buf);
		}
	}
	hd_free(ws, buf);
	hd_free(ws, old);
	return st;
}
