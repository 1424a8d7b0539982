/* A converted RoFormer: config from the metadata, tensors checked against it and read as F32
 * into the layouts the forward pass uses (roformer.h), the tables (bands, rotary angles, the
 * STFT window and plans). */
#include "models/demucs/safetensors.h"
#include "models/roformer/roformer.h"
#include "models/weights_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading ---- */

static float *own(sb_roformer *net, size_t n)
{
	return sb_weights_new(&net->w, n);
}

void sb_roformer_free(sb_roformer *net)
{
	if (!net)
		return;
	sb_weights_free(&net->w);
	free(net->din);
	free(net->off);
	free(net->src);
	free(net->split_w);
	free(net->layers);
	free(net->tnorm);
	free(net->mask);
	free(net->group);
	free(net);
}

typedef struct {
	const sb_safetensors *st;
	const char *name;
	const sb_logger *log;
	sb_status st_;
} rdr;

/* reads tensor 'tname' (shape a, or a x b) into dst; the first failure is kept */
static void rd(rdr *r, const char *tname, int64_t a, int64_t b, float *dst)
{
	if (r->st_ != SB_OK)
		return;
	const int64_t shape[2] = {a, b};
	r->st_ = sb_safetensors_read_f32(r->st, tname, shape, b ? 2 : 1, dst, r->name, r->log);
}

/* stored: the time and frequency transformers' rotary frequencies from the checkpoint (NULL:
 * computed as rotary-embedding-torch initialises them) */
static sb_status tables(sb_roformer *net, const float *const stored[2])
{
	const sb_rf_config *c = &net->cfg;
	const int hd = c->dim_head;
	net->frames = (int)(c->m.chunk_size / c->hop) + 1;
	net->rope_t = own(net, (size_t)net->frames * hd);
	net->rope_f = own(net, (size_t)net->nb * hd);
	net->window = own(net, (size_t)c->n_fft);
	if (!net->rope_t || !net->rope_f || !net->window)
		return SB_ERR_NOMEM;
	/* rotary-embedding-torch: inverse frequencies 1 / 10000^(2j / hd) in float32, angles
	 * position x frequency in float32 */
	for (int j = 0; j < hd / 2; j++) {
		const float init = (float)(1.0 / pow(10000.0, (double)(2 * j) / hd));
		const float frt = stored[0] ? stored[0][j] : init, frf = stored[1] ? stored[1][j] : init;
		for (int p = 0; p < net->frames; p++) {
			const float a = (float)p * frt;
			net->rope_t[(size_t)p * hd + 2 * j] = cosf(a);
			net->rope_t[(size_t)p * hd + 2 * j + 1] = sinf(a);
		}
		for (int p = 0; p < net->nb; p++) {
			const float a = (float)p * frf;
			net->rope_f[(size_t)p * hd + 2 * j] = cosf(a);
			net->rope_f[(size_t)p * hd + 2 * j + 1] = sinf(a);
		}
	}
	/* torch.hann_window(win_length) (periodic), zero-padded to n_fft and centred, as
	 * torch.stft does */
	const int lpad = (c->n_fft - c->win) / 2;
	for (int i = 0; i < c->win; i++)
		net->window[lpad + i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / c->win));
	return SB_OK;
}

/* the band split's gather and the masks' way back as the gather operation's tables */
static sb_status gather_tables(sb_roformer *net)
{
	const int total = net->total, nv = net->bins * net->ch;
	net->band_ptr = own(net, (size_t)total + 1);
	net->band_idx = own(net, (size_t)total);
	net->ones = own(net, (size_t)total);
	net->mask_ptr = own(net, 2 * (size_t)nv + 1);
	net->mask_idx = own(net, (size_t)total);
	net->mask_w = own(net, 2 * (size_t)nv);
	if (!net->band_ptr || !net->band_idx || !net->ones || !net->mask_ptr || !net->mask_idx ||
	    !net->mask_w)
		return SB_ERR_NOMEM;
	for (int j = 0; j < total; j++) {
		net->band_ptr[j] = (float)j;
		net->band_idx[j] = (float)(2 * net->src[j / 2] + j % 2);
		net->ones[j] = 1.f;
	}
	net->band_ptr[total] = (float)total;
	/* value v (f ch + s) takes the mask columns 2 q (re) and 2 q + 1 (im) of every q with
	 * src[q] = v, in the order of q */
	int p = 0;
	for (int v = 0; v < nv; v++) {
		for (int ri = 0; ri < 2; ri++) {
			net->mask_ptr[2 * v + ri] = (float)p;
			for (int q = 0; q < total / 2; q++)
				if (net->src[q] == v)
					net->mask_idx[p++] = (float)(2 * q + ri);
			const int dc = v / net->ch == 0 && net->cfg.zero_dc;
			net->mask_w[2 * v + ri] = dc ? 0.f : net->inv_count[v];
		}
	}
	net->mask_ptr[2 * nv] = (float)p;
	return SB_OK;
}

