/* Stembridge engine: what every engine module shares beyond the public header (stembridge.h,
 * which this builds on, as lilv's internals build on lilv.h): logging calls and data folders.
 *
 * Habits (../shared/STYLE.md): the engine never ends the process and never prints on its own;
 * every function that can fail returns an sb_status and reports the reason through the
 * caller's logger (the CLI routes it to stderr, the plugin to LV2_Log). No thread-local state.
 */
#ifndef SB_COMMON_H
#define SB_COMMON_H

#include "stembridge.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A message into a caller's buffer (err, errlen), for functions that report through one (the
 * checkpoint converter's readers). */
void sb_errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void sb_log(const sb_logger *log, sb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void sb_logv(const sb_logger *log, sb_log_level level, const char *fmt, va_list ap);

/* Stembridge's data folders for 'sub' ("models", "clblast") in search order: each entry of
 * the NULL-terminated 'extra' as given, then $XDG_DATA_HOME/stembridge/sub (default
 * ~/.local/share/stembridge/sub), then each of $XDG_DATA_DIRS (default
 * /usr/local/share:/usr/share) + /stembridge/sub. Returns how many of 'max' were filled. */
size_t sb_data_dirs(const char *sub, const char *const *extra, char (*dirs)[4096], size_t max);

#ifdef __cplusplus
}
#endif
#endif
