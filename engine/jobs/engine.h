/* The engine: one or more worker threads, a queue of jobs (one per track or file), and the
 * devices they run on. Plain C, opaque types; every call is safe from any non-real-time thread.
 * The plugin's run() never calls into this header: it hands work over through its own
 * lock-free queue to a thread that does.
 *
 * Scheduling: the engine, not its callers, decides whether a job gets one device or shares its
 * segments among several. In SB_MODE_PARALLEL a job that asks for several devices ("auto" with
 * several GPUs, "all", "cpu,opencl:0", or none: the engine's set) waits in one pool that those
 * devices take from as they come free, one job each: four tracks submitted together (under
 * sb_engine_pause) on two GPUs run two at a time, and a device leaves a job to another that
 * would finish it sooner (the sharing rule of core/pace.h, by each device's seconds per second
 * of audio so far). A job taken while nothing else waits for its devices and others of its set
 * are idle gets those too, if its model deals segments out (any model file; not the built-in),
 * and shares its segments among them: one file, or a plugin's take, on every free GPU. A device
 * never joins a job already running, so a job that arrives while such a job holds every device
 * waits for it (which then ends about as many times sooner as it has devices); cancelling a
 * job that waits ends it at once. A job that asks for one device, one marked in_turn, and every
 * job in SB_MODE_SEQUENTIAL take all they ask for at once, one at a time in submission order
 * (the low-memory choice). A device runs one job at a time and holds one kept model at most.
 */
#ifndef SB_ENGINE_H
#define SB_ENGINE_H

#include "backend/device.h"
#include "io/format.h"
#include "sb_common.h"

typedef struct sb_engine sb_engine;
typedef uint64_t sb_job_id;

typedef enum { SB_MODE_PARALLEL = 0, SB_MODE_SEQUENTIAL } sb_mode;

typedef struct {
	sb_mode mode;
	/* The device set jobs without a device of their own use: NULL/0 = {"auto"} in sequential
	 * mode and every GPU (or else "auto") in parallel mode. Strings as sb_devices_resolve(). */
	const char *const *devices;
	size_t n_devices;
	int cpu_threads;                 /* native path threads per job, 0 = all cores */
	int batch;                       /* segments per forward pass, 0 = each device's */
	const char *const *model_path;   /* NULL-terminated extra model folders, may be NULL */
	sb_logger log;
} sb_engine_opts;

typedef struct {
	/* Input: a file path, or memory (interleaved float). With memory, the engine calls
	 * input_free(input_user, samples) exactly once, from a worker or from release/free, once
	 * it no longer needs them (may be NULL); it must not call into the engine. When submit
	 * fails the caller keeps the samples. */
	const char *input_path;
	const float *samples;
	int64_t frames;
	int channels;
	double rate;
	void (*input_free)(void *input_user, const float *samples);
	void *input_user;

	const char *track;               /* {track} in the template; default: input's base name */
	const char *take;                /* {take}; default "1" */
	const char *device;              /* NULL: the engine's set; else as
	                                    sb_devices_resolve_set(): one device or several */
	int in_turn;                     /* 1: all of its devices at once, after the jobs before
	                                    it that ask for the same (sequential, per job) */
	const char *model;               /* NULL: "auto" (the best installed model) */
	unsigned stems;                  /* bit mask of SB_STEM_*; 0 = all the model makes */
	const char *out_dir;             /* required */
	const char *name_template;       /* NULL: "{track}/{stem}.{ext}"; also {take} {model} */
	sb_format format;
	int overwrite;                   /* 0: never replace an existing stem (SB_ERR_EXISTS) */
	int64_t timeline_start;          /* sample position of the region, -1 unknown */
	const char *manifest_name;       /* NULL: SB_MANIFEST_NAME (io/manifest.h), beside the stems */
	int keep_model_other;            /* 1: keep a model's own "other" even where the stems then
	                                    do not add back to the input; 0 (default): other =
	                                    input minus the other stems, for every model */
	int shifts;                      /* Demucs: random shifts averaged (seeded), 0 = none */
	double overlap;                  /* Demucs: segment overlap, 0 = the model's 0.25 */
	int bf16;                        /* 1: matrix products with bf16 inputs and fp32 sums where
	                                    the device has them (the CPU with AVX512_BF16), else
	                                    fp32 with a warning; 0: fp32 */
} sb_job_spec;

