/* A converted SCNet: the config from the metadata, every tensor read as F32 (its shape checked)
 * and laid out for the products of the forward pass (scnet.h), and the tables: the window, the
 * DFT along time as matrices. */
#include "models/scnet/scnet.h"
#include "models/weights_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_scnet_free(sb_scnet *net)
{
	if (!net)
		return;
	sb_weights_free(&net->w);
	for (int i = 0; net->lv && i < net->levels; i++)
		for (int b = 0; b < 3; b++)
			free(net->lv[i].layers[b]);
	free(net->lv);
	free(net->dp);
	free(net);
}

/* a Conv2d's [co][ci][3][3] (kernel over rows u, then time v) as three products, one per time
 * tap, each over three consecutive rows: out[v][o][u ci_n + i] = w[o][i][u][v] + (fold: the
 * weight of input channel i + ci_n, the same rows repeated) */
static void conv3x3(sb_wload *l, const float *w, int co, int ci, int fold, float *out[3])
{
	const int ci_n = fold ? ci / 2 : ci;
	for (int v = 0; v < 3; v++) {
		if (!(out[v] = sb_wload_own(l, (size_t)co * 3 * ci_n)) || !w)
			return;
		for (int o = 0; o < co; o++)
			for (int u = 0; u < 3; u++)
				for (int i = 0; i < ci_n; i++) {
					float s = w[(((size_t)o * ci + i) * 3 + u) * 3 + v];
					if (fold)
						s += w[(((size_t)o * ci + i + ci_n) * 3 + u) * 3 + v];
					out[v][((size_t)o * 3 + u) * ci_n + i] = s;
				}
	}
}

static void load_level(sb_wload *l, sb_scnet *net, int i)
{
	const sb_scnet_config *c = &net->cfg;
	sc_level *lv = &net->lv[i];
	const int ci = lv->ci, co = lv->co, h = lv->h, K = c->conv_kernel;
	for (int b = 0; b < 3 && l->s == SB_OK; b++) {
		const int k = c->band_kernel[b];
		float *w = sb_wload_raw(l, 4, co, ci, k, 1, "encoder.%d.SDlayer.convs.%d.weight", i, b);
		if ((lv->down_w[b] = sb_wload_own(l, (size_t)co * k * ci)) && w)
			for (int o = 0; o < co; o++)
				for (int u = 0; u < k; u++)
					for (int q = 0; q < ci; q++)
						lv->down_w[b][((size_t)o * k + u) * ci + q] = w[((size_t)o * ci + q) * k + u];
		free(w);
		lv->down_b[b] = sb_wload_vec(l, co, "encoder.%d.SDlayer.convs.%d.bias", i, b);
		const int depth = c->conv_depths[b];
		lv->layers[b] = calloc((size_t)(depth ? depth : 1), sizeof(sc_conv_layer));
		if (!lv->layers[b] && l->s == SB_OK)
			l->s = SB_ERR_NOMEM;
		for (int d = 0; d < depth && l->s == SB_OK; d++) {
			sc_conv_layer *L = &lv->layers[b][d];
			const char *p = "encoder.%d.conv_modules.%d.layers.%d.";
			char pre[96];
			snprintf(pre, sizeof pre, p, i, b, d);
			L->n0w = sb_wload_vec(l, co, "%s0.weight", pre);
			L->n0b = sb_wload_vec(l, co, "%s0.bias", pre);
			float *c1 = sb_wload_raw(l, 3, 2 * h, co, K, 0, "%s1.weight", pre);
			if ((L->c1w = sb_wload_own(l, (size_t)K * 2 * h * co)) && c1)
				for (int u = 0; u < K; u++)
					for (int o = 0; o < 2 * h; o++)
						for (int q = 0; q < co; q++)
							L->c1w[((size_t)u * 2 * h + o) * co + q] = c1[((size_t)o * co + q) * K + u];
			free(c1);
			L->c1b = sb_wload_vec(l, 2 * h, "%s1.bias", pre);
			float *dw = sb_wload_raw(l, 3, h, 1, K, 0, "%s3.weight", pre);
			if ((L->dw = sb_wload_own(l, (size_t)h * K)) && dw)
				memcpy(L->dw, dw, sizeof(float) * (size_t)h * K);
			free(dw);
			L->dwb = sb_wload_vec(l, h, "%s3.bias", pre);
			L->n4w = sb_wload_vec(l, h, "%s4.weight", pre);
			L->n4b = sb_wload_vec(l, h, "%s4.bias", pre);
			float *c6 = sb_wload_raw(l, 3, co, h, 1, 0, "%s6.weight", pre);
			if ((L->c6w = sb_wload_own(l, (size_t)co * h)) && c6)
				memcpy(L->c6w, c6, sizeof(float) * (size_t)co * h);
			free(c6);
			L->c6b = sb_wload_vec(l, co, "%s6.bias", pre);
		}
	}
	float *g = sb_wload_raw(l, 4, co, co, 3, 3, "encoder.%d.globalconv.weight", i);
	if (l->s == SB_OK)
		conv3x3(l, g, co, co, 0, lv->glob_w);
	free(g);
	lv->glob_b = sb_wload_vec(l, co, "encoder.%d.globalconv.bias", i);
	/* the decoder of this level */
	const int j = net->levels - 1 - i, cout = lv->cout;
	float *f = sb_wload_raw(l, 4, 2 * co, 2 * co, 3, 3, "decoder.%d.0.conv.weight", j);
	if (l->s == SB_OK)
		conv3x3(l, f, 2 * co, 2 * co, 1, lv->fuse_w);
	free(f);
	lv->fuse_b = sb_wload_vec(l, 2 * co, "decoder.%d.0.conv.bias", j);
	for (int b = 0; b < 3 && l->s == SB_OK; b++) {
		const int k = c->band_kernel[b], s = c->band_stride[b];
		float *w = sb_wload_raw(l, 4, co, cout, k, 1, "decoder.%d.1.convtrs.%d.weight", j, b);
		float *bias = sb_wload_raw(l, 1, cout, 0, 0, 0, "decoder.%d.1.convtrs.%d.bias", j, b);
		lv->up_w[b] = sb_wload_own(l, (size_t)cout * k * co);
		lv->up_b[b] = sb_wload_own(l, (size_t)(s == 1 ? 1 : k) * cout);
		if (w && bias && lv->up_w[b] && lv->up_b[b]) {
			for (int o = 0; o < cout; o++)
				for (int u = 0; u < k; u++)
					for (int q = 0; q < co; q++) {
						const float v = w[((size_t)q * cout + o) * k + u];
						if (s == 1) /* a convolution with the taps reversed */
							lv->up_w[b][((size_t)o * k + (k - 1 - u)) * co + q] = v;
						else
							lv->up_w[b][((size_t)u * cout + o) * co + q] = v;
					}
			for (int u = 0; u < (s == 1 ? 1 : k); u++)
				memcpy(lv->up_b[b] + (size_t)u * cout, bias, sizeof(float) * (size_t)cout);
		}
		free(w);
		free(bias);
	}
}

