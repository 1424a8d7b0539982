/* The model seam: every separator (the built-in classic one, HTDemucs, bags of models) is an
 * sb_model with the same separate() entry point, run on the devices the job runner opened.
 * A model is written once against the backend interface (backend/backend.h): one forward pass,
 * whatever the device.
 *
 * Threads: separate() runs on an engine worker thread (or the CLI's main thread); a model that
 * shares its work among several devices runs one thread per extra device. It must poll
 * *ctx->cancel between units of work and return SB_ERR_CANCELLED promptly, report progress,
 * and return SB_ERR_DEVICE_OOM / SB_ERR_DEVICE_LOST untouched when every device it was given
 * failed, so that the job runner can retry with smaller chunks or finish on the CPU.
 */
#ifndef SB_MODEL_H
#define SB_MODEL_H

#include "backend/backend.h"
#include "io/stream.h"
#include "sb_common.h"

#include <stdatomic.h>

/* What one device of a job did (models that share their work among several devices report
 * it per device; the manifest and the UIs show it). */
typedef struct {
	int dev;                       /* index into sb_run_ctx.dev */
	long done;                     /* units (segments) it finished */
	long total;                    /* units of the whole job */
	double busy_s;                 /* seconds it spent on them */
	double wait_s;                 /* seconds it sat between two of its runs (the file's
	                                  reading and writing, its turn at the scheduler) */
	sb_status dropped;             /* SB_OK, or why it stopped taking work (its unit went
	                                  back to the others) */
	const char *reason;            /* in words when dropped */
} sb_device_report;

/* One device's pace on a job's model (seconds a unit: a segment or a chunk) */
typedef struct {
	double kept;                   /* in: from earlier jobs, 0 unknown */
	int skips;                     /* in: jobs in a row it has sat out since it was measured */
	double measured;               /* out: this job's, its first run left out (kernel builds,
	                                  weights placed); a run it lost counts as "at least"; 0
	                                  when it finished nothing past its first run */
	long runs;                     /* out: runs it began, lost ones included (0: no part) */
	int declined;                  /* out: the sharing rule left work to the others */
} sb_pace_entry;

/* What a job's input is as a whole, read in one pass before its model runs (or by the model
 * itself where the caller has not: sb_input_stats_read). The mean and deviation of the channel
 * average come as each reference computes them: demucs.separate's over blocks of 65536 frames
 * (a stereo input's channels averaged, a mono one kept; Chan et al.'s update; unbiased) and
 * MSST's normalize_audio's a frame at a time (every channel averaged; Welford's; population),
 * so that each family's stems are the bytes its own reading gave. */
typedef struct {
	double peak;                   /* the largest |sample| */
	double blocks_mean, blocks_std;
	double frames_mean, frames_std;
} sb_input_stats;

sb_status sb_input_stats_read(sb_source *in, const atomic_int *cancel, sb_input_stats *out);

typedef struct {
	const sb_logger *log;
	const atomic_int *cancel;      /* non-zero: stop; may be NULL */
	void (*progress)(void *user, double fraction, const char *stage); /* may be NULL */
	void *progress_user;
	/* the devices to run on, opened: a model that shares its work uses them all, the others
	 * the first */
	sb_exec *dev;
	int n_dev;
	void (*device_report)(void *user, const sb_device_report *r); /* may be NULL */
	int threads;                   /* host threads (the STFTs, the CPU backend), 0 = all */
	int batch;                     /* segments per forward pass, 0 = the device's default */
	int64_t chunk_frames;          /* input frames per chunk, 0 = the model's default (bounded
	                                  by the device's memory); the runner lowers it after OOM */
	uint32_t seed;                 /* for random shifts, fixed per job */
	int shifts;                    /* random time shifts averaged (Demucs); 0 = the model's */
	double overlap;                /* segment overlap (Demucs); 0 = the model's (0.25) */
	int bf16;                      /* devices the model opens itself: bf16 products */
	unsigned keep;                 /* bit i: dev[i] stays open, the same device behind the same
	                                  handle, until the model is freed (the job runner's kept
	                                  model, jobs/model_cache.h): the model may keep its weights
	                                  placed there for the next call; 0: place them for this
	                                  call only */
	const sb_input_stats *input;   /* the input read as a whole, or NULL: the model reads it
	                                  itself */
	sb_pace_entry *pace;           /* n_dev entries, or NULL: each device's pace on this model
	                                  from earlier jobs, where the sharing rule starts
	                                  (core/pace.h), so that a device too slow to help need
	                                  not run a piece to find out; a model that shares its
	                                  work fills in what this job measured (models/pace_cache.h
	                                  keeps them in a file) */
} sb_run_ctx;

typedef struct {
	char name[64];                 /* "builtin", "htdemucs", "htdemucs_ft" */
	char description[256];
	char path[1024];               /* weights file or "" for the built-in */
	double native_rate;            /* 0: any rate; else input is resampled to it and back */
	int n_stems;
	const char *stem_names[SB_MAX_STEMS]; /* the stems it makes, in SB_STEM_* order */
	unsigned stems;                /* mask of the canonical stems it makes (bit SB_STEM_*) */
	int stems_sum;                 /* 1: the stems add back to the input by construction */
	int shares_devices;            /* 1: separate() shares one file's work among every device
	                                  of ctx; 0: it runs on the first */
	const char *stem_model[SB_MAX_STEMS]; /* which model makes each stem where a job combines
	                                  several (sb_model_composite); NULL: this one */
	int64_t default_chunk_frames;  /* input frames per chunk when ctx->chunk_frames is 0: where
	                                  the job runner starts halving after a device OOM */
	unsigned ops;                  /* the optional operation groups it runs on (bits 1 <<
	                                  SB_OPS_*, backend.h), set by its family: the job runner
	                                  places it only on devices that have them all */
} sb_model_info;

