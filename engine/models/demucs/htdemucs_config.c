/* HTDemucs settings from safetensors metadata (see htdemucs.h). Keys are the keyword arguments
 * of HTDemucs.__init__ (demucs/htdemucs.py) written as strings; the settings the released
 * models change are read, every other known key must hold its default, since the forward pass
 * here implements only that configuration. Unknown keys ("reference", "seed") are ignored. */
#include "models/demucs/htdemucs.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_NUM, K_BOOL, K_NONE, K_STR } key_kind;

/* Settings fixed at HTDemucs.__init__'s defaults in this engine. */
static const struct {
	const char *key;
	key_kind kind;
	double num;      /* K_NUM, K_BOOL (0/1) */
	const char *str; /* K_STR */
} fixed[] = {
	{"growth", K_NUM, 2, NULL},           {"nfft", K_NUM, 4096, NULL},
	{"wiener_iters", K_NUM, 0, NULL},     {"end_iters", K_NUM, 0, NULL},
	{"wiener_residual", K_BOOL, 0, NULL}, {"cac", K_BOOL, 1, NULL},
	{"depth", K_NUM, 4, NULL},            {"rewrite", K_BOOL, 1, NULL},
	{"multi_freqs", K_NONE, 0, NULL},     {"freq_emb", K_NUM, 0.2, NULL},
	{"emb_scale", K_NUM, 10, NULL},       {"emb_smooth", K_BOOL, 1, NULL},
	{"kernel_size", K_NUM, 8, NULL},      {"time_stride", K_NUM, 2, NULL},
	{"stride", K_NUM, 4, NULL},           {"context", K_NUM, 1, NULL},
	{"context_enc", K_NUM, 0, NULL},      {"norm_starts", K_NUM, 4, NULL},
	{"norm_groups", K_NUM, 4, NULL},      {"dconv_depth", K_NUM, 2, NULL},
	{"dconv_comp", K_NUM, 8, NULL},       {"t_emb", K_STR, 0, "sin"},
	{"t_hidden_scale", K_NUM, 4, NULL},   {"t_norm_in", K_BOOL, 1, NULL},
	{"t_norm_in_group", K_BOOL, 0, NULL}, {"t_group_norm", K_BOOL, 0, NULL},
	{"t_norm_first", K_BOOL, 1, NULL},    {"t_norm_out", K_BOOL, 1, NULL},
	{"t_max_period", K_NUM, 10000, NULL}, {"t_layer_scale", K_BOOL, 1, NULL},
	{"t_gelu", K_BOOL, 1, NULL},          {"t_weight_pos_embed", K_NUM, 1, NULL},
	{"t_sin_random_shift", K_NUM, 0, NULL},
	{"t_sparse_self_attn", K_BOOL, 0, NULL},
	{"t_sparse_cross_attn", K_BOOL, 0, NULL},
	{"t_cross_first", K_BOOL, 0, NULL},   {"use_train_segment", K_BOOL, 1, NULL},
};

static int parse_num(const char *s, double *v)
{
	char *end;
	*v = strtod(s, &end);
	while (end != s && isspace((unsigned char)*end))
		end++;
	return end != s && *end == 0 && isfinite(*v);
}

static int parse_bool(const char *s, int *v)
{
	static const char *const yes[] = {"1", "true", "True", "TRUE", NULL};
	static const char *const no[] = {"0", "false", "False", "FALSE", NULL};
	for (int i = 0; yes[i]; i++)
		if (!strcmp(s, yes[i]))
			return *v = 1, 1;
	for (int i = 0; no[i]; i++)
		if (!strcmp(s, no[i]))
			return *v = 0, 1;
	return 0;
}

static int is_none(const char *s)
{
	return !*s || !strcmp(s, "None") || !strcmp(s, "none") || !strcmp(s, "null") ||
	       !strcmp(s, "[]");
}

/* "<prefix><key>", else the file-wide "<key>" (a bag keeps its shared settings unprefixed) */
static const char *meta(const sb_safetensors *st, const char *prefix, const char *key)
{
	char k[128];
	snprintf(k, sizeof k, "%s%s", prefix, key);
	const char *v = sb_safetensors_meta(st, k);
	return v || !*prefix ? v : sb_safetensors_meta(st, key);
}

/* An integer setting in [lo, hi], or its default when absent. */
static sb_status read_int(const sb_safetensors *st, const char *prefix, const char *key, int def,
                          int lo, int hi, const char *what, const sb_logger *log, int *out)
{
	const char *s = meta(st, prefix, key);
	double v = def;
	if (s && (!parse_num(s, &v) || v != floor(v) || v < lo || v > hi)) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%s%s\" = \"%s\": expected an integer in "
		       "[%d, %d]", what, sb_safetensors_path(st), prefix, key, s, lo, hi);
		return SB_ERR_MODEL;
	}
	*out = (int)v;
	return SB_OK;
}

