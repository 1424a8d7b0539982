/* See gemm.h. */
#include "backend/cpu/gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS is loaded on the first product (dlopen), not linked: its library constructor starts
 * a thread pool, and a plugin host that loads Stembridge only to look at it (lv2lint, a host's
 * plugin scan) must start no thread. Without it (not installed, or built with
 * -Dopenblas=disabled), the blocked loop below. */
#include <dlfcn.h>

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);
static sgemm_fn blas_sgemm; /* set once, before any product (pthread_once) */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* CBLAS's enumerations (cblas.h): row-major 101, no transpose 111, transpose 112. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* OpenBLAS keeps one process-wide thread count; one thread per call is the only setting
 * under which the engine's own split (and any other caller's) stays predictable. */
static void init_once(void)
{
#ifdef SB_HAVE_OPENBLAS
	if (getenv("SB_GEMM") && !strcmp(getenv("SB_GEMM"), "builtin"))
		return;
	void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	void (*set_threads)(int) = (void (*)(int))dlsym(lib, "openblas_set_num_threads");
	sgemm_fn f = (sgemm_fn)dlsym(lib, "cblas_sgemm");
	if (!set_threads || !f)
		return; /* kept loaded: unloading a library that started threads is not safe */
	set_threads(1);
	blas_sgemm = f;
#endif
}

void sb_gemm_init(void)
{
	pthread_once(&once, init_once);
}

const char *sb_gemm_backend(void)
{
	sb_gemm_init();
	return blas_sgemm ? "openblas" : "builtin";
}

/* Blocked so that a K-slice of B stays in cache while rows of A stream past it. */
static void builtin_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                          int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	enum { KB = 128, NB = 512 };
	float acc[NB];
	for (int j0 = 0; j0 < N; j0 += NB) {
		const int nb = N - j0 < NB ? N - j0 : NB;
		for (int i = 0; i < M; i++) {
			memset(acc, 0, sizeof(float) * (size_t)nb);
			for (int k0 = 0; k0 < K; k0 += KB) {
				const int kb = K - k0 < KB ? K - k0 : KB;
				for (int k = k0; k < k0 + kb; k++) {
					const float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
					if (tb)
						for (int j = 0; j < nb; j++)
							acc[j] += a * B[(size_t)(j0 + j) * ldb + k];
					else {
						const float *b = B + (size_t)k * ldb + j0;
						for (int j = 0; j < nb; j++)
							acc[j] += a * b[j];
					}
				}
			}
			float *c = C + (size_t)i * ldc + j0;
			for (int j = 0; j < nb; j++)
				c[j] = alpha * acc[j] + (beta == 0.f ? 0.f : beta * c[j]);
		}
	}
}

void sb_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return;
	if (blas_sgemm)
		blas_sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
		           tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C,
		           ldc);
	else
		builtin_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

typedef struct {
	int ta, tb, M, N, K, by_rows;
	float alpha, beta;
	const float *A, *B;
	float *C;
	int lda, ldb, ldc;
} gemm_job;

static void gemm_part(void *vj, int64_t b, int64_t e, int worker)
{
	(void)worker;
	const gemm_job *j = vj;
	if (j->by_rows) {
		const float *a = j->ta ? j->A + b : j->A + b * j->lda;
		sb_sgemm(j->ta, j->tb, (int)(e - b), j->N, j->K, j->alpha, a, j->lda, j->B, j->ldb,
		         j->beta, j->C + b * j->ldc, j->ldc);
	} else {
		const float *bb = j->tb ? j->B + b * j->ldb : j->B + b;
		sb_sgemm(j->ta, j->tb, j->M, (int)(e - b), j->K, j->alpha, j->A, j->lda, bb, j->ldb,
		         j->beta, j->C + b, j->ldc);
	}
}

void sb_sgemm_par(sb_pool *pool, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc)
{
	const int threads = sb_pool_threads(pool);
	if (threads == 1 || (int64_t)M * N * K < 4 * 65536) {
		sb_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
		return;
	}
	gemm_job j = {ta, tb, M, N, K, M >= N, alpha, beta, A, B, C, lda, ldb, ldc};
	/* chunks of whole register tiles: 16 rows or 64 columns */
	const int64_t n = j.by_rows ? M : N;
	const int64_t grain = j.by_rows ? 16 : 64;
	int64_t per = (n + threads - 1) / threads;
	per = (per + grain - 1) / grain * grain;
	sb_pool_for(pool, n, per, gemm_part, &j);
}
