/* Speed and memory of the built-in separator on the native CPU path, one thread.
 *
 * The input is the synthetic song of tests/classic/synth_mix.h (stereo, 44.1 kHz), a 10 s loop
 * repeated to the wanted length by a source that makes samples on demand, and the stems go to a
 * sink that only counts them, so neither end holds the song: the peak resident set is what
 * the separator itself needs. Each length runs in its own child process, because ru_maxrss is
 * a high-water mark that never comes down within one process.
 *
 * Usage: bench_speed [MINUTES...]   (default 1 3 20; the speed figure is the 3-minute one)
 */
#include "models/model.h"
#include "synth_mix.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define RATE 44100.0
#define LOOP_FRAMES (44100 * 10)

typedef struct {
	const float *loop; /* LOOP_FRAMES stereo frames */
} loop_source;

static sb_status loop_read(sb_source *self, int64_t start, int64_t n, float *out)
{
	const loop_source *ls = self->impl;
	for (int64_t i = 0; i < n; i++) {
		int64_t t = start + i;
		if (t < 0 || t >= self->frames) {
			out[2 * i] = out[2 * i + 1] = 0.f;
		} else {
			int64_t j = t % LOOP_FRAMES;
			out[2 * i] = ls->loop[2 * j];
			out[2 * i + 1] = ls->loop[2 * j + 1];
		}
	}
	return SB_OK;
}

typedef struct {
	sb_sink sink;
	int64_t frames[SB_N_STEMS];
} count_sink;

static sb_status count_write(sb_sink *self, int stem, const float *d, int64_t n)
{
	count_sink *cs = self->impl;
	(void)d;
	if (stem < 0 || stem >= SB_N_STEMS)
		return SB_ERR_INVALID;
	cs->frames[stem] += n;
	return SB_OK;
}

static void log_stderr(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	fprintf(stderr, "%s\n", msg);
}

typedef struct {
	int ok;
	double seconds;      /* wall time of sb_model_separate */
	long rss_before_kib; /* ru_maxrss before the model ran (the loop and the program) */
	long rss_peak_kib;   /* ru_maxrss after */
} run_result;

/* In the child: separate 'minutes' of the loop and report through the result. */
static run_result run_once(const float *loop, double minutes)
{
	run_result r = {0};
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	r.rss_before_kib = ru.ru_maxrss;

	sb_logger log = {log_stderr, NULL};
	sb_model *m = NULL;
	if (sb_model_open("builtin", NULL, &log, &m) != SB_OK)
		return r;
	loop_source ls = {loop};
	sb_source src = {.channels = 2,
	                 .rate = RATE,
	                 .frames = (int64_t)(minutes * 60 * RATE),
	                 .read = loop_read,
	                 .impl = &ls};
	count_sink cs = {.sink = {.n_stems = SB_N_STEMS, .channels = 2, .write = count_write}};
	cs.sink.impl = &cs;
	sb_run_ctx ctx = {0};
	ctx.log = &log;
	ctx.threads = 1;
	double t0 = sb_now();
	sb_status st = sb_model_separate(m, &ctx, &src, &cs.sink);
	r.seconds = sb_now() - t0;
	sb_model_free(m);
	if (st != SB_OK) {
		fprintf(stderr, "separate: %s\n", sb_status_str(st));
		return r;
	}
	for (int s = 0; s < SB_N_STEMS; s++)
		if (cs.frames[s] != src.frames) {
			fprintf(stderr, "stem %d: %lld frames, want %lld\n", s, (long long)cs.frames[s],
			        (long long)src.frames);
			return r;
		}
	getrusage(RUSAGE_SELF, &ru);
	r.rss_peak_kib = ru.ru_maxrss;
	r.ok = 1;
	return r;
}

static int run_in_child(const float *loop, double minutes, run_result *out)
{
	int fd[2];
	if (pipe(fd) != 0) {
		perror("pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return -1;
	}
	if (pid == 0) {
		close(fd[0]);
		run_result r = run_once(loop, minutes);
		ssize_t w = write(fd[1], &r, sizeof r);
		_exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
	}
	close(fd[1]);
	ssize_t got;
	do
		got = read(fd[0], out, sizeof *out);
	while (got < 0 && errno == EINTR);
	close(fd[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	return got == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	double minutes[16] = {1, 3, 20};
	int n_runs = 3;
	if (argc > 1) {
		n_runs = 0;
		for (int i = 1; i < argc && n_runs < 16; i++) {
			char *end;
			double v = strtod(argv[i], &end);
			if (*end || !(v > 0)) {
				fprintf(stderr, "usage: %s [MINUTES...]\n", argv[0]);
				return 2;
			}
			minutes[n_runs++] = v;
		}
	}

	float *stems[SB_N_STEMS];
	float *loop = calloc((size_t)LOOP_FRAMES * 2, sizeof(float));
	for (int s = 0; s < SB_N_STEMS; s++)
		stems[s] = malloc(sizeof(float) * (size_t)LOOP_FRAMES * 2);
	for (int s = 0; s < SB_N_STEMS; s++)
		if (!stems[s] || !loop) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
	synth_mix(RATE, LOOP_FRAMES, stems);
	for (int64_t i = 0; i < (int64_t)LOOP_FRAMES * 2; i++)
		for (int s = 0; s < SB_N_STEMS; s++)
			loop[i] += stems[s][i];
	for (int s = 0; s < SB_N_STEMS; s++)
		free(stems[s]);

	printf("builtin, native CPU path, 1 thread, stereo 44.1 kHz (synthetic 10 s loop)\n");
	printf("%8s %10s %12s %14s %16s\n", "minutes", "wall s", "x real time", "peak RSS MiB",
	       "before run MiB");
	int fail = 0;
	for (int i = 0; i < n_runs; i++) {
		run_result r;
		if (run_in_child(loop, minutes[i], &r) != 0) {
			fprintf(stderr, "the %g-minute run failed\n", minutes[i]);
			fail = 1;
			continue;
		}
		printf("%8g %10.2f %12.1f %14.1f %16.1f\n", minutes[i], r.seconds,
		       minutes[i] * 60 / r.seconds, r.rss_peak_kib / 1024.0, r.rss_before_kib / 1024.0);
		fflush(stdout);
	}
	free(loop);
	return fail;
}
