/* One forward pass of an MDX23C over B chunks (mdx23c.h), all of it on the device through the
 * backend's operations: the chunks go up once, the stems come back once.
 *
 * Layout: rows [B][F][C][T] (chunk, frequency row of a subband, channel, frame) from the
 * subbands' spectrum on (models/rows_conv.h): a 3 x 3 convolution is three products over
 * consecutive padded rows, the time-distributed linears over frequency one product a chunk
 * ([F'][F] times [F][C T]), a strided convolution one product per output row over its input
 * rows with the frames deinterleaved first (and interleaved after, going up). */
#include "models/mdx23c/mdx23c.h"
#include "models/rows_conv.h"

#include <stdlib.h>
#include <string.h>

struct sb_mdx23c_on {
	sb_resident p;
	const sb_mdx23c *net;
};

#define OK(r) (sb_resident_status(&(r)->p) == SB_OK)
#define OP(r) if (OK(r)) (r)->p.o

sb_status sb_mdx23c_place(const sb_mdx23c *net, const sb_exec *dev, const sb_logger *log,
                          sb_mdx23c_on **out)
{
	*out = NULL;
	sb_mdx23c_on *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR_NOMEM;
	r->net = net;
	sb_status st = sb_resident_init(&r->p, &net->w, dev, log, "mdx23c");
	if (st != SB_OK) {
		free(r);
		return st;
	}
	*out = r;
	return SB_OK;
}

void sb_mdx23c_unplace(sb_mdx23c_on *r)
{
	if (!r)
		return;
	sb_resident_fini(&r->p);
	free(r);
}

