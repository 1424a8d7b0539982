/* Matrix products for the Demucs engine: row-major C = alpha * op(A) * op(B) + beta * C.
 *
 * With OpenBLAS (SB_HAVE_OPENBLAS: found at build time; loaded with dlopen at sb_gemm_init(),
 * so that loading the plugin starts none of its threads) each call is OpenBLAS's
 * single-threaded sgemm; the engine splits the work across its own pool (thread_pool.h), so
 * that the caller's thread count holds and two jobs in one process do not fight over
 * OpenBLAS's global thread pool. Without it (or with SB_GEMM=builtin in the environment), a
 * plain cache-blocked loop keeps the engine correct, only slower.
 */
#ifndef SB_DEMUCS_GEMM_H
#define SB_DEMUCS_GEMM_H

#include "core/thread_pool.h"

/* Once per process before the first product: loads OpenBLAS and makes it run in the calling
 * thread. */
void sb_gemm_init(void);

/* Single-threaded product on the calling thread. ta/tb: 0 = as stored, 1 = transposed. */
void sb_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* The same product split across the pool: by rows of C when M is the larger side, else by
 * columns. */
void sb_sgemm_par(sb_pool *pool, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc);

/* "openblas" or "builtin", for logs and benches. */
const char *sb_gemm_backend(void);

#endif
