/* stembridge: the command-line face of the engine.
 *
 *   stembridge separate IN... -o DIR [--device auto|all|cpu|opencl:N[,opencl:M...]] [--model NAME]
 *                      [--stems vocals,drums,bass,other] [--format wav|flac] [--bits 16|24|32]
 *                      [--parallel|--sequential] [--overwrite] [--template T] [--quiet]
 *   stembridge batch LIST -o DIR [--shard I/N] [separate's options]   (tools/cli/cmd_batch.c)
 *   stembridge devices [--json]        (also: stembridge --list-devices)
 *   stembridge models
 *
 * Exit status: 0 only when every requested stem of every input was written; 1 when a job
 * failed; 2 for a usage error; 130 / 143 when SIGINT (Ctrl-C) / SIGTERM cancelled the run.
 * Every failure is one line on stderr that names the file and the reason. Inputs are checked
 * before any separation starts, so one bad file among many costs nothing but its own line.
 *
 * SIGINT and SIGTERM cancel: running jobs stop at their next chunk, their temporary files are
 * removed, files that were already finished keep their stems, and one line says what was not
 * written. A second signal ends the process at once; the next run in that folder removes what
 * it left (sb_temp_clean_stale).
 */
#include "commands.h"
#include "options.h"
#include "progress_json.h"

#include "stembridge.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERSION "0.1.0"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stembridge separate IN... -o DIR [options]\n"
	        "       stembridge batch LIST -o DIR [--shard I/N] [options]   a catalogue, on Slurm\n"
	        "       stembridge batch --report DIR   sum a batch's logs\n"
	        "       stembridge devices [--json]     list the devices (also --list-devices)\n"
	        "       stembridge models [--json]       the models, installed or not, and 'auto'\n"
	        "       stembridge models install NAME  download, check and install a model\n"
	        "       stembridge models remove NAME   remove an installed model\n"
	        "\n"
	        "separate options (batch takes them too; 'stembridge batch --help'):\n"
	        "%s"
	        "  --parallel              several files at once, spread over the devices (default);\n"
	        "                          a file taken while the others are idle shares them\n"
	        "                          segment by segment\n"
	        "  --sequential            files one after another, each on the whole device set\n"
	        "  --timeline-start N[,M...]  each region's position in samples, for the manifest,\n"
	        "                          stems.txt and the WAV time reference: one value for\n"
	        "                          every input, or one per input in their order\n"
	        "  --progress json         progress as JSON lines on standard output, for front\n"
	        "                          ends: the process id first, then each file's fraction\n"
	        "                          and time left, its stems, and the exit status with its\n"
	        "                          message last (see the manual page)\n",
	        sb_cli_options_help);
}

typedef struct {
	int quiet;
	int jobs_running;
	int json; /* --progress json */
} cli_state;

static cli_state g_cli;
static volatile sig_atomic_t g_signal; /* the signal that asked to stop, 0 none */

static void on_stop_signal(int sig)
{
	g_signal = sig;
}

/* SIGINT and SIGTERM set g_signal once; a second one ends the process. */
static void catch_stop_signals(void)
{
	sb_cli_catch_stop(on_stop_signal);
}

/* Engine messages: warnings at once (a fallback is never silent); an error that belongs to a
 * job comes back in its result and is printed once, with the file it belongs to. */
static void log_cli(void *user, sb_log_level level, const char *msg)
{
	cli_state *c = user;
	if (level == SB_LOG_ERROR && !c->jobs_running)
		fprintf(stderr, "stembridge: error: %s\n", msg);
	else if (level == SB_LOG_WARNING && !c->quiet)
		fprintf(stderr, "stembridge: warning: %s\n", msg);
	if (level == SB_LOG_WARNING && c->json)
		sb_cli_json_warning(msg);
}

/* Progress on stderr: on a terminal one line redrawn (a bar, percent, time left, files, and each
 * device's segments when a file is shared), else a plain line at each quarter. Time left: the
 * job's own estimate for one file (from its segment rate), the overall rate for several. */