sb_status sb_htdemucs_config_read(const sb_safetensors *st, const char *prefix, const char *what,
                                  const sb_logger *log, sb_htdemucs_config *c)
{
	memset(c, 0, sizeof *c);
	const char *path = sb_safetensors_path(st);
	const char *src = meta(st, prefix, "sources");
	if (!src) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%ssources\" is missing (the source names, "
		       "comma separated, in the network's output order)", what, path, prefix);
		return SB_ERR_MODEL;
	}
	/* "drums,bass,other,vocals", also accepting a JSON-ish list ["drums", "bass"] */
	char buf[512];
	snprintf(buf, sizeof buf, "%s", src);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",[]", &save); tok; tok = strtok_r(NULL, ",[]", &save)) {
		while (*tok == ' ' || *tok == '"' || *tok == '\'')
			tok++;
		size_t n = strlen(tok);
		while (n && (tok[n - 1] == ' ' || tok[n - 1] == '"' || tok[n - 1] == '\''))
			tok[--n] = 0;
		if (!n)
			continue;
		if (c->n_sources == SB_HTDEMUCS_MAX_SOURCES || n >= sizeof c->sources[0]) {
			sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%ssources\" = \"%s\": at most %d "
			       "sources of at most 31 characters", what, path, prefix, src,
			       SB_HTDEMUCS_MAX_SOURCES);
			return SB_ERR_MODEL;
		}
		memcpy(c->sources[c->n_sources++], tok, n + 1);
	}
	if (c->n_sources == 0) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%ssources\" names no source", what, path,
		       prefix);
		return SB_ERR_MODEL;
	}
	sb_status s;
	if ((s = read_int(st, prefix, "audio_channels", 2, 1, 2, what, log, &c->audio_channels)) ||
	    (s = read_int(st, prefix, "channels", 48, 8, 4096, what, log, &c->channels)) ||
	    (s = read_int(st, prefix, "bottom_channels", 0, 0, 65536, what, log,
	                  &c->bottom_channels)) ||
	    (s = read_int(st, prefix, "t_layers", 5, 0, 64, what, log, &c->t_layers)) ||
	    (s = read_int(st, prefix, "t_heads", 8, 1, 256, what, log, &c->t_heads)) ||
	    (s = read_int(st, prefix, "dconv_mode", 1, 0, 3, what, log, &c->dconv_mode)) ||
	    (s = read_int(st, prefix, "samplerate", 44100, 1000, 384000, what, log, &c->samplerate)))
		return s;
	if (c->channels % 8) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: channels = %d: this engine needs a multiple of 8", what,
		       path, c->channels);
		return SB_ERR_MODEL;
	}
	const char *ct = meta(st, prefix, "channels_time");
	double ctv;
	if (ct && !is_none(ct) && !(parse_num(ct, &ctv) && ctv == c->channels)) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%schannels_time\" = \"%s\" is not supported "
		       "(the time branch must have the frequency branch's width)", what, path, prefix, ct);
		return SB_ERR_MODEL;
	}
	const int dim = c->bottom_channels ? c->bottom_channels : c->channels * 8;
	if (c->t_layers > 0 && (dim % c->t_heads || dim % 4)) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: the transformer width %d must be a multiple of 4 and "
		       "of t_heads = %d", what, path, dim, c->t_heads);
		return SB_ERR_MODEL;
	}

	/* segment: seconds, as "39/5" (a Fraction) or a decimal */
	const char *seg = meta(st, prefix, "segment");
	c->segment_num = 10;
	c->segment_den = 1;
	if (seg) {
		long a = 0, b = 1;
		char tail = 0;
		double v;
		if (sscanf(seg, "%ld/%ld%c", &a, &b, &tail) == 2 && a > 0 && b > 0 && a < 100000 &&
		    b < 100000) {
			c->segment_num = (int)a;
			c->segment_den = (int)b;
		} else if (parse_num(seg, &v) && v > 0 && v < 3600) {
			/* a decimal: keep 1/1000 s resolution */
			c->segment_num = (int)lround(v * 1000);
			c->segment_den = 1000;
		} else {
			sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%ssegment\" = \"%s\": expected seconds "
			       "as a fraction (\"39/5\") or a number", what, path, prefix, seg);
			return SB_ERR_MODEL;
		}
	}
	c->segment_length = (int64_t)c->segment_num * c->samplerate / c->segment_den;
	if (c->segment_length < 4096 * 4) {
		sb_log(log, SB_LOG_ERROR, "%s: %s: segment of %lld samples is too short", what, path,
		       (long long)c->segment_length);
		return SB_ERR_MODEL;
	}

	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
		const char *v = meta(st, prefix, fixed[i].key);
		if (!v)
			continue;
		int ok = 0;
		double num;
		int b;
		switch (fixed[i].kind) {
		case K_NUM:
			ok = parse_num(v, &num) && fabs(num - fixed[i].num) <= 1e-9 * fabs(fixed[i].num);
			break;
		case K_BOOL:
			ok = parse_bool(v, &b) && b == (int)fixed[i].num;
			break;
		case K_NONE:
			ok = is_none(v);
			break;
		case K_STR:
			ok = !strcmp(v, fixed[i].str);
			break;
		}
		if (!ok) {
			char def[32];
			if (fixed[i].kind == K_STR)
				snprintf(def, sizeof def, "%s", fixed[i].str);
			else if (fixed[i].kind == K_NONE)
				snprintf(def, sizeof def, "None");
			else if (fixed[i].kind == K_BOOL)
				snprintf(def, sizeof def, "%s", fixed[i].num ? "True" : "False");
			else
				snprintf(def, sizeof def, "%g", fixed[i].num);
			sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"%s%s\" = \"%s\" is not supported (this "
			       "engine implements HTDemucs with %s = %s)", what, path, prefix, fixed[i].key, v,
			       fixed[i].key, def);
			return SB_ERR_MODEL;
		}
	}
	return SB_OK;
}
