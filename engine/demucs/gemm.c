/* See gemm.h. */
#include "demucs/gemm.h"

#include <pthread.h>
#include <string.h>

#ifdef SB_HAVE_OPENBLAS
#include <cblas.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* OpenBLAS keeps one process-wide thread count; one thread per call is the only setting
 * under which the engine's own split (and any other caller's) stays predictable. */
static void init_once(void)
{
	openblas_set_num_threads(1);
}

void sb_gemm_init(void)
{
	pthread_once(&once, init_once);
}

const char *sb_gemm_backend(void)
{
	return "openblas";
}

void sb_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return;
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
	            M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
#else
void sb_gemm_init(void)
{
}

const char *sb_gemm_backend(void)
{
	return "builtin";
}

/* Blocked so that a K-slice of B stays in cache while rows of A stream past it. */
void sb_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
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
#endif

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
