/* A converted MDX23C: the config from the metadata, every tensor read as F32 (its shape
 * checked) and laid out for the products of the forward pass (mdx23c.h), and the window. */
#include "models/mdx23c/mdx23c.h"
#include "models/weights_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_mdx23c_free(sb_mdx23c *net)
{
	if (!net)
		return;
	sb_weights_free(&net->w);
	for (int i = 0; net->sc && i < net->cfg.num_scales; i++) {
		free(net->sc[i].enc);
		free(net->sc[i].dec);
	}
	free(net->sc);
	free(net->bottleneck);
	free(net);
}

/* Sequential(norm, act, ...)'s norm at index 0 of pre, where the config has one */
static void norm(sb_wload *l, const sb_mdx23c *net, int ch, const char *pre, mx_norm *n)
{
	if (net->cfg.norm == SB_MDX_NORM_NONE)
		return;
	n->w = sb_wload_vec(l, ch, "%s.weight", pre);
	n->b = sb_wload_vec(l, ch, "%s.bias", pre);
}

/* a Conv2d [co][ci][3][3] over (time, frequency) as three products, one per time tap u, each
 * over three consecutive rows: out[u][o][v][i] = w[o][i][u][v] */
static void conv3x3(sb_wload *l, const float *w, int co, int ci, float *out[3])
{
	for (int u = 0; u < 3; u++) {
		if (!(out[u] = sb_wload_own(l, (size_t)co * 3 * ci)) || !w)
			return;
		for (int o = 0; o < co; o++)
			for (int v = 0; v < 3; v++)
				for (int i = 0; i < ci; i++)
					out[u][((size_t)o * 3 + v) * ci + i] = w[(((size_t)o * ci + i) * 3 + u) * 3 + v];
	}
}

/* a 1 x 1 convolution's [co][ci][1][1] */
static float *conv1x1(sb_wload *l, int co, int ci, const char *fmt, const char *pre)
{
	float *w = sb_wload_raw(l, 4, co, ci, 1, 1, fmt, pre);
	float *o = sb_wload_own(l, (size_t)co * ci);
	if (w && o)
		memcpy(o, w, sizeof(float) * (size_t)co * ci);
	free(w);
	return o;
}

static void tfc_tdf(sb_wload *l, const sb_mdx23c *net, const char *pre, int in_c, int c, int f,
                    mx_block *blk)
{
	const int bn = net->cfg.bottleneck;
	char p[200];
	for (int i = 0; i < net->cfg.blocks && l->s == SB_OK; i++) {
		mx_block *b = &blk[i];
		b->in_c = in_c;
		b->c = c;
		b->f = f;
		snprintf(p, sizeof p, "%s.blocks.%d.tfc1.0", pre, i);
		norm(l, net, in_c, p, &b->n1);
		float *w = sb_wload_raw(l, 4, c, in_c, 3, 3, "%s.blocks.%d.tfc1.2.weight", pre, i);
		conv3x3(l, w, c, in_c, b->conv1);
		free(w);
		snprintf(p, sizeof p, "%s.blocks.%d.tdf.0", pre, i);
		norm(l, net, c, p, &b->n2);
		w = sb_wload_raw(l, 2, f / bn, f, 0, 0, "%s.blocks.%d.tdf.2.weight", pre, i);
		if ((b->l1 = sb_wload_own(l, (size_t)(f / bn) * f)) && w)
			memcpy(b->l1, w, sizeof(float) * (size_t)(f / bn) * f);
		free(w);
		snprintf(p, sizeof p, "%s.blocks.%d.tdf.3", pre, i);
		norm(l, net, c, p, &b->n3);
		w = sb_wload_raw(l, 2, f, f / bn, 0, 0, "%s.blocks.%d.tdf.5.weight", pre, i);
		if ((b->l2 = sb_wload_own(l, (size_t)(f / bn) * f)) && w)
			memcpy(b->l2, w, sizeof(float) * (size_t)(f / bn) * f);
		free(w);
		snprintf(p, sizeof p, "%s.blocks.%d.tfc2.0", pre, i);
		norm(l, net, c, p, &b->n4);
		w = sb_wload_raw(l, 4, c, c, 3, 3, "%s.blocks.%d.tfc2.2.weight", pre, i);
		conv3x3(l, w, c, c, b->conv2);
		free(w);
		snprintf(p, sizeof p, "%s.blocks.%d", pre, i);
		b->shortcut = conv1x1(l, c, in_c, "%s.shortcut.weight", p);
		in_c = c;
	}
}

