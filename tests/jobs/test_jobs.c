/* The engine as the plugin and the CLI use it: jobs on two OpenCL devices at once (PoCL with
 * POCL_DEVICES="pthread pthread"), one after another in sequential mode, OpenCL stems equal to
 * CPU stems, every injected device fault ending with all stems written and the fallback
 * recorded, and cancel leaving nothing behind. Run under ThreadSanitizer too (tools/dev.sh).
 *
 * usage: test_jobs GROUP   (parallel, sequential, match, faults, cancel)
 *        test_jobs share MODEL.safetensors   (one song on three devices, one lost mid-song)
 *        test_jobs keep HTDEMUCS.safetensors ROFORMER_FIXTURES   (the model kept loaded from
 *                                            one job to the next, #24)
 *        test_jobs overlap HTDEMUCS.safetensors   (a song's writing and the next one's reading
 *                                            beside a separation on the same GPU, #50)
 */
#include "../check.h"
#include "backend/device.h"
#include "convert/convert.h"
#include "sb_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sndfile.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmp_root[4096];

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "[engine] %s\n", msg);
}

static atomic_int frees;
static void count_free(void *user, const float *samples)
{
	(void)user;
	atomic_fetch_add(&frees, 1);
	free((void *)samples);
}

static float *make_signal(int64_t frames, int ch, double rate, unsigned seed)
{
	float *x = malloc(sizeof(float) * (size_t)(frames * ch));
	unsigned s = seed;
	for (int64_t i = 0; i < frames; i++) {
		double t = (double)i / rate;
		for (int c = 0; c < ch; c++) {
			s = s * 1664525u + 1013904223u;
			double noise = ((s >> 8) / 16777216.0 - 0.5) * ((i % 22050) < 300 ? 1.0 : 0.02);
			x[i * ch + c] = (float)(0.3 * sin(2 * M_PI * 82 * t) +
			                        0.2 * sin(2 * M_PI * 440 * t + c) + noise);
		}
	}
	return x;
}

static sb_engine *engine(sb_mode mode, const char *const *devs, size_t n)
{
	sb_engine_opts o;
	memset(&o, 0, sizeof o);
	o.mode = mode;
	o.devices = devs;
	o.n_devices = n;
	o.log.fn = log_fn;
	sb_engine *e = NULL;
	sb_status st = sb_engine_new(&o, &e);
	CHECK(st == SB_OK, "engine: %s", sb_status_str(st));
	return e;
}

static sb_job_id submit_track(sb_engine *e, const char *dir, const char *track,
                              int64_t frames, const char *device, const char *model)
{
	sb_job_spec s;
	memset(&s, 0, sizeof s);
	s.frames = frames;
	s.channels = 2;
	s.rate = 44100;
	s.samples = make_signal(frames, 2, 44100, (unsigned)strlen(track) * 7u + (unsigned)frames);
	s.input_free = count_free;
	s.track = track;
	s.device = device;
	s.model = model;
	s.out_dir = dir;
	s.format = SB_FORMAT_WAVF32;
	s.timeline_start = 1000;
	sb_job_id id = 0;
	sb_status st = sb_engine_submit(e, &s, &id);
	CHECK(st == SB_OK, "submit %s: %s", track, sb_status_str(st));
	return id;
}

static sb_job_id submit(sb_engine *e, const char *dir, const char *track, int64_t frames,
                        const char *device)
{
	return submit_track(e, dir, track, frames, device, NULL);
}

/* The job's result. The job stays in the engine until sb_engine_free(): the result's strings
 * are the job's. */
static sb_job_result finish(sb_engine *e, sb_job_id id)
{
	sb_job_result r;
	memset(&r, 0, sizeof r);
	r.message = r.manifest_path = r.device_requested = r.device_used = r.fallback_reason = "";
	r.precision = r.products = "";
	CHECK(sb_engine_wait(e, id, 300) == SB_OK, "job %llu did not end", (unsigned long long)id);
	CHECK(sb_engine_result(e, id, &r) == SB_OK, "no result");
	return r;
}

static json_t *manifest(const sb_job_result *r)
{
	json_error_t err;
	json_t *m = json_load_file(r->manifest_path, 0, &err);
	CHECK(m != NULL, "manifest %s: %s", r->manifest_path, err.text);
	return m;
}

static float *read_stem(const char *path, int64_t *frames)
{
	SF_INFO info;
	memset(&info, 0, sizeof info);
	SNDFILE *f = sf_open(path, SFM_READ, &info);
	if (!f)
		return NULL;
	float *x = malloc(sizeof(float) * (size_t)(info.frames * info.channels));
	sf_readf_float(f, x, info.frames);
	sf_close(f);
	*frames = info.frames;
	return x;
}

static int count_files(const char *dir, const char *needle)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct stat st;
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			n += count_files(p, needle);
		else if (!needle || strstr(e->d_name, needle))
			n++;
	}
	closedir(d);
	return n;
}

static void subdir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmp_root, name);
	mkdir(out, 0777);
}

/* Four tracks, two devices from one pool: both take jobs, and they overlap in time. */
static void test_parallel(void)
{
	const char *devs[] = {"opencl:0", "opencl:1"};
	sb_engine *e = engine(SB_MODE_PARALLEL, devs, 2);
	char dir[4200];
	subdir(dir, sizeof dir, "parallel");
	sb_job_id ids[4];
	const char *names[4] = {"t0", "t1", "t2", "t3"};
	sb_engine_pause(e, 1);
	for (int i = 0; i < 4; i++)
		ids[i] = submit(e, dir, names[i], 44100 * 4, NULL);
	sb_engine_pause(e, 0);
	int both_running = 0;
	for (int spin = 0; spin < 200000; spin++) {
		int running = 0, ended = 0;
		for (int i = 0; i < 4; i++) {
			sb_job_progress p;
			sb_engine_progress(e, ids[i], &p);
			running += p.state == SB_JOB_RUNNING || p.state == SB_JOB_WRITING;
			ended += p.state >= SB_JOB_DONE;
		}
		both_running |= running >= 2;
		if (ended == 4)
			break;
		usleep(1000);
	}
	CHECK(both_running, "two jobs never ran at the same time on two devices");
	int on[2] = {0, 0};
	for (int i = 0; i < 4; i++) {
		sb_job_result r = finish(e, ids[i]);
		CHECK(r.status == SB_OK, "%s: %s", names[i], r.message);
		json_t *m = manifest(&r);
		const char *used = json_string_value(json_object_get(json_object_get(m, "device"), "used"));
		const char *id = json_string_value(json_object_get(json_object_get(m, "device"), "used_id"));
		CHECK(used && !strncmp(used, "opencl|", 7), "%s ran on %s, not OpenCL", names[i],
		      used ? used : "?");
		if (id && !strcmp(id, "opencl:0"))
			on[0]++;
		if (id && !strcmp(id, "opencl:1"))
			on[1]++;
		CHECK(json_integer_value(json_object_get(m, "timeline_start")) == 1000, "start");
		json_decref(m);
	}
	CHECK(on[0] >= 1 && on[1] >= 1 && on[0] + on[1] == 4,
	      "both devices take from the pool: %d jobs on opencl:0, %d on opencl:1", on[0], on[1]);
	sb_engine_free(e);
	CHECK(atomic_load(&frees) == 4, "input_free called %d times for 4 jobs", atomic_load(&frees));
}

