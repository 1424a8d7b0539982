/* SCNet (Tong et al. 2024, "SCNet: Sparse Compression Network for Music Source Separation",
 * arXiv:2401.13276) as ZFTurbo's Music-Source-Separation-Training computes it at inference
 * (models/scnet/scnet.py, separation.py), written once against the backend interface: every
 * device with the LSTM and convolution nets' groups runs it.
 *
 * One chunk (scnet_forward.c): the chunk zero-padded to an odd number of hops, a rectangular
 * STFT (normalized) whose real and imaginary parts are the channels; an encoder of SD blocks
 * (each: the frequencies split into three bands, each band down-sampled by a convolution along
 * frequency and refined by a stack of convolution modules along time, GELU, then a 3 x 3
 * convolution); a separation network of dual-path LSTMs (along frequency, then along time),
 * every other one behind an FFT along time; a decoder of fusion layers (skip added, 3 x 3
 * convolution, GLU) and SU layers (a transposed convolution per band); the inverse STFT of each
 * stem. Everything lives as rows [F][C][T] per chunk, so that a convolution along frequency is
 * one product over consecutive rows and one along time a product over a padded row.
 * Only models/scnet includes this.
 */
#ifndef SB_SCNET_H
#define SB_SCNET_H

#include "backend/backend.h"
#include "convert/scnet_config.h"
#include "models/resident.h"

#include <stdatomic.h>

/* a ConvolutionModule layer: GroupNorm, Conv1d (2h, kernel K) taps, GLU, depthwise Conv1d,
 * GroupNorm + Swish, Conv1d 1 x 1 */
typedef struct {
	float *n0w, *n0b;     /* [C] */
	float *c1w, *c1b;     /* [K][2h][C] (a product per tap), [2h] */
	float *dw, *dwb;      /* [h][K], [h] */
	float *n4w, *n4b;     /* [h] */
	float *c6w, *c6b;     /* [C][h], [C] */
} sc_conv_layer;

typedef struct {
	sb_scnet_bands bands;            /* of its input rows */
	int rows_in, rows_out, ci, co, h;
	float *down_w[3], *down_b[3];    /* [co][k][ci] (k taps of consecutive rows), [co] */
	sc_conv_layer *layers[3];        /* conv_depths[b] each */
	float *glob_w[3], *glob_b;       /* per time tap v: [co][3][ci], and [co] */
	/* the decoder of this level */
	float *fuse_w[3], *fuse_b;       /* the fusion's 3 x 3 (the repeated input folded): per
	                                    time tap [2co][3][co], [2co] */
	int cout;                        /* the SU layer's output channels */
	float *up_w[3], *up_b[3];        /* per band: stride 1: [cout][k][co] (a convolution over
	                                    padded rows); stride k: [k][cout][co], bias [k][cout] */
} sc_level;

typedef struct {
	float *nw[2], *nb[2];            /* GroupNorm(1, d) of each path */
	float *wih[2], *whh[2], *b[2];   /* [2][4H][d], [2][4H][H], [2][4H] (b_ih + b_hh) */
	float *lw[2], *lb[2];            /* [d][2H], [d] */
	int d, H;
} sc_dual;

typedef struct sb_scnet {
	sb_scnet_config cfg;
	int levels, S, n_src;            /* encoder levels, audio channels, sources */
	int64_t L, Lp;                   /* a chunk, and its padded length */
	int frames, frames2;             /* STFT frames (even), and frames / 2 + 1 */
	sc_level *lv;
	sc_dual *dp;
	float *ones;                     /* the rectangular window [nfft], and zero biases */
	float *zeros;                    /* [frames] */
	float *rfft_re, *rfft_im;        /* [T][T2]: torch.fft.rfft(norm="ortho") as products */
	float *irfft_re, *irfft_im;      /* [T2][T]: irfft(norm="ortho"), imag of DC and Nyquist
	                                    ignored */
	int64_t params;
	double pass_floats, largest_floats; /* device memory of one chunk's pass */
	sb_weights w;
} sb_scnet;

/* Opens a converted SCNet (stembridge-convert MODEL.ckpt --config MODEL.yaml): the config from
 * the metadata, every tensor's shape checked against it, the weights in the layouts above. */
sb_status sb_scnet_load(const char *path, const char *name, const sb_logger *log,
                        sb_scnet **out);
void sb_scnet_free(sb_scnet *net);

/* A net on a device, and one forward pass of B chunks: in [B][S][L] -> out [B][n_src][S][L]. */
typedef struct sb_scnet_on sb_scnet_on;
sb_status sb_scnet_place(const sb_scnet *net, const sb_exec *dev, const sb_logger *log,
                         sb_scnet_on **out);
void sb_scnet_unplace(sb_scnet_on *r);
void sb_scnet_on_stop(sb_scnet_on *r, const atomic_int *a, const atomic_int *b);
sb_status sb_scnet_forward(sb_scnet_on *r, int B, const float *in, float *out);

#endif
