/* stembridge batch: a catalogue of files, one task of many (a Slurm array), restartable.
 *
 *   stembridge batch LIST -o OUT [--shard I/N] [--root DIR] [--skip-failed] [separate's options]
 *   stembridge batch --report OUT [--json]
 *
 * LIST is a text file of paths (one a line; '#' comments and blank lines skipped; '-' reads
 * standard input) or a folder walked for audio files (sorted, hidden folders and OUT left out).
 * The same list in the same order and the same N give every task the same inputs on every run:
 * task I takes inputs I, I+N, I+2N... of the list with repeats removed. In a Slurm array the
 * shard defaults to the task's place in the array (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT).
 *
 * An input's stems go to OUT/<its folder relative to the root>/<template>, the root being the
 * folder LIST names, --root, or else the folder all the list's paths have in common; the
 * manifest sits at <track>/manifest.json beside them (SB_MANIFEST_NAME).
 *
 * Restart: an input whose manifest says ok, names this input, records the size and time the file
 * still has and whose stems are all there is skipped without being read. An input whose file
 * changed since is separated again and replaces its own old stems (only those: the manifest says
 * they are its). Everything else runs; a failed input is logged and the batch goes on; the exit
 * status is 1 when one failed. Stems are committed atomically by the engine, so a task killed
 * mid-song leaves no partial stem and the next run does only what is missing.
 *
 * Devices: one engine for the task over every device it may use (--device, default auto: every
 * GPU, else the best device); each device takes the next input when it is free, so a faster
 * device does more. Under Slurm the job's GPUs are the ones the driver shows (tools/slurm/).
 *
 * Log: one JSON line per input to OUT/logs/batch-I-of-N.jsonl (appended by each run; one write
 * per line), then a summary line; `--report OUT` reads every such log and sums the latest line
 * of each input.
 *
 * This file is the command and the run loop of one task; batch.h lists the files of the rest.
 */
#include "batch.h"
#include "commands.h"
#include "options.h"

#include "stembridge.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop; /* the signal that asked to stop, 0 none */

static void on_stop(int sig)
{
	g_stop = sig;
}

static void batch_usage(FILE *f)
{
	fprintf(f,
	        "usage: stembridge batch LIST -o OUT [--shard I/N] [options]\n"
	        "       stembridge batch --report OUT [--json]\n"
	        "\n"
	        "LIST: a text file of input paths (one a line, - for standard input) or a folder\n"
	        "walked for audio files. Stems go to OUT/<the input's folder>/<track>/...; a re-run\n"
	        "skips every input whose stems are complete and whose file is unchanged.\n"
	        "\n"
	        "batch options:\n"
	        "  --shard I/N             take inputs I, I+N, I+2N... of the list (0 <= I < N);\n"
	        "                          in a Slurm array: the task's place in the array\n"
	        "  --root DIR              folders under OUT are relative to DIR (default: the LIST\n"
	        "                          folder, or the folder the list's paths have in common)\n"
	        "  --skip-failed           leave out inputs that failed before and are unchanged\n"
	        "                          (default: a re-run retries them)\n"
	        "  --report OUT            sum the logs of every task in OUT/logs and stop\n"
	        "  --json                  with --report: one JSON object\n"
	        "\n"
	        "separate's options:\n%s",
	        sb_cli_options_help);
}

/* An input in flight: submitted, queued or running. With the CPU alone, one at a time; with one
 * other device, two, logged in the list's order: one separates while the one before it writes
 * its stems or the one after it reads its input (the engine runs them side by side,
 * engine/jobs/README.md); with several, up to WINDOW in the engine's pool, which its devices
 * take from as they come free (a slow device leaves the last ones to a faster one). */
enum { WINDOW = 64 };
typedef struct {
	size_t input;      /* index in the task's inputs */
	sb_job_id id;
	double t0;
	int busy;
	int overwrite;
} slot;

