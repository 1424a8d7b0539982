/* stembridge: the command-line face of the engine.
 *
 *   stembridge separate IN... -o DIR [--device auto|all|cpu|opencl:N[,opencl:M...]] [--model NAME]
 *                      [--stems vocals,drums,bass,other] [--format wav|flac] [--bits 16|24|32]
 *                      [--parallel|--sequential] [--overwrite] [--template T] [--quiet]
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
 * it left (core/temp_file.h).
 */
#include "commands.h"

#include "io/audio_file.h"
#include "backend/device.h"
#include "io/stem_writer.h"
#include "jobs/engine.h"

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
	        "       stembridge devices [--json]     list the devices (also --list-devices)\n"
	        "       stembridge models [--json]       the models, installed or not, and 'auto'\n"
	        "       stembridge models install NAME  download, check and install a model\n"
	        "       stembridge models remove NAME   remove an installed model\n"
	        "\n"
	        "separate options:\n"
	        "  -o, --output DIR        where the stems go (required)\n"
	        "  --device D              auto (default: the best device; every GPU when there are\n"
	        "                          several), all (every GPU and the CPU), cpu, opencl:N, or a\n"
	        "                          comma list of them. One file is shared among the devices\n"
	        "                          segment by segment; several files spread over them\n"
	        "                          (--parallel) or each take them all in turn (--sequential)\n"
	        "  --batch N               segments per forward pass on each device (default: the\n"
	        "                          device's; more is faster where memory allows)\n"
	        "  --model NAME            auto (default: the best installed model, htdemucs first, else\n"
	        "                          builtin), builtin, htdemucs, htdemucs_ft, htdemucs_6s, any\n"
	        "                          model 'stembridge models' lists, or a .safetensors file\n"
	        "  --model-other           keep the model's own \"other\" (default: other = input minus\n"
	        "                          the other stems written, so they add back to the input)\n"
	        "  --shifts N              Demucs: average N random time shifts (slower, a little\n"
	        "                          better; seeded, so runs repeat)\n"
	        "  --overlap F             Demucs: segment overlap, above 0 up to 0.9 (default 0.25)\n"
	        "  --stems LIST            which of the model's stems to write (default: all of them):\n"
	        "                          vocals,drums,bass,other, and guitar,piano with htdemucs_6s;\n"
	        "                          stems left out fold into other (vocals,other = karaoke)\n"
	        "  --format wav|flac       file format (default wav)\n"
	        "  --bits 16|24|32         sample format: wav 16, 24 or 32 (float, default); flac 24\n"
	        "  --parallel              files run at once, one per device of the set (default)\n"
	        "  --sequential            files run one after another on one device\n"
	        "  --template T            file names, default {track}/{stem}.{ext}; fields\n"
	        "                          {track} {take} {stem} {model} {ext}\n"
	        "  --timeline-start N      the region's position in samples, for the manifest\n"
	        "  --overwrite             replace stems that exist (default: refuse)\n"
	        "  --threads N             CPU threads per job (default: all cores)\n"
	        "  --model-path DIR        another folder to look for models in\n"
	        "  -q, --quiet             no progress, warnings or summary; errors only\n");
}

typedef struct {
	int quiet;
	int jobs_running;
} cli_state;

static cli_state g_cli;
static volatile sig_atomic_t g_signal; /* the signal that asked to stop, 0 none */

static void on_stop_signal(int sig)
{
	g_signal = sig;
}

/* SIGINT and SIGTERM set g_signal once; SA_RESETHAND lets a second one end the process. */
static void catch_stop_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
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
}

static int parse_stems(const char *s, unsigned *mask)
{
	*mask = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const int k = sb_stem_index(t);
		if (k < 0) {
			fprintf(stderr, "stembridge: error: unknown stem '%s' (stems: vocals, drums, bass, "
			        "other, guitar, piano; a model makes some of them)\n", t);
			return 0;
		}
		*mask |= 1u << k;
	}
	return *mask != 0;
}

static void clock_text(double s, char *out, size_t len)
{
	const long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(out, len, "%ld:%02ld", t / 60, t % 60);
}

/* Progress on stderr: on a terminal one line redrawn (a bar, percent, time left, files, and each
 * device's segments when a file is shared), else a plain line at each quarter. Time left: the
 * job's own estimate for one file (from its segment rate), the overall rate for several. */
static void draw_progress(sb_engine *e, const sb_job_id *ids, const int *ok, int n, int tty,
                          double t0)
{
	static double last_plain = 0; /* the first plain line comes at 25 %, never a bare 0 % */
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
		clock_text(eta, c, sizeof c);
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
	} else if (f - last_plain >= 0.25 || (f >= 1 && last_plain < 1)) {
		fprintf(stderr, "progress: %d%% (%d/%d files)%s%s\n", (int)(f * 100 + 0.5), done, n,
		        left[0] ? ", " : "", left);
		last_plain = f;
	}
}

