#include "convert/shape_check.h"

#include "convert/settings_format.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The HTDemucs constructor settings (demucs/htdemucs.py) that change which tensors exist or
 * their shapes, at their defaults (as the converter formats them; alternatives after '|').
 * released-shapes.json lists only the settings that differ from these. */
static const struct {
	const char *key, *value;
} shape_defaults[] = {
	{"audio_channels", "2"},     {"channels", "48"},        {"channels_time", "none"},
	{"growth", "2"},             {"nfft", "4096"},          {"cac", "true"},
	{"depth", "4"},              {"rewrite", "true"},       {"multi_freqs", "none|"},
	{"multi_freqs_depth", "3"},  {"freq_emb", "0.2"},       {"kernel_size", "8"},
	{"time_stride", "2"},        {"stride", "4"},           {"context", "1"},
	{"context_enc", "0"},        {"norm_starts", "4"},      {"dconv_mode", "1"},
	{"dconv_depth", "2"},        {"dconv_comp", "8"},       {"bottom_channels", "0"},
	{"t_layers", "5"},           {"t_hidden_scale", "4.0"}, {"t_emb", "sin"},
	{"t_norm_in", "true"},       {"t_norm_in_group", "false"},
	{"t_group_norm", "false"},   {"t_norm_out", "true"},    {"t_layer_scale", "true"},
	{"t_sparse_self_attn", "false"}, {"t_sparse_cross_attn", "false"},
	{"t_cross_first", "false"},
};

/* a json value in the converter's metadata form; 0 if it has none */
static int json_setting(const json_t *v, char *buf, size_t len)
{
	if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		sbc_format_double(json_real_value(v), buf, len);
	else if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else if (json_is_null(v))
		snprintf(buf, len, "none");
	else if (json_is_array(v)) {
		size_t used = 0, i;
		json_t *item;
		buf[0] = '\0';
		json_array_foreach(v, i, item) {
			char one[128];
			if (json_is_array(item) || json_is_object(item) || !json_setting(item, one, sizeof one))
				return 0;
			int n = snprintf(buf + used, len - used, "%s%s", i ? "," : "", one);
			if (n < 0 || (size_t)n >= len - used)
				return 0;
			used += (size_t)n;
		}
	} else
		return 0;
	return 1;
}

static int same_value(const char *a, const char *b)
{
	if (!strcmp(a, b))
		return 1;
	char *ea, *eb;
	double x = strtod(a, &ea), y = strtod(b, &eb);
	return *a && *b && !*ea && !*eb && x == y;
}

static int is_default(const char *value, const char *alternatives)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s", alternatives);
	char *save = NULL, *alt = buf;
	if (!strcmp(alternatives, "none|"))
		return !strcmp(value, "none") || !*value;
	for (char *t = strtok_r(alt, "|", &save); t; t = strtok_r(NULL, "|", &save))
		if (same_value(value, t))
			return 1;
	return 0;
}

/* 1 if p has model's settings; else 0 and the first difference in why */
static int settings_match(const sbc_package *p, const json_t *kwargs, char *why, size_t whylen)
{
	const char *key;
	json_t *v;
	char want[1024];
	json_object_foreach((json_t *)kwargs, key, v) {
		if (!json_setting(v, want, sizeof want))
			continue;
		const char *have = sbc_package_setting(p, key);
		if (!have || !same_value(have, want)) {
			snprintf(why, whylen, "%.60s is %.80s, not %.80s", key, have ? have : "unset", want);
			return 0;
		}
	}
	for (size_t k = 0; k < sizeof shape_defaults / sizeof shape_defaults[0]; k++) {
		if (json_object_get(kwargs, shape_defaults[k].key))
			continue;
		const char *have = sbc_package_setting(p, shape_defaults[k].key);
		if (have && !is_default(have, shape_defaults[k].value)) {
			snprintf(why, whylen, "%s is %s, not %s", shape_defaults[k].key, have,
			         shape_defaults[k].value[0] == 'n' && strchr(shape_defaults[k].value, '|')
			             ? "none" : shape_defaults[k].value);
			return 0;
		}
	}
	return 1;
}

