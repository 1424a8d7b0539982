/* Machine-readable progress for front ends (progress_json.h). */
#include "progress_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void emit(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(5)) : NULL;
	json_decref(o);
	if (!text)
		return;
	fputs(text, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	free(text);
}

static json_t *event(const char *name)
{
	json_t *o = json_object();
	json_object_set_new(o, "event", json_string(name));
	return o;
}

void sb_cli_json_start(int n_inputs)
{
	json_t *o = event("start");
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "inputs", json_integer(n_inputs));
	emit(o);
}

/* The last line's fraction and time, per input; inputs beyond the table are never throttled. */
#define TRACKED 256
static double last_fraction[TRACKED], last_time[TRACKED];
static int last_state[TRACKED];

void sb_cli_json_progress(sb_engine *e, const sb_job_id *ids, const int *ok,
                          const char *const *inputs, int n, double t0)
{
	double sum = 0;
	sb_job_progress *p = calloc((size_t)n, sizeof *p);
	int *have = calloc((size_t)n, sizeof *have);
	if (!p || !have) {
		free(p);
		free(have);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (ok[i] && sb_engine_progress(e, ids[i], &p[i]) == SB_OK) {
			have[i] = 1;
			sum += p[i].fraction;
		} else {
			sum += 1; /* refused at submit: nothing left to do for it */
		}
	}
	const double overall = n ? sum / n : 1, now = sb_now();
	for (int i = 0; i < n; i++) {
		if (!have[i] || p[i].state >= SB_JOB_DONE)
			continue;
		const int k = i < TRACKED ? i : -1;
		if (k >= 0 && last_time[k] > 0 && (int)p[i].state == last_state[k] &&
		    p[i].fraction - last_fraction[k] < 0.01 && now - last_time[k] < 1.0)
			continue;
		if (k >= 0) {
			last_fraction[k] = p[i].fraction;
			last_time[k] = now;
			last_state[k] = (int)p[i].state;
		}
		json_t *o = event("progress");
		json_object_set_new(o, "input", json_integer(i));
		json_object_set_new(o, "file", json_string(inputs[i]));
		json_object_set_new(o, "fraction", json_real(p[i].fraction));
		json_object_set_new(o, "overall", json_real(overall));
		json_object_set_new(o, "eta_s", json_real(p[i].eta_s));
		json_object_set_new(o, "elapsed_s", json_real(now - t0));
		json_object_set_new(o, "stage", json_string(p[i].stage));
		if (p[i].device_id[0])
			json_object_set_new(o, "device", json_string(p[i].device_id));
		emit(o);
	}
	free(p);
	free(have);
}

void sb_cli_json_warning(const char *message)
{
	json_t *o = event("warning");
	json_object_set_new(o, "message", json_string(message));
	emit(o);
}

void sb_cli_json_done(int i, const char *input, const sb_job_result *r)
{
	json_t *o = event("done");
	json_object_set_new(o, "input", json_integer(i));
	json_object_set_new(o, "file", json_string(input));
	json_object_set_new(o, "manifest", json_string(r->manifest_path));
	json_object_set_new(o, "stems_txt", json_string(r->stems_txt_path));
	json_t *stems = json_array();
	for (int k = 0; k < r->n_stems; k++) {
		json_t *s = json_object();
		json_object_set_new(s, "stem", json_string(r->stems[k].name));
		json_object_set_new(s, "path", json_string(r->stems[k].path));
		json_array_append_new(stems, s);
	}
	json_object_set_new(o, "stems", stems);
	json_object_set_new(o, "device", json_string(r->device_used));
	if (r->fallback_reason[0])
		json_object_set_new(o, "fallback", json_string(r->fallback_reason));
	emit(o);
}

void sb_cli_json_failed(int i, const char *input, sb_status st, const char *message)
{
	json_t *o = event("failed");
	json_object_set_new(o, "input", json_integer(i));
	json_object_set_new(o, "file", json_string(input));
	json_object_set_new(o, "status", json_string(sb_status_str(st)));
	json_object_set_new(o, "message", json_string(message));
	emit(o);
}

void sb_cli_json_end(int exit_status, const char *message)
{
	json_t *o = event("end");
	json_object_set_new(o, "exit", json_integer(exit_status));
	json_object_set_new(o, "message", json_string(message));
	emit(o);
}
