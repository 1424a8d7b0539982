/* The CPU backend's matrix products against a double-precision reference, as the engine calls
 * them (sb_sgemm on one thread, sb_sgemm_par on a pool), for every edge a tile can have: sizes
 * around the tiles and blocks, both transposes, leading dimensions wider than the matrix, alpha
 * and beta (beta = 0 must not read C: it is filled with NaN first). meson runs it once per
 * product path (SB_CPU_ISA caps the instruction set, SB_GEMM picks a library), and it checks
 * that the path it was asked for is the one that ran.
 *
 *   test_gemm [--precision bf16] [--expect TEXT]
 *
 * --expect: the product path's description must contain TEXT (gemm.h's sb_gemm_describe);
 * a path for an instruction set this processor lacks is skipped. --expect-best: the path must
 * use the widest instruction set the processor has (whatever OPENBLAS_CORETYPE says).
 * fp32 must be within 1e-5 of the reference relative to sum |a||b|; bf16 within 1.25 x 2^-7
 * of it (each input rounded to 8 significant bits is off by up to 2^-8, a product of two by up
 * to 2^-7; the sums in fp32 add little), and farther from it than fp32 is (the inputs really
 * were rounded).
 */
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "core/thread_pool.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) & 0xffffff) / 16777216.f * 2.f - 1.f;
}

/* worst |c - ref| / (sum_k |a||b| + 1e-30) over the product; -1 if C changed where it must not */
static double check(sb_pool *pool, sb_gemm_ws *const *ws, int par, int ta, int tb, int M, int N,
                    int K, float alpha, float beta)
{
	const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
	const int arows = ta ? K : M, brows = tb ? N : K;
	float *A = malloc(sizeof(float) * (size_t)arows * lda);
	float *B = malloc(sizeof(float) * (size_t)brows * ldb);
	float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
	for (long i = 0; i < (long)arows * lda; i++)
		A[i] = frand();
	for (long i = 0; i < (long)brows * ldb; i++)
		B[i] = frand();
	for (long i = 0; i < (long)M * ldc; i++)
		C0[i] = C[i] = beta == 0.f ? NAN : frand();
	if (par)
		sb_sgemm_par(pool, ws, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	else
		sb_sgemm(ws[0], ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	double worst = 0;
	for (int i = 0; i < M; i++) {
		for (int j = 0; j < ldc; j++) {
			const float got = C[(long)i * ldc + j];
			if (j >= N) { /* padding between rows: untouched */
				if (memcmp(&got, &C0[(long)i * ldc + j], sizeof got))
					return -1;
				continue;
			}
			double s = 0, mag = 0;
			for (int k = 0; k < K; k++) {
				const double a = ta ? A[(long)k * lda + i] : A[(long)i * lda + k];
				const double b = tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
				s += a * b;
				mag += fabs(a * b);
			}
			const double bc = beta == 0.f ? 0 : beta * (double)C0[(long)i * ldc + j];
			const double ref = alpha * s + bc;
			const double e = fabs(got - ref) / (fabs(alpha) * mag + fabs(bc) + 1e-30);
			if (!(e == e)) /* NaN: beta = 0 read C, or the kernel made one */
				return 1e9;
			if (e > worst)
				worst = e;
		}
	}
	free(A);
	free(B);
	free(C);
	free(C0);
	return worst;
}

int main(int argc, char **argv)
{
	int bf16 = 0, best = 0;
	const char *expect = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--precision") && i + 1 < argc)
			bf16 = !strcmp(argv[++i], "bf16");
		else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--expect-best"))
			best = 1;
	}
	sb_pool *pool = NULL;
	if (sb_pool_new(3, 0, &pool) != SB_OK)
		return 1;
	sb_gemm_ws *ws[3];
	for (int i = 0; i < 3; i++)
		ws[i] = sb_gemm_ws_new(bf16);
	const char *path = sb_gemm_describe(bf16);
	printf("products: %s (CPU: %s)\n", path, sb_cpu_features_get()->flags);
	if (bf16 && !sb_gemm_bf16_available()) {
		printf("SKIP: this CPU has no AVX512_BF16\n");
		return 77;
	}
	const sb_isa isa = sb_cpu_features_get()->isa;
	if (expect && ((!strcmp(expect, "avx2") && isa < SB_ISA_AVX2) ||
	               (!strcmp(expect, "avx512") && isa < SB_ISA_AVX512))) {
		printf("SKIP: this CPU has no %s\n", expect);
		return 77;
	}
	if (expect && !strstr(path, expect)) {
		printf("FAIL: asked for '%s', ran '%s'\n", expect, path);
		return 1;
	}
	if (best) {
		/* ours say "avx512 ...", oneDNN's "(AVX-512 ...)" */
		const char *want = isa == SB_ISA_AVX512 ? "512" : isa == SB_ISA_AVX2 ? "vx2" : "";
		if (!strstr(path, want) || strstr(path, "OpenBLAS")) {
			printf("FAIL: the processor has %s, the products ran '%s'\n",
			       sb_cpu_features_get()->flags, path);
			return 1;
		}
	}
	const double tol = bf16 ? 1.25 / 128 : 1e-5;
	const int verbose = getenv("TEST_GEMM_VERBOSE") != NULL;
	/* around every tile (4, 6, 8, 12, 16, 32) and block (kc 256 / 512, mc 64-144, nc 1024-2048) */
	const int sizes[][3] = {
		{1, 1, 1},    {1, 37, 5},    {13, 1, 7},   {12, 32, 1},  {11, 31, 2},   {13, 33, 3},
		{25, 65, 17}, {7, 100, 255}, {50, 9, 256}, {37, 70, 257}, {145, 40, 300},
		{30, 2049, 9}, {121, 97, 513}, {96, 335, 144}, {200, 130, 1030},
	};
	double worst = 0;
	int cases = 0;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (int t = 0; t < 4; t++)
			for (int ab = 0; ab < 2; ab++)
				for (int par = 0; par < 2; par++) {
					const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
					const float alpha = ab ? 0.75f : 1.f, beta = ab ? 0.5f : 0.f;
					const double e = check(pool, ws, par, t & 1, t >> 1, M, N, K, alpha, beta);
					cases++;
					if (e < 0 || e > tol) {
						printf("FAIL: %dx%dx%d ta=%d tb=%d alpha=%g beta=%g %s: %s %.3g\n", M,
						       N, K, t & 1, t >> 1, alpha, beta, par ? "pool" : "one thread",
						       e < 0 ? "wrote outside C" : "error", e);
						failures++;
					}
					if (verbose)
						printf("%dx%dx%d ta=%d tb=%d beta=%g %s: %.3g\n", M, N, K, t & 1, t >> 1,
						       beta, par ? "pool" : "one", e);
					if (e > worst)
						worst = e;
				}
	/* bf16 that is as exact as fp32 did not round its inputs */
	if (bf16 && worst < 1e-4) {
		printf("FAIL: bf16 products are within %.3g of the reference: inputs not rounded\n",
		       worst);
		failures++;
	}
	printf("%d products, worst error %.3g of sum|a||b| (limit %.3g)\n", cases, worst, tol);
	for (int i = 0; i < 3; i++)
		sb_gemm_ws_free(ws[i]);
	sb_pool_free(pool);
	printf("%s\n", failures ? "FAILED" : "OK");
	return failures ? 1 : 0;
}