/* Thirty tracks, a fast device and a slow one (opencl:1, each launch delayed 2 ms): the slow
 * one takes its first job (that measures it), and later ones only while the fast one would take
 * longer to drain the pool and it runs at a sixth of the fast one's rate or more (core/pace.h);
 * so it never holds up the end: its last job ends no later than the
 * fast device's last one. (A device that took every job it was free for would take one of the
 * last and end seconds after the fast one.) Every job ends once, with its stems. */
static void test_pool(const char *model)
{
	setenv("SB_FAULT_INJECT", "opencl:1:slow:2", 1);
	const char *devs[] = {"opencl:0", "opencl:1"};
	sb_engine *e = engine(SB_MODE_PARALLEL, devs, 2);
	char dir[4200];
	subdir(dir, sizeof dir, "pool");
	enum { N = 30 };
	sb_job_id ids[N];
	char names[N][8];
	double end[N];
	const double t0 = sb_now();
	sb_engine_pause(e, 1);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "p%d", i);
		ids[i] = submit_track(e, dir, names[i], 44100, NULL, model);
		end[i] = -1;
	}
	sb_engine_pause(e, 0);
	for (int left = N; left > 0 && sb_now() - t0 < 300;) {
		for (int i = 0; i < N; i++) {
			sb_job_progress p;
			if (end[i] < 0 && sb_engine_progress(e, ids[i], &p) == SB_OK &&
			    p.state >= SB_JOB_DONE) {
				end[i] = sb_now() - t0;
				left--;
			}
		}
		usleep(2000);
	}
	int on[2] = {0, 0};
	double last[2] = {0, 0};
	for (int i = 0; i < N; i++) {
		sb_job_result r = finish(e, ids[i]);
		CHECK(r.status == SB_OK, "%s: %s", names[i], r.message);
		CHECK(r.n_stems == 4 && r.stems[0].path[0] == '/', "%s: %d stems in the result",
		      names[i], r.n_stems);
		/* a device worked on a job when it did some of its segments (a job taken alone at the
		 * end may share them): it ended no earlier than that job */
		json_t *m = manifest(&r);
		json_t *devs = json_object_get(json_object_get(m, "device"), "devices");
		int worked = 0;
		for (size_t d = 0; d < json_array_size(devs); d++) {
			json_t *dv = json_array_get(devs, d);
			const char *id = json_string_value(json_object_get(dv, "id"));
			const int k = id && !strcmp(id, "opencl:0") ? 0 : id && !strcmp(id, "opencl:1") ? 1
			                                                                              : -1;
			if (k < 0 || json_integer_value(json_object_get(dv, "segments")) <= 0)
				continue;
			on[k]++;
			worked++;
			last[k] = end[i] > last[k] ? end[i] : last[k];
		}
		CHECK(worked >= 1, "%s: no device of the pool did its segments", names[i]);
		json_decref(m);
	}
	printf("pool: the fast device worked on %d jobs (last ended at %.2f s), the slow one on %d "
	       "(%.2f s)\n", on[0], last[0], on[1], last[1]);
	CHECK(on[1] >= 1, "the slow device never took a job to measure itself");
	CHECK(last[1] <= last[0] + 1.0, "the slow device ended %.2f s after the fast one",
	      last[1] - last[0]);
	sb_engine_free(e);
	unsetenv("SB_FAULT_INJECT");
}

/* One device, one at a time, in submission order. */
static void test_sequential(void)
{
	const char *devs[] = {"opencl:0"};
	sb_engine *e = engine(SB_MODE_SEQUENTIAL, devs, 1);
	char dir[4200];
	subdir(dir, sizeof dir, "sequential");
	sb_job_id ids[4];
	const char *names[4] = {"s0", "s1", "s2", "s3"};
	for (int i = 0; i < 4; i++)
		ids[i] = submit(e, dir, names[i], 44100 * 2, NULL);
	int order[4], n_order = 0, overlap = 0, seen_end[4] = {0};
	for (int spin = 0; spin < 300000 && n_order < 4; spin++) {
		int running = 0;
		for (int i = 0; i < 4; i++) {
			sb_job_progress p;
			sb_engine_progress(e, ids[i], &p);
			running += p.state == SB_JOB_RUNNING || p.state == SB_JOB_WRITING;
			if (p.state >= SB_JOB_DONE && !seen_end[i]) {
				seen_end[i] = 1;
				order[n_order++] = i;
			}
		}
		overlap |= running > 1;
		usleep(500);
	}
	CHECK(!overlap, "sequential mode ran two jobs at once");
	CHECK(n_order == 4, "only %d jobs ended", n_order);
	for (int i = 0; i < n_order; i++)
		CHECK(order[i] == i, "job %d ended in position %d", order[i], i);
	for (int i = 0; i < 4; i++) {
		sb_job_result r = finish(e, ids[i]);
		CHECK(r.status == SB_OK, "%s: %s", names[i], r.message);
		json_t *m = manifest(&r);
		const char *id = json_string_value(json_object_get(json_object_get(m, "device"), "used_id"));
		CHECK(id && !strcmp(id, "opencl:0"), "sequential job on %s", id ? id : "?");
		json_decref(m);
	}
	sb_engine_free(e);
}

static double stem_diff(const char *dir_a, const char *dir_b, const char *track,
                        const char *stem)
{
	char pa[8192], pb[8192];
	snprintf(pa, sizeof pa, "%s/%s/%s.wav", dir_a, track, stem);
	snprintf(pb, sizeof pb, "%s/%s/%s.wav", dir_b, track, stem);
	int64_t na = 0, nb = 0;
	float *a = read_stem(pa, &na), *b = read_stem(pb, &nb);
	double rel = 1e9;
	if (a && b && na == nb) {
		double d = 0, r = 0;
		for (int64_t i = 0; i < na * 2; i++) {
			d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
			r += (double)a[i] * a[i];
		}
		rel = sqrt(d / (r > 0 ? r : 1));
	}
	free(a);
	free(b);
	return rel;
}

