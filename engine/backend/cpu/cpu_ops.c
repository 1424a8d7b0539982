/* The CPU backend's operations other than matrix products (cpu_products.c): element-wise,
 * norms, layouts, the k8 s4 convolutions' gathers, the RoFormers' operations, and the signal
 * operations, whose arithmetic is in cpu_signal.c; and the sb_ops table.
 *
 * Operations run on the calling thread and the pool and are done when they return; nothing
 * here fails but allocation. Every operation splits its range over the pool in pieces large
 * enough to pay for the hand-off; batched ones give each worker whole batch items when there
 * are enough of them, so a frequency row stays in one core's cache from one operation to the
 * next within a row tile (row_tile()).
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/vmath.h"
#include "core/thread_pool.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EW_GRAIN 65536

typedef struct {
	float *x, *o;
	const float *y, *b, *g, *w;
	size_t n;
	int C, T, D, act;
	long xs, ys, os;
	int CT;
	double *part;
} ew;

/* An operation that is one pass of kernel k over n items, timed as op when profiling. */
static void pool_op(sb_bdev *d, int op, int64_t n, int64_t grain, sb_pool_fn k, void *j)
{
	const double t0 = prof_t0(d);
	sb_pool_for(d->pool, n, grain, k, j);
	prof_add(d, op, t0, 0);
}

static void k_zero(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	memset(j->x + b, 0, sizeof(float) * (size_t)(e - b));
}

static void op_zero(sb_bdev *d, sb_dv x, size_t n)
{
	ew j = {.x = P(x)};
	pool_op(d, OP_ZERO, (int64_t)n, EW_GRAIN, k_zero, &j);
}

static void k_copy(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	memcpy(j->x + b, j->y + b, sizeof(float) * (size_t)(e - b));
}

static void op_copy(sb_bdev *d, sb_dv dst, sb_dv src, size_t n)
{
	ew j = {.x = P(dst), .y = P(src)};
	pool_op(d, OP_COPY, (int64_t)n, EW_GRAIN, k_copy, &j);
}

int64_t sb_cpu_grain(int64_t per_item)
{
	const int64_t g = EW_GRAIN / (per_item > 0 ? per_item : 1);
	return g > 0 ? g : 1;
}

static int64_t rows_grain(int T) { return sb_cpu_grain(T); }

void sb_cpu_bias_cols(float *p, int n, const float *b, int act)
{
	if (act == SB_ACT_GELU) {
		sb_vbias_gelu_cols(p, n, b);
	} else if (act == SB_ACT_TANH) {
		sb_vbias_tanh_cols(p, n, b);
	} else {
		for (int c = 0; c < n; c++)
			p[c] += b[c];
	}
}

static void k_bias_cols(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++)
		sb_cpu_bias_cols(j->x + r * j->D, j->D, j->b, j->act);
}

static void op_bias_cols(sb_bdev *d, sb_dv x, size_t n, int cols, sb_dv b, int act)
{
	ew j = {.x = P(x), .b = P(b), .D = cols, .act = act};
	pool_op(d, OP_BIAS_COLS, (int64_t)(n / (size_t)cols), rows_grain(cols), k_bias_cols, &j);
}

static void k_add(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t i = b; i < e; i++)
		j->x[i] += j->y[i];
}

static void op_add(sb_bdev *d, sb_dv x, sb_dv y, size_t n)
{
	ew j = {.x = P(x), .y = P(y)};
	pool_op(d, OP_ADD, (int64_t)n, EW_GRAIN, k_add, &j);
}

/* GLU: index space batch * CT, split into whole items where there are enough */
static void k_glu(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	const int64_t CT = j->CT;
	while (b < e) {
		const int64_t item = b / CT, at = b % CT;
		const int64_t len = (e - b) < CT - at ? (e - b) : CT - at;
		const float *z = j->y + item * j->ys + at;
		sb_vglu(z, z + CT, j->o + item * j->os + at, len);
		b += len;
	}
}

static void op_glu(sb_bdev *d, sb_dv z, long zs, sb_dv o, long os, int CT, int batch)
{
	ew j = {.y = P(z), .ys = zs, .o = P(o), .os = os, .CT = CT};
	pool_op(d, OP_GLU, (int64_t)CT * batch, EW_GRAIN, k_glu, &j);
}

