/* Stembridge: the complete public C API of the engine, for its front ends (the CLI, the plugin,
 * the converter), as lilv.h is lilv's. It includes system headers only; the types a front end
 * need not look into (devices, device lists, engines, catalogues, sources, writers) are opaque.
 * A string the API returns is owned by the object it came from and lives as long as that object
 * (a device's by its list, a job's result by the job until sb_engine_release).
 *
 * Threads: every function may be called from any thread but a real-time one (LV2 run());
 * objects say where they may be shared.
 *
 * tests/core/test_layers.sh holds the front ends to this header; tests/core/test_header.c
 * compiles it alone.
 */
#ifndef STEMBRIDGE_H
#define STEMBRIDGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and logging ---------------------------------------------------------------- */

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

/* Called from any engine thread; must be thread-safe. msg has no trailing newline. The engine
 * never prints on its own and never ends the process. */
typedef void (*sb_log_fn)(void *user, sb_log_level level, const char *msg);

typedef struct {
	sb_log_fn fn; /* NULL: messages are dropped */
	void *user;
} sb_logger;

/* Monotonic clock in seconds. */
double sb_now(void);
/* The time ms milliseconds from now on clock (a clockid_t: CLOCK_REALTIME for
 * pthread_cond_timedwait's default, CLOCK_MONOTONIC for a condition variable set to it). */
struct timespec sb_deadline(int clock, long ms);

/* ---- knobs: the environment variables Stembridge reads ---------------------------------
 *
 * One table names each with what reads it and what it changes (man/stembridge.1 lists them
 * all; a test holds the page and the sources to the table). An option given through this API
 * for the same thing wins over a variable. */
typedef struct {
	const char *name;              /* "SB_CL_GEMM" */
	const char *owner;             /* what reads it: "engine/backend/opencl" */
	const char *meaning;           /* in a line */
	int tests;                     /* 1: for tests and benchmarks */
} sb_knob;

/* The table's entries in order; NULL past the last. */
const sb_knob *sb_knob_at(size_t i);
/* A variable of the table's value (getenv), NULL when unset. */
const char *sb_knob_get(const char *name);

/* ---- stems and formats ------------------------------------------------------------------ */

/* Stems by canonical index, the same everywhere (files, masks, ports, manifests): the four of
 * every 4-source model first, then the extra sources of larger models (htdemucs_6s), then the
 * stems of the special jobs: a karaoke model's lead and backing vocals, a de-reverb model's dry
 * sound and its reverb, a drum model's kit pieces. */
enum {
	SB_STEM_VOCALS = 0, SB_STEM_DRUMS, SB_STEM_BASS, SB_STEM_OTHER,
	SB_N_STEMS,                       /* the four standard stems */
	SB_STEM_GUITAR = SB_N_STEMS, SB_STEM_PIANO,
	SB_STEM_LEAD_VOCALS, SB_STEM_BACKING_VOCALS, SB_STEM_DRY, SB_STEM_REVERB,
	SB_STEM_KICK, SB_STEM_SNARE, SB_STEM_TOMS, SB_STEM_HIHAT, SB_STEM_CYMBALS, SB_STEM_RIDE,
	SB_STEM_CRASH,
	SB_N_KNOWN_STEMS,                 /* every stem name this build knows */
	SB_MAX_STEMS = 24                 /* room in masks and tables */
};
/* "vocals", "drums", "bass", "other", "guitar", "piano", "lead_vocals", "backing_vocals",
 * "dry", "reverb", "kick", "snare", "toms", "hihat", "cymbals", "ride", "crash"; NULL past
 * SB_N_KNOWN_STEMS */
extern const char *const sb_stem_names[SB_MAX_STEMS];
/* The canonical index of a stem name, -1 when it is none of them. Case is ignored, and the
 * names models' configurations give the same stems are taken for them: "instrumental"
 * (other), "lead" and "backing", "noreverb" (dry), "hh" (hihat). */
int sb_stem_index(const char *name);
/* The names of a mask of canonical stems, in canonical order, joined by sep ("vocals, drums") */
void sb_stem_mask_text(unsigned mask, const char *sep, char *buf, size_t len);