static void draw_progress(sb_engine *e, const sb_job_id *ids, const int *ok, int n, int tty,
                          double t0)
{
	static double last_plain = 0; /* the first plain line comes at 25 %, never a bare 0 % */
	static int last_done = 0;     /* files done at the last plain line */
	double sum = 0, eta = -1;
	int done = 0, running = 0;
	char stage[64] = "", devs[512] = "";
	for (int i = 0; i < n; i++) {
		if (!ok[i]) {
			sum += 1;
			done++;
			continue;
		}
		sb_job_progress p;
		if (sb_engine_progress(e, ids[i], &p) != SB_OK)
			continue;
		sum += p.fraction;
		if (p.state >= SB_JOB_DONE) {
			done++;
			continue;
		}
		if (p.state != SB_JOB_RUNNING && p.state != SB_JOB_WRITING)
			continue;
		running++;
		snprintf(stage, sizeof stage, "%s", p.stage);
		eta = p.eta_s;
		/* which devices work, with their segments when a file is shared */
		for (int d = 0; d < p.n_devices; d++) {
			const size_t at = strlen(devs);
			if (p.n_devices > 1)
				snprintf(devs + at, sizeof devs - at, "%s%s %ld%s", at ? "  " : "",
				         p.devices[d].id, p.devices[d].done, p.devices[d].dropped ? "!" : "");
			else
				snprintf(devs + at, sizeof devs - at, "%s%s", at ? "  " : "", p.devices[d].id);
		}
		if (!p.n_devices && p.device_id[0]) {
			const size_t at = strlen(devs);
			snprintf(devs + at, sizeof devs - at, "%s%s", at ? "  " : "", p.device_id);
		}
	}
	const double f = n ? sum / n : 1;
	if (n > 1 || running != 1) {
		const double el = sb_now() - t0;
		eta = f > 0.02 && el > 2 ? el * (1 - f) / f : -1;
	}
	char left[48] = "";
	if (eta >= 0 && f < 1) {
		char c[24];
		sb_cli_clock(eta, c, sizeof c);
		snprintf(left, sizeof left, "%s left", c);
	}
	if (tty) {
		int width = 30, fill = (int)(f * width + 0.5);
		char bar[40];
		for (int i = 0; i < width; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[width] = '\0';
		/* \033[K clears what a longer line before left behind */
		fprintf(stderr, "\r[%s] %3d%%  %-11s %d/%d files  %-10s %s\033[K", bar,
		        (int)(f * 100 + 0.5), left, done, n, stage, devs);
		fflush(stderr);
	} else if (f - last_plain >= 0.25 || (f >= 1 && (last_plain < 1 || done > last_done))) {
		/* at 100 % again once the last file is done: a job's fraction reaches 1 while its
		 * stems are still being written, before it counts as done */
		fprintf(stderr, "progress: %d%% (%d/%d files)%s%s\n", (int)(f * 100 + 0.5), done, n,
		        left[0] ? ", " : "", left);
		last_plain = f;
		last_done = done;
	}
}

/* The last word of a run: the exit status, and with --progress json the same message as an
 * "end" event (a front end shows it as it is). */
static int finish(int rc, const char *message)
{
	if (g_cli.json)
		sb_cli_json_end(rc, message ? message : "");
	return rc;
}

/* A usage error: said on stderr, and as the end event. */
static int usage_error(const char *message)
{
	fprintf(stderr, "stembridge: error: %s\n", message);
	return finish(2, message);
}

static int cmd_separate(int argc, char **argv)
{
	sb_cli_opts o;
	sb_cli_opts_init(&o);
	const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
	int n_inputs = 0;
	if (!inputs)
		return 1;
	/* --progress json first, so that a bad option's message goes out as JSON too */
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--progress") && !strcmp(argv[i + 1], "json"))
			g_cli.json = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const int r = sb_cli_parse_option(&o, argc, argv, &i);
		if (r < 0) {
			free(inputs);
			sb_cli_opts_free(&o);
			return finish(2, "bad option value (see stderr)");
		}
		if (r > 0)
			continue;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(inputs);
			sb_cli_opts_free(&o);
			return 0;
		} else if (!strcmp(a, "--progress")) {
			if (i + 1 >= argc || (strcmp(argv[i + 1], "json") && strcmp(argv[i + 1], "auto"))) {
				free(inputs);
				sb_cli_opts_free(&o);
				return usage_error("--progress takes json or auto");
			}
			i++;
		} else if (a[0] == '-' && a[1]) {
			char m[300];
			snprintf(m, sizeof m, "unknown option '%s' (see --help)", a);
			free(inputs);
			sb_cli_opts_free(&o);
			return usage_error(m);
		} else {
			inputs[n_inputs++] = a;
		}
	}
	if (g_cli.json)
		sb_cli_json_start(n_inputs);
	const char *out_dir = o.out_dir, *device_arg = o.device_arg;
	const int quiet = o.quiet;
	const sb_mode mode = o.mode;
	if (n_inputs == 0 || !out_dir) {
		const char *m = n_inputs == 0 ? "no input file given" : "no output folder given (-o DIR)";
		fprintf(stderr, "stembridge: error: %s\n", m);
		usage(stderr);
		free(inputs);
		sb_cli_opts_free(&o);
		return finish(2, m);
	}
	if (!sb_cli_timelines_fit(&o, n_inputs)) {
		free(inputs);
		sb_cli_opts_free(&o);
		return finish(2, "--timeline-start: one value for every input, or one for all");
	}
	g_cli.quiet = quiet;

	/* Every job asks for the devices named; the engine decides whether a file shares them or
	 * several files spread over them (engine/jobs/README.md: scheduling). */
	const char *request = device_arg ? device_arg : "auto";
	sb_engine_opts eo;
	memset(&eo, 0, sizeof eo);
	eo.mode = mode;
	eo.cpu_threads = o.threads;
	eo.batch = o.batch;
	eo.model_path = o.model_path;
	eo.log.fn = log_cli;
	eo.log.user = &g_cli;
	sb_engine *e = NULL;
	sb_status st = sb_engine_new(&eo, &e);
	if (st != SB_OK) {
		free(inputs);
		sb_cli_opts_free(&o);
		return finish(st == SB_ERR_INVALID ? 2 : 1, sb_status_str(st));
	}
	sb_device_set asked;
	if (sb_devices_resolve_set(sb_engine_devices(e), request, &asked) != SB_OK) {
		char forms[256], m[600];
		sb_devices_request_forms(forms, sizeof forms);
		snprintf(m, sizeof m, "unknown device '%s' (use %s, or several of them separated by "
		         "commas; 'stembridge devices' lists them)", request, forms);
		sb_engine_free(e);
		free(inputs);
		sb_cli_opts_free(&o);
		return usage_error(m);
	}

	sb_job_id *ids = calloc((size_t)n_inputs, sizeof *ids);
	int *ok = calloc((size_t)n_inputs, sizeof *ok);
	if (!ids || !ok) {
		sb_engine_free(e);
		free(inputs);
		free(ids);
		free(ok);
		sb_cli_opts_free(&o);
		return finish(1, "out of memory");
	}
	int failures = 0;
	char first_error[1400] = "";
	g_cli.jobs_running = 1;
	catch_stop_signals();
	sb_engine_pause(e, 1); /* the engine sees every file before it deals its devices out */
	for (int i = 0; i < n_inputs; i++) {
		sb_job_spec spec;
		sb_cli_job_spec(&o, &spec);
		spec.input_path = inputs[i];
		spec.device = request;
		spec.timeline_start = sb_cli_timeline_of(&o, i);
		st = sb_engine_submit(e, &spec, &ids[i]);
		if (st != SB_OK) {
			fprintf(stderr, "stembridge: error: %s: %s\n", inputs[i], sb_status_str(st));
			if (g_cli.json)
				sb_cli_json_failed(i, inputs[i], st, sb_status_str(st));
			if (!first_error[0])
				snprintf(first_error, sizeof first_error, "%s: %s", inputs[i],
				         sb_status_str(st));
			failures++;
		} else {
			ok[i] = 1;
		}
	}
	sb_engine_pause(e, 0);
	const int tty = !quiet && !g_cli.json && isatty(2);
	const double t0 = sb_now();
	int cancelling = 0;
	for (;;) {
		int pending = 0;
		for (int i = 0; i < n_inputs; i++)
			if (ok[i] && sb_engine_wait(e, ids[i], 0.1) == SB_ERR_TIMEOUT)
				pending++;
		if (g_signal && !cancelling) {
			cancelling = 1;
			for (int i = 0; i < n_inputs; i++)
				if (ok[i])
					sb_engine_cancel(e, ids[i]);
		}
		if (g_cli.json && !cancelling)
			sb_cli_json_progress(e, ids, ok, inputs, n_inputs, t0);
		else if (!quiet && !cancelling)
			draw_progress(e, ids, ok, n_inputs, tty, t0);
		if (!pending)
			break;
	}
	if (tty)
		fputc('\n', stderr);
	char not_written[1024] = "";
	int n_cancelled = 0, n_done = 0;
	for (int i = 0; i < n_inputs; i++) {
		if (!ok[i])
			continue;
		sb_job_result r;
		if (sb_engine_result(e, ids[i], &r) != SB_OK)
			continue;
		if (r.status == SB_ERR_CANCELLED && g_signal) {
			/* said once for all of them below */
			const size_t at = strlen(not_written);
			snprintf(not_written + at, sizeof not_written - at, "%s%s", n_cancelled ? ", " : "",
			         inputs[i]);
			n_cancelled++;
			if (g_cli.json)
				sb_cli_json_failed(i, inputs[i], r.status, "cancelled: no stems written");
		} else if (r.status != SB_OK) {
			/* the message usually names the file already; add it when it does not */
			const char *hint = r.status == SB_ERR_EXISTS ? " (use --overwrite to replace it)" : "";
			char m[1400];
			if (strstr(r.message, inputs[i]))
				snprintf(m, sizeof m, "%s%s", r.message, hint);
			else
				snprintf(m, sizeof m, "%s: %s%s", inputs[i], r.message, hint);
			fprintf(stderr, "stembridge: error: %s\n", m);
			if (g_cli.json)
				sb_cli_json_failed(i, inputs[i], r.status, m);
			if (!first_error[0])
				snprintf(first_error, sizeof first_error, "%s", m);
			failures++;
		} else {
			n_done++;
			if (g_cli.json)
				sb_cli_json_done(i, inputs[i], &r);
			else if (!quiet)
				printf("%s -> %s%s%s%s\n", inputs[i], r.manifest_path,
				       r.fallback_reason[0] ? " (ran on the CPU: " : "", r.fallback_reason,
				       r.fallback_reason[0] ? ")" : "");
		}
		sb_engine_release(e, ids[i]);
	}
	g_cli.jobs_running = 0;
	sb_engine_free(e);
	free(ids);
	free(ok);
	free(inputs);
	sb_cli_opts_free(&o);
	char m[1700];
	if (g_signal) {
		const int sig = g_signal;
		const char *how = sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
		if (n_cancelled)
			snprintf(m, sizeof m, "%s: cancelled; no stems written for %s%s", how, not_written,
			         n_cancelled < n_inputs ? " (the other files are complete)" : "");
		else
			snprintf(m, sizeof m, "%s: every file had already finished", how);
		fprintf(stderr, "stembridge: %s\n", m);
		return finish(128 + sig, m);
	}
	if (failures)
		snprintf(m, sizeof m, "%d of %d file%s failed: %s", failures, n_inputs,
		         n_inputs == 1 ? "" : "s", first_error);
	else
		snprintf(m, sizeof m, "%d file%s separated", n_done, n_done == 1 ? "" : "s");
	return finish(failures ? 1 : 0, m);
}

int main(int argc, char **argv)
{
	/* A file size limit must fail a write (EFBIG) and be reported, not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "separate"))
		return cmd_separate(argc - 1, argv + 1);
	if (!strcmp(cmd, "batch"))
		return sb_cli_batch(argc - 1, argv + 1);
	if (!strcmp(cmd, "devices") || !strcmp(cmd, "--list-devices"))
		return sb_cli_devices(argc - 1, argv + 1);
	if (!strcmp(cmd, "models"))
		return sb_cli_models(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("stembridge %s\n", VERSION);
		return 0;
	}
	fprintf(stderr, "stembridge: error: unknown command '%s' (separate, batch, devices, models)\n", cmd);
	usage(stderr);
	return 2;
}
