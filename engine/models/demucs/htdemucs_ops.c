/* Element-wise pieces of the HTDemucs forward pass (see htdemucs_internal.h): GELU (exact,
 * with erf, as torch.nn.functional.gelu's default), GLU over channels, GroupNorm(1, C) with
 * statistics in double (the reference's float reductions are within 1e-7 of it), biases.
 * Each splits its range over the pool; a NULL pool runs it on the calling thread. */
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sb_status hd_ften_alloc(sb_htdemucs_ws *ws, hd_ften *x, int F, int C, int T)
{
	x->F = F;
	x->C = C;
	x->T = T;
	const size_t row = (size_t)C * (size_t)T;
	x->base = hd_alloc(ws, sizeof(float) * (size_t)(F + 2 * HD_FPAD) * row);
	if (!x->base)
		return SB_ERR_NOMEM;
	memset(x->base, 0, sizeof(float) * HD_FPAD * row);
	memset(hd_row(x, F), 0, sizeof(float) * HD_FPAD * row);
	return SB_OK;
}

void hd_ften_free(sb_htdemucs_ws *ws, hd_ften *x)
{
	hd_free(ws, x->base);
	x->base = NULL;
}

typedef struct {
	float *x;
	const float *y;
} ew_job;

static void gelu_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	hd_vbias_gelu(((ew_job *)vj)->x + b, e - b, 0.f);
}

void hd_gelu_inplace(sb_pool *pool, float *x, int64_t n)
{
	ew_job j = {x, NULL};
	sb_pool_for(pool, n, 16384, gelu_part, &j);
}

static void add_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	ew_job *j = vj;
	for (int64_t i = b; i < e; i++)
		j->x[i] += j->y[i];
}

void hd_add_inplace(sb_pool *pool, float *x, const float *y, int64_t n)
{
	ew_job j = {x, y};
	sb_pool_for(pool, n, 65536, add_part, &j);
}

typedef struct {
	float *x;
	const float *z;
	int rows, T, C, gelu;
	const float *w, *b;
	double *sum, *sq;
	double mean, rstd;
} rows_job;

static void stats_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	rows_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		hd_vsum_sq(j->x + r * j->T, j->T, &j->sum[r], &j->sq[r]);
	}
}

static void norm_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	rows_job *j = vj;
	const float m = (float)j->mean;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->T;
		const float a = (float)(j->rstd * j->w[r]);
		hd_vnorm_affine(p, j->T, m, a, j->b[r], j->gelu);
	}
}

void hd_groupnorm1(sb_pool *pool, float *x, int rows, int T, const float *w, const float *b,
                   int gelu)
{
	double stack[2 * 2048]; /* rows are channels: never more than 2 x 1024 in a released model */
	double *buf = rows <= 2048 ? stack : malloc(sizeof(double) * 2 * (size_t)rows);
	rows_job j = {0};
	j.x = x;
	j.rows = rows;
	j.T = T;
	j.w = w;
	j.b = b;
	j.gelu = gelu;
	double s = 0, q = 0;
	if (buf) {
		j.sum = buf;
		j.sq = buf + rows;
		sb_pool_for(pool, rows, 8, stats_part, &j);
		for (int r = 0; r < rows; r++) {
			s += j.sum[r];
			q += j.sq[r];
		}
	} else {
		/* no memory for per-row partials: one serial pass gives the same statistics */
		for (int64_t i = 0; i < (int64_t)rows * T; i++) {
			s += x[i];
			q += (double)x[i] * x[i];
		}
	}
	const double n = (double)rows * T;
	const double mean = s / n;
	double var = q / n - mean * mean;
	if (var < 0)
		var = 0;
	j.mean = mean;
	j.rstd = 1.0 / sqrt(var + 1e-5);
	sb_pool_for(pool, rows, 8, norm_part, &j);
	if (buf != stack)
		free(buf);
}

static void glu_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	rows_job *j = vj;
	const size_t half = (size_t)j->C * (size_t)j->T;
	hd_vglu(j->z + b, j->z + half + b, j->x + b, e - b);
}

void hd_glu(sb_pool *pool, const float *z, float *out, int C, int T)
{
	rows_job j = {0};
	j.x = out;
	j.z = z;
	j.C = C;
	j.T = T;
	sb_pool_for(pool, (int64_t)C * T, 16384, glu_part, &j);
}

static void bias_part(void *vj, int64_t b, int64_t e, int w)
{
	(void)w;
	rows_job *j = vj;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->T;
		const float v = j->b[r];
		if (j->gelu)
			hd_vbias_gelu(p, j->T, v);
		else
			for (int t = 0; t < j->T; t++)
				p[t] += v;
	}
}

void hd_bias_rows(sb_pool *pool, float *x, int rows, int T, const float *b, int gelu)
{
	rows_job j = {0};
	j.x = x;
	j.rows = rows;
	j.T = T;
	j.b = b;
	j.gelu = gelu;
	sb_pool_for(pool, rows, 4, bias_part, &j);
}