/* The same track on the CPU and on OpenCL: the same stems within 1e-4 per stem. */
static void test_match(void)
{
	sb_engine *e = engine(SB_MODE_PARALLEL, NULL, 0);
	char dc[4200], dg[4200];
	subdir(dc, sizeof dc, "match-cpu");
	subdir(dg, sizeof dg, "match-cl");
	sb_job_id a = submit(e, dc, "song", 44100 * 5 + 77, "cpu");
	sb_job_id b = submit(e, dg, "song", 44100 * 5 + 77, "opencl:1");
	sb_job_result ra = finish(e, a), rb = finish(e, b);
	CHECK(ra.status == SB_OK && rb.status == SB_OK, "match runs: %s / %s", ra.message, rb.message);
	CHECK(strncmp(rb.device_used, "opencl|", 7) == 0, "opencl:1 job ran on %s", rb.device_used);
	for (int s = 0; s < 4; s++) {
		const char *stem = (const char *[]){"vocals", "drums", "bass", "other"}[s];
		double rel = stem_diff(dc, dg, "song", stem);
		CHECK(rel < 1e-4, "%s: OpenCL differs from CPU by %g relative", stem, rel);
	}
	/* the result carries each stem's peak and RMS as the manifest has them (a UI shows them) */
	json_t *m = manifest(&ra);
	json_t *ms = json_object_get(m, "stems");
	CHECK(json_array_size(ms) == (size_t)ra.n_stems, "%zu stems in the manifest, %d in the result",
	      json_array_size(ms), ra.n_stems);
	for (int k = 0; k < ra.n_stems && k < (int)json_array_size(ms); k++) {
		json_t *st = json_array_get(ms, (size_t)k);
		const double peak = json_real_value(json_object_get(st, "peak"));
		const double rms = json_real_value(json_object_get(st, "rms"));
		CHECK(peak > 0 && fabs(ra.stems[k].peak - peak) <= 1e-9 * peak &&
		      fabs(ra.stems[k].rms - rms) <= 1e-9 * rms && rms > 0 && rms <= peak,
		      "%s: result peak %g rms %g, manifest %g %g", ra.stems[k].name, ra.stems[k].peak,
		      ra.stems[k].rms, peak, rms);
	}
	json_decref(m);
	sb_engine_free(e);
}

/* A fault on opencl:0: the job still writes every stem and says what happened. */
static void fault_case(const char *inject, const char *name, const char *expect_used,
                       const char *expect_event)
{
	setenv("SB_FAULT_INJECT", inject, 1);
	sb_engine *e = engine(SB_MODE_PARALLEL, NULL, 0);
	char dir[4200];
	subdir(dir, sizeof dir, name);
	sb_job_id id = submit(e, dir, "take", 44100 * 3, "opencl:0");
	sb_job_result r = finish(e, id);
	CHECK(r.status == SB_OK, "%s: %s", inject, r.message);
	CHECK(count_files(dir, ".wav") == 4, "%s: %d stems written", inject, count_files(dir, ".wav"));
	CHECK(count_files(dir, ".part") == 0, "%s: temporary files left", inject);
	json_t *m = manifest(&r);
	json_t *dev = json_object_get(m, "device");
	const char *used = json_string_value(json_object_get(dev, "used_id"));
	CHECK(used && !strcmp(used, expect_used), "%s: ran on %s, expected %s", inject,
	      used ? used : "?", expect_used);
	char *events = json_dumps(json_object_get(m, "events"), 0);
	CHECK(events && strstr(events, expect_event), "%s: events %s lack '%s'", inject,
	      events ? events : "?", expect_event);
	if (!strcmp(expect_used, "cpu"))
		CHECK(json_is_true(json_object_get(dev, "fell_back")) &&
		      json_string_value(json_object_get(dev, "reason")),
		      "%s: the fallback is not recorded", inject);
	free(events);
	json_decref(m);
	sb_engine_free(e);
	unsetenv("SB_FAULT_INJECT");
}

static void test_faults(void)
{
	fault_case("opencl:0:alloc:1", "fault-oom-once", "opencl:0", "out of memory");
	fault_case("opencl:0:alloc:1+", "fault-oom-always", "cpu", "finishing on the CPU");
	fault_case("opencl:0:lost:1", "fault-lost", "cpu", "lost");
	fault_case("opencl:0:open", "fault-open", "cpu", "could not be");
}

/* Cancel mid-job: no stem, no temporary file, no manifest. A queued job cancelled too. */
static void test_cancel(void)
{
	const char *devs[] = {"cpu"};
	sb_engine *e = engine(SB_MODE_SEQUENTIAL, devs, 1);
	char dir[4200];
	subdir(dir, sizeof dir, "cancel");
	sb_job_id a = submit(e, dir, "long", 44100 * 120, NULL);
	sb_job_id b = submit(e, dir, "queued", 44100 * 5, NULL);
	for (int spin = 0; spin < 100000; spin++) {
		sb_job_progress p;
		sb_engine_progress(e, a, &p);
		if (p.state == SB_JOB_RUNNING && p.fraction > 0.05)
			break;
		usleep(1000);
	}
	CHECK(count_files(dir, ".part") > 0, "a running job writes temporary files");
	sb_engine_cancel(e, a);
	sb_engine_cancel(e, b);
	sb_job_result ra = finish(e, a), rb = finish(e, b);
	CHECK(ra.status == SB_ERR_CANCELLED, "cancelled job: %s", sb_status_str(ra.status));
	CHECK(rb.status == SB_ERR_CANCELLED, "cancelled queued job: %s", sb_status_str(rb.status));
	CHECK(count_files(dir, NULL) == 0, "cancel left %d files", count_files(dir, NULL));
	/* a job left running when the engine goes away is cancelled cleanly */
	sb_job_id c = submit(e, dir, "abandoned", 44100 * 120, NULL);
	(void)c;
	usleep(200000);
	sb_engine_free(e);
	CHECK(count_files(dir, NULL) == 0, "engine shutdown left %d files", count_files(dir, NULL));
	CHECK(atomic_load(&frees) == 3, "input_free called %d times for 3 jobs", atomic_load(&frees));
}

/* One song on several devices (models that share: HTDemucs; the fixture htdemucs-mini). */
static const char *share_model; /* tests/fixtures/htdemucs/htdemucs-mini.safetensors */

static sb_job_id submit_model(sb_engine *e, const char *dir, int64_t frames, const char *device)
{
	sb_job_spec s;
	memset(&s, 0, sizeof s);
	s.frames = frames;
	s.channels = 2;
	s.rate = 44100;
	s.samples = make_signal(frames, 2, 44100, 1234u);
	s.input_free = count_free;
	s.track = "song";
	s.device = device;
	s.model = share_model;
	s.out_dir = dir;
	s.format = SB_FORMAT_WAVF32;
	s.timeline_start = -1;
	sb_job_id id = 0;
	sb_status st = sb_engine_submit(e, &s, &id);
	CHECK(st == SB_OK, "submit on %s: %s", device, sb_status_str(st));
	return id;
}

/* The manifest's per-device shares: ids in order, segments each, their sum; *dropped_id the
 * one that stopped (NULL none). */
