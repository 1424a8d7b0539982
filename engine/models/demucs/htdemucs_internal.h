/* Inside the HTDemucs engine: packed weights, the layouts of activations, and the host pieces
 * of the forward pass (htdemucs_forward.c: the STFTs and normalisation). Only models/demucs
 * includes this.
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
#include "models/place.h"


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
	int64_t params;
	sb_weights w;  /* every weight array (all of them, for placing on a device) */
};

/* Add the sine position embeddings to tokens x [Fr * T1][D] and xt [T2][D]. */
void hd_pos_2d(float *x, int D, int Fr, int T1);
void hd_pos_1d(float *x, int D, int T2);

#endif
