/* Takes that survive the host, the Carla way: the plugin driven through lilv by this test host
 * (host.c), the host process killed with SIGKILL while a take's job runs (slowed by
 * SB_FAULT_INJECT=job:slow:MS), then started again with the state it saved, as Carla reopens
 * a project. Subcommands, one meson test each:
 *   kill          outputDir (Carla): the take resumes ("resumed" in the log and the state port),
 *                 its stems are complete and add back to what was recorded, its recording goes
 *   kill-keep     Ardour's makePath folder, mono, Keep take audio on: the recording stays
 *   kill-failing  the resumed job fails (its commit's first rename, injected): the recording
 *                 stays, lastError and the log say where, the journal says failed, and the next
 *                 restore does not run it again
 *   corrupt       a truncated journal: reported (log, lastError, Error) and kept byte for byte;
 *                 the complete take beside it is left alone
 *   quit          the host quits (cleanup) while a take is being recorded: the take is kept
 *                 on disk as it ends and is separated when the host starts again
 *   unsaved       the take cannot be written (its recording's rename fails, injected): the job
 *                 runs from memory and the stems add back, the failure is said, nothing
 *                 half-written is left
 *   diskfull      the same on a full disk (a small tmpfs; root only): the take and then its
 *                 job fail for want of space, both said, nothing left on the disk
 *   child DIR MODE CHANNELS KEEP TAKES   (internal) the host that records and is killed
 *   sum STEMS_TXT RECORDING.wav          the stems a stems.txt lists add back to a recording
 *                                        (tools/ardour/takes_kill_test.sh's last check)
 */
#include "host.h"

#include "uris.h"

#include <lv2/state/state.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                              \
			fprintf(stderr, "\n");                                     \
			failures++;                                                \
		}                                                                  \
	} while (0)

#define ATOM_PATH "http://lv2plug.in/ns/ext/atom#Path"
#define ATOM_STRING "http://lv2plug.in/ns/ext/atom#String"
#define TRACK "Vox"
#define START (7 * 48000 + 31)
#define BLOCK 1024
#define SLOW "job:slow:4000"

static const char *const stem_names[4] = {"vocals", "drums", "bass", "other"};

/* A tone, a bass line and clicks, different per channel and take. */
static float signal_at(int64_t i, int c, int seed)
{
	const double t = (double)i / 48000.0;
	double v = 0.25 * sin(2 * M_PI * (220.0 + 30 * seed) * t) * (0.6 + 0.4 * sin(2 * M_PI * 3 * t));
	v += 0.2 * sin(2 * M_PI * (55.0 + 5 * c) * t);
	if (i % 12000 < 200)
		v += 0.3 * sin(2 * M_PI * 3000 * t) * (1.0 - (i % 12000) / 200.0);
	return (float)v;
}

static void run_for(host_plugin *h, double seconds)
{
	for (double end = host_now() + seconds; host_now() < end;) {
		host_run(h);
		host_sleep_ms(5);
	}
}

/* Where the test keeps its session: DIR/state (the saved state), DIR/out (outputDir), and
 * Ardour's <DIR>/plugins/7/scratch/stembridge. */
static void take_dir(const char *dir, host_path_mode mode, int n, char *out, size_t len)
{
	if (mode == HOST_PATH_ARDOUR)
		snprintf(out, len, "%s/plugins/7/scratch/stembridge/" TRACK "-take%d", dir, n);
	else
		snprintf(out, len, "%s/out/" TRACK "-take%d", dir, n);
}

