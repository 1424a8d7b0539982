/* Tests of the OpenCL path of the built-in separator and of the OpenCL device, on whatever
 * OpenCL devices sb_devices_enumerate() finds (PoCL's two CPU devices in CI):
 *   - the OpenCL stems equal the native CPU stems within 1e-4 relative L2 per stem (mono and
 *     stereo; 44.1 kHz, 48 kHz and odd rates), and do not depend on the chunk length;
 *   - the kernel cache is written on the first open, loaded on the next, and a damaged or
 *     refused cache file is survived and replaced;
 *   - a kernel that does not compile gives SB_ERR_DEVICE with the compiler's message logged;
 *   - each SB_FAULT_INJECT entry gives the status the job runner's fallback ladder expects;
 *   - two devices opened and run from two threads at once give the right stems.
 * With no OpenCL device the test is skipped (exit 77), never passed silently.
 */
#include "../check.h"
#include "../classic/mem_sink.h"
#include "../classic/synth_mix.h"
#include "models/classic/classic_ops.h"
#include "backend/backend.h"
#include "models/model.h"
/* the OpenCL backend's own test: its device internals (kernel cache, fault injection) */
#include "backend/opencl/cl_base.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a logger that keeps what it was told, so tests can check the user-visible words ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_text;
static size_t log_len;

