/* An MDX23C's MSST configuration (mdx23c_config.h). */
#include "convert/mdx23c_config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(sb_mdx23c_config, f)
#define KEY(k, kind, lo, hi, off) {k, kind, lo, hi, off, 0, 0, -1, NULL}
/* what TFC_TDF_net reads of config.model */
static const sb_msst_key model_keys[] = {
	KEY("act", SB_MSST_STRING, 0, 0, OFF(act)),
	KEY("norm", SB_MSST_STRING, 0, 0, OFF(norm_name)),
	KEY("num_subbands", SB_MSST_INT, 1, 64, OFF(num_subbands)),
	KEY("num_scales", SB_MSST_INT, 0, SB_MDX_MAX_SCALES, OFF(num_scales)),
	{"scale", SB_MSST_INTS, 1, 16, OFF(scale), OFF(n_scale), 2, -1, NULL},
	KEY("num_blocks_per_scale", SB_MSST_INT, 1, 16, OFF(blocks)),
	KEY("num_channels", SB_MSST_INT, 1, 4096, OFF(channels)),
	KEY("growth", SB_MSST_INT, 0, 4096, OFF(growth)),
	KEY("bottleneck_factor", SB_MSST_INT, 1, 1024, OFF(bottleneck)),
};
/* and of config.audio, beside the common keys */
static const sb_msst_key audio_keys[] = {
	KEY("n_fft", SB_MSST_INT, 8, 8192, OFF(n_fft)),
	KEY("hop_length", SB_MSST_INT, 1, 8192, OFF(hop)),
	KEY("dim_f", SB_MSST_INT, 1, 4097, OFF(dim_f)),
	KEY("dim_t", SB_MSST_INT, 1, 1 << 20, OFF(dim_t)),
};
#undef KEY
#undef OFF