static void load_dual(sb_wload *l, sb_scnet *net, int i)
{
	sc_dual *dp = &net->dp[i];
	const int d = dp->d, H = dp->H;
	const int64_t G = 4L * H;
	for (int p = 0; p < 2 && l->s == SB_OK; p++) {
		const char *pre = "separation_net.dp_modules.%d.";
		dp->nw[p] = sb_wload_vec(l, d, "separation_net.dp_modules.%d.norm_layers.%d.weight", i, p);
		dp->nb[p] = sb_wload_vec(l, d, "separation_net.dp_modules.%d.norm_layers.%d.bias", i, p);
		dp->wih[p] = sb_wload_own(l, (size_t)(2 * G * d));
		dp->whh[p] = sb_wload_own(l, (size_t)(2 * G * H));
		dp->b[p] = sb_wload_own(l, (size_t)(2 * G));
		for (int r = 0; r < 2 && l->s == SB_OK; r++) {
			const char *sfx = r ? "_reverse" : "";
			char q[96];
			snprintf(q, sizeof q, pre, i);
			float *a = sb_wload_raw(l, 2, G, d, 0, 0, "%slstm_layers.%d.weight_ih_l0%s", q, p, sfx);
			float *b = sb_wload_raw(l, 2, G, H, 0, 0, "%slstm_layers.%d.weight_hh_l0%s", q, p, sfx);
			float *bi = sb_wload_raw(l, 1, G, 0, 0, 0, "%slstm_layers.%d.bias_ih_l0%s", q, p, sfx);
			float *bh = sb_wload_raw(l, 1, G, 0, 0, 0, "%slstm_layers.%d.bias_hh_l0%s", q, p, sfx);
			if (a && b && bi && bh) {
				memcpy(dp->wih[p] + r * G * d, a, sizeof(float) * (size_t)(G * d));
				memcpy(dp->whh[p] + r * G * H, b, sizeof(float) * (size_t)(G * H));
				for (int64_t g = 0; g < G; g++)
					dp->b[p][r * G + g] = bi[g] + bh[g];
			}
			free(a);
			free(b);
			free(bi);
			free(bh);
		}
		float *lw = sb_wload_raw(l, 2, d, 2 * H, 0, 0,
		                         "separation_net.dp_modules.%d.linear_layers.%d.weight", i, p);
		if ((dp->lw[p] = sb_wload_own(l, (size_t)d * 2 * H)) && lw)
			memcpy(dp->lw[p], lw, sizeof(float) * (size_t)d * 2 * H);
		free(lw);
		dp->lb[p] = sb_wload_vec(l, d, "separation_net.dp_modules.%d.linear_layers.%d.bias", i, p);
	}
}

