/* The package layout of facebookresearch/demucs `demucs/states.py` (serialize_model,
 * save_with_checksum, load_model) for the HTDemucs class of `demucs/htdemucs.py`. */
#include "convert/demucs_package.h"

#include "convert/settings_format.h"
#include "convert/torch_load.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HTDemucs takes about 70 settings; the duplicate check below is quadratic */
#define MAX_SETTINGS 4096

struct sbc_package {
	sbc_torch *torch;
	char klass[256];
	sbc_setting *settings;
	size_t n_settings;
	sbc_named_tensor *tensors;
	size_t n_tensors;
};

static sb_status add_setting(sbc_package *p, const char *key, size_t key_len, char *value)
{
	sbc_setting *s = realloc(p->settings, (p->n_settings + 1) * sizeof *s);
	char *k = strndup(key, key_len);
	if (!s || !k) {
		if (s)
			p->settings = s;
		free(k);
		free(value);
		return SB_ERR_NOMEM;
	}
	p->settings = s;
	s[p->n_settings].key = k;
	s[p->n_settings].value = value;
	p->n_settings++;
	return SB_OK;
}

/* sources: a non-empty list of distinct names without commas (they are joined by commas) */
static int sources_ok(const sbc_pk *v)
{
	if (!v || (v->type != SBC_PK_LIST && v->type != SBC_PK_TUPLE) || v->n == 0)
		return 0;
	for (size_t k = 0; k < v->n; k++) {
		const sbc_pk *s = v->items[k];
		if (s->type != SBC_PK_STR || !s->len || memchr(s->s, ',', s->len) ||
		    memchr(s->s, '\0', s->len))
			return 0;
		for (size_t j = 0; j < k; j++)
			if (v->items[j]->len == s->len && !memcmp(v->items[j]->s, s->s, s->len))
				return 0;
	}
	return 1;
}

static int same_str(const sbc_pk *a, const sbc_pk *b)
{
	return a->type == SBC_PK_STR && b->type == SBC_PK_STR && a->len == b->len &&
	       !memcmp(a->s, b->s, a->len);
}

static sb_status read_settings(sbc_package *p, const sbc_pk *args, const sbc_pk *kwargs,
                               const sb_logger *log, char *err, size_t errlen)
{
	/* HTDemucs(sources, audio_channels=2, ...): demucs passes everything by keyword, but a
	 * positional sources is understood */
	const sbc_pk *sources = sbc_pk_get(kwargs, "sources");
	if (args && args->n > 1) {
		sb_errorf(err, errlen, "the model's constructor takes %zu positional arguments; only "
		     "'sources' is understood", args->n);
		return SB_ERR_UNSUPPORTED;
	}
	if (args && args->n == 1) {
		if (sources) {
			sb_errorf(err, errlen, "'sources' is given twice (in args and kwargs)");
			return SB_ERR_FORMAT;
		}
		sources = args->items[0];
	}
	if (!sources_ok(sources)) {
		sb_errorf(err, errlen, "the settings have no usable 'sources' (a list of distinct names "
		     "without commas)");
		return SB_ERR_FORMAT;
	}
	if (kwargs->n / 2 > MAX_SETTINGS) {
		sb_errorf(err, errlen, "%zu settings (more than %d): not a model's", kwargs->n / 2,
		     MAX_SETTINGS);
		return SB_ERR_FORMAT;
	}
	char why[200];
	if (args && args->n == 1) {
		char *v = sbc_format_setting(sources, why, sizeof why);
		if (!v || add_setting(p, "sources", 7, v) != SB_OK)
			goto oom;
	}
	for (size_t k = 0; k + 1 < kwargs->n; k += 2) {
		const sbc_pk *key = kwargs->items[k], *val = kwargs->items[k + 1];
		if (key->type != SBC_PK_STR || !key->len || memchr(key->s, '\0', key->len)) {
			sb_errorf(err, errlen, "a setting's name is not a string");
			return SB_ERR_FORMAT;
		}
		/* a key set twice: the last value counts, in the first one's place (a Python dict) */
		int earlier = 0;
		for (size_t j = 0; j < k && !earlier; j += 2)
			earlier = same_str(kwargs->items[j], key);
		if (earlier)
			continue;
		for (size_t j = k + 2; j + 1 < kwargs->n; j += 2)
			if (same_str(kwargs->items[j], key))
				val = kwargs->items[j + 1];
		char *v = sbc_format_setting(val, why, sizeof why);
		if (!v) {
			if (!strcmp(why, "out of memory"))
				goto oom;
			sb_log(log, SB_LOG_WARNING, "setting '%.*s' is %s, not a plain value: left out of "
			       "the metadata", (int)(key->len > 100 ? 100 : key->len), key->s, why);
			continue;
		}
		if (add_setting(p, key->s, key->len, v) != SB_OK)
			goto oom;
	}
	return SB_OK;
oom:
	sb_errorf(err, errlen, "out of memory");
	return SB_ERR_NOMEM;
}

