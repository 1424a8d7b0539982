/* MDX23C (TFC-TDF-UNet v3: Kim et al. 2023, "Sound Demixing Challenge 2023 Music Demixing
 * Track Technical Report: TFC-TDF-UNet v3", arXiv:2306.09382) as ZFTurbo's
 * Music-Source-Separation-Training computes it at inference (models/mdx23c_tfc_tdf_v3.py),
 * written once against the backend interface: every device with the convolution nets' group
 * runs it.
 *
 * One chunk (mdx23c_forward.c): a Hann STFT of dim_f bins, the bins cut into subbands as
 * channels (cac2cws); a 1 x 1 convolution; a U-Net of TFC-TDF blocks (norm, GELU, 3 x 3
 * convolution; a time-distributed bottleneck of two linears over frequency; norm, GELU, 3 x 3
 * convolution; a 1 x 1 shortcut), down-sampled and up-sampled by strided convolutions with
 * the encoder's outputs concatenated on the way up; the result times the first convolution's
 * output; two 1 x 1 convolutions around a GELU over the input and it; the inverse STFT of each
 * output. Activations are rows [F][C][T] per chunk (models/rows_conv.h).
 * Only models/mdx23c includes this.
 */
#ifndef SB_MDX23C_H
#define SB_MDX23C_H

#include "backend/backend.h"
#include "convert/mdx23c_config.h"
#include "models/resident.h"

#include <stdatomic.h>

/* a norm of the Sequential(norm, act, ...) heads (NULL weights: none) */
typedef struct {
	float *w, *b;
} mx_norm;

typedef struct {
	int in_c, c, f;                  /* input channels, channels, frequency rows */
	mx_norm n1, n2, n3, n4;          /* tfc1, tdf (twice), tfc2 */
	float *conv1[3], *conv2[3];      /* per time tap [c][3][in_c], [c][3][c] */
	float *l1, *l2;                  /* [f / bn][f], [f][f / bn] */
	float *shortcut;                 /* [c][in_c] */
} mx_block;

typedef struct {
	mx_block *enc, *dec;             /* num_blocks_per_scale each */
	mx_norm down_n, up_n;
	float *down, *up;                /* [c + g][(v, ci, u)], [(v, c - g, u)][c] */
	int c, f;                        /* the encoder's channels and rows at this scale */
} mx_scale;

typedef struct sb_mdx23c {
	sb_mdx23c_config cfg;
	int S, dim_c, fk, T, stems;      /* audio channels, input channels, rows, frames, outputs */
	int64_t L;
	mx_scale *sc;
	mx_block *bottleneck;
	int bottom_c, bottom_f;
	float *first;                    /* [c][dim_c] */
	float *final0, *final2;          /* [c][dim_c + c], [stems dim_c][c] */
	float *window, *zeros;           /* Hann (periodic) [n_fft]; [T] */
	int64_t params;
	double pass_floats, largest_floats;
	sb_weights w;
} sb_mdx23c;

sb_status sb_mdx23c_load(const char *path, const char *name, const sb_logger *log,
                         sb_mdx23c **out);
void sb_mdx23c_free(sb_mdx23c *net);

/* A net on a device, and one forward pass of B chunks: in [B][S][L] -> out [B][stems][S][L]. */
typedef struct sb_mdx23c_on sb_mdx23c_on;
sb_status sb_mdx23c_place(const sb_mdx23c *net, const sb_exec *dev, const sb_logger *log,
                          sb_mdx23c_on **out);
void sb_mdx23c_unplace(sb_mdx23c_on *r);
void sb_mdx23c_on_stop(sb_mdx23c_on *r, const atomic_int *a, const atomic_int *b);
sb_status sb_mdx23c_forward(sb_mdx23c_on *r, int B, const float *in, float *out);

#endif
