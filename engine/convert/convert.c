/* Checkpoints to safetensors (convert/convert.h). */
#include "convert/convert.h"

#include "convert/demucs_package.h"
#include "convert/safetensors_writer.h"
#include "convert/settings_format.h"
#include "convert/shape_check.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* demucs/remote/htdemucs_ft.yaml: its four models by signature, each weighted 1 for its own
 * source (drums, bass, other, vocals) and 0 for the others */
static const char *const ft_signatures[4] = {"f7e0c4bc", "d12395a8", "92cfc3b6", "04573f0d"};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static int ft_index(const char *path)
{
	const char *b = base_name(path);
	for (int k = 0; k < 4; k++)
		if (!strncmp(b, ft_signatures[k], 8) && (b[8] == '-' || b[8] == '.'))
			return k;
	return -1;
}

static int count_items(const char *s, char sep)
{
	int n = 1;
	for (; *s; s++)
		n += *s == sep;
	return n;
}

/* "1,0,0,0;0,1,0,0;..." into k rows of s weights */
static int parse_weights(const char *text, int k, int s, double *w, char *why, size_t whylen)
{
	if (count_items(text, ';') != k) {
		snprintf(why, whylen, "%d rows for %d models", count_items(text, ';'), k);
		return 0;
	}
	const char *p = text;
	for (int r = 0; r < k; r++) {
		for (int c = 0; c < s; c++) {
			char *end;
			w[r * s + c] = strtod(p, &end);
			if (end == p || !isfinite(w[r * s + c])) {
				snprintf(why, whylen, "row %d, weight %d is not a number", r + 1, c + 1);
				return 0;
			}
			p = end;
			char want = c + 1 < s ? ',' : r + 1 < k ? ';' : '\0';
			if (*p != want) {
				snprintf(why, whylen, "row %d does not have %d weights (one per source)", r + 1,
				         s);
				return 0;
			}
			if (*p)
				p++;
		}
	}
	for (int c = 0; c < s; c++) {
		double total = 0;
		for (int r = 0; r < k; r++)
			total += w[r * s + c];
		if (!(total > 0)) {
			snprintf(why, whylen, "source %d's weights do not add up to more than 0", c + 1);
			return 0;
		}
	}
	return 1;
}

static char *weights_str(const double *w, int k, int s)
{
	size_t cap = (size_t)k * (size_t)s * 32 + 1;
	char *out = malloc(cap), num[32];
	if (!out)
		return NULL;
	size_t used = 0;
	for (int r = 0; r < k; r++)
		for (int c = 0; c < s; c++) {
			sbc_format_double(w[r * s + c], num, sizeof num);
			used += (size_t)snprintf(out + used, cap - used, "%s%s",
			                         c ? "," : r ? ";" : "", num);
		}
	return out;
}

static int is_reserved(const char *key)
{
	static const char *const reserved[] = {"klass", "name", "checkpoint", "bag", "bag_weights"};
	for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
		if (!strcmp(key, reserved[k]))
			return 1;
	return 0;
}

/* The bag's weights: given, htdemucs_ft's, or all 1. 0 on a refusal (reported). */
static int bag_weights(const sbc_convert_opts *o, int n_sources, double *w)
{
	char why[200];
	int k = o->n_inputs;
	if (o->weights) {
		if (!parse_weights(o->weights, k, n_sources, w, why, sizeof why)) {
			sb_log(o->log, SB_LOG_ERROR, "--bag-weights '%s': %s", o->weights, why);
			return 0;
		}
		return 1;
	}
	int ft = 0, seen[4] = {0};
	for (int m = 0; m < k; m++) {
		int f = ft_index(o->inputs[m]);
		if (f >= 0 && !seen[f]++)
			ft++;
	}
	if (ft == 4 && k == 4 && n_sources == 4) {
		for (int m = 0; m < k; m++)
			for (int c = 0; c < 4; c++)
				w[m * 4 + c] = ft_index(o->inputs[m]) == c;
		sb_log(o->log, SB_LOG_INFO, "bag weights: htdemucs_ft's (demucs/remote/htdemucs_ft.yaml: "
		       "each model weighs 1 for its own source)");
		return 1;
	}
	if (ft) {
		sb_log(o->log, SB_LOG_ERROR, "%d of the inputs are htdemucs_ft models, which each "
		       "predict one source: give all four (f7e0c4bc, d12395a8, 92cfc3b6, 04573f0d) and "
		       "nothing else, or the weights with --bag-weights", ft);
		return 0;
	}
	for (int i = 0; i < k * n_sources; i++)
		w[i] = 1;
	sb_log(o->log, SB_LOG_INFO, "bag weights: 1 for every model and source (give --bag-weights "
	       "to change)");
	return 1;
}

