/* The convolutional layers of HTDemucs as matrix products (see htdemucs_internal.h for the
 * layouts). Reference: demucs/hdemucs.py HEncLayer and HDecLayer (with norm=False, which holds
 * for every layer of a depth-4 model since norm_starts=4), demucs/demucs.py DConv.
 *
 * Frequency layers run one frequency row per task: the encoder's conv over 8 rows, GELU, the
 * DConv branch and the 1x1 rewrite with GLU all stay within the row's task, so a thread keeps
 * one C x T matrix hot in cache from the conv to the output. Time layers run whole-tensor
 * products split by columns, since their GroupNorms need statistics over the whole tensor.
 */
#include "backend/cpu/gemm.h"
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_rows(float *x, int rows, int T, const float *b)
{
	for (int r = 0; r < rows; r++)
		for (int t = 0; t < T; t++)
			x[(size_t)r * T + t] = b[r];
}

size_t hd_dconv_scratch(const hd_dconv *d, int T)
{
	return (size_t)(d->H + 2 * d->C) * (size_t)T;
}

typedef struct {
	float *x;
	const float *z, *scale;
	int C, T;
} glu_add_job;

static void glu_add_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	glu_add_job *j = vj;
	const size_t half = (size_t)j->C * (size_t)j->T;
	for (int64_t r = b; r < e; r++) {
		const float *z = j->z + r * j->T;
		hd_vglu_add(j->x + r * j->T, z, z + half, j->scale[r], j->T);
	}
}

/* x (C x T) += DConv(x). scratch: hd_dconv_scratch floats. */
void hd_dconv_run(const hd_dconv *d, sb_pool *pool, float *x, int T, float *scratch)
{
	const int C = d->C, H = d->H;
	float *h = scratch, *z = scratch + (size_t)H * T;
	for (int li = 0; li < d->depth; li++) {
		const hd_dconv_layer *l = &d->l[li];
		fill_rows(h, H, T, l->b1);
		for (int k = 0; k < 3; k++) {
			const int s = (k - 1) * l->dil;
			const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
			if (t1 > t0)
				sb_sgemm_par(pool, 0, 0, H, t1 - t0, C, 1.f, l->w1 + (size_t)k * H * C, C,
				             x + t0 + s, T, 1.f, h + t0, T);
		}
		hd_groupnorm1(pool, h, H, T, l->n1w, l->n1b, 1);
		sb_sgemm_par(pool, 0, 0, 2 * C, T, H, 1.f, l->w2, H, h, T, 0.f, z, T);
		hd_bias_rows(pool, z, 2 * C, T, l->b2, 0);
		hd_groupnorm1(pool, z, 2 * C, T, l->n2w, l->n2b, 0);
		glu_add_job j = {x, z, l->scale, C, T};
		sb_pool_for(pool, C, 4, glu_add_part, &j);
	}
}

/* ---- frequency encoder ---- */

typedef struct {
	const hd_enc *l;
	const hd_ften *in;
	hd_ften *out;
	float *scratch;
	size_t per;
} encf_job;

static void encf_part(void *vj, int64_t b, int64_t e, int worker)
{
	const encf_job *j = vj;
	const hd_enc *l = j->l;
	const int T = j->in->T, cin = l->cin, cout = l->cout;
	float *y = j->scratch + (size_t)worker * j->per;
	float *z = y + (size_t)cout * T;
	float *ds = z + (size_t)2 * cout * T;
	for (int64_t fo = b; fo < e; fo++) {
		/* rows 4fo-2 .. 4fo+5 of the input, one (8 cin x T) matrix */
		sb_sgemm(0, 0, cout, T, 8 * cin, 1.f, l->w, 8 * cin, hd_row(j->in, (int)(4 * fo - 2)), T,
		         0.f, y, T);
		hd_bias_rows(NULL, y, cout, T, l->b, 1);
		if (l->has_dconv)
			hd_dconv_run(&l->dc, NULL, y, T, ds);
		sb_sgemm(0, 0, 2 * cout, T, cout, 1.f, l->rw, cout, y, T, 0.f, z, T);
		hd_bias_rows(NULL, z, 2 * cout, T, l->rb, 0);
		hd_glu(NULL, z, hd_row(j->out, (int)fo), cout, T);
	}
}