static void capture(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	pthread_mutex_lock(&log_lock);
	size_t n = strlen(msg);
	char *t = realloc(log_text, log_len + n + 2);
	if (t) {
		log_text = t;
		memcpy(log_text + log_len, msg, n);
		log_len += n;
		log_text[log_len++] = '\n';
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
	if (getenv("SB_TEST_VERBOSE"))
		fprintf(stderr, "[log %d] %s\n", (int)level, msg);
}

static const sb_logger logger = {capture, NULL};

static void log_clear(void)
{
	pthread_mutex_lock(&log_lock);
	log_len = 0;
	if (log_text)
		log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

static int log_has(const char *s)
{
	pthread_mutex_lock(&log_lock);
	int r = log_text && strstr(log_text, s) != NULL;
	pthread_mutex_unlock(&log_lock);
	return r;
}

/* ---- signals and runs ---------------------------------------------------------------- */

/* The synthetic song (synth_mix.h), folded to mono when ch == 1. */
static float *make_mix(double rate, double seconds, int ch, int64_t *frames)
{
	int64_t n = (int64_t)(rate * seconds) + 37; /* not a multiple of any hop */
	float *st[SB_N_STEMS];
	for (int s = 0; s < SB_N_STEMS; s++)
		st[s] = malloc(sizeof(float) * 2 * (size_t)n);
	synth_mix(rate, n, st);
	float *x = malloc(sizeof(float) * ch * (size_t)n);
	for (int64_t i = 0; i < n; i++) {
		float l = 0, r = 0;
		for (int s = 0; s < SB_N_STEMS; s++) {
			l += st[s][2 * i];
			r += st[s][2 * i + 1];
		}
		if (ch == 1) {
			x[i] = 0.5f * (l + r);
		} else {
			x[2 * i] = l;
			x[2 * i + 1] = r;
		}
	}
	for (int s = 0; s < SB_N_STEMS; s++)
		free(st[s]);
	*frames = n;
	return x;
}

/* An opened OpenCL device of the test as the backend's device (the backend wraps the same
 * sb_cl_device), and the CPU backend's device. */
static pthread_mutex_t ex_lock = PTHREAD_MUTEX_INITIALIZER;
static const sb_exec *ex(sb_cl_device *d)
{
	static struct sb_bdev store[64];
	static sb_exec x[64];
	static int n;
	pthread_mutex_lock(&ex_lock);
	int i = 0;
	while (i < n && store[i].dev != d)
		i++;
	if (i == n && n < 64) {
		n++;
		memset(&store[i], 0, sizeof store[i]);
		store[i].dev = d;
		store[i].q = sb_cl_device_queue(d);
		store[i].log = sb_cl_device_logger(d);
	}
	x[i] = (sb_exec){sb_backend_by_name("opencl"), &store[i], sb_cl_device_props(d)};
	pthread_mutex_unlock(&ex_lock);
	return &x[i];
}

static sb_exec cpu_x;

/* The driver on a given device, as the model runs it. */
static sb_status run_ops(const sb_exec *dev, const float *x, int64_t frames, int ch, double rate,
                         int64_t chunk, mem_sink *ms)
{
	sb_classic_params p;
	sb_classic_params_default(&p);
	sb_source *src = NULL;
	mem_sink_init(ms, ch);
	sb_status st = sb_source_memory(x, frames, ch, rate, &src);
	if (st != SB_OK)
		return st;
	sb_run_ctx ctx = {0};
	ctx.log = &logger;
	ctx.dev = (sb_exec *)dev;
	ctx.n_dev = 1;
	ctx.chunk_frames = chunk;
	ctx.threads = 1;
	st = sb_classic_run(dev, &p, &ctx, src, &ms->sink);
	src->close(src);
	return st;
}

/* Through the model seam, as the job runner does: sb_model_open("builtin") on the device. */
static sb_status run_model(sb_cl_device *cl, const float *x, int64_t frames, int ch, double rate,
                           int64_t chunk, mem_sink *ms)
{
	sb_model *m = NULL;
	mem_sink_init(ms, ch);
	sb_status st = sb_model_open("builtin", NULL, &logger, &m);
	if (st != SB_OK)
		return st;
	sb_source *src = NULL;
	st = sb_source_memory(x, frames, ch, rate, &src);
	if (st == SB_OK) {
		sb_run_ctx ctx = {0};
		ctx.log = &logger;
		ctx.dev = (sb_exec *)ex(cl);
		ctx.n_dev = 1;
		ctx.chunk_frames = chunk;
		st = sb_model_separate(m, &ctx, src, &ms->sink);
		src->close(src);
	}
	sb_model_free(m);
	return st;
}

static double rel_l2(const float *a, const float *ref, size_t n)
{
	double e = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - ref[i];
		e += d * d;
		r += (double)ref[i] * ref[i];
	}
	return r > 0 ? sqrt(e / r) : sqrt(e);
}

static double energy(const float *a, size_t n)
{
	double e = 0;
	for (size_t i = 0; i < n; i++)
		e += (double)a[i] * a[i];
	return e;
}

/* Every stem of 'got' within tol of 'ref' (relative L2), and the right length. Returns the
 * worst error. */
static double compare_stems(const mem_sink *got, const mem_sink *ref, int64_t frames, int ch,
                            double tol, const char *what)
{
	double worst = 0;
	for (int s = 0; s < SB_N_STEMS; s++) {
		CHECK(got->frames[s] == frames && ref->frames[s] == frames,
		      "%s: stem %s has %lld frames (CPU %lld), want %lld", what, sb_stem_names[s],
		      (long long)got->frames[s], (long long)ref->frames[s], (long long)frames);
		if (got->frames[s] != frames || ref->frames[s] != frames)
			continue;
		double e = rel_l2(got->data[s], ref->data[s], (size_t)(frames * ch));
		CHECK(e <= tol, "%s: stem %s differs from the CPU by %.3g relative (limit %.0e)", what,
		      sb_stem_names[s], e, tol);
		worst = e > worst ? e : worst;
	}
	return worst;
}

/* ---- devices ------------------------------------------------------------------------- */

static sb_device_list *devices;
static const sb_device *ocl[8];
static int n_ocl;
static int64_t fault_frames; /* a 1 s stereo song for the fault and thread tests */
static float *fault_x;
static char cache_path[4096]; /* the classic kernels' cache file, from test_kernel_cache */

static sb_cl_device *open_dev(int i)
{
	sb_cl_device *d = NULL;
	sb_status st = sb_cl_device_open(ocl[i], &logger, &d);
	CHECK(st == SB_OK && d, "open %s: %s", ocl[i]->id, sb_status_str(st));
	return st == SB_OK ? d : NULL;
}

/* ---- tests --------------------------------------------------------------------------- */

/* OpenCL stems = CPU stems within 1e-4 per stem, over channel counts and rates that give
 * different FFT sizes (odd and even numbers of radix-4 passes) and median widths. */
static void test_matches_cpu(sb_cl_device *d)
{
	static const struct {
		int ch;
		double rate;
	} cases[] = {{2, 44100}, {1, 44100}, {2, 48000}, {1, 48000}, {2, 22050}, {1, 8000},
	             {2, 96000}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const int ch = cases[i].ch;
		const double rate = cases[i].rate;
		int64_t frames = 0;
		float *x = make_mix(rate, 3.0, ch, &frames);
		mem_sink cpu, gpu;
		char what[96];
		snprintf(what, sizeof what, "%s %d ch %g Hz", sb_cl_device_props(d)->id, ch, rate);
		double t0 = sb_now();
		sb_status sc = run_ops(&cpu_x, x, frames, ch, rate, 0, &cpu);
		double t1 = sb_now();
		sb_status so = run_ops(ex(d), x, frames, ch, rate, 0, &gpu);
		double t2 = sb_now();
		CHECK(sc == SB_OK, "%s: CPU path: %s", what, sb_status_str(sc));
		CHECK(so == SB_OK, "%s: OpenCL path: %s", what, sb_status_str(so));
		if (sc == SB_OK && so == SB_OK) {
			/* The comparison means something only if every stem has signal in it. */
			double ex = energy(x, (size_t)(frames * ch));
			for (int s = 0; s < SB_N_STEMS; s++)
				CHECK(energy(cpu.data[s], (size_t)(frames * ch)) > 1e-3 * ex,
				      "%s: CPU stem %s is empty, the comparison proves nothing", what,
				      sb_stem_names[s]);
			double worst = compare_stems(&gpu, &cpu, frames, ch, 1e-4, what);
			printf("matches CPU: %-34s worst stem error %.2e (CPU %.2f s, OpenCL %.2f s)\n",
			       what, worst, t1 - t0, t2 - t1);
		}
		mem_sink_free(&cpu);
		mem_sink_free(&gpu);
		free(x);
	}
}

/* Chunk length does not change the OpenCL stems (no seams where chunks meet). */
static void test_chunk_invariance(sb_cl_device *d)
{
	const double rate = 44100;
	const int ch = 2;
	int64_t frames = 0;
	float *x = make_mix(rate, 3.0, ch, &frames);
	mem_sink a, b;
	sb_status sa = run_ops(ex(d), x, frames, ch, rate, 1024 * 5, &a);
	sb_status sb2 = run_ops(ex(d), x, frames, ch, rate, 1024 * 37, &b);
	CHECK(sa == SB_OK && sb2 == SB_OK, "chunk invariance: %s / %s", sb_status_str(sa),
	      sb_status_str(sb2));
	if (sa == SB_OK && sb2 == SB_OK) {
		for (int s = 0; s < SB_N_STEMS; s++) {
			double md = 0, mx = 0;
			for (int64_t i = 0; i < frames * ch; i++) {
				double dd = fabs((double)a.data[s][i] - b.data[s][i]);
				md = dd > md ? dd : md;
				mx = fabs(a.data[s][i]) > mx ? fabs(a.data[s][i]) : mx;
			}
			CHECK(md <= 1e-6 * (mx > 1 ? mx : 1),
			      "stem %s differs by %g between chunk lengths on OpenCL", sb_stem_names[s], md);
		}
	}
	mem_sink_free(&a);
	mem_sink_free(&b);
	free(x);
}

static long file_size(const char *path)
{
	struct stat sbuf;
	return stat(path, &sbuf) == 0 ? (long)sbuf.st_size : -1;
}

static int write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return 0;
	int ok = fwrite(data, 1, n, f) == n;
	return fclose(f) == 0 && ok;
}

