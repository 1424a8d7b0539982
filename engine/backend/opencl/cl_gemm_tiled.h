/* The register-tiled matrix product of gemm.cl (SB_CL_GEMM=tiled, cl_blas.h): its tile sizes
 * per device, its programs and its launch. Nothing outside backend/opencl includes this.
 *
 * TILES: a device gets three tilings from a small table keyed by its vendor (cl_gemm_tiled.c):
 * a large one for products with enough tiles to fill the device, a small one for the rest
 * (fewer large tiles than compute units, or a side within half a large tile), and a thin one
 * for products of few rows (HTDemucs's convolutions of 6 to 48 channels). SB_CL_TILE=
 * "TM,TN,TK,WM,WN" replaces the large one and turns the others off; "...;..." names the large
 * and the small, "...;...;..." all three: for benches that compare tilings and for tests of
 * one tiling. A tiling the device cannot run (its work-group or local memory too large) or
 * that breaks gemm.cl's rules is logged and the table's is kept.
 *
 * Threads: as the device (one job at a time).
 */
#ifndef SB_CL_GEMM_TILED_H
#define SB_CL_GEMM_TILED_H

#include "backend/opencl/cl_base.h"

typedef struct sb_cl_tiled sb_cl_tiled;

/* Builds the programs for c's device (once; the kernel cache keeps the binaries). SB_OK when
 * ready; SB_ERR_DEVICE (logged) when a build failed, and the caller uses the own kernel. */
sb_status sb_cl_tiled_open(sb_bdev *c, sb_cl_tiled **out);
void sb_cl_tiled_free(sb_cl_tiled *t);
/* gemm.cl's source (for the names of files kept per kernel version) */
const char *sb_cl_tiled_source(void);
/* The table of tilings in words (the products' measured choices are kept under it: a new
 * table measures them again). */
void sb_cl_tiled_table(char *buf, size_t len);
/* "tiled kernel 128x128x8 (8x8 an item), 128x64x16 (8x4) below 132 tiles or a side within half
 * a tile, 16x128x8 (4x8) for few rows" */
const char *sb_cl_tiled_describe(const sb_cl_tiled *t);

/* As cl_blas.h's sb_cl_sgemm, then gemm_bias's epilogue e (NULL: none) as C is written;
 * enqueued on c's queue through sb_cl_run (failures kept in c). Returns the tiling's name for
 * the profile ("tiled 16x128"), which lives as long as t. */
const char *sb_cl_tiled_gemm(sb_bdev *c, sb_cl_tiled *t, int M, int N, int K, float alpha,
                             sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                             float beta, sb_dv C, int ldc, long sc, int batch, const sb_bias *e);

#endif
