/* Temporary files of our own naming (temp_file.h). */
#include "io/temp_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define STALE_UNLOCKED_S (60 * 60)

/* Process-wide counters for the io:* fault injector only. */
static atomic_long renames_done, dirsyncs_done;

/* K of "io:<what>:K" in SB_FAULT_INJECT, 0 when absent. */
static long fault_at(const char *what)
{
	char key[32];
	snprintf(key, sizeof key, "io:%s:", what);
	return sb_fault_number(key);
}

void sb_dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

int sb_temp_create(const char *final, sb_temp *t)
{
	t->fd = -1;
	t->path[0] = '\0';
	char dir[4096];
	sb_dir_of(final, dir, sizeof dir);
	const char *slash = strrchr(final, '/');
	const char *base = slash ? slash + 1 : final;
	if (!*base || snprintf(t->path, sizeof t->path, "%s/.%s.part-%ld-XXXXXX", dir, base,
	                       (long)getpid()) >= (int)sizeof t->path) {
		t->path[0] = '\0';
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = mkostemp(t->path, O_CLOEXEC);
	if (fd < 0) {
		t->path[0] = '\0';
		return -1;
	}
	/* the lock tells a cleaner in another process that this writer is alive; a file system
	 * without flock still works, the pid in the name then speaks for the writer */
	flock(fd, LOCK_EX | LOCK_NB);
	fchmod(fd, 0644); /* mkstemp makes 0600; a stem is an ordinary file of the user's */
	t->fd = fd;
	return 0;
}

void sb_temp_close(sb_temp *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

void sb_temp_discard(sb_temp *t)
{
	if (t->path[0])
		unlink(t->path);
	t->path[0] = '\0';
	sb_temp_close(t);
}

int sb_temp_is_ours(const char *name, long *pid)
{
	/* ".<base>.part-<pid>-XXXXXX" */
	const size_t n = strlen(name);
	if (n < 1 + 1 + 6 + 1 + 1 + 6 || name[0] != '.')
		return 0;
	const char *suffix = name + n - 7;
	if (suffix[0] != '-')
		return 0;
	for (int i = 1; i < 7; i++) {
		const char c = suffix[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			return 0;
	}
	/* back from the suffix over the pid's digits to ".part-" */
	const char *p = suffix;
	while (p > name && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == suffix || p - name < 7 || strncmp(p - 6, ".part-", 6) != 0 || p - 6 == name)
		return 0;
	if (pid)
		*pid = strtol(p, NULL, 10);
	return 1;
}

static int writer_running(long pid)
{
	if (pid <= 0)
		return 0;
	if (kill((pid_t)pid, 0) == 0)
		return 1;
	return errno == EPERM; /* someone else's process: alive */
}

int sb_temp_clean_stale(const char *dir, const sb_logger *log)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int removed = 0;
	const int dfd = dirfd(d);
	const time_t now = time(NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		long pid = 0;
		if (!sb_temp_is_ours(e->d_name, &pid))
			continue;
		const int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		struct stat sbuf;
		int stale = 0;
		if (fstat(fd, &sbuf) == 0 && S_ISREG(sbuf.st_mode)) {
			if (flock(fd, LOCK_EX | LOCK_NB) == 0)
				/* the lock is free: its writer is gone, unless it is this very moment
				 * between creating the file and locking it (then it is running) */
				stale = !writer_running(pid) || now - sbuf.st_mtime > STALE_UNLOCKED_S;
			else if (errno != EWOULDBLOCK)
				/* no locks on this file system: the pid alone, and only when its
				 * writer ran on this machine and is gone */
				stale = !writer_running(pid) && now - sbuf.st_mtime > 60;
		}
		if (stale && unlinkat(dfd, e->d_name, 0) == 0)
			removed++;
		close(fd);
	}
	closedir(d);
	if (removed)
		sb_log(log, SB_LOG_WARNING,
		       "removed %d temporary file%s left in %s by an interrupted run", removed,
		       removed == 1 ? "" : "s", dir);
	return removed;
}

int sb_place_file(const char *from, const char *to, int overwrite)
{
	const long k = fault_at("rename");
	if (k && atomic_fetch_add(&renames_done, 1) + 1 == k) {
		errno = EIO;
		return -1;
	}
	if (overwrite)
		return rename(from, to);
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* file systems without RENAME_NOREPLACE: link() refuses an existing name just as well */
	if (link(from, to) != 0)
		return -1;
	unlink(from);
	return 0;
}

int sb_sync_dir(const char *dir)
{
	const long k = fault_at("dirsync");
	if (k && atomic_fetch_add(&dirsyncs_done, 1) + 1 == k) {
		errno = EIO;
		return -1;
	}
	const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	const int e = errno;
	close(fd);
	/* some file systems cannot sync a folder; that is not a failure of ours */
	if (r != 0 && (e == EINVAL || e == EROFS))
		r = 0;
	errno = e;
	return r;
}

int sb_make_parents_tracked(char *path, char (*made)[4096], int *n_made, int max)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, 0777);
		int e = errno;
		if (r == 0 && made && *n_made < max)
			snprintf(made[(*n_made)++], 4096, "%s", path);
		*p = '/';
		if (r != 0 && e != EEXIST) {
			errno = e;
			return -1;
		}
	}
	return 0;
}

int sb_make_parents(char *path)
{
	return sb_make_parents_tracked(path, NULL, NULL, 0);
}

void sb_remove_made_dirs(char (*made)[4096], int n_made)
{
	for (int i = n_made - 1; i >= 0; i--)
		rmdir(made[i]);
}
