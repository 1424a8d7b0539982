/* The HTDemucs forward pass on an OpenCL device: htdemucs_forward.c's steps with device
 * buffers (see htdemucs_cl_internal.h). Frequency layers run each product once for all rows
 * (a batched GEMM whose B steps 4 rows per output row in the encoder, one row per output row
 * in the decoder's four phases); the STFT, its inverse and the normalisation statistics of the
 * inputs are computed on the host.
 */
#include "models/demucs/htdemucs_cl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x (batch items of C x T at stride C*T) += DConv(x) */
static void dconv(sb_htdemucs_cl *c, const hd_dconv *d, hd_db x, int T, int batch)
{
	const int C = d->C, H = d->H;
	const long xs = (long)C * T, hs = (long)H * T, zs = 2L * C * T;
	hd_db h = hd_cl_alloc(c, (size_t)batch * hs);
	hd_db z = hd_cl_alloc(c, (size_t)batch * zs);
	for (int li = 0; li < d->depth; li++) {
		const hd_dconv_layer *l = &d->l[li];
		hd_cl_fill_bias(c, h, (size_t)batch * hs, H, T, l->b1);
		for (int k = 0; k < 3; k++) {
			const int s = (k - 1) * l->dil;
			const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
			hd_cl_gemm(c, H, t1 - t0, C, 1.f, hd_at(hd_cl_w(c, l->w1), (size_t)k * H * C), C, 0,
			           hd_at(x, (size_t)(t0 + s)), T, xs, 0, 1.f, hd_at(h, (size_t)t0), T, hs,
			           batch);
		}
		hd_cl_groupnorm(c, h, hs, H, T, batch, l->n1w, l->n1b, 1);
		hd_cl_gemm(c, 2 * C, T, H, 1.f, hd_cl_w(c, l->w2), H, 0, h, T, hs, 0, 0.f, z, T, zs,
		           batch);
		hd_cl_bias_act(c, z, (size_t)batch * zs, 2 * C, T, l->b2, 0);
		hd_cl_groupnorm(c, z, zs, 2 * C, T, batch, l->n2w, l->n2b, 0);
		hd_cl_glu_add(c, x, xs, z, zs, C * T, T, l->scale, batch);
	}
	hd_cl_release(c, h);
	hd_cl_release(c, z);
}

static void enc_freq(sb_htdemucs_cl *c, const hd_enc *l, const hd_dften *in, hd_dften *out)
{
	const int T = in->T, cin = l->cin, cout = l->cout, Fo = in->F / 4;
	hd_cl_dften_alloc(c, out, Fo, cout, T);
	const long ys = (long)cout * T;
	hd_db y = hd_cl_alloc(c, (size_t)Fo * ys);
	hd_db z = hd_cl_alloc(c, (size_t)Fo * 2 * ys);
	/* output row fo reads input rows 4 fo - 2 .. 4 fo + 5: one (8 cin x T) matrix */
	hd_cl_gemm(c, cout, T, 8 * cin, 1.f, hd_cl_w(c, l->w), 8 * cin, 0, hd_drow(in, -2), T,
	           4L * cin * T, 0, 0.f, y, T, ys, Fo);
	hd_cl_bias_act(c, y, (size_t)Fo * ys, cout, T, l->b, 1);
	if (l->has_dconv)
		dconv(c, &l->dc, y, T, Fo);
	hd_cl_gemm(c, 2 * cout, T, cout, 1.f, hd_cl_w(c, l->rw), cout, 0, y, T, ys, 0, 0.f, z, T,
	           2 * ys, Fo);
	hd_cl_bias_act(c, z, (size_t)Fo * 2 * ys, 2 * cout, T, l->rb, 0);
	hd_cl_glu(c, z, 2 * ys, hd_drow(out, 0), ys, (int)ys, Fo);
	hd_cl_release(c, y);
	hd_cl_release(c, z);
}