static void k_glu_add(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	const int64_t CT = j->CT, T = j->T;
	/* whole rows of T (a row shares one scale) */
	for (int64_t r = b; r < e; r++) {
		const int64_t item = r / (CT / T), c = r % (CT / T);
		const float *z = j->y + item * j->ys + c * T;
		sb_vglu_add(j->x + item * j->xs + c * T, z, z + CT, j->g[c], T);
	}
}

/* x[b xs + e] += scale[e / T] GLU(z)[b zs + e], e < CT (gn_glu_add's second step) */
static void op_glu_add(sb_bdev *d, sb_dv x, long xs, sb_dv z, long zs, int CT, int T,
                       sb_dv scale, int batch)
{
	ew j = {.x = P(x), .xs = xs, .y = P(z), .ys = zs, .CT = CT, .T = T, .g = P(scale)};
	pool_op(d, OP_GLU_ADD, (int64_t)(CT / T) * batch, rows_grain(T), k_glu_add, &j);
}

/* The mean and 1 / sqrt(variance + 1e-5) of n values from their sum s and sum of squares q:
 * the statistics of every norm here (GroupNorm, LayerNorm). */
static double norm_rstd(double s, double q, double n, double *mean)
{
	const double m = s / n;
	double var = q / n - m * m;
	var = var < 0 ? 0 : var;
	*mean = m;
	return 1.0 / sqrt(var + 1e-5);
}

/* GroupNorm: per batch item, mean and variance in double over its C x T values */
static void gn_item(float *x, int C, int T, const float *w, const float *b, int act)
{
	double s = 0, q = 0, mean;
	sb_vsum_sq(x, (int64_t)C * T, &s, &q);
	const double rstd = norm_rstd(s, q, (double)C * T, &mean);
	for (int c = 0; c < C; c++)
		sb_vnorm_affine(x + (size_t)c * T, T, (float)mean, (float)(rstd * w[c]), b[c], act);
}

static void k_gn_items(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t i = b; i < e; i++)
		gn_item(j->x + i * j->xs, j->C, j->T, j->w, j->b, j->act);
}

/* one item split across the pool: partial sums per row, then the rows normalised */
static void k_gn_stats(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++)
		sb_vsum_sq(j->x + r * j->T, j->T, &j->part[2 * r], &j->part[2 * r + 1]);
}

/* One group of rows x T values split across the pool: partial sums per row, added in row
 * order. False (and the device's status set) when the partial sums find no memory. */
static bool pool_moments(sb_bdev *d, float *x, int64_t rows, int T, double *mean, double *rstd)
{
	double stack[2 * 4096];
	double *part = rows <= 4096 ? stack : malloc(sizeof(double) * 2 * (size_t)rows);
	if (!part) {
		d->st = d->st != SB_OK ? d->st : SB_ERR_NOMEM;
		return false;
	}
	ew j = {.x = x, .T = T, .part = part};
	sb_pool_for(d->pool, rows, rows_grain(T), k_gn_stats, &j);
	double s = 0, q = 0;
	for (int64_t r = 0; r < rows; r++) {
		s += part[2 * r];
		q += part[2 * r + 1];
	}
	*rstd = norm_rstd(s, q, (double)rows * T, mean);
	if (part != stack)
		free(part);
	return true;
}

typedef struct {
	float *x;
	const float *w, *b;
	int T, act;
	float mean;
	double rstd;
	int C;
} gn_apply_job;

static void k_gn_apply(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	gn_apply_job *j = v;
	for (int64_t r = b; r < e; r++)
		sb_vnorm_affine(j->x + r * j->T, j->T, j->mean, (float)(j->rstd * j->w[r % j->C]),
		                j->b[r % j->C], j->act);
}

static void gn_split(sb_bdev *d, float *x, int C, int T, const float *w, const float *b,
                     int act, int64_t rows_total, int col_cycle)
{
	/* rows_total rows of T values form one group; channel of row r is r % col_cycle */
	double mean, rstd;
	if (!pool_moments(d, x, rows_total, T, &mean, &rstd))
		return;
	gn_apply_job a = {x, w, b, T, act, (float)mean, rstd, col_cycle};
	sb_pool_for(d->pool, rows_total, rows_grain(T), k_gn_apply, &a);
	(void)C;
}

