/* Inside the matrix products (gemm.c): the micro-kernels and their packing, one set per
 * instruction set, after the BLIS design (Van Zee and van de Geijn, "BLIS: A Framework for
 * Rapidly Instantiating BLAS Functionality", ACM TOMS 2015): A and B are copied into panels
 * that the kernel reads in order, and one small kernel computes an MR x NR tile of C from a
 * panel of each.
 *
 * Packed layouts, kc being the depth of one block:
 *   fp32  A: per panel of MR rows, for k < kc, MR floats; B: per panel of NR columns, for
 *         k < kc, NR floats.
 *   bf16  K in pairs (vdpbf16ps multiplies two pairs and adds both products to an fp32 sum):
 *         A: per panel, for i < MR, ceil(kc / 2) 32-bit words each holding (A[i][2p],
 *         A[i][2p+1]) (a row of A in bf16 is its words: packing A as stored converts and
 *         copies); B: per panel, for p, NR words holding (B[2p][j], B[2p+1][j]). An odd last
 *         k is paired with a zero.
 * Rows and columns past the matrix's edge are packed as zeros, so the kernel always computes
 * whole tiles; gemm.c writes a partial one through a scratch tile.
 *
 * Each file is compiled for its instruction set (meson.build) and called only where
 * cpu_features.c found it.
 */
#ifndef SB_GEMM_KERNELS_H
#define SB_GEMM_KERNELS_H

#include <stdint.h>
#include <string.h>

typedef struct {
	const char *name;                /* "avx512 fp32 12x32" */
	int mr, nr, kc, mc, nc;          /* tile and block sizes (kc even for bf16) */
	int bf16;                        /* packs and multiplies bf16 pairs */
	/* mc x kc block of op(A) starting at a (ta: A is stored K x M) */
	void (*pack_a)(int ta, int mc, int kc, const float *a, long lda, void *dst);
	/* kc x nc block of op(B) starting at b (tb: B is stored N x K) */
	void (*pack_b)(int tb, int kc, int nc, const float *b, long ldb, void *dst);
	/* C[MR][NR] = alpha sum_k A B + beta C (beta == 0: C is not read) */
	void (*kernel)(int kc, const void *a, const void *b, float *c, long ldc, float alpha,
	               float beta);
} sb_gemm_kernel;

extern const sb_gemm_kernel sb_gemm_generic_f32;
#if defined(__x86_64__)
extern const sb_gemm_kernel sb_gemm_avx2_f32;
extern const sb_gemm_kernel sb_gemm_avx512_f32;
extern const sb_gemm_kernel sb_gemm_avx512_bf16;
#endif

/* fp32 to bf16, rounded to nearest even; a NaN stays a (quiet) NaN */
static inline uint16_t sb_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* The packing loops, written once for any MR and NR; each kernel file instantiates them with
 * its constants so that the compiler vectorises them for that file's instruction set. */
#define SB_GEMM_PACKERS(PFX, MR, NR)                                                             \
	static void PFX##_pack_a(int ta, int mc, int kc, const float *a, long lda, void *dst)        \
	{                                                                                            \
		float *d = dst;                                                                          \
		for (int i0 = 0; i0 < mc; i0 += MR) {                                                    \
			const int m = mc - i0 < MR ? mc - i0 : MR;                                           \
			if (ta) {                                                                            \
				for (int k = 0; k < kc; k++) {                                                   \
					const float *s = a + (long)k * lda + i0;                                     \
					int i = 0;                                                                   \
					for (; i < m; i++)                                                           \
						d[i] = s[i];                                                             \
					for (; i < MR; i++)                                                          \
						d[i] = 0.f;                                                              \
					d += MR;                                                                     \
				}                                                                                \
			} else {                                                                             \
				for (int i = 0; i < MR; i++) {                                                   \
					const float *s = a + (long)(i0 + i) * lda;                                   \
					for (int k = 0; k < kc; k++)                                                 \
						d[(long)k * MR + i] = i < m ? s[k] : 0.f;                                \
				}                                                                                \
				d += (long)kc * MR;                                                              \
			}                                                                                    \
		}                                                                                        \
	}                                                                                            \
	static void PFX##_pack_b(int tb, int kc, int nc, const float *b, long ldb, void *dst)        \
	{                                                                                            \
		float *d = dst;                                                                          \
		for (int j0 = 0; j0 < nc; j0 += NR) {                                                    \
			const int n = nc - j0 < NR ? nc - j0 : NR;                                           \
			if (!tb) {                                                                           \
				for (int k = 0; k < kc; k++) {                                                   \
					const float *s = b + (long)k * ldb + j0;                                     \
					int j = 0;                                                                   \
					for (; j < n; j++)                                                           \
						d[j] = s[j];                                                             \
					for (; j < NR; j++)                                                          \
						d[j] = 0.f;                                                              \
					d += NR;                                                                     \
				}                                                                                \
			} else {                                                                             \
				for (int j = 0; j < NR; j++) {                                                   \
					const float *s = b + (long)(j0 + j) * ldb;                                   \
					for (int k = 0; k < kc; k++)                                                 \
						d[(long)k * NR + j] = j < n ? s[k] : 0.f;                                \
				}                                                                                \
				d += (long)kc * NR;                                                              \
			}                                                                                    \
		}                                                                                        \
	}

#endif