static void dec_freq(sb_htdemucs_cl *c, const hd_dec *l, hd_dften *x, const hd_dften *skip,
                     hd_dften *out)
{
	const int F = x->F, T = x->T, cin = l->cin, cout = l->cout;
	const long xs = (long)cin * T, zs = 2L * cin * T;
	hd_cl_add(c, hd_drow(x, 0), hd_drow(skip, 0), (size_t)F * xs);
	hd_db z = hd_cl_alloc(c, (size_t)F * zs);
	hd_cl_fill_bias(c, z, (size_t)F * zs, 2 * cin, T, l->rb);
	/* 3x3 rewrite: rows f-1..f+1 are one (3 cin x T) matrix, one product per time tap */
	for (int dt = 0; dt < 3; dt++) {
		const int s = dt - 1;
		const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
		hd_cl_gemm(c, 2 * cin, t1 - t0, 3 * cin, 1.f,
		           hd_at(hd_cl_w(c, l->rw), (size_t)dt * 2 * cin * 3 * cin), 3 * cin, 0,
		           hd_at(hd_drow(x, -1), (size_t)(t0 + s)), T, xs, 0, 1.f,
		           hd_at(z, (size_t)t0), T, zs, F);
	}
	hd_dften y;
	hd_cl_dften_alloc(c, &y, F, cin, T);
	hd_cl_glu(c, z, zs, hd_drow(&y, 0), xs, (int)xs, F);
	hd_cl_release(c, z);
	if (l->has_dconv)
		dconv(c, &l->dc, hd_drow(&y, 0), T, F);
	/* transposed conv: output row g is phase (g+2) % 4 of input rows q-1, q (q = (g+2) / 4);
	 * rows of one phase are 4 apart in the output and 1 apart in the input */
	hd_cl_dften_alloc(c, out, 4 * F, cout, T);
	const long os = (long)cout * T;
	for (int r = 0; r < 4; r++) {
		const int g0 = (r + 2) % 4, q0 = (g0 + 2) / 4;
		const int count = (4 * F - g0 + 3) / 4;
		hd_cl_gemm(c, cout, T, 2 * cin, 1.f,
		           hd_at(hd_cl_w(c, l->tw), (size_t)r * cout * 2 * cin), 2 * cin, 0,
		           hd_drow(&y, q0 - 1), T, xs, 0, 0.f, hd_drow(out, g0), T, 4 * os, count);
	}
	hd_cl_bias_act(c, hd_drow(out, 0), (size_t)4 * F * os, cout, T, l->tb, !l->last);
	hd_cl_dften_free(c, &y);
}

static void enc_time(sb_htdemucs_cl *c, const hd_enc *l, hd_db in, long lin, hd_db out)
{
	const long lout = (lin + 3) / 4;
	const int cin = l->cin, cout = l->cout, T = (int)lout;
	hd_db col = hd_cl_alloc(c, (size_t)8 * cin * lout);
	hd_db y = hd_cl_alloc(c, (size_t)cout * lout);
	hd_cl_im2col_time(c, in, lin, cin, col, lout);
	hd_cl_gemm(c, cout, T, 8 * cin, 1.f, hd_cl_w(c, l->w), 8 * cin, 0, col, T, 0, 0, 0.f, y, T, 0,
	           1);
	hd_cl_release(c, col);
	hd_cl_bias_act(c, y, (size_t)cout * lout, cout, T, l->b, 1);
	if (l->has_dconv)
		dconv(c, &l->dc, y, T, 1);
	hd_db z = hd_cl_alloc(c, (size_t)2 * cout * lout);
	hd_cl_gemm(c, 2 * cout, T, cout, 1.f, hd_cl_w(c, l->rw), cout, 0, y, T, 0, 0, 0.f, z, T, 0, 1);
	hd_cl_bias_act(c, z, (size_t)2 * cout * lout, 2 * cout, T, l->rb, 0);
	hd_cl_glu(c, z, 0, out, 0, cout * T, 1);
	hd_cl_release(c, y);
	hd_cl_release(c, z);
}

