/* The AVX-512 micro-kernels (gemm_kernels.h): fp32 with FMA, and bf16 pairs with vdpbf16ps
 * (AVX512_BF16: two products of bf16 inputs added to an fp32 sum, twice fp32's rate per
 * instruction). A 12 x 32 tile of C lives in 24 registers; each step of k loads two vectors of
 * B and broadcasts one value of A per row. Compiled with -mavx512f/bw/dq/vl/bf16 (meson.build);
 * called only where cpu_features.c found those instructions. */
#include "backend/cpu/gemm_kernels.h"

#include <immintrin.h>

enum { MR = 12, NR = 32 };

SB_GEMM_PACKERS(f32, MR, NR)

/* ---- bf16 packing, vectorised: the conversion costs as much as the products otherwise ---- */

/* n (<= 16) floats at s as 16 bf16 rounded to nearest even, past n zeros */
static inline __m256i cvt16(const float *s, int n)
{
	const __mmask16 m = n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u);
	return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s));
}

/* the words (lo[j], hi[j]) of two rows of n floats, j < 16 */
static inline __m512i pair16(const float *lo, const float *hi, int n)
{
	const __m512i l = _mm512_cvtepu16_epi32(cvt16(lo, n));
	const __m512i h = hi ? _mm512_cvtepu16_epi32(cvt16(hi, n)) : _mm512_setzero_si512();
	return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

/* Words of two consecutive rows of a row-major matrix (B as stored), a panel of pw columns at
 * a time: kp x pw words per panel. */
static void pack_pairs(int kc, int width, int pw, const float *s, long ld, uint32_t *d)
{
	const int kp = (kc + 1) / 2;
	for (int j0 = 0; j0 < width; j0 += pw) {
		const int n = width - j0 < pw ? width - j0 : pw;
		for (int p = 0; p < kp; p++) {
			const float *lo = s + (long)(2 * p) * ld + j0;
			const float *hi = 2 * p + 1 < kc ? lo + ld : NULL;
			uint32_t *o = d + (long)p * pw;
			if (pw == 32) {
				_mm512_store_si512(o, pair16(lo, hi, n));
				_mm512_store_si512(o + 16, pair16(lo + 16, hi ? hi + 16 : NULL, n - 16));
			} else { /* MR = 12 */
				uint32_t t[16] __attribute__((aligned(64)));
				_mm512_store_si512(t, pair16(lo, hi, n));
				memcpy(o, t, sizeof(uint32_t) * (size_t)pw);
			}
		}
		d += (long)kp * pw;
	}
}

/* Words of consecutive elements of each row (a row in bf16 is its words), transposed into
 * panels: B stored transposed (N x K). */
static void pack_rows(int kc, int width, int pw, const float *s, long ld, uint32_t *d)
{
	const int kp = (kc + 1) / 2;
	uint32_t w[16] __attribute__((aligned(64)));
	for (int j0 = 0; j0 < width; j0 += pw) {
		const int n = width - j0 < pw ? width - j0 : pw;
		for (int j = 0; j < pw; j++) {
			uint32_t *o = d + j;
			if (j >= n) {
				for (int p = 0; p < kp; p++)
					o[(long)p * pw] = 0;
				continue;
			}
			const float *r = s + (long)(j0 + j) * ld;
			for (int p0 = 0; p0 < kp; p0 += 16) {
				const int k0 = 2 * p0, kn = kc - k0 < 32 ? kc - k0 : 32;
				const __m256i a = cvt16(r + k0, kn), b = cvt16(r + k0 + 16, kn - 16);
				_mm512_store_si512(w, _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
				const int pn = kp - p0 < 16 ? kp - p0 : 16;
				for (int p = 0; p < pn; p++)
					o[(long)(p0 + p) * pw] = w[p];
			}
		}
		d += (long)kp * pw;
	}
}

/* A's bf16 panels hold each row's words in a run (row i of a panel at i kp): A as stored is
 * then converted row by row, with no transposing (the kernel broadcasts from 12 runs). This
 * matters where N is small: attention's P V (N = 64 per head) spends more on packing P than on
 * multiplying it otherwise. */
static void b16_pack_a(int ta, int mc, int kc, const float *a, long lda, void *dst)
{
	uint32_t *d = dst;
	const int kp = (kc + 1) / 2;
	for (int i0 = 0; i0 < mc; i0 += MR) {
		const int m = mc - i0 < MR ? mc - i0 : MR;
		for (int i = 0; i < MR; i++, d += kp) {
			if (i >= m) {
				memset(d, 0, sizeof(uint32_t) * (size_t)kp);
				continue;
			}
			if (ta) { /* A stored K x M: a column of it, paired (no product asks for this) */
				for (int p = 0; p < kp; p++) {
					const float lo = a[(long)(2 * p) * lda + i0 + i];
					const float hi = 2 * p + 1 < kc ? a[(long)(2 * p + 1) * lda + i0 + i] : 0.f;
					d[p] = (uint32_t)sb_bf16(lo) | (uint32_t)sb_bf16(hi) << 16;
				}
				continue;
			}
			const float *r = a + (long)(i0 + i) * lda;
			for (int k0 = 0; k0 < kc; k0 += 32) {
				const int kn = kc - k0;
				const __mmask16 m0 = kn >= 16 ? 0xffff : (__mmask16)((1u << kn) - 1u);
				const __mmask16 m1 = kn >= 32 ? 0xffff : kn <= 16 ? 0
				                   : (__mmask16)((1u << (kn - 16)) - 1u);
				/* low 16 bf16 from the second operand: words (r[2p], r[2p+1]) in order */
				const __m512i w = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, r + k0 + 16),
				                                               _mm512_maskz_loadu_ps(m0, r + k0));
				const int pn = (kn < 32 ? kn + 1 : 32) / 2;
				_mm512_mask_storeu_epi32(d + k0 / 2, (__mmask16)((1u << pn) - 1u), w);
			}
		}
	}
}

