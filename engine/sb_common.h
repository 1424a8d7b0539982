/* Stembridge engine: status codes and logging shared by every engine module.
 *
 * Habits (../shared/STYLE.md): the engine never ends the process and never prints on its own;
 * every function that can fail returns an sb_status and reports the reason through the
 * caller's logger (the CLI routes it to stderr, the plugin to LV2_Log). No thread-local state.
 */
#ifndef SB_COMMON_H
#define SB_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	SB_OK = 0,
	SB_ERR_INVALID,      /* bad argument or unparseable user input */
	SB_ERR_IO,           /* read/write failed (not space) */
	SB_ERR_NOSPACE,      /* disk full or file size limit */
	SB_ERR_FORMAT,       /* not audio, truncated, NaN/Inf samples, bad model file */
	SB_ERR_EMPTY,        /* zero-length audio */
	SB_ERR_EXISTS,       /* would overwrite a file the user has */
	SB_ERR_NOMEM,        /* host allocation failed */
	SB_ERR_DEVICE,       /* device missing or failed (not memory) */
	SB_ERR_DEVICE_OOM,   /* device allocation failed: retry smaller, then CPU */
	SB_ERR_DEVICE_LOST,  /* device lost mid-job: finish on the CPU */
	SB_ERR_CANCELLED,
	SB_ERR_MODEL,        /* model missing or inconsistent */
	SB_ERR_UNSUPPORTED,
	SB_ERR_TIMEOUT,      /* a wait ran out before the job ended */
	SB_ERR_NONFINITE,    /* a model produced NaN or infinite samples: never written */
	SB_ERR_NETWORK       /* a download failed: offline, an HTTP error, a stalled transfer */
} sb_status;

/* A short constant English phrase for a status ("device out of memory"). */
const char *sb_status_str(sb_status st);

typedef enum { SB_LOG_ERROR = 0, SB_LOG_WARNING, SB_LOG_INFO, SB_LOG_DEBUG } sb_log_level;

/* Called from any engine thread; must be thread-safe. msg has no trailing newline. */
typedef void (*sb_log_fn)(void *user, sb_log_level level, const char *msg);

typedef struct {
	sb_log_fn fn; /* NULL: messages are dropped */
	void *user;
} sb_logger;

/* A message into a caller's buffer (err, errlen), for functions that report through one (the
 * checkpoint converter's readers). */
void sb_errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void sb_log(const sb_logger *log, sb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void sb_logv(const sb_logger *log, sb_log_level level, const char *fmt, va_list ap);

/* Monotonic clock in seconds, for timings in manifests and benches. */
double sb_now(void);
/* The time ms milliseconds from now on clock (CLOCK_REALTIME for pthread_cond_timedwait's
 * default, CLOCK_MONOTONIC for a condition variable set to it). */
struct timespec sb_deadline(clockid_t clock, long ms);

/* Stembridge's data folders for 'sub' ("models", "clblast") in search order: each entry of
 * the NULL-terminated 'extra' as given, then $XDG_DATA_HOME/stembridge/sub (default
 * ~/.local/share/stembridge/sub), then each of $XDG_DATA_DIRS (default
 * /usr/local/share:/usr/share) + /stembridge/sub. Returns how many of 'max' were filled. */
size_t sb_data_dirs(const char *sub, const char *const *extra, char (*dirs)[4096], size_t max);

#ifdef __cplusplus
}
#endif
#endif