static void dec_time(sb_htdemucs_cl *c, const hd_dec *l, hd_db x, hd_db skip, long lin,
                     long length, hd_db out)
{
	const int cin = l->cin, cout = l->cout, T = (int)lin;
	hd_cl_add(c, x, skip, (size_t)cin * lin);
	hd_db z = hd_cl_alloc(c, (size_t)2 * cin * lin);
	hd_cl_fill_bias(c, z, (size_t)2 * cin * lin, 2 * cin, T, l->rb);
	for (int k = 0; k < 3; k++) {
		const int s = k - 1;
		const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
		hd_cl_gemm(c, 2 * cin, t1 - t0, cin, 1.f,
		           hd_at(hd_cl_w(c, l->rw), (size_t)k * 2 * cin * cin), cin, 0,
		           hd_at(x, (size_t)(t0 + s)), T, 0, 0, 1.f, hd_at(z, (size_t)t0), T, 0, 1);
	}
	hd_db y = hd_cl_alloc(c, (size_t)cin * lin);
	hd_cl_glu(c, z, 0, y, 0, cin * T, 1);
	hd_cl_release(c, z);
	if (l->has_dconv)
		dconv(c, &l->dc, y, T, 1);
	hd_db p = hd_cl_alloc(c, (size_t)8 * cout * lin);
	hd_cl_gemm(c, 8 * cout, T, cin, 1.f, hd_cl_w(c, l->tw), cin, 0, y, T, 0, 0, 0.f, p, T, 0, 1);
	hd_cl_release(c, y);
	hd_cl_convtr_gather(c, p, lin, cout, length, l->tb, !l->last, out);
	hd_cl_release(c, p);
}

/* ---- transformer ---- */

/* attention of q [nq] to k, v [nk] (row strides ldq, ldkv), all heads, into o [nq][D] */
static void attention(sb_htdemucs_cl *c, hd_db q, int ldq, hd_db k, hd_db v, int ldkv, long nq,
                      long nk, int heads, int D, hd_db o)
{
	const int hd = D / heads;
	hd_db s = hd_cl_alloc(c, (size_t)heads * nq * nk);
	hd_cl_gemm(c, (int)nq, (int)nk, hd, 1.f / sqrtf((float)hd), q, ldq, hd, k, ldkv, hd, 1, 0.f,
	           s, (int)nk, nq * nk, heads);
	hd_cl_softmax(c, s, (size_t)heads * nq, (int)nk);
	hd_cl_gemm(c, (int)nq, hd, (int)nk, 1.f, s, (int)nk, nq * nk, v, ldkv, hd, 0, 0.f, o, D, hd,
	           heads);
	hd_cl_release(c, s);
}

static void layer(sb_htdemucs_cl *c, const hd_tlayer *L, hd_db x, long n, const hd_db *kv,
                  long nkv)
{
	const sb_htdemucs *net = c->net;
	const int D = net->dim, Hd = net->hidden, heads = net->cfg.t_heads;
	hd_db h = hd_cl_alloc(c, (size_t)n * D);
	hd_db a = hd_cl_alloc(c, (size_t)n * D);
	hd_cl_layernorm(c, x, h, (size_t)n, D, L->n1w, L->n1b);
	if (!kv) {
		hd_db qkv = hd_cl_alloc(c, (size_t)n * 3 * D);
		hd_cl_linear(c, h, (size_t)n, D, L->in_w, L->in_b, 3 * D, qkv, 0);
		attention(c, qkv, 3 * D, hd_at(qkv, (size_t)D), hd_at(qkv, (size_t)2 * D), 3 * D, n, n,
		          heads, D, h);
		hd_cl_release(c, qkv);
	} else {
		hd_db hk = hd_cl_alloc(c, (size_t)nkv * D);
		hd_db qb = hd_cl_alloc(c, (size_t)n * D);
		hd_db kvp = hd_cl_alloc(c, (size_t)nkv * 2 * D);
		hd_cl_layernorm(c, *kv, hk, (size_t)nkv, D, L->n2w, L->n2b);
		hd_cl_linear(c, h, (size_t)n, D, L->in_w, L->in_b, D, qb, 0);
		hd_cl_linear(c, hk, (size_t)nkv, D, L->in_w + (size_t)D * D, L->in_b + D, 2 * D, kvp, 0);
		attention(c, qb, D, kvp, hd_at(kvp, (size_t)D), 2 * D, n, nkv, heads, D, h);
		hd_cl_release(c, hk);
		hd_cl_release(c, qb);
		hd_cl_release(c, kvp);
	}
	hd_cl_linear(c, h, (size_t)n, D, L->out_w, L->out_b, D, a, 0);
	hd_cl_scale_add(c, x, a, L->g1, (size_t)n * D, D);
	hd_cl_layernorm(c, x, h, (size_t)n, D, kv ? L->n3w : L->n2w, kv ? L->n3b : L->n2b);
	hd_db f = hd_cl_alloc(c, (size_t)n * Hd);
	hd_cl_linear(c, h, (size_t)n, D, L->l1w, L->l1b, Hd, f, 1);
	hd_cl_linear(c, f, (size_t)n, Hd, L->l2w, L->l2b, D, a, 0);
	hd_cl_scale_add(c, x, a, L->g2, (size_t)n * D, D);
	hd_cl_groupnorm_tokens(c, x, (size_t)n, D, L->now, L->nob);
	hd_cl_release(c, f);
	hd_cl_release(c, h);
	hd_cl_release(c, a);
}

