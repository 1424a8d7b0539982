/* Building an HTDemucs net from a safetensors file: the architecture HTDemucs.__init__ builds
 * for the settings (demucs/htdemucs.py) gives the name and shape of every tensor; each is read,
 * checked and repacked into the layout its op uses (htdemucs_internal.h). A file with a
 * tensor the architecture lacks is refused too, since it means the settings do not describe it.
 */
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_htdemucs *net;
	const sb_safetensors *st;
	const char *prefix, *what;
	const sb_logger *log;
	char **used;
	int n_used, cap_used;
	sb_status status;
} loader;

static float *own(loader *ld, size_t n)
{
	return sb_weights_new(&ld->net->w, n);
}

/* Free a raw tensor once it has been repacked. */
static void release(loader *ld, const float *p)
{
	sb_weights_drop(&ld->net->w, p);
}

/* Read "<prefix><name>" with the given shape into new memory; NULL (status set, logged) on
 * failure. After the first failure every later call returns NULL without a message. */
static float *load(loader *ld, const int64_t *shape, int ndim, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static float *load(loader *ld, const int64_t *shape, int ndim, const char *fmt, ...)
{
	if (ld->status != SB_OK)
		return NULL;
	char name[256];
	const size_t pl = (size_t)snprintf(name, sizeof name, "%s", ld->prefix);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name + pl, sizeof name - pl, fmt, ap);
	va_end(ap);
	size_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	float *dst = own(ld, n);
	char *keep = strdup(name);
	if (ld->n_used == ld->cap_used) {
		const int cap = ld->cap_used ? 2 * ld->cap_used : 512;
		char **p = realloc(ld->used, sizeof *p * (size_t)cap);
		if (p) {
			ld->used = p;
			ld->cap_used = cap;
		}
	}
	if (!dst || !keep || ld->n_used == ld->cap_used) {
		free(keep);
		sb_log(ld->log, SB_LOG_ERROR, "%s: out of memory loading %s", ld->what, name);
		ld->status = SB_ERR_NOMEM;
		return NULL;
	}
	ld->used[ld->n_used++] = keep;
	ld->status = sb_safetensors_read_f32(ld->st, name, shape, ndim, dst, ld->what, ld->log);
	if (ld->status != SB_OK)
		return NULL;
	/* a weight that is NaN or infinite makes every stem NaN: refuse the file at load, naming
	 * the tensor, rather than run a separation that cannot succeed */
	for (size_t i = 0; i < n; i++)
		if (!isfinite(dst[i])) {
			sb_log(ld->log, SB_LOG_ERROR, "%s: %s: tensor \"%s\" holds %s at element %zu: the "
			       "model file is damaged (download or convert it again)", ld->what,
			       sb_safetensors_path(ld->st), name, isnan(dst[i]) ? "NaN" : "an infinity", i);
			ld->status = SB_ERR_FORMAT;
			return NULL;
		}
	ld->net->params += (int64_t)n;
	return dst;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static float *vec(loader *ld, int n, const char *base, const char *leaf)
{
	return load(ld, SHAPE(n), "%s.%s", base, leaf);
}

/* demucs.py DConv(channels, compress=8, depth=2, gelu=True): layers.d.{0,1,3,4,6} */
static void load_dconv(loader *ld, hd_dconv *dc, int C, const char *base)
{
	dc->C = C;
	dc->H = C / 8;
	dc->depth = 2;
	const int H = dc->H;
	for (int d = 0; d < 2 && ld->status == SB_OK; d++) {
		hd_dconv_layer *l = &dc->l[d];
		l->dil = 1 << d;
		const float *w1 = load(ld, SHAPE(H, C, 3), "%s.dconv.layers.%d.0.weight", base, d);
		l->b1 = load(ld, SHAPE(H), "%s.dconv.layers.%d.0.bias", base, d);
		l->n1w = load(ld, SHAPE(H), "%s.dconv.layers.%d.1.weight", base, d);
		l->n1b = load(ld, SHAPE(H), "%s.dconv.layers.%d.1.bias", base, d);
		l->w2 = load(ld, SHAPE(2 * C, H, 1), "%s.dconv.layers.%d.3.weight", base, d);
		l->b2 = load(ld, SHAPE(2 * C), "%s.dconv.layers.%d.3.bias", base, d);
		l->n2w = load(ld, SHAPE(2 * C), "%s.dconv.layers.%d.4.weight", base, d);
		l->n2b = load(ld, SHAPE(2 * C), "%s.dconv.layers.%d.4.bias", base, d);
		l->scale = load(ld, SHAPE(C), "%s.dconv.layers.%d.6.scale", base, d);
		l->w1 = own(ld, (size_t)3 * H * C);
		if (ld->status != SB_OK || !l->w1) {
			ld->status = ld->status != SB_OK ? ld->status : SB_ERR_NOMEM;
			return;
		}
		for (int k = 0; k < 3; k++)
			for (int h = 0; h < H; h++)
				for (int c = 0; c < C; c++)
					l->w1[((size_t)k * H + h) * C + c] = w1[((size_t)h * C + c) * 3 + k];
		release(ld, w1);
	}
}

/* hdemucs.py HEncLayer: conv (kernel 8, stride 4), rewrite 1x1 to 2 cout, GLU */
static void load_enc(loader *ld, hd_enc *l, int freq, int cin, int cout, int dconv, int index)
{
	char base[64];
	snprintf(base, sizeof base, "%s.%d", freq ? "encoder" : "tencoder", index);
	l->cin = cin;
	l->cout = cout;
	l->has_dconv = dconv;
	if (freq) {
		const float *w = load(ld, SHAPE(cout, cin, 8, 1), "%s.conv.weight", base);
		l->w = own(ld, (size_t)cout * 8 * cin);
		if (w && l->w)
			for (int co = 0; co < cout; co++)
				for (int k = 0; k < 8; k++)
					for (int ci = 0; ci < cin; ci++)
						l->w[((size_t)co * 8 + k) * cin + ci] = w[((size_t)co * cin + ci) * 8 + k];
		release(ld, w);
		l->rw = load(ld, SHAPE(2 * cout, cout, 1, 1), "%s.rewrite.weight", base);
	} else {
		l->w = load(ld, SHAPE(cout, cin, 8), "%s.conv.weight", base);
		l->rw = load(ld, SHAPE(2 * cout, cout, 1), "%s.rewrite.weight", base);
	}
	l->b = vec(ld, cout, base, "conv.bias");
	l->rb = vec(ld, 2 * cout, base, "rewrite.bias");
	if (!l->w && ld->status == SB_OK)
		ld->status = SB_ERR_NOMEM;
	if (dconv)
		load_dconv(ld, &l->dc, cout, base);
}

/* hdemucs.py HDecLayer: rewrite (3x3 freq, 3 time) to 2 cin, GLU, DConv, transposed conv */
static void load_dec(loader *ld, hd_dec *l, int freq, int cin, int cout, int dconv, int last,
                     int index)
{
	char base[64];
	snprintf(base, sizeof base, "%s.%d", freq ? "decoder" : "tdecoder", index);
	l->cin = cin;
	l->cout = cout;
	l->last = last;
	l->has_dconv = dconv;
	const size_t C2 = (size_t)2 * cin;
	if (freq) {
		const float *rw = load(ld, SHAPE(2 * cin, cin, 3, 3), "%s.rewrite.weight", base);
		const float *tw = load(ld, SHAPE(cin, cout, 8, 1), "%s.conv_tr.weight", base);
		l->rw = own(ld, 9 * C2 * cin);
		l->tw = own(ld, (size_t)4 * cout * 2 * cin);
		if (rw && tw && l->rw && l->tw) {
			/* rw[dt][co][df][ci] = W[co][ci][df][dt] */
			for (int dt = 0; dt < 3; dt++)
				for (size_t co = 0; co < C2; co++)
					for (int df = 0; df < 3; df++)
						for (int ci = 0; ci < cin; ci++)
							l->rw[((dt * C2 + co) * 3 + df) * cin + ci] =
								rw[((co * cin + ci) * 3 + df) * 3 + dt];
			/* phase r: input row q-1 through tap r+4, row q through tap r */
			for (int r = 0; r < 4; r++)
				for (int co = 0; co < cout; co++)
					for (int ci = 0; ci < cin; ci++) {
						float *o = l->tw + (((size_t)r * cout + co) * 2) * cin;
						o[ci] = tw[((size_t)ci * cout + co) * 8 + r + 4];
						o[cin + ci] = tw[((size_t)ci * cout + co) * 8 + r];
					}
		}
		release(ld, rw);
		release(ld, tw);
	} else {
		const float *rw = load(ld, SHAPE(2 * cin, cin, 3), "%s.rewrite.weight", base);
		const float *tw = load(ld, SHAPE(cin, cout, 8), "%s.conv_tr.weight", base);
		l->rw = own(ld, 3 * C2 * cin);
		l->tw = own(ld, (size_t)8 * cout * cin);
		if (rw && tw && l->rw && l->tw) {
			for (int k = 0; k < 3; k++)
				for (size_t co = 0; co < C2; co++)
					for (int ci = 0; ci < cin; ci++)
						l->rw[(k * C2 + co) * cin + ci] = rw[(co * cin + ci) * 3 + k];
			for (int k = 0; k < 8; k++)
				for (int co = 0; co < cout; co++)
					for (int ci = 0; ci < cin; ci++)
						l->tw[((size_t)k * cout + co) * cin + ci] =
							tw[((size_t)ci * cout + co) * 8 + k];
		}
		release(ld, rw);
		release(ld, tw);
	}
	if (ld->status == SB_OK && (!l->rw || !l->tw))
		ld->status = SB_ERR_NOMEM;
	l->rb = vec(ld, 2 * cin, base, "rewrite.bias");
	l->tb = vec(ld, cout, base, "conv_tr.bias");
	if (dconv)
		load_dconv(ld, &l->dc, cin, base);
}

/* row o of w [rows][cols] and b[o] times g[o] */
static void scale_rows(float *w, float *b, const float *g, int rows, int cols)
{
	for (int o = 0; o < rows; o++) {
		for (int c = 0; c < cols; c++)
			w[(size_t)o * cols + c] *= g[o];
		b[o] *= g[o];
	}
}

static void load_tlayer(loader *ld, hd_tlayer *L, int D, int Hd, int cross, const char *branch,
                        int i)
{
	char base[96];
	snprintf(base, sizeof base, "crosstransformer.%s.%d", branch, i);
	const char *att = cross ? "cross_attn" : "self_attn";
	L->cross = cross;
	L->in_w = load(ld, SHAPE(3 * D, D), "%s.%s.in_proj_weight", base, att);
	L->in_b = load(ld, SHAPE(3 * D), "%s.%s.in_proj_bias", base, att);
	L->out_w = load(ld, SHAPE(D, D), "%s.%s.out_proj.weight", base, att);
	L->out_b = load(ld, SHAPE(D), "%s.%s.out_proj.bias", base, att);
	L->l1w = load(ld, SHAPE(Hd, D), "%s.linear1.weight", base);
	L->l1b = vec(ld, Hd, base, "linear1.bias");
	L->l2w = load(ld, SHAPE(D, Hd), "%s.linear2.weight", base);
	L->l2b = vec(ld, D, base, "linear2.bias");
	L->n1w = vec(ld, D, base, "norm1.weight");
	L->n1b = vec(ld, D, base, "norm1.bias");
	L->n2w = vec(ld, D, base, "norm2.weight");
	L->n2b = vec(ld, D, base, "norm2.bias");
	if (cross) {
		L->n3w = vec(ld, D, base, "norm3.weight");
		L->n3b = vec(ld, D, base, "norm3.bias");
	}
	L->now = vec(ld, D, base, "norm_out.weight");
	L->nob = vec(ld, D, base, "norm_out.bias");
	/* LayerScale folded into the linear layer before it: x + g (h W^T + b) is
	 * x + h (g W)^T + g b, so the forward pass adds the product to x in the product's own pass
	 * (gemm_bias with beta 1) with no pass of its own (issue #24: fewer launches) */
	const float *g1 = vec(ld, D, base, "gamma_1.scale"), *g2 = vec(ld, D, base, "gamma_2.scale");
	if (ld->status == SB_OK) {
		scale_rows(L->out_w, L->out_b, g1, D, D);
		scale_rows(L->l2w, L->l2b, g2, D, Hd);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every tensor under the prefix must have been read: a leftover one means the settings in the
 * metadata do not describe the weights (say, t_layers too small). */
static void check_leftovers(loader *ld)
{
	if (ld->status != SB_OK)
		return;
	qsort(ld->used, (size_t)ld->n_used, sizeof(char *), cmp_str);
	const size_t pl = strlen(ld->prefix);
	const int n = sb_safetensors_count(ld->st);
	for (int i = 0; i < n; i++) {
		const char *name = sb_safetensors_at(ld->st, i)->name;
		if (strncmp(name, ld->prefix, pl) != 0)
			continue;
		if (!pl) {
			/* a single model: skip other bag members' tensors, which only a bag file has */
			const char *dot = strchr(name, '.');
			if (dot && dot > name && strspn(name, "0123456789") == (size_t)(dot - name))
				continue;
		}
		if (!bsearch(&name, ld->used, (size_t)ld->n_used, sizeof(char *), cmp_str)) {
			sb_log(ld->log, SB_LOG_ERROR, "%s: %s: tensor \"%s\" is not part of the HTDemucs "
			       "architecture its metadata describes (channels=%d, bottom_channels=%d, "
			       "t_layers=%d, dconv_mode=%d, %d sources)", ld->what,
			       sb_safetensors_path(ld->st), name, ld->net->cfg.channels,
			       ld->net->cfg.bottom_channels, ld->net->cfg.t_layers, ld->net->cfg.dconv_mode,
			       ld->net->cfg.n_sources);
			ld->status = SB_ERR_MODEL;
			return;
		}
	}
}

void sb_htdemucs_free(sb_htdemucs *net)
{
	if (!net)
		return;
	sb_weights_free(&net->w);
	free(net->layers);
	free(net->layers_t);
	free(net);
}

const sb_htdemucs_config *sb_htdemucs_cfg(const sb_htdemucs *net)
{
	return &net->cfg;
}

int64_t sb_htdemucs_params(const sb_htdemucs *net)
{
	return net->params;
}

sb_status sb_htdemucs_new(const sb_safetensors *st, const char *prefix,
                          const sb_htdemucs_config *cfg, const char *what, const sb_logger *log,
                          sb_htdemucs **out)
{
	*out = NULL;
	sb_htdemucs *net = calloc(1, sizeof *net);
	if (!net)
		return SB_ERR_NOMEM;
	net->cfg = *cfg;
	loader ld = {net, st, prefix ? prefix : "", what, log, NULL, 0, 0, SB_OK};
	const int C0 = cfg->channels, ac = cfg->audio_channels, S = cfg->n_sources;
	const int denc = cfg->dconv_mode & 1, ddec = cfg->dconv_mode & 2;
	for (int i = 0; i < HD_DEPTH; i++) {
		const int cout = C0 << i;
		load_enc(&ld, &net->enc[i], 1, i ? C0 << (i - 1) : 2 * ac, cout, denc, i);
		load_enc(&ld, &net->tenc[i], 0, i ? C0 << (i - 1) : ac, cout, denc, i);
	}
	for (int j = 0; j < HD_DEPTH; j++) {
		const int index = HD_DEPTH - 1 - j; /* the encoder layer this one mirrors */
		const int cin = C0 << index;
		load_dec(&ld, &net->dec[j], 1, cin, index ? C0 << (index - 1) : S * ac * 2, ddec,
		         index == 0, j);
		load_dec(&ld, &net->tdec[j], 0, cin, index ? C0 << (index - 1) : S * ac, ddec,
		         index == 0, j);
	}
	/* ScaledEmbedding over the 512 rows after the first layer, used as freq_emb * scale * W */
	const int fr1 = HD_NFFT / 2 / 4;
	float *emb = load(&ld, SHAPE(fr1, C0), "freq_emb.embedding.weight");
	if (emb)
		for (size_t i = 0; i < (size_t)fr1 * C0; i++)
			emb[i] = 0.2f * (emb[i] * 10.f);
	net->freq_emb = emb;

	net->ct = C0 * 8;
	net->dim = cfg->bottom_channels ? cfg->bottom_channels : net->ct;
	net->hidden = (int)(net->dim * 4.0);
	const int D = net->dim, ct = net->ct;
	if (cfg->bottom_channels) {
		net->up_w = load(&ld, SHAPE(D, ct, 1), "channel_upsampler.weight");
		net->up_b = load(&ld, SHAPE(D), "channel_upsampler.bias");
		net->down_w = load(&ld, SHAPE(ct, D, 1), "channel_downsampler.weight");
		net->down_b = load(&ld, SHAPE(ct), "channel_downsampler.bias");
		net->upt_w = load(&ld, SHAPE(D, ct, 1), "channel_upsampler_t.weight");
		net->upt_b = load(&ld, SHAPE(D), "channel_upsampler_t.bias");
		net->downt_w = load(&ld, SHAPE(ct, D, 1), "channel_downsampler_t.weight");
		net->downt_b = load(&ld, SHAPE(ct), "channel_downsampler_t.bias");
	}
	if (cfg->t_layers > 0) {
		net->nin_w = load(&ld, SHAPE(D), "crosstransformer.norm_in.weight");
		net->nin_b = load(&ld, SHAPE(D), "crosstransformer.norm_in.bias");
		net->nint_w = load(&ld, SHAPE(D), "crosstransformer.norm_in_t.weight");
		net->nint_b = load(&ld, SHAPE(D), "crosstransformer.norm_in_t.bias");
		net->layers = calloc((size_t)cfg->t_layers, sizeof *net->layers);
		net->layers_t = calloc((size_t)cfg->t_layers, sizeof *net->layers_t);
		if (!net->layers || !net->layers_t)
			ld.status = ld.status != SB_OK ? ld.status : SB_ERR_NOMEM;
		for (int i = 0; i < cfg->t_layers && ld.status == SB_OK; i++) {
			load_tlayer(&ld, &net->layers[i], D, net->hidden, i % 2, "layers", i);
			load_tlayer(&ld, &net->layers_t[i], D, net->hidden, i % 2, "layers_t", i);
		}
	}
	check_leftovers(&ld);
	for (int i = 0; i < ld.n_used; i++)
		free(ld.used[i]);
	free(ld.used);
	sb_status status = ld.status;
	if (status == SB_OK) {
		net->window = own(&ld, HD_NFFT);
		if (!net->window)
			status = SB_ERR_NOMEM;
		else
			for (int i = 0; i < HD_NFFT; i++) /* torch.hann_window(periodic=True) */
				net->window[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / HD_NFFT));
	}
	if (status == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "%s: out of memory loading the weights", what);
	if (status != SB_OK) {
		sb_htdemucs_free(net);
		return status;
	}
	*out = net;
	return SB_OK;
}