typedef enum {
	SB_JOB_QUEUED = 0, SB_JOB_RUNNING, SB_JOB_WRITING, SB_JOB_DONE, SB_JOB_FAILED,
	SB_JOB_CANCELLED
} sb_job_state;

#define SB_JOB_MAX_DEVICES 8
#define SB_JOB_MAX_STEMS 8

/* one device's share of a running job */
typedef struct {
	char id[32], key[640];
	char name[384];
	long done, total;                /* units (segments) finished, of the whole job */
	double busy_s;                   /* seconds it worked on them */
	int dropped;                     /* it stopped taking work (failed) */
} sb_job_device;

typedef struct {
	sb_job_state state;
	double fraction;                 /* 0..1 of the whole job */
	char stage[64];                  /* "queued", "loading", "separating", "writing", ... */
	char device_id[32];              /* device in use (the first of several), "" before */
	char device_key[640];
	char device_name[384];
	int fell_back;                   /* running on another device than requested */
	double elapsed_s;                /* since the job started */
	double eta_s;                    /* time left, -1 until there is a rate to go by */
	double rate;                     /* units (segments) a second, all devices */
	int n_devices;                   /* devices the job runs on */
	sb_job_device devices[SB_JOB_MAX_DEVICES];
} sb_job_progress;

typedef struct {
	sb_status status;
	char message[1024];              /* the reason in words when status != SB_OK */
	char manifest_path[4096];        /* the manifest written on success; "" on failure */
	char device_requested[640];
	char device_used[640];           /* the first device's key; every one in the manifest */
	char fallback_reason[512];
	char precision[8];               /* what the first device's products ran in: "fp32", "bf16" */
	char products[128];              /* and how ("oneDNN sgemm (AVX-512)", "CLBlast 1.5.3") */
	/* the stems written, in canonical order (as stems.txt lists them): a front end reads them
	 * here, not from the files */
	int n_stems;
	struct {
		int stem;                    /* SB_STEM_* */
		char name[32];               /* "vocals" */
		char path[4096];             /* absolute */
		double peak, rms;            /* of its samples, as the manifest has them */
	} stems[SB_JOB_MAX_STEMS];
	int model_kept;                  /* 1: the model was still loaded from the worker's job
	                                    before (its file not read again, its weights still on
	                                    the devices other than the CPU) */
} sb_job_result;

sb_status sb_engine_new(const sb_engine_opts *opts, sb_engine **out);
/* Cancels what is queued or running, joins the workers, frees everything. */
void sb_engine_free(sb_engine *e);

/* The device list the engine uses (entries as core/device.h), for listing and UIs. */
const struct sb_device_list *sb_engine_devices(const sb_engine *e);

/* While paused no queued job starts (running ones go on). A front end that submits several
 * jobs at once pauses around the submits, so that the engine shares its devices out among all
 * of them rather than giving the first every free device. sb_engine_free() ends a pause. */
void sb_engine_pause(sb_engine *e, int paused);
/* Copies everything in spec it needs; the caller's strings may go away after the call. */
sb_status sb_engine_submit(sb_engine *e, const sb_job_spec *spec, sb_job_id *id);
sb_status sb_engine_progress(sb_engine *e, sb_job_id id, sb_job_progress *out);
/* Asks the job to stop; its temporary files are removed and no stem is left half-written. */
sb_status sb_engine_cancel(sb_engine *e, sb_job_id id);
/* Waits up to timeout_s (< 0: forever) for the job to end. SB_OK when it ended. */
sb_status sb_engine_wait(sb_engine *e, sb_job_id id, double timeout_s);
sb_status sb_engine_result(sb_engine *e, sb_job_id id, sb_job_result *out);
/* Forgets a finished job (its result can no longer be read). */
void sb_engine_release(sb_engine *e, sb_job_id id);

#endif