/* the sine embeddings, computed on the host as htdemucs_transformer.c does, then uploaded */
static void add_pos(sb_htdemucs_cl *c, hd_db x, int D, int Fr, int T1, hd_db xt, int T2)
{
	const size_t n1 = (size_t)Fr * T1 * D, n2 = (size_t)T2 * D;
	float *pe = calloc(n1 > n2 ? n1 : n2, sizeof(float));
	if (!pe) {
		c->st = c->st != SB_OK ? c->st : SB_ERR_NOMEM;
		return;
	}
	hd_db d = hd_cl_alloc(c, n1 > n2 ? n1 : n2);
	hd_pos_2d(pe, D, Fr, T1);
	hd_cl_upload(c, d, pe, n1);
	hd_cl_add(c, x, d, n1);
	memset(pe, 0, sizeof(float) * n2);
	hd_pos_1d(pe, D, T2);
	hd_cl_upload(c, d, pe, n2); /* blocking: the previous add has been enqueued before it */
	hd_cl_add(c, xt, d, n2);
	clFinish(c->q);
	hd_cl_release(c, d);
	free(pe);
}

void hd_cl_transformer(sb_htdemucs_cl *c, hd_db x, int Fr, int T1, hd_db xt, int T2)
{
	const sb_htdemucs *net = c->net;
	const int D = net->dim;
	const long n1 = (long)Fr * T1, n2 = T2;
	hd_cl_layernorm(c, x, x, (size_t)n1, D, net->nin_w, net->nin_b);
	hd_cl_layernorm(c, xt, xt, (size_t)n2, D, net->nint_w, net->nint_b);
	add_pos(c, x, D, Fr, T1, xt, T2);
	hd_db old = hd_cl_alloc(c, (size_t)n1 * D);
	for (int i = 0; i < net->cfg.t_layers && c->st == SB_OK; i++) {
		if (i % 2 == 0) {
			layer(c, &net->layers[i], x, n1, NULL, 0);
			layer(c, &net->layers_t[i], xt, n2, NULL, 0);
		} else {
			if (c->st == SB_OK) {
				const cl_int err = clEnqueueCopyBuffer(c->q, x.m, old.m, sizeof(float) * x.off,
				                                       sizeof(float) * old.off,
				                                       sizeof(float) * (size_t)n1 * D, 0, NULL,
				                                       NULL);
				if (err != CL_SUCCESS)
					c->st = sb_cl_status(c->dev, err, "htdemucs: copying");
			}
			layer(c, &net->layers[i], x, n1, &xt, n2);
			layer(c, &net->layers_t[i], xt, n2, &old, n1);
		}
	}
	hd_cl_release(c, old);
}