static void log_quiet(void *user, sb_log_level level, const char *msg)
{
	const int *quiet = user;
	if (level == SB_LOG_WARNING && !*quiet)
		fprintf(stderr, "stembridge: warning: %s\n", msg);
}

static int mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0777) != 0 && errno != EEXIST)
			return 0;
		*s = '/';
	}
	return mkdir(p, 0777) == 0 || errno == EEXIST;
}

static int run_batch(const char *list, const sb_cli_opts *o, const char *shard_arg,
                     const char *root_arg, int skip_failed)
{
	long si, sn;
	if (!sb_batch_shard(shard_arg, &si, &sn)) {
		fprintf(stderr, "stembridge: error: %s\n",
		        shard_arg ? "--shard takes I/N with 0 <= I < N"
		                  : "the Slurm array task's place makes no shard (pass --shard I/N)");
		return 2;
	}
	if (!mkdirs(o->out_dir)) {
		fprintf(stderr, "stembridge: error: %s: %s\n", o->out_dir, strerror(errno));
		return 1;
	}
	/* OUT absolute: the manifests and the log name their files wherever they are read */
	char out_real[PATH_MAX] = "";
	if (!realpath(o->out_dir, out_real)) {
		fprintf(stderr, "stembridge: error: %s: %s\n", o->out_dir, strerror(errno));
		return 1;
	}
	sb_cli_opts ob = *o;
	ob.out_dir = out_real;
	o = &ob;

	/* the list, the same for every task */
	sb_strvec all = {0};
	char root[PATH_MAX];
	const int list_rc = sb_batch_list_load(list, root_arg, out_real, &all, root, sizeof root);
	if (list_rc)
		return list_rc;

	sb_strvec mine = {0};
	for (size_t i = (size_t)si; i < all.n; i += (size_t)sn)
		sb_strvec_push(&mine, all.v[i]);
	const size_t n_all = all.n;
	sb_strvec_free(&all);

	sb_strvec failed_before = {0};
	if (skip_failed)
		sb_batch_earlier_failures(o->out_dir, &failed_before);

	/* a model that is not there fails every input: said once, before any work */
	if (!sb_model_stems(o->model ? o->model : "auto", o->model_path)) {
		fprintf(stderr, "stembridge: error: model '%s' is not installed or cannot be read "
		        "('stembridge models' lists them and says how to install one)\n",
		        o->model ? o->model : "auto");
		sb_strvec_free(&mine);
		sb_strvec_free(&failed_before);
		return 2;
	}

	/* the log */
	sb_batch_log blog = {.fd = -1};
	char logdir[PATH_MAX], logpath[PATH_MAX + 64];
	snprintf(blog.shard, sizeof blog.shard, "%ld/%ld", si, sn);
	snprintf(logdir, sizeof logdir, "%s/logs", o->out_dir);
	snprintf(logpath, sizeof logpath, "%s/batch-%ld-of-%ld.jsonl", logdir, si, sn);
	gethostname(blog.host, sizeof blog.host - 1);
	if (mkdirs(logdir))
		blog.fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	const int fd = blog.fd;
	const char *shard = blog.shard;
	if (fd < 0) {
		fprintf(stderr, "stembridge: error: %s: %s\n", logpath, strerror(errno));
		sb_strvec_free(&mine);
		sb_strvec_free(&failed_before);
		return 1;
	}

	/* one engine, and every device of the task */
	int quiet = o->quiet;
	sb_engine_opts eo;
	memset(&eo, 0, sizeof eo);
	eo.mode = SB_MODE_PARALLEL;
	eo.cpu_threads = o->threads;
	eo.batch = o->batch;
	eo.model_path = o->model_path;
	eo.log.fn = log_quiet;
	eo.log.user = &quiet;
	sb_engine *e = NULL;
	if (sb_engine_new(&eo, &e) != SB_OK) {
		close(fd);
		sb_strvec_free(&mine);
		sb_strvec_free(&failed_before);
		return 1;
	}
	const sb_device_list *dl = sb_engine_devices(e);
	sb_device_set set;
	if (sb_devices_resolve_set(dl, o->device_arg ? o->device_arg : "auto", &set) != SB_OK ||
	    set.n == 0) {
		char forms[256];
		sb_devices_request_forms(forms, sizeof forms);
		fprintf(stderr, "stembridge: error: unknown device '%s' (use %s; 'stembridge devices' "
		        "lists them)\n", o->device_arg, forms);
		sb_engine_free(e);
		close(fd);
		sb_strvec_free(&mine);
		sb_strvec_free(&failed_before);
		return 2;
	}
	for (size_t k = 0; k < set.n; k++)
		if (set.reason[k][0] && !quiet)
			fprintf(stderr, "stembridge: warning: %s\n", set.reason[k]);
	/* submit, then wait: on several devices the engine gives each input to a free device (and
	 * the last ones the devices left idle); one device takes them one at a time */
	const char *request = o->device_arg ? o->device_arg : "auto";
	const size_t cap = set.n > 1 ? WINDOW
	                   : sb_device_get_type(sb_devices_get(dl, set.index[0])) != SB_DEV_CPU_NATIVE
	                   ? 2 : 1;

	sb_cli_catch_stop(on_stop);

	const int tty = !quiet && isatty(2);
	if (!quiet) {
		char devs[512] = "";
		for (size_t k = 0; k < set.n; k++) {
			const size_t at = strlen(devs);
			snprintf(devs + at, sizeof devs - at, "%s%s", k ? ", " : "",
			         sb_device_get_label(sb_devices_get(dl, set.index[k])));
		}
		fprintf(stderr, "stembridge batch %s: %zu of %zu inputs, on %s; log %s\n", shard,
		        mine.n, n_all, devs, logpath);
	}
	slot slots[WINDOW];
	memset(slots, 0, sizeof slots);
	sb_batch_tally t = {0};
	const double t_start = sb_now(), wall_start = sb_batch_wall_now();
	size_t next = 0, finished = 0;
	int stopping = 0;
	double last_plain = t_start;
	while (finished < mine.n) {
		/* every free place in flight takes the next input that needs work; the engine sees
		 * them all before it deals its devices out (paused from the first submit on) */
		int held = 0;
		for (size_t k = 0; k < cap && !stopping; k++) {
			while (!slots[k].busy && next < mine.n) {
				const size_t i = next++;
				const char *in = mine.v[i];
				char abs_in[PATH_MAX], rel[PATH_MAX], dir[PATH_MAX * 2], track[256];
				char mpath[PATH_MAX * 3];
				sb_manifest_input_path(in, abs_in, sizeof abs_in);
				struct stat ist;
				if (stat(in, &ist) != 0 || !S_ISREG(ist.st_mode)) {
					sb_batch_unstarted(&blog, in, abs_in, NULL, "failed",
					          errno ? strerror(errno) : "not a file", &t);
					finished++;
					continue;
				}
				sb_batch_relative_folder(in, root, rel, sizeof rel);
				snprintf(dir, sizeof dir, "%s%s%s", o->out_dir, rel[0] ? "/" : "", rel);
				/* where the job will put its manifest: the engine's own name and rule */
				char mrel[PATH_MAX];
				sb_track_name(in, track, sizeof track);
				if (sb_expand_template(SB_MANIFEST_NAME, track, "1", "manifest", NULL, "json",
				                       mrel, sizeof mrel) != SB_OK)
					mrel[0] = '\0';
				snprintf(mpath, sizeof mpath, "%s/%s", dir, mrel);
				const sb_batch_prior ps = sb_batch_prior_of(mpath, abs_in, &ist);
				if (ps == SB_PRIOR_COMPLETE) {
					sb_batch_result_line(&blog, abs_in, &ist, "skipped", 0, NULL, &t);
					finished++;
					continue;
				}
				const char *key = abs_in;
				if (failed_before.n && bsearch(&key, failed_before.v, failed_before.n,
				                               sizeof *failed_before.v, sb_strvec_cmp)) {
					sb_batch_unstarted(&blog, in, abs_in, &ist, "skipped",
					          "failed before (--skip-failed)", &t);
					finished++;
					continue;
				}
				sb_job_spec spec;
				sb_cli_job_spec(o, &spec);
				spec.input_path = in;
				spec.out_dir = dir;
				spec.track = track;
				spec.device = request;
				/* its own stems from an older file are replaced, nothing else is */
				spec.overwrite = o->overwrite || ps == SB_PRIOR_STALE;
				if (!held) {
					sb_engine_pause(e, 1);
					held = 1;
				}
				if (!mkdirs(dir) || sb_engine_submit(e, &spec, &slots[k].id) != SB_OK) {
					char why[256];
					snprintf(why, sizeof why, "not started: %s",
					         errno ? strerror(errno) : "refused");
					sb_batch_unstarted(&blog, in, abs_in, &ist, "failed", why, &t);
					finished++;
					continue;
				}
				slots[k] = (slot){i, slots[k].id, sb_now(), 1, spec.overwrite};
			}
		}
		if (held)
			sb_engine_pause(e, 0);
		/* log the inputs that ended; wait a little when none has */
		int running = 0, ended = 0;
		/* two on one device: the earlier one first, so that the log keeps the list's order */
		size_t oldest = cap;
		for (size_t k = 0; cap == 2 && k < cap; k++)
			if (slots[k].busy && (oldest == cap || slots[k].input < slots[oldest].input))
				oldest = k;
		for (size_t k = 0; k < cap; k++) {
			if (!slots[k].busy)
				continue;
			running++;
			if ((cap == 2 && k != oldest) ||
			    sb_engine_wait(e, slots[k].id, cap <= 2 ? 0.05 : 0) != SB_OK)
				continue;
			ended++;
			sb_job_progress jp;
			const double secs = sb_engine_progress(e, slots[k].id, &jp) == SB_OK &&
			                    jp.elapsed_s > 0 ? jp.elapsed_s : sb_now() - slots[k].t0;
			sb_job_result r;
			sb_engine_result(e, slots[k].id, &r);
			const char *in = mine.v[slots[k].input];
			char abs_in[PATH_MAX];
			sb_manifest_input_path(in, abs_in, sizeof abs_in);
			struct stat ist;
			const int have = stat(in, &ist) == 0;
			const char *status = r.status == SB_OK ? "done"
			                   : r.status == SB_ERR_CANCELLED && g_stop ? "cancelled" : "failed";
			if (r.status != SB_OK && !(r.status == SB_ERR_CANCELLED && g_stop)) {
				const char *hint = r.status == SB_ERR_EXISTS
				                   ? " (use --overwrite to replace it)" : "";
				if (strstr(r.message, in))
					fprintf(stderr, "stembridge: error: %s%s\n", r.message, hint);
				else
					fprintf(stderr, "stembridge: error: %s: %s%s\n", in, r.message, hint);
			}
			sb_batch_result_line(&blog, abs_in, have ? &ist : NULL, status, secs, &r, &t);
			sb_engine_release(e, slots[k].id); /* and the result's strings with it */
			slots[k].busy = 0;
			finished++;
			running--;
		}
		if (g_stop && !stopping) {
			stopping = 1;
			for (size_t k = 0; k < cap; k++)
				if (slots[k].busy)
					sb_engine_cancel(e, slots[k].id);
		}
		if (stopping && !running)
			break;
		if (cap > 2 && running && !ended)
			usleep(20000);
		if (!quiet) {
			const double el = sb_now() - t_start;
			const size_t worked = (size_t)(t.done + t.failed);
			const size_t left = mine.n - finished;
			double eta = worked > 0 && el > 1 ? el / (double)worked * (double)left : -1;
			char lt[32] = "";
			if (eta >= 0 && left) {
				char c[24];
				sb_cli_clock(eta, c, sizeof c);
				snprintf(lt, sizeof lt, "%s left", c);
			}
			if (tty) {
				const double f = mine.n ? (double)finished / (double)mine.n : 1;
				int width = 30, fill = (int)(f * width + 0.5);
				char bar[40];
				for (int b = 0; b < width; b++)
					bar[b] = b < fill ? '#' : '.';
				bar[width] = '\0';
				fprintf(stderr, "\r[%s] %zu/%zu  %ld done  %ld skipped  %ld failed  %s\033[K",
				        bar, finished, mine.n, t.done, t.skipped, t.failed, lt);
				fflush(stderr);
			} else if (sb_now() - last_plain >= 30) {
				fprintf(stderr, "progress: %zu/%zu inputs (%ld done, %ld skipped, %ld failed)"
				        "%s%s\n", finished, mine.n, t.done, t.skipped, t.failed,
				        lt[0] ? ", " : "", lt);
				last_plain = sb_now();
			}
		}
	}
	if (tty)
		fputc('\n', stderr);

	/* the summary: a JSON line, and a line for a person */
	const double wall = sb_now() - t_start;
	const long not_started = (long)(mine.n - finished);
	sb_batch_summary_line(&blog, dl, &set, mine.n, not_started, &t, wall_start, wall, g_stop);
	sb_engine_free(e);
	fsync(fd);
	close(fd);
	if (!quiet || t.failed)
		printf("batch %s: %ld done, %ld skipped, %ld failed%s; %.3f audio hours in %.1f s "
		       "(%.0f songs/hour); log %s\n",
		       shard, t.done, t.skipped, t.failed,
		       g_stop ? ", stopped" : "", t.audio_s / 3600, wall,
		       wall > 0 ? t.done * 3600.0 / wall : 0, logpath);
	fflush(stdout);
	sb_strvec_free(&mine);
	sb_strvec_free(&failed_before);
	if (g_stop)
		return 128 + g_stop;
	return t.failed ? 1 : 0;
}

