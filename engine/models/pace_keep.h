/* Each device's pace on a model, kept between jobs and processes, so that a device too slow to
 * help beside the others (core/pace.h: under a sixth of their rate) need not run a first piece
 * to find that out, slowing them all the while (on the H100 machine that first CPU segment
 * lasted most of a song the GPU alone finished in 1.4 s).
 *
 * The file: $SB_PACE_FILE, else $XDG_CACHE_HOME/stembridge/paces.txt (else ~/.cache/stembridge;
 * removing it forgets every pace), a line a device
 * and model: "<seconds a unit> <batch> <model>\t<device label>". A line that does not read so
 * is skipped; a missing or unreadable file is no pace known. Written to a temporary name and
 * renamed (io/temp_file.h), so a reader never sees half of it; two processes saving at once
 * keep the last one's lines. At most SB_PACE_KEEP_MAX lines, the newest.
 *
 * Only for several devices (one alone has nothing to share): sb_pace_keep_load fills
 * ctx-ready paces, sb_pace_keep_save records what the run measured (models/share.c writes
 * them back into sb_run_ctx.pace).
 *
 * Threads: any; nothing here holds state. Two threads saving at once keep one's lines.
 */
#ifndef SB_PACE_KEEP_H
#define SB_PACE_KEEP_H

#include "backend/backend.h"
#include "sb_common.h"

#define SB_PACE_KEEP_MAX 256

/* pace[i] = the kept seconds a unit of dev[i] on model at batch, 0 when none. */
void sb_pace_keep_load(const char *model, int batch, const sb_exec *dev, int n, double *pace);
/* Records pace[i] > 0 for dev[i] (the others' lines stay). Failures are logged at INFO and
 * change nothing else: a pace is a hint. */
void sb_pace_keep_save(const char *model, int batch, const sb_exec *dev, int n,
                       const double *pace, const sb_logger *log);

#endif
