/* The CPU backend's operations built on matrix products (gemm.h): batched products, and
 * attention, whose scores stay in a core's cache between its two products. Each worker packs
 * into its own buffers (the device's ws[]).
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vmath.h"
#include "core/thread_pool.h"

#include <math.h>
#include <stdlib.h>

/* ---- matrix products ---- */

typedef struct {
	sb_gemm_ws *const *ws;
	int M, N, K, lda, ldb, ldc, tb;
	float alpha, beta;
	const float *A, *B;
	float *C;
	long sa, sb, sc;
	const float *bias; /* gemm_bias's, NULL for none */
	long bs;
	int cols, act;
} gemm_job;

/* gemm_bias's epilogue on rows r0 .. r1 of item i */
static void bias_rows(const gemm_job *j, int64_t i, int64_t r0, int64_t r1)
{
	float *C = j->C + i * j->sc;
	const float *bias = j->bias + i * j->bs;
	for (int64_t r = r0; r < r1; r++) {
		float *p = C + r * j->ldc;
		if (j->cols) {
			sb_cpu_bias_cols(p, j->N, bias, j->act);
		} else if (j->act == SB_ACT_GELU) {
			sb_vbias_gelu(p, j->N, bias[r]);
		} else if (j->act == SB_ACT_TANH) {
			sb_vbias_tanh(p, j->N, bias[r]);
		} else {
			for (int c = 0; c < j->N; c++)
				p[c] += bias[r];
		}
	}
}

/* whole items on one thread, each item's epilogue while its C is in this core's cache */
static void k_gemm_items(void *v, int64_t b, int64_t e, int wk)
{
	gemm_job *j = v;
	for (int64_t i = b; i < e; i++) {
		sb_sgemm(j->ws[wk], 0, j->tb, j->M, j->N, j->K, j->alpha, j->A + i * j->sa, j->lda,
		         j->B + i * j->sb, j->ldb, j->beta, j->C + i * j->sc, j->ldc);
		if (j->bias)
			bias_rows(j, i, 0, j->M);
	}
}

typedef struct {
	const gemm_job *j;
	int64_t i;
} bias_item;

static void k_bias_item(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const bias_item *t = v;
	bias_rows(t->j, t->i, b, e);
}

static void gemm_epi(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                     sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                     int batch, int batch2, long sa2, long sb2, long sc2, const sb_bias *e)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0)
		return;
	const double t0 = prof_t0(d);
	const int items = batch >= d->threads && batch > 1;
	for (int j = 0; j < batch2; j++) {
		gemm_job g = {d->ws, M, N, K, lda, ldb, ldc, tb, alpha, beta, P(A) + j * sa2,
		              P(B) + j * sb2, P(C) + j * sc2, sa, sb, sc, e ? P(e->b) : NULL,
		              e ? e->bs : 0, e ? e->cols : 0, e ? e->act : 0};
		if (items) {
			/* products too small to be worth a wake-up run on this thread */
			const int64_t mnk = (int64_t)M * N * K, small = 4 * 65536;
			sb_pool_for(d->pool, batch, mnk < small ? (small + mnk - 1) / mnk : 1, k_gemm_items,
			            &g);
		} else {
			for (int i = 0; i < batch; i++) {
				sb_sgemm_par(d->pool, d->ws, 0, tb, M, N, K, alpha, g.A + i * sa, lda,
				             g.B + i * sb, ldb, beta, g.C + i * sc, ldc);
				bias_item t = {&g, i};
				if (g.bias)
					sb_pool_for(d->pool, M, sb_cpu_grain(N), k_bias_item, &t);
			}
		}
	}
	/* by shape, one entry a product of the second batch level (as OpenCL runs them); "items":
	 * a thread an item, "split": each item's product over the threads */
	const double each = d->profiling ? (sb_now() - t0) / batch2 : 0.0;
	for (int j = 0; d->profiling && j < batch2; j++)
		sb_prof_shape_add(&d->shapes, M, N, K, tb, batch, e != NULL, items ? "items" : "split",
		                  each);
	prof_add(d, OP_GEMM, t0, 2.0 * M * N * K * batch * batch2);
}

