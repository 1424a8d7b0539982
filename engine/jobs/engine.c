/* The engine (stembridge.h: sb_engine_*): its API, over the scheduler (scheduler.c) and the
 * device slots (device_slots.c). README.md here tells how it schedules and what each lock
 * guards. */
#include "jobs/engine_internal.h"

#include "io/audio_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

sb_status sb_engine_new(const sb_engine_opts *opts, sb_engine **out)
{
	if (!opts || !out)
		return SB_ERR_INVALID;
	sb_engine *e = calloc(1, sizeof *e);
	if (!e)
		return SB_ERR_NOMEM;
	e->opts = *opts;
	/* SB_BATCH where the caller leaves the batch to the devices (the option wins) */
	const char *batch = sb_knob_get("SB_BATCH");
	if (opts->batch <= 0 && batch && atoi(batch) > 0) {
		e->opts.batch = atoi(batch);
		sb_log(&e->opts.log, SB_LOG_INFO, "SB_BATCH=%d: segments per forward pass",
		       e->opts.batch);
	}
	e->opts.devices = NULL;
	e->opts.model_path = NULL;
	e->next_id = 1;
	pthread_mutex_init(&e->lock, NULL);
	sb_status st = sb_devices_enumerate(&e->opts.log, &e->devices);
	if (st != SB_OK) {
		pthread_mutex_destroy(&e->lock);
		free(e);
		return st;
	}
	size_t nd = sb_devices_count(e->devices);
	st = sb_slots_new(e, nd);
	e->set = calloc(nd + 1, sizeof *e->set);
	size_t np = 0;
	while (opts->model_path && opts->model_path[np])
		np++;
	e->model_path = calloc(np + 1, sizeof *e->model_path);
	if (st != SB_OK || !e->set || !e->model_path) {
		sb_engine_free(e);
		return SB_ERR_NOMEM;
	}
	for (size_t i = 0; i < np; i++)
		if (!(e->model_path[i] = strdup(opts->model_path[i]))) {
			sb_engine_free(e);
			return SB_ERR_NOMEM;
		}
	/* The device set for jobs without a device of their own. */
	for (size_t i = 0; i < opts->n_devices; i++) {
		sb_device_set ds;
		if (sb_devices_resolve_set(e->devices, opts->devices[i], &ds) != SB_OK) {
			char forms[256];
			sb_devices_request_forms(forms, sizeof forms);
			sb_log(&e->opts.log, SB_LOG_ERROR,
			       "unknown device '%s' (use %s)", opts->devices[i], forms);
			sb_engine_free(e);
			return SB_ERR_INVALID;
		}
		for (size_t k = 0; k < ds.n; k++) {
			if (ds.reason[k][0])
				sb_log(&e->opts.log, SB_LOG_WARNING, "%s: using the CPU instead", ds.reason[k]);
			int dup = 0;
			for (size_t m = 0; m < e->n_set; m++)
				dup |= e->set[m] == ds.index[k];
			if (!dup && e->n_set < nd)
				e->set[e->n_set++] = ds.index[k];
		}
	}
	if (e->n_set == 0 && opts->mode == SB_MODE_PARALLEL)
		for (size_t i = 0; i < nd; i++)
			if (sb_device_is_gpu(sb_devices_get(e->devices, i)))
				e->set[e->n_set++] = i;
	if (e->n_set == 0)
		e->set[e->n_set++] = sb_devices_auto(e->devices);
	*out = e;
	return SB_OK;
}

void sb_engine_free(sb_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = 1;
	for (sb_job *j = e->jobs; j; j = j->next_in_table)
		atomic_store(&j->cancel, 1);
	for (sb_worker *w = e->workers; w; w = w->next)
		pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&e->lock);
	/* every worker ended before any is freed: one that ends a job walks the list of workers
	 * (end_lending), so a worker freed while another still runs would be read after its free */
	for (sb_worker *o = e->workers; o; o = o->next)
		if (o->started)
			pthread_join(o->thread, NULL);
	sb_worker *w = e->workers;
	while (w) {
		sb_worker *n = w->next;
		sb_model_cache_free(w->keep); /* its weights on the devices go before the devices */
		pthread_cond_destroy(&w->wake);
		pthread_cond_destroy(&w->turned);
		free(w);
		w = n;
	}
	sb_job *j = e->jobs;
	while (j) {
		sb_job *n = j->next_in_table;
		sb_sched_job_free(j);
		j = n;
	}
	sb_slots_free(e);
	free(e->set);
	if (e->model_path)
		for (size_t i = 0; e->model_path[i]; i++)
			free(e->model_path[i]);
	free(e->model_path);
	sb_devices_free(e->devices);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