static int add_metadata(const sb_logger *log, sbc_st_writer *w, const char *prefix,
                        const char *key, const char *value)
{
	char full[512];
	snprintf(full, sizeof full, "%s%s", prefix, key);
	if (sbc_st_set_metadata(w, full, value) != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "metadata '%s' is not valid UTF-8", full);
		return 0;
	}
	return 1;
}

/* One model's tensors and settings into the writer, under prefix ("" or "<k>."). */
static int add_model(const sb_logger *log, sbc_st_writer *w, const char *prefix,
                     const char *input, const sbc_package *p)
{
	char err[512], name[1024];
	for (size_t i = 0; i < sbc_package_n_tensors(p); i++) {
		const sbc_named_tensor *nt = sbc_package_tensor_at(p, i);
		snprintf(name, sizeof name, "%s%s", prefix, nt->name);
		if (sbc_st_add(w, name, &nt->t, err, sizeof err) != SB_OK) {
			sb_log(log, SB_LOG_ERROR, "%s: %s", input, err);
			return 0;
		}
	}
	for (size_t i = 0; i < sbc_package_n_settings(p); i++) {
		const sbc_setting *s = sbc_package_setting_at(p, i);
		if (is_reserved(s->key)) {
			sb_log(log, SB_LOG_WARNING, "%s: setting '%s' has a reserved name: left out of the "
			       "metadata", input, s->key);
			continue;
		}
		if (!add_metadata(log, w, prefix, s->key, s->value))
			return 0;
	}
	return add_metadata(log, w, prefix, "klass", sbc_package_klass(p)) &&
	       add_metadata(log, w, prefix, "checkpoint", base_name(input));
}

static const char *dtypes_str(const sbc_package *const *pk, int n, char *buf, size_t len)
{
	int seen[SBC_DT_BOOL + 1] = {0};
	for (int m = 0; m < n; m++)
		for (size_t i = 0; i < sbc_package_n_tensors(pk[m]); i++)
			seen[sbc_package_tensor_at(pk[m], i)->t.dtype] = 1;
	size_t used = 0;
	buf[0] = '\0';
	for (int d = 0; d <= SBC_DT_BOOL; d++)
		if (seen[d] && used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "+" : "",
			                         sbc_dtype_name((sbc_dtype)d));
	return buf;
}

/* The bag's models must agree on what they separate. */
static int shared_settings_agree(const sbc_convert_opts *o, const sbc_package *const *pk)
{
	static const char *const shared[] = {"sources", "samplerate", "audio_channels"};
	for (size_t s = 0; s < 3; s++)
		for (int m = 1; m < o->n_inputs; m++) {
			const char *a = sbc_package_setting(pk[0], shared[s]);
			const char *b = sbc_package_setting(pk[m], shared[s]);
			if ((a || b) && (!a || !b || strcmp(a, b))) {
				sb_log(o->log, SB_LOG_ERROR, "%s: %s is %s, but %s has %s: the models of a bag "
				       "must agree", o->inputs[m], shared[s], b ? b : "unset", o->inputs[0],
				       a ? a : "unset");
				return 0;
			}
		}
	return 1;
}

/* The caller's logger with the file a message is about in front of it. */
typedef struct {
	const sb_logger *inner;
	const char *input;
} prefix_log;

static void prefix_fn(void *user, sb_log_level level, const char *msg)
{
	const prefix_log *p = user;
	sb_log(p->inner, level, "%s: %s", p->input, msg);
}