/* torch.fft.rfft / irfft along T frames, norm="ortho", as matrices (double, then rounded) */
static void dft_tables(sb_wload *l, sb_scnet *net)
{
	const int T = net->frames, T2 = net->frames2;
	net->rfft_re = sb_wload_own(l, (size_t)T * T2);
	net->rfft_im = sb_wload_own(l, (size_t)T * T2);
	net->irfft_re = sb_wload_own(l, (size_t)T2 * T);
	net->irfft_im = sb_wload_own(l, (size_t)T2 * T);
	if (l->s != SB_OK)
		return;
	const double s = 1.0 / sqrt((double)T);
	for (int n = 0; n < T; n++)
		for (int k = 0; k < T2; k++) {
			/* the angle of k n / T, reduced exactly first */
			const double a = 2.0 * M_PI * (double)(((int64_t)k * n) % T) / T;
			net->rfft_re[(size_t)n * T2 + k] = (float)(cos(a) * s);
			net->rfft_im[(size_t)n * T2 + k] = (float)(-sin(a) * s);
			/* the Hermitian halves counted twice; DC and Nyquist once, their imaginary
			 * parts ignored (as pocketfft's c2r does) */
			const double wk = k == 0 || 2 * k == T ? 1.0 : 2.0;
			net->irfft_re[(size_t)k * T + n] = (float)(wk * cos(a) * s);
			net->irfft_im[(size_t)k * T + n] = k == 0 || 2 * k == T ? 0.f : (float)(-wk * sin(a) * s);
		}
}

/* the geometry of every level and the device memory of one chunk's pass */
static sb_status shapes(sb_scnet *net)
{
	const sb_scnet_config *c = &net->cfg;
	net->levels = c->n_dims - 1;
	net->S = c->audio_channels;
	net->n_src = c->n_sources;
	net->L = c->m.chunk_size;
	int64_t pad = c->hop - net->L % c->hop;
	if ((net->L + pad) / c->hop % 2 == 0)
		pad += c->hop;
	net->Lp = net->L + pad;
	net->frames = (int)(net->Lp / c->hop) + 1;
	net->frames2 = net->frames / 2 + 1;
	net->lv = calloc((size_t)net->levels, sizeof *net->lv);
	net->dp = calloc((size_t)(c->num_dplayer ? c->num_dplayer : 1), sizeof *net->dp);
	if (!net->lv || !net->dp)
		return SB_ERR_NOMEM;
	const double T = net->frames;
	int rows = c->nfft / 2 + 1;
	double most = T * rows * c->dims[0], big = most;
	for (int i = 0; i < net->levels; i++) {
		sc_level *lv = &net->lv[i];
		lv->ci = c->dims[i];
		lv->co = c->dims[i + 1];
		lv->h = lv->co / c->compress;
		lv->cout = i ? c->dims[i] : c->dims[0] * c->n_sources;
		lv->rows_in = rows;
		sb_scnet_split(c, rows, &lv->bands);
		lv->rows_out = lv->bands.total;
		rows = lv->rows_out;
		/* the skip, the level's output and its scratch (a padded copy, the norm's output,
		 * the fusion's doubled channels) */
		const double y = T * rows * lv->co;
		most += 6.0 * y;
		big = y * 2 > big ? y * 2 : big;
	}
	const int d = c->dims[net->levels];
	for (int i = 0; i < c->num_dplayer; i++) {
		net->dp[i].d = d * (i % 2 ? 2 : 1);
		net->dp[i].H = net->dp[i].d * c->expand;
	}
	/* the LSTMs' input products and outputs */
	const double lstm = (double)rows * T * 8.0 * d * c->expand * 2.0;
	most += 2 * lstm;
	big = lstm > big ? lstm : big;
	/* the inverse STFT's frames */
	most += (double)net->n_src * net->S * T * c->nfft;
	net->pass_floats = most;
	net->largest_floats = big;
	return SB_OK;
}

sb_status sb_scnet_load(const char *path, const char *name, const sb_logger *log,
                        sb_scnet **out)
{
	*out = NULL;
	sb_safetensors *st;
	const char *yaml;
	sb_status s = sb_wload_open_config(path, name, "SCNet", log, &st, &yaml);
	if (s != SB_OK)
		return s;
	sb_scnet *net = calloc(1, sizeof *net);
	if (!net) {
		sb_safetensors_close(st);
		return SB_ERR_NOMEM;
	}
	char err[512];
	s = sb_scnet_config_parse(yaml, strlen(yaml), &net->cfg, err, sizeof err);
	if (s != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "%s: its configuration: %s", name, err);
		goto fail;
	}
	s = shapes(net);
	if (s != SB_OK)
		goto fail;
	sb_wload l = {st, &net->w, name, log, SB_OK, ""};
	for (int i = 0; i < net->levels && l.s == SB_OK; i++)
		load_level(&l, net, i);
	for (int i = 0; i < net->cfg.num_dplayer && l.s == SB_OK; i++)
		load_dual(&l, net, i);
	dft_tables(&l, net);
	const int nfft = net->cfg.nfft;
	net->ones = sb_wload_own(&l, (size_t)nfft);
	net->zeros = sb_wload_own(&l, (size_t)net->frames);
	for (int i = 0; net->ones && i < nfft; i++)
		net->ones[i] = 1.f;
	s = l.s;
	if (s != SB_OK)
		goto fail;
	/* every tensor of the file is one the config explains */
	const int want = sb_scnet_tensors(&net->cfg, NULL, NULL);
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
	sb_scnet_free(net);
	return s == SB_OK ? SB_ERR_MODEL : s;
}
