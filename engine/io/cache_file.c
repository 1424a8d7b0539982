/* Cache files kept between runs (cache_file.h). */
#include "io/cache_file.h"

#include "io/temp_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int sb_cache_dir(char *buf, size_t len)
{
	const char *x = sb_knob_get("XDG_CACHE_HOME"), *h = sb_knob_get("HOME");
	int n;
	if (x && x[0] == '/')
		n = snprintf(buf, len, "%s/stembridge/", x);
	else if (h && h[0] == '/')
		n = snprintf(buf, len, "%s/.cache/stembridge/", h);
	else
		return 0;
	if (n <= 0 || (size_t)n >= len || sb_make_parents(buf) != 0)
		return 0;
	buf[n - 1] = '\0'; /* the folder, without its last slash */
	return 1;
}

FILE *sb_cache_file_open(const char *path, long max_bytes)
{
	const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) != 0)
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = EINVAL;
	else if (st.st_size > max_bytes)
		err = EFBIG;
	FILE *f = err ? NULL : fdopen(fd, "r");
	if (!f) {
		if (!err)
			err = errno;
		close(fd);
		errno = err;
	}
	return f;
}

int sb_cache_file_save(const char *path, int (*reread)(void *user),
                       int (*write)(FILE *f, void *user), void *user, const sb_logger *log)
{
	char dir[4096], lock[4200], made[4096];
	sb_dir_of(path, dir, sizeof dir);
	snprintf(made, sizeof made, "%s", path);
	sb_make_parents(made); /* a failure shows at the temporary file */
	snprintf(lock, sizeof lock, "%s.lock", path);
	const int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lfd >= 0)
		flock(lfd, LOCK_EX);
	if (reread && reread(user) != 0) {
		const int err = errno;
		if (lfd >= 0)
			close(lfd);
		errno = err;
		return -1;
	}
	sb_temp_clean_stale(dir, log);
	sb_temp t;
	int ok = sb_temp_create(path, &t) == 0;
	int err = ok ? 0 : errno;
	if (ok) {
		const int fd = dup(t.fd);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (!f && fd >= 0)
			close(fd);
		ok = f != NULL;
		if (ok) {
			ok = write(f, user) == 0;
			ok = fflush(f) == 0 && !ferror(f) && ok;
			ok = fclose(f) == 0 && ok;
		}
		if (ok && rename(t.path, path) == 0)
			t.path[0] = '\0';
		else
			ok = 0;
		err = errno;
		sb_temp_discard(&t);
	}
	if (lfd >= 0)
		close(lfd); /* and with it the lock */
	if (!ok)
		errno = err ? err : EIO;
	return ok ? 0 : -1;
}
