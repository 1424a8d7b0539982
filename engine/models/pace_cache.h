/* The pace cache: each device's pace on a model, kept between jobs and processes, so that a device
 * too slow to help beside the others (core/pace.h: under a sixth of their rate) need not run a
 * first piece to find that out, slowing them all the while (on the H100 machine that first CPU
 * segment lasted most of a song the GPU alone finished in 1.4 s).
 *
 * The file: $SB_PACE_FILE, else paces.txt in the cache folder (io/cache_file.h; delete it to
 * measure every device again); a line a device and job: "<seconds a unit> <skips> <job>\t<the
 * device's key>", the job being the model, precision, threads and batch
 * (sb_pace_cache_job). A damaged file is ignored (every pace measured again) and rewritten
 * whole. Written under a lock, to a temporary name, renamed (io/cache_file.h). At most
 * SB_PACE_KEEP_MAX lines, the newest.
 *
 * A device the sharing rule leaves out of a job is not measured in it, so its kept pace ages:
 * after SB_PACE_KEEP_SKIPS jobs in a row without it the line goes, and the next job measures it
 * again (a faster driver, a machine less loaded than when it was measured). A job that shared
 * nothing (a silent file) changes no line.
 *
 * Only for several devices (one alone has nothing to share).
 *
 * Threads: any; nothing here holds state.
 */
#ifndef SB_PACE_CACHE_H
#define SB_PACE_CACHE_H

#include "backend/backend.h"
#include "models/model.h"
#include "sb_common.h"

#define SB_PACE_KEEP_MAX 256
#define SB_PACE_KEEP_SKIPS 8

/* The job's part of a line's key. */
void sb_pace_cache_job(char *buf, size_t len, const char *model, int bf16, int threads,
                      int batch);
/* pace[i].kept and .skips for dev[i] from the file; everything else zeroed. */
void sb_pace_cache_load(const char *job, const sb_exec *dev, int n, sb_pace_entry *pace,
                       const sb_logger *log);
/* Records the job's outcome: a device measured gets its new pace, one the rule left out its
 * kept pace a skip older (gone after SB_PACE_KEEP_SKIPS), any other its line as it was; the
 * other devices' and jobs' lines stay. A file that cannot be read now is left alone. Failures
 * are logged at INFO and change nothing else: a pace is a hint. */
void sb_pace_cache_save(const char *job, const sb_exec *dev, int n, const sb_pace_entry *pace,
                       const sb_logger *log);

#endif
