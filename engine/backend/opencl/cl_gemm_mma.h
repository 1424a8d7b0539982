/* Matrix products on NVIDIA's tensor cores, bf16 inputs and fp32 sums (mma.cl): what an OpenCL
 * device runs for --precision bf16 (sb_open_opts.precision = SB_PREC_BF16). Nothing outside
 * backend/opencl includes this.
 *
 * WHERE: a GPU whose platform is NVIDIA's and whose compute capability is 8.0 or later
 * (cl_nv_device_attribute_query; the instruction needs it). Elsewhere bf16 is not available and
 * the device runs fp32, said once a process. SB_CL_MMA=emulate builds the same kernel with the
 * instruction emulated (any device, PoCL in the tests: slow, the same arithmetic).
 *
 * TILES: BM x BN of C a work-group of 128 items (mma.cl), 128 x 64 by default and 64 x 64 for
 * products with fewer such tiles than compute units; SB_CL_MMA_TILE="BM,BN[;BM,BN]" replaces
 * them (benches, tests): BM a multiple of 32, BN 16 or a multiple of 32, within the device's
 * local memory.
 *
 * Threads: as the device (one job at a time).
 */
#ifndef SB_CL_GEMM_MMA_H
#define SB_CL_GEMM_MMA_H

#include "backend/opencl/cl_base.h"

typedef struct sb_cl_mma sb_cl_mma;

/* 1 when d runs mma.cl's instruction natively (NVIDIA, compute capability >= 8.0); *why says
 * what it lacks otherwise ("an NVIDIA GPU's tensor cores"). The _id form, for a device not opened (listings), also gives the compute
 * capability as 10 major + minor. */
int sb_cl_mma_native(sb_cl_device *d, const char **why);
int sb_cl_mma_native_id(cl_device_id id, const char *platform, unsigned *cc, const char **why);
/* Builds the programs for c's device, bf16 or tf32 (inputs rounded to 10-bit mantissas:
 * SB_CL_GEMM=tf32), the instruction native or emulated, and checks their products on the
 * device against the host's before returning (a few small products, once). SB_OK when ready;
 * SB_ERR_DEVICE (logged) when a build failed (a driver that refuses the asm) or the products
 * are wrong (a driver that runs the instruction otherwise); SB_ERR_NOMEM; a device failure. */
sb_status sb_cl_mma_open(sb_bdev *c, int emulate, int tf32, sb_cl_mma **out);
void sb_cl_mma_free(sb_cl_mma *m);
/* "tensor cores, bf16 (mma m16n8k16), 128x64 tiles, 64x64 below 132" (or tf32, m16n8k8) */
const char *sb_cl_mma_describe(const sb_cl_mma *m);
/* the build options of the instruction as m was built (bf16 or tf32, native or emulated, the
 * spelling of inline assembly the driver took), for the other programs that include mma.cl */
const char *sb_cl_mma_options(const sb_cl_mma *m);
/* 1 when SB_CL_MMA=emulate asks for the emulated instruction */
int sb_cl_mma_emulate_asked(void);
/* x as mma.cl rounds its inputs: bf16 to nearest even, or tf32 to nearest, ties away */
float sb_cl_mma_round(float x, int tf32);

/* As cl_blas.h's sb_cl_sgemm, with A and B rounded to bf16 (to nearest even) or tf32 (to
 * nearest, ties away) and fp32 sums, then gemm_bias's epilogue e (NULL: none) as C is
 * written; enqueued on c's queue through sb_cl_run (failures kept in c). */
void sb_cl_mma_gemm(sb_bdev *c, sb_cl_mma *m, int M, int N, int K, float alpha, sb_dv A, int lda,
                    long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                    long sc, int batch, const sb_bias *e);

#endif