typedef struct sb_model sb_model;
typedef struct {
	sb_status (*separate)(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out);
	void (*free)(sb_model *m);
} sb_model_vtable;

struct sb_model {
	const sb_model_vtable *vt;
	sb_model_info info;
	void *impl;
};

/* Open a model by name: "auto" (or NULL, ""), "builtin", a name found in the search path, or
 * a .safetensors path (see models/registry.c). search_path: NULL-terminated list of extra
 * folders tried first (CLI --model-path, plugin state), then $XDG_DATA_HOME/stembridge/models,
 * then the system data dirs. info.name is always the real model's name, never "auto". */
sb_status sb_model_open(const char *name, const char *const *search_path, const sb_logger *log,
                        sb_model **out);
/* Opens what sb_model_locate() found: the file at path ("": the built-in) as the model name. */
sb_status sb_model_open_file(const char *name, const char *path, const sb_logger *log,
                             sb_model **out);
/* What a job's model name stands for, resolved once, when the job is submitted, and carried by
 * it: the file of each model ("auto" for some stems may be several models, each writing its
 * stem group), never "auto". */
typedef struct {
	char name[192];                /* the real name: "htdemucs", a path's base name; an
	                                  ensemble's members: "a,b" */
	char path[4352];               /* the file; "" for the built-in */
	unsigned take;                 /* the stems it writes where there are several parts */
	int members;                   /* > 1: an ensemble of the models name lists, each found
	                                  in the model folders when the part is opened */
	sb_ensemble_mode mode;         /* an ensemble's combination and weights */
	double weight[SB_ENSEMBLE_MAX];
} sb_model_part;

typedef struct {
	int n;                         /* parts: 1, or several; 0 when nothing was found */
	sb_model_part part[SB_MAX_STEMS];
} sb_model_choice;

/* 'name' ("auto" or NULL, "builtin", a name in the model folders, a .safetensors path) for the
 * stems asked for (bit SB_STEM_*; 0: every stem), in one look at the catalogue and the folders:
 * "auto" with stems is, per stem, the installed catalogue model with the best published SDR
 * for it, each stem ranked on one test set (catalog.json "figures"), several parts when that
 * is several models, else the one that makes them all best, else the 'auto' rank among those
 * that make them, else "builtin"; quality_best counts the catalogue's published ensembles of
 * installed models beside them. "a,b" is an ensemble of those models (one part, avg_wave and
 * equal weights until the caller sets them). SB_ERR_MODEL when nothing is found
 * (sb_model_open says why). */
sb_status sb_model_resolve(const char *name, unsigned stems, int quality_best,
                           const char *const *search_path, const sb_logger *log,
                           sb_model_choice *out);
/* Opens a part of a choice: its file, or an ensemble of its members */
sb_status sb_model_open_part(const sb_model_part *p, const char *const *search_path,
                             const sb_logger *log, sb_model **out);
/* An ensemble of n members (models/ensemble.c, taken over by it from then on; freed with it):
 * each stem combined over the members that make it, as mode and the weights (NULL: equal) say;
 * members at different rates are refused. */
sb_status sb_model_ensemble(sb_model *const *members, const double *weights, int n, int mode,
                            const sb_logger *log, sb_model **out);
/* A model of parts (models/composite.c): each part writes the stems of its take[] mask; the
 * parts are the composite's from then on (freed with it). Parts at different rates are
 * refused. */
sb_status sb_model_composite(sb_model *const *parts, const unsigned *take, int n,
                             const sb_logger *log, sb_model **out);
/* sb_model_auto(), sb_model_stems() and sb_model_dirs(): stembridge.h. */

/* The devices a model runs on: ctx's, or, when ctx names none (tests, tools), the native CPU
 * opened for the call. */
typedef struct {
	sb_run_ctx ctx;            /* ctx with its devices */
	sb_exec own;
	sb_device props;
	sb_run_ctx empty;
} sb_run_devices;
sb_status sb_run_devices_open(const sb_run_ctx *ctx, sb_run_devices *out);
void sb_run_devices_close(sb_run_devices *r);

/* Models run one after another inside one job (a composite's parts, an ensemble's members):
 * member i of n reports its progress over its share of the job and its devices to the job;
 * nothing of it stays on the devices (the next one needs the room) and its pace is its own. sh
 * is the member's progress user and must outlive the run. */
typedef struct {
	const sb_run_ctx *ctx;
	int i, n;
} sb_member_share;
sb_run_ctx sb_run_ctx_member(const sb_run_ctx *ctx, sb_member_share *sh, int i, int n);

static inline sb_status sb_model_separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in,
                                          sb_sink *out)
{
	return m->vt->separate(m, ctx, in, out);
}
static inline void sb_model_free(sb_model *m)
{
	if (m)
		m->vt->free(m);
}

#endif
