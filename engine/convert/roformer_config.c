/* A RoFormer's MSST YAML configuration (roformer_config.h), read through msst_config.h. */
#include "convert/roformer_config.h"

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- model: every constructor argument of BSRoformer and MelBandRoformer ---- */

#define OFF(f) offsetof(sb_rf_config, f)
#define NO SB_MSST_NO_EFFECT
#define KEY(k, kind, lo, hi, off) {k, kind, lo, hi, off, 0, 0, -1, NULL}
/* the settings both take */
#define COMMON_KEYS \
	KEY("dim", SB_MSST_INT, 1, 8192, OFF(dim)), \
	KEY("depth", SB_MSST_INT, 1, 256, OFF(depth)), \
	KEY("stereo", SB_MSST_BOOL, 0, 1, OFF(stereo)), \
	KEY("num_stems", SB_MSST_INT, 1, SB_RF_MAX_STEMS, OFF(num_stems)), \
	KEY("time_transformer_depth", SB_MSST_INT, 1, 64, OFF(time_depth)), \
	KEY("freq_transformer_depth", SB_MSST_INT, 1, 64, OFF(freq_depth)), \
	{"linear_transformer_depth", SB_MSST_INT, 0, 64, NO, 0, 0, 0, \
	 "linear attention layers are not implemented"}, \
	KEY("dim_head", SB_MSST_INT, 2, 1024, OFF(dim_head)), \
	KEY("heads", SB_MSST_INT, 1, 128, OFF(heads)), \
	KEY("attn_dropout", SB_MSST_FLOAT, 0, 0, NO), \
	KEY("ff_dropout", SB_MSST_FLOAT, 0, 0, NO), \
	KEY("flash_attn", SB_MSST_BOOL, 0, 1, NO), \
	KEY("sage_attention", SB_MSST_BOOL, 0, 1, NO), \
	KEY("dim_freqs_in", SB_MSST_INT, 2, 1 << 16, OFF(dim_freqs_in)), \
	KEY("stft_n_fft", SB_MSST_INT, 16, 1 << 16, OFF(n_fft)), \
	KEY("stft_hop_length", SB_MSST_INT, 1, 1 << 16, OFF(hop)), \
	KEY("stft_win_length", SB_MSST_INT, 2, 1 << 16, OFF(win)), \
	KEY("stft_normalized", SB_MSST_BOOL, 0, 1, OFF(stft_normalized)), \
	KEY("zero_dc", SB_MSST_BOOL, 0, 1, OFF(zero_dc)), \
	KEY("mask_estimator_depth", SB_MSST_INT, 1, 16, OFF(mask_depth)), \
	KEY("mlp_expansion_factor", SB_MSST_INT, 1, 64, OFF(mlp_mult)), \
	KEY("multi_stft_resolution_loss_weight", SB_MSST_FLOAT, 0, 0, NO), \
	KEY("multi_stft_resolutions_window_sizes", SB_MSST_ANY, 0, 0, NO), \
	KEY("multi_stft_hop_size", SB_MSST_INT, 1, 1 << 20, NO), \
	KEY("multi_stft_normalized", SB_MSST_BOOL, 0, 1, NO), \
	KEY("use_torch_checkpoint", SB_MSST_BOOL, 0, 1, NO), \
	KEY("skip_connection", SB_MSST_BOOL, 0, 1, OFF(skip)), \
	{"use_pope", SB_MSST_BOOL, 0, 1, NO, 0, 0, 0, "PoPE position embeddings are not implemented"}

static const sb_msst_key bs_keys[] = {
	COMMON_KEYS,
	{"freqs_per_bands", SB_MSST_INTS, 1, 1 << 20, OFF(freqs_per_band), OFF(n_bands),
	 SB_RF_MAX_BANDS, -1, NULL},
};
static const sb_msst_key mel_keys[] = {
	COMMON_KEYS,
	KEY("num_bands", SB_MSST_INT, 1, SB_RF_MAX_BANDS, OFF(n_bands)),
	KEY("sample_rate", SB_MSST_INT, 8000, 384000, OFF(sample_rate)),
	KEY("match_input_audio_length", SB_MSST_BOOL, 0, 1, NO),
};
#undef COMMON_KEYS
#undef KEY
#undef NO
#undef OFF

