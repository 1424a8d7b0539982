/* Convolutions over rows as products (rows_conv.h). */
#include "models/rows_conv.h"

void sb_rows_product(sb_resident *p, int M, int N, int K, const float *A, int lda, sb_dv B,
                     int ldb, long sb, long sb2, int acc, sb_dv C, int ldc, long sc, long sc2,
                     int batch, int batch2, const float *bias)
{
	if (sb_resident_status(p) != SB_OK || M < 1 || N < 1 || batch < 1 || batch2 < 1)
		return;
	if (bias) {
		const sb_bias e = {sb_resident_w(p, bias), 0, 0, SB_ACT_NONE};
		p->o->gemm_bias(p->x.d, M, N, K, 1.f, sb_resident_w(p, A), lda, 0, B, ldb, sb, 0,
		                acc ? 1.f : 0.f, C, ldc, sc, batch, batch2, 0, sb2, sc2, &e);
	} else {
		p->o->gemm(p->x.d, M, N, K, 1.f, sb_resident_w(p, A), lda, 0, B, ldb, sb, 0, acc ? 1.f : 0.f,
		           C, ldc, sc, batch, batch2, 0, sb2, sc2);
	}
}

void sb_rows_conv3x3(sb_resident *p, sb_dv x, int B, int R, int ci, int co, int T,
                     const float *const w[3], const float *b, sb_dv y)
{
	/* x padded by a row and a frame at each end, zeros around */
	const size_t item = (size_t)(R + 2) * ci * (T + 2);
	sb_dv xp = sb_resident_a(p, (size_t)B * item);
	if (sb_resident_status(p) == SB_OK) {
		p->o->zero(p->x.d, xp, (size_t)B * item);
		p->o->copy_rows(p->x.d, sb_dv_at(xp, (size_t)ci * (T + 2) + 1), T + 2, (long)item, x, T,
		                (long)R * ci * T, R * ci, T, B);
	}
	for (int v = 0; v < 3; v++)
		sb_rows_product(p, co, T, 3 * ci, w[v], 3 * ci, sb_dv_at(xp, (size_t)v), T + 2,
		                (long)ci * (T + 2), (long)(R + 2) * ci * (T + 2), v > 0, y, T,
		                (long)co * T, (long)R * co * T, R, B, v ? NULL : b);
	sb_resident_r(p, xp);
}