static sb_status check(sb_msst_yaml *y, sb_mdx23c_config *c)
{
	static const char *const need[] = {"act", "norm", "num_subbands", "num_scales", "scale",
	                                   "num_blocks_per_scale", "num_channels", "growth",
	                                   "bottleneck_factor"};
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
		if (!sb_msst_has(y, "model", need[i])) {
			sb_msst_fail(y, "model.%s: missing (MDX23C reads it)", need[i]);
			return SB_ERR_FORMAT;
		}
	static const char *const need_audio[] = {"n_fft", "hop_length", "dim_f"};
	for (size_t i = 0; i < sizeof need_audio / sizeof need_audio[0]; i++)
		if (!sb_msst_has(y, "audio", need_audio[i])) {
			sb_msst_fail(y, "audio.%s: missing (MDX23C's STFT reads it)", need_audio[i]);
			return SB_ERR_FORMAT;
		}
	if (strcmp(c->act, "gelu")) {
		sb_msst_fail(y, "model.act: '%s' is not supported (gelu is)", c->act);
		return SB_ERR_UNSUPPORTED;
	}
	/* get_norm: BatchNorm, InstanceNorm, GroupNorm<g>, anything else none */
	if (!strcmp(c->norm_name, "InstanceNorm")) {
		c->norm = SB_MDX_NORM_INSTANCE;
	} else if (strstr(c->norm_name, "GroupNorm")) {
		char rest[32];
		const char *at = strstr(c->norm_name, "GroupNorm");
		snprintf(rest, sizeof rest, "%.*s%s", (int)(at - c->norm_name), c->norm_name,
		         at + strlen("GroupNorm"));
		char *end = NULL;
		const long g = strtol(rest, &end, 10);
		if (!*rest || *end || g < 1 || g > 4096) {
			sb_msst_fail(y, "model.norm: '%s' names no group count", c->norm_name);
			return SB_ERR_FORMAT;
		}
		c->norm = SB_MDX_NORM_GROUP;
		c->norm_groups = (int)g;
	} else if (!strcmp(c->norm_name, "BatchNorm")) {
		sb_msst_fail(y, "model.norm: 'BatchNorm' is not supported (InstanceNorm, GroupNorm<g> "
		             "and none are)");
		return SB_ERR_UNSUPPORTED;
	} else {
		c->norm = SB_MDX_NORM_NONE;
	}
	if (c->n_scale != 2) {
		sb_msst_fail(y, "model.scale: %d values where MDX23C takes two (time, frequency)",
		             c->n_scale);
		return SB_ERR_FORMAT;
	}
	if (c->n_fft & (c->n_fft - 1)) {
		sb_msst_fail(y, "audio.n_fft: %d is not a power of two (not supported)", c->n_fft);
		return SB_ERR_UNSUPPORTED;
	}
	if (c->hop > c->n_fft || c->dim_f > c->n_fft / 2 + 1) {
		sb_msst_fail(y, c->hop > c->n_fft ? "audio.hop_length: longer than n_fft"
		             : "audio.dim_f: %d, more than n_fft's %d frequencies", c->dim_f,
		             c->n_fft / 2 + 1);
		return SB_ERR_FORMAT;
	}
	if (c->m.num_channels < 1 || c->m.num_channels > 2) {
		sb_msst_fail(y, "audio.num_channels: %d (1 or 2)", c->m.num_channels);
		return SB_ERR_FORMAT;
	}
	/* the U-Net's shapes: the frequencies split into subbands, then halved (scale) at every
	 * level; the frames likewise; the inverse STFT gives the chunk back whole */
	long fdiv = c->num_subbands, tdiv = 1;
	for (int i = 0; i < c->num_scales; i++)
		fdiv *= c->scale[1], tdiv *= c->scale[0];
	c->frames = (int)(c->m.chunk_size / c->hop + 1);
	if (c->dim_f % fdiv || c->m.chunk_size % c->hop || c->frames % tdiv) {
		sb_msst_fail(y, c->dim_f % fdiv
		             ? "audio.dim_f: %d is not a multiple of num_subbands x scale[1]^num_scales"
		             : c->m.chunk_size % c->hop
		             ? "audio.chunk_size: not a multiple of hop_length (the inverse STFT would "
		               "not give the chunk back)"
		             : "audio.chunk_size: its frames are not a multiple of "
		               "scale[0]^num_scales", c->dim_f);
		return SB_ERR_UNSUPPORTED;
	}
	int f = c->dim_f / c->num_subbands;
	for (int i = 0; i <= c->num_scales; i++, f /= c->scale[1])
		if (f / c->bottleneck < 1) {
			sb_msst_fail(y, "model.bottleneck_factor: %d leaves no feature of %d frequencies",
			             c->bottleneck, f);
			return SB_ERR_FORMAT;
		}
	if (c->channels + c->num_scales * c->growth > 65536 ||
	    (c->norm == SB_MDX_NORM_GROUP && c->channels % c->norm_groups)) {
		sb_msst_fail(y, "model.%s", c->norm == SB_MDX_NORM_GROUP
		             ? "norm: the channels are not a multiple of its groups"
		             : "num_channels: too wide");
		return SB_ERR_FORMAT;
	}
	c->stems = c->m.target[0] ? 1 : c->m.n_instruments;
	return sb_msst_check_stems(y, &c->m);
}

sb_status sb_mdx23c_config_read(sb_msst_yaml *y, sb_mdx23c_config *c)
{
	memset(c, 0, sizeof *c);
	sb_status st = sb_msst_read_section(y, "model", model_keys,
	                                    sizeof model_keys / sizeof model_keys[0], c, "MDX23C",
	                                    "mdx23c");
	for (size_t i = 0; st == SB_OK && i < sizeof audio_keys / sizeof audio_keys[0]; i++)
		st = sb_msst_read_key(y, "audio", &audio_keys[i], c);
	if (st == SB_OK)
		st = sb_msst_read_common(y, &c->m, 1);
	return st == SB_OK ? check(y, c) : st;
}

sb_status sb_mdx23c_config_parse(const char *text, size_t len, sb_mdx23c_config *c, char *err,
                                 size_t errlen)
{
	sb_msst_yaml *y = NULL;
	sb_status st = sb_msst_yaml_load(text, len, &y, err, errlen);
	if (st != SB_OK)
		return st;
	st = sb_mdx23c_config_read(y, c);
	if (st != SB_OK)
		sb_errorf(err, errlen, "%s", sb_msst_error(y));
	sb_msst_yaml_free(y);
	return st;
}

