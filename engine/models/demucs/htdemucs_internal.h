/* Inside the HTDemucs engine: packed weights, the layouts of activations, and the ops the
 * forward pass (htdemucs_forward.c) is made of. Only engine/demucs includes this.
 *
 * Layouts. The frequency branch is kept as [F][C][T] (one C x T matrix per frequency row)
 * with 2 zero rows before and after: a convolution over frequencies with kernel 8 and stride
 * 4 then reads rows 4f-2 .. 4f+5 as one contiguous (8C x T) matrix, so every layer is plain
 * matrix products with no im2col, and the DConv branches, which the reference runs on each
 * frequency row separately, read one contiguous C x T matrix. The time branch is [C][T]. The
 * transformer works on tokens, [N][D].
 */
#ifndef SB_HTDEMUCS_INTERNAL_H
#define SB_HTDEMUCS_INTERNAL_H

#include "models/demucs/htdemucs.h"

#include <fftw3.h>

#define HD_DEPTH 4
#define HD_NFFT 4096
#define HD_HOP 1024
#define HD_FPAD 2 /* zero frequency rows kept on each side of a freq tensor */

/* DConv residual branch (demucs.py): per layer d, x += scale * GLU(GN(conv1x1(GELU(GN(
 * dilated conv3(x)))))), dilation 2^d. */
typedef struct {
	int dil;
	float *w1;                /* [3][H][C]: tap k of the dilated conv, as separate matrices */
	float *b1, *n1w, *n1b;    /* [H] */
	float *w2;                /* [2C][H] */
	float *b2, *n2w, *n2b;    /* [2C] */
	float *scale;             /* [C] LayerScale */
} hd_dconv_layer;

typedef struct {
	int C, H, depth;
	hd_dconv_layer l[2];
} hd_dconv;

typedef struct {
	int cin, cout;
	float *w;  /* freq: [cout][8 taps][cin]; time: [cout][cin][8] (as stored) */
	float *b;  /* [cout] */
	float *rw; /* rewrite 1x1: [2cout][cout] */
	float *rb;
	int has_dconv;
	hd_dconv dc;
} hd_enc;

typedef struct {
	int cin, cout, last;
	float *rw; /* rewrite, freq 3x3: [3 time taps][2cin][3 freq taps][cin]; time: [3][2cin][cin] */
	float *rb;
	int has_dconv;
	hd_dconv dc;
	float *tw; /* transposed conv, freq: [4 phases][cout][2 rows][cin]; time: [8 taps][cout][cin] */
	float *tb;
} hd_dec;

typedef struct {
	int cross;
	float *n1w, *n1b, *n2w, *n2b, *n3w, *n3b; /* LayerNorms (norm3 only in cross layers) */
	float *in_w, *in_b;                       /* [3D][D], [3D]: q, k, v projections */
	float *out_w, *out_b;                     /* [D][D], [D] */
	float *l1w, *l1b, *l2w, *l2b;             /* [Hd][D], [Hd], [D][Hd], [D] */
	float *g1, *g2;                           /* LayerScale [D] */
	float *now, *nob;                         /* norm_out: GroupNorm(1, D) */
} hd_tlayer;

struct sb_htdemucs {
	sb_htdemucs_config cfg;
	hd_enc enc[HD_DEPTH], tenc[HD_DEPTH];
	hd_dec dec[HD_DEPTH], tdec[HD_DEPTH]; /* in the order they run: deepest first */
	float *freq_emb;                       /* [512][channels], times freq_emb * emb_scale */
	int ct;                                /* channels at the bottom: channels * 8 */
	int dim, hidden;                       /* transformer width and feed-forward width */
	float *up_w, *up_b, *down_w, *down_b, *upt_w, *upt_b, *downt_w, *downt_b;
	float *nin_w, *nin_b, *nint_w, *nint_b;
	hd_tlayer *layers, *layers_t;
	float *window;                         /* periodic Hann, HD_NFFT */
	fftwf_plan fwd, inv;                   /* executed with new arrays, from any thread */
	int64_t params;
	float **owned; /* every weight array (all of them, for uploading to a device) */
	size_t *owned_n;
	int n_owned, cap_owned;
};

/* A frequency-branch tensor: rows -HD_FPAD .. F+HD_FPAD-1, each C x T, pad rows zero. */
typedef struct {
	int F, C, T;
	float *base;
} hd_ften;

static inline float *hd_row(const hd_ften *x, int f)
{
	return x->base + (size_t)(f + HD_FPAD) * (size_t)x->C * (size_t)x->T;
}

/* Buffers from the workspace (htdemucs_ws.c), 64-byte aligned; ws may be NULL (malloc). */
void *hd_alloc(sb_htdemucs_ws *ws, size_t bytes);
void *hd_calloc(sb_htdemucs_ws *ws, size_t bytes);
void hd_free(sb_htdemucs_ws *ws, void *p);