static void take_file(const char *dir, host_path_mode mode, int n, const char *tail, char *out,
                      size_t len)
{
	char d[2048];
	take_dir(dir, mode, n, d, sizeof d);
	snprintf(out, len, "%s/" TRACK "-take%d-%s", d, n, tail);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static const void *port_value(const char *sym, void *user, uint32_t *size, uint32_t *type)
{
	host_plugin *h = user;
	LilvNode *n = lilv_new_string(host_world, sym);
	const LilvPort *p = lilv_plugin_get_port_by_symbol(h->plugin, n);
	lilv_node_free(n);
	*size = sizeof(float);
	*type = host_map("http://lv2plug.in/ns/ext/atom#Float");
	return &h->ctl[lilv_port_get_index(h->plugin, p)];
}

static void set_port(const char *sym, void *user, const void *v, uint32_t size, uint32_t type)
{
	(void)size;
	(void)type;
	host_plugin *h = user;
	LilvNode *n = lilv_new_string(host_world, sym);
	const LilvPort *p = lilv_plugin_get_port_by_symbol(h->plugin, n);
	lilv_node_free(n);
	h->ctl[lilv_port_get_index(h->plugin, p)] = *(const float *)v;
}

static void save_state(host_plugin *h, const char *dir)
{
	char sdir[2048];
	snprintf(sdir, sizeof sdir, "%s/state", dir);
	mkdir(sdir, 0777);
	LilvState *st = lilv_state_new_from_instance(h->plugin, h->inst, host_map_feature(), NULL,
	                                             sdir, sdir, sdir, port_value, h,
	                                             LV2_STATE_IS_POD, NULL);
	CHECK(st != NULL, "no state saved");
	if (st)
		lilv_state_save(host_world, host_map_feature(), host_unmap_feature(), st, NULL, sdir,
		                "state.ttl");
	lilv_state_free(st);
}

/* The host started again: a new instance given the saved state, as Carla loads a project. */
static host_plugin *reopen(const char *dir, int stereo, host_path_mode mode)
{
	host_plugin *h = host_new(stereo, BLOCK, mode, dir);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return NULL;
	char path[2048];
	snprintf(path, sizeof path, "%s/state/state.ttl", dir);
	LilvState *st = lilv_state_new_from_file(host_world, host_map_feature(), NULL, path);
	CHECK(st != NULL, "cannot load %s", path);
	if (st) {
		lilv_state_restore(st, h->inst, set_port, h, 0, NULL);
		lilv_state_free(st);
	}
	return h;
}

/* Records one take of 'blocks' blocks from START (seed picks the signal); what was fed goes to
 * fed (interleaved) when given. The take ends with a stop, unless still_rolling. */
static void record_take(host_plugin *h, int blocks, int seed, float *fed, bool still_rolling)
{
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, START, 1.0f);
	for (int b = 0; b < blocks; b++) {
		for (int c = 0; c < h->channels; c++)
			for (uint32_t i = 0; i < h->block; i++) {
				h->in[c][i] = signal_at(h->pos + i, c, seed);
				if (fed)
					fed[((size_t)b * h->block + i) * h->channels + c] = h->in[c][i];
			}
		host_run(h);
		if (b % 8 == 0)
			host_sleep_ms(1);
	}
	if (still_rolling)
		return;
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	host_run(h);
}

static void record(host_plugin *h, int blocks, int seed, float *fed)
{
	record_take(h, blocks, seed, fed, false);
}

/* The host that is killed: it saves its state (as a user saves the project), records TAKES
 * takes (all but the last separated to the end), and once the last one's job runs with its
 * recording and journal on disk, writes what it fed to DIR/fed.f32, says RUNNING on stdout and
 * goes on running until it is killed. */
static int child(const char *dir, host_path_mode mode, int stereo, int keep, int takes)
{
	host_init();
	host_plugin *h = host_new_quiet(stereo, BLOCK, mode, dir);
	if (!h)
		return 2;
	char out[2048];
	snprintf(out, sizeof out, "%s/out", dir);
	if (mode != HOST_PATH_ARDOUR)
		host_set_text(h, SB__outputDir, ATOM_PATH, out);
	host_set_text(h, SB__trackName, ATOM_STRING, TRACK);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	h->ctl[sb_port_keep_take(h->channels)] = keep ? 1.0f : 0.0f;
	host_run(h);
	save_state(h, dir);
	const int blocks = 2 * 48000 / BLOCK;
	float *fed = calloc((size_t)blocks * BLOCK * h->channels, sizeof(float));
	for (int k = 1; k < takes; k++) {
		record(h, blocks, k, NULL);
		if (!host_wait_jobs(h, k, 120)) {
			fprintf(stderr, "child: take %d was not separated: %s\n", k, h->last_error);
			return 2;
		}
	}
	record(h, blocks, takes, fed);
	char journal[2600], audio[2600];
	take_file(dir, mode, takes, "journal.json", journal, sizeof journal);
	take_file(dir, mode, takes, "recording.wav", audio, sizeof audio);
	const double end = host_now() + 60;
	while (host_now() < end && !((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_SEPARATING &&
	                             exists(journal) && exists(audio))) {
		host_run(h);
		host_sleep_ms(2);
	}
	if (!exists(journal)) {
		fprintf(stderr, "child: no journal at %s (state %g)\n", journal,
		        (double)h->ctl[SB_PORT_STATE_OUT]);
		return 2;
	}
	char path[2048];
	snprintf(path, sizeof path, "%s/fed.f32", dir);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(fed, sizeof(float), (size_t)blocks * BLOCK * h->channels, f) !=
	              (size_t)blocks * BLOCK * h->channels)
		return 2;
	fclose(f);
	printf("RUNNING %d\n", (int)getpid());
	fflush(stdout);
	for (double stop = host_now() + 120; host_now() < stop;) {
		host_run(h);
		host_sleep_ms(5);
	}
	fprintf(stderr, "child: not killed within 120 s\n");
	return 3;
}

