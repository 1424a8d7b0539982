/* What the files of `stembridge batch` share (private to tools/cli):
 *   batch_list.c     the list of inputs (a file of paths or a folder), its root, the shards
 *   batch_restart.c  what an earlier run left: complete, stale or failed inputs
 *   batch_log.c      the JSON lines log: one line per input, a summary per run, read back
 *   batch_report.c   `batch --report`: every task's log summed
 *   cmd_batch.c      the command: its options and the run loop of one task
 */
#ifndef SB_CLI_BATCH_H
#define SB_CLI_BATCH_H

#include "stembridge.h"

#include <jansson.h>
#include <stddef.h>
#include <sys/stat.h>

/* ---- batch_list.c ---- */

typedef struct {
	char **v;
	size_t n, cap;
} sb_strvec;

int sb_strvec_push(sb_strvec *s, const char *p);   /* 0: out of memory */
void sb_strvec_free(sb_strvec *s);
int sb_strvec_cmp(const void *a, const void *b);   /* qsort and bsearch on char* */

/* The inputs LIST names, repeats removed, and the root their folders under OUT are relative
 * to (--root, the LIST folder, or the folder they have in common). out_real (OUT) is left out
 * of a walked folder. 0, or the exit status with the error printed. */
int sb_batch_list_load(const char *list, const char *root_arg, const char *out_real,
                       sb_strvec *all, char *root, size_t rlen);
/* OUT's sub-folder for an input: its folder relative to root ("" for root itself). */
void sb_batch_relative_folder(const char *input, const char *root, char *out, size_t len);
/* Shard from --shard, else the Slurm array task, else 0/1. 0 when it makes no sense. */
int sb_batch_shard(const char *arg, long *idx, long *count);

/* ---- batch_restart.c ---- */

typedef enum { SB_PRIOR_NONE, SB_PRIOR_COMPLETE, SB_PRIOR_STALE, SB_PRIOR_OTHER } sb_batch_prior;

/* What the manifest at mpath says of this input. */
sb_batch_prior sb_batch_prior_of(const char *mpath, const char *abs_input,
                                 const struct stat *in_st);
/* The paths that failed in an earlier run with the file as it is now, sorted (--skip-failed). */
void sb_batch_earlier_failures(const char *out_dir, sb_strvec *failed);

/* ---- batch_log.c ---- */

/* The log of one task: where its lines go and what each one names. */
typedef struct {
	int fd;
	char shard[64];   /* "I/N" */
	char host[256];
} sb_batch_log;

/* What a task did, summed over its lines. */
typedef struct {
	long done, skipped, failed, cancelled;
	double audio_s, sep_s;
} sb_batch_tally;

double sb_batch_wall_now(void);
/* A file's modification time in nanoseconds, as the log and the manifest record it. */
long long sb_batch_mtime_ns(const struct stat *st);
/* The line of an input's result (r NULL: skipped, complete), counted in t. */
void sb_batch_result_line(const sb_batch_log *log, const char *abs_in, const struct stat *in_st,
                          const char *status, double seconds, const sb_job_result *r,
                          sb_batch_tally *t);
/* The line of an input that never became a job: failed before it started, or skipped for a
 * reason (its error field). A failure is said on stderr too. */
void sb_batch_unstarted(const sb_batch_log *log, const char *in, const char *abs_in,
                        const struct stat *in_st, const char *status, const char *why,
                        sb_batch_tally *t);
/* The run's summary line. */
void sb_batch_summary_line(const sb_batch_log *log, const sb_device_list *dl,
                           const sb_device_set *set, size_t inputs, long not_started,
                           const sb_batch_tally *t, double wall_start, double wall, int stop_sig);
/* Calls fn on every line of every task's log in OUT/logs (NULL for a line that is not JSON: a
 * task killed in the middle of a write). Returns the logs read, -1 when there is no log folder
 * (errno says why). */
long sb_batch_each_log_line(const char *out_dir, void (*fn)(void *user, json_t *line),
                            void *user);

/* ---- batch_report.c ---- */

/* Sums every task's log in OUT/logs and prints it; the exit status. */
int sb_batch_report(const char *out_dir, int as_json);

#endif
