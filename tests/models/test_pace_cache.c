/* The devices' paces kept between jobs (models/pace_cache.h), as a user's jobs meet them: a job's
 * measured paces read back by the next, a device the rule leaves out measured again after
 * SB_PACE_KEEP_SKIPS such jobs, a job that shared nothing changing nothing, another job's lines
 * left alone, the oldest lines going past SB_PACE_KEEP_MAX, a damaged, oversized or
 * not-a-file paces file taken as no pace known (a damaged one rewritten whole), a place that
 * cannot be written changing nothing and saying so. */
#include "../check.h"
#include "models/pace_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static sb_device props[2];
static sb_exec dev[2];

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	return buf;
}

static void entry(sb_pace_entry *e, double measured, long runs, int declined)
{
	e->measured = measured;
	e->runs = runs;
	e->declined = declined;
}

static char logged[4096];

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	snprintf(logged + strlen(logged), sizeof logged - strlen(logged), "%s\n", msg);
}

static int count_lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

int main(void)
{
	char dir[] = "/tmp/sb-pace-keep-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char path[256];
	snprintf(path, sizeof path, "%s/paces.txt", dir);
	setenv("SB_PACE_FILE", path, 1);
	snprintf(props[0].key, sizeof props[0].key, "opencl|NVIDIA CUDA|NVIDIA|H100|0");
	snprintf(props[1].key, sizeof props[1].key, "cpu");
	for (int i = 0; i < 2; i++)
		dev[i].props = &props[i];
	char job[256], other[256];
	sb_pace_cache_job(job, sizeof job, "htdemucs", 0, 0, 1);
	sb_pace_cache_job(other, sizeof other, "htdemucs", 1, 0, 1);

	/* nothing kept yet */
	sb_pace_entry p[2];
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[0].kept == 0 && p[1].kept == 0, "paces %g %g with no file", p[0].kept, p[1].kept);

	/* a job measures both; the next reads them back; the bf16 job's lines are its own */
	entry(&p[0], 0.035, 31, 0);
	entry(&p[1], 1.3, 1, 1);
	sb_pace_cache_save(job, dev, 2, p, NULL);
	sb_pace_entry q[2] = {{0}};
	entry(&q[0], 0.02, 31, 0);
	entry(&q[1], 0.9, 2, 0);
	sb_pace_cache_save(other, dev, 2, q, NULL);
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[0].kept == 0.035 && p[1].kept == 1.3 && p[1].skips == 0,
	      "kept %g %g (skips %d), want 0.035 1.3 (0): %s", p[0].kept, p[1].kept, p[1].skips,
	      slurp(path));

	/* a job that shared nothing (a silent file): no line changes */
	entry(&p[0], 0, 0, 0);
	entry(&p[1], 0, 0, 0);
	sb_pace_cache_save(job, dev, 2, p, NULL);
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[1].kept == 1.3 && p[1].skips == 0, "a job that shared nothing aged the CPU's line: "
	      "skips %d", p[1].skips);
	/* the rule leaves the CPU out: its line ages, and goes after SB_PACE_KEEP_SKIPS jobs */
	for (int k = 1; k <= SB_PACE_KEEP_SKIPS; k++) {
		entry(&p[0], 0.036, 31, 0);
		entry(&p[1], 0, 0, 1);
		sb_pace_cache_save(job, dev, 2, p, NULL);
		sb_pace_cache_load(job, dev, 2, p, NULL);
		if (k < SB_PACE_KEEP_SKIPS)
			CHECK(p[1].kept == 1.3 && p[1].skips == k, "after %d jobs without it: kept %g, "
			      "skips %d", k, p[1].kept, p[1].skips);
	}
	CHECK(p[1].kept == 0 && p[0].kept == 0.036, "after %d jobs without it the CPU's pace is "
	      "still kept (%g), or the GPU's is lost (%g)", SB_PACE_KEEP_SKIPS, p[1].kept, p[0].kept);
	/* a device that ran without a measurement keeps its line as it was */
	entry(&p[0], 0, 1, 0);
	entry(&p[1], 0, 0, 0);
	sb_pace_cache_save(job, dev, 2, p, NULL);
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[0].kept == 0.036 && p[0].skips == 0, "one run, no measurement: kept %g skips %d",
	      p[0].kept, p[0].skips);
	sb_pace_cache_load(other, dev, 2, q, NULL);
	CHECK(q[0].kept == 0.02 && q[1].kept == 0.9, "the bf16 job's paces changed: %g %g",
	      q[0].kept, q[1].kept);

	/* a damaged file: no pace known, rewritten whole at the next save */
	const char *bad[] = {"garbage\n", "0.5 0 htdemucs fp32 threads 0 batch 1\tcpu",
	                     "nan 0 htdemucs fp32 threads 0 batch 1\tcpu\n",
	                     "-1 0 htdemucs fp32 threads 0 batch 1\tcpu\n",
	                     "0.5 99 htdemucs fp32 threads 0 batch 1\tcpu\n"};
	for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
		FILE *f = fopen(path, "w");
		fprintf(f, "0.7 0 %s\tcpu\n0.5 0 %s\tcpu\n%s", other, job, bad[b]);
		fclose(f);
		sb_pace_cache_load(job, dev, 2, p, NULL);
		CHECK(p[0].kept == 0 && p[1].kept == 0, "damaged file %zu read as paces %g %g", b,
		      p[0].kept, p[1].kept);
	}
	/* rewritten whole: another job's line before the damage goes too */
	entry(&p[0], 0.04, 31, 0);
	entry(&p[1], 0, 0, 0);
	sb_pace_cache_save(job, dev, 2, p, NULL);
	const char *now = slurp(path);
	CHECK(strstr(now, "\topencl|NVIDIA") && !strstr(now, "99 htdemucs") && !strstr(now, "0.5 0") &&
	      !strstr(now, "0.7 0"), "the damaged file was not rewritten whole: %s", now);
	/* the oldest lines go past SB_PACE_KEEP_MAX, the job's own stay */
	FILE *g = fopen(path, "w");
	for (int i = 0; i < SB_PACE_KEEP_MAX; i++)
		fprintf(g, "0.5 0 model-%d fp32 threads 0 batch 1\tcpu\n", i);
	fclose(g);
	entry(&p[0], 0.04, 31, 0);
	entry(&p[1], 1.2, 2, 0);
	sb_pace_cache_save(job, dev, 2, p, NULL);
	now = slurp(path);
	CHECK(count_lines(now) == SB_PACE_KEEP_MAX && !strstr(now, " model-0 ") &&
	      !strstr(now, " model-1 ") && strstr(now, " model-2 ") &&
	      strstr(now, "1.2 0 htdemucs fp32"), "%d lines after a save to a full file; the oldest "
	      "gone and the job's own there: %s", count_lines(now), strstr(now, "model-25") ?
	      "" : now);
	/* a file over the size limit, a folder, a FIFO: no pace, no hang */
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 20000; i++)
		fprintf(f, "0.5 0 %s\tcpu\n", job);
	fclose(f);
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[1].kept == 0, "an oversized file read as a pace of %g", p[1].kept);
	unlink(path);
	CHECK(mkfifo(path, 0644) == 0, "mkfifo");
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[0].kept == 0 && p[1].kept == 0, "a FIFO read as paces");
	unlink(path);
	/* a folder where the file should be: nothing read, nothing written over it, said */
	CHECK(mkdir(path, 0755) == 0, "mkdir");
	sb_pace_cache_load(job, dev, 2, p, NULL);
	CHECK(p[0].kept == 0 && p[1].kept == 0, "a folder read as paces");
	const sb_logger log = {log_fn, NULL};
	logged[0] = '\0';
	entry(&p[0], 0.04, 31, 0);
	sb_pace_cache_save(job, dev, 2, p, &log);
	struct stat st;
	CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && strstr(logged, "not kept"),
	      "a save over a folder: %s", logged);
	rmdir(path);
	/* a folder that cannot be written (as root every folder can: a path under a file) */
	char under[300];
	snprintf(under, sizeof under, "%s/file", dir);
	fclose(fopen(under, "w"));
	snprintf(path, sizeof path, "%s/file/paces.txt", dir);
	setenv("SB_PACE_FILE", path, 1);
	entry(&p[0], 0.04, 31, 0);
	logged[0] = '\0';
	sb_pace_cache_save(job, dev, 2, p, &log);
	CHECK(strstr(logged, "not kept") != NULL, "a save that cannot be written said nothing");
	CHECK(strlen(slurp(under)) == 0, "the file in the way was written: %s", slurp(under));
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "rm");
	printf("pace_cache: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
