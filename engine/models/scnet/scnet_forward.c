/* One forward pass of an SCNet over B chunks (scnet.h), all of it on the device through the
 * backend's operations: the chunks go up once, the stems come back once.
 *
 * Layout: every activation is rows, [B][F][C][T] (chunk, frequency row, channel, frame). A
 * convolution along frequency (kernel k, stride s) is then one product per output row over k
 * consecutive input rows ([k][C] of K, frames as columns), batched over the rows; one along
 * time reads a row padded by the kernel's half at both ends, a product per tap; a 3 x 3
 * convolution is three products (time taps) over three consecutive padded rows. The LSTMs take
 * tokens [sequences][steps][C] (a transpose there and back), the FFT along time is a product
 * with the DFT's matrices. */
#include "models/rows_conv.h"
#include "models/scnet/scnet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sb_scnet_on {
	sb_resident p;
	const sb_scnet *net;
};

#define OK(r) (sb_resident_status(&(r)->p) == SB_OK)
#define OP(r) if (OK(r)) (r)->p.o

sb_status sb_scnet_place(const sb_scnet *net, const sb_exec *dev, const sb_logger *log,
                         sb_scnet_on **out)
{
	*out = NULL;
	sb_scnet_on *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR_NOMEM;
	r->net = net;
	sb_status st = sb_resident_init(&r->p, &net->w, dev, log, "scnet");
	if (st != SB_OK) {
		free(r);
		return st;
	}
	*out = r;
	return SB_OK;
}

void sb_scnet_unplace(sb_scnet_on *r)
{
	if (!r)
		return;
	sb_resident_fini(&r->p);
	free(r);
}