/* ---- the forward pass ---- */

typedef struct {
	sb_htdemucs_tap fn;
	void *user;
	sb_htdemucs_cl *c;
} dtap;

/* [rows][cols] device data, downloaded and reported as it is (time tensors) */
static void tap_plain(dtap *tp, const char *name, hd_db x, long a, long b)
{
	if (!tp->fn || tp->c->st != SB_OK)
		return;
	float *h = malloc(sizeof(float) * (size_t)a * b);
	if (!h)
		return;
	hd_cl_download(tp->c, h, x, (size_t)a * b);
	const int64_t shape[2] = {a, b};
	if (tp->c->st == SB_OK)
		tp->fn(tp->user, name, h, 2, shape);
	free(h);
}

/* a freq tensor, as the reference's [C][F][T] */
static void tap_ften(dtap *tp, const char *name, const hd_dften *x)
{
	if (!tp->fn || tp->c->st != SB_OK)
		return;
	const size_t row = (size_t)x->C * x->T, n = row * x->F;
	float *h = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * n);
	if (h && o) {
		hd_cl_download(tp->c, h, hd_drow(x, 0), n);
		for (int f = 0; f < x->F; f++)
			for (int ch = 0; ch < x->C; ch++)
				memcpy(o + ((size_t)ch * x->F + f) * x->T, h + f * row + (size_t)ch * x->T,
				       sizeof(float) * (size_t)x->T);
		const int64_t shape[3] = {x->C, x->F, x->T};
		if (tp->c->st == SB_OK)
			tp->fn(tp->user, name, o, 3, shape);
	}
	free(h);
	free(o);
}

/* tokens [T * Fr][D] as [D][Fr][T] (flat: [D][Fr * T] in (f t) order, the same memory) */
static void tap_tokens(dtap *tp, const char *name, hd_db x, int Fr, int T, int D, int flat)
{
	if (!tp->fn || tp->c->st != SB_OK)
		return;
	const size_t n = (size_t)Fr * T * D;
	float *h = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * n);
	if (h && o) {
		hd_cl_download(tp->c, h, x, n);
		for (int t = 0; t < T; t++)
			for (int f = 0; f < Fr; f++)
				for (int d = 0; d < D; d++)
					o[((size_t)d * Fr + f) * T + t] = h[((size_t)t * Fr + f) * D + d];
		const int64_t s3[3] = {D, Fr, T}, s2[2] = {D, (int64_t)Fr * T};
		if (tp->c->st == SB_OK)
			tp->fn(tp->user, name, o, flat ? 2 : 3, flat ? s2 : s3);
	}
	free(h);
	free(o);
}