/* Ensembles: several models whose stems are combined per stem, each over the models that make
 * it (UVR's and MSST's ensembles): the average of the waveforms (weighted), or per
 * time-frequency bin the value of the largest (max_spec) or smallest (min_spec) magnitude. */
#define SB_ENSEMBLE_MAX 8
typedef enum {
	SB_ENSEMBLE_AVG_WAVE = 0, SB_ENSEMBLE_MAX_SPEC, SB_ENSEMBLE_MIN_SPEC
} sb_ensemble_mode;
/* "avg_wave", "max_spec", "min_spec" */
const char *sb_ensemble_mode_name(int mode);

/* Silence: an input whose peak stays below -90 dBFS throughout (a DAW track fed silence while
 * its monitoring is done in hardware, a muted bounce) makes silent stems. The engine says so in
 * the manifest; the plugin queues no job for such a take. */
#define SB_SILENT_DBFS (-90.0)
#define SB_SILENT_PEAK 3.1622777e-5 /* 10^(-90/20) */

/* The stems' file formats. */
typedef enum { SB_FORMAT_WAV16 = 0, SB_FORMAT_WAV24, SB_FORMAT_WAVF32, SB_FORMAT_FLAC } sb_format;

/* ---- devices ---------------------------------------------------------------------------- */

/* The device table: every device of every backend, the native CPU first, each described by
 * the same properties (after ggml's backend registry). Filled once by sb_devices_enumerate();
 * immutable afterwards, so any thread may read it.
 *
 * A device is named by its id, what a user types: "cpu", "opencl:N" ("<backend>:<index>", N
 * in the backend's stable order), and by its stable key, what state stores, which survives
 * re-ordering and other machines:
 *   "<backend>|<platform>|<vendor>|<device name>|<ordinal among identical names>", or "cpu". */
typedef struct sb_device sb_device;
typedef struct sb_device_list sb_device_list;

typedef enum {
	SB_DEV_CPU_NATIVE = 0,  /* our own C code on the host threads */
	SB_DEV_GPU_DISCRETE,
	SB_DEV_GPU_INTEGRATED,  /* CL_DEVICE_HOST_UNIFIED_MEMORY */
	SB_DEV_ACCELERATOR,
	SB_DEV_OPENCL_CPU       /* a CPU through a GPU API's driver (PoCL): listed, selectable,
	                           never 'auto' */
} sb_device_type;

/* Entry 0 is always the native CPU. A backend that finds no device (no driver) logs a note and
 * adds none; this never fails except for host memory. */
sb_status sb_devices_enumerate(const sb_logger *log, sb_device_list **out);
void sb_devices_free(sb_device_list *list);
size_t sb_devices_count(const sb_device_list *list);
const sb_device *sb_devices_get(const sb_device_list *list, size_t i);
/* The index 'auto' means: a discrete GPU first, then another GPU or accelerator, then the
 * native CPU (never a CPU behind a GPU API). */
size_t sb_devices_auto(const sb_device_list *list);
/* Entries that are not the native CPU, in table order: the plugin's "Device k" is the k-th. */
size_t sb_devices_count_accel(const sb_device_list *list);
const sb_device *sb_devices_accel(const sb_device_list *list, size_t k);
/* The entry of an id or a key exactly (no fallback), or (size_t)-1. */
size_t sb_devices_find(const sb_device_list *list, const char *id_or_key);

/* A device's properties; strings owned by its list. */
const char *sb_device_get_id(const sb_device *d);       /* "cpu", "opencl:0" */
const char *sb_device_get_key(const sb_device *d);      /* the stable key above */
const char *sb_device_get_name(const sb_device *d);     /* "NVIDIA H100 80GB HBM3", "CPU" */
const char *sb_device_get_platform(const sb_device *d); /* "NVIDIA CUDA", "native" */
const char *sb_device_get_vendor(const sb_device *d);
const char *sb_device_get_driver(const sb_device *d);   /* driver version */
/* what a person reads: "NVIDIA H100 80GB HBM3 (NVIDIA CUDA, 79.1 GiB)" */
const char *sb_device_get_label(const sb_device *d);
sb_device_type sb_device_get_type(const sb_device *d);
uint64_t sb_device_get_global_mem(const sb_device *d);  /* bytes */
uint64_t sb_device_get_max_alloc(const sb_device *d);   /* bytes */
unsigned sb_device_get_compute_units(const sb_device *d); /* threads for the native CPU */
/* The backend's own numbering, for its tools (OpenCL: the ICD loader's, as clinfo and
 * CLBlast's tuners take it); -1 none. */
