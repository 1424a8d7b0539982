/* HTDemucs.forward (demucs/htdemucs.py) for one segment of exactly segment_length samples, in
 * eval mode: STFT, complex as channels, normalisation of both branches by their own mean and
 * (unbiased) std, four encoder layers per branch (the frequency embedding added after the
 * first frequency layer), the channel up-sampling, the cross-domain transformer, the channel
 * down-sampling, four decoder layers per branch with the encoders' outputs as skips, then the
 * frequency branch's iSTFT plus the time branch, each de-normalised.
 *
 * Memory: the skips of both branches and one layer's input and output at a time; for the
 * released model about 200 MB per segment.
 */
#include "backend/cpu/gemm.h"
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* mean and unbiased std (torch.Tensor.std) in double */
static void mean_std(const float *x, int64_t n, float *mean, float *std_)
{
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += x[i];
	const double m = s / (double)n;
	double q = 0;
	for (int64_t i = 0; i < n; i++)
		q += (x[i] - m) * (x[i] - m);
	*mean = (float)m;
	*std_ = (float)sqrt(q / (double)(n > 1 ? n - 1 : 1));
}

void hd_cac_normalise(const float *z, int ac, int F, int T, hd_ften *x, float *mean, float *std_)
{
	for (int c = 0; c < ac; c++)
		for (int f = 0; f < F; f++)
			for (int t = 0; t < T; t++)
				for (int ri = 0; ri < 2; ri++)
					hd_row(x, f)[(size_t)(c * 2 + ri) * T + t] = z[(((size_t)c * F + f) * T + t) * 2 + ri];
	const int64_t n = (int64_t)F * 2 * ac * T;
	float *p = hd_row(x, 0);
	mean_std(p, n, mean, std_);
	const float d = 1e-5f + *std_;
	for (int64_t i = 0; i < n; i++)
		p[i] = (p[i] - *mean) / d;
}

void hd_normalise_time(const float *in, int64_t n, float *out, float *mean, float *std_)
{
	mean_std(in, n, mean, std_);
	const float d = 1e-5f + *std_;
	for (int64_t i = 0; i < n; i++)
		out[i] = (in[i] - *mean) / d;
}

typedef struct {
	sb_htdemucs_tap fn;
	void *user;
	sb_status st;
} tapper;

static void tap_plain(tapper *tp, const char *name, const float *x, int ndim, int64_t a,
                      int64_t b, int64_t c)
{
	if (!tp->fn)
		return;
	const int64_t shape[3] = {a, b, c};
	tp->fn(tp->user, name, x, ndim, shape);
}

/* a freq tensor as the reference's [C][F][T] */
static void tap_ften(tapper *tp, const char *name, const hd_ften *x)
{
	if (!tp->fn)
		return;
	const size_t n = (size_t)x->C * x->F * x->T;
	float *buf = malloc(sizeof(float) * n);
	if (!buf) {
		tp->st = SB_ERR_NOMEM;
		return;
	}
	for (int f = 0; f < x->F; f++)
		for (int c = 0; c < x->C; c++)
			memcpy(buf + ((size_t)c * x->F + f) * x->T, hd_row(x, f) + (size_t)c * x->T,
			       sizeof(float) * (size_t)x->T);
	const int64_t shape[3] = {x->C, x->F, x->T};
	tp->fn(tp->user, name, buf, 3, shape);
	free(buf);
}

/* tokens [T1 * Fr][D] (token t * Fr + f) as [D][Fr][T1] (or [D][Fr * T1], the same memory) */
static void tap_tokens(tapper *tp, const char *name, const float *x, int Fr, int T1, int D,
                       int flat)
{
	if (!tp->fn)
		return;
	float *buf = malloc(sizeof(float) * (size_t)D * Fr * T1);
	if (!buf) {
		tp->st = SB_ERR_NOMEM;
		return;
	}
	for (int t = 0; t < T1; t++)
		for (int f = 0; f < Fr; f++)
			for (int d = 0; d < D; d++)
				buf[((size_t)d * Fr + f) * T1 + t] = x[((size_t)t * Fr + f) * D + d];
	const int64_t shape3[3] = {D, Fr, T1}, shape2[2] = {D, (int64_t)Fr * T1};
	tp->fn(tp->user, name, buf, flat ? 2 : 3, flat ? shape2 : shape3);
	free(buf);
}