void sb_mdx23c_on_stop(sb_mdx23c_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

static sb_dv W(sb_mdx23c_on *r, const float *host)
{
	return sb_resident_w(&r->p, host);
}

/* o = GELU(norm(x)) over rows [B][F][C][T] (InstanceNorm: a group a channel; GroupNorm<g>;
 * none: GELU alone) */
static void norm_act(sb_mdx23c_on *r, const mx_norm *n, sb_dv x, int B, int F, int C, int T,
                     sb_dv o)
{
	const sb_mdx23c_config *c = &r->net->cfg;
	const size_t all = (size_t)B * F * C * T;
	if (c->norm == SB_MDX_NORM_NONE) {
		OP(r)->copy(r->p.x.d, o, x, all);
		OP(r)->bias_cols(r->p.x.d, o, all, T, W(r, r->net->zeros), SB_ACT_GELU);
		return;
	}
	const int G = c->norm == SB_MDX_NORM_INSTANCE ? C : c->norm_groups;
	const sb_norm_geom g = {B, 1, C, G, F, T, (long)F * C * T, 0, T, (long)C * T};
	OP(r)->norm_groups(r->p.x.d, x, &g, W(r, n->w), W(r, n->b), SB_ACT_GELU, o);
}

/* a 1 x 1 convolution over every row: y = w x (+ y when acc) */
static void conv1x1(sb_mdx23c_on *r, const float *w, int ldw, sb_dv x, int B, int F, int ci,
                    int co, int T, int acc, sb_dv y)
{
	sb_rows_product(&r->p, co, T, ci, w, ldw, x, T, (long)ci * T, 0, acc, y, T, (long)co * T, 0,
	                B * F, 1, NULL);
}

/* a TFC-TDF stack over x [B][F][in_c][T] -> a new [B][F][c][T] */
static sb_dv tfc_tdf(sb_mdx23c_on *r, const mx_block *blk, sb_dv x, int B, int T)
{
	const sb_mdx23c *net = r->net;
	for (int i = 0; i < net->cfg.blocks && OK(r); i++) {
		const mx_block *b = &blk[i];
		const int ci = b->in_c, c = b->c, F = b->f, F2 = F / net->cfg.bottleneck;
		const size_t ny = (size_t)B * F * c * T;
		sb_dv s = sb_resident_a(&r->p, ny);
		conv1x1(r, b->shortcut, ci, x, B, F, ci, c, T, 0, s);
		sb_dv h = sb_resident_a(&r->p, (size_t)B * F * ci * T);
		norm_act(r, &b->n1, x, B, F, ci, T, h);
		sb_dv y = sb_resident_a(&r->p, ny);
		sb_rows_conv3x3(&r->p, h, B, F, ci, c, T, (const float *const *)b->conv1, NULL, y);
		sb_resident_r(&r->p, h);
		sb_resident_r(&r->p, x);
		/* the bottleneck over frequency, added to y */
		sb_dv h2 = sb_resident_a(&r->p, ny), t1 = sb_resident_a(&r->p, (size_t)B * F2 * c * T);
		norm_act(r, &b->n2, y, B, F, c, T, h2);
		sb_rows_product(&r->p, F2, c * T, F, b->l1, F, h2, c * T, (long)F * c * T, 0, 0, t1,
		                c * T, (long)F2 * c * T, 0, B, 1, NULL);
		norm_act(r, &b->n3, t1, B, F2, c, T, t1);
		sb_rows_product(&r->p, F, c * T, F2, b->l2, F2, t1, c * T, (long)F2 * c * T, 0, 1, y,
		                c * T, (long)F * c * T, 0, B, 1, NULL);
		sb_resident_r(&r->p, t1);
		norm_act(r, &b->n4, y, B, F, c, T, h2);
		sb_rows_conv3x3(&r->p, h2, B, F, c, c, T, (const float *const *)b->conv2, NULL, y);
		sb_resident_r(&r->p, h2);
		OP(r)->add(r->p.x.d, y, s, ny);
		sb_resident_r(&r->p, s);
		x = y;
	}
	return x;
}

/* the strided convolution down: x [B][F][c][T] -> [B][F / s1][c + g][T / s0] */
static sb_dv down(sb_mdx23c_on *r, const mx_scale *sc, sb_dv x, int B, int T)
{
	const sb_mdx23c_config *cf = &r->net->cfg;
	const int s0 = cf->scale[0], s1 = cf->scale[1], c = sc->c, F = sc->f, co = c + cf->growth;
	const int T2 = T / s0, F2 = F / s1;
	const size_t n = (size_t)B * F * c * T;
	sb_dv h = sb_resident_a(&r->p, n), hp = sb_resident_a(&r->p, n);
	norm_act(r, &sc->down_n, x, B, F, c, T, h);
	/* each row's frames as [u][T / s0], u < s0: an output row's inputs then lie in K order */
	const int dims[4] = {B * F * c, T2, s0, 1};
	const long os[4] = {T, 1, T2, 0};
	OP(r)->permute(r->p.x.d, h, dims, os, hp);
	sb_resident_r(&r->p, h);
	sb_dv y = sb_resident_a(&r->p, (size_t)B * F2 * co * T2);
	sb_rows_product(&r->p, co, T2, s1 * c * s0, sc->down, s1 * c * s0, hp, T2, (long)s1 * c * T,
	                (long)F * c * T, 0, y, T2, (long)co * T2, (long)F2 * co * T2, F2, B, NULL);
	sb_resident_r(&r->p, hp);
	return y;
}

/* the transposed convolution up: x [B][F][c + g][T] -> the first c channels of each row of
 * cat [B][F s1][2 c][T s0], the skip into the others */
static sb_dv up(sb_mdx23c_on *r, const mx_scale *sc, sb_dv x, sb_dv skip, int B, int T)
{
	const sb_mdx23c_config *cf = &r->net->cfg;
	const int s0 = cf->scale[0], s1 = cf->scale[1], c = sc->c, ci = c + cf->growth;
	const int Fi = sc->f / s1, Fo = sc->f, To = T * s0;
	sb_dv h = sb_resident_a(&r->p, (size_t)B * Fi * ci * T);
	norm_act(r, &sc->up_n, x, B, Fi, ci, T, h);
	sb_resident_r(&r->p, x);
	sb_dv t = sb_resident_a(&r->p, (size_t)B * Fo * c * To);
	const int M = s1 * c * s0;
	sb_rows_product(&r->p, M, T, ci, sc->up, ci, h, T, (long)ci * T, (long)Fi * ci * T, 0, t, T,
	                (long)M * T, (long)Fi * M * T, Fi, B, NULL);
	sb_resident_r(&r->p, h);
	sb_dv cat = sb_resident_a(&r->p, (size_t)B * Fo * 2 * c * To);
	const int dims[4] = {B * Fo, c, s0, T};
	const long os[4] = {2L * c * To, To, 1, s0};
	OP(r)->permute(r->p.x.d, t, dims, os, cat);
	sb_resident_r(&r->p, t);
	OP(r)->copy_rows(r->p.x.d, sb_dv_at(cat, (size_t)c * To), 2L * c * To, 0, skip,
	                 (long)c * To, 0, B * Fo, (long)c * To, 1);
	return cat;
}

sb_status sb_mdx23c_forward(sb_mdx23c_on *r, int B, const float *in, float *out)
{
	const sb_mdx23c *net = r->net;
	const sb_mdx23c_config *c = &net->cfg;
	const int S = net->S, T = net->T, fk = net->fk, dim_c = net->dim_c, dim_f = c->dim_f,
	          n = net->stems, ch = c->channels;
	const int64_t L = net->L;
	if (B < 1)
		return SB_ERR_INVALID;
	sb_status st = sb_resident_begin(&r->p);
	if (st != SB_OK)
		return st;
	sb_dv audio = sb_resident_a(&r->p, (size_t)B * S * L);
	if (OK(r))
		r->p.x.be->upload(r->p.x.d, audio, in, (size_t)B * S * L);
	/* torch.stft (center, reflect, Hann) of every channel of every chunk, channels first:
	 * [B][S][re, im][dim_f][T]; then the subbands' rows [B][fk][dim_c][T], the channel of
	 * (s, re / im, subband) (2 s + ri) k + subband (cac2cws) */
	const size_t nx = (size_t)B * dim_c * fk * T;
	const sb_stft g = {c->n_fft, c->hop, T, dim_f, c->n_fft / 2, 2L * dim_f * T, T, 1,
	                   (long)dim_f * T};
	sb_dv spec = sb_resident_a(&r->p, nx), mix = sb_resident_a(&r->p, nx);
	OP(r)->stft(r->p.x.d, &g, audio, L, B * S, L, W(r, net->window), 1.f, spec);
	sb_resident_r(&r->p, audio);
	const int to_rows[4] = {B, dim_c, fk, T};
	const long os_rows[4] = {(long)fk * dim_c * T, T, (long)dim_c * T, 1};
	OP(r)->permute(r->p.x.d, spec, to_rows, os_rows, mix);
	sb_resident_r(&r->p, spec);
	const size_t nc = (size_t)B * fk * ch * T;
	sb_dv first = sb_resident_a(&r->p, nc), x = sb_resident_a(&r->p, nc);
	conv1x1(r, net->first, dim_c, mix, B, fk, dim_c, ch, T, 0, first);
	OP(r)->copy(r->p.x.d, x, first, nc);
	/* the U-Net */
	sb_dv skip[SB_MDX_MAX_SCALES];
	int Tl = T;
	for (int i = 0; i < c->num_scales && OK(r); i++) {
		x = tfc_tdf(r, net->sc[i].enc, x, B, Tl);
		skip[i] = x;
		x = down(r, &net->sc[i], x, B, Tl);
		Tl /= c->scale[0];
	}
	x = tfc_tdf(r, net->bottleneck, x, B, Tl);
	for (int i = c->num_scales - 1; i >= 0 && OK(r); i--) {
		x = up(r, &net->sc[i], x, skip[i], B, Tl);
		sb_resident_r(&r->p, skip[i]);
		Tl *= c->scale[0];
		x = tfc_tdf(r, net->sc[i].dec, x, B, Tl);
	}
	/* x times the first convolution's output; final_conv over [mix, x] */
	OP(r)->mul(r->p.x.d, x, first, nc);
	sb_resident_r(&r->p, first);
	sb_dv h = sb_resident_a(&r->p, nc);
	conv1x1(r, net->final0, ch + dim_c, mix, B, fk, dim_c, ch, T, 0, h);
	conv1x1(r, net->final0 + dim_c, ch + dim_c, x, B, fk, ch, ch, T, 1, h);
	sb_resident_r(&r->p, x);
	sb_resident_r(&r->p, mix);
	OP(r)->bias_cols(r->p.x.d, h, nc, T, W(r, net->zeros), SB_ACT_GELU);
	const size_t no = (size_t)B * fk * n * dim_c * T;
	sb_dv y = sb_resident_a(&r->p, no), yc = sb_resident_a(&r->p, no);
	conv1x1(r, net->final2, ch, h, B, fk, ch, n * dim_c, T, 0, y);
	sb_resident_r(&r->p, h);
	/* back to channels first: [B][n][S][re, im][dim_f][T] (cws2cac), then the inverse STFT
	 * of each (chunk, stem, audio channel), the bins from dim_f on zero */
	const int to_chan[4] = {B, fk, n * dim_c, T};
	const long os_chan[4] = {(long)n * dim_c * fk * T, T, (long)fk * T, 1};
	OP(r)->permute(r->p.x.d, y, to_chan, os_chan, yc);
	sb_resident_r(&r->p, y);
	const int nq = B * n * S;
	sb_dv o = sb_resident_a(&r->p, (size_t)nq * L);
	sb_dv work = sb_resident_a(&r->p, (size_t)nq * T * c->n_fft);
	OP(r)->istft(r->p.x.d, &g, yc, nq, L, W(r, net->window), 1.f / (float)c->n_fft, 0, 0, o, L,
	             0, work);
	/* the stems read back at the pass's one wait (resident.h: sb_resident_fetch) */
	sb_resident_fetch(&r->p, out, o, (size_t)nq * L);
	sb_resident_pass pass = sb_resident_end(&r->p);
	return sb_resident_wait(&r->p, &pass);
}
