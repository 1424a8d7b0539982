/* Vectorised element-wise maths on one thread (vmath.c): exp, erf and the sigmoid as
 * branch-free polynomials built for AVX-512, AVX2+FMA and the baseline, picked at load time.
 * Only the CPU backend includes this. */
#ifndef SB_CPU_VMATH_H
#define SB_CPU_VMATH_H

#include <stdint.h>

float sb_vmax(const float *x, int64_t n);
/* x = exp(x - sub); returns the sum */
float sb_vexp_sum(float *x, int64_t n, float sub);
/* sum and sum of squares, in double */
void sb_vsum_sq(const float *x, int64_t n, double *sum, double *sq);
void sb_vscale(float *x, int64_t n, float s);
void sb_vbias_gelu(float *x, int64_t n, float b);          /* x = gelu(x + b) */
void sb_vbias_gelu_cols(float *x, int64_t n, const float *b); /* x[i] = gelu(x[i] + b[i]) */
void sb_vbias_tanh(float *x, int64_t n, float b);          /* x = tanh(x + b) */
void sb_vbias_tanh_cols(float *x, int64_t n, const float *b); /* x[i] = tanh(x[i] + b[i]) */
void sb_vnorm_affine(float *x, int64_t n, float m, float a, float c, int gelu);
void sb_vglu(const float *a, const float *g, float *out, int64_t n); /* a * sigmoid(g) */
void sb_vglu_add(float *x, const float *a, const float *g, float s, int64_t n);
/* an LSTM cell's step over H units: z [4H] its gates' pre-activations (i, f, g, o), c [H]
 * updated, h [H] written */
void sb_vlstm_cell(const float *z, float *c, float *h, int64_t H);

#endif