/* Runs the child with the slowed job and SIGKILLs it while the job runs. */
static bool record_and_kill(const char *dir, host_path_mode mode, int stereo, int keep, int takes)
{
	int fds[2];
	if (pipe(fds) != 0)
		return false;
	const pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		setenv("SB_FAULT_INJECT", SLOW, 1);
		char ch[8], kp[8], tk[8];
		snprintf(ch, sizeof ch, "%d", stereo ? 2 : 1);
		snprintf(kp, sizeof kp, "%d", keep);
		snprintf(tk, sizeof tk, "%d", takes);
		execl("/proc/self/exe", "test_takes", "child", dir,
		      mode == HOST_PATH_ARDOUR ? "ardour" : "carla", ch, kp, tk, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[128] = "";
	size_t at = 0;
	struct pollfd p = {fds[0], POLLIN, 0};
	for (double end = host_now() + 180; host_now() < end && !strchr(line, '\n');) {
		if (poll(&p, 1, 200) > 0) {
			const ssize_t n = read(fds[0], line + at, sizeof line - 1 - at);
			if (n <= 0)
				break;
			at += (size_t)n;
			line[at] = '\0';
		}
	}
	close(fds[0]);
	const bool running = strncmp(line, "RUNNING", 7) == 0;
	CHECK(running, "the recording host did not reach its running job: '%s'", line);
	kill(pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the host was not killed (%d)",
	      status);
	fprintf(stderr, "takes: the recording host was killed while its job ran\n");
	return running;
}

static float *read_fed(const char *dir, int64_t frames, int channels)
{
	char path[2048];
	snprintf(path, sizeof path, "%s/fed.f32", dir);
	float *buf = calloc((size_t)frames * channels, sizeof(float));
	FILE *f = fopen(path, "rb");
	if (!f || fread(buf, sizeof(float), (size_t)frames * channels, f) !=
	              (size_t)frames * channels)
		CHECK(0, "cannot read %s", path);
	if (f)
		fclose(f);
	return buf;
}

/* The four stems of take n are complete (the take's length) and add back to what was fed. */
static void check_stems(const char *dir, host_path_mode mode, int n, int channels)
{
	const int64_t frames = 2 * 48000 / BLOCK * BLOCK;
	float *fed = read_fed(dir, frames, channels);
	float *sum = calloc((size_t)frames * channels, sizeof(float));
	float *buf = calloc((size_t)frames * channels, sizeof(float));
	char manifest[2600];
	take_file(dir, mode, n, "manifest.json", manifest, sizeof manifest);
	CHECK(exists(manifest), "no manifest %s", manifest);
	int found = 0;
	for (int s = 0; s < 4; s++) {
		char path[2600], tail[32];
		snprintf(tail, sizeof tail, "%s.wav", stem_names[s]);
		take_file(dir, mode, n, tail, path, sizeof path);
		SF_INFO info = {0};
		SNDFILE *f = sf_open(path, SFM_READ, &info);
		CHECK(f && info.frames == frames && info.channels == channels,
		      "%s: %lld frames x %d, the take is %lld x %d", path, (long long)info.frames,
		      info.channels, (long long)frames, channels);
		if (!f)
			continue;
		if (info.frames == frames && info.channels == channels &&
		    sf_readf_float(f, buf, frames) == frames) {
			for (int64_t i = 0; i < frames * channels; i++)
				sum[i] += buf[i];
			found++;
		}
		sf_close(f);
	}
	CHECK(found == 4, "%d complete stems", found);
	double worst = 0, peak = 0;
	for (int64_t i = 0; i < frames * channels; i++) {
		worst = fmax(worst, fabs(sum[i] - fed[i]));
		peak = fmax(peak, fabs(fed[i]));
	}
	CHECK(peak > 0.1 && worst < 1e-4, "stems add back to the recorded take within %g (peak %g), "
	      "expected < 1e-4", worst, peak);
	fprintf(stderr, "takes: take %d's stems add back to the recording within %g\n", n, worst);
	free(fed);
	free(sum);
	free(buf);
}

/* Runs the reopened host until its job count reaches n or it shows an error; *resumed: the
 * state port said Resumed on the way. */
static bool wait_done(host_plugin *h, int n, bool *resumed)
{
	*resumed = false;
	for (double end = host_now() + 120; host_now() < end;) {
		host_run(h);
		const int state = (int)h->ctl[SB_PORT_STATE_OUT];
		*resumed = *resumed || state == SB_STATE_RESUMED;
		if ((int)h->ctl[SB_PORT_JOBS_DONE_OUT] >= n)
			return true;
		if (state == SB_STATE_ERROR)
			return false;
		host_sleep_ms(2);
	}
	return false;
}

static void make_dir(const char *name, char *out, size_t len)
{
	const char *tmp = getenv("SB_TEST_TMP");
	snprintf(out, len, "%s/takes-%s", tmp ? tmp : "/tmp", name);
	char cmd[2200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot make %s\n", out);
}

/* Killed mid-job and reopened: the take runs again and completes. */
static int test_kill(host_path_mode mode, int stereo, int keep)
{
	char dir[1024];
	make_dir(keep ? "kill-keep" : "kill", dir, sizeof dir);
	const int ch = stereo ? 2 : 1;
	if (!record_and_kill(dir, mode, stereo, keep, 1))
		return failures;
	char journal[2600], audio[2600], manifest[2600];
	take_file(dir, mode, 1, "journal.json", journal, sizeof journal);
	take_file(dir, mode, 1, "recording.wav", audio, sizeof audio);
	take_file(dir, mode, 1, "manifest.json", manifest, sizeof manifest);
	CHECK(exists(journal) && exists(audio) && !exists(manifest),
	      "after the kill: journal %d, recording %d, manifest %d (want 1 1 0)", exists(journal),
	      exists(audio), exists(manifest));

	host_init();
	host_plugin *h = reopen(dir, stereo, mode);
	if (!h)
		return 1;
	bool resumed = false;
	CHECK(wait_done(h, 1, &resumed), "the take did not complete after the restart: %s",
	      h->last_error);
	CHECK(resumed, "the state port never said Resumed");
	CHECK(host_log_has("resumed take " TRACK "-take1"), "the log does not say the take resumed");
	check_stems(dir, mode, 1, ch);
	CHECK(!exists(journal), "the journal %s is still there after the commit", journal);
	if (keep)
		CHECK(exists(audio), "Keep take audio is on, but the recording %s is gone", audio);
	else
		CHECK(!exists(audio), "the recording %s is still there after the commit", audio);
	/* the announced manifest is the resumed take's, and it is not run a second time */
	char want[PATH_MAX] = "", got[PATH_MAX] = "";
	CHECK(realpath(manifest, want) && realpath(h->manifest, got) && !strcmp(want, got),
	      "announced manifest '%s', expected %s", h->manifest, manifest);
	run_for(h, 0.5);
	CHECK((int)h->ctl[SB_PORT_JOBS_DONE_OUT] == 1, "%g jobs after one resumed take",
	      (double)h->ctl[SB_PORT_JOBS_DONE_OUT]);
	host_free(h);

	/* opened again: a complete take is left alone */
	h = reopen(dir, stereo, mode);
	run_for(h, 1.0);
	CHECK((int)h->ctl[SB_PORT_JOBS_DONE_OUT] == 0 && (int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_ERROR,
	      "the complete take was touched again (jobs %g, state %g)",
	      (double)h->ctl[SB_PORT_JOBS_DONE_OUT], (double)h->ctl[SB_PORT_STATE_OUT]);
	host_free(h);
	host_fini();
	return failures;
}

/* Killed mid-job, and the job fails when it runs again: the recording stays and is said. */
static int test_kill_failing(void)
{
	char dir[1024];
	make_dir("kill-failing", dir, sizeof dir);
	if (!record_and_kill(dir, HOST_PATH_CARLA, 1, 0, 1))
		return failures;
	char journal[2600], audio[2600];
	take_file(dir, HOST_PATH_CARLA, 1, "journal.json", journal, sizeof journal);
	take_file(dir, HOST_PATH_CARLA, 1, "recording.wav", audio, sizeof audio);
	/* this process's first rename is the resumed job's commit */
	setenv("SB_FAULT_INJECT", "io:rename:1", 1);
	host_init();
	host_plugin *h = reopen(dir, 1, HOST_PATH_CARLA);
	if (!h)
		return 1;
	bool resumed = false;
	CHECK(!wait_done(h, 1, &resumed), "the job did not fail");
	for (double end = host_now() + 5; host_now() < end && !strstr(h->last_error, "kept at");)
		run_for(h, 0.05);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR, "state %g, not Error",
	      (double)h->ctl[SB_PORT_STATE_OUT]);
	/* the path as the plugin knows it: lilv restores outputDir through a link in the state */
	CHECK(strstr(h->last_error, "kept at") &&
	      strstr(h->last_error, "/" TRACK "-take1/" TRACK "-take1-recording.wav"),
	      "lastError does not say where the recording is: '%s'", h->last_error);
	CHECK(host_log_has("kept at"), "the log does not say where the recording is");
	CHECK(exists(audio) && exists(journal), "the failed take's recording or journal is gone");
	FILE *f = fopen(journal, "r");
	char text[8192] = "";
	if (f) {
		text[fread(text, 1, sizeof text - 1, f)] = '\0';
		fclose(f);
	}
	CHECK(strstr(text, "\"status\": \"failed\""), "the journal does not say failed: %s", text);
	char part[3000];
	snprintf(part, sizeof part, "find '%s/out' -name '.*part-*' | grep -q .", dir);
	CHECK(system(part) != 0, "temporary files left in %s/out", dir);
	host_free(h);
	/* opened again: the failed take is not run again by itself, and says where it is */
	unsetenv("SB_FAULT_INJECT");
	h = reopen(dir, 1, HOST_PATH_CARLA);
	run_for(h, 1.0);
	CHECK((int)h->ctl[SB_PORT_JOBS_DONE_OUT] == 0, "the failed take ran again");
	CHECK(host_log_has("failed before"), "the reopened host does not mention the failed take");
	CHECK(exists(audio), "the failed take's recording is gone");
	host_free(h);
	host_fini();
	return failures;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	const long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = calloc(1, (size_t)n + 1);
	*len = fread(s, 1, (size_t)n, f);
	fclose(f);
	return s;
}

/* A journal cut short (a disk that lost its end): reported and kept; a complete take beside it
 * is left alone. */
static int test_corrupt(void)
{
	char dir[1024];
	make_dir("corrupt", dir, sizeof dir);
	if (!record_and_kill(dir, HOST_PATH_CARLA, 1, 0, 2))
		return failures;
	char journal[2600], audio[2600], done_stem[2600];
	take_file(dir, HOST_PATH_CARLA, 2, "journal.json", journal, sizeof journal);
	take_file(dir, HOST_PATH_CARLA, 2, "recording.wav", audio, sizeof audio);
	take_file(dir, HOST_PATH_CARLA, 1, "vocals.wav", done_stem, sizeof done_stem);
	size_t len = 0;
	char *whole = slurp(journal, &len);
	CHECK(whole && len > 40, "no journal to damage at %s", journal);
	if (!whole)
		return failures;
	CHECK(truncate(journal, (off_t)(len / 2)) == 0, "truncate: %s", strerror(errno));
	size_t cut_len = 0, stem_len = 0;
	char *cut = slurp(journal, &cut_len);
	char *stem = slurp(done_stem, &stem_len);
	struct stat before;
	CHECK(stat(done_stem, &before) == 0, "take 1's stem %s is missing", done_stem);

	host_init();
	host_plugin *h = reopen(dir, 1, HOST_PATH_CARLA);
	if (!h)
		return 1;
	for (double end = host_now() + 30; host_now() < end && !strstr(h->last_error, "journal");)
		run_for(h, 0.05);
	run_for(h, 1.0);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR, "state %g, not Error",
	      (double)h->ctl[SB_PORT_STATE_OUT]);
	CHECK(strstr(h->last_error, "/" TRACK "-take2/" TRACK "-take2-journal.json") &&
	      strstr(h->last_error, "cannot be read") && strstr(h->last_error, "kept"),
	      "lastError does not report the journal: '%s'", h->last_error);
	CHECK(host_log_has("was not resumed"), "the log does not report the journal");
	CHECK((int)h->ctl[SB_PORT_JOBS_DONE_OUT] == 0, "a job ran");
	size_t after_len = 0;
	char *after = slurp(journal, &after_len);
	CHECK(after && after_len == cut_len && !memcmp(after, cut, cut_len),
	      "the damaged journal was changed or removed");
	CHECK(exists(audio), "the recording beside the damaged journal is gone");
	size_t stem2_len = 0;
	char *stem2 = slurp(done_stem, &stem2_len);
	struct stat now;
	CHECK(stem && stem2 && stem_len == stem2_len && !memcmp(stem, stem2, stem_len) &&
	      stat(done_stem, &now) == 0 && now.st_mtim.tv_sec == before.st_mtim.tv_sec &&
	      now.st_mtim.tv_nsec == before.st_mtim.tv_nsec, "the complete take 1 was touched");
	free(whole);
	free(cut);
	free(after);
	free(stem);
	free(stem2);
	host_free(h);
	host_fini();
	return failures;
}

/* The take cannot be written (its recording's rename fails): the job still runs from memory
 * and says so; nothing half-written stays. */
static int test_unsaved(void)
{
	char dir[1024];
	make_dir("unsaved", dir, sizeof dir);
	setenv("SB_FAULT_INJECT", "io:rename:1", 1);
	host_init();
	host_plugin *h = host_new(true, BLOCK, HOST_PATH_CARLA, dir);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	char out[1100];
	snprintf(out, sizeof out, "%s/out", dir);
	host_set_text(h, SB__outputDir, ATOM_PATH, out);
	host_set_text(h, SB__trackName, ATOM_STRING, TRACK);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_run(h);
	const int blocks = 2 * 48000 / BLOCK;
	float *fed = calloc((size_t)blocks * BLOCK * 2, sizeof(float));
	record(h, blocks, 1, fed);
	char path[2048];
	snprintf(path, sizeof path, "%s/fed.f32", dir);
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(fed, sizeof(float), (size_t)blocks * BLOCK * 2, f) ==
	                (size_t)blocks * BLOCK * 2, "cannot write %s", path);
	if (f)
		fclose(f);
	CHECK(host_wait_jobs(h, 1, 120), "the take was not separated from memory: %s",
	      h->last_error);
	CHECK(host_log_has("was not saved to disk") && host_log_has("separated from memory"),
	      "the log does not say the take was not saved");
	check_stems(dir, HOST_PATH_CARLA, 1, 2);
	char audio[2600], journal[2600], cmd[3000];
	take_file(dir, HOST_PATH_CARLA, 1, "recording.wav", audio, sizeof audio);
	take_file(dir, HOST_PATH_CARLA, 1, "journal.json", journal, sizeof journal);
	CHECK(!exists(audio) && !exists(journal), "a recording or journal of the unsaved take");
	snprintf(cmd, sizeof cmd, "find '%s' -name '.*part-*' | grep -q .", out);
	CHECK(system(cmd) != 0, "temporary files left in %s", out);
	free(fed);
	host_free(h);
	host_fini();
	return failures;
}