static int cmd_separate(int argc, char **argv)
{
	const char *out_dir = NULL, *model = NULL, *tmpl = NULL;
	const char *device_arg = NULL;
	const char *model_path[8] = {0};
	int n_model_path = 0;
	unsigned stems = 0;
	int flac = 0, bits = 32, overwrite = 0, threads = 0, quiet = 0, shifts = 0, model_other = 0;
	int batch = 0;
	double overlap = 0;
	long long timeline_start = -1;
	sb_mode mode = SB_MODE_PARALLEL;
	const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
	int n_inputs = 0;
	if (!inputs)
		return 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE                                                                           \
	do {                                                                                     \
		if (!v) {                                                                            \
			fprintf(stderr, "stembridge: error: %s needs a value\n", a);                     \
			free(inputs);                                                                    \
			return 2;                                                                        \
		}                                                                                    \
		i++;                                                                                 \
	} while (0)
		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			NEED_VALUE;
			out_dir = v;
		} else if (!strcmp(a, "--device")) {
			NEED_VALUE;
			device_arg = v;
		} else if (!strcmp(a, "--model")) {
			NEED_VALUE;
			model = v;
		} else if (!strcmp(a, "--stems")) {
			NEED_VALUE;
			if (!parse_stems(v, &stems)) {
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--format")) {
			NEED_VALUE;
			if (!strcmp(v, "flac"))
				flac = 1;
			else if (strcmp(v, "wav")) {
				fprintf(stderr, "stembridge: error: unknown format '%s' (wav, flac)\n", v);
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--bits")) {
			NEED_VALUE;
			bits = atoi(v);
			if (bits != 16 && bits != 24 && bits != 32) {
				fprintf(stderr, "stembridge: error: --bits takes 16, 24 or 32\n");
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--template")) {
			NEED_VALUE;
			tmpl = v;
		} else if (!strcmp(a, "--timeline-start")) {
			NEED_VALUE;
			char *end = NULL;
			timeline_start = strtoll(v, &end, 10);
			if (!end || *end || timeline_start < 0) {
				fprintf(stderr, "stembridge: error: --timeline-start takes a sample count\n");
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--shifts")) {
			NEED_VALUE;
			char *end = NULL;
			long n = strtol(v, &end, 10);
			if (!end || *end || n < 0 || n > 32) {
				fprintf(stderr, "stembridge: error: --shifts takes 0 to 32\n");
				free(inputs);
				return 2;
			}
			shifts = (int)n;
		} else if (!strcmp(a, "--overlap")) {
			NEED_VALUE;
			char *end = NULL;
			overlap = strtod(v, &end);
			if (!end || *end || !(overlap > 0 && overlap <= 0.9)) {
				fprintf(stderr, "stembridge: error: --overlap takes more than 0, up to 0.9\n");
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--batch")) {
			NEED_VALUE;
			char *end = NULL;
			long b = strtol(v, &end, 10);
			if (!end || *end || b < 1 || b > 64) {
				fprintf(stderr, "stembridge: error: --batch takes 1 to 64\n");
				free(inputs);
				return 2;
			}
			batch = (int)b;
		} else if (!strcmp(a, "--threads")) {
			NEED_VALUE;
			threads = atoi(v);
		} else if (!strcmp(a, "--model-path")) {
			NEED_VALUE;
			if (n_model_path < 7)
				model_path[n_model_path++] = v;
		} else if (!strcmp(a, "--parallel")) {
			mode = SB_MODE_PARALLEL;
		} else if (!strcmp(a, "--sequential")) {
			mode = SB_MODE_SEQUENTIAL;
		} else if (!strcmp(a, "--model-other")) {
			model_other = 1;
		} else if (!strcmp(a, "--overwrite")) {
			overwrite = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = 1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(inputs);
			return 0;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "stembridge: error: unknown option '%s' (see --help)\n", a);
			free(inputs);
			return 2;
		} else {
			inputs[n_inputs++] = a;
		}
#undef NEED_VALUE
	}
	if (n_inputs == 0 || !out_dir) {
		fprintf(stderr, "stembridge: error: %s\n",
		        n_inputs == 0 ? "no input file given" : "no output folder given (-o DIR)");
		usage(stderr);
		free(inputs);
		return 2;
	}
	g_cli.quiet = quiet;

	/* The devices: one name is each job's own device (so a fallback is recorded per job).
	 * Several are shared by one file (segment by segment), taken in turn by each file in
	 * sequential mode, and the set parallel mode spreads several files over. */
	char devbuf[1024];
	const char *devs[16];
	size_t n_devs = 0;
	snprintf(devbuf, sizeof devbuf, "%s", device_arg ? device_arg : "auto");
	char *save = NULL;
	for (char *t = strtok_r(devbuf, ",", &save); t && n_devs < 16; t = strtok_r(NULL, ",", &save))
		devs[n_devs++] = t;
	if (n_devs == 0) {
		fprintf(stderr, "stembridge: error: --device names no device\n");
		free(inputs);
		return 2;
	}
	/* one file, or files in turn: each job gets the whole request; several files at once:
	 * spread over the set (auto: every GPU, else the best device), or all on the one device
	 * named (its fallback recorded per job) */
	const int shared = n_inputs == 1 || mode == SB_MODE_SEQUENTIAL;
	const int spread = !shared && (n_devs > 1 || !strcmp(devs[0], "all") ||
	                               !strcmp(devs[0], "auto"));
	sb_engine_opts eo;
	memset(&eo, 0, sizeof eo);
	eo.mode = mode;
	eo.devices = spread && strcmp(devs[0], "auto") ? devs : NULL;
	eo.n_devices = eo.devices ? n_devs : 0;
	eo.cpu_threads = threads;
	eo.batch = batch;
	eo.model_path = model_path;
	eo.log.fn = log_cli;
	eo.log.user = &g_cli;
	sb_engine *e = NULL;
	sb_status st = sb_engine_new(&eo, &e);
	if (st != SB_OK) {
		free(inputs);
		return st == SB_ERR_INVALID ? 2 : 1;
	}
	const sb_device_list *dl = sb_engine_devices(e);
	for (size_t i = 0; i < n_devs; i++) {
		sb_device_resolution r;
		if ((n_devs > 1 || strcmp(devs[i], "all") != 0) &&
		    sb_devices_resolve(dl, devs[i], &r) != SB_OK) {
			fprintf(stderr,
			        "stembridge: error: unknown device '%s' (use auto, all, cpu or opencl:N; "
			        "'stembridge devices' lists them)\n",
			        devs[i]);
			sb_engine_free(e);
			free(inputs);
			return 2;
		}
	}

	sb_format fmt = flac ? SB_FORMAT_FLAC
	              : bits == 16 ? SB_FORMAT_WAV16 : bits == 24 ? SB_FORMAT_WAV24 : SB_FORMAT_WAVF32;
	sb_job_id *ids = calloc((size_t)n_inputs, sizeof *ids);
	int *ok = calloc((size_t)n_inputs, sizeof *ok);
	if (!ids || !ok) {
		sb_engine_free(e);
		free(inputs);
		free(ids);
		free(ok);
		return 1;
	}
	int failures = 0;
	g_cli.jobs_running = 1;
	catch_stop_signals();
	for (int i = 0; i < n_inputs; i++) {
		sb_job_spec spec;
		memset(&spec, 0, sizeof spec);
		spec.input_path = inputs[i];
		spec.device = shared ? (device_arg ? device_arg : "auto") : spread ? NULL : devs[0];
		spec.model = model;
		spec.stems = stems;
		spec.out_dir = out_dir;
		spec.name_template = tmpl;
		spec.format = fmt;
		spec.overwrite = overwrite;
		spec.timeline_start = timeline_start;
		spec.shifts = shifts;
		spec.keep_model_other = model_other;
		spec.overlap = overlap;
		st = sb_engine_submit(e, &spec, &ids[i]);
		if (st != SB_OK) {
			fprintf(stderr, "stembridge: error: %s: %s\n", inputs[i], sb_status_str(st));
			failures++;
		} else {
			ok[i] = 1;
		}
	}
	const int tty = !quiet && isatty(2);
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
		if (!quiet && !cancelling)
			draw_progress(e, ids, ok, n_inputs, tty, t0);
		if (!pending)
			break;
	}
	if (tty)
		fputc('\n', stderr);
	char not_written[1024] = "";
	int n_cancelled = 0;
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
		} else if (r.status != SB_OK) {
			/* the message usually names the file already; add it when it does not */
			const char *hint = r.status == SB_ERR_EXISTS ? " (use --overwrite to replace it)" : "";
			if (strstr(r.message, inputs[i]))
				fprintf(stderr, "stembridge: error: %s%s\n", r.message, hint);
			else
				fprintf(stderr, "stembridge: error: %s: %s%s\n", inputs[i], r.message, hint);
			failures++;
		} else if (!quiet) {
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
	if (g_signal) {
		const int sig = g_signal;
		if (n_cancelled)
			fprintf(stderr, "stembridge: %s: cancelled; no stems written for %s%s\n",
			        sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", not_written,
			        n_cancelled < n_inputs ? " (the other files are complete)" : "");
		else
			fprintf(stderr, "stembridge: %s: every file had already finished\n",
			        sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)");
		return 128 + sig;
	}
	return failures ? 1 : 0;
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
	fprintf(stderr, "stembridge: error: unknown command '%s' (separate, devices, models)\n", cmd);
	usage(stderr);
	return 2;
}