static void b16_pack_b(int tb, int kc, int nc, const float *b, long ldb, void *dst)
{
	if (tb)
		pack_rows(kc, nc, NR, b, ldb, dst);
	else
		pack_pairs(kc, nc, NR, b, ldb, dst);
}

/* C = alpha acc + beta C for one row of the tile */
#define STORE_ROW(i)                                                                             \
	do {                                                                                         \
		float *cr = c + (long)(i) * ldc;                                                         \
		__m512 r0 = _mm512_mul_ps(va, c##i##0), r1 = _mm512_mul_ps(va, c##i##1);                 \
		if (beta != 0.f) {                                                                       \
			r0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr), r0);                                   \
			r1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr + 16), r1);                              \
		}                                                                                        \
		_mm512_storeu_ps(cr, r0);                                                                \
		_mm512_storeu_ps(cr + 16, r1);                                                           \
	} while (0)

#define DECL_ROW(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define ALL_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define STORE_ALL                                                                                \
	STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3); STORE_ROW(4); STORE_ROW(5);          \
	STORE_ROW(6); STORE_ROW(7); STORE_ROW(8); STORE_ROW(9); STORE_ROW(10); STORE_ROW(11);

#define FMA_ROW(i)                                                                               \
	{                                                                                            \
		const __m512 ai = _mm512_set1_ps(a[i]);                                                  \
		c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                                              \
		c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                                              \
	}

static void f32_kernel(int kc, const void *pa, const void *pb, float *c, long ldc, float alpha,
                       float beta)
{
	const float *a = pa, *b = pb;
	ALL_ROWS(DECL_ROW)
	for (int k = 0; k < kc; k++) {
		const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
		_mm_prefetch((const char *)(b + 8 * NR), _MM_HINT_T0);
		ALL_ROWS(FMA_ROW)
		a += MR;
		b += NR;
	}
	const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	STORE_ALL
}

#define DP_ROW(i)                                                                                \
	{                                                                                            \
		const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a##i[p]);                           \
		c##i##0 = _mm512_dpbf16_ps(c##i##0, ai, b0);                                             \
		c##i##1 = _mm512_dpbf16_ps(c##i##1, ai, b1);                                             \
	}

static void b16_kernel(int kc, const void *pa, const void *pb, float *c, long ldc, float alpha,
                       float beta)
{
	const uint32_t *b = pb;
	const int kp = (kc + 1) / 2;
	const uint32_t *a0 = pa, *a1 = a0 + kp, *a2 = a1 + kp, *a3 = a2 + kp, *a4 = a3 + kp,
	               *a5 = a4 + kp, *a6 = a5 + kp, *a7 = a6 + kp, *a8 = a7 + kp, *a9 = a8 + kp,
	               *a10 = a9 + kp, *a11 = a10 + kp;
	ALL_ROWS(DECL_ROW)
	for (int p = 0; p < kp; p++) {
		const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
		const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 16);
		_mm_prefetch((const char *)(b + 8 * NR), _MM_HINT_T0);
		ALL_ROWS(DP_ROW)
		b += NR;
	}
	const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	STORE_ALL
}

/* Blocks: a kc x NR panel of B (32 KB in fp32) stays in L1 while the MC x kc block of A
 * (144 KB) streams from L2; the kc x NC block of B (2 MB) sits in L2 or L3. bf16 halves the
 * bytes, so its kc doubles. */
const sb_gemm_kernel sb_gemm_avx512_f32 = {"avx512 fp32 12x32", MR, NR, 256, 144, 2048, 0,
                                           f32_pack_a, f32_pack_b, f32_kernel};
const sb_gemm_kernel sb_gemm_avx512_bf16 = {"avx512_bf16 12x32", MR, NR, 512, 144, 2048, 1,
                                            b16_pack_a, b16_pack_b, b16_kernel};