static int cmp_tensor_names(const void *a, const void *b)
{
	return strcmp((*(const sbc_named_tensor *const *)a)->name,
	              (*(const sbc_named_tensor *const *)b)->name);
}

static sb_status read_state(sbc_package *p, const sbc_pk *state, char *err, size_t errlen)
{
	if (sbc_pk_get(state, "__quantized")) {
		sb_errorf(err, errlen, "a quantized (diffq) model, which is not supported");
		return SB_ERR_UNSUPPORTED;
	}
	size_t n = state->n / 2;
	if (!n) {
		sb_errorf(err, errlen, "the model's state dict is empty");
		return SB_ERR_FORMAT;
	}
	p->tensors = calloc(n, sizeof *p->tensors);
	if (!p->tensors) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	char what[160], terr[300];
	for (size_t k = 0; k < n; k++) {
		const sbc_pk *key = state->items[2 * k], *val = state->items[2 * k + 1];
		if (key->type != SBC_PK_STR || !key->len || memchr(key->s, '\0', key->len)) {
			sbc_pk_describe(key, what, sizeof what);
			sb_errorf(err, errlen, "the state dict has a key that is no tensor name (%s)", what);
			return SB_ERR_FORMAT;
		}
		sbc_named_tensor *nt = &p->tensors[p->n_tensors];
		if (!(nt->name = strndup(key->s, key->len))) {
			sb_errorf(err, errlen, "out of memory");
			return SB_ERR_NOMEM;
		}
		p->n_tensors++;
		if (!strcmp(nt->name, "__metadata__")) {
			sb_errorf(err, errlen, "the state dict has a tensor named '__metadata__'");
			return SB_ERR_FORMAT;
		}
		sb_status st = sbc_torch_tensor(p->torch, val, &nt->t, terr, sizeof terr);
		if (st != SB_OK) {
			sb_errorf(err, errlen, "state['%s']: %s", nt->name, terr);
			return st;
		}
	}
	const sbc_named_tensor **sorted = malloc(n * sizeof *sorted);
	if (!sorted) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	for (size_t k = 0; k < n; k++)
		sorted[k] = &p->tensors[k];
	qsort(sorted, n, sizeof *sorted, cmp_tensor_names);
	for (size_t k = 1; k < n; k++)
		if (!strcmp(sorted[k]->name, sorted[k - 1]->name)) {
			sb_errorf(err, errlen, "the state dict names tensor '%s' twice", sorted[k]->name);
			free(sorted);
			return SB_ERR_FORMAT;
		}
	free(sorted);
	return SB_OK;
}

static sb_status read_package(sbc_package *p, const sbc_pk *root, const sb_logger *log, char *err,
                              size_t errlen)
{
	char what[160];
	const sbc_pk *klass = sbc_pk_get(root, "klass");
	const sbc_pk *state = sbc_pk_get(root, "state");
	if (root->type != SBC_PK_DICT || !klass || !state) {
		sbc_pk_describe(root, what, sizeof what);
		if (root->type == SBC_PK_DICT && root->n >= 2 && sbc_torch_is_tensor(root->items[1]))
			sb_errorf(err, errlen, "a bare state dict, without the model's class and settings: "
			     "convert the model file demucs saves (the release's .th files)");
		else
			sb_errorf(err, errlen, "a PyTorch file, but not a Demucs model (it holds %s, not a "
			     "dict with 'klass', 'kwargs' and 'state')", what);
		return SB_ERR_FORMAT;
	}
	if (klass->type != SBC_PK_GLOBAL) {
		sbc_pk_describe(klass, what, sizeof what);
		sb_errorf(err, errlen, "the model's class is %s, not a class", what);
		return SB_ERR_FORMAT;
	}
	snprintf(p->klass, sizeof p->klass, "%.*s.%.*s", (int)(klass->len > 120 ? 120 : klass->len),
	         klass->s, (int)(klass->len2 > 120 ? 120 : klass->len2), klass->s2);
	if (!sbc_pk_is_global(klass, "demucs.htdemucs", "HTDemucs")) {
		sb_errorf(err, errlen, "model class %s is not supported: only demucs.htdemucs.HTDemucs "
		     "(Demucs v4: htdemucs, htdemucs_ft, htdemucs_6s) can be converted", p->klass);
		return SB_ERR_UNSUPPORTED;
	}
	const sbc_pk *args = sbc_pk_get(root, "args"), *kwargs = sbc_pk_get(root, "kwargs");
	if (args && args->type != SBC_PK_TUPLE && args->type != SBC_PK_LIST) {
		sb_errorf(err, errlen, "'args' is not a tuple");
		return SB_ERR_FORMAT;
	}
	if (!kwargs || kwargs->type != SBC_PK_DICT) {
		sb_errorf(err, errlen, "the model's settings ('kwargs') are missing or not a dict");
		return SB_ERR_FORMAT;
	}
	if (state->type != SBC_PK_DICT) {
		sbc_pk_describe(state, what, sizeof what);
		sb_errorf(err, errlen, "the model's state is %s, not a dict of tensors", what);
		return SB_ERR_FORMAT;
	}
	sb_status st = read_settings(p, args, kwargs, log, err, errlen);
	if (st != SB_OK)
		return st;
	return read_state(p, state, err, errlen);
}