sb_status hd_enc_freq(const hd_enc *l, sb_pool *pool, sb_htdemucs_ws *ws, const hd_ften *in,
                      hd_ften *out)
{
	const int T = in->T;
	sb_status st = hd_ften_alloc(ws, out, in->F / 4, l->cout, T);
	if (st != SB_OK)
		return st;
	const size_t per = (size_t)3 * l->cout * T + (l->has_dconv ? hd_dconv_scratch(&l->dc, T) : 0);
	encf_job j = {l, in, out, hd_alloc(ws, sizeof(float) * per * (size_t)sb_pool_threads(pool)),
	              per};
	if (!j.scratch) {
		hd_ften_free(ws, out);
		return SB_ERR_NOMEM;
	}
	sb_pool_for(pool, out->F, 1, encf_part, &j);
	hd_free(ws, j.scratch);
	return SB_OK;
}

/* ---- frequency decoder ---- */

typedef struct {
	const hd_dec *l;
	const hd_ften *x;
	hd_ften *y, *out;
	float *scratch;
	size_t per;
} decf_job;

/* rewrite (3x3 conv over frequency and time) + GLU + DConv, one frequency row per step */
static void decf_rewrite_part(void *vj, int64_t b, int64_t e, int worker)
{
	const decf_job *j = vj;
	const hd_dec *l = j->l;
	const int T = j->x->T, cin = l->cin;
	float *z = j->scratch + (size_t)worker * j->per;
	float *ds = z + (size_t)2 * cin * T;
	for (int64_t f = b; f < e; f++) {
		const float *blk = hd_row(j->x, (int)f - 1); /* rows f-1, f, f+1: (3 cin x T) */
		fill_rows(z, 2 * cin, T, l->rb);
		for (int dt = 0; dt < 3; dt++) {
			const int s = dt - 1;
			const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
			sb_sgemm(0, 0, 2 * cin, t1 - t0, 3 * cin, 1.f, l->rw + (size_t)dt * 2 * cin * 3 * cin,
			         3 * cin, blk + t0 + s, T, 1.f, z + t0, T);
		}
		float *y = hd_row(j->y, (int)f);
		hd_glu(NULL, z, y, cin, T);
		if (l->has_dconv)
			hd_dconv_run(&l->dc, NULL, y, T, ds);
	}
}

/* transposed conv (kernel 8, stride 4) with the reference's crop of 2 rows on each side:
 * output row g is phase r = (g+2) % 4 of input rows q-1 and q, q = (g+2) / 4 */
static void decf_convtr_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const decf_job *j = vj;
	const hd_dec *l = j->l;
	const int T = j->x->T, cin = l->cin, cout = l->cout;
	for (int64_t g = b; g < e; g++) {
		const int fo = (int)g + 2, r = fo & 3, q = fo >> 2;
		float *o = hd_row(j->out, (int)g);
		sb_sgemm(0, 0, cout, T, 2 * cin, 1.f, l->tw + (size_t)r * cout * 2 * cin, 2 * cin,
		         hd_row(j->y, q - 1), T, 0.f, o, T);
		hd_bias_rows(NULL, o, cout, T, l->tb, !l->last);
	}
}