int sb_device_get_platform_index(const sb_device *d);
int sb_device_get_device_index(const sb_device *d);
/* The name of the backend that runs it ("cpu", "opencl"). */
const char *sb_device_backend_name(const sb_device *d);
/* One line of how it computes, from the backend, "" where it says nothing (may load
 * libraries: never where no thread may start). */
void sb_device_details(const sb_device *d, char *buf, size_t len);
const char *sb_device_type_str(sb_device_type t);
/* A GPU or an accelerator. */
int sb_device_is_gpu(const sb_device *d);
/* The native CPU (entry 0). */
int sb_device_is_native(const sb_device *d);
/* Whether 'name' is a registered backend other than the CPU (a saved "NAME:N" key may name a
 * device). */
int sb_backend_is_accelerator(const char *name);

typedef struct {
	size_t index;       /* entry to run on */
	int fell_back;      /* 1 when index is not what was asked for */
	char reason[512];   /* why, for the log and the manifest; "" when not a fallback */
} sb_device_resolution;

/* Resolve what a user or a state asked for: "auto", "cpu", "<backend>:N", "device:N" (the N-th
 * accelerator of any backend, sb_devices_accel: the plugin's "Device N+1"), or a stable key.
 * SB_ERR_INVALID for a string that is none of these. A well-formed request for a device that
 * is not here resolves to the CPU with fell_back=1 and a reason naming the device
 * ("opencl:3 not found: 2 OpenCL devices present"); never silent. */
sb_status sb_devices_resolve(const sb_device_list *list, const char *request,
                             sb_device_resolution *res);

/* The request forms, for messages: "auto, all, cpu, device:N, opencl:N" with every registered
 * backend's name. */
void sb_devices_request_forms(char *buf, size_t len);

/* Several devices for one job: its segments are shared among them. */
#define SB_MAX_SET 16
typedef struct {
	size_t n;
	size_t index[SB_MAX_SET];      /* table entries, no repeats */
	char reason[SB_MAX_SET][512];  /* a fallback's reason per entry, "" when none */
	int fell_back;                 /* one of them is a fallback */
} sb_device_set;

/* A comma-separated list of requests ("cpu,opencl:0,opencl:1"), "all" (every GPU and
 * accelerator, and the CPU), or one request; "auto" is every GPU when there are several, else
 * sb_devices_auto(). Each part resolves as above; repeats go. SB_ERR_INVALID as above. */
sb_status sb_devices_resolve_set(const sb_device_list *list, const char *request,
                                 sb_device_set *out);

/* ---- the engine: jobs ----------------------------------------------------------------------
 *
 * One or more worker threads, a queue of jobs (one per track or file), and the devices they
 * run on; every call is safe from any non-real-time thread. The engine, not its callers,
 * decides whether a job gets one device or shares its segments among several
 * (engine/jobs/README.md tells how it schedules). */
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
	int batch;                       /* segments per forward pass, 0 = each device's (or
	                                    SB_BATCH's, which this option overrides) */
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
	const char *model;               /* NULL: "auto" (the best installed model); "a,b": an
	                                    ensemble of those models */
	sb_ensemble_mode ensemble_mode;  /* an ensemble's combination (default: avg_wave) */
	double ensemble_weights[SB_ENSEMBLE_MAX]; /* its models' weights in order, 0: 1 */
	int quality_best;                /* "auto": the best combination the installed models
	                                    allow for each stem, a published ensemble (catalogue
	                                    "ensembles") where its figure beats every single model */
	unsigned stems;                  /* bit mask of SB_STEM_*; 0 = all the model makes */
	const char *out_dir;             /* required */
	const char *name_template;       /* NULL: "{track}/{stem}.{ext}"; also {take} {model} */
	sb_format format;
	int overwrite;                   /* 0: never replace an existing stem (SB_ERR_EXISTS) */
	int64_t timeline_start;          /* sample position of the region, -1 unknown */
	const char *manifest_name;       /* NULL: SB_MANIFEST_NAME, beside the stems */
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
#define SB_JOB_MAX_STEMS SB_MAX_STEMS

