/* An SCNet's MSST configuration (scnet_config.h). */
#include "convert/scnet_config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define OFF(f) offsetof(sb_scnet_config, f)
#define NO SB_MSST_NO_EFFECT
#define KEY(k, kind, lo, hi, off) {k, kind, lo, hi, off, 0, 0, -1, NULL}
#define LIST(k, kind, lo, hi, f, n, cap) {k, kind, lo, hi, OFF(f), OFF(n), cap, -1, NULL}
/* every argument of SCNet.__init__ */
static const sb_msst_key model_keys[] = {
	LIST("sources", SB_MSST_STRINGS, 0, 0, sources, n_sources, SB_MSST_MAX_STEMS),
	KEY("audio_channels", SB_MSST_INT, 1, 2, OFF(audio_channels)),
	LIST("dims", SB_MSST_INTS, 1, 4096, dims, n_dims, SB_SCNET_MAX_LEVELS + 1),
	KEY("nfft", SB_MSST_INT, 8, 8192, OFF(nfft)),
	KEY("hop_size", SB_MSST_INT, 1, 8192, OFF(hop)),
	KEY("win_size", SB_MSST_INT, 1, 8192, OFF(win)),
	KEY("normalized", SB_MSST_BOOL, 0, 1, OFF(normalized)),
	LIST("band_SR", SB_MSST_FLOATS, 0, 1, band_sr, n_sr, 3),
	LIST("band_stride", SB_MSST_INTS, 1, 1024, band_stride, n_stride, 3),
	LIST("band_kernel", SB_MSST_INTS, 1, 1024, band_kernel, n_kernel, 3),
	LIST("conv_depths", SB_MSST_INTS, 0, 64, conv_depths, n_depths, 3),
	KEY("compress", SB_MSST_INT, 1, 1024, OFF(compress)),
	KEY("conv_kernel", SB_MSST_INT, 1, 63, OFF(conv_kernel)),
	KEY("num_dplayer", SB_MSST_INT, 0, 64, OFF(num_dplayer)),
	KEY("expand", SB_MSST_INT, 1, 16, OFF(expand)),
};
#undef LIST
#undef KEY
#undef NO
#undef OFF

/* SCNet.__init__'s defaults */
static void defaults(sb_scnet_config *c)
{
	static const char *const src[] = {"drums", "bass", "other", "vocals"};
	memset(c, 0, sizeof *c);
	c->n_sources = 4;
	for (int i = 0; i < 4; i++)
		snprintf(c->sources[i], sizeof c->sources[i], "%s", src[i]);
	c->audio_channels = 2;
	c->n_dims = 4;
	c->dims[0] = 4, c->dims[1] = 32, c->dims[2] = 64, c->dims[3] = 128;
	c->nfft = c->win = 4096;
	c->hop = 1024;
	c->normalized = 1;
	c->n_sr = c->n_stride = c->n_kernel = c->n_depths = 3;
	c->band_sr[0] = 0.175, c->band_sr[1] = 0.392, c->band_sr[2] = 0.433;
	c->band_stride[0] = 1, c->band_stride[1] = 4, c->band_stride[2] = 16;
	c->band_kernel[0] = 3, c->band_kernel[1] = 4, c->band_kernel[2] = 16;
	c->conv_depths[0] = 3, c->conv_depths[1] = 2, c->conv_depths[2] = 1;
	c->compress = 4;
	c->conv_kernel = 3;
	c->num_dplayer = 6;
	c->expand = 1;
}

void sb_scnet_split(const sb_scnet_config *c, int rows, sb_scnet_bands *b)
{
	const double fr = rows;
	const int cut1 = (int)ceil(fr * c->band_sr[0]),
	          cut2 = (int)ceil(fr * (c->band_sr[0] + c->band_sr[1]));
	const int lo[3] = {0, cut1, cut2}, hi[3] = {cut1, cut2, rows};
	b->total = 0;
	for (int k = 0; k < 3; k++) {
		const int len = hi[k] - lo[k], s = c->band_stride[k], kern = c->band_kernel[k];
		const int pad = s == 1 ? kern - s : (s - len % s) % s;
		b->start[k] = lo[k];
		b->end[k] = hi[k];
		b->pad_lo[k] = pad / 2;
		b->pad_hi[k] = pad - pad / 2;
		b->out[k] = (len + pad - kern) / s + 1;
		b->total += b->out[k];
	}
}