static void defaults(sb_rf_config *c, sb_rf_family f)
{
	memset(c, 0, sizeof *c);
	c->family = f;
	c->num_stems = 1;
	c->time_depth = c->freq_depth = 2;
	c->dim_head = 64;
	c->heads = 8;
	c->dim_freqs_in = 1025;
	c->n_fft = 2048;
	c->hop = 512;
	c->win = 2048;
	c->zero_dc = 1;
	c->mask_depth = f == SB_RF_MEL ? 1 : 2;
	c->mlp_mult = 4;
	c->n_bands = f == SB_RF_MEL ? 60 : 0;
	c->sample_rate = 44100;
}

static sb_status check(sb_msst_yaml *y, sb_rf_config *c)
{
	if (!c->dim || !c->depth) {
		sb_msst_fail(y, "model.%s: missing", !c->dim ? "dim" : "depth");
		return SB_ERR_FORMAT;
	}
	const int bins = c->n_fft / 2 + 1;
	if (c->dim_freqs_in != bins) {
		sb_msst_fail(y, "model.dim_freqs_in: %d, but stft_n_fft %d gives %d frequencies",
		             c->dim_freqs_in, c->n_fft, bins);
		return SB_ERR_FORMAT;
	}
	if (c->family == SB_RF_BS) {
		long sum = 0;
		for (int i = 0; i < c->n_bands; i++)
			sum += c->freqs_per_band[i];
		if (sum != bins) {
			sb_msst_fail(y, "model.freqs_per_bands: the bands hold %ld frequencies, but "
			             "stft_n_fft %d gives %d", sum, c->n_fft, bins);
			return SB_ERR_FORMAT;
		}
	}
	if (c->win > c->n_fft || c->dim_head % 2) {
		sb_msst_fail(y, c->win > c->n_fft ? "model.stft_win_length: longer than stft_n_fft"
		             : "model.dim_head: odd (rotary embeddings rotate pairs)");
		return SB_ERR_FORMAT;
	}
	if (c->m.num_channels != (c->stereo ? 2 : 1)) {
		sb_msst_fail(y, "audio.num_channels: %d, but model.stereo is %s", c->m.num_channels,
		             c->stereo ? "true" : "false");
		return SB_ERR_FORMAT;
	}
	const int want = c->m.target[0] ? 1 : c->m.n_instruments;
	if (c->num_stems != want) {
		sb_msst_fail(y, "model.num_stems: %d, but training.%s names %d", c->num_stems,
		             c->m.target[0] ? "target_instrument" : "instruments", want);
		return SB_ERR_FORMAT;
	}
	return sb_msst_check_stems(y, &c->m);
}

sb_status sb_rf_config_read(sb_msst_yaml *y, sb_rf_family f, sb_rf_config *c)
{
	defaults(c, f);
	sb_status st = f == SB_RF_MEL
	                   ? sb_msst_read_section(y, "model", mel_keys, sizeof mel_keys /
	                                          sizeof mel_keys[0], c, "Mel-Band RoFormer",
	                                          "mel_band_roformer")
	                   : sb_msst_read_section(y, "model", bs_keys, sizeof bs_keys /
	                                          sizeof bs_keys[0], c, "BS-RoFormer",
	                                          "bs_roformer");
	if (st == SB_OK)
		st = sb_msst_read_common(y, &c->m, c->n_fft);
	/* a config without audio.num_channels: the model's own */
	if (st == SB_OK && !sb_msst_has(y, "audio", "num_channels"))
		c->m.num_channels = c->stereo ? 2 : 1;
	return st == SB_OK ? check(y, c) : st;
}