const struct sb_device_list *sb_engine_devices(const sb_engine *e)
{
	return e ? e->devices : NULL;
}

static sb_job *find(sb_engine *e, sb_job_id id)
{
	for (sb_job *j = e->jobs; j; j = j->next_in_table)
		if (j->id == id)
			return j;
	return NULL;
}

void sb_engine_pause(sb_engine *e, int paused)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->paused = paused != 0;
	if (!e->paused)
		for (sb_worker *w = e->workers; w; w = w->next)
			pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&e->lock);
}

sb_status sb_engine_submit(sb_engine *e, const sb_job_spec *spec, sb_job_id *id)
{
	if (!e || !spec || !spec->out_dir || !*spec->out_dir)
		return SB_ERR_INVALID;
	if (!spec->input_path && (!spec->samples || spec->channels < 1 || !(spec->rate > 0)))
		return SB_ERR_INVALID;
	if (!spec->input_path && spec->frames <= 0)
		return SB_ERR_EMPTY;
	sb_job *j = calloc(1, sizeof *j);
	if (!j)
		return SB_ERR_NOMEM;
	j->spec = *spec;
	const char *src[8] = {spec->input_path, spec->track, spec->take, spec->device, spec->model,
	                      spec->out_dir, spec->name_template, spec->manifest_name};
	for (int i = 0; i < 8; i++)
		if (src[i] && !(j->strings[i] = strdup(src[i]))) {
			j->spec.samples = NULL; /* the caller keeps its samples when submit fails */
			sb_sched_job_free(j);
			return SB_ERR_NOMEM;
		}
	j->spec.input_path = j->strings[0];
	j->spec.track = j->strings[1];
	j->spec.take = j->strings[2];
	j->spec.device = j->strings[3];
	j->spec.model = j->strings[4];
	j->spec.out_dir = j->strings[5];
	j->spec.name_template = j->strings[6];
	j->spec.manifest_name = j->strings[7];
	pthread_cond_init(&j->done, NULL);
	/* The model, resolved once (nothing logged: the job says why when there is none), and what
	 * the sharing rule of parallel mode reads (sequential mode has no pool): the job's length
	 * (a file's from its header; a nominal minute when that cannot be read: such a file fails
	 * at once anyway), and whether its model can share (every model file can, the built-in
	 * cannot). */
	const sb_logger quiet = {NULL, NULL};
	sb_model_resolve(spec->model, spec->stems, spec->quality_best,
	                 (const char *const *)e->model_path, &quiet, &j->choice);
	if (j->choice.n == 1 && j->choice.part[0].members > 1 && spec->model) {
		/* an ensemble named by the caller: its combination and weights */
		j->choice.part[0].mode = spec->ensemble_mode;
		for (int i = 0; i < SB_ENSEMBLE_MAX; i++)
			j->choice.part[0].weight[i] = spec->ensemble_weights[i];
	}
	j->units = 60;
	if (e->opts.mode == SB_MODE_PARALLEL) {
		const double secs = spec->input_path ? sb_audio_file_seconds(spec->input_path)
		                                     : (double)spec->frames / spec->rate;
		if (secs > 0)
			j->units = secs;
		j->shares = !spec->in_turn && j->choice.n > 0;
		for (int i = 0; i < j->choice.n; i++)
			j->shares &= j->choice.part[i].path[0] != 0;
	}

	pthread_mutex_lock(&e->lock);
	/* what it asks for: its own request, else the engine's set */
	sb_device_set want;
	memset(&want, 0, sizeof want);
	if (spec->device) {
		if (sb_devices_resolve_set(e->devices, spec->device, &want) != SB_OK) {
			pthread_mutex_unlock(&e->lock);
			char forms[256];
			sb_devices_request_forms(forms, sizeof forms);
			sb_log(&e->opts.log, SB_LOG_ERROR, "unknown device '%s' (use %s, or several of "
			       "them separated by commas)", spec->device, forms);
			j->spec.samples = NULL;
			sb_sched_job_free(j);
			return SB_ERR_INVALID;
		}
		snprintf(j->requested, sizeof j->requested, "%s", spec->device);
	} else if (e->opts.mode == SB_MODE_PARALLEL) {
		for (size_t k = 0; k < e->n_set; k++)
			want.index[want.n++] = e->set[k];
		snprintf(j->requested, sizeof j->requested, "auto (parallel set)");
	} else {
		want.n = 1;
		want.index[0] = e->set[e->rr++ % e->n_set];
		snprintf(j->requested, sizeof j->requested, "auto");
	}
	/* Parallel mode: a job asking for several devices waits in the pool for a free one, or
	 * for all that are free when nothing else waits for them (next_job). Sequential mode, a
	 * job that runs in turn, or one device: the job takes all it asked for, after the jobs
	 * before it. */
	j->pooled = e->opts.mode == SB_MODE_PARALLEL && !spec->in_turn && want.n > 1;
	sb_worker *w = NULL;
	if (j->pooled) {
		j->want = want;
		/* a worker for each device of the set, taking pooled jobs besides its own */
		for (size_t k = 0; k < want.n; k++) {
			sb_device_set one;
			memset(&one, 0, sizeof one);
			one.n = 1;
			one.index[0] = want.index[k];
			sb_worker *o = sb_sched_worker_for(e, &one);
			if (!o)
				break;
			o->pool = 1;
			o->dev = want.index[k];
			w = o;
		}
	} else {
		j->set = want;
		w = sb_sched_worker_for(e, &j->set);
	}
	if (!w) {
		pthread_mutex_unlock(&e->lock);
		j->spec.samples = NULL;
		sb_sched_job_free(j);
		return SB_ERR_NOMEM;
	}
	j->id = e->next_id++;
	sb_job_progress_init(&j->progress);
	j->next_in_table = e->jobs;
	e->jobs = j;
	if (j->pooled) {
		sb_sched_append(&e->pool_head, &e->pool_tail, j);
		sb_sched_wake_pool(e);
	} else {
		sb_sched_append(&w->head, &w->tail, j);
		pthread_cond_signal(&w->wake);
	}
	if (id)
		*id = j->id;
	pthread_mutex_unlock(&e->lock);
	return SB_OK;
}

