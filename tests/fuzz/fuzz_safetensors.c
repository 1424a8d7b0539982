/* Fuzz target: a model file as a user downloads or converts it. The safetensors reader
 * (engine/models/demucs/safetensors.c) checks the header and layout; every tensor is then read as
 * float, and the whole file is opened as a Demucs model (settings, bag, every tensor's name
 * and shape, finite weights). */
#include "fuzz_common.h"

#include "models/demucs/demucs.h"
#include "models/demucs/safetensors.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);
	if (!path)
		return 0;
	sb_safetensors *st = NULL;
	if (sb_safetensors_open(path, NULL, &st) == SB_OK) {
		for (int i = 0; i < sb_safetensors_count(st); i++) {
			const sb_st_tensor *t = sb_safetensors_at(st, i);
			if (t->numel > (1 << 20))
				continue;
			float *dst = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
			if (dst)
				sb_safetensors_read_f32(st, t->name, NULL, 0, dst, "fuzz", NULL);
			free(dst);
		}
		(void)sb_safetensors_meta(st, "sources");
		sb_safetensors_close(st);
		sb_model *m = NULL;
		if (sb_demucs_model_open(path, "fuzz", NULL, NULL, &m) == SB_OK)
			sb_model_free(m);
	}
	return 0;
}
