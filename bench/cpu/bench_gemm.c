/* Matrix products on the CPU backend's own terms: HTDemucs's shapes (the ones that make up
 * most of a segment's products, from a traced segment), each run through sb_sgemm_par on the
 * engine's pool as the backend runs them, in GFLOP/s and as a share of the processor's peak
 * (measured here: a loop of independent FMAs, or vdpbf16ps for bf16, on every thread).
 * SB_GEMM picks a library instead of our kernels (gemm.h); SB_CPU_ISA caps the instruction set.
 *
 *   bench_gemm [--threads N] [--precision fp32|bf16] [--seconds S]
 *
 * Prints one JSON line per shape and one for the whole set, and the peak.
 */
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "core/thread_pool.h"
#include "sb_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
	int M, N, K, tb, batch;
	const char *what;
} shape;

/* The products of one HTDemucs segment with the most arithmetic (bench/cpu/README.md) */
static const shape shapes[] = {
	{2688, 512, 2048, 1, 1, "transformer feed-forward out"},
	{2688, 2048, 512, 1, 1, "transformer feed-forward in"},
	{2688, 1536, 512, 1, 1, "transformer q, k, v"},
	{2688, 512, 512, 1, 1, "transformer projection"},
	{96, 335, 144, 0, 4, "decoder rewrite conv (per frequency row)"},
	{384, 335, 576, 0, 4, "encoder conv (per frequency row)"},
	{768, 335, 1152, 0, 4, "deep encoder conv"},
	{384, 336, 1536, 0, 4, "encoder rewrite"},
	{256, 2688, 64, 1, 8, "attention scores Q K^T (a block of queries, per head)"},
	{256, 64, 2688, 0, 8, "attention P V (per head)"},
};

/* Peak of one core: independent FMA chains, no memory; the pool runs one per thread, long
 * enough (about 0.3 s) that waking the pool's threads does not count. */
#define PEAK_ITERS 100000000L
typedef struct {
	double sink[256]; /* per worker: keeps the loops' results alive */
	int bf16;
} peak_job;

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) static double peak512(long n, int bf16)
{
	/* different starting values: identical chains would be merged by the compiler */
	__m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f),
	       a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f),
	       a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f),
	       a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
	const __m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(0.999f);
	const __m512bh xb = (__m512bh)_mm512_set1_epi32(0x3f803f80);
	for (long i = 0; i < n; i++) {
		if (bf16) {
#define DP(r) r = _mm512_dpbf16_ps(r, xb, xb);
			DP(a0) DP(a1) DP(a2) DP(a3) DP(a4) DP(a5) DP(a6) DP(a7) DP(a8) DP(a9) DP(a10) DP(a11)
		} else {
#define FM(r) r = _mm512_fmadd_ps(r, y, x);
			FM(a0) FM(a1) FM(a2) FM(a3) FM(a4) FM(a5) FM(a6) FM(a7) FM(a8) FM(a9) FM(a10) FM(a11)
		}
	}
	__m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
	                         _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
	s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
	return _mm512_reduce_add_ps(s) + (double)n * 12 * (bf16 ? 64 : 32);
}

__attribute__((target("avx2,fma"))) static double peak256(long n)
{
	__m256 a0 = _mm256_set1_ps(0.f), a1 = _mm256_set1_ps(1.f), a2 = _mm256_set1_ps(2.f),
	       a3 = _mm256_set1_ps(3.f), a4 = _mm256_set1_ps(4.f), a5 = _mm256_set1_ps(5.f),
	       a6 = _mm256_set1_ps(6.f), a7 = _mm256_set1_ps(7.f), a8 = _mm256_set1_ps(8.f),
	       a9 = _mm256_set1_ps(9.f), a10 = _mm256_set1_ps(10.f), a11 = _mm256_set1_ps(11.f);
	const __m256 x = _mm256_set1_ps(1e-7f), y = _mm256_set1_ps(0.999f);
	for (long i = 0; i < n; i++) {
#define FM2(r) r = _mm256_fmadd_ps(r, y, x);
		FM2(a0) FM2(a1) FM2(a2) FM2(a3) FM2(a4) FM2(a5) FM2(a6) FM2(a7) FM2(a8) FM2(a9)
		FM2(a10) FM2(a11)
	}
	__m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
	                         _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
	s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
	float v[8];
	_mm256_storeu_ps(v, s);
	return v[0] + (double)n * 12 * 16;
}
#endif

