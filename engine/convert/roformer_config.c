/* A RoFormer's MSST YAML configuration, read with libyaml's document loader
 * (roformer_config.h). */
#include "convert/roformer_config.h"

#include "io/stream.h"

#include <yaml.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
	yaml_document_t *doc;
	char *err;
	size_t errlen;
} rd;

static yaml_node_t *node(rd *r, int id)
{
	return yaml_document_get_node(r->doc, id);
}

static const char *scalar(rd *r, int id)
{
	yaml_node_t *n = node(r, id);
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* the value node of key in a mapping node, 0 if absent */
static int lookup(rd *r, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(r, p->key);
		if (k && !strcmp(k, key))
			return p->value;
	}
	return 0;
}

static sb_status get_int(rd *r, const char *sect, const char *key, int id, long lo, long hi,
                         long *out)
{
	const char *s = scalar(r, id);
	char *end = NULL;
	errno = 0;
	const long v = s ? strtol(s, &end, 10) : 0;
	if (!s || end == s || *end || errno || v < lo || v > hi) {
		sb_errorf(r->err, r->errlen, "%s.%s: expected a whole number from %ld to %ld, found "
		          "'%s'", sect, key, lo, hi, s ? s : "(not a value)");
		return SB_ERR_FORMAT;
	}
	*out = v;
	return SB_OK;
}