static long shares(json_t *m, const char **ids, long *segs, int max, int *n, int *dropped)
{
	json_t *devs = json_object_get(json_object_get(m, "device"), "devices");
	long sum = 0;
	*n = 0;
	*dropped = -1;
	for (size_t i = 0; i < json_array_size(devs) && *n < max; i++) {
		json_t *d = json_array_get(devs, i);
		ids[*n] = json_string_value(json_object_get(d, "id"));
		segs[*n] = (long)json_integer_value(json_object_get(d, "segments"));
		if (json_is_true(json_object_get(d, "dropped")))
			*dropped = *n;
		CHECK(json_real_value(json_object_get(d, "seconds")) > 0 || segs[*n] == 0,
		      "device %s: no seconds recorded", ids[*n] ? ids[*n] : "?");
		sum += segs[*n];
		(*n)++;
	}
	return sum;
}

static void same_stems(const char *a, const char *b, const char *what)
{
	for (int s = 0; s < 4; s++) {
		const char *stem = (const char *[]){"vocals", "drums", "bass", "other"}[s];
		double rel = stem_diff(a, b, "song", stem);
		CHECK(rel < 1e-4, "%s: %s differs from the one-device run by %g relative", what, stem,
		      rel);
	}
}

/* The devices' paces kept in a file of their own, empty, beside DIR (SB_PACE_FILE). */
static void fresh_paces(const char *dir)
{
	char p[4300];
	snprintf(p, sizeof p, "%s.paces", dir);
	unlink(p);
	setenv("SB_PACE_FILE", p, 1);
}

static void test_share(void)
{
	const int64_t frames = 44100 * 20 + 321;
	char one[4200], three[4200], lost[4200], gone[4200];
	subdir(one, sizeof one, "share-one");
	subdir(three, sizeof three, "share-three");
	subdir(lost, sizeof lost, "share-lost");
	subdir(gone, sizeof gone, "share-gone");

	sb_engine *e = engine(SB_MODE_PARALLEL, NULL, 0);
	sb_job_result r1 = finish(e, submit_model(e, one, frames, "cpu"));
	CHECK(r1.status == SB_OK, "one device: %s", r1.message);
	/* every device takes segments of the one song, in any order; the blend is the same */
	sb_job_id id = submit_model(e, three, frames, "cpu,opencl:0,opencl:1");
	int saw_all = 0, saw_eta = 0;
	for (int spin = 0; spin < 600000; spin++) {
		sb_job_progress p;
		if (sb_engine_progress(e, id, &p) != SB_OK || p.state >= SB_JOB_DONE)
			break;
		saw_all |= p.n_devices == 3;
		saw_eta |= p.eta_s > 0 && p.rate > 0;
		usleep(1000);
	}
	CHECK(saw_all, "the progress never showed three devices");
	CHECK(saw_eta, "the progress never had a rate and a time left");
	sb_job_result r3 = finish(e, id);
	CHECK(r3.status == SB_OK, "three devices: %s", r3.message);
	json_t *m1 = r1.status == SB_OK ? manifest(&r1) : NULL;
	json_t *m3 = r3.status == SB_OK ? manifest(&r3) : NULL;
	if (m1 && m3) {
		const char *ids[8];
		long segs[8];
		int n = 0, dropped = -1;
		const long total = shares(m1, ids, segs, 8, &n, &dropped);
		CHECK(n == 1 && total > 20, "one device's manifest: %d devices, %ld segments", n, total);
		const long sum = shares(m3, ids, segs, 8, &n, &dropped);
		CHECK(n == 3 && ids[0] && !strcmp(ids[0], "cpu") && ids[1] &&
		      !strcmp(ids[1], "opencl:0") && ids[2] && !strcmp(ids[2], "opencl:1"),
		      "the manifest lists %d devices", n);
		/* the native CPU is the fastest here: the PoCL devices (on the same cores) get only
		 * what makes the song faster, maybe nothing (their first segments run again on the
		 * CPU when it runs out of work) */
		CHECK(segs[0] > 0, "the CPU did no segment");
		CHECK(sum == total, "the devices did %ld segments, the song has %ld", sum, total);
		CHECK(dropped < 0, "a device was dropped");
		CHECK(!json_is_true(json_object_get(json_object_get(m3, "device"), "fell_back")),
		      "sharing is not a fallback");
	}
	json_decref(m1);
	json_decref(m3);
	same_stems(one, three, "three devices");
	sb_engine_free(e);

	/* opencl:1 is lost after two passes: its segment goes back to the others, the stems are
	 * the same, the manifest says which device stopped and why (two devices of one speed, so
	 * that both take segments). No kept paces: the run above's, measured beside the CPU on
	 * the same cores, could put opencl:1 under a sixth of opencl:0's rate and keep it out. */
	char kept[4300];
	snprintf(kept, sizeof kept, "%s", getenv("SB_PACE_FILE") ? getenv("SB_PACE_FILE") : "");
	fresh_paces(lost);
	setenv("SB_FAULT_INJECT", "opencl:1:lost:2", 1);
	e = engine(SB_MODE_PARALLEL, NULL, 0);
	sb_job_result rl = finish(e, submit_model(e, lost, frames, "opencl:0,opencl:1"));
	CHECK(rl.status == SB_OK, "a device lost mid-song: %s", rl.message);
	json_t *ml = rl.status == SB_OK ? manifest(&rl) : NULL;
	if (ml) {
		const char *ids[8];
		long segs[8];
		int n = 0, dropped = -1;
		shares(ml, ids, segs, 8, &n, &dropped);
		CHECK(n == 2 && dropped == 1 && segs[1] == 2, "opencl:1 should be dropped after 2 "
		      "segments (dropped %d, %ld segments)", dropped, n == 2 ? segs[1] : -1L);
		char *events = json_dumps(json_object_get(ml, "events"), 0);
		CHECK(events && strstr(events, "was lost") && strstr(events, "other devices"),
		      "the events do not say the device was lost: %s", events ? events : "?");
		free(events);
		CHECK(count_files(lost, ".part") == 0, "temporary files left");
	}
	json_decref(ml);
	same_stems(one, lost, "a device lost mid-song");
	sb_engine_free(e);

	/* every device of the set lost: the job runner finishes on the CPU and says so */
	fresh_paces(gone);
	setenv("SB_FAULT_INJECT", "opencl:0:lost:1,opencl:1:lost:1", 1);
	e = engine(SB_MODE_PARALLEL, NULL, 0);
	sb_job_result rg = finish(e, submit_model(e, gone, frames, "opencl:0,opencl:1"));
	CHECK(rg.status == SB_OK, "every device lost: %s", rg.message);
	CHECK(!strcmp(rg.device_used, "cpu") && rg.fallback_reason[0],
	      "every device lost: ran on %s, reason '%s'", rg.device_used, rg.fallback_reason);
	same_stems(one, gone, "every device lost");
	sb_engine_free(e);
	unsetenv("SB_FAULT_INJECT");
	if (kept[0])
		setenv("SB_PACE_FILE", kept, 1);
	else
		unsetenv("SB_PACE_FILE");
}