/* time tokens [T2][D] as [D][T2] */
static void tap_ttokens(tapper *tp, const char *name, const float *x, int T2, int D)
{
	tap_tokens(tp, name, x, 1, T2, D, 1);
}

static sb_status linear_tokens(sb_pool *pool, sb_htdemucs_ws *ws, const float *x, int64_t n, int in, const float *w,
                               const float *b, int out, float **y)
{
	*y = hd_alloc(ws, sizeof(float) * (size_t)n * out);
	if (!*y)
		return SB_ERR_NOMEM;
	sb_sgemm_par(pool, 0, 1, (int)n, out, in, 1.f, x, in, w, in, 0.f, *y, out);
	for (int64_t r = 0; r < n; r++)
		for (int c = 0; c < out; c++)
			(*y)[r * out + c] += b[c];
	return SB_OK;
}

sb_status sb_htdemucs_forward(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws,
                              const float *in, float *out,
                              sb_htdemucs_tap tap, void *tap_user, const sb_logger *log)
{
	const sb_htdemucs_config *cfg = &net->cfg;
	const int64_t L = cfg->segment_length;
	const int ac = cfg->audio_channels, S = cfg->n_sources;
	const int F = HD_NFFT / 2, T = (int)((L + HD_HOP - 1) / HD_HOP);
	tapper tp = {tap, tap_user, SB_OK};
	sb_status st = SB_OK;
	hd_ften e[HD_DEPTH] = {{0}}, x = {0}, nx = {0};
	float *te[HD_DEPTH] = {0};
	float *z = NULL, *xt = NULL, *tok = NULL, *tokt = NULL, *up = NULL, *upt = NULL;
	int64_t tl[HD_DEPTH + 1];
	tl[0] = L;
	for (int i = 0; i < HD_DEPTH; i++)
		tl[i + 1] = (tl[i] + 3) / 4;

	/* frequency branch input: complex as channels (c * 2 + re/im), normalised */
	z = hd_alloc(ws, sizeof(float) * (size_t)ac * F * T * 2);
	if (!z || (st = hd_ften_alloc(ws, &x, F, 2 * ac, T)) != SB_OK)
		goto nomem;
	if ((st = hd_spec(net, pool, ws, in, ac, L, z)) != SB_OK)
		goto fail;
	if (tp.fn) {
		const int64_t shape[4] = {ac, F, T, 2};
		tp.fn(tp.user, "spec", z, 4, shape);
	}
	float mean, std_, meant, stdt;
	hd_cac_normalise(z, ac, F, T, &x, &mean, &std_);
	hd_free(ws, z);
	z = NULL;
	/* time branch input */
	xt = hd_alloc(ws, sizeof(float) * (size_t)ac * L);
	if (!xt)
		goto nomem;
	hd_normalise_time(in, (int64_t)ac * L, xt, &meant, &stdt);

	/* encoders */
	for (int i = 0; i < HD_DEPTH; i++) {
		char name[32];
		te[i] = hd_alloc(ws, sizeof(float) * (size_t)net->tenc[i].cout * tl[i + 1]);
		if (!te[i])
			goto nomem;
		if ((st = hd_enc_time(&net->tenc[i], pool, ws, i ? te[i - 1] : xt, tl[i], te[i])) != SB_OK)
			goto fail;
		snprintf(name, sizeof name, "tencoder.%d", i);
		tap_plain(&tp, name, te[i], 2, net->tenc[i].cout, tl[i + 1], 0);
		if ((st = hd_enc_freq(&net->enc[i], pool, ws, i ? &e[i - 1] : &x, &e[i])) != SB_OK)
			goto fail;
		snprintf(name, sizeof name, "encoder.%d", i);
		tap_ften(&tp, name, &e[i]);
		if (i == 0) {
			hd_free(ws, xt);
			xt = NULL;
			hd_ften_free(ws, &x);
			/* frequency embedding: row f gets emb[f] on every frame */
			for (int f = 0; f < e[0].F; f++)
				for (int c = 0; c < e[0].C; c++) {
					float *r = hd_row(&e[0], f) + (size_t)c * T;
					const float v = net->freq_emb[(size_t)f * e[0].C + c];
					for (int t = 0; t < T; t++)
						r[t] += v;
				}
		}
	}

	/* bottom: tokens, channel up-sampling, transformer, down-sampling */
	const int Fr = e[HD_DEPTH - 1].F, ct = net->ct, D = net->dim;
	const int T2 = (int)tl[HD_DEPTH];
	const int64_t n1 = (int64_t)Fr * T;
	tok = hd_alloc(ws, sizeof(float) * (size_t)n1 * ct);
	tokt = hd_alloc(ws, sizeof(float) * (size_t)T2 * ct);
	if (!tok || !tokt)
		goto nomem;
	for (int f = 0; f < Fr; f++)
		for (int c = 0; c < ct; c++)
			for (int t = 0; t < T; t++)
				tok[((size_t)t * Fr + f) * ct + c] = hd_row(&e[HD_DEPTH - 1], f)[(size_t)c * T + t];
	for (int c = 0; c < ct; c++)
		for (int t = 0; t < T2; t++)
			tokt[(size_t)t * ct + c] = te[HD_DEPTH - 1][(size_t)c * T2 + t];
	if (cfg->t_layers > 0) {
		if (cfg->bottom_channels) {
			if ((st = linear_tokens(pool, ws, tok, n1, ct, net->up_w, net->up_b, D, &up)) != SB_OK ||
			    (st = linear_tokens(pool, ws, tokt, T2, ct, net->upt_w, net->upt_b, D, &upt)) !=
			        SB_OK)
				goto fail;
			/* the reference runs these on "b c (f t)": report them in that order */
			if (tp.fn) {
				float *buf = hd_alloc(ws, sizeof(float) * (size_t)D * n1);
				if (buf) {
					for (int t = 0; t < T; t++)
						for (int f = 0; f < Fr; f++)
							for (int d = 0; d < D; d++)
								buf[(size_t)d * n1 + (size_t)f * T + t] =
									up[((size_t)t * Fr + f) * D + d];
					const int64_t sh[2] = {D, n1};
					tp.fn(tp.user, "channel_upsampler", buf, 2, sh);
					hd_free(ws, buf);
				}
				tap_ttokens(&tp, "channel_upsampler_t", upt, T2, D);
			}
		} else {
			up = tok;
			upt = tokt;
			tok = tokt = NULL;
		}
		tap_tokens(&tp, "crosstransformer.in.0", up, Fr, T, D, 0);
		tap_ttokens(&tp, "crosstransformer.in.1", upt, T2, D);
		if ((st = hd_transformer(net, pool, ws, up, Fr, T, upt, T2)) != SB_OK)
			goto fail;
		tap_tokens(&tp, "crosstransformer.0", up, Fr, T, D, 0);
		tap_ttokens(&tp, "crosstransformer.1", upt, T2, D);
		if (cfg->bottom_channels) {
			hd_free(ws, tok);
			hd_free(ws, tokt);
			tok = tokt = NULL;
			if ((st = linear_tokens(pool, ws, up, n1, D, net->down_w, net->down_b, ct, &tok)) !=
			        SB_OK ||
			    (st = linear_tokens(pool, ws, upt, T2, D, net->downt_w, net->downt_b, ct, &tokt)) !=
			        SB_OK)
				goto fail;
			if (tp.fn) {
				float *buf = hd_alloc(ws, sizeof(float) * (size_t)ct * n1);
				if (buf) {
					for (int t = 0; t < T; t++)
						for (int f = 0; f < Fr; f++)
							for (int d = 0; d < ct; d++)
								buf[(size_t)d * n1 + (size_t)f * T + t] =
									tok[((size_t)t * Fr + f) * ct + d];
					const int64_t sh[2] = {ct, n1};
					tp.fn(tp.user, "channel_downsampler", buf, 2, sh);
					hd_free(ws, buf);
				}
				tap_ttokens(&tp, "channel_downsampler_t", tokt, T2, ct);
			}
			hd_free(ws, up);
			hd_free(ws, upt);
		} else {
			tok = up;
			tokt = upt;
		}
		up = upt = NULL;
	}
	if ((st = hd_ften_alloc(ws, &x, Fr, ct, T)) != SB_OK)
		goto fail;
	for (int f = 0; f < Fr; f++)
		for (int c = 0; c < ct; c++)
			for (int t = 0; t < T; t++)
				hd_row(&x, f)[(size_t)c * T + t] = tok[((size_t)t * Fr + f) * ct + c];
	hd_free(ws, tok);
	tok = NULL;
	xt = hd_alloc(ws, sizeof(float) * (size_t)ct * T2);
	if (!xt)
		goto nomem;
	for (int c = 0; c < ct; c++)
		for (int t = 0; t < T2; t++)
			xt[(size_t)c * T2 + t] = tokt[(size_t)t * ct + c];
	hd_free(ws, tokt);
	tokt = NULL;

	/* decoders */
	for (int j = 0; j < HD_DEPTH; j++) {
		const int idx = HD_DEPTH - 1 - j;
		char name[32];
		if ((st = hd_dec_freq(&net->dec[j], pool, ws, &x, &e[idx], &nx)) != SB_OK)
			goto fail;
		hd_ften_free(ws, &x);
		hd_ften_free(ws, &e[idx]);
		x = nx;
		nx.base = NULL;
		snprintf(name, sizeof name, "decoder.%d.0", j);
		tap_ften(&tp, name, &x);
		float *nt = hd_alloc(ws, sizeof(float) * (size_t)net->tdec[j].cout * tl[idx]);
		if (!nt)
			goto nomem;
		st = hd_dec_time(&net->tdec[j], pool, ws, xt, te[idx], tl[idx + 1], tl[idx], nt);
		hd_free(ws, xt);
		xt = nt;
		hd_free(ws, te[idx]);
		te[idx] = NULL;
		if (st != SB_OK)
			goto fail;
		snprintf(name, sizeof name, "tdecoder.%d.0", j);
		tap_plain(&tp, name, xt, 2, net->tdec[j].cout, tl[idx], 0);
	}

	/* outputs: time branch de-normalised, plus the iSTFT of the de-normalised spectrogram */
	for (int64_t i = 0; i < (int64_t)S * ac * L; i++)
		out[i] = xt[i] * stdt + meant;
	st = hd_ispec_add(net, pool, ws, &x, std_, mean, L, out);
	goto done;

nomem:
	st = SB_ERR_NOMEM;
fail:
	if (st == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory for a segment's activations");
done:
	hd_free(ws, z);
	hd_free(ws, xt);
	hd_free(ws, tok);
	hd_free(ws, tokt);
	hd_free(ws, up);
	hd_free(ws, upt);
	hd_ften_free(ws, &x);
	hd_ften_free(ws, &nx);
	for (int i = 0; i < HD_DEPTH; i++) {
		hd_ften_free(ws, &e[i]);
		hd_free(ws, te[i]);
	}
	if (st == SB_OK && tp.st != SB_OK)
		st = tp.st;
	return st;
}