void sb_scnet_on_stop(sb_scnet_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

static sb_dv W(sb_scnet_on *r, const float *host)
{
	return sb_resident_w(&r->p, host);
}

/* a product of a host weight array over rows (models/rows_conv.h) */
static void conv(sb_scnet_on *r, int M, int N, int K, const float *A, int lda, sb_dv B, int ldb,
                 long sb, long sb2, int acc, sb_dv C, int ldc, long sc, long sc2, int batch,
                 int batch2, const float *bias)
{
	sb_rows_product(&r->p, M, N, K, A, lda, B, ldb, sb, sb2, acc, C, ldc, sc, sc2, batch, batch2,
	                bias);
}

/* the ConvolutionModule's layers over rows [off, off + n) of y [B][R][C][T], in place */
static void conv_module(sb_scnet_on *r, const sc_level *lv, int band, sb_dv y, int B, int off,
                        int n)
{
	const sb_scnet *net = r->net;
	const int C = lv->co, h = lv->h, T = net->frames, R = lv->rows_out,
	          K = net->cfg.conv_kernel, Tp = T + K - 1;
	const long item = (long)R * C * T;
	const sb_dv yb = sb_dv_at(y, (size_t)off * C * T);
	const int items = B * n;
	sb_dv z = sb_resident_a(&r->p, (size_t)B * item);
	sb_dv zp = sb_resident_a(&r->p, (size_t)items * C * Tp);
	sb_dv g1 = sb_resident_a(&r->p, (size_t)items * 2 * h * T);
	sb_dv hh = sb_resident_a(&r->p, (size_t)items * h * T);
	sb_dv hd = sb_resident_a(&r->p, (size_t)items * h * T);
	OP(r)->zero(r->p.x.d, zp, (size_t)items * C * Tp);
	for (int l = 0; l < net->cfg.conv_depths[band] && OK(r); l++) {
		const sc_conv_layer *L = &lv->layers[band][l];
		const sb_norm_geom g = {B, n, C, 1, 1, T, item, (long)C * T, T, 0};
		const sb_dv zb = sb_dv_at(z, (size_t)off * C * T);
		OP(r)->norm_groups(r->p.x.d, yb, &g, W(r, L->n0w), W(r, L->n0b), SB_ACT_NONE, zb);
		/* Conv1d(C, 2h, K, padding K / 2) along time: a product per tap over padded rows */
		OP(r)->copy_rows(r->p.x.d, sb_dv_at(zp, (size_t)(K / 2)), Tp, (long)n * C * Tp, zb, T,
		                 item, n * C, T, B);
		for (int u = 0; u < K; u++)
			conv(r, 2 * h, T, C, L->c1w + (size_t)u * 2 * h * C, C, sb_dv_at(zp, (size_t)u), Tp,
			     (long)C * Tp, 0, u > 0, g1, T, 2L * h * T, 0, items, 1, u ? NULL : L->c1b);
		OP(r)->glu(r->p.x.d, g1, 2L * h * T, hh, (long)h * T, h * T, items);
		OP(r)->dwconv(r->p.x.d, hh, items, h, T, K, W(r, L->dw), W(r, L->dwb), hd);
		const sb_norm_geom g4 = {items, 1, h, 1, 1, T, (long)h * T, 0, T, 0};
		OP(r)->norm_groups(r->p.x.d, hd, &g4, W(r, L->n4w), W(r, L->n4b), SB_ACT_SILU, hd);
		/* Conv1d(h, C, 1), added to the layer's input (the residual) */
		conv(r, C, T, h, L->c6w, h, hd, T, (long)h * T, (long)n * h * T, 1, yb, T, (long)C * T,
		     item, n, B, L->c6b);
	}
	sb_resident_r(&r->p, z);
	sb_resident_r(&r->p, zp);
	sb_resident_r(&r->p, g1);
	sb_resident_r(&r->p, hh);
	sb_resident_r(&r->p, hd);
}

/* SD block: x [B][rows_in][ci][T] -> skip [B][rows_out][co][T] (kept for the decoder) and the
 * block's output */
static sb_dv encode(sb_scnet_on *r, const sc_level *lv, sb_dv x, int B, sb_dv *skip)
{
	const sb_scnet *net = r->net;
	const sb_scnet_config *c = &net->cfg;
	const int T = net->frames, ci = lv->ci, co = lv->co, Rin = lv->rows_in, R = lv->rows_out;
	const sb_scnet_bands *bd = &lv->bands;
	sb_dv y = sb_resident_a(&r->p, (size_t)B * R * co * T);
	for (int b = 0, off = 0; b < 3; off += bd->out[b], b++) {
		const int len = bd->end[b] - bd->start[b], k = c->band_kernel[b], s = c->band_stride[b];
		const int plen = bd->pad_lo[b] + len + bd->pad_hi[b];
		const size_t pitem = (size_t)plen * ci * T;
		/* the band zero-padded along frequency, then one product per output row over k rows */
		sb_dv p = sb_resident_a(&r->p, (size_t)B * pitem);
		OP(r)->zero(r->p.x.d, p, (size_t)B * pitem);
		OP(r)->copy_rows(r->p.x.d, sb_dv_at(p, (size_t)bd->pad_lo[b] * ci * T), 0, (long)pitem,
		                 sb_dv_at(x, (size_t)bd->start[b] * ci * T), 0, (long)Rin * ci * T, 1,
		                 (long)len * ci * T, B);
		conv(r, co, T, k * ci, lv->down_w[b], k * ci, p, T, (long)s * ci * T, (long)pitem, 0,
		     sb_dv_at(y, (size_t)off * co * T), T, (long)co * T, (long)R * co * T, bd->out[b], B,
		     lv->down_b[b]);
		sb_resident_r(&r->p, p);
		conv_module(r, lv, b, y, B, off, bd->out[b]);
	}
	const size_t n = (size_t)B * R * co * T;
	OP(r)->bias_cols(r->p.x.d, y, n, T, W(r, net->zeros), SB_ACT_GELU);
	*skip = y;
	sb_dv o = sb_resident_a(&r->p, n);
	sb_rows_conv3x3(&r->p, y, B, R, co, co, T, (const float *const *)lv->glob_w, lv->glob_b, o);
	return o;
}

/* one LSTM path of a dual-path layer over x [B][R][d][T'], in place: p 0 along frequency
 * (sequences of R rows, one per frame), 1 along time */
static void dual_path(sb_scnet_on *r, const sc_dual *dp, int p, sb_dv x, int B, int R, int Tt)
{
	const int d = dp->d, H = dp->H;
	const size_t n_all = (size_t)B * R * d * Tt;
	const int n = p ? B * R : B * Tt, S = p ? Tt : R;
	const sb_norm_geom g = {B, 1, d, 1, R, Tt, (long)R * d * Tt, 0, Tt, (long)d * Tt};
	sb_dv z = sb_resident_a(&r->p, n_all);
	OP(r)->norm_groups(r->p.x.d, x, &g, W(r, dp->nw[p]), W(r, dp->nb[p]), SB_ACT_NONE, z);
	/* to tokens [n][S][d] */
	sb_dv tok = sb_resident_a(&r->p, n_all);
	const int dims[4] = {B, R, d, Tt};
	const long to_freq[4] = {(long)Tt * R * d, d, 1, (long)R * d},
	           to_time[4] = {(long)R * Tt * d, (long)Tt * d, 1, d};
	OP(r)->permute(r->p.x.d, z, dims, p ? to_time : to_freq, tok);
	sb_dv h = sb_resident_a(&r->p, (size_t)n * S * 2 * H);
	sb_dv work = sb_resident_a(&r->p, (size_t)2 * n * (S + 1) * 4 * H);
	OP(r)->lstm(r->p.x.d, tok, n, S, d, H, 2, W(r, dp->wih[p]), W(r, dp->whh[p]), W(r, dp->b[p]),
	            h, work);
	sb_resident_r(&r->p, work);
	const sb_bias e = {W(r, dp->lb[p]), 0, 1, SB_ACT_NONE};
	if (OK(r))
		r->p.o->gemm_bias(r->p.x.d, n * S, d, 2 * H, 1.f, h, 2 * H, 0, W(r, dp->lw[p]), 2 * H, 0,
		                  1, 0.f, tok, d, 0, 1, 1, 0, 0, 0, &e);
	sb_resident_r(&r->p, h);
	/* back to rows, added to the path's input */
	const int tdims[4] = {B, p ? R : Tt, p ? Tt : R, d};
	const long from_freq[4] = {(long)R * d * Tt, 1, (long)d * Tt, Tt},
	           from_time[4] = {(long)R * d * Tt, (long)d * Tt, 1, Tt};
	OP(r)->permute(r->p.x.d, tok, tdims, p ? from_time : from_freq, z);
	OP(r)->add(r->p.x.d, x, z, n_all);
	sb_resident_r(&r->p, tok);
	sb_resident_r(&r->p, z);
}

/* the separation network over x [B][R][C][T]: dual-path layers, every even one followed by
 * an FFT along time (channels doubled: real parts, then imaginary), every odd one by its
 * inverse */
static sb_dv separate(sb_scnet_on *r, sb_dv x, int B, int R)
{
	const sb_scnet *net = r->net;
	const int T = net->frames, T2 = net->frames2, C = net->cfg.dims[net->levels];
	for (int i = 0; i < net->cfg.num_dplayer && !sb_resident_stopped(&r->p); i++) {
		const sc_dual *dp = &net->dp[i];
		const int odd = i % 2, Tt = odd ? T2 : T;
		dual_path(r, dp, 0, x, B, R, Tt);
		dual_path(r, dp, 1, x, B, R, Tt);
		const int items = B * R;
		if (!odd) { /* rfft: [C][T] rows -> [2C][T2] */
			sb_dv y = sb_resident_a(&r->p, (size_t)items * 2 * C * T2);
			for (int q = 0; q < 2 && OK(r); q++)
				r->p.o->gemm(r->p.x.d, C, T2, T, 1.f, x, T, (long)C * T,
				             W(r, q ? net->rfft_im : net->rfft_re), T2, 0, 0, 0.f,
				             sb_dv_at(y, (size_t)q * C * T2), T2, 2L * C * T2, items, 1, 0, 0, 0);
			sb_resident_r(&r->p, x);
			x = y;
		} else { /* irfft: [2C][T2] -> [C][T] */
			sb_dv y = sb_resident_a(&r->p, (size_t)items * C * T);
			for (int q = 0; q < 2 && OK(r); q++)
				r->p.o->gemm(r->p.x.d, C, T, T2, 1.f, sb_dv_at(x, (size_t)q * C * T2), T2,
				             2L * C * T2, W(r, q ? net->irfft_im : net->irfft_re), T, 0, 0,
				             q ? 1.f : 0.f, y, T, (long)C * T, items, 1, 0, 0, 0);
			sb_resident_r(&r->p, x);
			x = y;
		}
	}
	return x;
}

/* fusion layer and SU layer: x [B][rows_out][co][T] (+ skip) -> [B][rows_in][cout][T] */
static sb_dv decode(sb_scnet_on *r, const sc_level *lv, sb_dv x, sb_dv skip, int B)
{
	const sb_scnet *net = r->net;
	const sb_scnet_config *c = &net->cfg;
	const int T = net->frames, co = lv->co, R = lv->rows_out, Ro = lv->rows_in, cout = lv->cout;
	const sb_scnet_bands *bd = &lv->bands;
	OP(r)->add(r->p.x.d, x, skip, (size_t)B * R * co * T);
	sb_dv f = sb_resident_a(&r->p, (size_t)B * R * 2 * co * T);
	sb_rows_conv3x3(&r->p, x, B, R, co, 2 * co, T, (const float *const *)lv->fuse_w,
	                lv->fuse_b, f);
	sb_resident_r(&r->p, x);
	sb_dv g = sb_resident_a(&r->p, (size_t)B * R * co * T);
	OP(r)->glu(r->p.x.d, f, 2L * co * T, g, (long)co * T, co * T, B * R);
	sb_resident_r(&r->p, f);
	sb_dv y = sb_resident_a(&r->p, (size_t)B * Ro * cout * T);
	const long yitem = (long)Ro * cout * T, gitem = (long)R * co * T;
	for (int b = 0, off = 0; b < 3; off += bd->out[b], b++) {
		const int k = c->band_kernel[b], s = c->band_stride[b], n = bd->out[b];
		const int orig = bd->end[b] - bd->start[b], made = (n - 1) * s + k;
		const int dist = abs(orig - made) / 2;
		const sb_dv gb = sb_dv_at(g, (size_t)off * co * T);
		const sb_dv yb = sb_dv_at(y, (size_t)bd->start[b] * cout * T);
		if (s == 1) {
			/* a transposed convolution of stride 1, cropped by dist: a convolution with the
			 * taps reversed over rows padded by k - 1 - dist before */
			const int lo = k - 1 - dist, plen = orig + k - 1;
			const size_t pitem = (size_t)plen * co * T;
			sb_dv p = sb_resident_a(&r->p, (size_t)B * pitem);
			OP(r)->zero(r->p.x.d, p, (size_t)B * pitem);
			const int nin = n < plen - lo ? n : plen - lo;
			OP(r)->copy_rows(r->p.x.d, sb_dv_at(p, (size_t)lo * co * T), 0, (long)pitem, gb, 0,
			                 gitem, 1, (long)nin * co * T, B);
			conv(r, cout, T, k * co, lv->up_w[b], k * co, p, T, (long)co * T, (long)pitem, 0,
			     yb, T, (long)cout * T, yitem, orig, B, lv->up_b[b]);
			sb_resident_r(&r->p, p);
		} else {
			/* stride k: each input row makes k output rows, [k][cout] of one product */
			const size_t titem = (size_t)n * k * cout * T;
			sb_dv t = sb_resident_a(&r->p, (size_t)B * titem);
			conv(r, k * cout, T, co, lv->up_w[b], co, gb, T, (long)co * T, gitem, 0, t, T,
			     (long)k * cout * T, (long)titem, n, B, lv->up_b[b]);
			OP(r)->copy_rows(r->p.x.d, yb, 0, yitem, sb_dv_at(t, (size_t)dist * cout * T), 0,
			                 (long)titem, 1, (long)orig * cout * T, B);
			sb_resident_r(&r->p, t);
		}
	}
	sb_resident_r(&r->p, g);
	return y;
}

sb_status sb_scnet_forward(sb_scnet_on *r, int B, const float *in, float *out)
{
	const sb_scnet *net = r->net;
	const sb_scnet_config *c = &net->cfg;
	const int S = net->S, T = net->frames, F = c->nfft / 2 + 1, n_src = net->n_src;
	const int64_t L = net->L, Lp = net->Lp;
	if (B < 1)
		return SB_ERR_INVALID;
	sb_status st = sb_resident_begin(&r->p);
	if (st != SB_OK)
		return st;
	/* the chunks, zero-padded to Lp */
	sb_dv up = sb_resident_a(&r->p, (size_t)B * S * L), mix = sb_resident_a(&r->p, (size_t)B * S * Lp);
	if (OK(r))
		r->p.x.be->upload(r->p.x.d, up, in, (size_t)B * S * L);
	OP(r)->zero(r->p.x.d, mix, (size_t)B * S * Lp);
	OP(r)->copy_rows(r->p.x.d, mix, Lp, 0, up, L, 0, B * S, L, 1);
	sb_resident_r(&r->p, up);
	/* torch.stft(center, reflect, the rectangular window, normalized): rows [F][2S][T], the
	 * channel of (s, re / im) 2 s + ri */
	const sb_stft g = {c->nfft, c->hop, T, F, c->nfft / 2, 2L * T, 2L * S * T, 1, T};
	const float norm = c->normalized ? 1.f / sqrtf((float)c->nfft) : 1.f;
	sb_dv x = sb_resident_a(&r->p, (size_t)B * F * 2 * S * T);
	for (int b = 0; b < B; b++)
		OP(r)->stft(r->p.x.d, &g, sb_dv_at(mix, (size_t)b * S * Lp), Lp, S, Lp, W(r, net->ones),
		            norm, sb_dv_at(x, (size_t)b * F * 2 * S * T));
	sb_resident_r(&r->p, mix);
	sb_dv skip[SB_SCNET_MAX_LEVELS];
	for (int i = 0; i < net->levels; i++) {
		sb_dv y = encode(r, &net->lv[i], x, B, &skip[i]);
		sb_resident_r(&r->p, x);
		x = y;
		if (sb_resident_stopped(&r->p))
			break;
	}
	x = separate(r, x, B, net->lv[net->levels - 1].rows_out);
	for (int i = net->levels - 1; i >= 0 && !sb_resident_stopped(&r->p); i--) {
		x = decode(r, &net->lv[i], x, skip[i], B);
		sb_resident_r(&r->p, skip[i]);
	}
	/* the inverse STFT of each (source, audio channel): channel 2 (s S + a) + ri of the
	 * decoder's output; the chunk is the first L samples */
	const int nq = n_src * S, C0 = 2 * nq;
	const sb_stft gi = {c->nfft, c->hop, T, F, c->nfft / 2, 2L * T, (long)C0 * T, 1, T};
	const float iscale = (c->normalized ? sqrtf((float)c->nfft) : 1.f) / (float)c->nfft;
	sb_dv y = sb_resident_a(&r->p, (size_t)B * nq * L);
	sb_dv work = sb_resident_a(&r->p, (size_t)nq * T * c->nfft);
	for (int b = 0; b < B; b++)
		OP(r)->istft(r->p.x.d, &gi, sb_dv_at(x, (size_t)b * F * C0 * T), nq, L, W(r, net->ones),
		             iscale, 0, 0, sb_dv_at(y, (size_t)b * nq * L), L, 0, work);
	/* the stems read back at the pass's one wait (resident.h: sb_resident_fetch) */
	sb_resident_fetch(&r->p, out, y, (size_t)B * nq * L);
	sb_resident_pass pass = sb_resident_end(&r->p);
	return sb_resident_wait(&r->p, &pass);
}