static void peak_part(void *ctx, int64_t b, int64_t e, int worker)
{
	peak_job *j = ctx;
	double f = 0;
	for (int64_t i = b; i < e; i++) {
#if defined(__x86_64__)
		const sb_cpu_features *c = sb_cpu_features_get();
		if (c->isa == SB_ISA_AVX512)
			f += peak512(PEAK_ITERS, j->bf16);
		else if (c->isa == SB_ISA_AVX2)
			f += peak256(PEAK_ITERS);
#endif
	}
	j->sink[worker & 255] += f;
}

static double peak_gflops(sb_pool *pool, int threads, int bf16)
{
	peak_job j = {{0}, bf16};
	const double t0 = now();
	sb_pool_for(pool, threads, 1, peak_part, &j);
	const double t = now() - t0;
	const sb_isa isa = sb_cpu_features_get()->isa;
	const double per = isa == SB_ISA_AVX512 ? (bf16 ? 64 : 32) : isa == SB_ISA_AVX2 ? 16 : 0;
	return (double)PEAK_ITERS * 12 * per * threads / t / 1e9;
}

int main(int argc, char **argv)
{
	int threads = 2, bf16 = 0;
	double secs = 1.0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--precision") && i + 1 < argc)
			bf16 = !strcmp(argv[++i], "bf16");
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			secs = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_gemm [--threads N] [--precision fp32|bf16] "
			                "[--seconds S]\n");
			return 2;
		}
	}
	sb_pool *pool = NULL;
	if (sb_pool_new(threads, 0, &pool) != SB_OK)
		return 1;
	threads = sb_pool_threads(pool);
	sb_gemm_ws **ws = calloc((size_t)threads, sizeof *ws);
	for (int i = 0; i < threads; i++)
		ws[i] = sb_gemm_ws_new(bf16);
	const sb_cpu_features *cf = sb_cpu_features_get();
	const int eff_bf16 = bf16 && sb_gemm_bf16_available();
	const double peak = peak_gflops(pool, threads, eff_bf16);
	double all_f = 0, all_t = 0;
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		const shape *sh = &shapes[s];
		const size_t na = (size_t)sh->M * sh->K, nb = (size_t)sh->K * sh->N,
		             nc = (size_t)sh->M * sh->N;
		float *A = malloc(sizeof(float) * na * sh->batch), *B = malloc(sizeof(float) * nb);
		float *C = malloc(sizeof(float) * nc * sh->batch);
		for (size_t i = 0; i < na * sh->batch; i++)
			A[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
		for (size_t i = 0; i < nb; i++)
			B[i] = (float)((i * 40503u) % 1000) / 1000.f - 0.5f;
		const double flops = 2.0 * sh->M * sh->N * sh->K * sh->batch;
		int reps = 0;
		double t = 0;
		do {
			const double t0 = now();
			for (int b = 0; b < sh->batch; b++)
				sb_sgemm_par(pool, ws, 0, sh->tb, sh->M, sh->N, sh->K, 1.f, A + b * na, sh->K,
				             B, sh->tb ? sh->K : sh->N, 0.f, C + b * nc, sh->N);
			if (reps++ > 0) /* the first is a warm-up */
				t += now() - t0;
		} while (t < secs / 8 || reps < 3);
		const double gf = flops * (reps - 1) / t / 1e9;
		all_f += flops;
		all_t += t / (reps - 1);
		printf("{\"shape\": \"%dx%dx%d%s x%d\", \"what\": \"%s\", \"gflops\": %.1f, "
		       "\"of_peak\": %.3f}\n", sh->M, sh->N, sh->K, sh->tb ? " (B^T)" : "", sh->batch,
		       sh->what, gf, peak > 0 ? gf / peak : 0.0);
		free(A);
		free(B);
		free(C);
	}
	printf("{\"products\": \"%s\", \"isa\": \"%s\", \"cpu\": \"%s family %u model %u\", "
	       "\"threads\": %d, \"precision\": \"%s\", \"peak_gflops\": %.1f, \"gflops\": %.1f, "
	       "\"of_peak\": %.3f}\n", sb_gemm_describe(eff_bf16), cf->flags, cf->vendor, cf->family,
	       cf->model, threads, eff_bf16 ? "bf16" : "fp32", peak, all_f / all_t / 1e9,
	       peak > 0 ? all_f / all_t / 1e9 / peak : 0.0);
	for (int i = 0; i < threads; i++)
		sb_gemm_ws_free(ws[i]);
	free(ws);
	sb_pool_free(pool);
	return 0;
}
