#include "sb_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *sb_status_str(sb_status st)
{
	switch (st) {
	case SB_OK: return "ok";
	case SB_ERR_INVALID: return "invalid argument";
	case SB_ERR_IO: return "input/output error";
	case SB_ERR_NOSPACE: return "no space left (disk full or file size limit)";
	case SB_ERR_FORMAT: return "bad or unsupported data";
	case SB_ERR_EMPTY: return "no audio (zero length)";
	case SB_ERR_EXISTS: return "file exists";
	case SB_ERR_NOMEM: return "out of memory";
	case SB_ERR_DEVICE: return "device unavailable";
	case SB_ERR_DEVICE_OOM: return "device out of memory";
	case SB_ERR_DEVICE_LOST: return "device lost";
	case SB_ERR_CANCELLED: return "cancelled";
	case SB_ERR_MODEL: return "model error";
	case SB_ERR_UNSUPPORTED: return "unsupported";
	case SB_ERR_TIMEOUT: return "timed out";
	case SB_ERR_NONFINITE: return "the model produced NaN or infinite samples";
	case SB_ERR_NETWORK: return "download failed";
	}
	return "unknown status";
}

void sb_logv(const sb_logger *log, sb_log_level level, const char *fmt, va_list ap)
{
	if (!log || !log->fn)
		return;
	char buf[2048];
	vsnprintf(buf, sizeof buf, fmt, ap);
	log->fn(log->user, level, buf);
}

void sb_log(const sb_logger *log, sb_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_logv(log, level, fmt, ap);
	va_end(ap);
}

double sb_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct timespec sb_deadline(int clock, long ms)
{
	struct timespec t;
	clock_gettime(clock, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

size_t sb_data_dirs(const char *sub, const char *const *extra, char (*dirs)[4096], size_t max)
{
	size_t n = 0;
	for (size_t i = 0; extra && extra[i] && n < max; i++)
		snprintf(dirs[n++], 4096, "%s", extra[i]);
	const char *xdg = sb_knob_get("XDG_DATA_HOME");
	const char *home = sb_knob_get("HOME");
	if (n < max && xdg && xdg[0] == '/')
		snprintf(dirs[n++], 4096, "%s/stembridge/%s", xdg, sub);
	else if (n < max && home && *home)
		snprintf(dirs[n++], 4096, "%s/.local/share/stembridge/%s", home, sub);
	const char *sys = sb_knob_get("XDG_DATA_DIRS");
	if (!sys || !*sys)
		sys = "/usr/local/share:/usr/share";
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", sys);
	char *save = NULL;
	for (char *d = strtok_r(buf, ":", &save); d && n < max; d = strtok_r(NULL, ":", &save))
		if (d[0] == '/')
			snprintf(dirs[n++], 4096, "%s/stembridge/%s", d, sub);
	return n;
}

void sb_errorf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
