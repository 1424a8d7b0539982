/* The CPU backend's convolution nets' group (SB_OPS_CONVNET, backend.h): strided row copies,
 * transposes, grouped norms over strided channels, depthwise convolutions, products of
 * elements. Each splits its rows over the pool. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	float *o;
	const float *x, *y, *w, *b;
	long ldd, ldi, lds, lsi, n;
	int rows, C, T, k, act;
	int dims[4];
	long os[4];
	const sb_norm_geom *g;
	double *part;   /* norm: sum and sum of squares per row of T values */
	double *stat;   /* norm: mean and rstd per group */
} cv_job;

static void k_copy_rows(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cv_job *j = v;
	for (int64_t q = b; q < e; q++) {
		const int64_t i = q / j->rows, r = q % j->rows;
		memcpy(j->o + i * j->ldi + r * j->ldd, j->x + i * j->lsi + r * j->lds,
		       sizeof(float) * (size_t)j->n);
	}
}

void sb_cpu_op_copy_rows(sb_bdev *d, sb_dv dst, long ldd, long ldi, sb_dv src, long lds,
                         long lsi, int rows, long n, int batch)
{
	const double t0 = prof_t0(d);
	cv_job j = {.o = P(dst), .x = P(src), .ldd = ldd, .ldi = ldi, .lds = lds, .lsi = lsi,
	            .n = n, .rows = rows};
	sb_pool_for(d->pool, (int64_t)rows * batch, sb_cpu_grain(n), k_copy_rows, &j);
	prof_add(d, OP_COPY_ROWS, t0, 0);
}

/* (a, b) pairs of the first two dimensions, the last two walked inside */
static void k_permute(void *v, int64_t b0, int64_t e0, int w)
{
	(void)w;
	cv_job *j = v;
	const int *dm = j->dims;
	const long *os = j->os;
	for (int64_t ab = b0; ab < e0; ab++) {
		const int64_t a = ab / dm[1], b = ab % dm[1];
		const float *x = j->x + ab * dm[2] * dm[3];
		float *o = j->o + a * os[0] + b * os[1];
		for (int c = 0; c < dm[2]; c++, x += dm[3]) {
			float *oc = o + c * os[2];
			if (os[3] == 1) {
				memcpy(oc, x, sizeof(float) * (size_t)dm[3]);
			} else {
				for (int e = 0; e < dm[3]; e++)
					oc[e * os[3]] = x[e];
			}
		}
	}
}

void sb_cpu_op_permute(sb_bdev *d, sb_dv x, const int dims[4], const long os[4], sb_dv o)
{
	const double t0 = prof_t0(d);
	cv_job j = {.o = P(o), .x = P(x)};
	memcpy(j.dims, dims, sizeof j.dims);
	memcpy(j.os, os, sizeof j.os);
	sb_pool_for(d->pool, (int64_t)dims[0] * dims[1],
	            sb_cpu_grain((int64_t)dims[2] * dims[3]), k_permute, &j);
	prof_add(d, OP_PERMUTE, t0, 0);
}

/* norm_groups: rows of T values numbered (i1, i2, c, f) in that order; a group is C / G
 * channels' consecutive F-row runs of one (i1, i2) */
static float *norm_row(const cv_job *j, const float *base, int64_t r, int *c)
{
	const sb_norm_geom *g = j->g;
	const int64_t f = r % g->F, cc = r / g->F % g->C, i2 = r / ((int64_t)g->F * g->C) % g->n2,
	              i1 = r / ((int64_t)g->F * g->C * g->n2);
	*c = (int)cc;
	return (float *)base + i1 * g->s1 + i2 * g->s2 + cc * g->sc + f * g->sf;
}

static void k_norm_sums(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cv_job *j = v;
	for (int64_t r = b; r < e; r++) {
		int c;
		const float *x = norm_row(j, j->x, r, &c);
		sb_vsum_sq(x, j->g->T, &j->part[2 * r], &j->part[2 * r + 1]);
	}
}