/* ---- the model kept loaded between jobs (#24) ---- */

/* Who decides whether a job shares its devices or takes one: the engine (engine/jobs/README.md:
 * scheduling), from the request and what else waits, so the CLI and the plugin pass the
 * user's words and nothing else. Parallel mode, "opencl:0,opencl:1": a job alone shares both;
 * two submitted together (paused around the submits, as the front ends do) take one device
 * each and run at once; two marked in_turn take both, one after the other. */
static int n_devices_used(const sb_job_result *r, const char **first)
{
	json_t *m = r->status == SB_OK ? manifest(r) : NULL;
	const char *ids[8];
	long segs[8];
	int n = 0, dropped = -1;
	if (m)
		shares(m, ids, segs, 8, &n, &dropped);
	static char id0[32];
	snprintf(id0, sizeof id0, "%s", n ? ids[0] : "");
	*first = id0;
	json_decref(m);
	return n;
}

static void run_pair(sb_engine *e, const char *name, int in_turn, sb_job_result *out,
                     int *overlapped)
{
	char dir[2][4200];
	sb_job_id id[2];
	sb_engine_pause(e, 1);
	for (int k = 0; k < 2; k++) {
		char sub[64];
		snprintf(sub, sizeof sub, "%s-%d", name, k);
		subdir(dir[k], sizeof dir[k], sub);
		sb_job_spec s;
		memset(&s, 0, sizeof s);
		s.frames = 44100 * 8;
		s.channels = 2;
		s.rate = 44100;
		s.samples = make_signal(s.frames, 2, 44100, 99u + (unsigned)k);
		s.input_free = count_free;
		s.track = "song";
		s.device = "opencl:0,opencl:1";
		s.in_turn = in_turn;
		s.model = share_model;
		s.out_dir = dir[k];
		s.format = SB_FORMAT_WAVF32;
		s.timeline_start = -1;
		CHECK(sb_engine_submit(e, &s, &id[k]) == SB_OK, "%s: submit %d", name, k);
	}
	sb_engine_pause(e, 0);
	*overlapped = 0;
	for (int spin = 0; spin < 600000; spin++) {
		int running = 0, ended = 0;
		/* the later job first: one that runs after the other starts only once the first has
		 * ended, so a first job still running when looked at second really ran beside it
		 * (looked at the other way, the first could end and the second start in between) */
		for (int k = 1; k >= 0; k--) {
			sb_job_progress p;
			sb_engine_progress(e, id[k], &p);
			running += p.state == SB_JOB_RUNNING || p.state == SB_JOB_WRITING;
			ended += p.state >= SB_JOB_DONE;
		}
		*overlapped |= running == 2;
		if (ended == 2)
			break;
		usleep(1000);
	}
	for (int k = 0; k < 2; k++) {
		out[k] = finish(e, id[k]);
		CHECK(out[k].status == SB_OK, "%s %d: %s", name, k, out[k].message);
	}
}

static void test_decide(void)
{
	const int64_t frames = 44100 * 8;
	char alone[4200];
	subdir(alone, sizeof alone, "decide-alone");
	sb_engine *e = engine(SB_MODE_PARALLEL, NULL, 0);
	const char *first = NULL;
	sb_job_result r = finish(e, submit_model(e, alone, frames, "opencl:0,opencl:1"));
	CHECK(r.status == SB_OK, "alone: %s", r.message);
	int n = n_devices_used(&r, &first);
	CHECK(n == 2, "a job alone ran on %d device(s), not both", n);
	/* the next take alone on the same devices finds the model loaded (a plugin session) */
	char again[4200];
	subdir(again, sizeof again, "decide-again");
	r = finish(e, submit_model(e, again, frames, "opencl:0,opencl:1"));
	CHECK(r.status == SB_OK && r.model_kept, "a second lone job: %s, model kept %d", r.message,
	      r.model_kept);

	/* a job waiting behind a lone one that holds both devices ends at once when cancelled */
	char busy[4200], waits[4200];
	subdir(busy, sizeof busy, "decide-busy");
	subdir(waits, sizeof waits, "decide-waits");
	sb_job_id running = submit_model(e, busy, 44100 * 30, "opencl:0,opencl:1");
	sb_job_progress p;
	for (int spin = 0; spin < 100000; spin++)
		if (sb_engine_progress(e, running, &p) != SB_OK || p.state != SB_JOB_QUEUED)
			break;
		else
			usleep(100);
	sb_job_id waiting = submit_model(e, waits, frames, "opencl:0,opencl:1");
	sb_engine_cancel(e, waiting);
	const sb_status ws = sb_engine_wait(e, waiting, 2.0);
	sb_engine_progress(e, running, &p);
	CHECK(ws == SB_OK && p.state == SB_JOB_RUNNING, "a cancelled waiting job did not end while "
	      "the lone one ran (wait: %s)", sb_status_str(ws));
	r = finish(e, waiting);
	CHECK(r.status == SB_ERR_CANCELLED, "the cancelled waiting job: %s", r.message);
	r = finish(e, running);
	CHECK(r.status == SB_OK, "the lone job beside a cancelled one: %s", r.message);

	sb_job_result two[2];
	int overlapped = 0;
	run_pair(e, "decide-spread", 0, two, &overlapped);
	const char *a = NULL, *b = NULL;
	int na = n_devices_used(&two[0], &a);
	char a_id[32];
	snprintf(a_id, sizeof a_id, "%s", a);
	int nb = n_devices_used(&two[1], &b);
	CHECK(na == 1 && nb == 1, "two jobs together ran on %d and %d devices, not one each", na,
	      nb);
	CHECK(strcmp(a_id, b) != 0, "two jobs together both ran on %s", b);
	CHECK(overlapped, "two jobs together never ran at the same time");
	/* each device holds one kept model at most: the two single-device jobs freed the model the
	 * lone jobs kept on both, so the next lone job loads it again */
	char third[4200];
	subdir(third, sizeof third, "decide-third");
	r = finish(e, submit_model(e, third, frames, "opencl:0,opencl:1"));
	CHECK(r.status == SB_OK && !r.model_kept, "a lone job after single-device ones: %s, "
	      "model kept %d (a second copy of the weights stayed on a device)", r.message,
	      r.model_kept);

	/* the built-in model runs on the first device of a set: a lone job of it takes one device
	 * and leaves the other free for the next take */
	char b1[4200], b2[4200];
	subdir(b1, sizeof b1, "decide-builtin-1");
	subdir(b2, sizeof b2, "decide-builtin-2");
	sb_job_id ba = submit_track(e, b1, "song", 44100 * 60, "opencl:0,opencl:1", "builtin");
	sb_job_progress pa, pb;
	for (int spin = 0; spin < 100000; spin++)
		if (sb_engine_progress(e, ba, &pa) != SB_OK || pa.state != SB_JOB_QUEUED)
			break;
		else
			usleep(100);
	sb_job_id bb = submit_track(e, b2, "song", 44100 * 60, "opencl:0,opencl:1", "builtin");
	int both = 0;
	for (int spin = 0; spin < 600000 && !both; spin++) {
		sb_engine_progress(e, ba, &pa);
		sb_engine_progress(e, bb, &pb);
		both = pa.state == SB_JOB_RUNNING && pb.state == SB_JOB_RUNNING;
		if (pa.state >= SB_JOB_DONE && pb.state >= SB_JOB_DONE)
			break;
		usleep(200);
	}
	CHECK(both, "a lone built-in job held both devices: the next one waited for it");
	sb_job_result r1 = finish(e, ba), r2 = finish(e, bb);
	CHECK(r1.status == SB_OK && r2.status == SB_OK && strcmp(r1.device_used, r2.device_used),
	      "two built-in jobs: %s on %s, %s on %s", r1.message, r1.device_used, r2.message,
	      r2.device_used);

	run_pair(e, "decide-turns", 1, two, &overlapped);
	na = n_devices_used(&two[0], &a);
	nb = n_devices_used(&two[1], &b);
	CHECK(na == 2 && nb == 2, "jobs in turn ran on %d and %d devices, not both each", na, nb);
	CHECK(!overlapped, "jobs in turn ran at the same time");
	sb_engine_free(e);
}