static sb_status check(sb_msst_yaml *y, sb_scnet_config *c)
{
	static const char *const lists[] = {"band_SR", "band_stride", "band_kernel", "conv_depths"};
	const int counts[] = {c->n_sr, c->n_stride, c->n_kernel, c->n_depths};
	for (int i = 0; i < 4; i++)
		if (counts[i] != 3) {
			sb_msst_fail(y, "model.%s: %d values where SCNet takes one per band (low, mid, "
			             "high)", lists[i], counts[i]);
			return SB_ERR_FORMAT;
		}
	if (c->n_dims < 2 || c->dims[0] != 2 * c->audio_channels) {
		sb_msst_fail(y, "model.dims: %s", c->n_dims < 2 ? "fewer than two widths"
		             : "the first width must be 2 x audio_channels (the spectrum's real and "
		               "imaginary parts)");
		return SB_ERR_FORMAT;
	}
	if (c->m.num_channels != c->audio_channels) {
		sb_msst_fail(y, "audio.num_channels: %d, but model.audio_channels is %d",
		             c->m.num_channels, c->audio_channels);
		return SB_ERR_FORMAT;
	}
	if (c->nfft & (c->nfft - 1)) {
		sb_msst_fail(y, "model.nfft: %d is not a power of two (not supported)", c->nfft);
		return SB_ERR_UNSUPPORTED;
	}
	if (c->win != c->nfft) {
		sb_msst_fail(y, "model.win_size: %d is not supported (only a window as long as nfft, "
		             "%d)", c->win, c->nfft);
		return SB_ERR_UNSUPPORTED;
	}
	if (c->hop > c->nfft) {
		sb_msst_fail(y, "model.hop_size: longer than nfft");
		return SB_ERR_FORMAT;
	}
	for (int k = 0; k < 3; k++)
		if (c->band_stride[k] > 1 && c->band_kernel[k] != c->band_stride[k]) {
			sb_msst_fail(y, "model.band_kernel: %d with stride %d is not supported (a "
			             "down-sampling band's kernel must be its stride, as in every "
			             "published config)", c->band_kernel[k], c->band_stride[k]);
			return SB_ERR_UNSUPPORTED;
		}
	if (c->conv_kernel % 2 == 0) {
		sb_msst_fail(y, "model.conv_kernel: %d is even (SCNet asserts an odd kernel)",
		             c->conv_kernel);
		return SB_ERR_FORMAT;
	}
	if (c->num_dplayer % 2) {
		sb_msst_fail(y, "model.num_dplayer: %d is odd (the separation network would end in "
		             "the frequency domain of its time axis)", c->num_dplayer);
		return SB_ERR_UNSUPPORTED;
	}
	for (int i = 1; i < c->n_dims; i++)
		if (c->dims[i] / c->compress < 1) {
			sb_msst_fail(y, "model.compress: %d leaves no channel of width %d", c->compress,
			             c->dims[i]);
			return SB_ERR_FORMAT;
		}
	/* rows left at each level: every band must keep one */
	int rows = c->nfft / 2 + 1;
	for (int i = 1; i < c->n_dims; i++) {
		sb_scnet_bands b;
		sb_scnet_split(c, rows, &b);
		for (int k = 0; k < 3; k++)
			if (b.end[k] - b.start[k] < 1 || b.out[k] < 1) {
				sb_msst_fail(y, "model.band_SR: a band of level %d holds no frequency "
				             "(nfft %d is too small for %d levels)", i, c->nfft,
				             c->n_dims - 1);
				return SB_ERR_FORMAT;
			}
		rows = b.total;
	}
	if (c->m.target[0] || c->m.n_instruments != c->n_sources) {
		sb_msst_fail(y, c->m.target[0]
		             ? "training.target_instrument: SCNet makes every source (MSST's demix "
		               "takes target_instrument: null for it)"
		             : "model.sources: %d, but training.instruments names %d", c->n_sources,
		             c->m.n_instruments);
		return SB_ERR_FORMAT;
	}
	return sb_msst_check_stems(y, &c->m);
}

sb_status sb_scnet_config_read(sb_msst_yaml *y, sb_scnet_config *c)
{
	defaults(c);
	sb_status st = sb_msst_read_section(y, "model", model_keys,
	                                    sizeof model_keys / sizeof model_keys[0], c, "SCNet",
	                                    "scnet");
	if (st == SB_OK)
		st = sb_msst_read_common(y, &c->m, c->nfft);
	return st == SB_OK ? check(y, c) : st;
}