sb_status hd_dec_freq(const hd_dec *l, sb_pool *pool, sb_htdemucs_ws *ws, hd_ften *x,
                      const hd_ften *skip, hd_ften *out)
{
	const int F = x->F, T = x->T;
	hd_add_inplace(pool, hd_row(x, 0), hd_row(skip, 0), (int64_t)F * x->C * T);
	hd_ften y;
	sb_status st = hd_ften_alloc(ws, &y, F, l->cin, T);
	if (st != SB_OK)
		return st;
	st = hd_ften_alloc(ws, out, 4 * F, l->cout, T);
	if (st != SB_OK) {
		hd_ften_free(ws, &y);
		return st;
	}
	const size_t per = (size_t)2 * l->cin * T + (l->has_dconv ? hd_dconv_scratch(&l->dc, T) : 0);
	decf_job j = {l, x, &y, out, hd_alloc(ws, sizeof(float) * per * (size_t)sb_pool_threads(pool)),
	              per};
	if (!j.scratch) {
		hd_ften_free(ws, &y);
		hd_ften_free(ws, out);
		return SB_ERR_NOMEM;
	}
	sb_pool_for(pool, F, 1, decf_rewrite_part, &j);
	hd_free(ws, j.scratch);
	sb_pool_for(pool, 4 * F, 2, decf_convtr_part, &j);
	hd_ften_free(ws, &y);
	return SB_OK;
}

/* ---- time encoder ---- */

typedef struct {
	const hd_enc *l;
	const float *in;
	int64_t lin, lout;
	float *y, *scratch;
	int nb;
} enct_job;

/* Conv1d(kernel 8, stride 4, padding 2) on the input zero-padded to a multiple of 4, one block
 * of output columns per step through a small im2col. */
static void enct_conv_part(void *vj, int64_t b, int64_t e, int worker)
{
	const enct_job *j = vj;
	const int cin = j->l->cin, cout = j->l->cout, nb = j->nb;
	float *col = j->scratch + (size_t)worker * 8 * cin * nb;
	for (int64_t blk = b; blk < e; blk++) {
		const int64_t j0 = blk * nb;
		const int n = (int)(j0 + nb <= j->lout ? nb : j->lout - j0);
		for (int ci = 0; ci < cin; ci++) {
			const float *x = j->in + (size_t)ci * j->lin;
			for (int k = 0; k < 8; k++) {
				float *c = col + (size_t)(ci * 8 + k) * n;
				for (int q = 0; q < n; q++) {
					const int64_t idx = 4 * (j0 + q) + k - 2;
					c[q] = idx >= 0 && idx < j->lin ? x[idx] : 0.f;
				}
			}
		}
		sb_sgemm(0, 0, cout, n, 8 * cin, 1.f, j->l->w, 8 * cin, col, n, 0.f, j->y + j0,
		         (int)j->lout);
	}
}

sb_status hd_enc_time(const hd_enc *l, sb_pool *pool, sb_htdemucs_ws *ws, const float *in,
                      int64_t lin, float *out)
{
	const int64_t lout = (lin + 3) / 4;
	const int cout = l->cout;
	const int T = (int)lout;
	int nb = 65536 / (8 * l->cin);
	nb = nb < 64 ? 64 : nb > 1024 ? 1024 : nb;
	const size_t dcs = l->has_dconv ? hd_dconv_scratch(&l->dc, T) : 0;
	float *y = hd_alloc(ws, sizeof(float) * (size_t)cout * T);
	float *z = hd_alloc(ws, sizeof(float) * (size_t)2 * cout * T);
	float *ds = dcs ? hd_alloc(ws, sizeof(float) * dcs) : NULL;
	float *col = hd_alloc(ws, sizeof(float) * (size_t)8 * l->cin * nb * (size_t)sb_pool_threads(pool));
	if (!y || !z || (dcs && !ds) || !col) {
		hd_free(ws, y);
		hd_free(ws, z);
		hd_free(ws, ds);
		hd_free(ws, col);
		return SB_ERR_NOMEM;
	}
	enct_job j = {l, in, lin, lout, y, col, nb};
	sb_pool_for(pool, (lout + nb - 1) / nb, 1, enct_conv_part, &j);
	hd_free(ws, col);
	hd_bias_rows(pool, y, cout, T, l->b, 1);
	if (l->has_dconv)
		hd_dconv_run(&l->dc, pool, y, T, ds);
	sb_sgemm_par(pool, 0, 0, 2 * cout, T, cout, 1.f, l->rw, cout, y, T, 0.f, z, T);
	hd_bias_rows(pool, z, 2 * cout, T, l->rb, 0);
	hd_glu(pool, z, out, cout, T);
	hd_free(ws, y);
	hd_free(ws, z);
	hd_free(ws, ds);
	return SB_OK;
}