static void op_groupnorm(sb_bdev *d, sb_dv x, long stride, int C, int T, int batch, sb_dv w,
                         sb_dv b, int act)
{
	const double t0 = prof_t0(d);
	if (batch >= d->threads) {
		ew j = {.x = P(x), .xs = stride, .C = C, .T = T, .w = P(w), .b = P(b), .act = act};
		sb_pool_for(d->pool, batch, sb_cpu_grain((int64_t)C * T), k_gn_items, &j);
	} else {
		for (int i = 0; i < batch; i++)
			gn_split(d, P(x) + (size_t)i * stride, C, T, P(w), P(b), act, C, C);
	}
	prof_add(d, OP_GROUPNORM, t0, 0);
}

/* tokens [n][D]: one group over everything, affine per column (rows of D as T, column c) */
typedef struct {
	float *x;
	const float *w, *b;
	int D;
	float mean;
	double rstd;
} gnt_job;

static void k_gnt_apply(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	gnt_job *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->D;
		for (int c = 0; c < j->D; c++)
			p[c] = (p[c] - j->mean) * (float)(j->rstd * j->w[c]) + j->b[c];
	}
}

static void op_groupnorm_tokens(sb_bdev *d, sb_dv x, size_t n, int D, sb_dv w, sb_dv b)
{
	const double t0 = prof_t0(d);
	double mean, rstd;
	if (!pool_moments(d, P(x), (int64_t)n, D, &mean, &rstd))
		return;
	gnt_job a = {P(x), P(w), P(b), D, (float)mean, rstd};
	sb_pool_for(d->pool, (int64_t)n, rows_grain(D), k_gnt_apply, &a);
	prof_add(d, OP_GN_TOKENS, t0, 0);
}

static void k_layernorm(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		const float *p = j->x + r * j->D;
		float *o = j->o + r * j->D;
		double s = 0, q = 0, mean;
		sb_vsum_sq(p, j->D, &s, &q);
		const float rs = (float)norm_rstd(s, q, j->D, &mean), m = (float)mean;
		for (int c = 0; c < j->D; c++)
			o[c] = (p[c] - m) * rs * j->w[c] + j->b[c];
	}
}

static void op_layernorm(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w, sb_dv b)
{
	ew j = {.x = P(x), .o = P(o), .D = D, .w = P(w), .b = P(b)};
	pool_op(d, OP_LAYERNORM, (int64_t)rows, rows_grain(D), k_layernorm, &j);
}

static void k_softmax(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->D;
		const float m = sb_vmax(p, j->D);
		const float s = sb_vexp_sum(p, j->D, m);
		sb_vscale(p, j->D, 1.f / s);
	}
}

static void op_softmax(sb_bdev *d, sb_dv x, size_t rows, int n)
{
	ew j = {.x = P(x), .D = n};
	pool_op(d, OP_SOFTMAX, (int64_t)rows, rows_grain(n), k_softmax, &j);
}

/* transpose in 32 x 32 blocks, parallel over block rows */
typedef struct {
	const float *in;
	float *out;
	int R, C;
} tr_job;

static void k_transpose(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	tr_job *j = v;
	for (int64_t rb = b; rb < e; rb++) {
		const int r0 = (int)rb * 32, r1 = r0 + 32 < j->R ? r0 + 32 : j->R;
		for (int c0 = 0; c0 < j->C; c0 += 32) {
			const int c1 = c0 + 32 < j->C ? c0 + 32 : j->C;
			for (int r = r0; r < r1; r++)
				for (int c = c0; c < c1; c++)
					j->out[(size_t)c * j->R + r] = j->in[(size_t)r * j->C + c];
		}
	}
}

static void op_transpose(sb_bdev *d, sb_dv in, sb_dv out, int R, int C)
{
	tr_job j = {P(in), P(out), R, C};
	pool_op(d, OP_TRANSPOSE, (R + 31) / 32, sb_cpu_grain((int64_t)32 * C), k_transpose, &j);
}

