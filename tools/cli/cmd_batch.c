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
 * manifest sits at <track>/manifest.json beside them (jobs/engine.h).
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
 */
#include "commands.h"
#include "options.h"

#include "backend/device.h"
#include "io/manifest.h"
#include "io/stem_writer.h"
#include "models/model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
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

/* ---- the list ---------------------------------------------------------------------------- */

typedef struct {
	char **v;
	size_t n, cap;
} strvec;

static int strvec_push(strvec *s, const char *p)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		char **v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return 0;
		s->v = v;
		s->cap = cap;
	}
	if (!(s->v[s->n] = strdup(p)))
		return 0;
	s->n++;
	return 1;
}

static void strvec_free(strvec *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_audio_name(const char *name)
{
	static const char *const ext[] = {"wav", "flac", "ogg", "oga", "opus", "mp3", "aif", "aiff",
	                                  "aifc", "w64", "caf", "rf64"};
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		return 0;
	for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
		if (!strcasecmp(dot + 1, ext[i]))
			return 1;
	return 0;
}

/* Audio files under dir, depth first; hidden entries and the folder 'skip' (OUT) left out. */
static int walk(const char *dir, const char *skip_real, strvec *out, int depth)
{
	if (depth > 64)
		return 1;
	char real[PATH_MAX];
	if (skip_real[0] && realpath(dir, real) && !strcmp(real, skip_real))
		return 1;
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "stembridge: error: %s: %s\n", dir, strerror(errno));
		return 0;
	}
	int ok = 1;
	struct dirent *de;
	while (ok && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[PATH_MAX];
		if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
			continue;
		struct stat st;
		if (stat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			ok = walk(p, skip_real, out, depth + 1);
		else if (S_ISREG(st.st_mode) && is_audio_name(de->d_name))
			ok = strvec_push(out, p);
	}
	closedir(d);
	return ok;
}

static int read_list(FILE *f, strvec *out)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ok = 1;
	while (ok && (n = getline(&line, &cap, f)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		ok = strvec_push(out, line);
	}
	free(line);
	return ok;
}

/* Removes repeats, keeping each path's first place (so the order, and the shards, stay). */
static void drop_repeats(strvec *s)
{
	char **sorted = malloc(s->n * sizeof *sorted);
	if (!sorted || !s->n) {
		free(sorted);
		return;
	}
	memcpy(sorted, s->v, s->n * sizeof *sorted);
	qsort(sorted, s->n, sizeof *sorted, cmp_str);
	char *seen = calloc(s->n, 1); /* seen[k]: sorted[k]'s path kept once already */
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		char **hit = bsearch(&s->v[i], sorted, s->n, sizeof *sorted, cmp_str);
		/* the first of equal strings in sorted order */
		while (hit > sorted && !strcmp(hit[-1], s->v[i]))
			hit--;
		const size_t k = (size_t)(hit - sorted);
		if (seen && seen[k]) {
			free(s->v[i]);
			continue;
		}
		if (seen)
			seen[k] = 1;
		s->v[w++] = s->v[i];
	}
	s->n = w;
	free(seen);
	free(sorted);
}

/* The folder every path of the list has in common (absolute, no trailing '/'). */
static void common_folder(const strvec *s, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		char a[PATH_MAX];
		sb_manifest_input_path(s->v[i], a, sizeof a);
		char *slash = strrchr(a, '/');
		if (slash)
			*slash = '\0';
		if (i == 0) {
			snprintf(out, len, "%s", a);
			continue;
		}
		size_t k = 0;
		while (out[k] && out[k] == a[k])
			k++;
		/* back to a whole folder name */
		if (!(out[k] == '\0' && (a[k] == '/' || a[k] == '\0')))
			while (k > 0 && out[k] != '/')
				k--;
		out[k] = '\0';
	}
}

/* OUT's sub-folder for an input: its folder relative to root ("" for root itself); a path
 * outside root keeps its whole folder, without the leading '/'. ".." never appears. */
