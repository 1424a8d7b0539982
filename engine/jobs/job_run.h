/* Runs one job to the end on the calling thread: open the input and read it for its peak, open
 * the devices the scheduler chose and the model, separate, fall back when a device fails, give
 * the model and the devices back (sb_job_env.hold), write the stems (temporary names, renamed
 * only when every requested stem is complete), write the manifest.
 *
 * THE ONE PLACE FOR FALLBACKS (STYLE habit 16): every step from the device asked for to the
 * one that ran is decided here and recorded once (log, manifest events, the job's fallback
 * reason, the progress the UIs show):
 *   - asked for a device that is not here (a saved key from another machine, "opencl:3" with
 *     two devices): resolved to the CPU by sb_devices_resolve_set(), with its reason;
 *   - a device that does not open, or was lost earlier in this process: left out of the set;
 *     the CPU when none is left;
 *   - SB_ERR_DEVICE_OOM from the model: the chunk halves (models with chunks), up to 3 times,
 *     then the CPU; SB_ERR_DEVICE_LOST, SB_ERR_DEVICE, or NaN/Inf from a device: the CPU.
 *     A model that shares one file among several devices drops a failing device itself and
 *     reports it (sb_device_report); it returns a device failure only when none is left.
 * The stem writer is reset between attempts, so a failed attempt leaves nothing behind.
 *
 * FAULT INJECTION (tests that need a job still running, on any device: a host killed mid-job),
 * in SB_FAULT_INJECT (core/fault.h): job:slow:MS  each progress step of a model's separation
 * waits MS milliseconds first (cancel is still heard every 10 ms); job:slow-write:MS  the
 * writing that follows the separation waits MS milliseconds first (a slow disk).
 */
#ifndef SB_JOB_RUN_H
#define SB_JOB_RUN_H

#include "backend/backend.h"
#include "sb_common.h"
#include "jobs/model_cache.h"
#include "models/model.h"

#include <stdatomic.h>

/* How the runner reaches the devices the engine keeps open (one job uses a device at a time:
 * the engine holds it for the job). open() gives the opened device of table entry i, opening
 * it the first time; a failure comes back with its reason in words (why). Every device but the
 * native CPU (opened for each job) stays open, the same device behind the same handle, until
 * the engine has freed its model keeps: a kept model may leave its weights there. */
typedef struct {
	const sb_device_list *list;
	sb_status (*open)(void *user, size_t i, sb_exec *out, char *why, size_t wlen);
	void *user;
	/* The job's GPUs that run (may be NULL): the runner opens a set's GPUs before its native
	 * CPU and counts them here, and sets 0 before it falls back to the CPU alone; open()
	 * opens the native CPU beside that many (sb_open_opts.beside). */
	int *gpus;
} sb_device_access;

typedef struct {
	const sb_device_set *devices;    /* chosen by the scheduler, with resolution fallbacks */
	const sb_device_access *access;
	const char *requested;           /* what the job or mode asked for ("auto", a key ...) */
	const sb_logger *log;
	const atomic_int *cancel;
	void (*progress)(void *user, const sb_job_progress *p);
	void *progress_user;
	int cpu_threads;
	int batch;                       /* segments per forward pass, 0 = each device's */
	const char *const *model_path;
	const sb_model_choice *choice;   /* the model, resolved when the job was submitted */
	sb_model_cache *keep;             /* the model kept from the job before, and where this job's
	                                    is kept for the next (model_cache.h); NULL: opened and
	                                    freed by this job */
	/* Optional (NULL: the devices and the keep are the job's from its start to its end): the
	 * engine's hold on them, taken before the job first touches a device or the keep, after
	 * its input is opened and read for its peak, and let go once the separation is over and
	 * the model given back, before the "other" stem's mixing, the manifest and the commit. So
	 * the next job's reading and this one's writing run while another job separates on the
	 * same devices (issue #50). Called once each, hold first, or neither (a job that ends
	 * before it needs a device). */
	void (*hold)(void *user);
	void (*let_go)(void *user);
	void *hold_user;
} sb_job_env;

/* How a job ended, as the engine keeps it: sb_engine_result() hands out its strings
 * (stembridge.h: sb_job_result). */
typedef struct {
	sb_status status;
	char message[1024];
	char manifest_path[4096];
	char stems_txt_path[4096];
	char device_requested[640];
	char device_used[640];
	char fallback_reason[512];
	char precision[8];
	char products[128];
	int n_stems;
	struct {
		int stem;
		char name[32];
		char path[4096];
		double peak, rms;
	} stems[SB_JOB_MAX_STEMS];
	int model_kept;
} sb_job_outcome;

/* The result's view of an outcome: strings into o, which must outlive r. */
void sb_job_outcome_view(const sb_job_outcome *o, sb_job_result *r);

/* A job's progress before it has a device: "queued", every string "" (never NULL). */
void sb_job_progress_init(sb_job_progress *p);


sb_status sb_job_run(const sb_job_spec *spec, const sb_job_env *env, sb_job_outcome *res);

#endif
