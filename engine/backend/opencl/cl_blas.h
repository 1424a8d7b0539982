/* Matrix products on an opened OpenCL device: CLBlast (Debian's libclblast, a tuned OpenCL
 * BLAS) where it serves, the model backend's own kernel where it does not.
 *
 * WHY CLBLAST: a GEMM that runs well across NVIDIA, AMD and Intel GPUs needs per-device tile
 * sizes, vector widths and kernel variants chosen by measurement; CLBlast is that work done and
 * kept up, with a database of tuned devices, a tuner for the rest, and a C API that takes our
 * queue and buffers (no copies, no second queue). Even untuned on PoCL it runs HTDemucs's
 * products 2.5x faster than our plain tiled kernel (ops.cl), which stays as
 * the fallback when CLBlast is absent at build time or refuses a product.
 *
 * CHOICE (sb_cl_gemm_choose, sb_cl_gemm_measured): on a GPU, each product shape takes the
 * fastest of CLBlast, the own kernel and the tiled kernel, measured on the device itself
 * (cl_gemm_pick.h; CLBlast until a shape is measured); on a CPU driver (PoCL) CLBlast, which
 * runs HTDemucs's products 2.5x faster there than the own kernel. The environment variable
 * SB_CL_GEMM = "auto" measures on any device, and "clblast", "own", "tiled" or "tf32" forces
 * one path (for benches and tests). "tiled" is the register-tiled, double-buffered kernel of
 * gemm.cl (cl_gemm_tiled.h), written for issue #24 (products near cuBLAS on the H100). "tf32"
 * is NVIDIA's tensor cores with inputs rounded to tf32 (cl_gemm_mma.h), never measured against
 * the others: it changes the stems (by 3.3e-4 relative), so it is asked for, not chosen.
 *
 * TUNED PARAMETERS: CLBlast ships none for recent GPUs (the H100 among them) and then uses
 * generic values. Its tuners (Debian's clblast-utils, driven by tools/clblast_tune.sh) write
 * one JSON file per kernel family; put them in any of
 *   $SB_CLBLAST_TUNING (a folder), $XDG_DATA_HOME/stembridge/clblast (default
 *   ~/.local/share/stembridge/clblast), each of $XDG_DATA_DIRS + /stembridge/clblast,
 * directly or one folder down. Before the first product on a device, every file whose "device"
 * and "platform_vendor" are this device's name and platform vendor and whose precision is 32
 * is read; for each kernel (named from "kernel_family" by CLBlast's own rule: xgemm_1 and
 * xgemm_2 are Xgemm) the fastest file's "best_parameters" are given to
 * CLBlastOverrideParameters. A file that is damaged or that CLBlast refuses is logged with its
 * path and skipped; nothing stops a separation.
 *
 * Threads: any thread; tuning is applied once per device per process under a lock.
 */
#ifndef SB_CL_BLAS_H
#define SB_CL_BLAS_H

#include "backend/opencl/cl_internal.h"

typedef enum {
	SB_CL_GEMM_OWN = 0, SB_CL_GEMM_CLBLAST, SB_CL_GEMM_TILED, SB_CL_GEMM_TF32
} sb_cl_gemm_kind;

/* What a backend should use on d (see CHOICE above; under measuring, what a shape runs until it
 * is measured). When it is CLBlast, the tuning files for d are applied first (once per device
 * per process) and the outcome logged. */
sb_cl_gemm_kind sb_cl_gemm_choose(sb_cl_device *d);
/* 1 when the products of the device p describes are measured per shape (cl_gemm_pick.h):
 * SB_CL_GEMM=auto, or SB_CL_GEMM unset on a GPU or an accelerator */
int sb_cl_gemm_measured(const sb_device *p);
/* The same rule for any operation measured per shape: the environment variable 'var' is
 * "auto", or unset (or empty) on a GPU or an accelerator (SB_CL_ATTENTION: cl_attention.c) */
int sb_cl_measured(const sb_device *p, const char *var);
/* What sb_cl_gemm_choose() will pick, without its tuning or its messages: for a description
 * before the first product */
sb_cl_gemm_kind sb_cl_gemm_planned(void);
/* "CLBlast 1.5.3", "own kernel", "tiled kernel", "tensor cores, tf32" */
const char *sb_cl_gemm_name(sb_cl_gemm_kind k);
/* 1 when this build has CLBlast */
int sb_cl_blas_available(void);
/* Kernels given tuned parameters on d by this process so far (0 when none matched). */
int sb_cl_blas_tuned_kernels(sb_cl_device *d);

/* 'batch' products C[b] = alpha A[b] op(B[b]) + beta C[b] on q, row-major: A is M x K
 * (row stride lda), B is K x N (ldb) or, with tb, N x K; C is M x N (ldc). Offsets and the
 * strides between batch items (sa, sb, sc; 0 shares one matrix) count floats. Enqueued only
 * (q, one of d's queues, is in order). SB_ERR_DEVICE_OOM and SB_ERR_DEVICE_LOST as sb_cl_status
 * maps them; SB_ERR_UNSUPPORTED (logged) when CLBlast refuses the product for a reason of its own
 * (an untuned kernel too big for the device, a build failure), so the caller can use its own
 * kernel instead; SB_ERR_UNSUPPORTED without a log when the build has no CLBlast. */
sb_status sb_cl_sgemm(sb_cl_device *d, cl_command_queue q, int M, int N, int K, float alpha,
                      cl_mem A, size_t aoff, int lda, long sa, cl_mem B, size_t boff, int ldb,
                      long sb, int tb, float beta, cl_mem C, size_t coff, int ldc, long sc,
                      int batch);

#endif