/* the scales' strided convolutions: down [co][(v, ci, u)], up [(v, co, u)][ci] */
static void strided(sb_wload *l, const sb_mdx23c *net, int i, mx_scale *s)
{
	const int s0 = net->cfg.scale[0], s1 = net->cfg.scale[1], c = s->c, g = net->cfg.growth;
	char p[96];
	snprintf(p, sizeof p, "encoder_blocks.%d.downscale.conv.0", i);
	norm(l, net, c, p, &s->down_n);
	float *w = sb_wload_raw(l, 4, c + g, c, s0, s1, "encoder_blocks.%d.downscale.conv.2.weight", i);
	if ((s->down = sb_wload_own(l, (size_t)(c + g) * c * s0 * s1)) && w)
		for (int o = 0; o < c + g; o++)
			for (int q = 0; q < c; q++)
				for (int u = 0; u < s0; u++)
					for (int v = 0; v < s1; v++)
						s->down[(size_t)o * s1 * c * s0 + ((size_t)v * c + q) * s0 + u] =
						    w[(((size_t)o * c + q) * s0 + u) * s1 + v];
	free(w);
	/* the decoder's block i up-samples from the scale below this one's mirror */
	const int j = net->cfg.num_scales - 1 - i, cin = net->sc[j].c + g, cout = net->sc[j].c;
	snprintf(p, sizeof p, "decoder_blocks.%d.upscale.conv.0", i);
	norm(l, net, cin, p, &net->sc[j].up_n);
	w = sb_wload_raw(l, 4, cin, cout, s0, s1, "decoder_blocks.%d.upscale.conv.2.weight", i);
	float *up = sb_wload_own(l, (size_t)cin * cout * s0 * s1);
	net->sc[j].up = up;
	if (up && w)
		for (int q = 0; q < cin; q++)
			for (int o = 0; o < cout; o++)
				for (int u = 0; u < s0; u++)
					for (int v = 0; v < s1; v++)
						up[(((size_t)v * cout + o) * s0 + u) * cin + q] =
						    w[(((size_t)q * cout + o) * s0 + u) * s1 + v];
	free(w);
}

static sb_status shapes(sb_mdx23c *net)
{
	const sb_mdx23c_config *c = &net->cfg;
	net->S = c->m.num_channels;
	net->dim_c = c->num_subbands * net->S * 2;
	net->fk = c->dim_f / c->num_subbands;
	net->T = c->frames;
	net->L = c->m.chunk_size;
	net->stems = c->stems;
	const int n = c->num_scales;
	net->sc = calloc((size_t)(n ? n : 1), sizeof *net->sc);
	net->bottleneck = calloc((size_t)c->blocks, sizeof *net->bottleneck);
	if (!net->sc || !net->bottleneck)
		return SB_ERR_NOMEM;
	int ch = c->channels, f = net->fk, T = net->T;
	double most = 2.0 * net->fk * net->T * net->dim_c, big = 0;
	for (int i = 0; i < n; i++) {
		net->sc[i].c = ch;
		net->sc[i].f = f;
		net->sc[i].enc = calloc((size_t)c->blocks, sizeof(mx_block));
		net->sc[i].dec = calloc((size_t)c->blocks, sizeof(mx_block));
		if (!net->sc[i].enc || !net->sc[i].dec)
			return SB_ERR_NOMEM;
		/* the skip, and a block's buffers (the widest: the decoder's concatenation) */
		const double y = (double)f * ch * T;
		most += y + 8.0 * y;
		big = 2 * y > big ? 2 * y : big;
		f /= c->scale[1];
		T /= c->scale[0];
		ch += c->growth;
	}
	net->bottom_c = ch;
	net->bottom_f = f;
	net->pass_floats = most + 6.0 * f * ch * T + (double)net->stems * net->S * net->T * c->n_fft;
	net->largest_floats = big > (double)net->stems * net->S * net->T * c->n_fft
	                          ? big : (double)net->stems * net->S * net->T * c->n_fft;
	return SB_OK;
}