/* One device's share of a running job; strings owned by the engine's device list. */
typedef struct {
	const char *id, *key;
	const char *name;                /* its label */
	long done, total;                /* units (segments) finished, of the whole job */
	double busy_s;                   /* seconds it worked on them */
	int dropped;                     /* it stopped taking work (failed) */
} sb_job_device;

/* A snapshot of a job; its strings are constants or the engine's device list's ("" before the
 * job has a device), valid while the engine lives. */
typedef struct {
	sb_job_state state;
	double fraction;                 /* 0..1 of the whole job */
	const char *stage;               /* "queued", "loading", "separating", "writing", ... */
	const char *device_id;           /* device in use (the first of several) */
	const char *device_key;
	const char *device_name;
	int fell_back;                   /* running on another device than requested */
	double elapsed_s;                /* since the job started */
	double eta_s;                    /* time left, -1 until there is a rate to go by */
	double rate;                     /* units (segments) a second, all devices */
	int n_devices;                   /* devices the job runs on */
	sb_job_device devices[SB_JOB_MAX_DEVICES];
} sb_job_progress;

/* How a job ended; its strings are the job's ("" when there is nothing to say), valid until
 * sb_engine_release() of the job or sb_engine_free(). */
typedef struct {
	sb_status status;
	const char *message;             /* the reason in words when status != SB_OK */
	const char *manifest_path;       /* the manifest written on success */
	const char *stems_txt_path;      /* and the stems.txt beside it (one stem path a line) */
	const char *device_requested;
	const char *device_used;         /* the first device's key; every one in the manifest */
	const char *fallback_reason;
	const char *precision;           /* what the first device's products ran in: "fp32", "bf16" */
	const char *products;            /* and how ("oneDNN sgemm (AVX-512)", "CLBlast 1.5.3") */
	/* the stems written, in canonical order (as stems.txt lists them) */
	int n_stems;
	struct {
		int stem;                    /* SB_STEM_* */
		const char *name;            /* "vocals" */
		const char *path;            /* absolute */
		double peak, rms;            /* of its samples, as the manifest has them */
	} stems[SB_JOB_MAX_STEMS];
	int model_kept;                  /* 1: the model was still loaded from the worker's job
	                                    before (its file not read again, its weights still
	                                    resident on the devices other than the CPU) */
} sb_job_result;

sb_status sb_engine_new(const sb_engine_opts *opts, sb_engine **out);
/* Cancels what is queued or running, joins the workers, frees everything. */
void sb_engine_free(sb_engine *e);
/* The device list the engine uses, for listing and UIs (the engine's: not to be freed). */
const sb_device_list *sb_engine_devices(const sb_engine *e);
/* While paused no queued job starts (running ones go on). A front end that submits several
 * jobs at once pauses around the submits, so that the engine shares its devices out among all
 * of them rather than giving the first every free device. sb_engine_free() ends a pause. */
void sb_engine_pause(sb_engine *e, int paused);
/* Copies everything in spec it needs; the caller's strings may go away after the call. The
 * model is resolved here, once ("auto" included), and the job carries it. */
sb_status sb_engine_submit(sb_engine *e, const sb_job_spec *spec, sb_job_id *id);
sb_status sb_engine_progress(sb_engine *e, sb_job_id id, sb_job_progress *out);
/* Asks the job to stop; its temporary files are removed and no stem is left half-written. */
sb_status sb_engine_cancel(sb_engine *e, sb_job_id id);
/* Waits up to timeout_s (< 0: forever) for the job to end. SB_OK when it ended. */
sb_status sb_engine_wait(sb_engine *e, sb_job_id id, double timeout_s);
/* How an ended job went (SB_ERR_INVALID while it runs); strings as sb_job_result says. */
sb_status sb_engine_result(sb_engine *e, sb_job_id id, sb_job_result *out);
/* Forgets a job (its result and its strings go); one still running is cancelled first. */
void sb_engine_release(sb_engine *e, sb_job_id id);

