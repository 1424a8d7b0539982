/* `stembridge batch --report OUT`: every task's log in OUT/logs summed. Each input stands where
 * its latest line says (later in a log is later in time); the runs' summary lines give the
 * task hours and the span the batch took.
 */
#include "batch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char *path;
	char *status;
	char *error;
	char time[32];
	size_t seq;       /* the order it was read in: later in a log is later in time */
} last_line;

static int cmp_last(const void *a, const void *b)
{
	const last_line *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (!c)
		c = strcmp(x->time, y->time);
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

typedef struct {
	last_line *v;
	size_t n, cap;
	long runs, separations, bad_lines;
	double audio_s, sep_s, task_s, first, last;
} report_sums;

static void add_line(void *user, json_t *o)
{
	report_sums *r = user;
	if (!o) {
		r->bad_lines++;
		return;
	}
	if (json_is_true(json_object_get(o, "summary"))) {
		r->runs++;
		const double st = json_number_value(json_object_get(o, "start"));
		const double w = json_number_value(json_object_get(o, "wall_s"));
		r->task_s += w;
		if (st > 0 && (r->first == 0 || st < r->first))
			r->first = st;
		if (st + w > r->last)
			r->last = st + w;
		return;
	}
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *status = json_string_value(json_object_get(o, "status"));
	const char *tm = json_string_value(json_object_get(o, "time"));
	const char *err = json_string_value(json_object_get(o, "error"));
	if (!path || !status)
		return;
	if (!strcmp(status, "done")) {
		r->separations++;
		r->audio_s += json_number_value(json_object_get(o, "audio_s"));
		r->sep_s += json_number_value(json_object_get(o, "seconds"));
	}
	if (r->n == r->cap) {
		const size_t cap = r->cap ? r->cap * 2 : 1024;
		last_line *nv = realloc(r->v, cap * sizeof *nv);
		if (!nv)
			return;
		r->v = nv;
		r->cap = cap;
	}
	last_line *l = &r->v[r->n];
	l->path = strdup(path);
	l->status = strdup(status);
	l->error = err ? strdup(err) : NULL;
	snprintf(l->time, sizeof l->time, "%s", tm ? tm : "");
	l->seq = r->n++;
}

int sb_batch_report(const char *out_dir, int as_json)
{
	report_sums sums;
	memset(&sums, 0, sizeof sums);
	const long logs = sb_batch_each_log_line(out_dir, add_line, &sums);
	if (logs < 0) {
		fprintf(stderr, "stembridge: error: %s/logs: %s (no batch has logged there)\n",
		        out_dir, strerror(errno));
		return 1;
	}
	last_line *v = sums.v;
	const size_t n = sums.n;
	const long runs = sums.runs, separations = sums.separations, bad_lines = sums.bad_lines;
	const double audio_s = sums.audio_s, sep_s = sums.sep_s, task_s = sums.task_s;
	const double first = sums.first, last = sums.last;
	if (n)
		qsort(v, n, sizeof *v, cmp_last);
	/* each input's latest line says where it stands */
	long inputs = 0, complete = 0, failed = 0, cancelled = 0;
	json_t *failures = json_array();
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && !strcmp(v[i].path, v[i + 1].path))
			continue;
		inputs++;
		if (!strcmp(v[i].status, "done") ||
		    (!strcmp(v[i].status, "skipped") && !v[i].error))
			complete++;
		else if (!strcmp(v[i].status, "cancelled"))
			cancelled++;
		else {
			failed++;
			json_t *fo = json_object();
			json_object_set_new(fo, "path", json_string(v[i].path));
			json_object_set_new(fo, "error", json_string(v[i].error ? v[i].error : v[i].status));
			json_array_append_new(failures, fo);
		}
	}
	const double span = last > first ? last - first : 0;
	json_t *r = json_object();
	json_object_set_new(r, "logs", json_integer(logs));
	json_object_set_new(r, "runs", json_integer(runs));
	json_object_set_new(r, "inputs", json_integer(inputs));
	json_object_set_new(r, "complete", json_integer(complete));
	json_object_set_new(r, "failed", json_integer(failed));
	json_object_set_new(r, "cancelled", json_integer(cancelled));
	json_object_set_new(r, "separations", json_integer(separations));
	json_object_set_new(r, "audio_hours", json_real(audio_s / 3600));
	json_object_set_new(r, "separation_hours", json_real(sep_s / 3600));
	json_object_set_new(r, "task_hours", json_real(task_s / 3600));
	json_object_set_new(r, "span_s", json_real(span));
	json_object_set_new(r, "songs_per_task_hour",
	                    json_real(task_s > 0 ? separations * 3600.0 / task_s : 0));
	json_object_set_new(r, "songs_per_hour", json_real(span > 0 ? separations * 3600.0 / span
	                                                                : 0));
	json_object_set_new(r, "unreadable_lines", json_integer(bad_lines));
	json_object_set(r, "failures", failures);
	if (as_json) {
		char *text = json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (text)
			printf("%s\n", text);
		free(text);
	} else {
		printf("%ld inputs logged by %ld runs in %ld logs: %ld complete, %ld failed, "
		       "%ld cancelled\n", inputs, runs, logs, complete, failed, cancelled);
		printf("%ld separations, %.3f audio hours, %.3f hours of separation, %.3f task hours; "
		       "%.0f songs per task-hour, %.0f songs per hour over %.0f s\n",
		       separations, audio_s / 3600, sep_s / 3600, task_s / 3600,
		       task_s > 0 ? separations * 3600.0 / task_s : 0,
		       span > 0 ? separations * 3600.0 / span : 0, span);
		size_t k;
		json_t *fo;
		json_array_foreach(failures, k, fo)
			printf("failed: %s: %s\n", json_string_value(json_object_get(fo, "path")),
			       json_string_value(json_object_get(fo, "error")));
		if (bad_lines)
			printf("%ld unreadable lines (a task stopped mid-write)\n", bad_lines);
	}
	json_decref(failures);
	json_decref(r);
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].status);
		free(v[i].error);
	}
	free(v);
	return failed ? 1 : 0;
}
