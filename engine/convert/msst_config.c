/* MSST's YAML configurations, the sections every family shares (msst_config.h). */
#include "convert/msst_config.h"

#include <yaml.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sb_msst_yaml {
	yaml_document_t doc;
	char err[512];
};

static const char *const family_names[] = {"bs_roformer", "mel_band_roformer", "scnet", "mdx23c"};

const char *sb_msst_family_name(sb_msst_family f)
{
	return f >= 0 && (size_t)f < sizeof family_names / sizeof family_names[0] ? family_names[f]
	                                                                          : "unknown";
}

sb_msst_family sb_msst_family_by_name(const char *name)
{
	for (size_t i = 0; name && i < sizeof family_names / sizeof family_names[0]; i++)
		if (!strcmp(family_names[i], name))
			return (sb_msst_family)i;
	return SB_MSST_NONE;
}

void sb_msst_fail(sb_msst_yaml *y, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(y->err, sizeof y->err, fmt, ap);
	va_end(ap);
}

const char *sb_msst_error(const sb_msst_yaml *y)
{
	return y->err;
}

static yaml_node_t *node(sb_msst_yaml *y, int id)
{
	return id ? yaml_document_get_node(&y->doc, id) : NULL;
}

static const char *scalar(sb_msst_yaml *y, int id)
{
	yaml_node_t *n = node(y, id);
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* the value node of key in a mapping node, 0 if absent */
static int lookup(sb_msst_yaml *y, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(y, p->key);
		if (k && !strcmp(k, key))
			return p->value;
	}
	return 0;
}

static yaml_node_t *section(sb_msst_yaml *y, const char *sect)
{
	return node(y, lookup(y, yaml_document_get_root_node(&y->doc), sect));
}

sb_status sb_msst_yaml_load(const char *text, size_t len, sb_msst_yaml **out, char *err,
                            size_t errlen)
{
	*out = NULL;
	sb_msst_yaml *y = calloc(1, sizeof *y);
	yaml_parser_t parser;
	if (!y || !yaml_parser_initialize(&parser)) {
		free(y);
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &y->doc)) {
		sb_errorf(err, errlen, "not a YAML file: %s at line %zu",
		          parser.problem ? parser.problem : "unreadable", parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		free(y);
		return SB_ERR_FORMAT;
	}
	yaml_parser_delete(&parser);
	yaml_node_t *root = yaml_document_get_root_node(&y->doc);
	yaml_node_t *model = section(y, "model");
	if (!root || root->type != YAML_MAPPING_NODE || !model || model->type != YAML_MAPPING_NODE) {
		sb_errorf(err, errlen, "model: missing (not a model configuration of MSST's)");
		sb_msst_yaml_free(y);
		return SB_ERR_FORMAT;
	}
	*out = y;
	return SB_OK;
}

void sb_msst_yaml_free(sb_msst_yaml *y)
{
	if (!y)
		return;
	yaml_document_delete(&y->doc);
	free(y);
}

int sb_msst_has(sb_msst_yaml *y, const char *sect, const char *key)
{
	return lookup(y, section(y, sect), key) != 0;
}

/* Each family by the keys only its constructor takes: BS-RoFormer freqs_per_bands, Mel-Band
 * RoFormer num_bands, SCNet band_SR (with dims), MDX23C num_subbands (with num_scales). */
sb_msst_family sb_msst_family_of(sb_msst_yaml *y, char *err, size_t errlen)
{
	const int bs = sb_msst_has(y, "model", "freqs_per_bands"),
	          mel = sb_msst_has(y, "model", "num_bands"),
	          scnet = sb_msst_has(y, "model", "band_SR") && sb_msst_has(y, "model", "dims"),
	          mdx = sb_msst_has(y, "model", "num_subbands") &&
	                sb_msst_has(y, "model", "num_scales");
	if (bs + mel + scnet + mdx == 1)
		return bs ? SB_MSST_BS_ROFORMER : mel ? SB_MSST_MEL_ROFORMER
		                                      : scnet ? SB_MSST_SCNET : SB_MSST_MDX23C;
	sb_errorf(err, errlen, bs + mel + scnet + mdx
	          ? "model: the settings of more than one family (freqs_per_bands: BS-RoFormer, "
	            "num_bands: Mel-Band RoFormer, band_SR: SCNet, num_subbands: MDX23C)"
	          : "model: none of freqs_per_bands (BS-RoFormer), num_bands (Mel-Band RoFormer), "
	            "band_SR and dims (SCNet), num_subbands and num_scales (MDX23C): not a family "
	            "this build runs");
	return SB_MSST_NONE;
}