/* ---- time decoder ---- */

typedef struct {
	const hd_dec *l;
	const float *p;
	int64_t lin, length;
	float *out;
} dect_job;

/* ConvTranspose1d(kernel 8, stride 4) cropped to [2, 2 + length): output u = 4 ti + k gets
 * P[k][co][ti] for the two taps k = u % 4 and u % 4 + 4. */
static void dect_gather_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const dect_job *j = vj;
	const int cout = j->l->cout;
	const int64_t lin = j->lin;
	for (int64_t co = b; co < e; co++) {
		float *o = j->out + co * j->length;
		const float bias = j->l->tb[co];
		for (int64_t to = 0; to < j->length; to++) {
			const int64_t u = to + 2;
			const int k1 = (int)(u & 3);
			const int64_t t1 = u >> 2, t2 = t1 - 1;
			float v = bias;
			if (t1 < lin)
				v += j->p[((size_t)k1 * cout + co) * lin + t1];
			if (t2 >= 0 && t2 < lin)
				v += j->p[((size_t)(k1 + 4) * cout + co) * lin + t2];
			o[to] = v;
		}
		if (!j->l->last)
			hd_vbias_gelu(o, j->length, 0.f);
	}
}

sb_status hd_dec_time(const hd_dec *l, sb_pool *pool, sb_htdemucs_ws *ws, float *x,
                      const float *skip, int64_t lin, int64_t length, float *out)
{
	const int cin = l->cin, cout = l->cout, T = (int)lin;
	hd_add_inplace(pool, x, skip, (int64_t)cin * T);
	const size_t dcs = l->has_dconv ? hd_dconv_scratch(&l->dc, T) : 0;
	float *z = hd_alloc(ws, sizeof(float) * (size_t)2 * cin * T);
	float *y = hd_alloc(ws, sizeof(float) * (size_t)cin * T);
	float *ds = dcs ? hd_alloc(ws, sizeof(float) * dcs) : NULL;
	float *p = hd_alloc(ws, sizeof(float) * (size_t)8 * cout * T);
	if (!z || !y || (dcs && !ds) || !p) {
		hd_free(ws, z);
		hd_free(ws, y);
		hd_free(ws, ds);
		hd_free(ws, p);
		return SB_ERR_NOMEM;
	}
	fill_rows(z, 2 * cin, T, l->rb);
	for (int k = 0; k < 3; k++) {
		const int s = k - 1;
		const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
		sb_sgemm_par(pool, 0, 0, 2 * cin, t1 - t0, cin, 1.f, l->rw + (size_t)k * 2 * cin * cin,
		             cin, x + t0 + s, T, 1.f, z + t0, T);
	}
	hd_glu(pool, z, y, cin, T);
	hd_free(ws, z);
	if (l->has_dconv)
		hd_dconv_run(&l->dc, pool, y, T, ds);
	hd_free(ws, ds);
	sb_sgemm_par(pool, 0, 0, 8 * cout, T, cin, 1.f, l->tw, cin, y, T, 0.f, p, T);
	hd_free(ws, y);
	dect_job j = {l, p, lin, length, out};
	sb_pool_for(pool, cout, 1, dect_gather_part, &j);
	hd_free(ws, p);
	return SB_OK;
}
