/* Four tracks through the engine: in parallel over a device set vs in sequence on one device,
 * wall clock from submit to the last stem, files included.
 *
 *   bench_jobs [--seconds S] [--devices opencl:0,opencl:1] [--single opencl:0] [--out DIR]
 *
 * With PoCL, POCL_DEVICES="pthread pthread" gives the two devices; each PoCL device uses every
 * core, so on a 2-core machine parallel mode can only win by overlapping I/O and serial parts.
 */
#include "sb_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "%s\n", msg);
}

static void free_samples(void *user, const float *s)
{
	(void)user;
	free((void *)s);
}

static double run(sb_mode mode, const char *devices, double seconds, const char *out,
                  char used[4][64])
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", devices);
	const char *devs[8];
	size_t nd = 0;
	for (char *t = strtok(buf, ","); t && nd < 8; t = strtok(NULL, ","))
		devs[nd++] = t;
	sb_engine_opts o;
	memset(&o, 0, sizeof o);
	o.mode = mode;
	o.devices = devs;
	o.n_devices = nd;
	o.log.fn = log_fn;
	sb_engine *e = NULL;
	if (sb_engine_new(&o, &e) != SB_OK)
		return -1;
	const double rate = 44100;
	const int64_t frames = (int64_t)(seconds * rate);
	sb_job_id ids[4];
	double t0 = sb_now();
	for (int j = 0; j < 4; j++) {
		float *x = malloc(sizeof(float) * (size_t)frames * 2);
		for (int64_t i = 0; i < frames * 2; i++)
			x[i] = (float)(0.3 * sin(0.01 * (double)i * (j + 1)) + 0.1 * ((i * 7919 % 1000) / 1000.0 - 0.5));
		char track[32], dir[4096];
		snprintf(track, sizeof track, "track%d", j);
		snprintf(dir, sizeof dir, "%s/%s", out, mode == SB_MODE_PARALLEL ? "parallel" : "sequential");
		sb_job_spec s;
		memset(&s, 0, sizeof s);
		s.samples = x;
		s.frames = frames;
		s.channels = 2;
		s.rate = rate;
		s.input_free = free_samples;
		s.track = track;
		s.out_dir = dir;
		s.format = SB_FORMAT_WAVF32;
		s.overwrite = 1;
		s.timeline_start = -1;
		if (sb_engine_submit(e, &s, &ids[j]) != SB_OK)
			return -1;
	}
	for (int j = 0; j < 4; j++) {
		sb_job_result r;
		sb_engine_wait(e, ids[j], -1);
		sb_engine_result(e, ids[j], &r);
		sb_job_progress p;
		sb_engine_progress(e, ids[j], &p);
		snprintf(used[j], 64, "%s", r.status == SB_OK ? p.device_id : "FAILED");
		sb_engine_release(e, ids[j]);
	}
	double t = sb_now() - t0;
	sb_engine_free(e);
	return t;
}

int main(int argc, char **argv)
{
	double seconds = 60;
	const char *set = "opencl:0,opencl:1", *single = "opencl:0", *out = "/tmp/sb-bench-jobs";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--devices"))
			set = argv[i + 1];
		else if (!strcmp(argv[i], "--single"))
			single = argv[i + 1];
		else if (!strcmp(argv[i], "--out"))
			out = argv[i + 1];
	}
	char used[4][64];
	printf("four %.0f s stereo 44.1 kHz tracks, built-in model\n", seconds);
	double tp = run(SB_MODE_PARALLEL, set, seconds, out, used);
	printf("parallel on %-22s %7.2f s  (%.0fx real time overall; ran on %s %s %s %s)\n", set, tp,
	       4 * seconds / tp, used[0], used[1], used[2], used[3]);
	double ts = run(SB_MODE_SEQUENTIAL, single, seconds, out, used);
	printf("sequential on %-20s %7.2f s  (%.0fx real time overall; ran on %s %s %s %s)\n", single,
	       ts, 4 * seconds / ts, used[0], used[1], used[2], used[3]);
	printf("parallel / sequential speed-up: %.2fx\n", ts / tp);
	return 0;
}