sb_status sb_scnet_config_parse(const char *text, size_t len, sb_scnet_config *c, char *err,
                                size_t errlen)
{
	sb_msst_yaml *y = NULL;
	sb_status st = sb_msst_yaml_load(text, len, &y, err, errlen);
	if (st != SB_OK)
		return st;
	st = sb_scnet_config_read(y, c);
	if (st != SB_OK)
		sb_errorf(err, errlen, "%s", sb_msst_error(y));
	sb_msst_yaml_free(y);
	return st;
}

/* ---- the tensors ---- */

#define t sb_msst_emit

int sb_scnet_tensors(const sb_scnet_config *c, sb_msst_tensor_fn fn, void *user)
{
	sb_msst_emitter e = {fn, user, 0, ""};
	const int levels = c->n_dims - 1, K = c->conv_kernel;
	for (int i = 0; i < levels; i++) {
		const int ci = c->dims[i], co = c->dims[i + 1], h = co / c->compress;
		for (int b = 0; b < 3; b++) {
			t(&e, 4, co, ci, c->band_kernel[b], 1, "encoder.%d.SDlayer.convs.%d.weight", i, b);
			t(&e, 1, co, 0, 0, 0, "encoder.%d.SDlayer.convs.%d.bias", i, b);
			for (int l = 0; l < c->conv_depths[b]; l++) {
				const char *p = "encoder.%d.conv_modules.%d.layers.%d.%s";
				t(&e, 1, co, 0, 0, 0, p, i, b, l, "0.weight");
				t(&e, 1, co, 0, 0, 0, p, i, b, l, "0.bias");
				t(&e, 3, 2 * h, co, K, 0, p, i, b, l, "1.weight");
				t(&e, 1, 2 * h, 0, 0, 0, p, i, b, l, "1.bias");
				t(&e, 3, h, 1, K, 0, p, i, b, l, "3.weight");
				t(&e, 1, h, 0, 0, 0, p, i, b, l, "3.bias");
				t(&e, 1, h, 0, 0, 0, p, i, b, l, "4.weight");
				t(&e, 1, h, 0, 0, 0, p, i, b, l, "4.bias");
				t(&e, 3, co, h, 1, 0, p, i, b, l, "6.weight");
				t(&e, 1, co, 0, 0, 0, p, i, b, l, "6.bias");
			}
		}
		t(&e, 4, co, co, 3, 3, "encoder.%d.globalconv.weight", i);
		t(&e, 1, co, 0, 0, 0, "encoder.%d.globalconv.bias", i);
		/* the decoder runs the levels backwards: level i is decoder.(levels - 1 - i) */
		const int j = levels - 1 - i;
		const int out = i ? ci : ci * c->n_sources;
		t(&e, 4, 2 * co, 2 * co, 3, 3, "decoder.%d.0.conv.weight", j);
		t(&e, 1, 2 * co, 0, 0, 0, "decoder.%d.0.conv.bias", j);
		for (int b = 0; b < 3; b++) {
			t(&e, 4, co, out, c->band_kernel[b], 1, "decoder.%d.1.convtrs.%d.weight", j, b);
			t(&e, 1, out, 0, 0, 0, "decoder.%d.1.convtrs.%d.bias", j, b);
		}
	}
	for (int i = 0; i < c->num_dplayer; i++) {
		const int d = c->dims[levels] * (i % 2 ? 2 : 1), H = d * c->expand;
		for (int p = 0; p < 2; p++) {
			static const char *const sfx[2] = {"", "_reverse"};
			const char *pre = "separation_net.dp_modules.%d.lstm_layers.%d.%s_l0%s";
			for (int r = 0; r < 2; r++) {
				t(&e, 2, 4 * H, d, 0, 0, pre, i, p, "weight_ih", sfx[r]);
				t(&e, 2, 4 * H, H, 0, 0, pre, i, p, "weight_hh", sfx[r]);
				t(&e, 1, 4 * H, 0, 0, 0, pre, i, p, "bias_ih", sfx[r]);
				t(&e, 1, 4 * H, 0, 0, 0, pre, i, p, "bias_hh", sfx[r]);
			}
			t(&e, 2, d, 2 * H, 0, 0, "separation_net.dp_modules.%d.linear_layers.%d.weight", i,
			  p);
			t(&e, 1, d, 0, 0, 0, "separation_net.dp_modules.%d.linear_layers.%d.bias", i, p);
			t(&e, 1, d, 0, 0, 0, "separation_net.dp_modules.%d.norm_layers.%d.weight", i, p);
			t(&e, 1, d, 0, 0, 0, "separation_net.dp_modules.%d.norm_layers.%d.bias", i, p);
		}
	}
	return e.n;
}
#undef t