sb_status sb_mdx23c_load(const char *path, const char *name, const sb_logger *log,
                         sb_mdx23c **out)
{
	*out = NULL;
	sb_safetensors *st;
	const char *yaml;
	sb_status s = sb_wload_open_config(path, name, "MDX23C", log, &st, &yaml);
	if (s != SB_OK)
		return s;
	sb_mdx23c *net = calloc(1, sizeof *net);
	if (!net) {
		sb_safetensors_close(st);
		return SB_ERR_NOMEM;
	}
	char err[512];
	s = sb_mdx23c_config_parse(yaml, strlen(yaml), &net->cfg, err, sizeof err);
	if (s != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "%s: its configuration: %s", name, err);
		goto fail;
	}
	if ((s = shapes(net)) != SB_OK)
		goto fail;
	const sb_mdx23c_config *c = &net->cfg;
	sb_wload l = {st, &net->w, name, log, SB_OK, ""};
	const int dim_c = net->dim_c;
	net->first = conv1x1(&l, c->channels, dim_c, "%s.weight", "first_conv");
	char p[96];
	for (int i = 0; i < c->num_scales && l.s == SB_OK; i++) {
		mx_scale *sc = &net->sc[i];
		snprintf(p, sizeof p, "encoder_blocks.%d.tfc_tdf", i);
		tfc_tdf(&l, net, p, sc->c, sc->c, sc->f, sc->enc);
		strided(&l, net, i, sc);
		/* decoder block i works at scale num_scales - 1 - i */
		const mx_scale *m = &net->sc[c->num_scales - 1 - i];
		snprintf(p, sizeof p, "decoder_blocks.%d.tfc_tdf", i);
		tfc_tdf(&l, net, p, 2 * m->c, m->c, m->f, net->sc[c->num_scales - 1 - i].dec);
	}
	tfc_tdf(&l, net, "bottleneck_block", net->bottom_c, net->bottom_c, net->bottom_f,
	        net->bottleneck);
	const int ch = c->channels;
	net->final0 = conv1x1(&l, ch, ch + dim_c, "%s.weight", "final_conv.0");
	net->final2 = conv1x1(&l, net->stems * dim_c, ch, "%s.weight", "final_conv.2");
	net->window = sb_wload_own(&l, (size_t)c->n_fft);
	net->zeros = sb_wload_own(&l, (size_t)net->T);
	/* torch.hann_window(n_fft) (periodic) */
	for (int i = 0; net->window && i < c->n_fft; i++)
		net->window[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / c->n_fft));
	s = l.s;
	if (s != SB_OK)
		goto fail;
	const int want = sb_mdx23c_tensors(c, NULL, NULL);
	if (want != sb_safetensors_count(st)) {
		sb_log(log, SB_LOG_ERROR, "%s: %s holds %d tensors where its configuration makes %d: "
		       "the checkpoint and the configuration do not belong together", name, path,
		       sb_safetensors_count(st), want);
		s = SB_ERR_MODEL;
		goto fail;
	}
	for (int i = 0; i < sb_safetensors_count(st); i++)
		net->params += sb_safetensors_at(st, i)->numel;
	sb_safetensors_close(st);
	*out = net;
	return SB_OK;
fail:
	sb_safetensors_close(st);
	sb_mdx23c_free(net);
	return s == SB_OK ? SB_ERR_MODEL : s;
}