static void shape_str(const json_t *dims, const sbc_tensor *t, char *buf, size_t len)
{
	size_t used = 0;
	int n = dims ? (int)json_array_size(dims) : t->ndim;
	used += (size_t)snprintf(buf, len, "[");
	for (int d = 0; d < n && used < len; d++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "",
		                         dims ? (long long)json_integer_value(json_array_get(dims, (size_t)d))
		                              : (long long)t->shape[d]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

static sb_status compare_tensors(const sbc_package *p, const char *model, const json_t *tensors,
                                 char *err, size_t errlen)
{
	char have[128], want[128];
	for (size_t i = 0; i < sbc_package_n_tensors(p); i++) {
		const sbc_named_tensor *nt = sbc_package_tensor_at(p, i);
		const json_t *dims = json_object_get(tensors, nt->name);
		shape_str(NULL, &nt->t, have, sizeof have);
		if (!dims) {
			sb_errorf(err, errlen, "tensor '%s' %s is not in the released %s", nt->name, have, model);
			return SB_ERR_MODEL;
		}
		int same = json_is_array(dims) && json_array_size(dims) == (size_t)nt->t.ndim;
		for (int d = 0; same && d < nt->t.ndim; d++)
			same = json_integer_value(json_array_get(dims, (size_t)d)) == nt->t.shape[d];
		if (!same) {
			shape_str(dims, NULL, want, sizeof want);
			sb_errorf(err, errlen, "tensor '%s' has shape %s, the released %s has %s", nt->name, have,
			     model, want);
			return SB_ERR_MODEL;
		}
	}
	const char *name;
	json_t *dims;
	json_object_foreach((json_t *)tensors, name, dims) {
		size_t i = 0;
		while (i < sbc_package_n_tensors(p) && strcmp(sbc_package_tensor_at(p, i)->name, name))
			i++;
		if (i == sbc_package_n_tensors(p)) {
			shape_str(dims, NULL, want, sizeof want);
			sb_errorf(err, errlen, "tensor '%s' %s of the released %s is missing", name, want, model);
			return SB_ERR_MODEL;
		}
	}
	return SB_OK;
}

sb_status sbc_shapes_check(const char *json_path, const sbc_package *p, char *matched,
                           size_t matchedlen, char *note, size_t notelen, char *err,
                           size_t errlen)
{
	matched[0] = note[0] = '\0';
	json_error_t je;
	json_t *root = json_load_file(json_path, 0, &je);
	if (!root) {
		sb_errorf(err, errlen, "%s: %s (line %d)", json_path, je.text, je.line);
		return SB_ERR_FORMAT;
	}
	const char *model;
	json_t *entry;
	size_t used = 0;
	int entries = 0;
	sb_status st = SB_OK;
	json_object_foreach(root, model, entry) {
		const json_t *kwargs = json_object_get(entry, "kwargs");
		const json_t *tensors = json_object_get(entry, "tensors");
		if (!json_is_object(kwargs) || !json_is_object(tensors))
			continue;
		entries++;
		char why[256];
		if (!settings_match(p, kwargs, why, sizeof why)) {
			int n = snprintf(note + used, notelen - used, "%snot %s (%s)", used ? ", " : "",
			                 model, why);
			if (n > 0 && (size_t)n < notelen - used)
				used += (size_t)n;
			continue;
		}
		snprintf(matched, matchedlen, "%s", model);
		st = compare_tensors(p, model, tensors, err, errlen);
		break;
	}
	if (!entries) {
		sb_errorf(err, errlen, "%s lists no models (objects with 'kwargs' and 'tensors')", json_path);
		st = SB_ERR_FORMAT;
	}
	json_decref(root);
	return st;
}