static void relative_folder(const char *input, const char *root, char *out, size_t len)
{
	char a[PATH_MAX];
	sb_manifest_input_path(input, a, sizeof a);
	char *slash = strrchr(a, '/');
	if (slash)
		*slash = '\0';
	const size_t rl = strlen(root);
	const char *rel = a;
	if (rl && !strncmp(a, root, rl) && (a[rl] == '/' || a[rl] == '\0'))
		rel = a + rl;
	while (*rel == '/')
		rel++;
	snprintf(out, len, "%s", rel);
	/* "a/../b" and "./" parts of a written path must not climb out of OUT */
	for (char *p = out; (p = strstr(p, "..")); p += 2)
		if ((p == out || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			p[0] = p[1] = '_';
}

/* ---- restart ----------------------------------------------------------------------------- */

typedef enum { PRIOR_NONE, PRIOR_COMPLETE, PRIOR_STALE, PRIOR_OTHER } prior_state;

/* What the manifest at mpath says of this input: complete (skip it), stale (its own stems from
 * an older file: replace them), other (not its manifest, or broken: leave it to the engine,
 * which refuses to overwrite), none. */
static prior_state prior(const char *mpath, const char *abs_input, const struct stat *in_st)
{
	json_error_t je;
	json_t *m = json_load_file(mpath, 0, &je);
	if (!m)
		return access(mpath, F_OK) == 0 ? PRIOR_OTHER : PRIOR_NONE;
	prior_state r = PRIOR_OTHER;
	const json_t *in = json_object_get(m, "input");
	const char *path = json_string_value(json_object_get(in, "path"));
	const char *status = json_string_value(json_object_get(m, "status"));
	const json_t *stems = json_object_get(m, "stems");
	if (path && !strcmp(path, abs_input) && status && !strcmp(status, "ok") &&
	    json_is_array(stems) && json_array_size(stems) > 0) {
		const json_t *size = json_object_get(in, "size"), *mt = json_object_get(in, "mtime_ns");
		const long long want_mt = (long long)in_st->st_mtim.tv_sec * 1000000000LL +
		                          in_st->st_mtim.tv_nsec;
		int same = json_is_integer(size) && json_is_integer(mt) &&
		           json_integer_value(size) == (long long)in_st->st_size &&
		           json_integer_value(mt) == want_mt;
		int all_there = 1;
		size_t k;
		const json_t *s;
		json_array_foreach(stems, k, s) {
			const char *p = json_string_value(json_object_get(s, "path"));
			struct stat sst;
			if (!p || stat(p, &sst) != 0 || !S_ISREG(sst.st_mode))
				all_there = 0;
		}
		r = same && all_there ? PRIOR_COMPLETE : PRIOR_STALE;
	}
	json_decref(m);
	return r;
}

/* ---- the log ----------------------------------------------------------------------------- */

static void iso_time(double t, char *out, size_t len)
{
	time_t s = (time_t)t;
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
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
	const char *job = getenv("SLURM_ARRAY_JOB_ID");
	if (!job)
		job = getenv("SLURM_JOB_ID");
	if (job)
		json_object_set_new(o, "slurm_job", json_string(job));
	const char *task = getenv("SLURM_ARRAY_TASK_ID");
	if (task)
		json_object_set_new(o, "slurm_task", json_string(task));
}

/* ---- one task ---------------------------------------------------------------------------- */

typedef struct {
	size_t input;      /* index in the task's inputs */
	sb_job_id id;
	double t0;
	int busy;
	int overwrite;
} slot;

typedef struct {
	long done, skipped, failed, cancelled;
	double audio_s, sep_s;
} tally;

static void result_line(int fd, const char *shard, const char *host, const char *abs_in,
                        const struct stat *in_st, const char *status, double seconds,
                        const sb_job_result *r, tally *t)
{
	json_t *o = json_object();
	char when[32];
	iso_time(wall_now(), when, sizeof when);
	json_object_set_new(o, "time", json_string(when));
	json_object_set_new(o, "path", json_string(abs_in));
	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "shard", json_string(shard));
	json_object_set_new(o, "host", json_string(host));
	slurm_fields(o);
	if (in_st) {
		json_object_set_new(o, "size", json_integer((long long)in_st->st_size));
		json_object_set_new(o, "mtime_ns",
		                    json_integer((long long)in_st->st_mtim.tv_sec * 1000000000LL +
		                                 in_st->st_mtim.tv_nsec));
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
	log_line(fd, o);
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

/* The line of an input that never became a job: failed before it started, or skipped for a
 * reason (its error field). A failure is said on stderr too. */
static void unstarted(int fd, const char *shard, const char *host, const char *in,
                      const char *abs_in, const struct stat *in_st, const char *status,
                      const char *why, tally *t)
{
	sb_job_result r;
	memset(&r, 0, sizeof r);
	r.status = strcmp(status, "failed") ? SB_OK : SB_ERR_IO;
	snprintf(r.message, sizeof r.message, "%s", why);
	if (r.status != SB_OK)
		fprintf(stderr, "stembridge: error: %s: %s\n", in, why);
	result_line(fd, shard, host, abs_in, in_st, status, 0, &r, t);
}

/* Shard from --shard, else the Slurm array task, else 0/1. 0 when it makes no sense. */
static int shard_of(const char *arg, long *idx, long *count)
{
	if (arg) {
		char *e1 = NULL, *e2 = NULL;
		*idx = strtol(arg, &e1, 10);
		if (!e1 || *e1 != '/')
			return 0;
		*count = strtol(e1 + 1, &e2, 10);
		return e2 && !*e2 && *count >= 1 && *idx >= 0 && *idx < *count;
	}
	const char *id = getenv("SLURM_ARRAY_TASK_ID"), *mn = getenv("SLURM_ARRAY_TASK_MIN"),
	           *cnt = getenv("SLURM_ARRAY_TASK_COUNT"), *step = getenv("SLURM_ARRAY_TASK_STEP");
	if (id && mn && cnt) {
		const long s = step && atol(step) > 0 ? atol(step) : 1;
		*idx = (atol(id) - atol(mn)) / s;
		*count = atol(cnt);
		return *count >= 1 && *idx >= 0 && *idx < *count;
	}
	*idx = 0;
	*count = 1;
	return 1;
}

/* Calls fn on every line of every task's log in OUT/logs (NULL for a line that is not JSON: a
 * task killed in the middle of a write). Returns the logs read, -1 when there is no log folder
 * (errno says why). */
static long each_log_line(const char *out_dir, void (*fn)(void *user, json_t *line), void *user)
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

static void collect_failure(void *user, json_t *o)
{
	strvec *failed = user;
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *status = json_string_value(json_object_get(o, "status"));
	struct stat st;
	if (path && status && !strcmp(status, "failed") && stat(path, &st) == 0 &&
	    json_integer_value(json_object_get(o, "size")) == (long long)st.st_size &&
	    json_integer_value(json_object_get(o, "mtime_ns")) ==
	        (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec)
		strvec_push(failed, path);
}

/* The paths that failed in an earlier run with the file as it is now (--skip-failed). */
static void earlier_failures(const char *out_dir, strvec *failed)
{
	each_log_line(out_dir, collect_failure, failed);
	qsort(failed->v, failed->n, sizeof *failed->v, cmp_str);
}

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
	if (!shard_of(shard_arg, &si, &sn)) {
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
	strvec all = {0};
	char root[PATH_MAX] = "";
	struct stat lst;
	int ok;
	if (!strcmp(list, "-")) {
		ok = read_list(stdin, &all);
	} else if (stat(list, &lst) == 0 && S_ISDIR(lst.st_mode)) {
		ok = walk(list, out_real, &all, 0);
		qsort(all.v, all.n, sizeof *all.v, cmp_str);
		sb_manifest_input_path(list, root, sizeof root);
	} else {
		FILE *f = fopen(list, "r");
		if (!f) {
			fprintf(stderr, "stembridge: error: %s: %s\n", list, strerror(errno));
			return 2;
		}
		ok = read_list(f, &all);
		fclose(f);
	}
	if (!ok) {
		strvec_free(&all);
		return 1;
	}
	drop_repeats(&all);
	if (all.n == 0) {
		fprintf(stderr, "stembridge: error: %s names no input%s\n", list,
		        strcmp(list, "-") && stat(list, &lst) == 0 && S_ISDIR(lst.st_mode)
		            ? " (no audio file: .wav .flac .ogg .opus .mp3 .aiff .w64 .caf)" : "");
		strvec_free(&all);
		return 2;
	}
	if (root_arg)
		sb_manifest_input_path(root_arg, root, sizeof root);
	else if (!root[0])
		common_folder(&all, root, sizeof root);
	for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--)
		root[l - 1] = '\0';

	strvec mine = {0};
	for (size_t i = (size_t)si; i < all.n; i += (size_t)sn)
		strvec_push(&mine, all.v[i]);
	const size_t n_all = all.n;
	strvec_free(&all);

	strvec failed_before = {0};
	if (skip_failed)
		earlier_failures(o->out_dir, &failed_before);

	/* a model that is not there fails every input: said once, before any work */
	if (!sb_model_stems(o->model ? o->model : "auto", o->model_path)) {
		fprintf(stderr, "stembridge: error: model '%s' is not installed or cannot be read "
		        "('stembridge models' lists them and says how to install one)\n",
		        o->model ? o->model : "auto");
		strvec_free(&mine);
		strvec_free(&failed_before);
		return 2;
	}

	/* the log */
	char shard[64], logdir[PATH_MAX], logpath[PATH_MAX + 64], host[256] = "";
	snprintf(shard, sizeof shard, "%ld/%ld", si, sn);
	snprintf(logdir, sizeof logdir, "%s/logs", o->out_dir);
	snprintf(logpath, sizeof logpath, "%s/batch-%ld-of-%ld.jsonl", logdir, si, sn);
	gethostname(host, sizeof host - 1);
	int fd = -1;
	if (mkdirs(logdir))
		fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	if (fd < 0) {
		fprintf(stderr, "stembridge: error: %s: %s\n", logpath, strerror(errno));
		strvec_free(&mine);
		strvec_free(&failed_before);
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
		strvec_free(&mine);
		strvec_free(&failed_before);
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
		strvec_free(&mine);
		strvec_free(&failed_before);
		return 2;
	}
	for (size_t k = 0; k < set.n; k++)
		if (set.reason[k][0] && !quiet)
			fprintf(stderr, "stembridge: warning: %s\n", set.reason[k]);

	sb_cli_catch_stop(on_stop);

	const int tty = !quiet && isatty(2);
	if (!quiet) {
		char devs[512] = "";
		for (size_t k = 0; k < set.n; k++) {
			const size_t at = strlen(devs);
			snprintf(devs + at, sizeof devs - at, "%s%s", k ? ", " : "",
			         sb_devices_get(dl, set.index[k])->label);
		}
		fprintf(stderr, "stembridge batch %s: %zu of %zu inputs, on %s; log %s\n", shard,
		        mine.n, n_all, devs, logpath);
	}
	slot slots[SB_MAX_SET];
	memset(slots, 0, sizeof slots);
	tally t = {0};
	const double t_start = sb_now(), wall_start = wall_now();
	size_t next = 0, finished = 0;
	int stopping = 0;
	double last_plain = t_start;
	while (finished < mine.n) {
		/* every free device takes the next input that needs work */
		for (size_t k = 0; k < set.n && !stopping; k++) {
			while (!slots[k].busy && next < mine.n) {
				const size_t i = next++;
				const char *in = mine.v[i];
				char abs_in[PATH_MAX], rel[PATH_MAX], dir[PATH_MAX * 2], track[256];
				char mpath[PATH_MAX * 3];
				sb_manifest_input_path(in, abs_in, sizeof abs_in);
				struct stat ist;
				if (stat(in, &ist) != 0 || !S_ISREG(ist.st_mode)) {
					unstarted(fd, shard, host, in, abs_in, NULL, "failed",
					          errno ? strerror(errno) : "not a file", &t);
					finished++;
					continue;
				}
				relative_folder(in, root, rel, sizeof rel);
				snprintf(dir, sizeof dir, "%s%s%s", o->out_dir, rel[0] ? "/" : "", rel);
				/* where the job will put its manifest: the engine's own name and rule */
				char mrel[PATH_MAX];
				sb_track_name(in, track, sizeof track);
				if (sb_expand_template(SB_MANIFEST_NAME, track, "1", "manifest", NULL, "json",
				                       mrel, sizeof mrel) != SB_OK)
					mrel[0] = '\0';
				snprintf(mpath, sizeof mpath, "%s/%s", dir, mrel);
				const prior_state ps = prior(mpath, abs_in, &ist);
				if (ps == PRIOR_COMPLETE) {
					result_line(fd, shard, host, abs_in, &ist, "skipped", 0, NULL, &t);
					finished++;
					continue;
				}
				const char *key = abs_in;
				if (failed_before.n && bsearch(&key, failed_before.v, failed_before.n,
				                               sizeof *failed_before.v, cmp_str)) {
					unstarted(fd, shard, host, in, abs_in, &ist, "skipped",
					          "failed before (--skip-failed)", &t);
					finished++;
					continue;
				}
				sb_job_spec spec;
				sb_cli_job_spec(o, &spec);
				spec.input_path = in;
				spec.out_dir = dir;
				spec.track = track;
				spec.device = sb_devices_get(dl, set.index[k])->id;
				/* its own stems from an older file are replaced, nothing else is */
				spec.overwrite = o->overwrite || ps == PRIOR_STALE;
				if (!mkdirs(dir) || sb_engine_submit(e, &spec, &slots[k].id) != SB_OK) {
					char why[256];
					snprintf(why, sizeof why, "not started: %s",
					         errno ? strerror(errno) : "refused");
					unstarted(fd, shard, host, in, abs_in, &ist, "failed", why, &t);
					finished++;
					continue;
				}
				slots[k] = (slot){i, slots[k].id, sb_now(), 1, spec.overwrite};
			}
		}
		/* wait a little on each running input; log the ones that ended */
		int running = 0;
		for (size_t k = 0; k < set.n; k++) {
			if (!slots[k].busy)
				continue;
			running++;
			if (sb_engine_wait(e, slots[k].id, 0.05) != SB_OK)
				continue;
			sb_job_result r;
			sb_engine_result(e, slots[k].id, &r);
			sb_engine_release(e, slots[k].id);
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
			result_line(fd, shard, host, abs_in, have ? &ist : NULL, status,
			            sb_now() - slots[k].t0, &r, &t);
			slots[k].busy = 0;
			finished++;
			running--;
		}
		if (g_stop && !stopping) {
			stopping = 1;
			for (size_t k = 0; k < set.n; k++)
				if (slots[k].busy)
					sb_engine_cancel(e, slots[k].id);
		}
		if (stopping && !running)
			break;
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
	json_t *s = json_object();
	char when[32];
	iso_time(wall_now(), when, sizeof when);
	json_object_set_new(s, "time", json_string(when));
	json_object_set_new(s, "summary", json_true());
	json_object_set_new(s, "shard", json_string(shard));
	json_object_set_new(s, "host", json_string(host));
	slurm_fields(s);
	/* the GPUs the scheduler granted, as the drivers are told */
	static const char *const gpu_vars[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
	                                       "ZE_AFFINITY_MASK", "SLURM_JOB_GPUS"};
	for (size_t k = 0; k < sizeof gpu_vars / sizeof *gpu_vars; k++)
		if (getenv(gpu_vars[k]))
			json_object_set_new(s, gpu_vars[k], json_string(getenv(gpu_vars[k])));
	json_t *dv = json_array();
	for (size_t k = 0; k < set.n; k++)
		json_array_append_new(dv, json_string(sb_devices_get(dl, set.index[k])->id));
	json_object_set_new(s, "devices", dv);
	json_object_set_new(s, "inputs", json_integer((long long)mine.n));
	json_object_set_new(s, "done", json_integer(t.done));
	json_object_set_new(s, "skipped", json_integer(t.skipped));
	json_object_set_new(s, "failed", json_integer(t.failed));
	json_object_set_new(s, "cancelled", json_integer(t.cancelled + not_started));
	json_object_set_new(s, "audio_hours", json_real(t.audio_s / 3600));
	json_object_set_new(s, "start", json_real(wall_start));
	json_object_set_new(s, "wall_s", json_real(wall));
	json_object_set_new(s, "separation_s", json_real(t.sep_s));
	json_object_set_new(s, "songs_per_hour", json_real(wall > 0 ? t.done * 3600.0 / wall : 0));
	if (g_stop)
		json_object_set_new(s, "stopped_by", json_string(g_stop == SIGINT ? "SIGINT"
		                                                                   : "SIGTERM"));
	sb_engine_free(e);
	log_line(fd, s);
	fsync(fd);
	close(fd);
	if (!quiet || t.failed)
		printf("batch %s: %ld done, %ld skipped, %ld failed%s; %.3f audio hours in %.1f s "
		       "(%.0f songs/hour); log %s\n",
		       shard, t.done, t.skipped, t.failed,
		       g_stop ? ", stopped" : "", t.audio_s / 3600, wall,
		       wall > 0 ? t.done * 3600.0 / wall : 0, logpath);
	fflush(stdout);
	strvec_free(&mine);
	strvec_free(&failed_before);
	if (g_stop)
		return 128 + g_stop;
	return t.failed ? 1 : 0;
}

/* ---- the report -------------------------------------------------------------------------- */

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

static int report(const char *out_dir, int as_json)
{
	report_sums sums;
	memset(&sums, 0, sizeof sums);
	const long logs = each_log_line(out_dir, add_line, &sums);
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
		return report(report_dir, as_json);
	if (!list || !o.out_dir) {
		fprintf(stderr, "stembridge: error: %s\n",
		        !list ? "no LIST given (a file of paths, - or a folder)"
		              : "no output folder given (-o OUT)");
		batch_usage(stderr);
		return 2;
	}
	return run_batch(list, &o, shard, root, skip_failed);
}
