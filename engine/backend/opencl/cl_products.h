/* The products' dispatcher of the OpenCL backend (cl_products.c): over the product kernels
 * (ops.cl's own, gemm.cl's tiled, mma.cl's tensor cores, CLBlast), below the operations' table
 * (cl_ops.c), which also runs attention's products through it. */
#ifndef SB_CL_PRODUCTS_H
#define SB_CL_PRODUCTS_H

#include "backend/opencl/cl_base.h"

/* The products' path on the device, chosen once, at its first product or attention (ops.cl
 * built): SB_CL_GEMM's, checked it can run (else the own kernel, said), and the measuring per
 * shape opened where it is done (a GPU). SB_OK, or the failure (kept in c). */
sb_status sb_cl_products_choose(sb_bdev *c);
/* how the products run, for the log: "measured per shape: ...", a tiling, "CLBlast 1.5.3" */
const char *sb_cl_products_describe(const sb_bdev *c);
/* The first bf16 product on this device (--precision bf16): opens the tensor-core kernel where
 * the device has it (or SB_CL_MMA=emulate asks for its emulation), else fp32, said once a
 * process. Only running out of host memory is a failure. */
sb_status sb_cl_bf16_products(sb_bdev *c);
/* backend.h's gemm_bias (e NULL: gemm), on the path chosen or measured for its shape */
void sb_cl_product(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                   sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                   int batch, int batch2, long sa2, long sb2, long sc2, const sb_bias *e);
/* gemm_bias's epilogue as a pass of its own (after a product that has none: CLBlast's; or
 * bias_cols) */
void sb_cl_bias_items(sb_bdev *c, int M, int N, sb_dv C, int ldc, long sc, int batch,
                      const sb_bias *e);

#endif
