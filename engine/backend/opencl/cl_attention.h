/* Attention's kernels on an OpenCL device, over the base (cl_base.h): in one pass
 * (attention.cl, after FlashAttention: a tile's scores stay in registers with a running softmax,
 * a query row a work-item), by tiles (attention_tiles.cl: the same, a work-group's 64 rows
 * shared by its items as a product's tile is), or in bf16 or tf32 on NVIDIA's tensor cores
 * (attention_mma.cl); each built at its first use and, where it must be, checked against the
 * host before it. Their programs, kernels, checks and the scores buffer of the products' way are
 * this file's, behind sb_cl_attention. Which way runs a shape is the dispatcher's (cl_ops.c).
 *
 * Threads: like the device, one job at a time.
 */
#ifndef SB_CL_ATTENTION_H
#define SB_CL_ATTENTION_H

#include "backend/opencl/cl_base.h"
#include "backend/opencl/cl_gemm_mma.h"

typedef struct sb_cl_attention sb_cl_attention;

/* A device's attention state: nothing built yet. Its key tiles go through local memory on a GPU,
 * where they are (the caches) on a CPU driver (SB_CL_ATT_LOCAL=0|1 overrides, for tests).
 * SB_ERR_NOMEM only. */
sb_status sb_cl_attention_new(cl_device_type type, sb_cl_attention **out);
/* releases its kernels, programs and buffer */
void sb_cl_attention_free(sb_cl_attention *a);
/* What names a file of attention's measured ways (cl_gemm_pick.h): the kernels' source of a
 * one-pass way (attention.cl's, attention_tiles.cl's), and whether attention.cl reads its key
 * tiles through local memory */
const char *sb_cl_attention_source(int way);
int sb_cl_attention_local(const sb_cl_attention *a);

/* The kernel of a one-pass way (SB_CL_ATT_FUSED, SB_CL_ATT_TILES of cl_gemm_pick.h) for heads
 * of hd values (up to 64), built at its first call. 1 when ready. 0 when not: c->st is set
 * when the device's state is why (memory, a lost device: asked again next pass); else *why says
 * what is wrong the first time the way is refused on this device (NULL after that), and the way
 * stays refused here. */
int sb_cl_attention_ready(sb_bdev *c, sb_cl_attention *a, int way, int hd, const char **why);
/* Under measuring, a one-pass way serves a device only once each of its kernels has passed its
 * check there (against the host, in double precision; one wait): 1 right, 0 not (logged once),
 * -1 not known (c->st: the device failed meanwhile, asked again next pass). */
int sb_cl_attention_checked(sb_bdev *c, sb_cl_attention *a, int way);
/* attention_mma.cl's kernel in bf16 or tf32, as the products' mma was built, for heads of 16,
 * 32 or 64 values, built and checked at its first use; 0 when it does not build there or
 * computes something else (logged once), or the device failed (c->st) */
int sb_cl_attention_mma_ready(sb_bdev *c, sb_cl_attention *a, const sb_cl_mma *mma, int tf32,
                              int hd);

/* One attention (backend.h: attention, its per-head gates g too) in one launch: through a
 * one-pass way's kernel, or on the tensor cores (tf32 or bf16), once ready. */
void sb_cl_attention_run(sb_bdev *c, sb_cl_attention *a, int way, sb_dv q, int ldq, sb_dv k,
                         sb_dv v, int ldkv, int nq, int nk, int heads, int hd, float scale,
                         sb_dv o, int ldo, int batch, long sq, long skv, long so, sb_dv g);
void sb_cl_attention_mma(sb_bdev *c, sb_cl_attention *a, int tf32, sb_dv q, int ldq, sb_dv k,
                         sb_dv v, int ldkv, int nq, int nk, int heads, int hd, float scale,
                         sb_dv o, int ldo, int batch, long sq, long skv, long so, sb_dv g);

/* The products' way's scores: at least floats of them, in a buffer the state keeps and grows;
 * {NULL, 0} with c->st set when the device has no room. */
sb_dv sb_cl_attention_scores(sb_bdev *c, sb_cl_attention *a, size_t floats);

#endif