/* The stems a stems.txt lists add back to a recording (the Ardour test's last check). */
static int sum_check(const char *stems_txt, const char *recorded)
{
	SF_INFO ri = {0};
	SNDFILE *rf = sf_open(recorded, SFM_READ, &ri);
	CHECK(rf != NULL, "cannot read %s", recorded);
	if (!rf)
		return 1;
	const size_t n = (size_t)ri.frames * (size_t)ri.channels;
	float *want = calloc(n, sizeof(float)), *sum = calloc(n, sizeof(float)),
	      *buf = calloc(n, sizeof(float));
	sf_readf_float(rf, want, ri.frames);
	sf_close(rf);
	FILE *t = fopen(stems_txt, "r");
	CHECK(t != NULL, "cannot read %s", stems_txt);
	char line[4096];
	int stems = 0;
	while (t && fgets(line, sizeof line, t)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] != '/')
			continue;
		SF_INFO si = {0};
		SNDFILE *sf = sf_open(line, SFM_READ, &si);
		CHECK(sf && si.frames == ri.frames && si.channels == ri.channels,
		      "%s: %lld frames x %d, the recording %lld x %d", line, (long long)si.frames,
		      si.channels, (long long)ri.frames, ri.channels);
		if (sf && si.frames == ri.frames && si.channels == ri.channels &&
		    sf_readf_float(sf, buf, si.frames) == si.frames) {
			for (size_t i = 0; i < n; i++)
				sum[i] += buf[i];
			stems++;
		}
		if (sf)
			sf_close(sf);
	}
	if (t)
		fclose(t);
	double worst = 0, peak = 0;
	for (size_t i = 0; i < n; i++) {
		worst = fmax(worst, fabs(sum[i] - want[i]));
		peak = fmax(peak, fabs(want[i]));
	}
	CHECK(stems == 4, "%d complete stems listed in %s", stems, stems_txt);
	CHECK(peak > 0.01 && worst < 1e-4, "the stems add back to the recording within %g (peak %g)",
	      worst, peak);
	fprintf(stderr, "sum: %d stems of %lld frames add back to the recorded take within %g "
	        "(peak %.3f)\n", stems, (long long)ri.frames, worst, peak);
	free(want);
	free(sum);
	free(buf);
	return failures;
}