void sb_cpu_op_gemm(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                    sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                    int batch, int batch2, long sa2, long sb2, long sc2)
{
	gemm_epi(d, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch, batch2, sa2,
	         sb2, sc2, NULL);
}

void sb_cpu_op_gemm_bias(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda,
                         long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                         long sc, int batch, int batch2, long sa2, long sb2, long sc2,
                         const sb_bias *e)
{
	gemm_epi(d, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch, batch2, sa2,
	         sb2, sc2, e);
}

/* ---- attention: tasks of one head and a block of queries, each on one thread, so that the
 * block's scores stay in its core's cache from the product to the softmax to the next product */

#define ATT_ROWS 256

typedef struct {
	sb_gemm_ws *const *ws;
	const float *q, *k, *v;
	float *o, *s;
	int ldq, ldkv, ldo, nq, nk, hd, heads, blocks;
	long sq, skv, so;
	float scale;
	const float *g;            /* per-head gates, or NULL */
} att_job;

static void k_attention(void *vj, int64_t b, int64_t e, int wk)
{
	const att_job *j = vj;
	sb_gemm_ws *ws = j->ws[wk];
	float *s = j->s + (size_t)wk * ATT_ROWS * (size_t)j->nk;
	for (int64_t task = b; task < e; task++) {
		const int64_t item = task / ((int64_t)j->heads * j->blocks);
		const int h = (int)(task / j->blocks % j->heads);
		const int q0 = (int)(task % j->blocks) * ATT_ROWS;
		const int m = j->nq - q0 < ATT_ROWS ? j->nq - q0 : ATT_ROWS;
		const float *q = j->q + item * j->sq, *k = j->k + item * j->skv,
		            *v = j->v + item * j->skv;
		sb_sgemm(ws, 0, 1, m, j->nk, j->hd, j->scale, q + (size_t)q0 * j->ldq + (size_t)h * j->hd,
		         j->ldq, k + (size_t)h * j->hd, j->ldkv, 0.f, s, j->nk);
		/* the softmax's division goes to the product's hd outputs of a row, not its nk
		 * scores: one pass over the scores fewer (they do not fit a core's L2) */
		float inv[ATT_ROWS];
		for (int r = 0; r < m; r++) {
			float *row = s + (size_t)r * j->nk;
			inv[r] = 1.f / sb_vexp_sum(row, j->nk, sb_vmax(row, j->nk));
			if (j->g) /* the head's gate for the row, in the same scaling */
				inv[r] /= 1.f + expf(-j->g[item * j->sq + (int64_t)(q0 + r) * j->ldq + h]);
		}
		float *o = j->o + item * j->so + (size_t)q0 * j->ldo + (size_t)h * j->hd;
		sb_sgemm(ws, 0, 0, m, j->hd, j->nk, 1.f, s, j->nk, v + (size_t)h * j->hd, j->ldkv, 0.f,
		         o, j->ldo);
		for (int r = 0; r < m; r++)
			sb_vscale(o + (size_t)r * j->ldo, j->hd, inv[r]);
	}
}

void sb_cpu_op_attention(sb_bdev *d, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so, sb_dv g)
{
	if (nq <= 0 || nk <= 0 || heads <= 0 || batch <= 0 || d->st != SB_OK)
		return;
	const double t0 = prof_t0(d);
	const size_t need = (size_t)d->threads * ATT_ROWS * (size_t)nk;
	if (d->att_n < need) {
		float *s = realloc(d->att, sizeof(float) * need);
		if (!s) {
			d->st = SB_ERR_NOMEM;
			return;
		}
		d->att = s;
		d->att_n = need;
	}
	att_job j = {d->ws, P(q), P(k), P(v), P(o), d->att, ldq, ldkv, ldo, nq, nk, hd, heads,
	             (nq + ATT_ROWS - 1) / ATT_ROWS, sq, skv, so, scale, g.buf ? P(g) : NULL};
	sb_pool_for(d->pool, (int64_t)batch * heads * j.blocks, 1, k_attention, &j);
	prof_add(d, OP_ATTENTION, t0, 4.0 * nq * nk * hd * heads * batch);
}