/* rows [F][C][T] <-> tokens [T F][C]: per row f, a C x T transpose into a strided target */
typedef struct {
	const float *x;
	float *o;
	int F, C, T, back;
} rt_job;

static void k_rows_tokens(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	rt_job *j = v;
	for (int64_t f = b; f < e; f++)
		for (int c = 0; c < j->C; c++)
			for (int t = 0; t < j->T; t++) {
				const size_t row = ((size_t)f * j->C + c) * j->T + t;
				const size_t tok = ((size_t)t * j->F + f) * j->C + c;
				if (j->back)
					j->o[row] = j->x[tok];
				else
					j->o[tok] = j->x[row];
			}
}

static void op_rows_tokens(sb_bdev *d, sb_dv x, sb_dv o, int F, int C, int T, int back)
{
	rt_job j = {P(x), P(o), F, C, T, back};
	pool_op(d, OP_ROWS_TOKENS, F, sb_cpu_grain((int64_t)C * T), k_rows_tokens, &j);
}

static void k_add_row_channel(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) { /* r = f C + c */
		float *p = j->x + r * j->T;
		const float ev = j->y[r];
		for (int t = 0; t < j->T; t++)
			p[t] += ev;
	}
}

static void op_add_row_channel(sb_bdev *d, sb_dv x, int F, int C, int T, sb_dv emb)
{
	ew j = {.x = P(x), .y = P(emb), .T = T};
	pool_op(d, OP_ADD_ROW_CHANNEL, (int64_t)F * C, rows_grain(T), k_add_row_channel, &j);
}

typedef struct {
	const float *x, *p, *b;
	float *o;
	long lin, lout, length;
	int cin, cout, act;
} conv_job;

static void k_im2col(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	conv_job *j = v;
	for (int64_t row = b; row < e; row++) {
		const int ci = (int)(row / 8), k = (int)(row % 8);
		const float *x = j->x + (size_t)ci * j->lin;
		float *col = j->o + (size_t)row * j->lout;
		for (long t = 0; t < j->lout; t++) {
			const long idx = 4 * t + k - 2;
			col[t] = idx >= 0 && idx < j->lin ? x[idx] : 0.f;
		}
	}
}

static void op_im2col(sb_bdev *d, sb_dv x, long lin, int cin, sb_dv col, long lout)
{
	conv_job j = {.x = P(x), .o = P(col), .lin = lin, .lout = lout, .cin = cin};
	pool_op(d, OP_IM2COL, (int64_t)cin * 8, sb_cpu_grain(lout), k_im2col, &j);
}

static void k_convtr(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	conv_job *j = v;
	for (int64_t co = b; co < e; co++) {
		float *o = j->o + (size_t)co * j->length;
		for (long to = 0; to < j->length; to++) {
			const long u = to + 2, t1 = u >> 2, t2 = t1 - 1;
			const int k1 = (int)(u & 3);
			float val = j->b[co];
			if (t1 < j->lin)
				val += j->p[((size_t)k1 * j->cout + co) * j->lin + t1];
			if (t2 >= 0 && t2 < j->lin)
				val += j->p[((size_t)(k1 + 4) * j->cout + co) * j->lin + t2];
			o[to] = val;
		}
		if (j->act)
			sb_vbias_gelu(o, j->length, 0.f);
	}
}

static void op_convtr(sb_bdev *d, sb_dv p, long lin, int cout, long length, sb_dv b, int act,
                      sb_dv o)
{
	conv_job j = {.p = P(p), .b = P(b), .o = P(o), .lin = lin, .length = length, .cout = cout,
	              .act = act};
	pool_op(d, OP_CONVTR, cout, sb_cpu_grain(length), k_convtr, &j);
}

/* ---- the RoFormers' operations ---- */

static void k_rmsnorm(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	const double sd = sqrt((double)j->D);
	for (int64_t r = b; r < e; r++) {
		const float *p = j->x + r * j->D;
		float *o = j->o + r * j->D;
		double s = 0, q = 0;
		sb_vsum_sq(p, j->D, &s, &q);
		const double nrm = sqrt(q);
		const float a = (float)(sd / (nrm > 1e-12 ? nrm : 1e-12));
		for (int c = 0; c < j->D; c++)
			o[c] = p[c] * a * j->w[c];
	}
}

