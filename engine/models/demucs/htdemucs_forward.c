/* HTDemucs.forward (demucs/htdemucs.py) in eval mode, written once against the backend
 * interface (backend/backend.h): the same code runs on the CPU backend and on an OpenCL GPU.
 *
 * Per segment: STFT, complex as channels, normalisation of both branches by their own mean and
 * (unbiased) std, four encoder layers per branch (the frequency embedding added after the
 * first frequency layer), the channel up-sampling, the cross-domain transformer, the channel
 * down-sampling, four decoder layers per branch with the encoders' outputs as skips, then the
 * frequency branch's iSTFT plus the time branch, each de-normalised. All of it on the device:
 * a pass uploads its segments, enqueues, and reads the stems back once (the sine position
 * embeddings are uploaded at the first pass and kept).
 *
 * Layouts (htdemucs_internal.h): a frequency tensor is [B][F + 4][C][T], each segment's rows
 * with two zero rows before and after, so a convolution over frequencies with kernel 8 and
 * stride 4 reads rows 4f-2 .. 4f+5 as one contiguous (8C x T) matrix and every layer is plain
 * matrix products with no im2col; the time branch is [B][C][L]; the transformer works on
 * tokens [B][n][D] (token t Fr + f).
 *
 * Batches: B segments go through one pass (sb_htdemucs_forward's 'batch'): products of the
 * transformer's linear layers see B n rows, element-wise operations run once over all B
 * segments. Rows of frequency layers run in tiles of the backend's row_tile() (0: all at once,
 * a GPU; a few, the CPU, whose cores then keep a row's activations in cache from one operation
 * to the next), each tile through the whole layer.
 *
 * Errors: the backend keeps the first failure of a pass; the host side checks it before each
 * read back and at the end. Host allocations failing give SB_ERR_NOMEM.
 *
 * Threads: one pass at a time per placement (a net on a device).
 */
#include "models/demucs/htdemucs_internal.h"
#include "models/place.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A net placed on a device (models/place.h): its weights there and activation buffers kept
 * between passes. */
struct sb_htdemucs_on {
	sb_place p;
	const sb_htdemucs *net;
	long passes;
	sb_bbuf *pos;   /* the transformer's sine embeddings, made at the first pass */
	size_t pos_n;
};