/* bands: widths, offsets, the gathered values' sources and the overlap counts */
static sb_status bands(sb_roformer *net)
{
	const sb_rf_config *c = &net->cfg;
	const int ch = net->ch, bins = net->bins, nb = net->nb;
	net->din = calloc((size_t)nb, sizeof(int));
	net->off = calloc((size_t)nb, sizeof(int));
	net->inv_count = own(net, (size_t)bins * ch);
	unsigned char *in = calloc((size_t)nb * bins, 1);
	if (!net->din || !net->off || !net->inv_count || !in) {
		free(in);
		return SB_ERR_NOMEM;
	}
	if (c->family == SB_RF_BS) {
		for (int k = 0, f = 0; k < nb; f += c->freqs_per_band[k], k++)
			memset(in + (size_t)k * bins + f, 1, (size_t)c->freqs_per_band[k]);
	} else if (sb_rf_mel_bands(c->sample_rate, c->n_fft, nb, in) != SB_OK) {
		free(in);
		return SB_ERR_NOMEM;
	}
	int total = 0;
	for (int k = 0; k < nb; k++) {
		int n = 0;
		for (int f = 0; f < bins; f++)
			n += in[(size_t)k * bins + f];
		net->off[k] = total;
		net->din[k] = 2 * ch * n;
		total += net->din[k];
	}
	net->total = total;
	net->src = malloc(sizeof(int) * (size_t)(total / 2 + 1));
	if (!net->src) {
		free(in);
		return SB_ERR_NOMEM;
	}
	int j = 0;
	for (int f = 0; f < bins; f++)
		for (int s = 0; s < ch; s++)
			net->inv_count[f * ch + s] = 0;
	for (int k = 0; k < nb; k++)
		for (int f = 0; f < bins; f++)
			if (in[(size_t)k * bins + f])
				for (int s = 0; s < ch; s++) {
					net->src[j++] = f * ch + s;
					net->inv_count[f * ch + s] += 1;
				}
	/* a value no band covers keeps no mask (MSST divides 0 by the count clamped to 1e-8) */
	for (int i = 0; i < bins * ch; i++)
		net->inv_count[i] = net->inv_count[i] > 0 ? 1.f / net->inv_count[i] : 0.f;
	free(in);
	return gather_tables(net);
}