static atomic_int kept_lines, placed_again_lines;

static void keep_log(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (strstr(msg, " kept loaded on "))
		atomic_fetch_add(&kept_lines, 1);
	if (strstr(msg, "weights already on "))
		atomic_fetch_add(&placed_again_lines, 1);
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "[engine] %s\n", msg);
}

static sb_engine *keep_engine(void)
{
	sb_engine_opts o;
	memset(&o, 0, sizeof o);
	o.mode = SB_MODE_SEQUENTIAL;
	o.log.fn = keep_log;
	sb_engine *e = NULL;
	sb_status st = sb_engine_new(&o, &e);
	CHECK(st == SB_OK, "engine: %s", sb_status_str(st));
	return e;
}

static sb_job_result keep_job(sb_engine *e, const char *dir, const char *track, int64_t frames,
                              const char *device, const char *model)
{
	sb_job_spec s;
	memset(&s, 0, sizeof s);
	s.frames = frames;
	s.channels = 2;
	s.rate = 44100;
	s.samples = make_signal(frames, 2, 44100, (unsigned)strlen(track) * 31u + (unsigned)track[0]);
	s.input_free = count_free;
	s.track = track;
	s.device = device;
	s.model = model;
	s.out_dir = dir;
	s.format = SB_FORMAT_WAVF32;
	s.timeline_start = -1;
	sb_job_id id = 0;
	sb_status st = sb_engine_submit(e, &s, &id);
	CHECK(st == SB_OK, "submit %s: %s", track, sb_status_str(st));
	sb_job_result r = finish(e, id);
	CHECK(r.status == SB_OK, "%s on %s with %s: %s", track, device, model, r.message);
	return r;
}

