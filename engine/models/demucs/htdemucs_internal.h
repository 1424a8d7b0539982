/* Inside the HTDemucs engine: packed weights, the layouts of activations, and what the files
 * of the forward pass share. Only models/demucs includes this.
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
#include "models/resident.h"


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
	float *out_w, *out_b;                     /* [D][D], [D], times gamma_1 (load_tlayer) */
	float *l1w, *l1b, *l2w, *l2b;             /* [Hd][D], [Hd], [D][Hd], [D]; l2 times gamma_2 */
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

/* ---- a net on a device: what the files of the forward pass share ----
 *
 * htdemucs_resident.c places the net and holds the shorthands below; htdemucs_layers.c the
 * encoder and decoder layers (htdemucs.py HEncLayer, HDecLayer) with their DConv branches
 * (demucs.py); htdemucs_transformer.c the cross-domain transformer (transformer.py);
 * htdemucs_forward.c the pass and its taps. Every function here enqueues and returns: the
 * pass's first failure is kept (models/resident.h), and nothing is enqueued after it. */

/* A net placed on a device (models/resident.h): its weights there and activation buffers kept
 * between passes. */
struct sb_htdemucs_on {
	sb_resident p;
	const sb_htdemucs *net;
	long passes;
	sb_bbuf *pos;   /* the transformer's sine embeddings, made at the first pass */
	size_t pos_n;
};

/* Between layers: a stop flag ends the pass as cancelled (what was enqueued is drained at the
 * end, so the next pass finds its buffers idle). */
static inline int stopped(sb_htdemucs_on *r)
{
	return sb_resident_stopped(&r->p);
}

static inline void fail(sb_htdemucs_on *r, sb_status st)
{
	sb_resident_fail(&r->p, st);
}

static inline sb_status pass_status(sb_htdemucs_on *r)
{
	return sb_resident_status(&r->p);
}

/* the device copy of a host weight array of the net, an activation buffer, and giving one
 * back */
static inline sb_dv weight(sb_htdemucs_on *r, const float *host)
{
	return sb_resident_w(&r->p, host);
}

static inline sb_dv buffer(sb_htdemucs_on *r, size_t floats)
{
	return sb_resident_a(&r->p, floats);
}

static inline void give_back(sb_htdemucs_on *r, sb_dv v)
{
	sb_resident_r(&r->p, v);
}

/* a frequency-branch tensor on the device: B segments of rows -2 .. F+1, pad rows zero */
typedef struct {
	int B, F, C, T;
	sb_dv base;
} dften;

static inline size_t ften_item(const dften *x)
{
	return (size_t)(x->F + 2 * HD_FPAD) * (size_t)x->C * (size_t)x->T;
}

static inline sb_dv drow(const dften *x, int b, int f)
{
	return sb_dv_at(x->base, (size_t)b * ften_item(x) +
	                             (size_t)(f + HD_FPAD) * (size_t)x->C * (size_t)x->T);
}

/* a frequency tensor of B segments, its pad rows zeroed, and giving it back */
void hd_dften_new(sb_htdemucs_on *r, dften *x, int B, int F, int C, int T);
void hd_dften_free(sb_htdemucs_on *r, dften *x);

/* the backend's gemm, skipped when empty or after a failure */
void hd_gemm(sb_htdemucs_on *r, int M, int N, int K, float alpha, sb_dv a, int lda, long sa,
             sb_dv b, int ldb, long sb, int tb, float beta, sb_dv c, int ldc, long sc,
             int batch, int batch2, long sa2, long sb2, long sc2);
/* hd_gemm with alpha 1, then act(C + bias) per row of each item (cols = 0: a convolution's
 * output channels) or per column (cols = 1); bias is a weight (backend.h: gemm_bias) */
void hd_gemm_bias(sb_htdemucs_on *r, int M, int N, int K, sb_dv a, int lda, long sa, sb_dv b,
                  int ldb, long sb, int tb, float beta, sb_dv c, int ldc, long sc, int batch,
                  int batch2, long sa2, long sb2, long sc2, const float *bias, int cols, int act);
/* y [n][out] = x [n][in] W^T + b (nn.Linear), optional GELU */
void hd_linear(sb_htdemucs_on *r, sb_dv x, size_t n, int in, const float *w,
               const float *b, int out, sb_dv y, int act);

/* an operation of the backend, enqueued only while the pass has not failed */
#define OP(r) if (pass_status(r) == SB_OK) (r)->p.o

/* the layers (htdemucs_layers.c). Frequency encoder: [B][F][cin][T] -> [B][F/4][cout][T];
 * frequency decoder: x [B][F][cin][T] (+= skip, in place) -> [B][4F][cout][T]; time encoder:
 * in [B][cin][lin] -> out [B][cout][(lin + 3) / 4]; time decoder: x [B][cin][lin] (+= skip,
 * in place) -> out [B][cout][length]. */
void hd_enc_freq(sb_htdemucs_on *r, const hd_enc *l, const dften *in, dften *out);
void hd_dec_freq(sb_htdemucs_on *r, const hd_dec *l, dften *x, const dften *skip, dften *out);
void hd_enc_time(sb_htdemucs_on *r, const hd_enc *l, sb_dv in, long lin, int B, sb_dv out);
void hd_dec_time(sb_htdemucs_on *r, const hd_dec *l, sb_dv x, sb_dv skip, long lin,
                 long length, int B, sb_dv out);

/* The cross-domain transformer (htdemucs_transformer.c) over B segments, in place: tokens
 * x [B][Fr T1][D] of the frequency branch and xt [B][T2][D] of the time branch. */
void hd_transformer(sb_htdemucs_on *r, sb_dv x, int Fr, int T1, sb_dv xt, int T2, int B);
/* the transformer's position embeddings on the device for these sizes (the frequency branch's
 * Fr x T1 tokens, the time branch's T2), uploaded once: before a pass's first operation */
void hd_pos_place(sb_htdemucs_on *r, int Fr, int T1, int T2);


#endif