/* A short run on an opened device whose stems match the CPU: the kernels work. */
static void check_device_works(sb_cl_device *d, const char *what)
{
	int64_t frames = 0;
	float *x = make_mix(44100, 0.5, 2, &frames);
	mem_sink cpu, gpu;
	sb_status sc = run_ops(&cpu_x, x, frames, 2, 44100, 0, &cpu);
	sb_status so = run_ops(ex(d), x, frames, 2, 44100, 0, &gpu);
	CHECK(sc == SB_OK && so == SB_OK, "%s: separation failed (%s)", what, sb_status_str(so));
	if (sc == SB_OK && so == SB_OK)
		compare_stems(&gpu, &cpu, frames, 2, 1e-4, what);
	mem_sink_free(&cpu);
	mem_sink_free(&gpu);
	free(x);
}

/* The cache file appears after the first open, the next open loads it, and damaged or refused
 * files are logged, rebuilt and replaced. */
static void test_kernel_cache(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/stembridge", xdg);
	/* Start cold: remove the files an earlier run of this test left. */
	sb_cl_device *d = open_dev(0);
	if (!d)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s", sb_cl_device_cache_path(d));
	sb_cl_device_close(d);
	CHECK(path[0] != '\0', "no kernel cache path although XDG_CACHE_HOME is %s", xdg);
	CHECK(!strncmp(path, dir, strlen(dir)), "cache file %s is not under %s", path, dir);
	snprintf(cache_path, sizeof cache_path, "%s", path);
	unlink(path);

	log_clear();
	d = open_dev(0);
	if (!d)
		return;
	CHECK(!sb_cl_device_program_cached(d), "cold open claims the kernels came from the cache");
	CHECK(log_has("compiled"), "cold open did not log a compile");
	CHECK(file_size(path) > 24, "no kernel cache file at %s after the first open", path);
	sb_cl_device_close(d);

	log_clear();
	double t = sb_now();
	d = open_dev(0);
	double warm = sb_now() - t;
	if (!d)
		return;
	CHECK(sb_cl_device_program_cached(d), "second open did not load the cache");
	CHECK(log_has("loaded from cache"), "second open did not log the cache hit");
	printf("kernel cache: warm open %.3f s, file %ld bytes\n", warm, file_size(path));
	check_device_works(d, "kernels from the cache");
	sb_cl_device_close(d);

	/* Damage: flip bytes in the middle, then truncate. Each is logged and rebuilt, and the
	 * rebuilt file is good again. */
	long size = file_size(path);
	for (int damage = 0; damage < 2 && size > 64; damage++) {
		FILE *f = fopen(path, damage == 0 ? "r+b" : "rb");
		unsigned char *buf = malloc((size_t)size);
		CHECK(f && buf && fread(buf, 1, (size_t)size, f) == (size_t)size, "reading %s", path);
		if (f)
			fclose(f);
		if (!buf)
			return;
		if (damage == 0)
			for (long i = size / 2; i < size / 2 + 16; i++)
				buf[i] ^= 0xa5;
		write_file(path, buf, damage == 0 ? (size_t)size : (size_t)size / 3);
		free(buf);
		log_clear();
		d = open_dev(0);
		if (!d)
			return;
		CHECK(!sb_cl_device_program_cached(d), "a damaged cache file was used (%s)",
		      damage == 0 ? "flipped bytes" : "truncated");
		CHECK(log_has("ignoring the kernel cache"), "the damaged cache file was not reported");
		check_device_works(d, damage == 0 ? "after flipped bytes" : "after truncation");
		sb_cl_device_close(d);
		d = open_dev(0);
		if (!d)
			return;
		CHECK(sb_cl_device_program_cached(d), "the cache was not rewritten after damage");
		sb_cl_device_close(d);
	}

	/* A well-formed file holding something the driver cannot load (as after a driver change
	 * that kept its version string). */
	{
		unsigned char junk[24 + 256];
		uint64_t n = 256, sum = 0xcbf29ce484222325ull;
		for (int i = 0; i < 256; i++) {
			junk[24 + i] = (unsigned char)(i * 37 + 11);
			sum ^= junk[24 + i];
			sum *= 0x100000001b3ull;
		}
		memcpy(junk, "SBCLBIN1", 8);
		memcpy(junk + 8, &n, 8);
		memcpy(junk + 16, &sum, 8);
		write_file(path, junk, sizeof junk);
		log_clear();
		d = open_dev(0);
		if (!d)
			return;
		CHECK(!sb_cl_device_program_cached(d), "a binary the driver cannot load was used");
		CHECK(log_has("refused the cached kernels"), "the refused cache file was not reported");
		check_device_works(d, "after a refused binary");
		sb_cl_device_close(d);
	}
}

