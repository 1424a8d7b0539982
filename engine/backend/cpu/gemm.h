/* Matrix products for the CPU backend: row-major C = alpha * op(A) * op(B) + beta * C.
 *
 * Every path is chosen from the instruction set the processor has, never from a table of
 * processor models (which a newer processor falls out of: OpenBLAS 0.3.21 ran a 2004 core on
 * a 2023 Xeon, bench/cpu/README.md):
 *   fp32  oneDNN's sgemm where libdnnl.so.2 is installed (JIT-compiled for the instructions
 *         present; the fastest choice measured), else our own packed products
 *         (gemm_kernels.h) for AVX-512, AVX2 + FMA or portable C (cpu_features.h);
 *   bf16  our AVX512_BF16 kernel: inputs rounded to bf16 as they are packed, sums in fp32.
 * Each call runs on the calling thread (a library is held to one thread); sb_sgemm_par splits
 * one product across the engine's own pool (thread_pool.h), so the caller's thread count holds
 * and two jobs in one process do not fight over a library's global threads.
 *
 * SB_GEMM=own|onednn|openblas|blis|loop in the environment picks the fp32 path (benches and
 * comparisons; "loop" is the unpacked reference). A library is loaded with dlopen at the first
 * product: nothing starts a thread before it (the plugin's lv2lint test).
 */
#ifndef SB_CPU_GEMM_H
#define SB_CPU_GEMM_H

#include "core/thread_pool.h"

/* One thread's packing buffers (about 2.5 MB, allocated at its first packed product). Used by
 * one thread at a time. */
typedef struct sb_gemm_ws sb_gemm_ws;

/* bf16: products round their inputs to bf16 (sums stay fp32), where the processor can; else
 * fp32 (sb_gemm_bf16_available() says which). NULL when out of memory. Products given a NULL
 * workspace, or one whose buffers cannot be had, run the unpacked loop, slower but correct. */
sb_gemm_ws *sb_gemm_ws_new(int bf16);
void sb_gemm_ws_free(sb_gemm_ws *ws);

/* Once per process before the first product: detects the processor, loads a library that
 * SB_GEMM names. Any thread. */
void sb_gemm_init(void);

/* Single-threaded product on the calling thread. ta/tb: 0 = as stored, 1 = transposed. */
void sb_sgemm(sb_gemm_ws *ws, int ta, int tb, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* The same product split across the pool (ws[w] for worker w): by rows of C when M is the
 * larger side, else by columns, in whole tiles. */
void sb_sgemm_par(sb_pool *pool, sb_gemm_ws *const *ws, int ta, int tb, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);

/* What runs the fp32 and bf16 products: "own avx512 fp32 12x32", "OpenBLAS 0.3.21 (Haswell)"
 * ... */
const char *sb_gemm_describe(int bf16);

/* bf16 products can run here (AVX512_BF16, own kernels) */
int sb_gemm_bf16_available(void);

#endif
