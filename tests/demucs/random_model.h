/* A full-size HTDemucs with random weights, from shared/golden/htdemucs/released-shapes.json
 * (the released checkpoints' tensor names and shapes and their constructor settings): for the
 * tests that check a released-size model loads and runs, and for the benches. */
#ifndef SB_TEST_RANDOM_MODEL_H
#define SB_TEST_RANDOM_MODEL_H

#include "models/demucs/safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t rm_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Writes model 'which' ("htdemucs", "htdemucs_6s") of shapes_json to out_path as F32 with its
 * settings as metadata. Weights are uniform in +-sqrt(3 / fan-in), norm weights 1, biases 0,
 * LayerScales 0.01: the scale of a trained network's activations, so nothing overflows.
 * 'mutate' (may be NULL) may change one tensor's shape before writing (for error tests).
 * Returns 0 on success. */
static inline int random_model_write(const char *shapes_json, const char *which, const char *out_path,
                              void (*mutate)(const char *name, int *ndim, int64_t *shape))
{
	json_error_t err;
	json_t *root = json_load_file(shapes_json, 0, &err);
	json_t *m = root ? json_object_get(root, which) : NULL;
	json_t *tensors = m ? json_object_get(m, "tensors") : NULL;
	json_t *kwargs = m ? json_object_get(m, "kwargs") : NULL;
	if (!tensors || !kwargs) {
		fprintf(stderr, "%s: no model '%s' (%s)\n", shapes_json, which, root ? "" : err.text);
		json_decref(root);
		return -1;
	}
	const size_t n = json_object_size(tensors);
	sb_st_write_tensor *t = calloc(n, sizeof *t);
	const char *meta[64] = {0};
	char *meta_store[32] = {0};
	int nm = 0;
	const char *key;
	json_t *v;
	json_object_foreach(kwargs, key, v) {
		if (nm >= 60)
			break;
		char buf[512] = "";
		if (json_is_integer(v))
			snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
		else if (json_is_string(v))
			snprintf(buf, sizeof buf, "%s", json_string_value(v));
		else if (json_is_real(v))
			snprintf(buf, sizeof buf, "%g", json_real_value(v));
		else if (json_is_array(v))
			for (size_t i = 0; i < json_array_size(v); i++) {
				const size_t at = strlen(buf);
				snprintf(buf + at, sizeof buf - at, "%s%s", i ? "," : "",
				         json_string_value(json_array_get(v, i)));
			}
		const int slot = nm / 2;
		meta_store[slot] = strdup(buf);
		meta[nm] = key;
		meta[nm + 1] = meta_store[slot];
		nm += 2;
	}
	uint64_t seed = 12345;
	size_t i = 0;
	int rc = 0;
	json_object_foreach(tensors, key, v) {
		t[i].name = key;
		t[i].ndim = (int)json_array_size(v);
		int64_t numel = 1, fan = 1;
		for (int d = 0; d < t[i].ndim; d++) {
			t[i].shape[d] = json_integer_value(json_array_get(v, (size_t)d));
			numel *= t[i].shape[d];
			if (d)
				fan *= t[i].shape[d];
		}
		if (mutate)
			mutate(key, &t[i].ndim, t[i].shape);
		numel = 1;
		for (int d = 0; d < t[i].ndim; d++)
			numel *= t[i].shape[d];
		float *data = malloc(sizeof(float) * (size_t)(numel ? numel : 1));
		if (!data) {
			rc = -1;
			break;
		}
		const size_t kl = strlen(key);
		const int is_scale = kl > 6 && !strcmp(key + kl - 6, ".scale");
		const int is_weight = kl > 7 && !strcmp(key + kl - 7, ".weight");
		const float a = sqrtf(3.f / (float)(fan ? fan : 1));
		for (int64_t k = 0; k < numel; k++) {
			if (t[i].ndim == 1)
				data[k] = is_scale ? 0.01f : is_weight ? 1.f : 0.f;
			else
				data[k] = a * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
		}
		t[i].data = data;
		i++;
	}
	if (rc == 0 && sb_safetensors_write(out_path, t, (int)n, meta, NULL) != SB_OK)
		rc = -1;
	for (size_t k = 0; k < n; k++)
		free((void *)t[k].data);
	for (int k = 0; k < 32; k++)
		free(meta_store[k]);
	free(t);
	json_decref(root);
	return rc;
}

#endif