/* A kernel that does not compile: SB_ERR_DEVICE and the compiler's words reach the logger. */
static void test_build_failure(void)
{
	sb_cl_device *d = open_dev(0);
	if (!d)
		return;
	log_clear();
	cl_program prog = NULL;
	sb_status st = sb_cl_device_build(d, "broken",
	                                  "kernel void f(global float *x) { x[0] = no_such_name; }",
	                                  "", &prog, NULL);
	CHECK(st == SB_ERR_DEVICE, "a broken kernel gave %s, want SB_ERR_DEVICE", sb_status_str(st));
	CHECK(prog == NULL, "a broken kernel returned a program");
	CHECK(log_has("building kernels 'broken' failed"), "the build failure was not logged");
	CHECK(log_has("no_such_name"), "the compiler's build log did not reach the logger");
	sb_cl_device_close(d);
}

/* SB_FAULT_INJECT=opencl:0:open: opening opencl:0 fails with SB_ERR_DEVICE, opencl:1 opens. */
static void test_fault_open(void)
{
	setenv("SB_FAULT_INJECT", "opencl:0:open", 1);
	log_clear();
	sb_cl_device *d = NULL;
	sb_status st = sb_cl_device_open(ocl[0], &logger, &d);
	CHECK(st == SB_ERR_DEVICE && d == NULL, "injected open failure gave %s", sb_status_str(st));
	CHECK(log_has("injected"), "the injected open failure was not logged as injected");
	if (n_ocl > 1) {
		st = sb_cl_device_open(ocl[1], &logger, &d);
		CHECK(st == SB_OK, "opencl:1 failed to open with a fault aimed at opencl:0: %s",
		      sb_status_str(st));
		sb_cl_device_close(d);
	}
	unsetenv("SB_FAULT_INJECT");
}