static void op_rmsnorm(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w)
{
	ew j = {.x = P(x), .o = P(o), .D = D, .w = P(w)};
	pool_op(d, OP_RMSNORM, (int64_t)rows, rows_grain(D), k_rmsnorm, &j);
}

typedef struct {
	const float *x, *w, *seg;
	float *o;
	long ld;
	int nseg;
} seg_job;

static void k_rmsnorm_seg(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const seg_job *j = v;
	for (int64_t r = b; r < e; r++)
		for (int s = 0; s < j->nseg; s++) {
			const int a = (int)j->seg[s], n = (int)j->seg[s + 1] - a;
			const float *p = j->x + r * j->ld + a;
			float *o = j->o + r * j->ld + a;
			double sum = 0, q = 0;
			sb_vsum_sq(p, n, &sum, &q);
			const double nrm = sqrt(q);
			const float f = (float)(sqrt((double)n) / (nrm > 1e-12 ? nrm : 1e-12));
			for (int c = 0; c < n; c++)
				o[c] = p[c] * f * j->w[a + c];
		}
}

static void op_rmsnorm_seg(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, long ld, int nseg,
                           sb_dv seg, sb_dv w)
{
	seg_job j = {P(x), P(w), P(seg), P(o), ld, nseg};
	const int width = nseg > 0 ? (int)j.seg[nseg] - (int)j.seg[0] : 0;
	pool_op(d, OP_RMSNORM_SEG, (int64_t)rows, rows_grain(width), k_rmsnorm_seg, &j);
}

typedef struct {
	float *x;
	const float *cs;
	int ld, cols, hd, div, mod;
} rope_job;

static void k_rope(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const rope_job *j = v;
	const int half = j->hd / 2;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->ld;
		const float *cs = j->cs + (size_t)((r / j->div) % j->mod) * (size_t)j->hd;
		for (int i = 0; i < j->cols / 2; i++) {
			const float c = cs[2 * (i % half)], s = cs[2 * (i % half) + 1];
			const float x0 = x[2 * i], x1 = x[2 * i + 1];
			x[2 * i] = x0 * c - x1 * s;
			x[2 * i + 1] = x1 * c + x0 * s;
		}
	}
}

static void op_rope(sb_bdev *d, sb_dv x, size_t rows, int ld, int cols, int hd, sb_dv cs,
                    int div, int mod)
{
	rope_job j = {P(x), P(cs), ld, cols, hd, div > 0 ? div : 1, mod > 0 ? mod : 1};
	pool_op(d, OP_ROPE, (int64_t)rows, rows_grain(cols), k_rope, &j);
}

typedef struct {
	float *x;
	const float *g;
	int ldx, ldg, heads, hd;
} gate_job;

static void k_head_gate(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const gate_job *j = v;
	for (int64_t r = b; r < e; r++)
		for (int h = 0; h < j->heads; h++) {
			const float s = 1.f / (1.f + expf(-j->g[r * j->ldg + h]));
			sb_vscale(j->x + r * j->ldx + (int64_t)h * j->hd, j->hd, s);
		}
}

static void op_head_gate(sb_bdev *d, sb_dv x, int ldx, sb_dv g, int ldg, size_t rows,
                         int heads, int hd)
{
	gate_job j = {P(x), P(g), ldx, ldg, heads, hd};
	pool_op(d, OP_HEAD_GATE, (int64_t)rows, rows_grain(heads * hd), k_head_gate, &j);
}

/* ---- signal operations (cpu_signal.c) ---- */

static void op_stft(sb_bdev *d, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
                    float scale, sb_dv X)
{
	const double t0 = prof_t0(d);
	if (d->st == SB_OK && sb_cpu_stft(d->pool, g, P(x), xs, ch, L, P(w), scale, P(X)) != SB_OK)
		d->st = SB_ERR_NOMEM;
	prof_add(d, OP_STFT, t0, 0);
}