static sb_status get_bool(rd *r, const char *sect, const char *key, int id, int *out)
{
	const char *s = scalar(r, id);
	if (s && (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes"))) {
		*out = 1;
		return SB_OK;
	}
	if (s && (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no"))) {
		*out = 0;
		return SB_OK;
	}
	sb_errorf(r->err, r->errlen, "%s.%s: expected true or false, found '%s'", sect, key,
	          s ? s : "(not a value)");
	return SB_ERR_FORMAT;
}

static sb_status get_float(rd *r, const char *sect, const char *key, int id, double *out)
{
	const char *s = scalar(r, id);
	char *end = NULL;
	const double v = s ? strtod(s, &end) : 0;
	if (!s || end == s || *end) {
		sb_errorf(r->err, r->errlen, "%s.%s: expected a number, found '%s'", sect, key,
		          s ? s : "(not a value)");
		return SB_ERR_FORMAT;
	}
	*out = v;
	return SB_OK;
}

/* A sequence (a list or a !!python/tuple) of whole numbers; n = its length. */
static sb_status get_ints(rd *r, const char *sect, const char *key, int id, int *out, int cap,
                          int *n)
{
	yaml_node_t *seq = node(r, id);
	if (!seq || seq->type != YAML_SEQUENCE_NODE) {
		sb_errorf(r->err, r->errlen, "%s.%s: expected a list of whole numbers", sect, key);
		return SB_ERR_FORMAT;
	}
	*n = 0;
	for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
	     it++) {
		long v;
		sb_status st = get_int(r, sect, key, *it, 1, 1 << 20, &v);
		if (st != SB_OK)
			return st;
		if (*n == cap) {
			sb_errorf(r->err, r->errlen, "%s.%s: more than %d values", sect, key, cap);
			return SB_ERR_UNSUPPORTED;
		}
		out[(*n)++] = (int)v;
	}
	return SB_OK;
}

/* ---- model: every constructor argument of BSRoformer and MelBandRoformer ---- */

enum { K_INT, K_BOOL, K_FLOAT, K_INTS, K_ANY };
enum { F_BS = 1, F_MEL = 2, F_BOTH = 3 };

typedef struct {
	const char *key;
	int kind, families;
	long lo, hi;
	int must; /* for a K_BOOL or K_INT with an effect we do not compute: the only accepted
	             value (-1: any) */
} model_key;

static const model_key model_keys[] = {
	{"dim", K_INT, F_BOTH, 1, 8192, -1},
	{"depth", K_INT, F_BOTH, 1, 256, -1},
	{"stereo", K_BOOL, F_BOTH, 0, 1, -1},
	{"num_stems", K_INT, F_BOTH, 1, SB_RF_MAX_STEMS, -1},
	{"time_transformer_depth", K_INT, F_BOTH, 1, 64, -1},
	{"freq_transformer_depth", K_INT, F_BOTH, 1, 64, -1},
	{"linear_transformer_depth", K_INT, F_BOTH, 0, 64, 0},
	{"freqs_per_bands", K_INTS, F_BS, 0, 0, -1},
	{"num_bands", K_INT, F_MEL, 1, SB_RF_MAX_BANDS, -1},
	{"sample_rate", K_INT, F_MEL, 8000, 384000, -1},
	{"dim_head", K_INT, F_BOTH, 2, 1024, -1},
	{"heads", K_INT, F_BOTH, 1, 128, -1},
	{"attn_dropout", K_FLOAT, F_BOTH, 0, 0, -1},
	{"ff_dropout", K_FLOAT, F_BOTH, 0, 0, -1},
	{"flash_attn", K_BOOL, F_BOTH, 0, 1, -1},
	{"sage_attention", K_BOOL, F_BOTH, 0, 1, -1},
	{"dim_freqs_in", K_INT, F_BOTH, 2, 1 << 16, -1},
	{"stft_n_fft", K_INT, F_BOTH, 16, 1 << 16, -1},
	{"stft_hop_length", K_INT, F_BOTH, 1, 1 << 16, -1},
	{"stft_win_length", K_INT, F_BOTH, 2, 1 << 16, -1},
	{"stft_normalized", K_BOOL, F_BOTH, 0, 1, -1},
	{"zero_dc", K_BOOL, F_BOTH, 0, 1, -1},
	{"mask_estimator_depth", K_INT, F_BOTH, 1, 16, -1},
	{"mlp_expansion_factor", K_INT, F_BOTH, 1, 64, -1},
	{"multi_stft_resolution_loss_weight", K_FLOAT, F_BOTH, 0, 0, -1},
	{"multi_stft_resolutions_window_sizes", K_ANY, F_BOTH, 0, 0, -1},
	{"multi_stft_hop_size", K_INT, F_BOTH, 1, 1 << 20, -1},
	{"multi_stft_normalized", K_BOOL, F_BOTH, 0, 1, -1},
	{"use_torch_checkpoint", K_BOOL, F_BOTH, 0, 1, -1},
	{"skip_connection", K_BOOL, F_BOTH, 0, 1, -1},
	{"use_pope", K_BOOL, F_BOTH, 0, 1, 0},
	{"match_input_audio_length", K_BOOL, F_MEL, 0, 1, -1},
};
#define N_MODEL_KEYS (sizeof model_keys / sizeof model_keys[0])

static const model_key *find_key(const char *k)
{
	for (size_t i = 0; i < N_MODEL_KEYS; i++)
		if (!strcmp(model_keys[i].key, k))
			return &model_keys[i];
	return NULL;
}

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
	c->audio_rate = 44100;
	c->num_channels = 2;
	c->batch_size = 1;
	c->num_overlap = 4;
}