static void k_norm_apply(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cv_job *j = v;
	const sb_norm_geom *g = j->g;
	const int64_t per_group = (int64_t)(g->C / g->G) * g->F;
	for (int64_t r = b; r < e; r++) {
		int c;
		const float *x = norm_row(j, j->x, r, &c);
		float *o = norm_row(j, j->o, r, &c);
		const double *st = j->stat + 2 * (r / per_group);
		const float m = (float)st[0], a = (float)(st[1] * j->w[c]), s = j->b[c];
		if (o != x)
			memcpy(o, x, sizeof(float) * (size_t)g->T);
		if (j->act == SB_ACT_SILU) {
			for (int t = 0; t < g->T; t++) {
				const float y = (o[t] - m) * a + s;
				o[t] = y / (1.f + expf(-y));
			}
		} else {
			sb_vnorm_affine(o, g->T, m, a, s, j->act == SB_ACT_GELU);
		}
	}
}

void sb_cpu_op_norm_groups(sb_bdev *d, sb_dv x, const sb_norm_geom *g, sb_dv w, sb_dv b,
                           int act, sb_dv o)
{
	const double t0 = prof_t0(d);
	const int64_t rows = (int64_t)g->n1 * g->n2 * g->C * g->F, groups = (int64_t)g->n1 * g->n2 * g->G;
	const int64_t per_group = rows / groups;
	cv_job j = {.o = P(o), .x = P(x), .w = P(w), .b = P(b), .act = act, .g = g};
	j.part = malloc(sizeof(double) * 2 * (size_t)rows);
	j.stat = malloc(sizeof(double) * 2 * (size_t)groups);
	if (!j.part || !j.stat) {
		d->st = d->st != SB_OK ? d->st : SB_ERR_NOMEM;
	} else {
		sb_pool_for(d->pool, rows, sb_cpu_grain(g->T), k_norm_sums, &j);
		/* the rows of a group are consecutive in the numbering: summed in order */
		for (int64_t q = 0; q < groups; q++) {
			double s = 0, sq = 0;
			for (int64_t r = q * per_group; r < (q + 1) * per_group; r++) {
				s += j.part[2 * r];
				sq += j.part[2 * r + 1];
			}
			const double n = (double)per_group * g->T, m = s / n;
			double var = sq / n - m * m;
			var = var < 0 ? 0 : var;
			j.stat[2 * q] = m;
			j.stat[2 * q + 1] = 1.0 / sqrt(var + 1e-5);
		}
		sb_pool_for(d->pool, rows, sb_cpu_grain(g->T), k_norm_apply, &j);
	}
	free(j.part);
	free(j.stat);
	prof_add(d, OP_NORM_GROUPS, t0, 0);
}

static void k_dwconv(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cv_job *j = v;
	const int T = j->T, k = j->k, h = k / 2;
	for (int64_t line = b; line < e; line++) {
		const int c = (int)(line % j->C);
		const float *x = j->x + line * T, *wc = j->w + (size_t)c * k;
		float *o = j->o + line * T;
		for (int t = 0; t < T; t++) {
			float s = j->b[c];
			const int u0 = h - t > 0 ? h - t : 0, u1 = T - t + h < k ? T - t + h : k;
			for (int u = u0; u < u1; u++)
				s += wc[u] * x[t + u - h];
			o[t] = s;
		}
	}
}

void sb_cpu_op_dwconv(sb_bdev *d, sb_dv x, int rows, int C, int T, int k, sb_dv w, sb_dv b,
                      sb_dv o)
{
	const double t0 = prof_t0(d);
	cv_job j = {.o = P(o), .x = P(x), .w = P(w), .b = P(b), .C = C, .T = T, .k = k};
	sb_pool_for(d->pool, (int64_t)rows * C, sb_cpu_grain((int64_t)T * k), k_dwconv, &j);
	prof_add(d, OP_DWCONV, t0, 2.0 * rows * C * T * k);
}

static void k_mul(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cv_job *j = v;
	for (int64_t i = b; i < e; i++)
		j->o[i] *= j->y[i];
}

void sb_cpu_op_mul(sb_bdev *d, sb_dv x, sb_dv y, size_t n)
{
	const double t0 = prof_t0(d);
	cv_job j = {.o = P(x), .y = P(y)};
	sb_pool_for(d->pool, (int64_t)n, sb_cpu_grain(1), k_mul, &j);
	prof_add(d, OP_MUL, t0, 0);
}