/* ---- models and the catalogue --------------------------------------------------------------
 *
 * Models live in the caller's folders first (CLI --model-path, plugin state), then
 * $XDG_DATA_HOME/stembridge/models, then each of $XDG_DATA_DIRS + /stembridge/models. */

/* What "auto" stands for now: the installed catalogue model of the best 'auto' rank
 * (htdemucs first), else "builtin". Written into buf, returned. */
const char *sb_model_auto(const char *const *search_path, const sb_logger *log, char *buf,
                          size_t len);
/* The canonical stems (bit SB_STEM_*) the model 'name' ("auto", "builtin", a name or a
 * .safetensors path) makes, read from its file's header only; 0 when it is not installed or
 * unreadable. */
unsigned sb_model_stems(const char *name, const char *const *search_path);
/* The model folders in search order; returns how many of max were filled. */
size_t sb_model_dirs(const char *const *extra, char (*dirs)[4096], size_t max);

/* The catalogue: which models can be installed, from where, with which checksums, and which
 * stems each one makes (engine/models/catalog.json; STEMBRIDGE_CATALOG names another file).
 * Read-only once loaded; its entries and their strings are the catalogue's. */
#define SB_CATALOG_MAX_FILES 16

typedef struct {
	char path[256];      /* relative to the base URL: "hybrid_transformer/955717e8-8726e21a.th" */
	char name[128];      /* its last part, the name it is saved under */
	char sha256[65];     /* lower-case hex: the whole digest or its start */
	uint64_t bytes;      /* size, 0 unknown */
	int approximate;     /* bytes is a rough figure */
	int unverified;      /* no published digest: size and a full load are the check */
	int config;          /* a RoFormer's YAML configuration */
	char url[512];       /* where it is published ("" : base_url + path) */
} sb_catalog_file;

/* A model's published separation figures on one test set: SDR per canonical stem in dB, as
 * published (text: "11.27") and as a number (0 where none), and who published them. Figures
 * of different sets do not compare: 'auto' ranks each stem on one set (sb_model_auto). */
#define SB_CATALOG_MAX_FIGURES 4
typedef struct {
	char set[32];        /* "multisong" (MVSEP's Multisong), "musdb18hq" (MUSDB18-HQ test),
	                        "drumsep", ... */
	char source[192];    /* who published them, where */
	double sdr[SB_MAX_STEMS];
	char text[SB_MAX_STEMS][24];
} sb_catalog_figures;

typedef struct {
	char name[64];       /* [a-z0-9_-]: what a user types */
	char title[64];      /* what a UI shows */
	char description[256];
	unsigned stems;      /* canonical stems (bit SB_STEM_*) */
	int auto_rank;       /* 1 = the 'auto' choice's first preference; 0 = never auto */
	char bag_weights[256];
	int n_files;
	sb_catalog_file files[SB_CATALOG_MAX_FILES];
	uint64_t bytes;      /* download size of every file together */
	char family[32];     /* the model family's name ("" for Demucs): models/families.c */
	int n_figures;
	sb_catalog_figures figures[SB_CATALOG_MAX_FIGURES];
} sb_catalog_model;

typedef struct sb_catalog sb_catalog;

/* The catalogue from $STEMBRIDGE_CATALOG, else the first share/stembridge/catalog.json of the
 * data folders, else the copy compiled in. SB_ERR_FORMAT (logged, naming the file) for a
 * damaged one, SB_ERR_IO for one that cannot be read. */
sb_status sb_catalog_load(const sb_logger *log, sb_catalog **out);
void sb_catalog_free(sb_catalog *c);
const char *sb_catalog_origin(const sb_catalog *c);
const char *sb_catalog_base_url(const sb_catalog *c);
int sb_catalog_count(const sb_catalog *c);
const sb_catalog_model *sb_catalog_at(const sb_catalog *c, int i);
const sb_catalog_model *sb_catalog_find(const sb_catalog *c, const char *name);

/* Installing a catalogue model: download its checkpoints (resumed after a break), check each
 * against its checksum, convert them and give the model file its name, all or nothing. */
