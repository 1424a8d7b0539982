/* Convolutions over rows [B][F][C][T] (chunk, frequency row, channel, frame) as products on a
 * placed model (models/resident.h), for the convolution U-Nets (SCNet, MDX23C): along frequency a
 * product per output row over consecutive input rows ([rows][C] of K, frames as columns);
 * along time a product per tap over rows padded at both ends.
 * Threads: one pass at a time per placement, as resident.h. */
#ifndef SB_ROWS_CONV_H
#define SB_ROWS_CONV_H

#include "models/resident.h"

/* C_ij = A B_ij (+ C_ij when acc) for rows i < batch and chunks j < batch2 (B_ij at
 * B + i sb + j sb2, C_ij at C + i sc + j sc2; A a host weight array, the same for every item),
 * then the bias per row of C (a host array; NULL: none) */
void sb_rows_product(sb_resident *p, int M, int N, int K, const float *A, int lda, sb_dv B,
                     int ldb, long sb, long sb2, int acc, sb_dv C, int ldc, long sc, long sc2,
                     int batch, int batch2, const float *bias);

/* A 3 x 3 convolution with padding 1 over rows x [B][R][ci][T] into y [B][R][co][T]: per time
 * tap v, w[v] [co][3][ci] (the rows above, at and below) over three consecutive padded rows;
 * b (NULL: none) per output channel */
void sb_rows_conv3x3(sb_resident *p, sb_dv x, int B, int R, int ci, int co, int T,
                     const float *const w[3], const float *b, sb_dv y);

#endif