static sb_status read_model(rd *r, yaml_node_t *m, sb_rf_config *c)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(r, p->key);
		const model_key *mk = k ? find_key(k) : NULL;
		const int fam = c->family == SB_RF_MEL ? F_MEL : F_BS;
		if (!mk || !(mk->families & fam)) {
			sb_errorf(r->err, r->errlen, "model.%s: not a setting of %s (MSST's %s takes no "
			          "such argument)", k ? k : "?", c->family == SB_RF_MEL ?
			          "Mel-Band RoFormer" : "BS-RoFormer", sb_rf_family_name(c->family));
			return SB_ERR_UNSUPPORTED;
		}
		long v = 0;
		int b = 0, n = 0;
		double f = 0;
		sb_status st = SB_OK;
		switch (mk->kind) {
		case K_INT: st = get_int(r, "model", k, p->value, mk->lo, mk->hi, &v); break;
		case K_BOOL: st = get_bool(r, "model", k, p->value, &b); v = b; break;
		case K_FLOAT: st = get_float(r, "model", k, p->value, &f); break;
		case K_INTS:
			st = get_ints(r, "model", k, p->value, c->freqs_per_band, SB_RF_MAX_BANDS, &n);
			break;
		default: break;
		}
		if (st != SB_OK)
			return st;
		if (mk->must >= 0 && v != mk->must) {
			sb_errorf(r->err, r->errlen, "model.%s: %ld is not supported (%s)", k, v,
			          !strcmp(k, "linear_transformer_depth")
			              ? "linear attention layers are not implemented"
			              : "PoPE position embeddings are not implemented");
			return SB_ERR_UNSUPPORTED;
		}
		if (!strcmp(k, "dim")) c->dim = (int)v;
		else if (!strcmp(k, "depth")) c->depth = (int)v;
		else if (!strcmp(k, "stereo")) c->stereo = b;
		else if (!strcmp(k, "num_stems")) c->num_stems = (int)v;
		else if (!strcmp(k, "time_transformer_depth")) c->time_depth = (int)v;
		else if (!strcmp(k, "freq_transformer_depth")) c->freq_depth = (int)v;
		else if (!strcmp(k, "freqs_per_bands")) c->n_bands = n;
		else if (!strcmp(k, "num_bands")) c->n_bands = (int)v;
		else if (!strcmp(k, "sample_rate")) c->sample_rate = (int)v;
		else if (!strcmp(k, "dim_head")) c->dim_head = (int)v;
		else if (!strcmp(k, "heads")) c->heads = (int)v;
		else if (!strcmp(k, "dim_freqs_in")) c->dim_freqs_in = (int)v;
		else if (!strcmp(k, "stft_n_fft")) c->n_fft = (int)v;
		else if (!strcmp(k, "stft_hop_length")) c->hop = (int)v;
		else if (!strcmp(k, "stft_win_length")) c->win = (int)v;
		else if (!strcmp(k, "stft_normalized")) c->stft_normalized = b;
		else if (!strcmp(k, "zero_dc")) c->zero_dc = b;
		else if (!strcmp(k, "mask_estimator_depth")) c->mask_depth = (int)v;
		else if (!strcmp(k, "mlp_expansion_factor")) c->mlp_mult = (int)v;
		else if (!strcmp(k, "skip_connection")) c->skip = b;
	}
	return SB_OK;
}

