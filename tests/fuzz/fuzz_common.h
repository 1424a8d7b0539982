/* Shared by the fuzz targets: the libFuzzer entry point's declaration, and an in-memory file
 * for readers that take a path (they open, map and stat it like any file).
 *
 * Threads: a fuzz target runs one input at a time. */
#ifndef SB_FUZZ_COMMON_H
#define SB_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file: one memfd per process, rewritten for each input. Returns its path
 * ("/proc/self/fd/N"), or NULL when memfd is not available. */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("sb-fuzz", MFD_CLOEXEC);
		if (fd < 0)
			return NULL;
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		return NULL;
	return path;
}

#endif