/* alloc:K fails one allocation: the job that hits it gets SB_ERR_DEVICE_OOM (so the runner
 * retries), and the retry on the same device succeeds. alloc:K+ fails every retry too. */
static void test_fault_alloc(void)
{
	mem_sink ms;
	setenv("SB_FAULT_INJECT", "io:whatever,opencl:0:alloc:3", 1);
	sb_cl_device *d = open_dev(0);
	unsetenv("SB_FAULT_INJECT");
	if (!d)
		return;
	sb_status st = run_model(d, fault_x, fault_frames, 2, 44100, 0, &ms);
	CHECK(st == SB_ERR_DEVICE_OOM, "alloc:3 gave %s, want SB_ERR_DEVICE_OOM", sb_status_str(st));
	CHECK(!sb_cl_device_is_lost(d), "an allocation failure marked the device lost");
	mem_sink_free(&ms);
	st = run_model(d, fault_x, fault_frames, 2, 44100, 0, &ms);
	CHECK(st == SB_OK, "the retry after a one-off allocation failure gave %s",
	      sb_status_str(st));
	mem_sink_free(&ms);
	sb_cl_device_close(d);

	setenv("SB_FAULT_INJECT", "opencl:0:alloc:2+", 1);
	d = open_dev(0);
	unsetenv("SB_FAULT_INJECT");
	if (!d)
		return;
	for (int attempt = 0; attempt < 3; attempt++) {
		st = run_model(d, fault_x, fault_frames, 2, 44100, 1024 * (16 >> attempt), &ms);
		CHECK(st == SB_ERR_DEVICE_OOM, "alloc:2+ attempt %d gave %s, want SB_ERR_DEVICE_OOM",
		      attempt + 1, sb_status_str(st));
		mem_sink_free(&ms);
	}
	sb_cl_device_close(d);

	/* A malformed entry is reported and does nothing. */
	setenv("SB_FAULT_INJECT", "opencl:0:alloc:x", 1);
	log_clear();
	d = open_dev(0);
	unsetenv("SB_FAULT_INJECT");
	CHECK(log_has("ignoring 'opencl:0:alloc:x'"),
	      "a malformed SB_FAULT_INJECT entry was not reported");
	if (d) {
		st = run_model(d, fault_x, fault_frames, 2, 44100, 0, &ms);
		CHECK(st == SB_OK, "a malformed fault entry broke the device: %s", sb_status_str(st));
		mem_sink_free(&ms);
		sb_cl_device_close(d);
	}
}