static int same_bytes(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int same = fa && fb;
	while (same) {
		const int ca = fgetc(fa), cb = fgetc(fb);
		same = ca == cb;
		if (ca == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* every stem of track in dir a is the same file, byte for byte, as in dir b */
static void same_files(const char *a, const char *b, const char *track, const char *what)
{
	int n = 0;
	for (int s = 0; s < 4; s++) {
		const char *stem = (const char *[]){"vocals", "drums", "bass", "other"}[s];
		char pa[8192], pb[8192];
		snprintf(pa, sizeof pa, "%s/%s/%s.wav", a, track, stem);
		snprintf(pb, sizeof pb, "%s/%s/%s.wav", b, track, stem);
		if (access(pa, F_OK) != 0 && access(pb, F_OK) != 0)
			continue; /* a model without this stem */
		n++;
		CHECK(same_bytes(pa, pb), "%s: %s/%s differs from a run of its own", what, track, stem);
	}
	CHECK(n >= 2, "%s: %d stems compared", what, n);
}

/* Songs one after another in one engine with the same model: the model is opened once (the
 * first result says it was opened, the next ones that it was kept, and the log says so), each
 * song's stems are the bytes of a run in an engine of its own; on a device other than the CPU
 * the weights are placed once too. */
static void keep_songs(const char *name, const char *device, const char *model, int n_songs,
                       int64_t frames, int placed_once)
{
	char kept_dir[4200], own_dir[4200], sub[256];
	snprintf(sub, sizeof sub, "keep-%s", name);
	subdir(kept_dir, sizeof kept_dir, sub);
	snprintf(sub, sizeof sub, "own-%s", name);
	subdir(own_dir, sizeof own_dir, sub);
	const char *tracks[3] = {"a", "bb", "ccc"};
	atomic_store(&kept_lines, 0);
	atomic_store(&placed_again_lines, 0);
	sb_engine *e = keep_engine();
	for (int i = 0; i < n_songs; i++) {
		sb_job_result r = keep_job(e, kept_dir, tracks[i], frames, device, model);
		CHECK(r.model_kept == (i > 0), "%s song %d: model_kept %d", name, i, r.model_kept);
	}
	sb_engine_free(e);
	CHECK(atomic_load(&kept_lines) == n_songs - 1, "%s: %d 'kept loaded' lines for %d songs",
	      name, atomic_load(&kept_lines), n_songs);
	if (placed_once)
		CHECK(atomic_load(&placed_again_lines) == n_songs - 1, "%s: weights placed again (%d "
		      "'already on' lines for %d songs)", name, atomic_load(&placed_again_lines),
		      n_songs);
	for (int i = 0; i < n_songs; i++) {
		e = keep_engine();
		sb_job_result r = keep_job(e, own_dir, tracks[i], frames, device, model);
		CHECK(!r.model_kept, "%s: a new engine had a model kept", name);
		sb_engine_free(e);
		same_files(kept_dir, own_dir, tracks[i], name);
	}
}

static const char *keep_demucs;   /* tests/fixtures/htdemucs/htdemucs-mini.safetensors */
static const char *keep_roformer; /* tests/fixtures/roformer */

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	CHECK(a && b, "copy %s to %s", from, to);
	int c;
	while (a && b && (c = fgetc(a)) != EOF)
		fputc(c, b);
	if (a)
		fclose(a);
	if (b)
		fclose(b);
}

static void test_keep(void)
{
	char models[4200], demucs[4300], roformer[4300];
	subdir(models, sizeof models, "models");
	snprintf(demucs, sizeof demucs, "%s/mini.safetensors", models);
	copy_file(keep_demucs, demucs);

	/* the built-in model on the CPU, three songs; HTDemucs on the CPU and on a PoCL device
	 * (its weights stay there), a RoFormer on a PoCL device */
	keep_songs("builtin-cpu", "cpu", "builtin", 3, 44100 * 3 + 5, 0);
	keep_songs("builtin-opencl", "opencl:0", "builtin", 2, 44100 * 3 + 5, 0);
	keep_songs("htdemucs-cpu", "cpu", demucs, 2, 44100 * 4 + 17, 0);
	keep_songs("htdemucs-opencl", "opencl:0", demucs, 3, 44100 * 4 + 17, 1);
	snprintf(roformer, sizeof roformer, "%s/bs-tiny.safetensors", models);
	char ckpt[4300], yaml[4300];
	snprintf(ckpt, sizeof ckpt, "%s/bs-tiny.ckpt", keep_roformer);
	snprintf(yaml, sizeof yaml, "%s/bs-tiny.yaml", keep_roformer);
	const char *in[1] = {ckpt};
	const sb_logger quiet = {log_fn, NULL};
	sbc_convert_opts co = {.inputs = in, .n_inputs = 1, .output = roformer, .overwrite = 1,
	                       .config = yaml, .log = &quiet};
	const sb_status cst = sbc_convert(&co);
	CHECK(cst == SB_OK, "bs-tiny: %s", sb_status_str(cst));
	if (cst == SB_OK)
		keep_songs("roformer-opencl", "opencl:0", roformer, 2, 44100 * 4 + 3, 1);

	/* what opens the model again: another model, the file changed on disk, other devices, bf16,
	 * a device failing on the way, a cancelled job */
	char dir[4200];
	subdir(dir, sizeof dir, "keep-changes");
	sb_engine *e = keep_engine();
	const int64_t n = 44100 + 11;
	CHECK(!keep_job(e, dir, "m1", n, "opencl:0", demucs).model_kept, "first job");
	CHECK(keep_job(e, dir, "m2", n, "opencl:0", demucs).model_kept, "same model: not kept");
	CHECK(!keep_job(e, dir, "m3", n, "opencl:0", "builtin").model_kept, "another model: kept");
	CHECK(!keep_job(e, dir, "m4", n, "opencl:0", demucs).model_kept, "the first model back: "
	      "kept, though another came between");
	struct timespec later[2] = {{0, UTIME_OMIT}, {time(NULL) + 60, 0}};
	CHECK(utimensat(AT_FDCWD, demucs, later, 0) == 0, "touch %s", demucs);
	CHECK(!keep_job(e, dir, "m5", n, "opencl:0", demucs).model_kept, "the file changed: kept");
	CHECK(keep_job(e, dir, "m6", n, "opencl:0", demucs).model_kept, "unchanged since: not kept");
	CHECK(!keep_job(e, dir, "m7", n, "opencl:1", demucs).model_kept, "another device: kept");
	CHECK(!keep_job(e, dir, "m8", n, "cpu", "builtin").model_kept, "builtin on the CPU: kept");
	sb_job_spec bf;
	memset(&bf, 0, sizeof bf);
	bf.frames = n;
	bf.channels = 2;
	bf.rate = 44100;
	bf.samples = make_signal(n, 2, 44100, 9u);
	bf.input_free = count_free;
	bf.track = "m9";
	bf.device = "cpu";
	bf.model = "builtin";
	bf.out_dir = dir;
	bf.format = SB_FORMAT_WAVF32;
	bf.bf16 = 1;
	sb_job_id id = 0;
	CHECK(sb_engine_submit(e, &bf, &id) == SB_OK, "submit bf16");
	sb_job_result rb = finish(e, id);
	CHECK(rb.status == SB_OK && !rb.model_kept, "bf16: %s, kept %d", rb.message, rb.model_kept);
	/* a cancelled job gives nothing back: the next one opens the model again */
	CHECK(!keep_job(e, dir, "c1", n, "cpu", "builtin").model_kept, "fp32 again: kept");
	sb_job_spec cs = bf;
	cs.frames = 44100 * 120;
	cs.samples = make_signal(cs.frames, 2, 44100, 11u);
	cs.track = "long";
	cs.bf16 = 0;
	CHECK(sb_engine_submit(e, &cs, &id) == SB_OK, "submit long");
	for (int spin = 0; spin < 100000; spin++) {
		sb_job_progress p;
		sb_engine_progress(e, id, &p);
		if (p.state >= SB_JOB_DONE || (p.state == SB_JOB_RUNNING && p.fraction > 0.05))
			break;
		usleep(1000);
	}
	sb_engine_cancel(e, id);
	sb_job_result rc = finish(e, id);
	CHECK(rc.status == SB_ERR_CANCELLED, "long job: %s", sb_status_str(rc.status));
	CHECK(rc.model_kept, "the long job did not have the model kept from the one before");
	CHECK(!keep_job(e, dir, "c2", n, "cpu", "builtin").model_kept, "kept after a cancel");
	sb_engine_free(e);

	/* a GPU is opened once for every job, so each job's precision is set on it: fp32, bf16
	 * (the tensor-core kernel, its instruction emulated on PoCL), fp32 again on one engine;
	 * each job's result says what ran, and the fp32 stems after a bf16 job are the first's */
	setenv("SB_CL_MMA", "emulate", 1);
	e = keep_engine();
	subdir(dir, sizeof dir, "keep-precision");
	sb_job_spec ps;
	memset(&ps, 0, sizeof ps);
	ps.frames = n;
	ps.channels = 2;
	ps.rate = 44100;
	ps.input_free = count_free;
	ps.device = "opencl:0";
	ps.model = demucs;
	ps.out_dir = dir;
	ps.format = SB_FORMAT_WAVF32;
	ps.timeline_start = -1;
	const char *tracks[3] = {"p32", "p16", "p32b"};
	sb_job_result pr[3];
	for (int k = 0; k < 3; k++) {
		ps.samples = make_signal(n, 2, 44100, 21u);
		ps.track = tracks[k];
		ps.bf16 = k == 1;
		CHECK(sb_engine_submit(e, &ps, &id) == SB_OK, "submit %s", tracks[k]);
		pr[k] = finish(e, id);
		CHECK(pr[k].status == SB_OK, "%s: %s", tracks[k], pr[k].message);
	}
	CHECK(!strcmp(pr[0].precision, "fp32") && !strcmp(pr[1].precision, "bf16") &&
	      !strcmp(pr[2].precision, "fp32"), "precisions %s, %s, %s", pr[0].precision,
	      pr[1].precision, pr[2].precision);
	CHECK(strstr(pr[1].products, "tensor cores") && !strstr(pr[2].products, "tensor cores"),
	      "products %s / %s", pr[1].products, pr[2].products);
	CHECK(pr[0].n_stems > 0 && pr[0].n_stems == pr[1].n_stems && pr[0].n_stems == pr[2].n_stems,
	      "stems %d, %d, %d", pr[0].n_stems, pr[1].n_stems, pr[2].n_stems);
	for (int k = 0; k < pr[0].n_stems && k < pr[1].n_stems && k < pr[2].n_stems; k++) {
		CHECK(same_bytes(pr[0].stems[k].path, pr[2].stems[k].path), "%s: fp32 after bf16 "
		      "differs from fp32 before", pr[0].stems[k].name);
		CHECK(!same_bytes(pr[0].stems[k].path, pr[1].stems[k].path), "%s: bf16 gave the fp32 "
		      "stem", pr[0].stems[k].name);
	}
	sb_engine_free(e);
	unsetenv("SB_CL_MMA");

	/* a device that runs out of memory on the way: the job finishes, the model is not kept */
	setenv("SB_FAULT_INJECT", "opencl:0:alloc:1", 1);
	e = keep_engine();
	subdir(dir, sizeof dir, "keep-oom");
	sb_job_result r1 = keep_job(e, dir, "o1", n, "opencl:0", "builtin");
	CHECK(!r1.model_kept, "first job");
	CHECK(!keep_job(e, dir, "o2", n, "opencl:0", "builtin").model_kept,
	      "kept after an out-of-memory");
	CHECK(keep_job(e, dir, "o3", n, "opencl:0", "builtin").model_kept, "not kept after a "
	      "clean job");
	sb_engine_free(e);
	unsetenv("SB_FAULT_INJECT");
}

/* Songs queued together on one GPU (opencl:0) in parallel mode, as `stembridge batch` submits
 * them: each song's writing (slowed by job:slow-write) and the next one's reading run while
 * another separates, seen in the jobs' progress; the model is opened and its weights placed once;
 * the stems are the bytes of runs in engines of their own, one song at a time. */
static void test_overlap(const char *model)
{
	enum { N = 3 };
	char dir[4200], own[4200];
	subdir(dir, sizeof dir, "overlap");
	subdir(own, sizeof own, "overlap-own");
	const char *tracks[N] = {"a", "bb", "ccc"};
	const int64_t frames = 44100 * 4 + 17;
	setenv("SB_FAULT_INJECT", "job:slow:40,job:slow-write:1200", 1);
	atomic_store(&kept_lines, 0);
	atomic_store(&placed_again_lines, 0);
	sb_engine_opts o;
	memset(&o, 0, sizeof o);
	o.mode = SB_MODE_PARALLEL;
	o.log.fn = keep_log;
	sb_engine *e = NULL;
	CHECK(sb_engine_new(&o, &e) == SB_OK, "engine");
	sb_job_id id[N];
	sb_engine_pause(e, 1);
	for (int i = 0; i < N; i++) {
		sb_job_spec s;
		memset(&s, 0, sizeof s);
		s.frames = frames;
		s.channels = 2;
		s.rate = 44100;
		s.samples = make_signal(frames, 2, 44100,
		                        (unsigned)strlen(tracks[i]) * 31u + (unsigned)tracks[i][0]);
		s.input_free = count_free;
		s.track = tracks[i];
		s.device = "opencl:0";
		s.model = model;
		s.out_dir = dir;
		s.format = SB_FORMAT_WAVF32;
		s.timeline_start = -1;
		CHECK(sb_engine_submit(e, &s, &id[i]) == SB_OK, "submit %s", tracks[i]);
	}
	sb_engine_pause(e, 0);
	/* one writes while the next separates: seen at least once for each pair */
	int seen[N] = {0}, ended = 0;
	while (ended < N) {
		sb_job_progress p[N];
		ended = 0;
		for (int i = 0; i < N; i++) {
			sb_engine_progress(e, id[i], &p[i]);
			ended += p[i].state >= SB_JOB_DONE;
		}
		for (int i = 0; i + 1 < N; i++)
			seen[i] |= p[i].state < SB_JOB_DONE && !strcmp(p[i].stage, "writing") &&
			           p[i + 1].state == SB_JOB_RUNNING && !strcmp(p[i + 1].stage, "separating");
		const struct timespec ts = {0, 2 * 1000000L};
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < N; i++) {
		sb_job_result r = finish(e, id[i]);
		CHECK(r.status == SB_OK, "%s: %s", tracks[i], r.message);
		CHECK(r.model_kept == (i > 0), "song %d: model_kept %d", i, r.model_kept);
	}
	for (int i = 0; i + 1 < N; i++)
		CHECK(seen[i], "song %d wrote while song %d separated", i, i + 1);
	sb_engine_free(e);
	CHECK(atomic_load(&kept_lines) == N - 1, "%d 'kept loaded' lines for %d songs",
	      atomic_load(&kept_lines), N);
	CHECK(atomic_load(&placed_again_lines) == N - 1, "weights placed again (%d 'already on' "
	      "lines for %d songs)", atomic_load(&placed_again_lines), N);
	unsetenv("SB_FAULT_INJECT");
	for (int i = 0; i < N; i++) {
		sb_engine *e1 = keep_engine();
		keep_job(e1, own, tracks[i], frames, "opencl:0", model);
		sb_engine_free(e1);
		same_files(dir, own, tracks[i], "overlapped songs");
	}
	printf("overlap: %d of %d pairs seen writing beside a separation\n", seen[0] + seen[1], N - 1);
}

int main(int argc, char **argv)
{
	const char *group = argc > 1 ? argv[1] : "parallel";
	const char *base = getenv("SB_TEST_TMP");
	snprintf(tmp_root, sizeof tmp_root, "%s/jobs-%s-XXXXXX", base ? base : "/tmp", group);
	if (base)
		mkdir(base, 0777);
	if (!mkdtemp(tmp_root)) {
		perror("mkdtemp");
		return 1;
	}
	/* the devices' kept paces (models/pace_cache.h) start empty in every run */
	char paces[4200];
	snprintf(paces, sizeof paces, "%s/paces.txt", tmp_root);
	setenv("SB_PACE_FILE", paces, 1);
	if (!strcmp(group, "parallel"))
		test_parallel();
	else if (!strcmp(group, "sequential"))
		test_sequential();
	else if (!strcmp(group, "pool") && argc > 2)
		test_pool(argv[2]);
	else if (!strcmp(group, "match"))
		test_match();
	else if (!strcmp(group, "faults"))
		test_faults();
	else if (!strcmp(group, "cancel"))
		test_cancel();
	else if (!strcmp(group, "share") && argc > 2) {
		share_model = argv[2];
		test_share();
	}
	else if (!strcmp(group, "decide") && argc > 2) {
		share_model = argv[2];
		test_decide();
	}
	else if (!strcmp(group, "overlap") && argc > 2)
		test_overlap(argv[2]);
	else if (!strcmp(group, "keep") && argc > 3) {
		keep_demucs = argv[2];
		keep_roformer = argv[3];
		test_keep();
	}
	else {
		fprintf(stderr, "unknown group %s\n", group);
		return 2;
	}
	if (!failures) {
		char cmd[4300];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmp_root);
	}
	printf("%s: %d failure(s)\n", group, failures);
	return failures ? 1 : 0;
}