static sb_status check(rd *r, sb_rf_config *c)
{
	if (!c->dim || !c->depth) {
		sb_errorf(r->err, r->errlen, "model.%s: missing", !c->dim ? "dim" : "depth");
		return SB_ERR_FORMAT;
	}
	const int bins = c->n_fft / 2 + 1;
	if (c->dim_freqs_in != bins) {
		sb_errorf(r->err, r->errlen, "model.dim_freqs_in: %d, but stft_n_fft %d gives %d "
		          "frequencies", c->dim_freqs_in, c->n_fft, bins);
		return SB_ERR_FORMAT;
	}
	if (c->family == SB_RF_BS) {
		long sum = 0;
		for (int i = 0; i < c->n_bands; i++)
			sum += c->freqs_per_band[i];
		if (sum != bins) {
			sb_errorf(r->err, r->errlen, "model.freqs_per_bands: the bands hold %ld "
			          "frequencies, but stft_n_fft %d gives %d", sum, c->n_fft, bins);
			return SB_ERR_FORMAT;
		}
	}
	if (c->win > c->n_fft || c->dim_head % 2) {
		sb_errorf(r->err, r->errlen, c->win > c->n_fft
		          ? "model.stft_win_length: longer than stft_n_fft"
		          : "model.dim_head: odd (rotary embeddings rotate pairs)");
		return SB_ERR_FORMAT;
	}
	if (c->num_channels != (c->stereo ? 2 : 1)) {
		sb_errorf(r->err, r->errlen, "audio.num_channels: %d, but model.stereo is %s",
		          c->num_channels, c->stereo ? "true" : "false");
		return SB_ERR_FORMAT;
	}
	if (c->chunk_size < c->n_fft || c->chunk_size > (int64_t)1 << 26) {
		sb_errorf(r->err, r->errlen, "audio.chunk_size: %lld is %s", (long long)c->chunk_size,
		          c->chunk_size ? "out of range" : "missing");
		return SB_ERR_FORMAT;
	}
	if (c->num_overlap < 1 || c->chunk_size / c->num_overlap < 1) {
		sb_errorf(r->err, r->errlen, "inference.num_overlap: must be at least 1");
		return SB_ERR_FORMAT;
	}
	const int want = c->target[0] ? 1 : c->n_instruments;
	if (c->num_stems != want) {
		sb_errorf(r->err, r->errlen, "model.num_stems: %d, but training.%s names %d",
		          c->num_stems, c->target[0] ? "target_instrument" : "instruments", want);
		return SB_ERR_FORMAT;
	}
	if (c->target[0]) {
		int found = 0;
		for (int i = 0; i < c->n_instruments; i++)
			found |= !strcmp(c->instruments[i], c->target);
		if (!found) {
			sb_errorf(r->err, r->errlen, "training.target_instrument: '%s' is not one of "
			          "training.instruments", c->target);
			return SB_ERR_FORMAT;
		}
	}
	/* Each stem the network makes is written under its own name, so it must be one this build
	 * writes: a drum kit's "kick" and "snare" would otherwise fold into one "other" file, and a
	 * separation that loses stems is not a success. (A target model's rest of the mix is
	 * written as "other" whatever the config calls it.) */
	char known[128] = "";
	for (int k = 0; k < SB_N_KNOWN_STEMS; k++) {
		const size_t at = strlen(known);
		snprintf(known + at, sizeof known - at, "%s%s", k ? ", " : "", sb_stem_names[k]);
	}
	for (int i = 0; i < want; i++) {
		const char *name = c->target[0] ? c->target : c->instruments[i];
		if (sb_stem_index(name) < 0) {
			sb_errorf(r->err, r->errlen, "training.%s: '%s' is not a stem Stembridge writes "
			          "(%s)", c->target[0] ? "target_instrument" : "instruments", name, known);
			return SB_ERR_FORMAT;
		}
		for (int k = 0; k < i; k++)
			if (!strcmp(name, c->instruments[k])) {
				sb_errorf(r->err, r->errlen, "training.instruments: '%s' twice", name);
				return SB_ERR_FORMAT;
			}
	}
	return SB_OK;
}

