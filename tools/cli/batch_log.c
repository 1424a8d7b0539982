/* The log of a batch: one JSON line per input to OUT/logs/batch-I-of-N.jsonl, appended by each
 * run with one write() per line so that the lines of several tasks never interleave, then a
 * summary line per run; and the reader that the restart and the report go through.
 */
#include "batch.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void iso_time(double t, char *out, size_t len)
{
	time_t s = (time_t)t;
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

double sb_batch_wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

long long sb_batch_mtime_ns(const struct stat *st)
{
	return (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

/* One line, one write(): lines of several tasks never interleave. */
static int log_line(int fd, json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (!text || fd < 0) {
		free(text);
		return fd < 0;
	}
	const size_t n = strlen(text);
	text[n] = '\n'; /* json_dumps's terminating NUL becomes the newline */
	const ssize_t w = write(fd, text, n + 1);
	free(text);
	return w == (ssize_t)(n + 1);
}

/* The Slurm job (the array's id for an array task) and the task: which run wrote a line. */
static void slurm_fields(json_t *o)
{
	const char *job = sb_knob_get("SLURM_ARRAY_JOB_ID");
	if (!job)
		job = sb_knob_get("SLURM_JOB_ID");
	if (job)
		json_object_set_new(o, "slurm_job", json_string(job));
	const char *task = sb_knob_get("SLURM_ARRAY_TASK_ID");
	if (task)
		json_object_set_new(o, "slurm_task", json_string(task));
}

void sb_batch_result_line(const sb_batch_log *log, const char *abs_in, const struct stat *in_st,
                          const char *status, double seconds, const sb_job_result *r,
                          sb_batch_tally *t)
{
	json_t *o = json_object();
	char when[32];
	iso_time(sb_batch_wall_now(), when, sizeof when);
	json_object_set_new(o, "time", json_string(when));
	json_object_set_new(o, "path", json_string(abs_in));
	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "shard", json_string(log->shard));
	json_object_set_new(o, "host", json_string(log->host));
	slurm_fields(o);
	if (in_st) {
		json_object_set_new(o, "size", json_integer((long long)in_st->st_size));
		json_object_set_new(o, "mtime_ns", json_integer(sb_batch_mtime_ns(in_st)));
	}
	json_object_set_new(o, "seconds", json_real(seconds));
	double audio_s = 0;
	if (r && r->status == SB_OK && r->manifest_path[0]) {
		json_object_set_new(o, "manifest", json_string(r->manifest_path));
		json_error_t je;
		json_t *m = json_load_file(r->manifest_path, 0, &je);
		if (m) {
			const json_t *dev = json_object_get(m, "device");
			audio_s = json_number_value(json_object_get(json_object_get(m, "input"), "seconds"));
			json_object_set(o, "device", json_object_get(dev, "used_id"));
			json_object_set(o, "device_name", json_object_get(dev, "used_name"));
			if (json_is_true(json_object_get(dev, "fell_back")))
				json_object_set(o, "fallback", json_object_get(dev, "reason"));
			json_object_set(o, "model", json_object_get(json_object_get(m, "model"), "name"));
			json_decref(m);
		}
		json_object_set_new(o, "audio_s", json_real(audio_s));
		/* as the manifest's: seconds of audio per second of work (2 = twice real time) */
		json_object_set_new(o, "realtime_factor",
		                    seconds > 0 ? json_real(audio_s / seconds) : json_null());
	} else if (r) {
		json_object_set_new(o, "error", json_string(r->message[0] ? r->message
		                                            : sb_status_str(r->status)));
		if (r->device_used[0])
			json_object_set_new(o, "device", json_string(r->device_used));
	}
	log_line(log->fd, o);
	if (!strcmp(status, "done")) {
		t->done++;
		t->audio_s += audio_s;
		t->sep_s += seconds;
	} else if (!strcmp(status, "skipped")) {
		t->skipped++;
	} else if (!strcmp(status, "failed")) {
		t->failed++;
	} else {
		t->cancelled++;
	}
}

void sb_batch_unstarted(const sb_batch_log *log, const char *in, const char *abs_in,
                        const struct stat *in_st, const char *status, const char *why,
                        sb_batch_tally *t)
{
	sb_job_result r;
	memset(&r, 0, sizeof r);
	r.status = strcmp(status, "failed") ? SB_OK : SB_ERR_IO;
	r.message = why;
	r.manifest_path = r.device_used = "";
	if (r.status != SB_OK)
		fprintf(stderr, "stembridge: error: %s: %s\n", in, why);
	sb_batch_result_line(log, abs_in, in_st, status, 0, &r, t);
}

/* As a person reads it too: how many inputs and how each ended, the devices and the GPUs the
 * scheduler granted, and the rates. */
void sb_batch_summary_line(const sb_batch_log *log, const sb_device_list *dl,
                           const sb_device_set *set, size_t inputs, long not_started,
                           const sb_batch_tally *t, double wall_start, double wall, int stop_sig)
{
	json_t *s = json_object();
	char when[32];
	iso_time(sb_batch_wall_now(), when, sizeof when);
	json_object_set_new(s, "time", json_string(when));
	json_object_set_new(s, "summary", json_true());
	json_object_set_new(s, "shard", json_string(log->shard));
	json_object_set_new(s, "host", json_string(log->host));
	slurm_fields(s);
	/* the GPUs the scheduler granted, as the drivers are told */
	static const char *const gpu_vars[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
	                                       "ZE_AFFINITY_MASK", "SLURM_JOB_GPUS"};
	for (size_t k = 0; k < sizeof gpu_vars / sizeof *gpu_vars; k++)
		if (sb_knob_get(gpu_vars[k]))
			json_object_set_new(s, gpu_vars[k], json_string(sb_knob_get(gpu_vars[k])));
	json_t *dv = json_array();
	for (size_t k = 0; k < set->n; k++)
		json_array_append_new(dv, json_string(sb_device_get_id(sb_devices_get(dl, set->index[k]))));
	json_object_set_new(s, "devices", dv);
	json_object_set_new(s, "inputs", json_integer((long long)inputs));
	json_object_set_new(s, "done", json_integer(t->done));
	json_object_set_new(s, "skipped", json_integer(t->skipped));
	json_object_set_new(s, "failed", json_integer(t->failed));
	json_object_set_new(s, "cancelled", json_integer(t->cancelled + not_started));
	json_object_set_new(s, "audio_hours", json_real(t->audio_s / 3600));
	json_object_set_new(s, "start", json_real(wall_start));
	json_object_set_new(s, "wall_s", json_real(wall));
	json_object_set_new(s, "separation_s", json_real(t->sep_s));
	json_object_set_new(s, "songs_per_hour", json_real(wall > 0 ? t->done * 3600.0 / wall : 0));
	if (stop_sig)
		json_object_set_new(s, "stopped_by", json_string(stop_sig == SIGINT ? "SIGINT"
		                                                                     : "SIGTERM"));
	log_line(log->fd, s);
}

/* A task killed mid-write leaves a line that is not JSON: fn gets NULL for it. */
long sb_batch_each_log_line(const char *out_dir, void (*fn)(void *user, json_t *line),
                            void *user)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/logs", out_dir);
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	long logs = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const size_t l = strlen(de->d_name);
		if (l < 7 || strcmp(de->d_name + l - 6, ".jsonl"))
			continue;
		char p[PATH_MAX + 256];
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		logs++;
		char *line = NULL;
		size_t cap = 0;
		while (getline(&line, &cap, f) >= 0) {
			json_error_t je;
			json_t *o = json_loads(line, 0, &je);
			fn(user, o);
			json_decref(o);
		}
		free(line);
		fclose(f);
	}
	closedir(d);
	return logs;
}
