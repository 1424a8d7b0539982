/* The AVX2 + FMA micro-kernel (gemm_kernels.h): a 6 x 16 tile of C in 12 registers, two
 * vectors of B and one broadcast of A per row for each k. Compiled with -mavx2 -mfma
 * (meson.build); called only where cpu_features.c found them. */
#include "backend/cpu/gemm_kernels.h"

#include <immintrin.h>

enum { MR = 6, NR = 16 };

SB_GEMM_PACKERS(f32, MR, NR)

#define DECL_ROW(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define FMA_ROW(i)                                                                               \
	{                                                                                            \
		const __m256 ai = _mm256_broadcast_ss(a + i);                                            \
		c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                              \
		c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                                              \
	}
#define STORE_ROW(i)                                                                             \
	do {                                                                                         \
		float *cr = c + (long)(i) * ldc;                                                         \
		__m256 r0 = _mm256_mul_ps(va, c##i##0), r1 = _mm256_mul_ps(va, c##i##1);                 \
		if (beta != 0.f) {                                                                       \
			r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), r0);                                   \
			r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), r1);                               \
		}                                                                                        \
		_mm256_storeu_ps(cr, r0);                                                                \
		_mm256_storeu_ps(cr + 8, r1);                                                            \
	} while (0)

static void f32_kernel(int kc, const void *pa, const void *pb, float *c, long ldc, float alpha,
                       float beta)
{
	const float *a = pa, *b = pb;
	DECL_ROW(0) DECL_ROW(1) DECL_ROW(2) DECL_ROW(3) DECL_ROW(4) DECL_ROW(5)
	for (int k = 0; k < kc; k++) {
		const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
		FMA_ROW(0) FMA_ROW(1) FMA_ROW(2) FMA_ROW(3) FMA_ROW(4) FMA_ROW(5)
		a += MR;
		b += NR;
	}
	const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
	STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3); STORE_ROW(4); STORE_ROW(5);
}

const sb_gemm_kernel sb_gemm_avx2_f32 = {"avx2 fp32 6x16", MR, NR, 256, 120, 2048, 0,
                                         f32_pack_a, f32_pack_b, f32_kernel};
