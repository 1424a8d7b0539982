/* An HTDemucs net resident on a device (models/resident.h) and the shorthands its forward pass is
 * written with: device frequency tensors, products and linear layers that skip work after a
 * failure.
 *
 * Threads: one pass at a time per placement (a net on a device).
 */
#include "models/demucs/htdemucs_internal.h"
#include "models/resident.h"

#include <stdlib.h>

void sb_htdemucs_on_stop(sb_htdemucs_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

void sb_htdemucs_unplace(sb_htdemucs_on *r)
{
	if (!r)
		return;
	if (r->pos)
		r->p.x.be->release(r->p.x.d, r->pos);
	sb_resident_fini(&r->p);
	free(r);
}

sb_status sb_htdemucs_place(const sb_htdemucs *net, const sb_exec *dev, const sb_logger *log,
                            sb_htdemucs_on **out)
{
	*out = NULL;
	sb_htdemucs_on *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR_NOMEM;
	r->net = net;
	sb_status st = sb_resident_init(&r->p, &net->w, dev, log, "htdemucs");
	if (st != SB_OK) {
		free(r);
		return st;
	}
	*out = r;
	return SB_OK;
}

void hd_dften_new(sb_htdemucs_on *r, dften *x, int B, int F, int C, int T)
{
	x->B = B;
	x->F = F;
	x->C = C;
	x->T = T;
	x->base = buffer(r, (size_t)B * ften_item(x));
	if (pass_status(r) != SB_OK)
		return;
	const size_t pad = (size_t)HD_FPAD * C * T;
	for (int b = 0; b < B; b++) {
		r->p.o->zero(r->p.x.d, drow(x, b, -HD_FPAD), pad);
		r->p.o->zero(r->p.x.d, drow(x, b, F), pad);
	}
}

void hd_dften_free(sb_htdemucs_on *r, dften *x)
{
	give_back(r, x->base);
	x->base.buf = NULL;
}

/* ---- shorthands for the operations ---- */

void hd_gemm(sb_htdemucs_on *r, int M, int N, int K, float alpha, sb_dv a, int lda, long sa,
             sb_dv b, int ldb, long sb, int tb, float beta, sb_dv c, int ldc, long sc,
             int batch, int batch2, long sa2, long sb2, long sc2)
{
	if (M > 0 && N > 0 && batch > 0 && batch2 > 0 && pass_status(r) == SB_OK)
		r->p.o->gemm(r->p.x.d, M, N, K, alpha, a, lda, sa, b, ldb, sb, tb, beta, c, ldc, sc, batch,
		           batch2, sa2, sb2, sc2);
}

void hd_gemm_bias(sb_htdemucs_on *r, int M, int N, int K, sb_dv a, int lda, long sa, sb_dv b,
                  int ldb, long sb, int tb, float beta, sb_dv c, int ldc, long sc, int batch,
                  int batch2, long sa2, long sb2, long sc2, const float *bias, int cols, int act)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0 || pass_status(r) != SB_OK)
		return;
	const sb_bias e = {weight(r, bias), 0, cols, act};
	r->p.o->gemm_bias(r->p.x.d, M, N, K, 1.f, a, lda, sa, b, ldb, sb, tb, beta, c, ldc, sc, batch,
	                  batch2, sa2, sb2, sc2, &e);
}

/* y [n][out] = x [n][in] W^T + b (nn.Linear), optional GELU */
void hd_linear(sb_htdemucs_on *r, sb_dv x, size_t n, int in, const float *w,
               const float *b, int out, sb_dv y, int act)
{
	hd_gemm_bias(r, (int)n, out, in, x, in, 0, weight(r, w), in, 0, 1, 0.f, y, out, 0, 1, 1, 0, 0,
	             0, b, 1, act);
}