typedef enum {
	SB_INSTALL_DOWNLOADING = 0,
	SB_INSTALL_VERIFYING,
	SB_INSTALL_CONVERTING,
	SB_INSTALL_DONE
} sb_install_stage;

typedef struct {
	const char *model;
	sb_install_stage stage;
	const char *stage_name;        /* "downloading", "verifying", "converting", "done" */
	const char *file;              /* the checkpoint in hand */
	int file_index, n_files;       /* 1-based */
	uint64_t file_done, file_total;/* bytes of this file; total 0 while unknown */
	uint64_t done, total;          /* bytes of the whole model (total from the catalogue until
	                                  the server says) */
	double rate;                   /* bytes per second lately, 0 unknown */
	double eta_s;                  /* seconds left for the whole model, < 0 unknown */
	int resumed;                   /* this file continues a partial download */
} sb_install_progress;

typedef struct {
	const char *base_url;   /* NULL: $STEMBRIDGE_MODEL_URL, else the catalogue's base_url */
	const char *model_dir;  /* NULL: the user's model folder ($XDG_DATA_HOME/stembridge/models) */
	const char *cache_dir;  /* NULL: $XDG_CACHE_HOME/stembridge/downloads */
	double stall_s;         /* give up a transfer below 1 KB/s for this long; 0: 60 s */
	int force;              /* install again over an installed model */
	int keep_downloads;     /* keep the checkpoints in the cache once converted */
	const atomic_int *cancel; /* non-zero: stop (a partial download stays for a resume) */
	void (*progress)(void *user, const sb_install_progress *p); /* may be NULL */
	void *progress_user;
	const sb_logger *log;   /* errors: one line each, naming what failed; info: each step */
} sb_install_opts;

/* Installs catalogue model 'name'; on success path_out (may be NULL) holds the model file.
 * An installed model without force is SB_OK with nothing done. Errors (logged): SB_ERR_MODEL
 * (not in the catalogue), SB_ERR_NETWORK, SB_ERR_FORMAT (a checksum that does not match, a
 * checkpoint the converter refuses), SB_ERR_NOSPACE, SB_ERR_IO, SB_ERR_EXISTS (another install
 * holds the download), SB_ERR_CANCELLED. */
sb_status sb_model_install(const sb_catalog *cat, const char *name, const sb_install_opts *o,
                           char *path_out, size_t len);
/* Removes "<name>.safetensors" from the user's model folder (model_dir, NULL: the default).
 * SB_ERR_MODEL when it is not there. */
sb_status sb_model_remove(const char *name, const char *model_dir, const sb_logger *log);

/* ---- conversion --------------------------------------------------------------------------
 *
 * Released Demucs v4 checkpoints (and RoFormer state dicts with their YAML) to the safetensors
 * files the engine loads, running none of the pickle; the output appears whole or not at all. */
#define SBC_MAX_INPUTS 16

typedef struct {
	const char *const *inputs;  /* checkpoint files */
	int n_inputs;               /* 1 .. SBC_MAX_INPUTS */
	const char *output;         /* the safetensors file; may be NULL with dry_run */
	const char *name;           /* the model's name in the file; NULL: output's base name */
	const char *weights;        /* a bag's weights "1,0;0,1"; NULL: htdemucs_ft's or all 1 */
	const char *shapes;         /* released-shapes.json to check names and shapes, or NULL */
	const char *config;         /* a RoFormer's YAML configuration: inputs[0] is its state
	                               dict, or NULL for Demucs */
	int overwrite, dry_run;
	/* errors: one line each naming the file; warnings; info: what was done (for a person) */
	const sb_logger *log;
} sbc_convert_opts;

/* SB_OK when written (or checked, with dry_run); else the reason is logged: SB_ERR_EXISTS,
 * SB_ERR_FORMAT / SB_ERR_MODEL / SB_ERR_UNSUPPORTED (a checkpoint refused), SB_ERR_NOSPACE,
 * SB_ERR_IO, SB_ERR_INVALID (options), SB_ERR_NOMEM. */
sb_status sbc_convert(const sbc_convert_opts *o);

/* ---- files: what the front ends read and write themselves ------------------------------- */