static sb_status run(const sbc_convert_opts *o, sbc_package **pk)
{
	char err[768];
	prefix_log pl = {o->log, NULL};
	sb_logger log = {prefix_fn, &pl};
	struct stat sb;
	if (o->output && !o->overwrite && !o->dry_run && lstat(o->output, &sb) == 0) {
		sb_log(o->log, SB_LOG_ERROR, "%s: exists (use --overwrite to replace it)", o->output);
		return SB_ERR_EXISTS;
	}
	for (int m = 0; m < o->n_inputs; m++) {
		pl.input = o->inputs[m];
		const sb_status st = sbc_package_open(o->inputs[m], &log, &pk[m], err, sizeof err);
		if (st != SB_OK) {
			sb_log(o->log, SB_LOG_ERROR, "%s: %s", o->inputs[m], err);
			return st;
		}
	}
	for (int m = 0; o->shapes && m < o->n_inputs; m++) {
		char matched[64], note[1024];
		sb_status st = sbc_shapes_check(o->shapes, pk[m], matched, sizeof matched, note,
		                                sizeof note, err, sizeof err);
		if (st != SB_OK) {
			sb_log(o->log, SB_LOG_ERROR, "%s%s%s", st == SB_ERR_MODEL ? o->inputs[m] : "",
			       st == SB_ERR_MODEL ? ": " : "", err);
			return st;
		}
		if (matched[0])
			sb_log(o->log, SB_LOG_INFO, "%s: names and shapes match the released %s",
			       o->inputs[m], matched);
		else
			sb_log(o->log, SB_LOG_INFO, "%s: shapes not checked: the settings are not a "
			       "released model's (%s)", o->inputs[m], note);
	}
	int bag = o->n_inputs > 1;
	const char *sources = sbc_package_setting(pk[0], "sources");
	assert(sources); /* sbc_package_open refuses a model without them */
	int n_sources = count_items(sources, ',');
	if (bag && !shared_settings_agree(o, (const sbc_package *const *)pk))
		return SB_ERR_MODEL;
	double *weights = bag ? calloc((size_t)o->n_inputs * (size_t)n_sources, sizeof *weights) : NULL;
	if (bag && (!weights || !bag_weights(o, n_sources, weights))) {
		free(weights);
		return weights ? SB_ERR_INVALID : SB_ERR_NOMEM;
	}

	sbc_st_writer *w = sbc_st_writer_new();
	char *wstr = bag ? weights_str(weights, o->n_inputs, n_sources) : NULL;
	free(weights);
	if (!w || (bag && !wstr)) {
		sb_log(o->log, SB_LOG_ERROR, "out of memory");
		sbc_st_writer_free(w);
		free(wstr);
		return SB_ERR_NOMEM;
	}
	/* the name: --name, or the output's file name without its extension */
	char name[256];
	const char *from = o->output ? o->output : o->inputs[0];
	snprintf(name, sizeof name, "%s", o->name ? o->name : base_name(from));
	char *dot = o->name ? NULL : strrchr(name, '.');
	if (dot && dot != name)
		*dot = '\0';
	int ok = add_metadata(o->log, w, "", "name", name);
	if (ok && bag) {
		char num[16];
		snprintf(num, sizeof num, "%d", o->n_inputs);
		ok = add_metadata(o->log, w, "", "bag", num) && add_metadata(o->log, w, "", "sources", sources) &&
		     add_metadata(o->log, w, "", "bag_weights", wstr);
		for (size_t s = 1; ok && s < 3; s++) {
			const char *key = s == 1 ? "samplerate" : "audio_channels";
			const char *v = sbc_package_setting(pk[0], key);
			if (v)
				ok = add_metadata(o->log, w, "", key, v);
		}
	}
	for (int m = 0; ok && m < o->n_inputs; m++) {
		char prefix[16] = "";
		if (bag)
			snprintf(prefix, sizeof prefix, "%d.", m);
		ok = add_model(o->log, w, prefix, o->inputs[m], pk[m]);
	}
	free(wstr);
	if (!ok) {
		sbc_st_writer_free(w);
		return SB_ERR_INVALID;
	}
	char dts[64];
	dtypes_str((const sbc_package *const *)pk, o->n_inputs, dts, sizeof dts);
	double mb = (double)sbc_st_data_bytes(w) / 1e6;
	if (!o->dry_run) {
		sb_status st = sbc_st_write(w, o->output, o->overwrite, err, sizeof err);
		if (st != SB_OK) {
			sb_log(o->log, SB_LOG_ERROR, "%s: %s", o->output, err);
			sbc_st_writer_free(w);
			return st;
		}
	}
	char what[64] = "";
	if (bag)
		snprintf(what, sizeof what, "a bag of %d models, ", o->n_inputs);
	sb_log(o->log, SB_LOG_INFO, "%s%s: '%s', %s%zu tensors (%s, %.1f MB), sources %s",
	       o->dry_run ? "checked, not written: " : "wrote ",
	       o->output ? o->output : o->inputs[0], name, what, sbc_st_count(w), dts, mb, sources);
	sbc_st_writer_free(w);
	return SB_OK;
}

sb_status sbc_convert(const sbc_convert_opts *o)
{
	if (!o || o->n_inputs < 1 || o->n_inputs > SBC_MAX_INPUTS || (!o->output && !o->dry_run) ||
	    (o->weights && o->n_inputs < 2))
		return SB_ERR_INVALID;
	if (o->config)
		return sbc_convert_msst(o);
	sbc_package *pk[SBC_MAX_INPUTS] = {0};
	const sb_status st = run(o, pk);
	for (int m = 0; m < o->n_inputs; m++)
		sbc_package_free(pk[m]);
	return st;
}
