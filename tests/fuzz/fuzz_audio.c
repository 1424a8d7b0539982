/* Fuzz target: the audio reader path of a job (engine/io/audio_file.c over libsndfile): the
 * probe that refuses truncated, empty or odd files, then every frame read in the windows a
 * model asks for, with the NaN/Inf check. */
#include "fuzz_common.h"

#include "io/audio_file.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);
	if (!path)
		return 0;
	sb_source *src = NULL;
	sb_audio_info info;
	if (sb_source_file(path, NULL, &src, &info) != SB_OK)
		return 0;
	enum { WIN = 4096 };
	float *buf = malloc(sizeof(float) * WIN * (size_t)src->channels);
	/* windows that start before the file and run past its end, as the models read */
	for (int64_t at = -WIN / 2; buf && at < src->frames && at < (1 << 22); at += WIN - 100)
		if (src->read(src, at, WIN, buf) != SB_OK)
			break;
	free(buf);
	src->close(src);
	return 0;
}
