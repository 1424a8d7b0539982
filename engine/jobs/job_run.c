/* One job from input to committed stems and manifest (job_run.h), on the calling thread.
 *
 * Order of work: everything that can be refused cheaply is checked before any separation
 * (the input opens and is audio, the model exists, no stem would overwrite one the user has,
 * the folders can be created), so a bad job fails in milliseconds and leaves nothing behind.
 * The stems stream into temporary files while the model runs; only a complete set is renamed.
 */
#include "jobs/job_run.h"

#include "io/audio_file.h"
#include "io/manifest.h"
#include "io/resample.h"
#include "io/stem_writer.h"
#include "io/temp_file.h"
#include "models/pace_cache.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 16
#define MAX_OOM_RETRIES 3

typedef struct {
	char text[MAX_EVENTS][600];
	const char *ptr[MAX_EVENTS];
	int n;
} event_log;

static void event(event_log *ev, const sb_logger *log, sb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void event(event_log *ev, const sb_logger *log, sb_log_level level, const char *fmt, ...)
{
	char buf[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	sb_log(log, level, "%s", buf);
	if (ev->n < MAX_EVENTS) {
		snprintf(ev->text[ev->n], sizeof ev->text[ev->n], "%s", buf);
		ev->ptr[ev->n] = ev->text[ev->n];
		ev->n++;
	}
}

typedef struct {
	const sb_job_env *env;
	sb_job_progress p;
	double lo, hi;     /* the separation's share of the whole job */
	double t0, t_sep;  /* the job's start, the separation's */
	double sep_frac;   /* the separation's own progress */
	event_log *ev;     /* where a device that stopped mid-job is recorded */
	const sb_logger *log;
} progress_state;

static const char *sb_job_stage(const char *stage)
{
	static const char *const stages[] = {"queued", "starting", "loading", "resampling",
	                                     "separating", "mixing back", "writing", "done",
	                                     "failed", "cancelled"};
	for (size_t i = 0; stage && i < sizeof stages / sizeof stages[0]; i++)
		if (!strcmp(stage, stages[i]))
			return stages[i];
	return "separating";
}

void sb_job_progress_init(sb_job_progress *p)
{
	memset(p, 0, sizeof *p);
	p->stage = "queued";
	p->device_id = p->device_key = p->device_name = "";
}

void sb_job_outcome_view(const sb_job_outcome *o, sb_job_result *r)
{
	memset(r, 0, sizeof *r);
	r->status = o->status;
	r->message = o->message;
	r->manifest_path = o->manifest_path;
	r->stems_txt_path = o->stems_txt_path;
	r->device_requested = o->device_requested;
	r->device_used = o->device_used;
	r->fallback_reason = o->fallback_reason;
	r->precision = o->precision;
	r->products = o->products;
	r->n_stems = o->n_stems;
	for (int i = 0; i < o->n_stems && i < SB_JOB_MAX_STEMS; i++) {
		r->stems[i].stem = o->stems[i].stem;
		r->stems[i].name = o->stems[i].name;
		r->stems[i].path = o->stems[i].path;
		r->stems[i].peak = o->stems[i].peak;
		r->stems[i].rms = o->stems[i].rms;
	}
	r->model_kept = o->model_kept;
}

static void report(progress_state *ps, sb_job_state state, double fraction, const char *stage)
{
	ps->p.state = state;
	ps->p.fraction = fraction;
	ps->p.stage = sb_job_stage(stage);
	const double now = sb_now();
	ps->p.elapsed_s = now - ps->t0;
	/* time left: the separation's own rate so far (its first percent is too early to tell) */
	const double sep = ps->t_sep > 0 ? now - ps->t_sep : 0;
	ps->p.eta_s = ps->sep_frac >= 0.01 && sep > 0 && state == SB_JOB_RUNNING
	                  ? sep * (1.0 - ps->sep_frac) / ps->sep_frac : -1;
	if (ps->env->progress)
		ps->env->progress(ps->env->progress_user, &ps->p);
}

/* job:slow:MS, job:slow-write:MS (job_run.h): a slow model, whatever the device; a slow disk */
static void injected_wait(const progress_state *ps, const char *key)
{
	const long ms = sb_fault_number(key);
	for (long waited = 0; waited < ms; waited += 10) {
		if (ps->env->cancel && atomic_load(ps->env->cancel))
			return;
		const struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static void model_progress(void *user, double fraction, const char *stage)
{
	progress_state *ps = user;
	injected_wait(ps, "job:slow:");
	if (fraction < 0)
		fraction = 0;
	if (fraction > 1)
		fraction = 1;
	ps->sep_frac = fraction;
	report(ps, SB_JOB_RUNNING, ps->lo + (ps->hi - ps->lo) * fraction,
	       stage ? stage : "separating");
}

/* a device's share, from a model that shares its work (segments per device, seconds) */
static void device_report(void *user, const sb_device_report *r)
{
	progress_state *ps = user;
	if (r->dev < 0 || r->dev >= ps->p.n_devices)
		return;
	sb_job_device *d = &ps->p.devices[r->dev];
	if (r->dropped != SB_OK && !d->dropped && ps->ev)
		event(ps->ev, ps->log, SB_LOG_WARNING, "%s", r->reason ? r->reason : "a device failed");
	d->done = r->done;
	d->total = r->total;
	d->busy_s = r->busy_s;
	d->dropped |= r->dropped != SB_OK;
	long done = 0;
	for (int i = 0; i < ps->p.n_devices; i++)
		done += ps->p.devices[i].done;
	const double sep = ps->t_sep > 0 ? sb_now() - ps->t_sep : 0;
	ps->p.rate = sep > 0 ? (double)done / sep : 0;
}

/* The devices this job runs on, opened, and how it came to them. */
typedef struct {
	sb_exec dev[SB_MAX_SET];
	int n;
	int fell_back;
} dev_plan;

static void use_devices(progress_state *ps, const dev_plan *pl)
{
	const sb_device *d = pl->dev[0].props;
	ps->p.device_id = d->id;
	ps->p.device_key = d->key;
	ps->p.device_name = d->label;
	ps->p.fell_back = pl->fell_back;
	ps->p.n_devices = pl->n < SB_JOB_MAX_DEVICES ? pl->n : SB_JOB_MAX_DEVICES;
	for (int i = 0; i < ps->p.n_devices; i++) {
		sb_job_device *jd = &ps->p.devices[i];
		memset(jd, 0, sizeof *jd);
		jd->id = pl->dev[i].props->id;
		jd->key = pl->dev[i].props->key;
		jd->name = pl->dev[i].props->label;
	}
}

static int is_device_failure(sb_status st)
{
	return st == SB_ERR_DEVICE || st == SB_ERR_DEVICE_OOM || st == SB_ERR_DEVICE_LOST;
}

static void set_message(sb_job_outcome *res, sb_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_message(sb_job_outcome *res, sb_status st, const char *fmt, ...)
{
	res->status = st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof res->message, fmt, ap);
	va_end(ap);
}

/* Captures the last error the engine logged, so the result says why in words. */
typedef struct {
	const sb_logger *inner;
	char last[1024];
} capture_log;

static void capture_fn(void *user, sb_log_level level, const char *msg)
{
	capture_log *c = user;
	if (level == SB_LOG_ERROR)
		snprintf(c->last, sizeof c->last, "%s", msg);
	if (c->inner && c->inner->fn)
		c->inner->fn(c->inner->user, level, msg);
}

static void note_fallback(sb_job_outcome *res, const char *why)
{
	if (!res->fallback_reason[0])
		snprintf(res->fallback_reason, sizeof res->fallback_reason, "%s", why);
}

/* The set the scheduler chose, opened: a device missing here (resolved to the CPU with its
 * reason) or that does not open is left out, and the CPU stands in when none is left. */
static sb_status open_devices(const sb_job_env *env, event_log *ev, const sb_logger *log,
                              sb_job_outcome *res, dev_plan *pl)
{
	const sb_device_set *set = env->devices;
	const sb_device_access *a = env->access;
	/* the GPUs first, so that the native CPU knows how many run beside it; the plan keeps the
	 * set's order */
	int opened[SB_MAX_SET] = {0};
	sb_exec x[SB_MAX_SET];
	if (a->gpus)
		*a->gpus = 0;
	for (int native = 0; native < 2; native++)
		for (size_t k = 0; set && k < set->n && k < SB_MAX_SET; k++) {
			const sb_device *d = sb_devices_get(a->list, set->index[k]);
			if ((d && sb_device_is_native(d)) != native)
				continue;
			if (set->reason[k][0]) {
				event(ev, log, SB_LOG_WARNING, "%s", set->reason[k]);
				note_fallback(res, set->reason[k]);
				pl->fell_back = 1;
			}
			char why[512] = "";
			if (a->open(a->user, set->index[k], &x[k], why, sizeof why) == SB_OK) {
				opened[k] = 1;
				if (a->gpus && x[k].props && sb_device_is_gpu(x[k].props))
					(*a->gpus)++;
				continue;
			}
			event(ev, log, SB_LOG_WARNING, "%s: %s", why,
			      set->n > 1 ? "the others go on without it" : "running on the CPU");
			note_fallback(res, why);
			pl->fell_back = 1;
		}
	for (size_t k = 0; set && k < set->n && k < SB_MAX_SET; k++)
		if (opened[k])
			pl->dev[pl->n++] = x[k];
	if (pl->n > 0)
		return SB_OK;
	char why[512];
	return a->open(a->user, 0, &pl->dev[pl->n++], why, sizeof why) == SB_OK
	           ? SB_OK
	           : (pl->n = 0, SB_ERR_DEVICE);
}

/* The devices of pl a kept model may leave its weights on (sb_run_ctx.keep): the ones the
 * engine keeps open between jobs, every one but the native CPU (job_run.h). */
static unsigned kept_devices(const dev_plan *pl)
{
	unsigned keep = 0;
	for (int i = 0; i < pl->n && i < 32; i++)
		if (!sb_device_is_native(pl->dev[i].props))
			keep |= 1u << i;
	return keep;
}

/* "opencl:0, opencl:1" for the log */
static void device_list(const dev_plan *pl, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int i = 0; i < pl->n; i++) {
		const size_t at = strlen(buf);
		snprintf(buf + at, len - at, "%s%s", i ? ", " : "", pl->dev[i].props->label);
	}
}

static int all_native(const dev_plan *pl)
{
	for (int i = 0; i < pl->n; i++)
		if (!sb_device_is_native(pl->dev[i].props))
			return 0;
	return 1;
}

/* The model placed only where its operations are (backend.h: the optional groups its family
 * needs): a device without one leaves the plan, the CPU standing in when none is left; and a
 * model that does not share its work keeps the first device alone. */
static sb_status place_model(const sb_job_env *env, event_log *ev, const sb_logger *log,
                             sb_job_outcome *res, const sb_model *model, dev_plan *pl)
{
	int kept = 0;
	for (int i = 0; i < pl->n; i++) {
		sb_op_group missing = SB_OPS_CORE;
		if (sb_exec_has_groups(&pl->dev[i], model->info.ops, &missing)) {
			pl->dev[kept++] = pl->dev[i];
			continue;
		}
		char why[512];
		snprintf(why, sizeof why, "%.300s has no operations for this model (%.64s needs the %s "
		         "group)", pl->dev[i].props->label, model->info.name,
		         sb_op_group_name(missing));
		event(ev, log, SB_LOG_WARNING, "%s: %s", why,
		      pl->n > 1 ? "the others go on without it" : "running on the CPU");
		note_fallback(res, why);
		pl->fell_back = 1;
	}
	pl->n = kept;
	if (kept == 0) {
		char why[512];
		if (env->access->gpus)
			*env->access->gpus = 0; /* the CPU alone: no GPU runs beside it */
		if (env->access->open(env->access->user, 0, &pl->dev[0], why, sizeof why) != SB_OK) {
			sb_log(log, SB_LOG_ERROR, "the CPU could not be opened: %s", why);
			return SB_ERR_DEVICE;
		}
		pl->n = 1;
	}
	if (pl->n > 1 && !model->info.shares_devices) {
		event(ev, log, SB_LOG_INFO, "%s runs on one device: %s", model->info.name,
		      pl->dev[0].props->label);
		pl->n = 1;
	}
	return SB_OK;
}

static void clock_of(int64_t frame, double rate, char *buf, size_t len)
{
	const double t = rate > 0 ? (double)frame / rate : 0;
	snprintf(buf, len, "%d:%06.3f", (int)(t / 60), t - 60.0 * (int)(t / 60));
}

/* A job as it runs, what each step leaves for the next (sb_job_run below). */
typedef struct {
	const sb_job_spec *spec;
	const sb_job_env *env;
	sb_job_outcome *res;
	capture_log cap;             /* the last error logged, for the result's message */
	sb_logger log_s;
	const sb_logger *log;        /* through cap */
	event_log ev;
	progress_state ps;
	dev_plan pl;
	double t_start, t_loaded, t_separated;
	/* the input */
	sb_source *src;
	sb_audio_info ai;
	char track_buf[256];
	const char *track, *take;
	int64_t in_size, in_mtime;   /* the file as it was read, -1 unknown */
	sb_input_stats whole;        /* read in one pass: its peak and the models' statistics */
	int silent;
	/* the model */
	const char *model_name;      /* what the job asked for ("auto", a name, a path) */
	sb_model *model;
	int n_parts;                 /* models combined, one per stem group ('auto' with stems) */
	int model_ran;               /* the separation started: the model and its devices were used */
	int device_trouble;          /* a device failed or ran out of memory on the way */
	int residual_ran;            /* "other" is the input minus the other stems */
	unsigned model_stems, stems;
	/* the output */
	sb_stem_writer *w;
	char manifest_path[PATH_MAX], txt_path[PATH_MAX];
	sb_source *model_src, *rsrc; /* what the model reads: the input, or a converted copy */
	sb_sink *model_sink;
	sb_resample_sink *rsink;
	/* the devices and the kept model (sb_job_env.hold): held, let go, the model given back */
	int held, let_go, model_given;
	int from_cache;              /* the model is the cache's to take back (one model alone) */
	sb_model_info info;          /* the model's, for the writing once it is given back */
	char stem_model[SB_MAX_STEMS][256]; /* info's stem_model strings, copied */
} job;

/* The input opened (a file, or the caller's memory) and read once as a whole: its peak, for the
 * silence the manifest and the log say, and the statistics the models normalise by. */
static sb_status open_input(job *j)
{
	const sb_job_spec *spec = j->spec;
	sb_status st;
	j->track = spec->track;
	if (spec->input_path) {
		/* the file as it is read: its size and time let a batch re-run skip it */
		struct stat sst;
		if (stat(spec->input_path, &sst) == 0) {
			j->in_size = (int64_t)sst.st_size;
			j->in_mtime = (int64_t)sst.st_mtim.tv_sec * 1000000000 + sst.st_mtim.tv_nsec;
		}
		st = sb_source_file(spec->input_path, j->log, &j->src, &j->ai);
		if (!j->track)
			j->track = sb_track_name(spec->input_path, j->track_buf, sizeof j->track_buf);
	} else {
		st = sb_source_memory(spec->samples, spec->frames, spec->channels, spec->rate, &j->src);
		if (st == SB_OK) {
			j->ai.channels = spec->channels;
			j->ai.rate = spec->rate;
			j->ai.frames = spec->frames;
			snprintf(j->ai.format_name, sizeof j->ai.format_name, "memory float");
		} else {
			sb_log(j->log, SB_LOG_ERROR, "recorded audio refused: %s", sb_status_str(st));
		}
	}
	if (!j->track)
		j->track = "track";
	j->take = spec->take ? spec->take : "1";
	if (st != SB_OK)
		return st;
	st = sb_input_stats_read(j->src, j->env->cancel, &j->whole);
	if (st != SB_OK)
		return st;
	/* A silent input (a DAW track fed silence while its monitoring is done in hardware, a
	 * muted bounce) makes silent stems that look like a separation: the manifest and the log
	 * say so. */
	const double peak = j->whole.peak;
	j->silent = !(peak >= SB_SILENT_PEAK);
	if (j->silent)
		event(&j->ev, j->log, SB_LOG_WARNING, "the input is silent (peak %s, below %g dBFS): "
		      "its stems are silent too", peak > 0 ? "very low" : "zero", SB_SILENT_DBFS);
	return SB_OK;
}

/* The model the job resolved at submit (sb_model_choice): the one kept from the job before
 * where it is the same, several combined for 'auto' per stem; placed only where its operations
 * are; and the stems asked of it checked against what it makes. */
static sb_status open_model(job *j)
{
	const sb_job_env *env = j->env;
	const sb_model_choice *c = env->choice;
	sb_status st = SB_OK;
	if (!c || c->n < 1) {
		/* resolved to nothing at submit: opening it says why */
		st = sb_model_open(j->model_name, env->model_path, j->log, &j->model);
		j->res->model_kept = 0;
	} else if (c->n > 1) {
		/* each stem from its best model: the parts opened for this job alone (the kept model,
		 * if any, is let go first: memory for one model more, not two) */
		j->n_parts = c->n;
		sb_model_cache_drop(env->keep);
		sb_model *parts[SB_MAX_STEMS] = {0};
		unsigned take[SB_MAX_STEMS];
		for (int i = 0; i < c->n && st == SB_OK; i++) {
			take[i] = c->part[i].take;
			st = sb_model_open_part(&c->part[i], env->model_path, j->log, &parts[i]);
		}
		if (st == SB_OK)
			st = sb_model_composite(parts, take, c->n, j->log, &j->model);
		if (st != SB_OK)
			for (int i = 0; i < c->n; i++)
				sb_model_free(parts[i]);
		j->res->model_kept = 0;
	} else if (c->part[0].members > 1) {
		/* an ensemble: its members opened for this job alone, one after another on the
		 * devices (models/ensemble.c) */
		sb_model_cache_drop(env->keep);
		st = sb_model_open_part(&c->part[0], env->model_path, j->log, &j->model);
		j->res->model_kept = 0;
	} else {
		st = sb_model_cache_open(env->keep, &c->part[0], env->devices, j->spec->bf16, j->log,
		                        &j->model, &j->res->model_kept);
		j->from_cache = 1;
	}
	if (st != SB_OK)
		return st;
	const sb_model *model = j->model;
	if (j->res->model_kept) {
		char on[512];
		device_list(&j->pl, on, sizeof on);
		sb_log(j->log, SB_LOG_INFO, "model %s kept loaded on %s", model->info.name, on);
	}
	st = place_model(env, &j->ev, j->log, j->res, model, &j->pl);
	if (st != SB_OK)
		return st;
	use_devices(&j->ps, &j->pl);
	j->model_stems = model->info.stems ? model->info.stems : (1u << SB_N_STEMS) - 1;
	j->stems = j->spec->stems ? j->spec->stems : j->model_stems;
	if (j->stems & ~j->model_stems) {
		char asked[128], has[128];
		sb_stem_mask_text(j->stems & ~j->model_stems, ", ", asked, sizeof asked);
		sb_stem_mask_text(j->model_stems, ", ", has, sizeof has);
		sb_log(j->log, SB_LOG_ERROR, "%s makes no %s stem (its stems: %s)", model->info.name,
		       asked, has);
		return SB_ERR_INVALID;
	}
	return SB_OK;
}

/* The stems' and the manifest's names checked and their temporary files opened before the long
 * work; a model with a fixed rate reads a converted copy of the input, and its stems are
 * converted back to the input's rate and exact length before they reach the writer. */
static sb_status open_output(job *j)
{
	const sb_job_spec *spec = j->spec;
	const sb_model *model = j->model;
	const sb_stem_writer_opts wo = {
		.out_dir = spec->out_dir,
		.name_template = spec->name_template,
		.track = j->track,
		.take = j->take,
		.model = model->info.name,
		.stems = j->stems,
		.channels = j->src->channels,
		.rate = j->src->rate,
		.frames = j->src->frames,
		.format = spec->format,
		.overwrite = spec->overwrite,
		.timeline_start = spec->timeline_start,
		.log = j->log,
	};
	char rel[PATH_MAX];
	sb_status st = sb_expand_template(spec->manifest_name ? spec->manifest_name
	                                                      : SB_MANIFEST_NAME,
	                                  j->track, j->take, "manifest", model->info.name, "json",
	                                  rel, sizeof rel);
	if (st != SB_OK || snprintf(j->manifest_path, sizeof j->manifest_path, "%s/%s",
	                            spec->out_dir, rel) >= (int)sizeof j->manifest_path) {
		sb_log(j->log, SB_LOG_ERROR, "bad manifest name");
		return SB_ERR_INVALID;
	}
	sb_manifest_stems_txt_path(j->manifest_path, j->txt_path, sizeof j->txt_path);
	for (int i = 0; i < 2 && !spec->overwrite; i++) {
		const char *p = i ? j->txt_path : j->manifest_path;
		if (access(p, F_OK) == 0) {
			sb_log(j->log, SB_LOG_ERROR, "%s exists: not overwriting it", p);
			return SB_ERR_EXISTS;
		}
	}
	st = sb_stem_writer_new(&wo, &j->w);
	if (st != SB_OK)
		return st;
	j->model_src = j->src;
	j->model_sink = sb_stem_writer_sink(j->w);
	const double native = model->info.native_rate, rate = j->src->rate;
	if (native > 0 && fabs(native - rate) > 1e-6) {
		report(&j->ps, SB_JOB_RUNNING, 0.01, "resampling");
		st = sb_source_resampled(j->src, native, j->log, j->env->cancel, &j->rsrc);
		if (st == SB_OK)
			st = sb_resample_sink_new(j->model_sink, native, rate, j->src->frames, &j->rsink);
		if (st != SB_OK)
			return st;
		j->model_src = j->rsrc;
		j->model_sink = sb_resample_sink_sink(j->rsink);
		event(&j->ev, j->log, SB_LOG_INFO, "%s runs at %g Hz: input converted from %g Hz and "
		      "back", model->info.name, native, rate);
	}
	return SB_OK;
}

/* After a device failure (st) on the way: smaller chunks after an out-of-memory, up to
 * MAX_OOM_RETRIES times, else the CPU alone. 0 when the CPU cannot be opened either. */
static int step_down(job *j, sb_status st, int64_t *chunk, int *oom_retries)
{
	dev_plan *pl = &j->pl;
	j->device_trouble = 1;
	if (st == SB_ERR_DEVICE_OOM && *oom_retries < MAX_OOM_RETRIES) {
		const int64_t base = *chunk > 0 ? *chunk : j->model->info.default_chunk_frames;
		*chunk = base / 2 > 1024 ? base / 2 : 1024;
		(*oom_retries)++;
		event(&j->ev, j->log, SB_LOG_WARNING,
		      "%s ran out of memory: retrying with chunks of %lld frames (try %d of %d)",
		      pl->dev[0].props->label, (long long)*chunk, *oom_retries, MAX_OOM_RETRIES);
		return 1;
	}
	const char *why = st == SB_ERR_DEVICE_OOM ? "ran out of memory even with small chunks"
	                : st == SB_ERR_DEVICE_LOST ? "was lost mid-job"
	                : st == SB_ERR_NONFINITE ? "produced NaN or infinite samples"
	                                         : "failed";
	const char *who = pl->n > 1 ? "every device" : pl->dev[0].props->label;
	event(&j->ev, j->log, SB_LOG_WARNING, "%s %s: finishing on the CPU", who, why);
	snprintf(j->res->fallback_reason, sizeof j->res->fallback_reason, "%.380s %.120s", who, why);
	char owhy[512];
	const sb_device_access *a = j->env->access;
	pl->n = 0;
	if (a->gpus)
		*a->gpus = 0; /* the CPU alone now: no GPU runs beside it */
	if (a->open(a->user, 0, &pl->dev[0], owhy, sizeof owhy) != SB_OK)
		return 0;
	pl->n = 1;
	pl->fell_back = 1;
	*chunk = 0;
	return 1;
}

/* The separation, down the device ladder: smaller chunks after a device OOM, then the CPU.
 * NaN or infinite output from a device is a device failure too (its kernels or driver); from
 * the CPU it is the model's, and the job fails. The stem writer is reset between attempts. */
static sb_status separate(job *j)
{
	const sb_job_env *env = j->env;
	const sb_model *model = j->model;
	dev_plan *pl = &j->pl;
	j->t_loaded = sb_now();
	j->ps.t_sep = j->t_loaded;
	int64_t chunk = 0;
	int oom_retries = 0;
	/* several devices: each one's pace on this model from earlier jobs (pace_cache.h) */
	sb_pace_entry pace[SB_JOB_MAX_DEVICES];
	char pace_job[256];
	sb_pace_cache_job(pace_job, sizeof pace_job, model->info.name, j->spec->bf16,
	                 env->cpu_threads, env->batch);
	/* a composite's parts run other models on the same devices: none of theirs is kept */
	const int keep_pace = pl->n > 1 && pl->n <= SB_JOB_MAX_DEVICES && j->n_parts <= 1;
	if (keep_pace)
		sb_pace_cache_load(pace_job, pl->dev, pl->n, pace, j->log);
	sb_status st;
	for (;;) {
		const sb_run_ctx ctx = {
			.log = j->log,
			.cancel = env->cancel,
			.progress = model_progress,
			.progress_user = &j->ps,
			.dev = pl->dev,
			.n_dev = pl->n,
			.device_report = device_report,
			.batch = env->batch,
			.threads = env->cpu_threads,
			.chunk_frames = chunk,
			.seed = 0x5eed,
			.shifts = j->spec->shifts,
			.overlap = j->spec->overlap,
			.bf16 = j->spec->bf16,
			/* a composite's parts keep nothing on the devices: the next part needs the room */
			.keep = env->keep && j->n_parts <= 1 ? kept_devices(pl) : 0,
			/* the input as a whole, where the model reads it as it is (not a copy converted
			 * to its rate) */
			.input = j->model_src == j->src ? &j->whole : NULL,
			.pace = keep_pace && pl->n > 1 ? pace : NULL, /* not the CPU after a fallback */
		};
		use_devices(&j->ps, pl);
		report(&j->ps, SB_JOB_RUNNING, j->ps.lo, "separating");
		j->model_ran = 1;
		st = sb_model_separate(j->model, &ctx, j->model_src, j->model_sink);
		if (keep_pace && pl->n > 1 && st == SB_OK) {
			sb_pace_cache_save(pace_job, pl->dev, pl->n, pace, j->log);
			/* a device its kept pace left out says so (the manifest's events) */
			for (int i = 0; i < pl->n; i++)
				if (pace[i].kept > 0 && pace[i].runs == 0 && pace[i].declined)
					event(&j->ev, j->log, SB_LOG_INFO, "%s took no part: at its pace from an "
					      "earlier job (%.2f s a piece of the song) the others finish "
					      "sooner without it", pl->dev[i].props->label, pace[i].kept);
		}
		if (st == SB_OK && j->rsink)
			st = sb_resample_sink_finish(j->rsink);
		const int nonfinite = st == SB_ERR_NONFINITE;
		if (st == SB_OK || (!is_device_failure(st) && !nonfinite) || all_native(pl))
			break;
		if (!step_down(j, st, &chunk, &oom_retries))
			break;
		st = sb_stem_writer_reset(j->w);
		if (st == SB_OK && j->rsink)
			st = sb_resample_sink_reset(j->rsink);
		if (st != SB_OK)
			break;
	}
	if (st == SB_ERR_NONFINITE) {
		int stem = 0;
		int64_t frame = 0;
		char at[32];
		sb_stem_writer_nonfinite(j->w, &stem, &frame);
		clock_of(frame, j->src->rate, at, sizeof at);
		sb_log(j->log, SB_LOG_ERROR, "%s produced NaN or infinite samples in the %s stem "
		       "(first at %s, frame %lld): nothing was written; the model file may be damaged",
		       model->info.name, sb_stem_names[stem], at, (long long)frame);
	}
	return st;
}

/* Stems that add back to the mix: when "other" is written, it becomes the input minus every
 * other stem written (stems left out fold into it), unless the model's stems sum by
 * construction and all of them are written, or the job keeps the model's own "other". The
 * manifest says how much that changed the model's own "other". */
static sb_status mix_back(job *j)
{
	if (!(j->stems & (1u << SB_STEM_OTHER)) || j->spec->keep_model_other ||
	    (j->info.stems_sum && j->stems == j->model_stems))
		return SB_OK;
	report(&j->ps, SB_JOB_RUNNING, j->ps.hi, "mixing back");
	double changed = 0;
	const sb_status st = sb_stem_writer_residual(j->w, j->src, SB_STEM_OTHER, j->env->cancel,
	                                             &changed);
	if (st != SB_OK)
		return st;
	j->residual_ran = 1;
	char rest[128];
	sb_stem_mask_text(j->stems & ~(1u << SB_STEM_OTHER), ", ", rest, sizeof rest);
	event(&j->ev, j->log, SB_LOG_INFO,
	      "other = input minus %s, so the stems add back to the input (the model's own other "
	      "differed by %.1f dB relative to the input)", rest[0] ? rest : "nothing", changed);
	return SB_OK;
}

/* The manifest and stems.txt are part of the commit: all of the job's files get their names
 * together, or none does. The result lists the stems as they are named now. */
static sb_status commit(job *j)
{
	const sb_job_spec *spec = j->spec;
	sb_job_outcome *res = j->res;
	const sb_model_info *info = &j->info;
	const dev_plan *pl = &j->pl;
	const sb_exec *d0 = &pl->dev[0];
	sb_manifest_device mdev[SB_JOB_MAX_DEVICES];
	const int n_mdev = j->ps.p.n_devices;
	for (int i = 0; i < n_mdev; i++) {
		const sb_job_device *jd = &j->ps.p.devices[i];
		mdev[i] = (sb_manifest_device){jd->id, jd->key, jd->name, jd->done, jd->busy_s,
		                               jd->dropped};
	}
	/* which model made each stem; "other" is the residual where the job made it so */
	const char *stem_model[SB_MAX_STEMS];
	for (int s = 0; s < SB_MAX_STEMS; s++)
		stem_model[s] = info->stem_model[s] ? info->stem_model[s] : info->name;
	if (j->residual_ran)
		stem_model[SB_STEM_OTHER] = "residual";
	const sb_manifest m = {
		.stem_model = stem_model,
		.status = "ok",
		.input_path = spec->input_path,
		.input_size = j->in_size,
		.input_mtime_ns = j->in_mtime,
		.frames = j->src->frames,
		.channels = j->src->channels,
		.rate = j->src->rate,
		.input_format = j->ai.format_name,
		.input_peak = j->whole.peak,
		.input_silent = j->silent,
		.timeline_start = spec->timeline_start,
		.track = j->track,
		.take = j->take,
		.model = info->name,
		.model_requested = j->model_name,
		.model_description = info->description,
		.shifts = spec->shifts,
		.overlap = spec->overlap,
		.device_requested = res->device_requested,
		.device_used_key = d0->props->key,
		.device_used_id = d0->props->id,
		.device_used_name = d0->props->label,
		.devices = mdev,
		.n_devices = n_mdev > 1 || (n_mdev == 1 && mdev[0].segments > 0) ? n_mdev : 0,
		.fell_back = pl->fell_back,
		.precision_requested = spec->bf16 ? "bf16" : "fp32",
		.precision = res->precision,
		.products = res->products,
		.fallback_reason = res->fallback_reason,
		.events = j->ev.ptr,
		.n_events = j->ev.n,
		.stems = j->w,
		.load_s = j->t_loaded - j->t_start,
		.separate_s = j->t_separated - j->t_loaded,
		.write_s = sb_now() - j->t_separated,
		.total_s = sb_now() - j->t_start,
	};
	char *json = NULL, *txt = NULL;
	sb_status st = sb_manifest_render(&m, &json, &txt);
	if (st == SB_OK)
		st = sb_stem_writer_add_file(j->w, j->txt_path, txt, strlen(txt));
	if (st == SB_OK)
		st = sb_stem_writer_add_file(j->w, j->manifest_path, json, strlen(json));
	free(json);
	free(txt);
	if (st == SB_OK)
		st = sb_stem_writer_commit(j->w);
	if (st != SB_OK)
		return st;
	snprintf(res->manifest_path, sizeof res->manifest_path, "%s", j->manifest_path);
	snprintf(res->stems_txt_path, sizeof res->stems_txt_path, "%s", j->txt_path);
	res->n_stems = 0;
	for (int i = 0; i < sb_stem_writer_count(j->w) && res->n_stems < SB_JOB_MAX_STEMS; i++) {
		sb_stem_info si;
		sb_stem_writer_info(j->w, i, &si);
		res->stems[res->n_stems].stem = si.stem;
		snprintf(res->stems[res->n_stems].name, sizeof res->stems[0].name, "%s", si.name);
		sb_stem_writer_abs_path(si.path, res->stems[res->n_stems].path,
		                        sizeof res->stems[0].path);
		res->stems[res->n_stems].peak = si.peak;
		res->stems[res->n_stems].rms = si.rms;
		res->n_stems++;
	}
	return SB_OK;
}

/* The separation is over: what the result and the manifest say of the devices and the model,
 * read while they are the job's; then the model goes back to the keep (for the next job, when
 * nothing went wrong with it or its devices: a device that stopped sharing the file,
 * sb_device_report, counts too) and the engine's hold on the devices ends, so that the next job
 * may separate while this one mixes back and writes (job_run.h: sb_job_env.hold). A composite's
 * or an ensemble's models are the job's own, freed at its end. */
static void give_back(job *j)
{
	sb_job_outcome *res = j->res;
	const sb_exec *d0 = &j->pl.dev[0];
	snprintf(res->device_used, sizeof res->device_used, "%s", d0->props->key);
	snprintf(res->precision, sizeof res->precision, "%s",
	         d0->be->precision ? d0->be->precision(d0->d) : "fp32");
	snprintf(res->products, sizeof res->products, "%s",
	         d0->be->describe ? d0->be->describe(d0->d) : "");
	j->info = j->model->info;
	for (int s = 0; s < SB_MAX_STEMS; s++)
		if (j->info.stem_model[s]) {
			snprintf(j->stem_model[s], sizeof j->stem_model[s], "%s", j->info.stem_model[s]);
			j->info.stem_model[s] = j->stem_model[s];
		}
	if (j->from_cache) {
		for (int i = 0; i < j->ps.p.n_devices; i++)
			j->device_trouble |= j->ps.p.devices[i].dropped;
		sb_model_cache_done(j->env->keep, j->model, !j->device_trouble);
		j->model = NULL;
		j->model_given = 1;
	}
	if (j->env->let_go)
		j->env->let_go(j->env->hold_user);
	j->let_go = 1;
}

/* What the job leaves: its result's words and state, nothing temporary; the model kept for the
 * next job only when nothing went wrong with it or its devices (a device that stopped sharing
 * the file, sb_device_report, counts too), or when it failed before the model ran. */
static void end(job *j, sb_status st)
{
	sb_job_outcome *res = j->res;
	if (st == SB_OK) {
		res->status = SB_OK;
		report(&j->ps, SB_JOB_DONE, 1.0, "done");
	} else {
		if (st == SB_ERR_CANCELLED)
			set_message(res, st, "cancelled");
		else
			set_message(res, st, "%s", j->cap.last[0] ? j->cap.last : sb_status_str(st));
		if (j->pl.n > 0)
			snprintf(res->device_used, sizeof res->device_used, "%s", j->pl.dev[0].props->key);
		report(&j->ps, st == SB_ERR_CANCELLED ? SB_JOB_CANCELLED : SB_JOB_FAILED,
		       j->ps.p.fraction, st == SB_ERR_CANCELLED ? "cancelled" : "failed");
	}
	sb_resample_sink_free(j->rsink);
	if (j->rsrc)
		j->rsrc->close(j->rsrc);
	sb_stem_writer_free(j->w); /* removes any temporary file; committed stems stay */
	if (j->src)
		j->src->close(j->src);
	for (int i = 0; i < j->ps.p.n_devices; i++)
		j->device_trouble |= j->ps.p.devices[i].dropped;
	if (!j->model_given)
		sb_model_cache_done(j->n_parts > 1 ? NULL : j->env->keep, j->model,
		                   res->status == SB_OK ? !j->device_trouble : !j->model_ran);
	if (j->held && !j->let_go && j->env->let_go)
		j->env->let_go(j->env->hold_user);
}

sb_status sb_job_run(const sb_job_spec *spec, const sb_job_env *env, sb_job_outcome *res)
{
	memset(res, 0, sizeof *res);
	job *j = calloc(1, sizeof *j);
	if (!j) {
		set_message(res, SB_ERR_NOMEM, "out of memory");
		return res->status;
	}
	j->spec = spec;
	j->env = env;
	j->res = res;
	j->cap = (capture_log){env->log, ""};
	j->log_s = (sb_logger){capture_fn, &j->cap};
	j->log = &j->log_s;
	j->t_start = sb_now();
	j->in_size = j->in_mtime = -1;
	j->model_name = spec->model && *spec->model ? spec->model : "auto";
	j->ps = (progress_state){env, {0}, 0.02, 0.97, j->t_start, 0, 0, &j->ev, j->log};
	sb_job_progress_init(&j->ps.p);
	snprintf(res->device_requested, sizeof res->device_requested, "%s",
	         env->requested ? env->requested : "auto");

	/* the input is read before the devices are held: the job before may still separate */
	report(&j->ps, SB_JOB_RUNNING, 0.0, "loading");
	sb_status st = open_input(j);
	if (st == SB_OK) {
		if (env->hold)
			env->hold(env->hold_user);
		j->held = 1;
		st = open_devices(env, &j->ev, j->log, res, &j->pl);
		if (st != SB_OK) {
			sb_log(j->log, SB_LOG_ERROR, "no device could be opened, not even the CPU");
		} else {
			use_devices(&j->ps, &j->pl);
			report(&j->ps, SB_JOB_RUNNING, 0.0, "loading");
		}
	}
	if (st == SB_OK)
		st = open_model(j);
	if (st == SB_OK)
		st = open_output(j);
	if (st == SB_OK)
		st = separate(j);
	if (st == SB_OK)
		give_back(j);
	if (st == SB_OK)
		st = mix_back(j);
	if (st == SB_OK) {
		j->t_separated = sb_now();
		report(&j->ps, SB_JOB_WRITING, 0.97, "writing");
		injected_wait(&j->ps, "job:slow-write:");
		if (env->cancel && atomic_load(env->cancel))
			st = SB_ERR_CANCELLED;
	}
	if (st == SB_OK)
		st = commit(j);
	end(j, st);
	free(j);
	return res->status;
}
