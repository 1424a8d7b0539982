/* Cache files: small text files the engine keeps between runs in the user's cache folder (each
 * product shape's measured path, each device's pace on a model): where they live, how one is opened
 * for reading, and how one is written whole.
 *
 * A kept file is a hint: a missing, damaged or unwritable one is measured again, never a job's
 * failure. Writing: under an exclusive flock() on "PATH.lock", the caller first reads the file
 * again (another process may have kept something since it read it), then the whole contents go
 * to a temporary name (io/temp_file.h) renamed over the file, so a reader never sees half of
 * one and no writer drops another's lines.
 *
 * Threads: any; nothing here holds state.
 */
#ifndef SB_CACHE_FILE_H
#define SB_CACHE_FILE_H

#include "sb_common.h"

#include <stdio.h>

/* $XDG_CACHE_HOME/stembridge, else $HOME/.cache/stembridge (a relative XDG_CACHE_HOME is
 * ignored), made when missing. 0 when neither is usable. */
int sb_cache_dir(char *buf, size_t len);

/* Opens a kept file for reading: NULL with errno when there is none (ENOENT), it is not a
 * regular file (EINVAL: a FIFO or a device would block or never end) or it is over max_bytes
 * (EFBIG). */
FILE *sb_cache_file_open(const char *path, long max_bytes);

/* Writes PATH whole (above), its folders made: reread(user) under the lock (may be NULL; -1
 * with errno: the file could not be read now, and is left as it is), then write(f, user),
 * which returns 0 when it wrote everything. 0, or -1 with errno. */
int sb_cache_file_save(const char *path, int (*reread)(void *user),
                       int (*write)(FILE *f, void *user), void *user, const sb_logger *log);

#endif
