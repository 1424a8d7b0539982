/* Runs one job to the end on the calling thread: open the model and the input, separate on the
 * device the scheduler chose, fall back when the device fails, write the stems (temporary
 * names, renamed only when every requested stem is complete), write the manifest.
 *
 * Fallback ladder (STYLE habit 16): SB_ERR_DEVICE_OOM -> restart with half the chunk length, up
 * to 3 times, then the native CPU; SB_ERR_DEVICE_LOST or SB_ERR_DEVICE -> the native CPU. Each
 * step is logged once with its reason and recorded in the manifest. The stem writer is reset
 * between attempts, so a failed attempt leaves nothing behind.
 */
#ifndef SB_JOB_RUN_H
#define SB_JOB_RUN_H

#include "backend/device.h"
#include "jobs/engine.h"
#include "models/model.h"

#include <stdatomic.h>

typedef struct {
	const sb_device_props *device;   /* chosen by the scheduler */
	sb_cl_device *cl;                /* opened for it, NULL on the native path */
	const sb_device_props *cpu;      /* the floor, always present */
	const char *requested;           /* what the job or mode asked for ("auto", a key ...) */
	const char *fallback_reason;     /* non-empty when 'device' is already a fallback */
	const sb_logger *log;
	const atomic_int *cancel;
	void (*progress)(void *user, const sb_job_progress *p);
	void *progress_user;
	int cpu_threads;
	const char *const *model_path;
} sb_job_env;

sb_status sb_job_run(const sb_job_spec *spec, const sb_job_env *env, sb_job_result *res);

#endif