static void op_istft(sb_bdev *d, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w,
                     float scale, int e0, int e1, sb_dv o, long os, int add, sb_dv work)
{
	const double t0 = prof_t0(d);
	if (d->st == SB_OK && sb_cpu_istft(d->pool, g, P(X), ch, L, P(w), scale, e0, e1, P(o), os,
	                                   add, P(work)) != SB_OK)
		d->st = SB_ERR_NOMEM;
	prof_add(d, OP_ISTFT, t0, 0);
}

static void op_moments(sb_bdev *d, sb_dv x, size_t n, sb_dv stats)
{
	const double t0 = prof_t0(d);
	sb_cpu_moments(P(x), n, P(stats));
	prof_add(d, OP_MOMENTS, t0, 0);
}

static void op_standardise(sb_bdev *d, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
                           int inverse)
{
	const double t0 = prof_t0(d);
	sb_cpu_standardise(d->pool, P(x), P(o), n, P(stats), eps, inverse);
	prof_add(d, OP_STANDARDISE, t0, 0);
}

static void op_gather(sb_bdev *d, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
                      sb_dv ptr, sb_dv idx, sb_dv w)
{
	const double t0 = prof_t0(d);
	sb_cpu_gather(d->pool, P(x), ldx, P(o), ldo, rows, n, P(ptr), P(idx), P(w));
	prof_add(d, OP_GATHER, t0, 0);
}

static void op_cmul(sb_bdev *d, sb_dv a, long sa, sb_dv c, sb_dv o, long so, size_t n,
                    int batch)
{
	const double t0 = prof_t0(d);
	sb_cpu_cmul(d->pool, P(a), sa, P(c), P(o), so, n, batch);
	prof_add(d, OP_CMUL, t0, 0);
}

static void op_gn_glu_add(sb_bdev *d, sb_dv x, long xs, sb_dv z, long zs, int C, int T, sb_dv w,
                          sb_dv b, sb_dv scale, int batch)
{
	op_groupnorm(d, z, zs, 2 * C, T, batch, w, b, SB_ACT_NONE);
	op_glu_add(d, x, xs, z, zs, C * T, T, scale, batch);
}

#ifdef SB_TOY_FAMILY
/* The test group's one operation (-Dtoy_family=true): what an optional group a model family
 * needs looks like to a backend that has it. */
static void op_toy_mix(sb_bdev *d, sb_dv x, sb_dv y, sb_dv o, size_t n, float a, float b)
{
	(void)d;
	const float *px = P(x), *py = P(y);
	float *po = P(o);
	for (size_t i = 0; i < n; i++)
		po[i] = a * px[i] + b * py[i];
}
#endif

const sb_ops sb_cpu_ops = {
	.gemm = sb_cpu_op_gemm,
	.zero = op_zero,
	.copy = op_copy,
	.bias_cols = op_bias_cols,
	.add = op_add,
	.glu = op_glu,
	.groupnorm = op_groupnorm,
	.groupnorm_tokens = op_groupnorm_tokens,
	.layernorm = op_layernorm,
	.softmax = op_softmax,
	.transpose = op_transpose,
	.rows_tokens = op_rows_tokens,
	.add_row_channel = op_add_row_channel,
	.attention = sb_cpu_op_attention,
	.rmsnorm = op_rmsnorm,
	.rmsnorm_seg = op_rmsnorm_seg,
	.rope = op_rope,
	.head_gate = op_head_gate,
	.stft = op_stft,
	.istft = op_istft,
	.moments = op_moments,
	.standardise = op_standardise,
	.gather = op_gather,
	.cmul = op_cmul,
	.gemm_bias = sb_cpu_op_gemm_bias,
	/* SB_OPS_HTDEMUCS */
	.im2col_k8s4 = op_im2col,
	.convtr_k8s4 = op_convtr,
	.gn_glu_add = op_gn_glu_add,
	/* SB_OPS_LSTM */
	.lstm = sb_cpu_op_lstm,
	/* SB_OPS_CONVNET */
	.copy_rows = sb_cpu_op_copy_rows,
	.permute = sb_cpu_op_permute,
	.norm_groups = sb_cpu_op_norm_groups,
	.dwconv = sb_cpu_op_dwconv,
	.mul = sb_cpu_op_mul,
#ifdef SB_TOY_FAMILY
	/* SB_OPS_TOY */
	.toy_mix = op_toy_mix,
#endif
};