static sb_status get_int(sb_msst_yaml *y, const char *sect, const char *key, int id, long lo,
                         long hi, long *out)
{
	const char *s = scalar(y, id);
	char *end = NULL;
	errno = 0;
	const long v = s ? strtol(s, &end, 10) : 0;
	if (!s || end == s || *end || errno || v < lo || v > hi) {
		sb_msst_fail(y, "%s.%s: expected a whole number from %ld to %ld, found '%s'", sect, key,
		             lo, hi, s ? s : "(not a value)");
		return SB_ERR_FORMAT;
	}
	*out = v;
	return SB_OK;
}

static sb_status get_bool(sb_msst_yaml *y, const char *sect, const char *key, int id, int *out)
{
	const char *s = scalar(y, id);
	if (s && (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes"))) {
		*out = 1;
		return SB_OK;
	}
	if (s && (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no"))) {
		*out = 0;
		return SB_OK;
	}
	sb_msst_fail(y, "%s.%s: expected true or false, found '%s'", sect, key,
	             s ? s : "(not a value)");
	return SB_ERR_FORMAT;
}

static sb_status get_float(sb_msst_yaml *y, const char *sect, const char *key, int id,
                           const sb_msst_key *k, double *out)
{
	const char *s = scalar(y, id);
	char *end = NULL;
	const double v = s ? strtod(s, &end) : 0;
	if (!s || end == s || *end || (k->lo < k->hi && (v < k->lo || v > k->hi))) {
		if (k->lo < k->hi)
			sb_msst_fail(y, "%s.%s: expected a number from %g to %g, found '%s'", sect, key,
			             k->lo, k->hi, s ? s : "(not a value)");
		else
			sb_msst_fail(y, "%s.%s: expected a number, found '%s'", sect, key,
			             s ? s : "(not a value)");
		return SB_ERR_FORMAT;
	}
	*out = v;
	return SB_OK;
}

static sb_status get_string(sb_msst_yaml *y, const char *sect, const char *key, int id,
                            char *out)
{
	const char *s = scalar(y, id);
	if (!s || !*s || strlen(s) >= 32) {
		sb_msst_fail(y, "%s.%s: expected a name of 1 to 31 characters, found '%s'", sect, key,
		             s ? s : "(not a value)");
		return SB_ERR_FORMAT;
	}
	memcpy(out, s, strlen(s) + 1);
	return SB_OK;
}

static sb_status get_list(sb_msst_yaml *y, const char *sect, const sb_msst_key *k, int id,
                          char *cfg)
{
	yaml_node_t *seq = node(y, id);
	if (!seq || seq->type != YAML_SEQUENCE_NODE) {
		sb_msst_fail(y, "%s.%s: expected a list", sect, k->key);
		return SB_ERR_FORMAT;
	}
	int n = 0;
	for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
	     it++) {
		if (n == k->cap) {
			sb_msst_fail(y, "%s.%s: more than %d values", sect, k->key, k->cap);
			return SB_ERR_UNSUPPORTED;
		}
		sb_status st = SB_OK;
		if (k->kind == SB_MSST_INTS) {
			long v = 0;
			st = get_int(y, sect, k->key, *it, (long)k->lo, (long)k->hi, &v);
			if (k->off != SB_MSST_NO_EFFECT && st == SB_OK)
				((int *)(cfg + k->off))[n] = (int)v;
		} else if (k->kind == SB_MSST_FLOATS) {
			double v = 0;
			st = get_float(y, sect, k->key, *it, k, &v);
			if (k->off != SB_MSST_NO_EFFECT && st == SB_OK)
				((double *)(cfg + k->off))[n] = v;
		} else {
			char v[32];
			st = get_string(y, sect, k->key, *it, v);
			if (k->off != SB_MSST_NO_EFFECT && st == SB_OK)
				memcpy(cfg + k->off + 32 * (size_t)n, v, sizeof v);
		}
		if (st != SB_OK)
			return st;
		n++;
	}
	if (k->off != SB_MSST_NO_EFFECT)
		*(int *)(cfg + k->n_off) = n;
	return SB_OK;
}

static sb_status read_value(sb_msst_yaml *y, const char *sect, const sb_msst_key *k, int id,
                            char *cfg)
{
	long v = 0;
	int b = 0;
	double f = 0;
	char s[32];
	sb_status st = SB_OK;
	switch (k->kind) {
	case SB_MSST_INT:
		st = get_int(y, sect, k->key, id, (long)k->lo, (long)k->hi, &v);
		break;
	case SB_MSST_BOOL:
		st = get_bool(y, sect, k->key, id, &b);
		v = b;
		break;
	case SB_MSST_FLOAT:
		st = get_float(y, sect, k->key, id, k, &f);
		break;
	case SB_MSST_STRING:
		st = get_string(y, sect, k->key, id, s);
		break;
	case SB_MSST_INTS:
	case SB_MSST_FLOATS:
	case SB_MSST_STRINGS:
		return get_list(y, sect, k, id, cfg);
	case SB_MSST_ANY:
		return SB_OK;
	}
	if (st != SB_OK)
		return st;
	if ((k->kind == SB_MSST_INT || k->kind == SB_MSST_BOOL) && k->must >= 0 && v != k->must) {
		sb_msst_fail(y, "%s.%s: %s is not supported (%s)", sect, k->key,
		             k->kind == SB_MSST_BOOL ? (v ? "true" : "false") : scalar(y, id),
		             k->why_not ? k->why_not : "not implemented");
		return SB_ERR_UNSUPPORTED;
	}
	if (k->off == SB_MSST_NO_EFFECT)
		return SB_OK;
	if (k->kind == SB_MSST_FLOAT)
		*(double *)(cfg + k->off) = f;
	else if (k->kind == SB_MSST_STRING)
		memcpy(cfg + k->off, s, sizeof s);
	else
		*(int *)(cfg + k->off) = (int)v;
	return SB_OK;
}

sb_status sb_msst_read_key(sb_msst_yaml *y, const char *sect, const sb_msst_key *k, void *cfg)
{
	const int id = lookup(y, section(y, sect), k->key);
	return id ? read_value(y, sect, k, id, cfg) : SB_OK;
}

sb_status sb_msst_read_section(sb_msst_yaml *y, const char *sect, const sb_msst_key *keys,
                               size_t n, void *cfg, const char *label, const char *type)
{
	yaml_node_t *m = section(y, sect);
	if (!m)
		return SB_OK;
	if (m->type != YAML_MAPPING_NODE) {
		sb_msst_fail(y, "%s: expected a mapping of settings", sect);
		return SB_ERR_FORMAT;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *key = scalar(y, p->key);
		const sb_msst_key *k = NULL;
		for (size_t i = 0; key && i < n && !k; i++)
			if (!strcmp(keys[i].key, key))
				k = &keys[i];
		if (!k) {
			sb_msst_fail(y, "%s.%s: not a setting of %s (MSST's %s takes no such argument)",
			             sect, key ? key : "?", label, type);
			return SB_ERR_UNSUPPORTED;
		}
		sb_status st = read_value(y, sect, k, p->value, cfg);
		if (st != SB_OK)
			return st;
	}
	return SB_OK;
}

#define OFF(f) offsetof(sb_msst_common, f)
static const sb_msst_key audio_keys[] = {
	{"chunk_size", SB_MSST_INT, 1, 1L << 26, OFF(chunk_size), 0, 0, -1, NULL},
	{"sample_rate", SB_MSST_INT, 8000, 384000, OFF(audio_rate), 0, 0, -1, NULL},
	{"num_channels", SB_MSST_INT, 1, 2, OFF(num_channels), 0, 0, -1, NULL},
};
static const sb_msst_key inference_keys[] = {
	{"batch_size", SB_MSST_INT, 1, 256, OFF(batch_size), 0, 0, -1, NULL},
	{"num_overlap", SB_MSST_INT, 1, 64, OFF(num_overlap), 0, 0, -1, NULL},
	{"normalize", SB_MSST_BOOL, 0, 1, OFF(normalize), 0, 0, -1, NULL},
};
static const sb_msst_key instruments_key = {"instruments", SB_MSST_STRINGS, 0, 0,
                                            OFF(instruments), OFF(n_instruments),
                                            SB_MSST_MAX_STEMS, -1, NULL};
#undef OFF

sb_status sb_msst_read_common(sb_msst_yaml *y, sb_msst_common *c, int64_t min_chunk)
{
	memset(c, 0, sizeof *c);
	c->audio_rate = 44100;
	c->num_channels = 2;
	c->batch_size = 1;
	c->num_overlap = 4;
	sb_status st = SB_OK;
	/* audio.chunk_size is an int field of its own: read it as a long */
	long chunk = 0;
	const int cid = lookup(y, section(y, "audio"), "chunk_size");
	if (cid)
		st = get_int(y, "audio", "chunk_size", cid, 1, 1L << 26, &chunk);
	for (size_t i = 1; st == SB_OK && i < sizeof audio_keys / sizeof audio_keys[0]; i++)
		st = sb_msst_read_key(y, "audio", &audio_keys[i], c);
	if (st == SB_OK && !sb_msst_has(y, "training", "instruments")) {
		sb_msst_fail(y, "training.instruments: missing (the stems the model makes)");
		st = SB_ERR_FORMAT;
	}
	if (st == SB_OK)
		st = sb_msst_read_key(y, "training", &instruments_key, c);
	const char *t = scalar(y, lookup(y, section(y, "training"), "target_instrument"));
	if (st == SB_OK && t && *t && strcasecmp(t, "null") && strcmp(t, "~")) {
		if (strlen(t) >= sizeof c->target) {
			sb_msst_fail(y, "training.target_instrument: too long");
			st = SB_ERR_FORMAT;
		} else {
			snprintf(c->target, sizeof c->target, "%s", t);
		}
	}
	for (size_t i = 0; st == SB_OK && i < sizeof inference_keys / sizeof inference_keys[0]; i++)
		st = sb_msst_read_key(y, "inference", &inference_keys[i], c);
	/* MSST's demix takes inference.chunk_size over audio.chunk_size when it is there */
	const int iid = lookup(y, section(y, "inference"), "chunk_size");
	if (st == SB_OK && iid)
		st = get_int(y, "inference", "chunk_size", iid, 1, 1L << 26, &chunk);
	if (st != SB_OK)
		return st;
	c->chunk_size = chunk;
	if (c->chunk_size < min_chunk || c->chunk_size > (int64_t)1 << 26) {
		sb_msst_fail(y, "audio.chunk_size: %lld is %s", (long long)c->chunk_size,
		             c->chunk_size ? "out of range" : "missing");
		return SB_ERR_FORMAT;
	}
	if (c->chunk_size / c->num_overlap < 1) {
		sb_msst_fail(y, "inference.num_overlap: must be at least 1 and below the chunk");
		return SB_ERR_FORMAT;
	}
	return SB_OK;
}

/* Each stem the network makes is written under its own name, so it must be one this build
 * writes: a drum kit's "kick" and "snare" would otherwise fold into one "other" file, and a
 * separation that loses stems is not a success. (A target model's rest of the mix is written as
 * "other" whatever the config calls it.) */
sb_status sb_msst_check_stems(sb_msst_yaml *y, const sb_msst_common *c)
{
	if (c->target[0]) {
		int found = 0;
		for (int i = 0; i < c->n_instruments; i++)
			found |= !strcmp(c->instruments[i], c->target);
		if (!found) {
			sb_msst_fail(y, "training.target_instrument: '%s' is not one of "
			             "training.instruments", c->target);
			return SB_ERR_FORMAT;
		}
	}
	char known[256] = "";
	for (int k = 0; k < SB_N_KNOWN_STEMS; k++) {
		const size_t at = strlen(known);
		snprintf(known + at, sizeof known - at, "%s%s", k ? ", " : "", sb_stem_names[k]);
	}
	const int want = c->target[0] ? 1 : c->n_instruments;
	for (int i = 0; i < want; i++) {
		const char *name = c->target[0] ? c->target : c->instruments[i];
		if (sb_stem_index(name) < 0) {
			sb_msst_fail(y, "training.%s: '%s' is not a stem Stembridge writes (%s)",
			             c->target[0] ? "target_instrument" : "instruments", name, known);
			return SB_ERR_FORMAT;
		}
		for (int k = 0; k < i; k++)
			if (sb_stem_index(name) == sb_stem_index(c->instruments[k])) {
				sb_msst_fail(y, "training.instruments: '%s' and '%s' are the same stem",
				             c->instruments[k], name);
				return SB_ERR_FORMAT;
			}
	}
	return SB_OK;
}

int sb_msst_stems(const sb_msst_common *c, const char *names[SB_MSST_MAX_STEMS])
{
	if (c->target[0]) {
		names[0] = c->target;
		return 1;
	}
	for (int i = 0; i < c->n_instruments; i++)
		names[i] = c->instruments[i];
	return c->n_instruments;
}

void sb_msst_emit(sb_msst_emitter *e, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                  const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->name, sizeof e->name, fmt, ap);
	va_end(ap);
	const int64_t shape[4] = {a, b, c, d};
	if (e->fn)
		e->fn(e->user, e->name, ndim, shape);
	e->n++;
}