sb_status sb_rf_config_parse(const char *text, size_t len, sb_rf_config *c, char *err,
                             size_t errlen)
{
	sb_msst_yaml *y = NULL;
	sb_status st = sb_msst_yaml_load(text, len, &y, err, errlen);
	if (st != SB_OK)
		return st;
	const sb_msst_family f = sb_msst_family_of(y, err, errlen);
	if (f != SB_MSST_BS_ROFORMER && f != SB_MSST_MEL_ROFORMER) {
		if (f != SB_MSST_NONE)
			sb_errorf(err, errlen, "model: the settings of %s, not a RoFormer",
			          sb_msst_family_name(f));
		st = SB_ERR_UNSUPPORTED;
	} else {
		st = sb_rf_config_read(y, f == SB_MSST_MEL_ROFORMER ? SB_RF_MEL : SB_RF_BS, c);
		if (st != SB_OK)
			sb_errorf(err, errlen, "%s", sb_msst_error(y));
	}
	sb_msst_yaml_free(y);
	return st;
}

int sb_rf_config_stems(const sb_rf_config *c, const char *names[SB_RF_MAX_STEMS])
{
	return sb_msst_stems(&c->m, names);
}

const char *sb_rf_family_name(sb_rf_family f)
{
	return f == SB_RF_MEL ? "mel_band_roformer" : "bs_roformer";
}

/* ---- the Mel-Band RoFormer's bands: librosa.filters.mel in double, as numpy computes it ---- */

static double hz_to_mel(double f)
{
	const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp,
	             logstep = log(6.4) / 27.0;
	return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) / logstep : f / f_sp;
}

static double mel_to_hz(double m)
{
	const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp,
	             logstep = log(6.4) / 27.0;
	return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : f_sp * m;
}

/* numpy.linspace(a, b, n): a + i step, the last value b exactly */
static double linspace(double a, double b, int n, int i)
{
	if (i == n - 1)
		return b;
	return a + (double)i * ((b - a) / (double)(n - 1));
}

sb_status sb_rf_mel_bands(int sample_rate, int n_fft, int n_bands, unsigned char *in)
{
	const int bins = n_fft / 2 + 1;
	double *fft = malloc(sizeof(double) * (size_t)bins);
	double *mel = malloc(sizeof(double) * (size_t)(n_bands + 2));
	if (!fft || !mel) {
		free(fft);
		free(mel);
		return SB_ERR_NOMEM;
	}
	for (int k = 0; k < bins; k++)
		fft[k] = linspace(0, sample_rate / 2.0, bins, k);
	const double lo = hz_to_mel(0), hi = hz_to_mel(sample_rate / 2.0);
	for (int i = 0; i < n_bands + 2; i++)
		mel[i] = mel_to_hz(linspace(lo, hi, n_bands + 2, i));
	for (int i = 0; i < n_bands; i++) {
		const double d0 = mel[i + 1] - mel[i], d1 = mel[i + 2] - mel[i + 1];
		const double enorm = 2.0 / (mel[i + 2] - mel[i]);
		for (int k = 0; k < bins; k++) {
			const double lower = -(mel[i] - fft[k]) / d0, upper = (mel[i + 2] - fft[k]) / d1;
			double w = lower < upper ? lower : upper;
			w = w > 0 ? w * enorm : 0;
			in[(size_t)i * bins + k] = (float)w > 0.f; /* librosa returns float32 */
		}
	}
	in[0] = 1;
	in[(size_t)(n_bands - 1) * bins + bins - 1] = 1;
	free(fft);
	free(mel);
	return SB_OK;
}

/* ---- the tensors a config asks for ---- */

static void emit(sb_rf_tensor_fn fn, void *user, int *n, const char *name, int64_t a, int64_t b)
{
	const int64_t shape[2] = {a, b};
	if (fn)
		fn(user, name, b ? 2 : 1, shape);
	(*n)++;
}