/* ---- the tensors ---- */

#define t sb_msst_emit

/* Sequential(norm, act, ...): the norm's affine parameters at index 0, where it has them */
static void norm_t(sb_msst_emitter *e, const sb_mdx23c_config *c, int ch, const char *pre)
{
	if (c->norm == SB_MDX_NORM_NONE)
		return;
	t(e, 1, ch, 0, 0, 0, "%s.weight", pre);
	t(e, 1, ch, 0, 0, 0, "%s.bias", pre);
}

static void tfc_tdf(sb_msst_emitter *e, const sb_mdx23c_config *c, const char *pre, int in_c,
                    int ch, int f)
{
	char p[160];
	for (int l = 0; l < c->blocks; l++) {
		snprintf(p, sizeof p, "%s.blocks.%d.tfc1.0", pre, l);
		norm_t(e, c, in_c, p);
		t(e, 4, ch, in_c, 3, 3, "%s.blocks.%d.tfc1.2.weight", pre, l);
		snprintf(p, sizeof p, "%s.blocks.%d.tdf.0", pre, l);
		norm_t(e, c, ch, p);
		t(e, 2, f / c->bottleneck, f, 0, 0, "%s.blocks.%d.tdf.2.weight", pre, l);
		snprintf(p, sizeof p, "%s.blocks.%d.tdf.3", pre, l);
		norm_t(e, c, ch, p);
		t(e, 2, f, f / c->bottleneck, 0, 0, "%s.blocks.%d.tdf.5.weight", pre, l);
		snprintf(p, sizeof p, "%s.blocks.%d.tfc2.0", pre, l);
		norm_t(e, c, ch, p);
		t(e, 4, ch, ch, 3, 3, "%s.blocks.%d.tfc2.2.weight", pre, l);
		t(e, 4, ch, in_c, 1, 1, "%s.blocks.%d.shortcut.weight", pre, l);
		in_c = ch;
	}
}

int sb_mdx23c_tensors(const sb_mdx23c_config *c, sb_msst_tensor_fn fn, void *user)
{
	sb_msst_emitter e = {fn, user, 0, ""};
	const int dim_c = c->num_subbands * c->m.num_channels * 2, g = c->growth;
	int ch = c->channels, f = c->dim_f / c->num_subbands;
	char p[160];
	t(&e, 4, ch, dim_c, 1, 1, "first_conv.weight");
	for (int i = 0; i < c->num_scales; i++) {
		snprintf(p, sizeof p, "encoder_blocks.%d.tfc_tdf", i);
		tfc_tdf(&e, c, p, ch, ch, f);
		snprintf(p, sizeof p, "encoder_blocks.%d.downscale.conv.0", i);
		norm_t(&e, c, ch, p);
		t(&e, 4, ch + g, ch, c->scale[0], c->scale[1], "encoder_blocks.%d.downscale.conv.2.weight",
		  i);
		f /= c->scale[1];
		ch += g;
	}
	tfc_tdf(&e, c, "bottleneck_block", ch, ch, f);
	for (int i = 0; i < c->num_scales; i++) {
		snprintf(p, sizeof p, "decoder_blocks.%d.upscale.conv.0", i);
		norm_t(&e, c, ch, p);
		t(&e, 4, ch, ch - g, c->scale[0], c->scale[1], "decoder_blocks.%d.upscale.conv.2.weight",
		  i);
		f *= c->scale[1];
		ch -= g;
		snprintf(p, sizeof p, "decoder_blocks.%d.tfc_tdf", i);
		tfc_tdf(&e, c, p, 2 * ch, ch, f);
	}
	t(&e, 4, ch, ch + dim_c, 1, 1, "final_conv.0.weight");
	t(&e, 4, c->stems * dim_c, ch, 1, 1, "final_conv.2.weight");
	return e.n;
}
#undef t