int sb_cli_batch(int argc, char **argv)
{
	sb_cli_opts o;
	sb_cli_opts_init(&o);
	const char *list = NULL, *shard = NULL, *root = NULL, *report_dir = NULL;
	int skip_failed = 0, as_json = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--shard") || !strcmp(a, "--root") || !strcmp(a, "--report")) {
			if (!v) {
				fprintf(stderr, "stembridge: error: %s needs a value\n", a);
				return 2;
			}
			i++;
			if (!strcmp(a, "--shard"))
				shard = v;
			else if (!strcmp(a, "--root"))
				root = v;
			else
				report_dir = v;
			continue;
		}
		if (!strcmp(a, "--skip-failed")) {
			skip_failed = 1;
			continue;
		}
		if (!strcmp(a, "--retry-failed")) {
			skip_failed = 0;
			continue;
		}
		if (!strcmp(a, "--json")) {
			as_json = 1;
			continue;
		}
		if (!strcmp(a, "--timeline-start") || !strcmp(a, "--sequential") ||
		    !strcmp(a, "--parallel")) {
			fprintf(stderr, "stembridge: error: %s is not a batch option\n", a);
			return 2;
		}
		const int r = sb_cli_parse_option(&o, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			batch_usage(stdout);
			return 0;
		}
		if (a[0] == '-' && a[1]) {
			fprintf(stderr, "stembridge: error: unknown option '%s' (see batch --help)\n", a);
			return 2;
		}
		if (list) {
			fprintf(stderr, "stembridge: error: one LIST (a file of paths or a folder), "
			        "not '%s' too\n", a);
			return 2;
		}
		list = a;
	}
	if (report_dir)
		return sb_batch_report(report_dir, as_json);
	if (!list || !o.out_dir) {
		fprintf(stderr, "stembridge: error: %s\n",
		        !list ? "no LIST given (a file of paths, - or a folder)"
		              : "no output folder given (-o OUT)");
		batch_usage(stderr);
		return 2;
	}
	return run_batch(list, &o, shard, root, skip_failed);
}