/* A file read as a Demucs package (read_package) or a bare state dict (read_bare_state). */
typedef sb_status (*package_reader)(sbc_package *p, const sbc_pk *root, const sb_logger *log,
                                    char *err, size_t errlen);

static sb_status read_bare_state(sbc_package *p, const sbc_pk *root, const sb_logger *log,
                                 char *err, size_t errlen)
{
	(void)log;
	/* a bare state dict, or one under a key as training scripts save it */
	const sbc_pk *state = root;
	static const char *const keys[] = {"state_dict", "state", "model_state_dict", "model"};
	for (size_t k = 0; k < 4 && root->type == SBC_PK_DICT; k++) {
		const sbc_pk *v = sbc_pk_get(root, keys[k]);
		if (v && v->type == SBC_PK_DICT)
			state = v;
	}
	if (state->type != SBC_PK_DICT || state->n < 2 || !sbc_torch_is_tensor(state->items[1])) {
		char what[160];
		sbc_pk_describe(root, what, sizeof what);
		sb_errorf(err, errlen, "a PyTorch file, but not a state dict of tensors (it holds "
		          "%s)", what);
		return SB_ERR_FORMAT;
	}
	snprintf(p->klass, sizeof p->klass, "state_dict");
	return read_state(p, state, err, errlen);
}

static sb_status open_as(const char *path, package_reader read, const sb_logger *log,
                         sbc_package **out, char *err, size_t errlen)
{
	*out = NULL;
	sbc_package *p = calloc(1, sizeof *p);
	if (!p) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	const sbc_pk *root = NULL;
	sb_status st = sbc_torch_open(path, &p->torch, &root, err, errlen);
	if (st == SB_OK)
		st = read(p, root, log, err, errlen);
	if (st != SB_OK) {
		sbc_package_free(p);
		return st;
	}
	*out = p;
	return SB_OK;
}

sb_status sbc_package_open(const char *path, const sb_logger *log, sbc_package **out, char *err,
                           size_t errlen)
{
	return open_as(path, read_package, log, out, err, errlen);
}

sb_status sbc_state_open(const char *path, sbc_package **out, char *err, size_t errlen)
{
	return open_as(path, read_bare_state, NULL, out, err, errlen);
}

void sbc_package_free(sbc_package *p)
{
	if (!p)
		return;
	for (size_t k = 0; k < p->n_settings; k++) {
		free(p->settings[k].key);
		free(p->settings[k].value);
	}
	free(p->settings);
	for (size_t k = 0; k < p->n_tensors; k++) {
		free(p->tensors[k].name);
		sbc_tensor_clear(&p->tensors[k].t);
	}
	free(p->tensors);
	sbc_torch_close(p->torch);
	free(p);
}

const char *sbc_package_klass(const sbc_package *p)
{
	return p->klass;
}

size_t sbc_package_n_settings(const sbc_package *p)
{
	return p->n_settings;
}

const sbc_setting *sbc_package_setting_at(const sbc_package *p, size_t i)
{
	return i < p->n_settings ? &p->settings[i] : NULL;
}

const char *sbc_package_setting(const sbc_package *p, const char *key)
{
	for (size_t k = 0; k < p->n_settings; k++)
		if (!strcmp(p->settings[k].key, key))
			return p->settings[k].value;
	return NULL;
}

size_t sbc_package_n_tensors(const sbc_package *p)
{
	return p->n_tensors;
}

const sbc_named_tensor *sbc_package_tensor_at(const sbc_package *p, size_t i)
{
	return i < p->n_tensors ? &p->tensors[i] : NULL;
}
