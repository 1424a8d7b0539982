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
 * Entries of other subsystems are ignored; sb_fault_number() reads theirs too (jobs/job_run.h).
 *
 * Threads: any; nothing here holds state but the fault counters (atomics).
 */
#ifndef SB_TEMP_FILE_H
#define SB_TEMP_FILE_H

#include "sb_common.h"

#include <stddef.h>

typedef struct {
	int fd;              /* open for writing, flock'ed; -1 when closed */
	char path[4096];     /* the temporary name; "" once placed or removed */
} sb_temp;

/* N of an entry "<key>N" in SB_FAULT_INJECT (key such as "io:rename:"), N > 0; 0 when there
 * is none. */
long sb_fault_number(const char *key);

/* Creates the temporary file for 'final' (its folder must exist). 0, or -1 with errno. */
int sb_temp_create(const char *final, sb_temp *t);
/* Closes the descriptor (and with it the lock). Call only once the file has its final name
 * or has been removed. */
void sb_temp_close(sb_temp *t);
/* Removes the temporary file (if it still has its temporary name) and closes it. */
void sb_temp_discard(sb_temp *t);

/* Removes stale temporary files of our naming in 'dir' (see above). Logs one warning line
 * naming the folder and the count when it removed any. Returns how many it removed. */
int sb_temp_clean_stale(const char *dir, const sb_logger *log);

/* Whether 'name' (a base name) is of our temporary naming, and the writer's pid in it. */
int sb_temp_is_ours(const char *name, long *pid);

/* Gives a finished file its final name; without overwrite never replaces an existing file
 * (renameat2 RENAME_NOREPLACE, or link+unlink where the file system lacks it). 0, or -1 with
 * errno (EEXIST when the name is taken). */
int sb_place_file(const char *from, const char *to, int overwrite);
/* fsync() of a folder, so that renames in it survive a power cut. 0, or -1 with errno. */
int sb_sync_dir(const char *dir);
/* mkdir -p of every folder above the file 'path' (path is restored). 0, or -1 with errno. */
int sb_make_parents(char *path);
/* The same, recording each folder it created (top down) in made[*n_made..max), so that a job
 * that ends without its files can remove them again (sb_remove_made_dirs). */
int sb_make_parents_tracked(char *path, char (*made)[4096], int *n_made, int max);
/* rmdir of the recorded folders, deepest first; a folder that is not empty stays. */
void sb_remove_made_dirs(char (*made)[4096], int n_made);
/* The folder part of 'path' ("." when it has none). */
void sb_dir_of(const char *path, char *dir, size_t len);

#endif