/* An audio file through libsndfile (every format it reads, as float; 1 to 8 channels). */
typedef struct sb_source sb_source;
typedef struct {
	int channels;
	double rate;
	int64_t frames;
	int format;          /* SF_FORMAT_* of the file */
	char format_name[64];/* "WAV 24-bit", "FLAC 16-bit", ... */
} sb_audio_info;

/* Opens 'path' (errors logged with the path and the reason): SB_ERR_IO (missing, unreadable),
 * SB_ERR_FORMAT (not audio, truncated, unsupported channel count or rate), SB_ERR_EMPTY. */
sb_status sb_source_file(const char *path, const sb_logger *log, sb_source **out,
                         sb_audio_info *info);
/* Frames [start, start+n) interleaved into out (zeros outside the input); SB_ERR_FORMAT for
 * NaN/Inf samples or a short read. */
sb_status sb_source_read(sb_source *s, int64_t start, int64_t n, float *out);
void sb_source_close(sb_source *s);

/* 32-bit float WAV written as it comes (the plugin's takes): a header every reader takes
 * without a warning, RF64 past 4 GiB, the timeline start as Broadcast-WAV's time reference. */
typedef struct sb_wav_writer sb_wav_writer;
/* fd: an open, empty, seekable file (the caller closes it after finish or free).
 * timeline_start < 0: no bext chunk. SB_ERR_NOSPACE / SB_ERR_IO with errno set. */
sb_status sb_wav_writer_new(int fd, int channels, int rate, int64_t timeline_start,
                            const char *description, sb_wav_writer **out);
sb_status sb_wav_writer_write(sb_wav_writer *w, const float *data, int64_t frames);
/* Writes what is buffered and patches the sizes. Does not sync or close. */
sb_status sb_wav_writer_finish(sb_wav_writer *w);
void sb_wav_writer_free(sb_wav_writer *w);

/* Temporary files of our naming, renamed into place: a file on its way to "dir/base" is
 * written as "dir/.base.part-PID-XXXXXX", locked while its writer lives, so that a stale one
 * (its writer gone) can be told from a live one and removed. */
typedef struct {
	int fd;              /* open for writing, flock'ed; -1 when closed */
	char path[4096];     /* the temporary name; "" once placed or removed */
} sb_temp;

/* Creates the temporary file for 'final' (its folder must exist). 0, or -1 with errno. */
int sb_temp_create(const char *final, sb_temp *t);
/* Removes the temporary file (if it still has its temporary name) and closes it. */
void sb_temp_discard(sb_temp *t);
/* Removes stale temporary files of our naming in 'dir'; returns how many. */
int sb_temp_clean_stale(const char *dir, const sb_logger *log);
/* Gives a finished file its final name; without overwrite never replaces an existing file.
 * 0, or -1 with errno (EEXIST when the name is taken). */
int sb_place_file(const char *from, const char *to, int overwrite);
/* fsync() of a folder, so that renames in it survive a power cut. 0, or -1 with errno. */
int sb_sync_dir(const char *dir);
/* mkdir -p of every folder above the file 'path' (path is restored). 0, or -1 with errno. */
int sb_make_parents(char *path);
/* The folder part of 'path' ("." when it has none). */
void sb_dir_of(const char *path, char *dir, size_t len);

/* Names of a job's files: a template's fields {track} {take} {stem} {model} {ext} (a '/'
 * makes folders). SB_ERR_INVALID for an unknown field or a name that would leave the output
 * folder. */
sb_status sb_expand_template(const char *tmpl, const char *track, const char *take,
                             const char *stem, const char *model, const char *ext,
                             char *out, size_t len);
/* {track} for an input file when none is given: its base name without the extension. */
const char *sb_track_name(const char *path, char *buf, size_t len);

/* The manifest: one JSON file per job beside its stems (engine/io/manifest.h lists its keys)
 * and a plain "stems.txt" for readers without a JSON parser. Where it goes, under the output
 * folder, when the job names no other: */
#define SB_MANIFEST_NAME "{track}/manifest.json"
/* input.path as a manifest records it: the real path (links and ".." resolved), or, for a
 * path that does not resolve, the path made absolute as written. */
void sb_manifest_input_path(const char *path, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