/* band input widths of a config (din[nb]); returns nb, or -1 */
static int band_widths(const sb_rf_config *c, int *din)
{
	const int ch = c->stereo ? 2 : 1, bins = c->n_fft / 2 + 1;
	if (c->family == SB_RF_BS) {
		for (int k = 0; k < c->n_bands; k++)
			din[k] = 2 * ch * c->freqs_per_band[k];
		return c->n_bands;
	}
	unsigned char *in = malloc((size_t)c->n_bands * bins);
	if (!in || sb_rf_mel_bands(c->sample_rate, c->n_fft, c->n_bands, in) != SB_OK) {
		free(in);
		return -1;
	}
	for (int k = 0; k < c->n_bands; k++) {
		int n = 0;
		for (int f = 0; f < bins; f++)
			n += in[(size_t)k * bins + f];
		din[k] = 2 * ch * n;
	}
	free(in);
	return c->n_bands;
}

int sb_roformer_tensors(const sb_rf_config *c, int flags, sb_rf_tensor_fn fn, void *user)
{
	int din[SB_RF_MAX_BANDS];
	const int nb = band_widths(c, din);
	if (nb < 0)
		return -1;
	const int dim = c->dim, inner = c->heads * c->dim_head, hid = dim * 4,
	          mh = dim * c->mlp_mult;
	char name[160];
	int n = 0;
	for (int k = 0; k < nb; k++) {
		snprintf(name, sizeof name, "band_split.to_features.%d.0.gamma", k);
		emit(fn, user, &n, name, din[k], 0);
		snprintf(name, sizeof name, "band_split.to_features.%d.1.weight", k);
		emit(fn, user, &n, name, dim, din[k]);
		snprintf(name, sizeof name, "band_split.to_features.%d.1.bias", k);
		emit(fn, user, &n, name, dim, 0);
	}
	for (int d = 0; d < c->depth; d++)
		for (int j = 0; j < 2; j++)
			for (int l = 0; l < (j ? c->freq_depth : c->time_depth); l++) {
				const char *pre = "layers.%d.%d.layers.%d.";
				char p[64];
				snprintf(p, sizeof p, pre, d, j, l);
#define T1(suffix, a) (snprintf(name, sizeof name, "%s%s", p, suffix), emit(fn, user, &n, name, a, 0))
#define T2(suffix, a, b) (snprintf(name, sizeof name, "%s%s", p, suffix), emit(fn, user, &n, name, a, b))
				T1("0.norm.gamma", dim);
				T2("0.to_qkv.weight", 3 * inner, dim);
				if (flags & SB_RF_ROPE_FREQS)
					T1("0.rotary_embed.freqs", c->dim_head / 2);
				if (flags & SB_RF_GATES) {
					T2("0.to_gates.weight", c->heads, dim);
					T1("0.to_gates.bias", c->heads);
				}
				T2("0.to_out.0.weight", dim, inner);
				T1("1.net.0.gamma", dim);
				T2("1.net.1.weight", hid, dim);
				T1("1.net.1.bias", hid);
				T2("1.net.4.weight", dim, hid);
				T1("1.net.4.bias", dim);
#undef T1
#undef T2
			}
	/* the Mel-Band RoFormer ends each transformer with an RMSNorm (norm_output), the
	 * BS-RoFormer ends the whole stack with one */
	if (c->family == SB_RF_MEL)
		for (int d = 0; d < c->depth; d++)
			for (int j = 0; j < 2; j++) {
				snprintf(name, sizeof name, "layers.%d.%d.norm.gamma", d, j);
				emit(fn, user, &n, name, dim, 0);
			}
	if (c->family == SB_RF_BS)
		emit(fn, user, &n, "final_norm.gamma", dim, 0);
	for (int s = 0; s < c->num_stems; s++)
		for (int k = 0; k < nb; k++)
			for (int l = 0; l < sb_rf_mask_layers(c); l++) {
				const int in = l ? mh : dim, out = l == sb_rf_mask_layers(c) - 1 ? 2 * din[k] : mh;
				snprintf(name, sizeof name, "mask_estimators.%d.to_freqs.%d.0.%d.weight", s, k,
				         2 * l);
				emit(fn, user, &n, name, out, in);
				snprintf(name, sizeof name, "mask_estimators.%d.to_freqs.%d.0.%d.bias", s, k,
				         2 * l);
				emit(fn, user, &n, name, out, 0);
			}
	return n;
}