sb_status sb_htdemucs_forward_cl(sb_htdemucs_cl *c, sb_pool *pool, sb_htdemucs_ws *ws,
                                 const float *in, float *out, sb_htdemucs_tap tap,
                                 void *tap_user, const sb_logger *log)
{
	const sb_htdemucs *net = c->net;
	const sb_htdemucs_config *cfg = &net->cfg;
	const int64_t L = cfg->segment_length;
	const int ac = cfg->audio_channels, S = cfg->n_sources;
	const int F = HD_NFFT / 2, T = (int)((L + HD_HOP - 1) / HD_HOP);
	dtap tp = {tap, tap_user, c};
	for (int i = 0; i < c->n_blocks; i++) /* a forward owns every buffer, even after a failure */
		c->blocks[i].used = 0;
	c->st = sb_cl_device_count_chunk(c->dev);
	if (c->st != SB_OK)
		return c->st;
	int64_t tl[HD_DEPTH + 1];
	tl[0] = L;
	for (int i = 0; i < HD_DEPTH; i++)
		tl[i + 1] = (tl[i] + 3) / 4;

	/* host: STFT, complex as channels, both branches' normalisation */
	float mean, std_, meant, stdt;
	hd_ften hx = {0};
	float *z = hd_alloc(ws, sizeof(float) * (size_t)ac * F * T * 2);
	float *hxt = hd_alloc(ws, sizeof(float) * (size_t)ac * L);
	sb_status st = z && hxt ? hd_ften_alloc(ws, &hx, F, 2 * ac, T) : SB_ERR_NOMEM;
	if (st == SB_OK)
		st = hd_spec(net, pool, ws, in, ac, L, z);
	if (st != SB_OK) {
		hd_free(ws, z);
		hd_free(ws, hxt);
		hd_ften_free(ws, &hx);
		return st;
	}
	if (tap) {
		const int64_t shape[4] = {ac, F, T, 2};
		tap(tap_user, "spec", z, 4, shape);
	}
	hd_cac_normalise(z, ac, F, T, &hx, &mean, &std_);
	hd_normalise_time(in, (int64_t)ac * L, hxt, &meant, &stdt);
	hd_free(ws, z);

	hd_dften x, e[HD_DEPTH];
	hd_db te[HD_DEPTH], xt = hd_cl_alloc(c, (size_t)ac * L);
	hd_cl_dften_alloc(c, &x, F, 2 * ac, T);
	hd_cl_upload(c, hd_drow(&x, 0), hd_row(&hx, 0), (size_t)F * 2 * ac * T);
	hd_cl_upload(c, xt, hxt, (size_t)ac * L);
	hd_ften_free(ws, &hx);
	hd_free(ws, hxt);

	for (int i = 0; i < HD_DEPTH; i++) {
		char name[32];
		te[i] = hd_cl_alloc(c, (size_t)net->tenc[i].cout * tl[i + 1]);
		enc_time(c, &net->tenc[i], i ? te[i - 1] : xt, tl[i], te[i]);
		snprintf(name, sizeof name, "tencoder.%d", i);
		tap_plain(&tp, name, te[i], net->tenc[i].cout, tl[i + 1]);
		enc_freq(c, &net->enc[i], i ? &e[i - 1] : &x, &e[i]);
		snprintf(name, sizeof name, "encoder.%d", i);
		tap_ften(&tp, name, &e[i]);
		if (i == 0) {
			hd_cl_release(c, xt);
			hd_cl_dften_free(c, &x);
			hd_cl_add_freq_emb(c, hd_drow(&e[0], 0), e[0].F, e[0].C, T, net->freq_emb);
		}
	}

	const int Fr = e[HD_DEPTH - 1].F, ct = net->ct, D = net->dim, T2 = (int)tl[HD_DEPTH];
	const long n1 = (long)Fr * T;
	hd_db tok = hd_cl_alloc(c, (size_t)n1 * ct), tokt = hd_cl_alloc(c, (size_t)T2 * ct);
	hd_cl_ften_tokens(c, hd_drow(&e[HD_DEPTH - 1], 0), tok, Fr, ct, T, 0);
	hd_cl_transpose(c, te[HD_DEPTH - 1], tokt, ct, T2);
	if (cfg->t_layers > 0) {
		hd_db up = tok, upt = tokt;
		if (cfg->bottom_channels) {
			up = hd_cl_alloc(c, (size_t)n1 * D);
			upt = hd_cl_alloc(c, (size_t)T2 * D);
			hd_cl_linear(c, tok, (size_t)n1, ct, net->up_w, net->up_b, D, up, 0);
			hd_cl_linear(c, tokt, (size_t)T2, ct, net->upt_w, net->upt_b, D, upt, 0);
			if (tap && c->st == SB_OK) {
				/* the reference's "b c (f t)" order */
				float *h = malloc(sizeof(float) * (size_t)n1 * D);
				float *o = malloc(sizeof(float) * (size_t)n1 * D);
				if (h && o) {
					hd_cl_download(c, h, up, (size_t)n1 * D);
					for (int t = 0; t < T; t++)
						for (int f = 0; f < Fr; f++)
							for (int d = 0; d < D; d++)
								o[(size_t)d * n1 + (size_t)f * T + t] =
									h[((size_t)t * Fr + f) * D + d];
					const int64_t sh[2] = {D, n1};
					tap(tap_user, "channel_upsampler", o, 2, sh);
				}
				free(h);
				free(o);
				tap_tokens(&tp, "channel_upsampler_t", upt, 1, T2, D, 1);
			}
		}
		tap_tokens(&tp, "crosstransformer.in.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.in.1", upt, 1, T2, D, 1);
		hd_cl_transformer(c, up, Fr, T, upt, T2);
		tap_tokens(&tp, "crosstransformer.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.1", upt, 1, T2, D, 1);
		if (cfg->bottom_channels) {
			hd_cl_linear(c, up, (size_t)n1, D, net->down_w, net->down_b, ct, tok, 0);
			hd_cl_linear(c, upt, (size_t)T2, D, net->downt_w, net->downt_b, ct, tokt, 0);
			if (tap && c->st == SB_OK) {
				float *h = malloc(sizeof(float) * (size_t)n1 * ct);
				float *o = malloc(sizeof(float) * (size_t)n1 * ct);
				if (h && o) {
					hd_cl_download(c, h, tok, (size_t)n1 * ct);
					for (int t = 0; t < T; t++)
						for (int f = 0; f < Fr; f++)
							for (int d = 0; d < ct; d++)
								o[(size_t)d * n1 + (size_t)f * T + t] =
									h[((size_t)t * Fr + f) * ct + d];
					const int64_t sh[2] = {ct, n1};
					tap(tap_user, "channel_downsampler", o, 2, sh);
				}
				free(h);
				free(o);
				tap_tokens(&tp, "channel_downsampler_t", tokt, 1, T2, ct, 1);
			}
			hd_cl_release(c, up);
			hd_cl_release(c, upt);
		}
	}
	hd_cl_dften_alloc(c, &x, Fr, ct, T);
	hd_cl_ften_tokens(c, tok, hd_drow(&x, 0), Fr, ct, T, 1);
	xt = hd_cl_alloc(c, (size_t)ct * T2);
	hd_cl_transpose(c, tokt, xt, T2, ct);
	hd_cl_release(c, tok);
	hd_cl_release(c, tokt);

	for (int j = 0; j < HD_DEPTH; j++) {
		const int idx = HD_DEPTH - 1 - j;
		char name[32];
		hd_dften nx;
		dec_freq(c, &net->dec[j], &x, &e[idx], &nx);
		hd_cl_dften_free(c, &x);
		hd_cl_dften_free(c, &e[idx]);
		x = nx;
		snprintf(name, sizeof name, "decoder.%d.0", j);
		tap_ften(&tp, name, &x);
		hd_db nt = hd_cl_alloc(c, (size_t)net->tdec[j].cout * tl[idx]);
		dec_time(c, &net->tdec[j], xt, te[idx], tl[idx + 1], tl[idx], nt);
		hd_cl_release(c, xt);
		hd_cl_release(c, te[idx]);
		xt = nt;
		snprintf(name, sizeof name, "tdecoder.%d.0", j);
		tap_plain(&tp, name, xt, net->tdec[j].cout, tl[idx]);
	}

	/* host: de-normalise the time branch, add the iSTFT of the frequency branch */
	hd_cl_download(c, out, xt, (size_t)S * ac * L);
	hd_ften fo = {0};
	if (c->st == SB_OK && hd_ften_alloc(ws, &fo, x.F, x.C, T) != SB_OK)
		c->st = SB_ERR_NOMEM;
	hd_cl_download(c, hd_row(&fo, 0), hd_drow(&x, 0), (size_t)x.F * x.C * T);
	hd_cl_release(c, xt);
	hd_cl_dften_free(c, &x);
	st = c->st;
	if (st == SB_OK) {
		for (int64_t i = 0; i < (int64_t)S * ac * L; i++)
			out[i] = out[i] * stdt + meant;
		st = hd_ispec_add(net, pool, ws, &fo, std_, mean, L, out);
	}
	hd_ften_free(ws, &fo);
	if (st == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory for a segment's activations");
	return st;
}