/* A chunk size too big for the device: create() says SB_ERR_DEVICE_OOM up front (so the
 * runner halves the chunk) instead of failing later or taking the machine's memory. */
static void test_too_big(void)
{
	sb_cl_device *d = open_dev(0);
	if (!d)
		return;
	sb_classic_params p;
	sb_classic_params_default(&p);
	sb_classic_geom g;
	sb_classic_geometry(&p, 44100, &g);
	g.channels = 2;
	g.max_frames = 1 << 24;
	float *t = malloc(sizeof(float) * ((size_t)g.n_fft + 2 * (size_t)g.bins));
	sb_classic_tables(&p, 44100, g.n_fft, t, t + g.n_fft, t + g.n_fft + g.bins);
	g.win = t;
	g.bass_w = t + g.n_fft;
	g.voice_w = t + g.n_fft + g.bins;
	const sb_exec *x = ex(d);
	sb_classic_state *s = NULL;
	sb_status st = x->be->classic->create(x->d, &g, &s);
	CHECK(!s && st == SB_ERR_DEVICE_OOM, "a 16M-frame chunk gave %s, want SB_ERR_DEVICE_OOM",
	      sb_status_str(st));
	if (s)
		x->be->classic->destroy(s);
	free(t);
	sb_cl_device_close(d);
}

/* lost:K: the job gets SB_ERR_DEVICE_LOST after K chunks, the device stays lost (the next
 * job fails at once, so the runner goes to the CPU), and the other device is untouched. */
static void test_fault_lost(void)
{
	mem_sink ms;
	setenv("SB_FAULT_INJECT", "opencl:0:lost:2", 1);
	sb_cl_device *d = open_dev(0);
	sb_cl_device *d1 = n_ocl > 1 ? open_dev(1) : NULL;
	unsetenv("SB_FAULT_INJECT");
	if (!d)
		return;
	CHECK(!sb_cl_device_is_lost(d), "lost before any work");
	/* 2048-frame chunks: the 1 s input takes about 22 chunks, so the loss comes mid-job. */
	sb_status st = run_model(d, fault_x, fault_frames, 2, 44100, 2048, &ms);
	CHECK(st == SB_ERR_DEVICE_LOST, "lost:2 gave %s, want SB_ERR_DEVICE_LOST", sb_status_str(st));
	CHECK(sb_cl_device_is_lost(d), "is_lost() is 0 after a device loss");
	CHECK(ms.frames[0] < fault_frames, "a lost job wrote every frame");
	mem_sink_free(&ms);
	st = run_model(d, fault_x, fault_frames, 2, 44100, 0, &ms);
	CHECK(st == SB_ERR_DEVICE_LOST, "the job after a loss gave %s, want SB_ERR_DEVICE_LOST",
	      sb_status_str(st));
	CHECK(sb_cl_device_is_lost(d), "is_lost() did not stay set");
	mem_sink_free(&ms);
	sb_cl_device_close(d);
	if (d1) {
		st = run_model(d1, fault_x, fault_frames, 2, 44100, 2048, &ms);
		CHECK(st == SB_OK && !sb_cl_device_is_lost(d1),
		      "opencl:1 failed (%s) with a loss aimed at opencl:0", sb_status_str(st));
		mem_sink_free(&ms);
		sb_cl_device_close(d1);
	}

	setenv("SB_FAULT_INJECT", "opencl:0:lost:0", 1);
	d = open_dev(0);
	unsetenv("SB_FAULT_INJECT");
	if (!d)
		return;
	st = run_model(d, fault_x, fault_frames, 2, 44100, 0, &ms);
	CHECK(st == SB_ERR_DEVICE_LOST && ms.frames[0] == 0,
	      "lost:0 gave %s with %lld frames written, want SB_ERR_DEVICE_LOST before any output",
	      sb_status_str(st), (long long)ms.frames[0]);
	mem_sink_free(&ms);
	sb_cl_device_close(d);
}