/* The host quits (the plugin's deactivate and cleanup) while a take is being recorded: the take
 * ends there and stays on disk, and is separated when the host starts again. With the worker
 * held (the service never started), cleanup finds the take still waiting and writes it itself;
 * otherwise the service usually takes it first and its job is stopped at cleanup. */
static int quit_once(const char *name, bool hold_work)
{
	char dir[1024];
	make_dir(name, dir, sizeof dir);
	setenv("SB_FAULT_INJECT", SLOW, 1);
	host_plugin *h = host_new_quiet(true, BLOCK, HOST_PATH_CARLA, dir);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	h->hold_work = hold_work;
	char out[1100];
	snprintf(out, sizeof out, "%s/out", dir);
	host_set_text(h, SB__outputDir, ATOM_PATH, out);
	host_set_text(h, SB__trackName, ATOM_STRING, TRACK);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_run(h);
	save_state(h, dir);
	const int blocks = 2 * 48000 / BLOCK;
	float *fed = calloc((size_t)blocks * BLOCK * 2, sizeof(float));
	record_take(h, blocks, 1, fed, true);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING, "not recording when the host quits");
	host_free(h); /* the host quits mid-take */
	/* without the held worker the service may or may not take it before cleanup: either way */
	CHECK(host_log_has("ended as the plugin was removed") ||
	      (!hold_work && host_log_has("stopped before its stems were written")),
	      "%s: the log does not say the take was kept for the next session", name);
	char path[2048], journal[2600], audio[2600];
	snprintf(path, sizeof path, "%s/fed.f32", dir);
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(fed, sizeof(float), (size_t)blocks * BLOCK * 2, f) ==
	                (size_t)blocks * BLOCK * 2, "cannot write %s", path);
	if (f)
		fclose(f);
	free(fed);
	take_file(dir, HOST_PATH_CARLA, 1, "journal.json", journal, sizeof journal);
	take_file(dir, HOST_PATH_CARLA, 1, "recording.wav", audio, sizeof audio);
	CHECK(exists(journal) && exists(audio), "%s: the take is not on disk after the host quit",
	      name);
	unsetenv("SB_FAULT_INJECT");
	h = reopen(dir, 1, HOST_PATH_CARLA);
	if (!h)
		return 1;
	bool resumed = false;
	CHECK(wait_done(h, 1, &resumed), "%s: the take did not complete after the restart: %s",
	      name, h->last_error);
	check_stems(dir, HOST_PATH_CARLA, 1, 2);
	CHECK(!exists(journal) && !exists(audio), "%s: the take's journal or recording is still there",
	      name);
	host_free(h);
	return failures;
}