sb_status sb_rf_config_parse(const char *text, size_t len, sb_rf_config *c, char *err,
                             size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser)) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		sb_errorf(err, errlen, "not a YAML file: %s at line %zu",
		          parser.problem ? parser.problem : "unreadable",
		          parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		return SB_ERR_FORMAT;
	}
	yaml_parser_delete(&parser);
	rd r = {&doc, err, errlen};
	sb_status st = SB_OK;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	yaml_node_t *model = node(&r, lookup(&r, root, "model"));
	if (!root || root->type != YAML_MAPPING_NODE || !model ||
	    model->type != YAML_MAPPING_NODE) {
		sb_errorf(err, errlen, "model: missing (not a RoFormer configuration)");
		st = SB_ERR_FORMAT;
		goto out;
	}
	const int bs = lookup(&r, model, "freqs_per_bands") != 0,
	          mel = lookup(&r, model, "num_bands") != 0;
	if (bs == mel) {
		sb_errorf(err, errlen, bs ? "model: both freqs_per_bands and num_bands (neither "
		          "BS-RoFormer nor Mel-Band RoFormer)" : "model: neither freqs_per_bands "
		          "(BS-RoFormer) nor num_bands (Mel-Band RoFormer): not a RoFormer "
		          "configuration");
		st = SB_ERR_UNSUPPORTED;
		goto out;
	}
	defaults(c, bs ? SB_RF_BS : SB_RF_MEL);
	st = read_model(&r, model, c);
	if (st != SB_OK)
		goto out;
	/* audio: */
	yaml_node_t *audio = node(&r, lookup(&r, root, "audio"));
	long v;
	int id;
	if ((id = lookup(&r, audio, "chunk_size")) &&
	    (st = get_int(&r, "audio", "chunk_size", id, 1, 1L << 26, &v)) == SB_OK)
		c->chunk_size = v;
	if (st == SB_OK && (id = lookup(&r, audio, "sample_rate")) &&
	    (st = get_int(&r, "audio", "sample_rate", id, 8000, 384000, &v)) == SB_OK)
		c->audio_rate = (int)v;
	if (st == SB_OK && (id = lookup(&r, audio, "num_channels")) &&
	    (st = get_int(&r, "audio", "num_channels", id, 1, 2, &v)) == SB_OK)
		c->num_channels = (int)v;
	else if (st == SB_OK && !id)
		c->num_channels = c->stereo ? 2 : 1;
	/* training: */
	yaml_node_t *training = node(&r, lookup(&r, root, "training"));
	yaml_node_t *inst = node(&r, lookup(&r, training, "instruments"));
	if (st == SB_OK && (!inst || inst->type != YAML_SEQUENCE_NODE)) {
		sb_errorf(err, errlen, "training.instruments: missing (the stems the model makes)");
		st = SB_ERR_FORMAT;
	}
	for (yaml_node_item_t *it = inst ? inst->data.sequence.items.start : NULL;
	     st == SB_OK && it && it < inst->data.sequence.items.top; it++) {
		const char *s = scalar(&r, *it);
		if (!s || !*s || strlen(s) >= sizeof c->instruments[0] ||
		    c->n_instruments == SB_RF_MAX_STEMS) {
			sb_errorf(err, errlen, "training.instruments: %s", s && *s ? "too many or too long"
			          : "an empty name");
			st = SB_ERR_FORMAT;
			break;
		}
		snprintf(c->instruments[c->n_instruments++], sizeof c->instruments[0], "%s", s);
	}
	id = lookup(&r, training, "target_instrument");
	const char *t = id ? scalar(&r, id) : NULL;
	if (st == SB_OK && t && *t && strcasecmp(t, "null") && strcmp(t, "~"))
		snprintf(c->target, sizeof c->target, "%s", t);
	/* inference: */
	yaml_node_t *inf = node(&r, lookup(&r, root, "inference"));
	if (st == SB_OK && (id = lookup(&r, inf, "batch_size")) &&
	    (st = get_int(&r, "inference", "batch_size", id, 1, 256, &v)) == SB_OK)
		c->batch_size = (int)v;
	if (st == SB_OK && (id = lookup(&r, inf, "num_overlap")) &&
	    (st = get_int(&r, "inference", "num_overlap", id, 1, 64, &v)) == SB_OK)
		c->num_overlap = (int)v;
	/* MSST's demix takes inference.chunk_size over audio.chunk_size when it is there */
	if (st == SB_OK && (id = lookup(&r, inf, "chunk_size")) &&
	    (st = get_int(&r, "inference", "chunk_size", id, 1, 1L << 26, &v)) == SB_OK)
		c->chunk_size = v;
	if (st == SB_OK && (id = lookup(&r, inf, "normalize")))
		st = get_bool(&r, "inference", "normalize", id, &c->normalize);
	if (st == SB_OK)
		st = check(&r, c);
out:
	yaml_document_delete(&doc);
	return st;
}

int sb_rf_config_stems(const sb_rf_config *c, const char *names[SB_RF_MAX_STEMS])
{
	if (c->target[0]) {
		names[0] = c->target;
		return 1;
	}
	for (int i = 0; i < c->n_instruments; i++)
		names[i] = c->instruments[i];
	return c->n_instruments;
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

