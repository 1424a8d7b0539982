/* Speed of the built-in separator on the native CPU path and on each OpenCL device, as a
 * multiple of real time, for a synthetic stereo song (tests/classic/synth_mix.h).
 *
 * usage: bench_opencl [--seconds S] [--rate HZ] [--chunks F1,F2,...]
 *   --seconds  song length (default 180)
 *   --rate     sample rate (default 44100)
 *   --chunks   OpenCL chunk lengths in input frames, 0 = the driver's default (default
 *              "0,1048576")
 *
 * Times are wall clock for the whole song through sb_classic_run(): reading the source,
 * uploads, kernels, read-backs and the "other" stem included; opening the device (context,
 * kernel build or cache load) is shown apart. The stems go to a sink that only checks their
 * length, so disk speed does not enter. The native CPU path runs on one thread, as one job.
 */
#include "../../tests/classic/synth_mix.h"
#include "models/classic/classic_ops.h"
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_sink sink;
	int64_t frames[SB_N_STEMS];
	double sum; /* keeps the compiler from skipping anything and catches NaN */
} count_sink;

static sb_status count_write(sb_sink *self, int stem, const float *d, int64_t n)
{
	count_sink *c = self->impl;
	for (int64_t i = 0; i < n * self->channels; i += 97)
		c->sum += d[i];
	c->frames[stem] += n;
	return SB_OK;
}

static void log_stderr(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "%s\n", msg);
}

static const sb_logger logger = {log_stderr, NULL};

static sb_status run(const sb_exec *dev, const float *x, int64_t frames, double rate,
                     int64_t chunk, double *secs)
{
	sb_classic_params p;
	sb_classic_params_default(&p);
	sb_source *src = NULL;
	sb_status st = sb_source_memory(x, frames, 2, rate, &src);
	if (st != SB_OK)
		return st;
	count_sink cs;
	memset(&cs, 0, sizeof cs);
	cs.sink.n_stems = SB_N_STEMS;
	cs.sink.channels = 2;
	cs.sink.write = count_write;
	cs.sink.impl = &cs;
	sb_run_ctx ctx = {0};
	ctx.log = &logger;
	ctx.dev = (sb_exec *)dev;
	ctx.n_dev = 1;
	ctx.chunk_frames = chunk;
	ctx.threads = 1;
	double t = sb_now();
	st = sb_classic_run(dev, &p, &ctx, src, &cs.sink);
	*secs = sb_now() - t;
	src->close(src);
	for (int s = 0; st == SB_OK && s < SB_N_STEMS; s++)
		if (cs.frames[s] != frames)
			st = SB_ERR_INVALID;
	if (st == SB_OK && cs.sum != cs.sum)
		st = SB_ERR_FORMAT;
	return st;
}

int main(int argc, char **argv)
{
	double seconds = 180, rate = 44100;
	const char *chunks = "0,1048576";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--chunks") && i + 1 < argc)
			chunks = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--seconds S] [--rate HZ] [--chunks F1,F2,...]\n",
			        argv[0]);
			return 2;
		}
	}
	if (seconds <= 0 || rate < 4000) {
		fprintf(stderr, "bad --seconds or --rate\n");
		return 2;
	}
	const int64_t frames = (int64_t)(seconds * rate);
	float *st[SB_N_STEMS];
	float *x = malloc(sizeof(float) * 2 * (size_t)frames);
	for (int s = 0; s < SB_N_STEMS; s++)
		st[s] = malloc(sizeof(float) * 2 * (size_t)frames);
	if (!x || !st[0] || !st[1] || !st[2] || !st[3]) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	synth_mix(rate, frames, st);
	for (int64_t i = 0; i < 2 * frames; i++)
		x[i] = st[0][i] + st[1][i] + st[2][i] + st[3][i];
	for (int s = 0; s < SB_N_STEMS; s++)
		free(st[s]);

	sb_device_list *devs = NULL;
	if (sb_devices_enumerate(&logger, &devs) != SB_OK) {
		fprintf(stderr, "cannot list devices\n");
		return 1;
	}
	sb_classic_geom g;
	sb_classic_params p;
	sb_classic_params_default(&p);
	sb_classic_geometry(&p, rate, &g);
	printf("built-in separator, %.0f s stereo at %.0f Hz (N = %d, hop %d)\n", seconds, rate,
	       g.n_fft, g.hop);
	printf("%-9s %-46s %12s %8s %8s %10s\n", "device", "name", "chunk", "open s", "run s",
	       "x realtime");
	double secs = 0;
	sb_exec cpu;
	const sb_open_opts one = {1, SB_PREC_FP32, 0};
	sb_status r = sb_exec_open(sb_devices_get(devs, 0), &one, &logger, &cpu);
	if (r == SB_OK)
		r = run(&cpu, x, frames, rate, 0, &secs);
	sb_exec_close(&cpu);
	if (r == SB_OK)
		printf("%-9s %-46s %12s %8s %8.2f %10.1f\n", "cpu", "native (fftw, 1 thread)", "default",
		       "-", secs, seconds / secs);
	else
		printf("%-9s native: %s\n", "cpu", sb_status_str(r));

	int fail = r != SB_OK;
	for (size_t i = 0; i < sb_devices_count(devs); i++) {
		const sb_device *dp = sb_devices_get(devs, i);
		if (sb_device_is_native(dp))
			continue;
		sb_exec d;
		double t = sb_now();
		r = sb_exec_open(dp, NULL, &logger, &d);
		double open_s = sb_now() - t;
		if (r != SB_OK) {
			printf("%-9s %-46.46s cannot open: %s\n", dp->id, dp->name, sb_status_str(r));
			fail = 1;
			continue;
		}
		const char *c = chunks;
		while (*c) {
			int64_t chunk = strtoll(c, NULL, 10);
			char label[32];
			if (chunk > 0)
				snprintf(label, sizeof label, "%lld", (long long)chunk);
			else
				snprintf(label, sizeof label, "default");
			r = run(&d, x, frames, rate, chunk, &secs);
			if (r == SB_OK)
				printf("%-9s %-46.46s %12s %8.2f %8.2f %10.1f\n", dp->id, dp->name, label, open_s,
				       secs, seconds / secs);
			else
				printf("%-9s %-46.46s %12s failed: %s\n", dp->id, dp->name, label,
				       sb_status_str(r));
			fail |= r != SB_OK;
			const char *comma = strchr(c, ',');
			c = comma ? comma + 1 : c + strlen(c);
		}
		sb_exec_close(&d);
	}
	sb_devices_free(devs);
	free(x);
	return fail;
}