sb_status sb_engine_progress(sb_engine *e, sb_job_id id, sb_job_progress *out)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	if (j)
		*out = j->progress;
	pthread_mutex_unlock(&e->lock);
	return j ? SB_OK : SB_ERR_INVALID;
}

sb_status sb_engine_cancel(sb_engine *e, sb_job_id id)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	if (j)
		atomic_store(&j->cancel, 1);
	/* one still waiting ends now, not when a device comes free */
	if (j && !j->ended && sb_sched_unqueue(e, j))
		sb_sched_end_unstarted(e, j);
	pthread_mutex_unlock(&e->lock);
	return j ? SB_OK : SB_ERR_INVALID;
}

sb_status sb_engine_wait(sb_engine *e, sb_job_id id, double timeout_s)
{
	const struct timespec until = sb_sched_deadline(timeout_s >= 0 ? timeout_s : 0);
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	sb_status st = j ? SB_OK : SB_ERR_INVALID;
	while (j && !j->ended) {
		if (timeout_s < 0)
			pthread_cond_wait(&j->done, &e->lock);
		else if (pthread_cond_timedwait(&j->done, &e->lock, &until) != 0)
			break;
	}
	if (j && !j->ended)
		st = SB_ERR_TIMEOUT;
	pthread_mutex_unlock(&e->lock);
	return st;
}

sb_status sb_engine_result(sb_engine *e, sb_job_id id, sb_job_result *out)
{
	pthread_mutex_lock(&e->lock);
	sb_job *j = find(e, id);
	sb_status st = SB_ERR_INVALID;
	if (j && j->ended) {
		sb_job_outcome_view(&j->result, out);
		st = SB_OK;
	}
	pthread_mutex_unlock(&e->lock);
	return st;
}

void sb_engine_release(sb_engine *e, sb_job_id id)
{
	pthread_mutex_lock(&e->lock);
	sb_job **pp = &e->jobs;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next_in_table;
	sb_job *j = *pp;
	if (j && !j->ended && sb_sched_unqueue(e, j)) {
		atomic_store(&j->cancel, 1);
		sb_sched_end_unstarted(e, j); /* and freed below */
	}
	if (j && !j->ended) {
		/* running: cancel it; its worker frees it when it ends */
		atomic_store(&j->cancel, 1);
		j->released = 1;
		pthread_mutex_unlock(&e->lock);
		return;
	}
	if (j)
		*pp = j->next_in_table;
	pthread_mutex_unlock(&e->lock);
	if (j)
		sb_sched_job_free(j);
}