/* pad rows zeroed, data rows left for the layer to write */
sb_status hd_ften_alloc(sb_htdemucs_ws *ws, hd_ften *x, int F, int C, int T);
void hd_ften_free(sb_htdemucs_ws *ws, hd_ften *x);

/* Vectorised maths on one thread (htdemucs_vmath.c). */
float hd_gelu(float x);
float hd_vmax(const float *x, int64_t n);
float hd_vexp_sum(float *x, int64_t n, float sub);
void hd_vsum_sq(const float *x, int64_t n, double *sum, double *sq); /* x = exp(x - sub); returns the sum */
void hd_vscale(float *x, int64_t n, float s);
void hd_vbias_gelu(float *x, int64_t n, float b); /* x = gelu(x + b) */
void hd_vbias_gelu_cols(float *x, int64_t n, const float *b);
void hd_vnorm_affine(float *x, int64_t n, float m, float a, float c, int gelu);
void hd_vglu(const float *a, const float *g, float *out, int64_t n); /* a * sigmoid(g) */
void hd_vglu_add(float *x, const float *a, const float *g, float s, int64_t n);

/* Element-wise pieces (htdemucs_ops.c); every one takes a pool that may be NULL. */
void hd_gelu_inplace(sb_pool *pool, float *x, int64_t n);
void hd_add_inplace(sb_pool *pool, float *x, const float *y, int64_t n);
/* GroupNorm with one group over a rows x T matrix, then per-row affine, optional GELU. */
void hd_groupnorm1(sb_pool *pool, float *x, int rows, int T, const float *w, const float *b,
                   int gelu);
/* out[c][t] = z[c][t] * sigmoid(z[C + c][t]) */
void hd_glu(sb_pool *pool, const float *z, float *out, int C, int T);
/* Per-row bias (and GELU): x[r][t] += b[r]. */
void hd_bias_rows(sb_pool *pool, float *x, int rows, int T, const float *b, int gelu);

/* Layers (htdemucs_layers.c). Scratch sizes are in floats per worker. */
size_t hd_dconv_scratch(const hd_dconv *d, int T);
void hd_dconv_run(const hd_dconv *d, sb_pool *pool, float *x, int T, float *scratch);
sb_status hd_enc_freq(const hd_enc *l, sb_pool *pool, sb_htdemucs_ws *ws, const hd_ften *in,
                      hd_ften *out);
sb_status hd_dec_freq(const hd_dec *l, sb_pool *pool, sb_htdemucs_ws *ws, hd_ften *x,
                      const hd_ften *skip, hd_ften *out);
/* in [cin][lin] -> out [cout][(lin + 3) / 4] */
sb_status hd_enc_time(const hd_enc *l, sb_pool *pool, sb_htdemucs_ws *ws, const float *in,
                      int64_t lin, float *out);
/* x [cin][lin] (+= skip, in place) -> out [cout][length] */
sb_status hd_dec_time(const hd_dec *l, sb_pool *pool, sb_htdemucs_ws *ws, float *x,
                      const float *skip, int64_t lin, int64_t length, float *out);

/* Transformer (htdemucs_transformer.c): x [Fr * T1][D] tokens t1 * Fr + fr, xt [T2][D]. */
sb_status hd_transformer(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws, float *x,
                         int Fr, int T1, float *xt, int T2);

/* Add the sine position embeddings to tokens x [Fr * T1][D] and xt [T2][D]. */
void hd_pos_2d(float *x, int D, int Fr, int T1);
void hd_pos_1d(float *x, int D, int T2);

/* Branch inputs (htdemucs_forward.c): z [ac][F][T][2] as complex-as-channels rows of x
 * (allocated F x 2ac x T), normalised by their mean and (1e-5 + unbiased std); and the
 * waveform normalised the same way. */
void hd_cac_normalise(const float *z, int ac, int F, int T, hd_ften *x, float *mean, float *std_);
void hd_normalise_time(const float *in, int64_t n, float *out, float *mean, float *std_);

/* STFT and inverse (htdemucs_spec.c), HTDemucs._spec and ._ispec. */
/* mix [ac][L] -> z [ac][F = HD_NFFT / 2][T][2], T = ceil(L / HD_HOP) */
sb_status hd_spec(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws, const float *mix,
                  int ac, int64_t L, float *z);
/* Frequency-branch output x (F rows, S * ac * 2 channels, complex as (re, im) channel pairs),
 * scaled by std and shifted by mean, to waveforms out[S * ac][L] (added to what is there). */
sb_status hd_ispec_add(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws,
                       const hd_ften *x, float std_, float mean, int64_t L, float *out);

#endif