void sb_htdemucs_on_stop(sb_htdemucs_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

/* Between layers: a stop flag ends the pass as cancelled (what was enqueued is drained at the
 * end, so the next pass finds its buffers idle). */
static int stopped(sb_htdemucs_on *r)
{
	return sb_place_stopped(&r->p);
}

static void fail(sb_htdemucs_on *r, sb_status st)
{
	sb_place_fail(&r->p, st);
}

static sb_status pass_status(sb_htdemucs_on *r)
{
	return sb_place_status(&r->p);
}

/* the device copy of a host weight array of the net, an activation buffer, and giving one
 * back */
static sb_dv W(sb_htdemucs_on *r, const float *host)
{
	return sb_place_w(&r->p, host);
}

static sb_dv A(sb_htdemucs_on *r, size_t floats)
{
	return sb_place_a(&r->p, floats);
}

static void R(sb_htdemucs_on *r, sb_dv v)
{
	sb_place_r(&r->p, v);
}

void sb_htdemucs_unplace(sb_htdemucs_on *r)
{
	if (!r)
		return;
	if (r->pos)
		r->p.x.be->release(r->p.x.d, r->pos);
	sb_place_fini(&r->p);
	free(r);
}

sb_status sb_htdemucs_place(const sb_htdemucs *net, const sb_exec *dev, const sb_logger *log,
                            sb_htdemucs_on **out)
{
	*out = NULL;
	sb_htdemucs_on *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR_NOMEM;
	r->net = net;
	sb_status st = sb_place_init(&r->p, &net->w, dev, log, "htdemucs");
	if (st != SB_OK) {
		free(r);
		return st;
	}
	*out = r;
	return SB_OK;
}

/* a frequency-branch tensor on the device: B segments of rows -2 .. F+1, pad rows zero */
typedef struct {
	int B, F, C, T;
	sb_dv base;
} dften;

static size_t ften_item(const dften *x)
{
	return (size_t)(x->F + 2 * HD_FPAD) * (size_t)x->C * (size_t)x->T;
}

static sb_dv drow(const dften *x, int b, int f)
{
	return sb_dv_at(x->base, (size_t)b * ften_item(x) +
	                             (size_t)(f + HD_FPAD) * (size_t)x->C * (size_t)x->T);
}

static void dften_new(sb_htdemucs_on *r, dften *x, int B, int F, int C, int T)
{
	x->B = B;
	x->F = F;
	x->C = C;
	x->T = T;
	x->base = A(r, (size_t)B * ften_item(x));
	if (pass_status(r) != SB_OK)
		return;
	const size_t pad = (size_t)HD_FPAD * C * T;
	for (int b = 0; b < B; b++) {
		r->p.o->zero(r->p.x.d, drow(x, b, -HD_FPAD), pad);
		r->p.o->zero(r->p.x.d, drow(x, b, F), pad);
	}
}

static void dften_free(sb_htdemucs_on *r, dften *x)
{
	R(r, x->base);
	x->base.buf = NULL;
}

/* ---- shorthands for the operations ---- */

static void gemm(sb_htdemucs_on *r, int M, int N, int K, float alpha, sb_dv a, int lda, long sa,
                 sb_dv b, int ldb, long sb, int tb, float beta, sb_dv c, int ldc, long sc,
                 int batch, int batch2, long sa2, long sb2, long sc2)
{
	if (M > 0 && N > 0 && batch > 0 && batch2 > 0 && pass_status(r) == SB_OK)
		r->p.o->gemm(r->p.x.d, M, N, K, alpha, a, lda, sa, b, ldb, sb, tb, beta, c, ldc, sc, batch,
		           batch2, sa2, sb2, sc2);
}

/* y [n][out] = x [n][in] W^T + b (nn.Linear), optional GELU */
static void linear(sb_htdemucs_on *r, sb_dv x, size_t n, int in, const float *w,
                   const float *b, int out, sb_dv y, int act)
{
	gemm(r, (int)n, out, in, 1.f, x, in, 0, W(r, w), in, 0, 1, 0.f, y, out, 0, 1, 1, 0, 0, 0);
	if (pass_status(r) == SB_OK)
		r->p.o->bias_cols(r->p.x.d, y, n * (size_t)out, out, W(r, b), act);
}

#define OP(r) if (pass_status(r) == SB_OK) (r)->p.o

/* ---- DConv: x (batch items of C x T at stride C T) += DConv(x) ---- */

static void dconv(sb_htdemucs_on *r, const hd_dconv *d, sb_dv x, int T, int batch)
{
	const int C = d->C, H = d->H;
	const long xs = (long)C * T, hs = (long)H * T, zs = 2L * C * T;
	sb_dv h = A(r, (size_t)batch * hs);
	sb_dv z = A(r, (size_t)batch * zs);
	for (int li = 0; li < d->depth; li++) {
		const hd_dconv_layer *l = &d->l[li];
		OP(r)->fill_bias(r->p.x.d, h, (size_t)batch * hs, H, T, W(r, l->b1));
		for (int k = 0; k < 3; k++) {
			const int s = (k - 1) * l->dil;
			const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
			gemm(r, H, t1 - t0, C, 1.f, W(r, l->w1 + (size_t)k * H * C), C, 0,
			     sb_dv_at(x, (size_t)(t0 + s)), T, xs, 0, 1.f, sb_dv_at(h, (size_t)t0), T, hs,
			     batch, 1, 0, 0, 0);
		}
		OP(r)->groupnorm(r->p.x.d, h, hs, H, T, batch, W(r, l->n1w), W(r, l->n1b), SB_ACT_GELU);
		gemm(r, 2 * C, T, H, 1.f, W(r, l->w2), H, 0, h, T, hs, 0, 0.f, z, T, zs, batch, 1, 0, 0,
		     0);
		OP(r)->bias_act(r->p.x.d, z, (size_t)batch * zs, 2 * C, T, W(r, l->b2), SB_ACT_NONE);
		OP(r)->groupnorm(r->p.x.d, z, zs, 2 * C, T, batch, W(r, l->n2w), W(r, l->n2b),
		                 SB_ACT_NONE);
		OP(r)->glu_add(r->p.x.d, x, xs, z, zs, C * T, T, W(r, l->scale), batch);
	}
	R(r, h);
	R(r, z);
}

/* rows per pass of a frequency layer with F output rows: the backend's tile, or all */
static int tile_rows(const sb_htdemucs_on *r, int F)
{
	const int t = r->p.x.be->row_tile(r->p.x.d);
	return t > 0 && t < F ? t : F;
}

/* ---- frequency encoder: [B][F][cin][T] -> [B][F/4][cout][T] ---- */

static void enc_freq(sb_htdemucs_on *r, const hd_enc *l, const dften *in, dften *out)
{
	const int T = in->T, cin = l->cin, cout = l->cout, Fo = in->F / 4, B = in->B;
	dften_new(r, out, B, Fo, cout, T);
	const int tile = tile_rows(r, Fo);
	/* whole layers for every segment at once, or one segment at a time in row tiles */
	const int nb = tile == Fo ? B : 1;
	const long ys = (long)cout * T;
	sb_dv y = A(r, (size_t)nb * tile * ys);
	sb_dv z = A(r, (size_t)nb * tile * 2 * ys);
	for (int b0 = 0; b0 < B; b0 += nb)
		for (int f0 = 0; f0 < Fo; f0 += tile) {
			const int nt = Fo - f0 < tile ? Fo - f0 : tile;
			/* output row fo reads input rows 4 fo - 2 .. 4 fo + 5: one (8 cin x T) matrix */
			gemm(r, cout, T, 8 * cin, 1.f, W(r, l->w), 8 * cin, 0, drow(in, b0, 4 * f0 - 2), T,
			     4L * cin * T, 0, 0.f, y, T, ys, nt, nb, 0, (long)ften_item(in), (long)nt * ys);
			OP(r)->bias_act(r->p.x.d, y, (size_t)nb * nt * ys, cout, T, W(r, l->b), SB_ACT_GELU);
			if (l->has_dconv)
				dconv(r, &l->dc, y, T, nb * nt);
			gemm(r, 2 * cout, T, cout, 1.f, W(r, l->rw), cout, 0, y, T, ys, 0, 0.f, z, T, 2 * ys,
			     nb * nt, 1, 0, 0, 0);
			OP(r)->bias_act(r->p.x.d, z, (size_t)nb * nt * 2 * ys, 2 * cout, T, W(r, l->rb),
			                SB_ACT_NONE);
			for (int b = 0; b < nb; b++)
				OP(r)->glu(r->p.x.d, sb_dv_at(z, (size_t)b * nt * 2 * ys), 2 * ys,
				           drow(out, b0 + b, f0), ys, (int)ys, nt);
		}
	R(r, y);
	R(r, z);
}

/* ---- frequency decoder: x [B][F][cin][T] (+= skip, in place) -> [B][4F][cout][T] ---- */

static void dec_freq(sb_htdemucs_on *r, const hd_dec *l, dften *x, const dften *skip,
                     dften *out)
{
	const int F = x->F, T = x->T, cin = l->cin, cout = l->cout, B = x->B;
	const long xs = (long)cin * T, zs = 2L * cin * T, os = (long)cout * T;
	/* pad rows of both are zero, so one addition covers every segment */
	OP(r)->add(r->p.x.d, x->base, skip->base, (size_t)B * ften_item(x));
	dften y;
	dften_new(r, &y, B, F, cin, T);
	dften_new(r, out, B, 4 * F, cout, T);
	const int tile = tile_rows(r, F);
	const int nb = tile == F ? B : 1;
	sb_dv z = A(r, (size_t)nb * tile * zs);
	/* rows f0 .. f0 + nt of y, then the transposed conv's output rows that depend only on y
	 * rows up to f0 + nt - 1 (with a one-row lag: output rows of phase r read y rows q-1, q) */
	for (int b0 = 0; b0 < B; b0 += nb)
		for (int f0 = 0; f0 < F; f0 += tile) {
			const int nt = F - f0 < tile ? F - f0 : tile;
			OP(r)->fill_bias(r->p.x.d, z, (size_t)nb * nt * zs, 2 * cin, T, W(r, l->rb));
			/* 3x3 rewrite: rows f-1..f+1 are one (3 cin x T) matrix, one product per time tap */
			for (int dt = 0; dt < 3; dt++) {
				const int s = dt - 1;
				const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
				gemm(r, 2 * cin, t1 - t0, 3 * cin, 1.f,
				     W(r, l->rw + (size_t)dt * 2 * cin * 3 * cin), 3 * cin, 0,
				     sb_dv_at(drow(x, b0, f0 - 1), (size_t)(t0 + s)), T, xs, 0, 1.f,
				     sb_dv_at(z, (size_t)t0), T, zs, nt, nb, 0, (long)ften_item(x),
				     (long)nt * zs);
			}
			for (int b = 0; b < nb; b++)
				OP(r)->glu(r->p.x.d, sb_dv_at(z, (size_t)b * nt * zs), zs, drow(&y, b0 + b, f0),
				           xs, (int)xs, nt);
			if (l->has_dconv)
				for (int b = 0; b < nb; b++)
					dconv(r, &l->dc, drow(&y, b0 + b, f0), T, nt);
		}
	R(r, z);
	/* transposed conv: output row g is phase (g+2) % 4 of input rows q-1, q (q = (g+2) / 4);
	 * rows of one phase are 4 apart in the output and 1 apart in the input */
	for (int ph = 0; ph < 4; ph++) {
		const int g0 = (ph + 2) % 4, q0 = (g0 + 2) / 4;
		const int count = (4 * F - g0 + 3) / 4;
		gemm(r, cout, T, 2 * cin, 1.f, W(r, l->tw + (size_t)ph * cout * 2 * cin), 2 * cin, 0,
		     drow(&y, 0, q0 - 1), T, xs, 0, 0.f, drow(out, 0, g0), T, 4 * os, count, B, 0,
		     (long)ften_item(&y), (long)ften_item(out));
	}
	for (int b = 0; b < B; b++)
		OP(r)->bias_act(r->p.x.d, drow(out, b, 0), (size_t)4 * F * os, cout, T, W(r, l->tb),
		                l->last ? SB_ACT_NONE : SB_ACT_GELU);
	dften_free(r, &y);
}

/* ---- time encoder: in [B][cin][lin] -> out [B][cout][(lin + 3) / 4] ---- */

static void enc_time(sb_htdemucs_on *r, const hd_enc *l, sb_dv in, long lin, int B, sb_dv out)
{
	const long lout = (lin + 3) / 4;
	const int cin = l->cin, cout = l->cout, T = (int)lout;
	const long cs = 8L * cin * lout, ys = (long)cout * lout;
	sb_dv col = A(r, (size_t)B * cs);
	sb_dv y = A(r, (size_t)B * ys);
	for (int b = 0; b < B; b++)
		OP(r)->im2col_k8s4(r->p.x.d, sb_dv_at(in, (size_t)b * cin * lin), lin, cin,
		                   sb_dv_at(col, (size_t)b * cs), lout);
	gemm(r, cout, T, 8 * cin, 1.f, W(r, l->w), 8 * cin, 0, col, T, cs, 0, 0.f, y, T, ys, B, 1, 0,
	     0, 0);
	R(r, col);
	OP(r)->bias_act(r->p.x.d, y, (size_t)B * ys, cout, T, W(r, l->b), SB_ACT_GELU);
	if (l->has_dconv)
		dconv(r, &l->dc, y, T, B);
	sb_dv z = A(r, (size_t)B * 2 * ys);
	gemm(r, 2 * cout, T, cout, 1.f, W(r, l->rw), cout, 0, y, T, ys, 0, 0.f, z, T, 2 * ys, B, 1,
	     0, 0, 0);
	OP(r)->bias_act(r->p.x.d, z, (size_t)B * 2 * ys, 2 * cout, T, W(r, l->rb), SB_ACT_NONE);
	OP(r)->glu(r->p.x.d, z, 2 * ys, out, ys, (int)ys, B);
	R(r, y);
	R(r, z);
}

/* ---- time decoder: x [B][cin][lin] (+= skip, in place) -> out [B][cout][length] ---- */

static void dec_time(sb_htdemucs_on *r, const hd_dec *l, sb_dv x, sb_dv skip, long lin,
                     long length, int B, sb_dv out)
{
	const int cin = l->cin, cout = l->cout, T = (int)lin;
	const long xs = (long)cin * lin, zs = 2L * cin * lin, ps = 8L * cout * lin;
	OP(r)->add(r->p.x.d, x, skip, (size_t)B * xs);
	sb_dv z = A(r, (size_t)B * zs);
	OP(r)->fill_bias(r->p.x.d, z, (size_t)B * zs, 2 * cin, T, W(r, l->rb));
	for (int k = 0; k < 3; k++) {
		const int s = k - 1;
		const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
		gemm(r, 2 * cin, t1 - t0, cin, 1.f, W(r, l->rw + (size_t)k * 2 * cin * cin), cin, 0,
		     sb_dv_at(x, (size_t)(t0 + s)), T, xs, 0, 1.f, sb_dv_at(z, (size_t)t0), T, zs, B, 1,
		     0, 0, 0);
	}
	sb_dv y = A(r, (size_t)B * xs);
	OP(r)->glu(r->p.x.d, z, zs, y, xs, (int)xs, B);
	R(r, z);
	if (l->has_dconv)
		dconv(r, &l->dc, y, T, B);
	sb_dv p = A(r, (size_t)B * ps);
	gemm(r, 8 * cout, T, cin, 1.f, W(r, l->tw), cin, 0, y, T, xs, 0, 0.f, p, T, ps, B, 1, 0, 0,
	     0);
	R(r, y);
	for (int b = 0; b < B; b++)
		OP(r)->convtr_k8s4(r->p.x.d, sb_dv_at(p, (size_t)b * ps), lin, cout, length, W(r, l->tb),
		                   l->last ? SB_ACT_NONE : SB_ACT_GELU,
		                   sb_dv_at(out, (size_t)b * cout * length));
	R(r, p);
}

/* ---- the cross-domain transformer (transformer.py CrossTransformerEncoder) ---- */

/* attention of q [nq] to k, v [nk] (row strides ldq, ldkv), all heads, into o [nq][D], for
 * B segments at strides sq, skv, so */
static void attention(sb_htdemucs_on *r, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, long nq,
                      long nk, int heads, int D, sb_dv o, int B, long sq, long skv, long so)
{
	const int hd = D / heads;
	OP(r)->attention(r->p.x.d, q, ldq, k, v, ldkv, (int)nq, (int)nk, heads, hd,
	                 1.f / sqrtf((float)hd), o, D, B, sq, skv, so);
}

/* one layer over B segments of n tokens at x [B][n][D]; kv: the other branch's tokens */
static void layer(sb_htdemucs_on *r, const hd_tlayer *L, sb_dv x, long n, int B, const sb_dv *kv,
                  long nkv)
{
	const sb_htdemucs *net = r->net;
	const int D = net->dim, Hd = net->hidden, heads = net->cfg.t_heads;
	const size_t all = (size_t)B * n;
	sb_dv h = A(r, all * D);
	sb_dv a = A(r, all * D);
	OP(r)->layernorm(r->p.x.d, x, h, all, D, W(r, L->n1w), W(r, L->n1b));
	if (!kv) {
		sb_dv qkv = A(r, all * 3 * D);
		linear(r, h, all, D, L->in_w, L->in_b, 3 * D, qkv, SB_ACT_NONE);
		attention(r, qkv, 3 * D, sb_dv_at(qkv, (size_t)D), sb_dv_at(qkv, (size_t)2 * D), 3 * D, n,
		          n, heads, D, h, B, n * 3 * D, n * 3 * D, n * D);
		R(r, qkv);
	} else {
		const size_t allkv = (size_t)B * nkv;
		sb_dv hk = A(r, allkv * D);
		sb_dv qb = A(r, all * D);
		sb_dv kvp = A(r, allkv * 2 * D);
		OP(r)->layernorm(r->p.x.d, *kv, hk, allkv, D, W(r, L->n2w), W(r, L->n2b));
		linear(r, h, all, D, L->in_w, L->in_b, D, qb, SB_ACT_NONE);
		linear(r, hk, allkv, D, L->in_w + (size_t)D * D, L->in_b + D, 2 * D, kvp, SB_ACT_NONE);
		attention(r, qb, D, kvp, sb_dv_at(kvp, (size_t)D), 2 * D, n, nkv, heads, D, h, B, n * D,
		          nkv * 2 * D, n * D);
		R(r, hk);
		R(r, qb);
		R(r, kvp);
	}
	linear(r, h, all, D, L->out_w, L->out_b, D, a, SB_ACT_NONE);
	OP(r)->scale_add(r->p.x.d, x, a, W(r, L->g1), all * D, D);
	OP(r)->layernorm(r->p.x.d, x, h, all, D, W(r, kv ? L->n3w : L->n2w),
	                 W(r, kv ? L->n3b : L->n2b));
	sb_dv f = A(r, all * Hd);
	linear(r, h, all, D, L->l1w, L->l1b, Hd, f, SB_ACT_GELU);
	linear(r, f, all, Hd, L->l2w, L->l2b, D, a, SB_ACT_NONE);
	OP(r)->scale_add(r->p.x.d, x, a, W(r, L->g2), all * D, D);
	for (int b = 0; b < B; b++)
		OP(r)->groupnorm_tokens(r->p.x.d, sb_dv_at(x, (size_t)b * n * D), (size_t)n, D,
		                        W(r, L->now), W(r, L->nob));
	R(r, f);
	R(r, h);
	R(r, a);
}

/* transformer.py create_2d_sin_embedding, in float as the reference computes it */
void hd_pos_2d(float *x, int D, int Fr, int T1)
{
	const int half = D / 2;
	const float k = (float)(-(log(10000.0) / half));
	for (int t = 0; t < T1; t++)
		for (int f = 0; f < Fr; f++) {
			float *row = x + ((size_t)t * Fr + f) * D;
			for (int i = 0; i < half / 2; i++) {
				const float div = expf((float)(2 * i) * k);
				row[2 * i] += sinf((float)t * div);
				row[2 * i + 1] += cosf((float)t * div);
				row[half + 2 * i] += sinf((float)f * div);
				row[half + 2 * i + 1] += cosf((float)f * div);
			}
		}
}

/* transformer.py create_sin_embedding (shift 0): [cos(phase), sin(phase)] */
void hd_pos_1d(float *x, int D, int T2)
{
	const int half = D / 2;
	for (int i = 0; i < half; i++) {
		const float p = powf(10000.f, (float)i / (float)(half - 1));
		for (int t = 0; t < T2; t++) {
			const float ph = (float)t / p;
			x[(size_t)t * D + i] += cosf(ph);
			x[(size_t)t * D + half + i] += sinf(ph);
		}
	}
}

/* the sine embeddings, computed on the host and uploaded at the first pass, added to every
 * segment */
static void add_pos(sb_htdemucs_on *r, sb_dv x, int D, int Fr, int T1, sb_dv xt, int T2, int B)
{
	const size_t n1 = (size_t)Fr * T1 * D, n2 = (size_t)T2 * D;
	if (pass_status(r) != SB_OK)
		return;
	if (!r->pos || r->pos_n != n1 + n2) {
		if (r->pos)
			r->p.x.be->release(r->p.x.d, r->pos);
		r->pos = NULL;
		float *pe = calloc(n1 + n2, sizeof(float));
		sb_status st = pe ? r->p.x.be->alloc(r->p.x.d, n1 + n2, &r->pos) : SB_ERR_NOMEM;
		if (st != SB_OK) {
			free(pe);
			r->pos = NULL;
			fail(r, st);
			return;
		}
		r->pos_n = n1 + n2;
		hd_pos_2d(pe, D, Fr, T1);
		hd_pos_1d(pe + n1, D, T2);
		const sb_dv d = {r->pos, 0};
		r->p.x.be->upload(r->p.x.d, d, pe, n1 + n2);
		free(pe);
		if (pass_status(r) != SB_OK) { /* not kept half-written */
			r->p.x.be->release(r->p.x.d, r->pos);
			r->pos = NULL;
			return;
		}
	}
	const sb_dv d = {r->pos, 0};
	for (int b = 0; b < B; b++) {
		OP(r)->add(r->p.x.d, sb_dv_at(x, (size_t)b * n1), d, n1);
		OP(r)->add(r->p.x.d, sb_dv_at(xt, (size_t)b * n2), sb_dv_at(d, n1), n2);
	}
}

static void transformer(sb_htdemucs_on *r, sb_dv x, int Fr, int T1, sb_dv xt, int T2, int B)
{
	const sb_htdemucs *net = r->net;
	const int D = net->dim;
	const long n1 = (long)Fr * T1, n2 = T2;
	OP(r)->layernorm(r->p.x.d, x, x, (size_t)B * n1, D, W(r, net->nin_w), W(r, net->nin_b));
	OP(r)->layernorm(r->p.x.d, xt, xt, (size_t)B * n2, D, W(r, net->nint_w), W(r, net->nint_b));
	add_pos(r, x, D, Fr, T1, xt, T2, B);
	sb_dv old = A(r, (size_t)B * n1 * D);
	for (int i = 0; i < net->cfg.t_layers && !stopped(r) && pass_status(r) == SB_OK; i++) {
		if (i % 2 == 0) {
			layer(r, &net->layers[i], x, n1, B, NULL, 0);
			layer(r, &net->layers_t[i], xt, n2, B, NULL, 0);
		} else {
			OP(r)->copy(r->p.x.d, old, x, (size_t)B * n1 * D);
			layer(r, &net->layers[i], x, n1, B, &xt, n2);
			layer(r, &net->layers_t[i], xt, n2, B, &old, n1);
		}
	}
	R(r, old);
}

/* ---- taps: intermediate activations in the reference's layouts (one segment only) ---- */

typedef struct {
	sb_htdemucs_tap fn;
	void *user;
	sb_htdemucs_on *r;
} dtap;

static float *fetch(dtap *tp, sb_dv x, size_t n)
{
	if (!tp->fn || pass_status(tp->r) != SB_OK)
		return NULL;
	float *h = malloc(sizeof(float) * n);
	if (!h)
		return NULL;
	tp->r->p.x.be->download(tp->r->p.x.d, h, x, n);
	if (pass_status(tp->r) != SB_OK) {
		free(h);
		return NULL;
	}
	return h;
}

/* [rows][cols], as it is (time tensors) */
static void tap_plain(dtap *tp, const char *name, sb_dv x, long a, long b)
{
	float *h = fetch(tp, x, (size_t)a * b);
	if (!h)
		return;
	const int64_t shape[2] = {a, b};
	tp->fn(tp->user, name, h, 2, shape);
	free(h);
}

/* a freq tensor, as the reference's [C][F][T] */
static void tap_ften(dtap *tp, const char *name, const dften *x)
{
	const size_t row = (size_t)x->C * x->T, n = row * x->F;
	float *h = fetch(tp, drow(x, 0, 0), n);
	float *o = h ? malloc(sizeof(float) * n) : NULL;
	if (o) {
		for (int f = 0; f < x->F; f++)
			for (int ch = 0; ch < x->C; ch++)
				memcpy(o + ((size_t)ch * x->F + f) * x->T, h + f * row + (size_t)ch * x->T,
				       sizeof(float) * (size_t)x->T);
		const int64_t shape[3] = {x->C, x->F, x->T};
		tp->fn(tp->user, name, o, 3, shape);
	}
	free(h);
	free(o);
}

/* tokens [T * Fr][D] as [D][Fr][T]; flat: [D][Fr * T] ("b c (f t)": the same memory) */
static void tap_tokens(dtap *tp, const char *name, sb_dv x, int Fr, int T, int D, int flat)
{
	const size_t n = (size_t)Fr * T * D;
	float *h = fetch(tp, x, n);
	float *o = h ? malloc(sizeof(float) * n) : NULL;
	if (o) {
		for (int t = 0; t < T; t++)
			for (int f = 0; f < Fr; f++)
				for (int d = 0; d < D; d++)
					o[((size_t)d * Fr + f) * T + t] = h[((size_t)t * Fr + f) * D + d];
		const int64_t s3[3] = {D, Fr, T}, s2[2] = {D, (int64_t)Fr * T};
		tp->fn(tp->user, name, o, flat ? 2 : 3, flat ? s2 : s3);
	}
	free(h);
	free(o);
}

/* the reference's "b c (f t)" order of up-sampled tokens [T][Fr][D] */
static void tap_bcft(dtap *tp, const char *name, sb_dv x, int Fr, int T, int D)
{
	const size_t n = (size_t)Fr * T * D;
	float *h = fetch(tp, x, n);
	float *o = h ? malloc(sizeof(float) * n) : NULL;
	if (o) {
		const size_t n1 = (size_t)Fr * T;
		for (int t = 0; t < T; t++)
			for (int f = 0; f < Fr; f++)
				for (int d = 0; d < D; d++)
					o[(size_t)d * n1 + (size_t)f * T + t] = h[((size_t)t * Fr + f) * D + d];
		const int64_t sh[2] = {D, (int64_t)n1};
		tp->fn(tp->user, name, o, 2, sh);
	}
	free(h);
	free(o);
}

/* HTDemucs._spec and ._ispec (demucs/htdemucs.py, demucs/spec.py) as the stft and istft
 * operations compute them:
 *
 * _spec: the segment is reflect-padded by 3/2 hop on the left and up to a whole number of
 * hops plus 3/2 hop on the right, then torch.stft(n_fft 4096, hop 1024, periodic Hann,
 * normalized, center=True with reflect padding) is taken and frames 2 .. 2+T-1 kept, with the
 * Nyquist bin dropped. The kept frames never reach stft's own centre padding, so frame t
 * starts at sample 1024 t - 1536 of the segment with one level of reflection.
 *
 * _ispec: the inverse with the Nyquist bin and two frames on each side zeroed, then
 * torch.istft: irfft of each frame times sqrt(n_fft) (undoing "normalized"), windowed,
 * overlap-added and divided by the overlap-added squared window (over all T+4 frames: e0 =
 * e1 = 2), and the centre and 3/2-hop padding cropped away.
 *
 * The spectrum of C / 2 complex channels lies as the frequency branch's rows [F][C][T],
 * channel 2 c real and 2 c + 1 imaginary (complex as channels). */
static sb_stft spec_geometry(int T, int C)
{
	const sb_stft g = {HD_NFFT, HD_HOP, T, HD_NFFT / 2, HD_HOP / 2 * 3,
	                   2L * T, (long)C * T, 1, T};
	return g;
}

/* the reference's spec [ac][F][T][2] from the rows of x's segment */
static void tap_spec(dtap *tp, sb_dv z, int ac, int F, int T)
{
	if (!tp->fn)
		return;
	const size_t n = (size_t)F * 2 * ac * T;
	float *h = fetch(tp, z, n);
	float *o = h ? malloc(sizeof(float) * n) : NULL;
	if (o) {
		for (int c = 0; c < ac; c++)
			for (int f = 0; f < F; f++)
				for (int t = 0; t < T; t++)
					for (int ri = 0; ri < 2; ri++)
						o[(((size_t)c * F + f) * T + t) * 2 + ri] =
							h[((size_t)f * 2 * ac + 2 * c + ri) * T + t];
		const int64_t sh[4] = {ac, F, T, 2};
		tp->fn(tp->user, "spec", o, 4, sh);
	}
	free(h);
	free(o);
}

sb_status sb_htdemucs_forward(sb_htdemucs_on *r, int B, const float *in, float *out, sb_htdemucs_tap tap, void *tap_user)
{
	const sb_htdemucs *net = r->net;
	const sb_htdemucs_config *cfg = &net->cfg;
	const int64_t L = cfg->segment_length;
	const int ac = cfg->audio_channels, S = cfg->n_sources;
	const int F = HD_NFFT / 2, T = (int)((L + HD_HOP - 1) / HD_HOP);
	if (B < 1)
		return SB_ERR_INVALID;
	dtap tp = {B == 1 ? tap : NULL, tap_user, r};
	r->passes++;
	sb_status st = sb_place_begin(&r->p);
	if (st != SB_OK)
		return st;
	int64_t tl[HD_DEPTH + 1];
	tl[0] = L;
	for (int i = 0; i < HD_DEPTH; i++)
		tl[i + 1] = (tl[i] + 3) / 4;

	/* the STFT, complex as channels, both branches' normalisation, each segment on the device:
	 * per segment a mean and std of its spectrum (nst[4b], [4b+1]) and of its waveform
	 * ([4b+2], [4b+3]), kept for the way back */
	if (B > 64)
		return SB_ERR_INVALID;
	const size_t seg_in = (size_t)ac * L;
	const sb_stft sg = spec_geometry(T, 2 * ac);
	const float fscale = 1.f / sqrtf((float)HD_NFFT);
	dften x, e[HD_DEPTH];
	sb_dv te[HD_DEPTH], xt = A(r, (size_t)B * seg_in), mix = A(r, (size_t)B * seg_in);
	sb_dv nst = A(r, (size_t)4 * B);
	dften_new(r, &x, B, F, 2 * ac, T);
	if (pass_status(r) == SB_OK)
		r->p.x.be->upload(r->p.x.d, mix, in, (size_t)B * seg_in);
	for (int b = 0; b < B; b++) {
		const sb_dv m = sb_dv_at(mix, (size_t)b * seg_in), z = drow(&x, b, 0);
		const sb_dv s4 = sb_dv_at(nst, (size_t)4 * b);
		const size_t nz = (size_t)F * 2 * ac * T;
		OP(r)->stft(r->p.x.d, &sg, m, L, ac, L, W(r, net->window), fscale, z);
		tap_spec(&tp, z, ac, F, T);
		OP(r)->moments(r->p.x.d, z, nz, s4);
		OP(r)->standardise(r->p.x.d, z, z, nz, s4, 1e-5f, 0);
		OP(r)->moments(r->p.x.d, m, seg_in, sb_dv_at(s4, 2));
		OP(r)->standardise(r->p.x.d, m, sb_dv_at(xt, (size_t)b * seg_in), seg_in,
		                   sb_dv_at(s4, 2), 1e-5f, 0);
	}
	R(r, mix);

	for (int i = 0; i < HD_DEPTH; i++) {
		char name[32];
		if (stopped(r))
			goto end;
		te[i] = A(r, (size_t)B * net->tenc[i].cout * tl[i + 1]);
		enc_time(r, &net->tenc[i], i ? te[i - 1] : xt, tl[i], B, te[i]);
		snprintf(name, sizeof name, "tencoder.%d", i);
		tap_plain(&tp, name, te[i], net->tenc[i].cout, tl[i + 1]);
		enc_freq(r, &net->enc[i], i ? &e[i - 1] : &x, &e[i]);
		snprintf(name, sizeof name, "encoder.%d", i);
		tap_ften(&tp, name, &e[i]);
		if (i == 0) {
			R(r, xt);
			dften_free(r, &x);
			for (int b = 0; b < B; b++)
				OP(r)->add_row_channel(r->p.x.d, drow(&e[0], b, 0), e[0].F, e[0].C, T,
				                       W(r, net->freq_emb));
		}
	}

	const int Fr = e[HD_DEPTH - 1].F, ct = net->ct, D = net->dim, T2 = (int)tl[HD_DEPTH];
	const long n1 = (long)Fr * T;
	sb_dv tok = A(r, (size_t)B * n1 * ct), tokt = A(r, (size_t)B * T2 * ct);
	for (int b = 0; b < B; b++) {
		OP(r)->rows_tokens(r->p.x.d, drow(&e[HD_DEPTH - 1], b, 0),
		                   sb_dv_at(tok, (size_t)b * n1 * ct), Fr, ct, T, 0);
		OP(r)->transpose(r->p.x.d, sb_dv_at(te[HD_DEPTH - 1], (size_t)b * ct * T2),
		                 sb_dv_at(tokt, (size_t)b * T2 * ct), ct, T2);
	}
	if (cfg->t_layers > 0) {
		sb_dv up = tok, upt = tokt;
		if (cfg->bottom_channels) {
			up = A(r, (size_t)B * n1 * D);
			upt = A(r, (size_t)B * T2 * D);
			linear(r, tok, (size_t)B * n1, ct, net->up_w, net->up_b, D, up, SB_ACT_NONE);
			linear(r, tokt, (size_t)B * T2, ct, net->upt_w, net->upt_b, D, upt, SB_ACT_NONE);
			tap_bcft(&tp, "channel_upsampler", up, Fr, T, D);
			tap_tokens(&tp, "channel_upsampler_t", upt, 1, T2, D, 1);
		}
		tap_tokens(&tp, "crosstransformer.in.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.in.1", upt, 1, T2, D, 1);
		transformer(r, up, Fr, T, upt, T2, B);
		tap_tokens(&tp, "crosstransformer.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.1", upt, 1, T2, D, 1);
		if (cfg->bottom_channels) {
			linear(r, up, (size_t)B * n1, D, net->down_w, net->down_b, ct, tok, SB_ACT_NONE);
			linear(r, upt, (size_t)B * T2, D, net->downt_w, net->downt_b, ct, tokt, SB_ACT_NONE);
			tap_bcft(&tp, "channel_downsampler", tok, Fr, T, ct);
			tap_tokens(&tp, "channel_downsampler_t", tokt, 1, T2, ct, 1);
			R(r, up);
			R(r, upt);
		}
	}
	dften_new(r, &x, B, Fr, ct, T);
	xt = A(r, (size_t)B * ct * T2);
	for (int b = 0; b < B; b++) {
		OP(r)->rows_tokens(r->p.x.d, sb_dv_at(tok, (size_t)b * n1 * ct), drow(&x, b, 0), Fr, ct,
		                   T, 1);
		OP(r)->transpose(r->p.x.d, sb_dv_at(tokt, (size_t)b * T2 * ct),
		                 sb_dv_at(xt, (size_t)b * ct * T2), T2, ct);
	}
	R(r, tok);
	R(r, tokt);

	for (int j = 0; j < HD_DEPTH; j++) {
		const int idx = HD_DEPTH - 1 - j;
		char name[32];
		dften nx;
		if (stopped(r))
			goto end;
		dec_freq(r, &net->dec[j], &x, &e[idx], &nx);
		dften_free(r, &x);
		dften_free(r, &e[idx]);
		x = nx;
		snprintf(name, sizeof name, "decoder.%d.0", j);
		tap_ften(&tp, name, &x);
		sb_dv nt = A(r, (size_t)B * net->tdec[j].cout * tl[idx]);
		dec_time(r, &net->tdec[j], xt, te[idx], tl[idx + 1], tl[idx], B, nt);
		R(r, xt);
		R(r, te[idx]);
		xt = nt;
		snprintf(name, sizeof name, "tdecoder.%d.0", j);
		tap_plain(&tp, name, xt, net->tdec[j].cout, tl[idx]);
	}

	/* de-normalise both branches, add the iSTFT of the frequency one to the time one, and
	 * bring the stems back: the pass's one read */
	{
		const size_t seg_out = (size_t)S * ac * L;
		const sb_stft og = spec_geometry(T, x.C);
		const float iscale = sqrtf((float)HD_NFFT) / (float)HD_NFFT;
		sb_dv work = A(r, (size_t)(x.C / 2) * T * HD_NFFT);
		for (int b = 0; b < B; b++) {
			const sb_dv o = sb_dv_at(xt, (size_t)b * seg_out), z = drow(&x, b, 0);
			const sb_dv s4 = sb_dv_at(nst, (size_t)4 * b);
			OP(r)->standardise(r->p.x.d, o, o, seg_out, sb_dv_at(s4, 2), 0.f, 1);
			OP(r)->standardise(r->p.x.d, z, z, (size_t)x.F * x.C * T, s4, 0.f, 1);
			OP(r)->istft(r->p.x.d, &og, z, x.C / 2, L, W(r, net->window), iscale, 2, 2, o, L,
			             1, work);
		}
		R(r, work);
		if (pass_status(r) == SB_OK)
			r->p.x.be->download(r->p.x.d, out, xt, (size_t)B * seg_out);
	}
	R(r, nst);
	R(r, xt);
	dften_free(r, &x);
end:
	st = pass_status(r);
	if (st == SB_OK || st == SB_ERR_CANCELLED) {
		const sb_status fst = r->p.x.be->finish(r->p.x.d);
		st = st == SB_OK ? fst : st;
	}
	if (st == SB_ERR_NOMEM)
		sb_log(r->p.log, SB_LOG_ERROR, "htdemucs: out of memory for a segment's activations");
	return st;
}

const sb_exec *sb_htdemucs_on_device(const sb_htdemucs_on *r)
{
	return &r->p.x;
}