static int test_quit(void)
{
	host_init();
	quit_once("quit-waiting", true);
	quit_once("quit-running", false);
	host_fini();
	return failures;
}

/* A full disk (a small tmpfs as the output folder; root only, skipped otherwise): the take
 * cannot be written, which is said; its job still runs from memory and fails for want of space
 * too, said as well; no half-written file, no temporary file, no empty folder is left. */
static int test_diskfull(void)
{
	char dir[1024], out[1100], cmd[2400];
	make_dir("diskfull", dir, sizeof dir);
	snprintf(out, sizeof out, "%s/out", dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && mount -t tmpfs -o size=512k tmpfs '%s' "
	         "2>/dev/null", out, out);
	if (geteuid() != 0 || system(cmd) != 0) {
		fprintf(stderr, "diskfull: SKIP: a full disk needs a tmpfs mount (root)\n");
		return 77;
	}
	host_init();
	host_plugin *h = host_new(true, BLOCK, HOST_PATH_CARLA, dir);
	CHECK(h != NULL, "instantiate");
	if (h) {
		host_set_text(h, SB__outputDir, ATOM_PATH, out);
		host_set_text(h, SB__trackName, ATOM_STRING, TRACK);
		h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
		host_run(h);
		record(h, 2 * 48000 / BLOCK, 1, NULL); /* 768 KiB as float WAV: it does not fit */
		CHECK(!host_wait_jobs(h, 1, 120), "a job succeeded on a full disk");
		for (double end = host_now() + 5; host_now() < end && !h->last_error[0];)
			run_for(h, 0.05);
		CHECK(host_log_has("was not saved to disk") && host_log_has("No space left on device"),
		      "the log does not say the take could not be written for lack of space");
		CHECK(host_log_has("job failed"), "the job that ran from memory did not say it failed");
		CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR && h->last_error[0],
		      "state %g, lastError '%s'", (double)h->ctl[SB_PORT_STATE_OUT], h->last_error);
		host_free(h);
	}
	snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", out);
	const int empty = system(cmd);
	if (empty != 0) {
		snprintf(cmd, sizeof cmd, "find '%s' >&2", out);
		CHECK(system(cmd) == 0 && 0, "files or folders left on the full disk (above)");
	}
	snprintf(cmd, sizeof cmd, "umount '%s'", out);
	CHECK(system(cmd) == 0, "%s", cmd);
	host_fini();
	return failures;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s kill|kill-keep|kill-failing|corrupt|unsaved\n", argv[0]);
		return 2;
	}
	int r = 2;
	if (!strcmp(argv[1], "child") && argc >= 7)
		return child(argv[2], !strcmp(argv[3], "ardour") ? HOST_PATH_ARDOUR : HOST_PATH_CARLA,
		             atoi(argv[4]) == 2, atoi(argv[5]), atoi(argv[6]));
	if (!strcmp(argv[1], "sum") && argc >= 4)
		r = sum_check(argv[2], argv[3]);
	else if (!strcmp(argv[1], "kill"))
		r = test_kill(HOST_PATH_CARLA, 1, 0);
	else if (!strcmp(argv[1], "kill-keep"))
		r = test_kill(HOST_PATH_ARDOUR, 0, 1);
	else if (!strcmp(argv[1], "kill-failing"))
		r = test_kill_failing();
	else if (!strcmp(argv[1], "corrupt"))
		r = test_corrupt();
	else if (!strcmp(argv[1], "unsaved"))
		r = test_unsaved();
	else if (!strcmp(argv[1], "diskfull"))
		r = test_diskfull();
	else if (!strcmp(argv[1], "quit"))
		r = test_quit();
	if (r == 77)
		return 77;
	fprintf(stderr, "%s: %s\n", argv[1], r ? "FAILED" : "ok");
	return r ? 1 : 0;
}
