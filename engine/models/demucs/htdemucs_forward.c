/* HTDemucs.forward (demucs/htdemucs.py) in eval mode, written once against the backend
 * interface (backend/backend.h): the same code runs on the CPU backend and on an OpenCL GPU.
 *
 * Per segment: STFT, complex as channels, normalisation of both branches by their own mean and
 * (unbiased) std, four encoder layers per branch (the frequency embedding added after the
 * first frequency layer), the channel up-sampling, the cross-domain transformer, the channel
 * down-sampling, four decoder layers per branch with the encoders' outputs as skips, then the
 * frequency branch's iSTFT plus the time branch, each de-normalised. All of it on the device:
 * a pass uploads its segments, enqueues, and reads the stems back once (the sine position
 * embeddings are uploaded before the first pass's first operation and kept). This file is the
 * pass and its taps; the layers are in htdemucs_layers.c, the transformer in
 * htdemucs_transformer.c, the placement and the shorthands for the operations in
 * htdemucs_resident.c.
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
#include "models/resident.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

sb_status sb_htdemucs_forward(sb_htdemucs_on *r, int B, const float *in, float *out,
                              sb_htdemucs_tap tap, void *tap_user)
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
	sb_status st = sb_resident_begin(&r->p);
	if (st != SB_OK)
		return st;
	int64_t tl[HD_DEPTH + 1];
	tl[0] = L;
	for (int i = 0; i < HD_DEPTH; i++)
		tl[i + 1] = (tl[i] + 3) / 4;

	/* the STFT, complex as channels, both branches' normalisation, each segment on the device:
	 * per segment a mean and std of its spectrum (nst[4b], [4b+1]) and of its waveform
	 * ([4b+2], [4b+3]), kept for the way back */
	const size_t seg_in = (size_t)ac * L;
	const sb_stft sg = spec_geometry(T, 2 * ac);
	const float fscale = 1.f / sqrtf((float)HD_NFFT);
	dften x, e[HD_DEPTH];
	sb_dv te[HD_DEPTH], xt = buffer(r, (size_t)B * seg_in), mix = buffer(r, (size_t)B * seg_in);
	sb_dv nst = buffer(r, (size_t)4 * B);
	hd_dften_new(r, &x, B, F, 2 * ac, T);
	if (pass_status(r) == SB_OK)
		r->p.x.be->upload(r->p.x.d, mix, in, (size_t)B * seg_in);
	/* the pass's other upload, before its first operation: the transformer's tokens are the
	 * frequency rows left after the encoders (each quarters them) by T frames, and tl[DEPTH] */
	if (cfg->t_layers > 0)
		hd_pos_place(r, F >> (2 * HD_DEPTH), T, (int)tl[HD_DEPTH]);
	for (int b = 0; b < B; b++) {
		const sb_dv m = sb_dv_at(mix, (size_t)b * seg_in), z = drow(&x, b, 0);
		const sb_dv s4 = sb_dv_at(nst, (size_t)4 * b);
		const size_t nz = (size_t)F * 2 * ac * T;
		OP(r)->stft(r->p.x.d, &sg, m, L, ac, L, weight(r, net->window), fscale, z);
		tap_spec(&tp, z, ac, F, T);
		OP(r)->moments(r->p.x.d, z, nz, s4);
		OP(r)->standardise(r->p.x.d, z, z, nz, s4, 1e-5f, 0);
		OP(r)->moments(r->p.x.d, m, seg_in, sb_dv_at(s4, 2));
		OP(r)->standardise(r->p.x.d, m, sb_dv_at(xt, (size_t)b * seg_in), seg_in,
		                   sb_dv_at(s4, 2), 1e-5f, 0);
	}
	give_back(r, mix);

	for (int i = 0; i < HD_DEPTH; i++) {
		char name[32];
		if (stopped(r))
			goto end;
		te[i] = buffer(r, (size_t)B * net->tenc[i].cout * tl[i + 1]);
		hd_enc_time(r, &net->tenc[i], i ? te[i - 1] : xt, tl[i], B, te[i]);
		snprintf(name, sizeof name, "tencoder.%d", i);
		tap_plain(&tp, name, te[i], net->tenc[i].cout, tl[i + 1]);
		hd_enc_freq(r, &net->enc[i], i ? &e[i - 1] : &x, &e[i]);
		snprintf(name, sizeof name, "encoder.%d", i);
		tap_ften(&tp, name, &e[i]);
		if (i == 0) {
			give_back(r, xt);
			hd_dften_free(r, &x);
			for (int b = 0; b < B; b++)
				OP(r)->add_row_channel(r->p.x.d, drow(&e[0], b, 0), e[0].F, e[0].C, T,
				                       weight(r, net->freq_emb));
		}
	}

	const int Fr = e[HD_DEPTH - 1].F, ct = net->ct, D = net->dim, T2 = (int)tl[HD_DEPTH];
	const long n1 = (long)Fr * T;
	sb_dv tok = buffer(r, (size_t)B * n1 * ct), tokt = buffer(r, (size_t)B * T2 * ct);
	for (int b = 0; b < B; b++) {
		OP(r)->rows_tokens(r->p.x.d, drow(&e[HD_DEPTH - 1], b, 0),
		                   sb_dv_at(tok, (size_t)b * n1 * ct), Fr, ct, T, 0);
		OP(r)->transpose(r->p.x.d, sb_dv_at(te[HD_DEPTH - 1], (size_t)b * ct * T2),
		                 sb_dv_at(tokt, (size_t)b * T2 * ct), ct, T2);
	}
	if (cfg->t_layers > 0) {
		sb_dv up = tok, upt = tokt;
		if (cfg->bottom_channels) {
			up = buffer(r, (size_t)B * n1 * D);
			upt = buffer(r, (size_t)B * T2 * D);
			hd_linear(r, tok, (size_t)B * n1, ct, net->up_w, net->up_b, D, up, SB_ACT_NONE);
			hd_linear(r, tokt, (size_t)B * T2, ct, net->upt_w, net->upt_b, D, upt, SB_ACT_NONE);
			tap_bcft(&tp, "channel_upsampler", up, Fr, T, D);
			tap_tokens(&tp, "channel_upsampler_t", upt, 1, T2, D, 1);
		}
		tap_tokens(&tp, "crosstransformer.in.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.in.1", upt, 1, T2, D, 1);
		hd_transformer(r, up, Fr, T, upt, T2, B);
		tap_tokens(&tp, "crosstransformer.0", up, Fr, T, D, 0);
		tap_tokens(&tp, "crosstransformer.1", upt, 1, T2, D, 1);
		if (cfg->bottom_channels) {
			hd_linear(r, up, (size_t)B * n1, D, net->down_w, net->down_b, ct, tok, SB_ACT_NONE);
			hd_linear(r, upt, (size_t)B * T2, D, net->downt_w, net->downt_b, ct, tokt, SB_ACT_NONE);
			tap_bcft(&tp, "channel_downsampler", tok, Fr, T, ct);
			tap_tokens(&tp, "channel_downsampler_t", tokt, 1, T2, ct, 1);
			give_back(r, up);
			give_back(r, upt);
		}
	}
	hd_dften_new(r, &x, B, Fr, ct, T);
	xt = buffer(r, (size_t)B * ct * T2);
	for (int b = 0; b < B; b++) {
		OP(r)->rows_tokens(r->p.x.d, sb_dv_at(tok, (size_t)b * n1 * ct), drow(&x, b, 0), Fr, ct,
		                   T, 1);
		OP(r)->transpose(r->p.x.d, sb_dv_at(tokt, (size_t)b * T2 * ct),
		                 sb_dv_at(xt, (size_t)b * ct * T2), T2, ct);
	}
	give_back(r, tok);
	give_back(r, tokt);

	for (int j = 0; j < HD_DEPTH; j++) {
		const int idx = HD_DEPTH - 1 - j;
		char name[32];
		dften nx;
		if (stopped(r))
			goto end;
		hd_dec_freq(r, &net->dec[j], &x, &e[idx], &nx);
		hd_dften_free(r, &x);
		hd_dften_free(r, &e[idx]);
		x = nx;
		snprintf(name, sizeof name, "decoder.%d.0", j);
		tap_ften(&tp, name, &x);
		sb_dv nt = buffer(r, (size_t)B * net->tdec[j].cout * tl[idx]);
		hd_dec_time(r, &net->tdec[j], xt, te[idx], tl[idx + 1], tl[idx], B, nt);
		give_back(r, xt);
		give_back(r, te[idx]);
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
		sb_dv work = buffer(r, (size_t)(x.C / 2) * T * HD_NFFT);
		for (int b = 0; b < B; b++) {
			const sb_dv o = sb_dv_at(xt, (size_t)b * seg_out), z = drow(&x, b, 0);
			const sb_dv s4 = sb_dv_at(nst, (size_t)4 * b);
			OP(r)->standardise(r->p.x.d, o, o, seg_out, sb_dv_at(s4, 2), 0.f, 1);
			OP(r)->standardise(r->p.x.d, z, z, (size_t)x.F * x.C * T, s4, 0.f, 1);
			OP(r)->istft(r->p.x.d, &og, z, x.C / 2, L, weight(r, net->window), iscale, 2, 2, o, L,
			             1, work);
		}
		give_back(r, work);
		if (pass_status(r) == SB_OK) {
			sb_resident_fetch(&r->p, out, xt, (size_t)B * seg_out); /* lands at the wait */
			sb_resident_drain(&r->p);
		}
	}
	give_back(r, nst);
	give_back(r, xt);
	hd_dften_free(r, &x);
end:
	/* a stopped pass returns without waiting for what it enqueued (resident.h: sb_resident_drain) */
	st = pass_status(r);
	if (st == SB_ERR_NOMEM)
		sb_log(r->p.log, SB_LOG_ERROR, "htdemucs: out of memory for a segment's activations");
	return st;
}