/* Two devices opened and used from two threads at once (two workers of the engine). */
typedef struct {
	int index;
	sb_status st;
	mem_sink ms;
} worker_arg;

static void *worker(void *va)
{
	worker_arg *a = va;
	sb_cl_device *d = NULL;
	a->st = sb_cl_device_open(ocl[a->index], &logger, &d);
	mem_sink_init(&a->ms, 2);
	if (a->st == SB_OK) {
		a->st = run_ops(ex(d), fault_x, fault_frames, 2, 44100, 1024 * 20,
		                &a->ms);
		sb_cl_device_close(d);
	}
	return NULL;
}

/* Both threads also find the cache empty and write the same file (PoCL's two devices are
 * identical, so they share a key): the temporary-name-and-rename leaves one good file. */
static void test_two_devices_concurrently(void)
{
	if (n_ocl < 2) {
		printf("one OpenCL device only: concurrent test skipped\n");
		return;
	}
	if (cache_path[0])
		unlink(cache_path);
	mem_sink cpu;
	sb_status sc = run_ops(&cpu_x, fault_x, fault_frames, 2, 44100, 0, &cpu);
	CHECK(sc == SB_OK, "CPU path: %s", sb_status_str(sc));
	worker_arg args[2] = {{.index = 0}, {.index = 1}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, &args[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		char what[64];
		snprintf(what, sizeof what, "%s in a thread", ocl[i]->id);
		CHECK(args[i].st == SB_OK, "%s: %s", what, sb_status_str(args[i].st));
		if (args[i].st == SB_OK && sc == SB_OK)
			compare_stems(&args[i].ms, &cpu, fault_frames, 2, 1e-4, what);
		mem_sink_free(&args[i].ms);
	}
	mem_sink_free(&cpu);
	sb_cl_device *d = open_dev(0);
	if (d) {
		CHECK(sb_cl_device_program_cached(d), "no usable cache file after two concurrent builds");
		sb_cl_device_close(d);
	}
}

int main(void)
{
	/* Never touch the user's own cache when run by hand. */
	char tmpdir[] = "/tmp/sb-test-opencl-XXXXXX";
	if (!getenv("XDG_CACHE_HOME") && mkdtemp(tmpdir))
		setenv("XDG_CACHE_HOME", tmpdir, 1);
	unsetenv("SB_FAULT_INJECT");

	if (sb_devices_enumerate(&logger, &devices) != SB_OK) {
		fprintf(stderr, "cannot list devices\n");
		return 1;
	}
	for (size_t i = 0; i < sb_devices_count(devices) && n_ocl < 8; i++)
		if (!strcmp(sb_devices_get(devices, i)->backend->name, "opencl"))
			ocl[n_ocl++] = sb_devices_get(devices, i);
	if (n_ocl == 0) {
		printf("no OpenCL device: skipped\n");
		sb_devices_free(devices);
		return 77;
	}
	for (int i = 0; i < n_ocl; i++)
		printf("%s: %s\n", ocl[i]->id, ocl[i]->label);

	fault_x = make_mix(44100, 1.0, 2, &fault_frames);
	const sb_open_opts one = {1, SB_PREC_FP32, 0};
	if (sb_exec_open(sb_devices_get(devices, 0), &one, &logger, &cpu_x) != SB_OK) {
		fprintf(stderr, "cannot open the CPU backend\n");
		return 1;
	}

	test_kernel_cache();
	test_build_failure();
	sb_cl_device *d = open_dev(0);
	if (d) {
		test_matches_cpu(d);
		test_chunk_invariance(d);
		sb_cl_device_close(d);
	}
	test_fault_open();
	test_fault_alloc();
	test_too_big();
	test_fault_lost();
	test_two_devices_concurrently();

	free(fault_x);
	sb_devices_free(devices);
	free(log_text);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("all OpenCL checks passed\n");
	return failures ? 1 : 0;
}
