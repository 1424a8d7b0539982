/* Temporary files of our own naming, and the steps that turn them into a user's files.
 *
 * NAMING: a file on its way to FINAL ("dir/base") is written as "dir/.base.part-PID-XXXXXX"
 * (PID: the writer's process id; XXXXXX: mkstemp's). It is created 0644 in FINAL's own folder,
 * so the rename that gives it its name never crosses file systems.
 *
 * LIVE OR STALE: the writer holds an exclusive flock() on the file from creation until the
 * file is renamed into place or removed (sb_temp_close() after that). A killed or crashed
 * writer's locks are gone with it. A file of our naming is stale when its lock can be taken and
 * its writer's process is not running here (or, where the lock is free, it has not been touched
 * for an hour: a live writer holds its lock, so a free lock plus an hour is a dead writer on
 * another host). sb_temp_clean_stale() removes stale files in one folder and never a file a
 * running writer holds; nothing else of the user's matches the naming.
 *
 * FAULT INJECTION (tests of the commit's rollback), in SB_FAULT_INJECT, comma-separated:
 *   io:rename:K     the K-th sb_place_file() of this process fails with EIO (1-based)
 *   io:dirsync:K    the K-th sb_sync_dir() of this process fails with EIO
 * read through core/fault.h, which reads every subsystem's entries.
 *
 * Threads: any; nothing here holds state but the fault counters (atomics).
 */
#ifndef SB_TEMP_FILE_H
#define SB_TEMP_FILE_H

#include "core/fault.h"
#include "sb_common.h"

#include <stddef.h>

/* sb_temp, sb_temp_create(), sb_temp_discard(), sb_temp_clean_stale(), sb_place_file(),
 * sb_sync_dir(), sb_make_parents() and sb_dir_of(): stembridge.h. */

/* Closes the descriptor (and with it the lock). Call only once the file has its final name
 * or has been removed. */
void sb_temp_close(sb_temp *t);
/* Whether 'name' (a base name) is of our temporary naming, and the writer's pid in it. */
int sb_temp_is_ours(const char *name, long *pid);

/* The same, recording each folder it created (top down) in made[*n_made..max), so that a job
 * that ends without its files can remove them again (sb_remove_made_dirs). */
int sb_make_parents_tracked(char *path, char (*made)[4096], int *n_made, int max);
/* rmdir of the recorded folders, deepest first; a folder that is not empty stays. */
void sb_remove_made_dirs(char (*made)[4096], int n_made);
#endif