sb_status sb_roformer_load(const char *path, const char *name, const sb_logger *log,
                           sb_roformer **out)
{
	*out = NULL;
	sb_safetensors *st;
	const char *yaml;
	sb_status s = sb_wload_open_config(path, name, "RoFormer", log, &st, &yaml);
	if (s != SB_OK)
		return s;
	sb_roformer *net = calloc(1, sizeof *net);
	if (!net) {
		sb_safetensors_close(st);
		return SB_ERR_NOMEM;
	}
	char err[512];
	s = sb_rf_config_parse(yaml, strlen(yaml), &net->cfg, err, sizeof err);
	if (s != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "%s: its configuration: %s", name, err);
		goto fail;
	}
	const sb_rf_config *c = &net->cfg;
	net->ch = c->stereo ? 2 : 1;
	net->bins = c->n_fft / 2 + 1;
	net->nb = c->n_bands;
	net->inner = c->heads * c->dim_head;
	net->hidden = 4 * c->dim;
	net->mlp_hidden = c->mlp_mult * c->dim;
	net->n_stems = c->num_stems;
	s = bands(net);
	float ft[512], ff[512];
	const float *stored[2] = {NULL, NULL};
	if (s == SB_OK && c->dim_head / 2 <= 512 &&
	    sb_safetensors_find(st, "layers.0.0.layers.0.0.rotary_embed.freqs")) {
		const int64_t shape[1] = {c->dim_head / 2};
		s = sb_safetensors_read_f32(st, "layers.0.0.layers.0.0.rotary_embed.freqs", shape, 1, ft,
		                            name, log);
		if (s == SB_OK)
			s = sb_safetensors_read_f32(st, "layers.0.1.layers.0.0.rotary_embed.freqs", shape, 1,
			                            ff, name, log);
		stored[0] = ft;
		stored[1] = ff;
	}
	if (s == SB_OK)
		s = tables(net, stored);
	if (s != SB_OK)
		goto fail;
	const int dim = c->dim, nb = net->nb, inner = net->inner, H = c->heads;
	const int gates = sb_safetensors_find(st, "layers.0.0.layers.0.0.to_gates.weight") != NULL;
	const int freqs = sb_safetensors_find(st, "layers.0.0.layers.0.0.rotary_embed.freqs") != NULL;
	rdr r = {st, name, log, SB_OK};
	char tn[160];
	/* consecutive bands of the same width form groups (of up to RF_GROUP_MAX) whose band
	 * split's and mask estimators' weights lie back to back, so that one strided-batched
	 * product runs a whole group's layer */
	net->group = calloc((size_t)nb + 1, sizeof *net->group);
	if (!net->group) {
		s = SB_ERR_NOMEM;
		goto fail;
	}
	net->n_groups = 0;
	for (int k = 0; k < nb;) {
		int g = 1;
		while (k + g < nb && g < RF_GROUP_MAX && net->din[k + g] == net->din[k])
			g++;
		net->group[net->n_groups++] = (rf_group){k, g};
		k += g;
	}
	/* band split */
	net->split_norm = own(net, (size_t)net->total);
	net->band_seg = own(net, (size_t)nb + 1);
	net->split_b = own(net, (size_t)nb * dim);
	net->split_w = calloc((size_t)nb, sizeof *net->split_w);
	if (!net->split_norm || !net->band_seg || !net->split_b || !net->split_w) {
		s = SB_ERR_NOMEM;
		goto fail;
	}
	for (int k = 0; k < nb; k++)
		net->band_seg[k] = (float)net->off[k];
	net->band_seg[nb] = (float)net->total;
	for (int gi = 0; gi < net->n_groups; gi++) {
		const rf_group *gr = &net->group[gi];
		const size_t one = (size_t)dim * net->din[gr->k0];
		float *w = own(net, (size_t)gr->n * one);
		if (!w) {
			s = SB_ERR_NOMEM;
			goto fail;
		}
		for (int j = 0; j < gr->n; j++)
			net->split_w[gr->k0 + j] = w + (size_t)j * one;
	}
	for (int k = 0; k < nb && r.st_ == SB_OK; k++) {
		snprintf(tn, sizeof tn, "band_split.to_features.%d.0.gamma", k);
		rd(&r, tn, net->din[k], 0, net->split_norm + net->off[k]);
		snprintf(tn, sizeof tn, "band_split.to_features.%d.1.weight", k);
		rd(&r, tn, dim, net->din[k], net->split_w[k]);
		snprintf(tn, sizeof tn, "band_split.to_features.%d.1.bias", k);
		rd(&r, tn, dim, 0, net->split_b + (size_t)k * dim);
	}
	/* transformers */
	const int per = c->time_depth + c->freq_depth, nl = c->depth * per;
	net->layers = calloc((size_t)nl, sizeof *net->layers);
	if (!net->layers) {
		s = SB_ERR_NOMEM;
		goto fail;
	}
	for (int d = 0, li = 0; d < c->depth; d++)
		for (int j = 0; j < 2; j++)
			for (int l = 0; l < (j ? c->freq_depth : c->time_depth) && r.st_ == SB_OK; l++, li++) {
				rf_layer *L = &net->layers[li];
				const int rows = 3 * inner + H;
				L->norm = own(net, (size_t)dim);
				L->qkvg = own(net, (size_t)rows * dim);
				L->qkvg_b = own(net, (size_t)rows);
				L->out = own(net, (size_t)dim * inner);
				L->ff_norm = own(net, (size_t)dim);
				L->ff1 = own(net, (size_t)net->hidden * dim);
				L->ff1_b = own(net, (size_t)net->hidden);
				L->ff2 = own(net, (size_t)dim * net->hidden);
				L->ff2_b = own(net, (size_t)dim);
				if (!L->norm || !L->qkvg || !L->qkvg_b || !L->out || !L->ff_norm || !L->ff1 ||
				    !L->ff1_b || !L->ff2 || !L->ff2_b) {
					s = SB_ERR_NOMEM;
					goto fail;
				}
				char p[64];
				snprintf(p, sizeof p, "layers.%d.%d.layers.%d.", d, j, l);
#define N(suffix) (snprintf(tn, sizeof tn, "%s%s", p, suffix), tn)
				rd(&r, N("0.norm.gamma"), dim, 0, L->norm);
				rd(&r, N("0.to_qkv.weight"), 3 * inner, dim, L->qkvg);
				if (gates) {
					rd(&r, N("0.to_gates.weight"), H, dim, L->qkvg + (size_t)3 * inner * dim);
					rd(&r, N("0.to_gates.bias"), H, 0, L->qkvg_b + 3 * inner);
				} /* the versions without gates (older checkpoints) compute none */
				rd(&r, N("0.to_out.0.weight"), dim, inner, L->out);
				rd(&r, N("1.net.0.gamma"), dim, 0, L->ff_norm);
				rd(&r, N("1.net.1.weight"), net->hidden, dim, L->ff1);
				rd(&r, N("1.net.1.bias"), net->hidden, 0, L->ff1_b);
				rd(&r, N("1.net.4.weight"), dim, net->hidden, L->ff2);
				rd(&r, N("1.net.4.bias"), dim, 0, L->ff2_b);
#undef N
			}
	if (c->family == SB_RF_MEL) {
		net->tnorm = calloc((size_t)c->depth * 2, sizeof *net->tnorm);
		for (int d = 0; net->tnorm && d < 2 * c->depth; d++) {
			if (!(net->tnorm[d] = own(net, (size_t)dim))) {
				s = SB_ERR_NOMEM;
				goto fail;
			}
			snprintf(tn, sizeof tn, "layers.%d.%d.norm.gamma", d / 2, d % 2);
			rd(&r, tn, dim, 0, net->tnorm[d]);
		}
		if (!net->tnorm) {
			s = SB_ERR_NOMEM;
			goto fail;
		}
	}
	if (c->family == SB_RF_BS) {
		net->final_norm = own(net, (size_t)dim);
		if (!net->final_norm) {
			s = SB_ERR_NOMEM;
			goto fail;
		}
		rd(&r, "final_norm.gamma", dim, 0, net->final_norm);
	}
	/* mask estimators, by the groups above */
	net->mask = calloc((size_t)net->n_stems * nb, sizeof *net->mask);
	if (!net->mask) {
		s = SB_ERR_NOMEM;
		goto fail;
	}
	const int nml = sb_rf_mask_layers(c);
	for (int sx = 0; sx < net->n_stems; sx++)
		for (int gi = 0; gi < net->n_groups && r.st_ == SB_OK; gi++) {
			const rf_group *gr = &net->group[gi];
			for (int l = 0; l < nml; l++) {
				const int in = l ? net->mlp_hidden : dim,
				          o = l == nml - 1 ? 2 * net->din[gr->k0] : net->mlp_hidden;
				float *w = own(net, (size_t)gr->n * o * in), *b = own(net, (size_t)gr->n * o);
				if (!w || !b) {
					s = SB_ERR_NOMEM;
					goto fail;
				}
				for (int j = 0; j < gr->n; j++) {
					const int k = gr->k0 + j;
					rf_mlp *m = &net->mask[(size_t)sx * nb + k];
					m->w[l] = w + (size_t)j * o * in;
					m->b[l] = b + (size_t)j * o;
					snprintf(tn, sizeof tn, "mask_estimators.%d.to_freqs.%d.0.%d.weight", sx, k,
					         2 * l);
					rd(&r, tn, o, in, m->w[l]);
					snprintf(tn, sizeof tn, "mask_estimators.%d.to_freqs.%d.0.%d.bias", sx, k,
					         2 * l);
					rd(&r, tn, o, 0, m->b[l]);
				}
			}
		}
	s = r.st_;
	if (s != SB_OK)
		goto fail;
	/* every tensor of the file is one the config explains */
	const int want = sb_roformer_tensors(c, (gates ? SB_RF_GATES : 0) |
	                                               (freqs ? SB_RF_ROPE_FREQS : 0), NULL, NULL);
	if (want != sb_safetensors_count(st)) {
		sb_log(log, SB_LOG_ERROR, "%s: %s holds %d tensors where its configuration makes %d: "
		       "the checkpoint and the configuration do not belong together", name, path,
		       sb_safetensors_count(st), want);
		s = SB_ERR_MODEL;
		goto fail;
	}
	for (int i = 0; i < sb_safetensors_count(st); i++)
		net->params += sb_safetensors_at(st, i)->numel;
	net->gates = gates;
	sb_safetensors_close(st);
	*out = net;
	return SB_OK;
fail:
	sb_safetensors_close(st);
	sb_roformer_free(net);
	return s == SB_OK ? SB_ERR_MODEL : s;
}
