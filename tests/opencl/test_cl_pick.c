/* The product path measured per shape (engine/backend/opencl/cl_gemm_pick.h) on the first
 * OpenCL device (PoCL in CI), with SB_CL_GEMM=auto (a GPU measures by default; a CPU driver only
 * when asked). What a user would check:
 *   - the products are right while they are measured and after (against a double-precision
 *     host product, 1e-5 relative), whatever path each shape takes, and nothing beside them in
 *     the output changes (one output starts 3 floats in, with rows 5 floats apart: the timed
 *     runs write a scratch output, never this one);
 *   - the choice follows what was measured: with the times of two paths' runs counted 50 times
 *     (SB_FAULT_INJECT=opencl:0:tune-slow:KIND), every shape takes the third, for each of
 *     CLBlast, the own kernel and the tiled kernel; the device's description says so;
 *   - it is kept: a line a shape in products-HASH.txt in the kernel cache's folder, and a new
 *     process reads it and runs no timed run at all;
 *   - a damaged file is reported with its path and measured again (and rewritten whole); a
 *     file that cannot be written is reported, and the products stay right; two writers that
 *     each read the file before the other wrote keep both's shapes;
 *   - a path that gives wrong products (opencl:0:tune-wrong:tiled, one value read back wrong in
 *     its check before first use) is reported and left out, where measured and where kept;
 *   - a driver whose queue records no times (opencl:0:tune-notimes) is reported, its shapes
 *     keep the default and are kept so: the next process measures nothing;
 *   - with profiling on (bench --profile), nothing is measured;
 *   - without SB_CL_GEMM=auto a CPU driver is not measured (CLBlast, as before), and a GPU is.
 * And attention's three ways (in one pass, by tiles, or two products around a softmax),
 * measured per shape the same way (the default on a GPU; SB_CL_ATTENTION=auto here, on any
 * device):
 *   - the outputs are right while measured and after (against the host's, in double precision,
 *     1e-5 relative: heads of 16, 32 and 64, more items than heads, an output that starts 3
 *     floats in with rows 5 floats apart), nothing beside them changes;
 *   - with two ways' timed runs counted 50 times (tune-slow:split, :fused, :tiles) every shape
 *     takes the third, kept in attention-HASH.txt, and a new process times nothing;
 *   - one pass or tiles that give wrong results (tune-wrong:fused, tune-wrong:tiles) are
 *     reported and left out, where measured and where kept;
 *   - with the products measured too (SB_CL_GEMM=auto), the products' way is timed on its
 *     products' own choice: attention is decided only after them, and the products it runs
 *     are measured and kept (the own kernel, with the other two slowed);
 *   - with profiling on nothing is measured, and without SB_CL_ATTENTION=auto a CPU driver does
 *     not measure.
 * argv[1]: a scratch folder. Skipped (77) without an OpenCL device.
 */
#include "../check.h"
#include "log_capture.h"
#include "backend/backend.h"
#include "backend/opencl/cl_base.h"
#include "backend/opencl/cl_gemm_pick.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static unsigned rng = 99u;
static float rnd(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)(rng >> 8) / (float)(1u << 24) - 0.5f;
}

/* shapes as HTDemucs and the RoFormers give them: plain, B transposed, batched, and one whose
 * rows are not 16-byte aligned */
typedef struct {
	int M, N, K, tb, batch;
	float beta;
	int coff, pad; /* C starts coff floats in, its rows pad floats apart beyond N */
} shape;
static const shape shapes[] = {
	{96, 80, 64, 0, 1, 0.f, 0, 0}, {64, 72, 48, 1, 3, 0.f, 0, 0}, {33, 17, 29, 0, 2, 1.f, 3, 5},
};
#define NS ((int)(sizeof shapes / sizeof shapes[0]))

static char cache[4096];

static const sb_device *first_opencl(sb_device_list *list)
{
	for (size_t i = 0; i < sb_devices_count(list); i++) {
		const sb_device *d = sb_devices_get(list, i);
		if (strncmp(d->id, "opencl:", 7) == 0)
			return d;
	}
	return NULL;
}

/* One pass: shapes [from, to) once each, then the wait; each result against the host's
 * product. */
static int pass_some(sb_exec *x, const char *what, int from, int to)
{
	int bad = 0;
	for (int s = from; s < to; s++) {
		const shape *h = &shapes[s];
		const int ldc = h->N + h->pad;
		const size_t na = (size_t)h->batch * h->M * h->K, nb = (size_t)h->batch * h->K * h->N,
		             nc = (size_t)h->coff + (size_t)h->batch * h->M * ldc;
		float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb),
		      *c = malloc(sizeof(float) * nc), *got = malloc(sizeof(float) * nc);
		for (size_t i = 0; i < na; i++)
			a[i] = rnd();
		for (size_t i = 0; i < nb; i++)
			b[i] = rnd();
		for (size_t i = 0; i < nc; i++)
			c[i] = rnd();
		sb_bbuf *A = NULL, *B = NULL, *C = NULL;
		CHECK(x->be->alloc(x->d, na, &A) == SB_OK && x->be->alloc(x->d, nb, &B) == SB_OK &&
		      x->be->alloc(x->d, nc, &C) == SB_OK, "%s: alloc", what);
		if (!A || !B || !C)
			return 1;
		const sb_dv dA = {A, 0}, dB = {B, 0}, dC = {C, 0};
		x->be->upload(x->d, dA, a, na);
		x->be->upload(x->d, dB, b, nb);
		x->be->upload(x->d, dC, c, nc);
		const int ldb = h->tb ? h->K : h->N;
		x->be->ops->gemm(x->d, h->M, h->N, h->K, 1.f, dA, h->K, (long)h->M * h->K, dB, ldb,
		                 (long)h->K * h->N, h->tb, h->beta, sb_dv_at(dC, (size_t)h->coff), ldc,
		                 (long)h->M * ldc, h->batch, 1, 0, 0, 0);
		CHECK(x->be->finish(x->d) == SB_OK, "%s: the pass failed", what);
		x->be->download(x->d, got, dC, nc);
		double worst = 0.0;
		int touched = 0; /* floats outside the product's rows that changed */
		for (size_t o = 0; o < nc; o++) {
			const size_t r = o < (size_t)h->coff ? 0 : (o - (size_t)h->coff) % (size_t)ldc;
			if ((o < (size_t)h->coff || r >= (size_t)h->N) && got[o] != c[o])
				touched++;
		}
		for (int q = 0; q < h->batch; q++)
			for (int i = 0; i < h->M; i++)
				for (int j = 0; j < h->N; j++) {
					double ref = 0.0, mag = 0.0;
					for (int k = 0; k < h->K; k++) {
						const double av = a[(size_t)q * h->M * h->K + (size_t)i * h->K + k];
						const double bv = h->tb ? b[(size_t)q * h->K * h->N + (size_t)j * h->K + k]
						                        : b[(size_t)q * h->K * h->N + (size_t)k * h->N + j];
						ref += av * bv;
						mag += fabs(av * bv);
					}
					const size_t o = (size_t)h->coff + (size_t)q * h->M * ldc +
					                 (size_t)i * ldc + j;
					ref += h->beta * c[o];
					mag += fabs(h->beta * c[o]) + 1e-30;
					const double e = fabs(got[o] - ref) / mag;
					worst = e > worst ? e : worst;
				}
		if (worst > 1e-5 || touched) {
			bad++;
			fprintf(stderr, "FAIL %s: %dx%dx%d%s x%d is %.1e off the host's product, %d floats "
			        "beside it changed\n", what, h->M, h->N, h->K, h->tb ? " B^T" : "", h->batch,
			        worst, touched);
		}
		x->be->release(x->d, A);
		x->be->release(x->d, B);
		x->be->release(x->d, C);
		free(a), free(b), free(c), free(got);
	}
	return bad;
}

static int pass(sb_exec *x, const char *what)
{
	return pass_some(x, what, 0, NS);
}

/* attentions as HTDemucs and the RoFormers give them: heads of 16, 32 and 64, more items than
 * heads (an axial transformer's short sequences), an output off alignment with padded rows */
typedef struct {
	int nq, nk, heads, hd, batch;
	int ooff, pad; /* O starts ooff floats in, its rows pad floats apart beyond heads x hd */
} att_shape;
static const att_shape atts[] = {
	{70, 90, 2, 16, 1, 0, 0}, {40, 33, 2, 32, 3, 0, 0}, {65, 70, 1, 64, 1, 3, 5},
};
#define NA ((int)(sizeof atts / sizeof atts[0]))

/* One pass of every attention shape, then the wait; each output against the host's */
static int att_pass(sb_exec *x, const char *what)
{
	int bad = 0;
	for (int s = 0; s < NA; s++) {
		const att_shape *h = &atts[s];
		const int w = h->heads * h->hd, ldq = w, ldkv = 2 * w, ldo = w + h->pad;
		const long sq = (long)h->nq * ldq, skv = (long)h->nk * ldkv, so = (long)h->nq * ldo;
		const size_t nq = (size_t)h->batch * sq, nkv = (size_t)h->batch * skv,
		             no = (size_t)h->ooff + (size_t)h->batch * so;
		float *q = malloc(sizeof(float) * nq), *kv = malloc(sizeof(float) * nkv),
		      *o = malloc(sizeof(float) * no), *got = malloc(sizeof(float) * no);
		double *p = malloc(sizeof(double) * h->nk);
		for (size_t i = 0; i < nq; i++)
			q[i] = 4.f * rnd();
		for (size_t i = 0; i < nkv; i++)
			kv[i] = 4.f * rnd();
		for (size_t i = 0; i < no; i++)
			o[i] = rnd();
		sb_bbuf *Q = NULL, *KV = NULL, *O = NULL;
		CHECK(x->be->alloc(x->d, nq, &Q) == SB_OK && x->be->alloc(x->d, nkv, &KV) == SB_OK &&
		      x->be->alloc(x->d, no, &O) == SB_OK, "%s: alloc", what);
		if (!Q || !KV || !O)
			return 1;
		const sb_dv dQ = {Q, 0}, dKV = {KV, 0}, dO = {O, 0};
		x->be->upload(x->d, dQ, q, nq);
		x->be->upload(x->d, dKV, kv, nkv);
		x->be->upload(x->d, dO, o, no);
		const float scale = 1.f / sqrtf((float)h->hd);
		x->be->ops->attention(x->d, dQ, ldq, dKV, sb_dv_at(dKV, (size_t)w), ldkv, h->nq, h->nk,
		                      h->heads, h->hd, scale, sb_dv_at(dO, (size_t)h->ooff), ldo,
		                      h->batch, sq, skv, so, (sb_dv){NULL, 0});
		CHECK(x->be->finish(x->d) == SB_OK, "%s: the pass failed", what);
		x->be->download(x->d, got, dO, no);
		double d2 = 0, r2 = 0;
		int touched = 0;
		for (size_t i = 0; i < no; i++) {
			const size_t r = i < (size_t)h->ooff ? 0 : (i - (size_t)h->ooff) % (size_t)ldo;
			if ((i < (size_t)h->ooff || r >= (size_t)w) && got[i] != o[i])
				touched++;
		}
		for (int b = 0; b < h->batch; b++)
			for (int hh = 0; hh < h->heads; hh++)
				for (int i = 0; i < h->nq; i++) {
					const float *qi = q + b * sq + (long)i * ldq + hh * h->hd;
					double mx = -INFINITY, sum = 0;
					for (int j = 0; j < h->nk; j++) {
						const float *kj = kv + b * skv + (long)j * ldkv + hh * h->hd;
						double d = 0;
						for (int e = 0; e < h->hd; e++)
							d += (double)qi[e] * kj[e];
						p[j] = d * scale;
						mx = p[j] > mx ? p[j] : mx;
					}
					for (int j = 0; j < h->nk; j++)
						sum += (p[j] = exp(p[j] - mx));
					for (int e = 0; e < h->hd; e++) {
						double ref = 0;
						for (int j = 0; j < h->nk; j++)
							ref += p[j] * kv[b * skv + (long)j * ldkv + w + hh * h->hd + e];
						ref /= sum;
						const double g = got[(size_t)h->ooff + (size_t)(b * so + (long)i * ldo) +
						                     (size_t)(hh * h->hd + e)];
						d2 += (g - ref) * (g - ref);
						r2 += ref * ref;
					}
				}
		const double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
		if (!(rel <= 1e-5) || touched) {
			bad++;
			fprintf(stderr, "FAIL %s: attention %d x %d, %d heads of %d, %d items is %.1e off "
			        "the host's, %d floats beside it changed\n", what, h->nq, h->nk, h->heads,
			        h->hd, h->batch, rel, touched);
		}
		x->be->release(x->d, Q);
		x->be->release(x->d, KV);
		x->be->release(x->d, O);
		free(q), free(kv), free(o), free(got), free(p);
	}
	return bad;
}

static const char *tag = "products"; /* the kept file looked at: products or attention */

/* the kept file (the only TAG-*.txt in the cache folder), "" when there is none */
static void kept_file(char *path, size_t len)
{
	path[0] = '\0';
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/stembridge", cache);
	DIR *d = opendir(dir);
	if (!d)
		return;
	const size_t n = strlen(tag);
	for (struct dirent *e; (e = readdir(d));)
		if (!strncmp(e->d_name, tag, n) && e->d_name[n] == '-' && strlen(e->d_name) > n + 5 &&
		    !strcmp(e->d_name + strlen(e->d_name) - 4, ".txt")) /* not its .txt.lock */
			snprintf(path, len, "%.4000s/%.255s", dir, e->d_name);
	closedir(d);
}

/* how many of the file's shape lines name 'word' (-1: no file); *lines counts them all */
static int kept_count(const char *word, int *lines)
{
	char path[4400];
	kept_file(path, sizeof path);
	*lines = 0;
	FILE *f = path[0] ? fopen(path, "r") : NULL;
	if (!f)
		return -1;
	char line[256], w[32];
	int n = 0, M, N, K, tb, b, fl;
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#')
			continue;
		if (sscanf(line, "%d %d %d %d %d %d %31s", &M, &N, &K, &tb, &b, &fl, w) == 7) {
			(*lines)++;
			n += !strcmp(w, word);
		}
	}
	fclose(f);
	return n;
}

static void forget(void)
{
	char path[4400];
	kept_file(path, sizeof path);
	if (path[0])
		remove(path);
}

/* Opens the device, runs 'passes' passes, checks each; returns the device's timed runs */
static long session(const sb_device *dev, int passes, int profiling, const char *what,
                    char *desc, size_t desc_len)
{
	sb_exec x;
	log_len = 0;
	log_text[0] = '\0';
	if (sb_exec_open(dev, NULL, &logger, &x) != SB_OK) {
		CHECK(0, "%s: %s does not open", what, dev->id);
		return -1;
	}
	if (profiling)
		x.be->set_profiling(x.d, 1);
	const int att = !strcmp(tag, "attention");
	int bad = 0;
	for (int p = 0; p < passes; p++)
		bad += att ? att_pass(&x, what) : pass(&x, what);
	CHECK(bad == 0, "%s: %d wrong %s", what, bad, att ? "attentions" : "products");
	sb_cl_pick *pick = att ? x.d->att_pick : x.d->pick;
	snprintf(desc, desc_len, "%s", att ? pick ? sb_cl_pick_describe(pick) : ""
	                                   : x.be->describe(x.d));
	const long runs = pick ? sb_cl_pick_runs(pick) : -1;
	sb_exec_close(&x);
	return runs;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_cl_pick SCRATCH_DIR\n");
		return 2;
	}
	snprintf(cache, sizeof cache, "%s/pick-cache", argv[1]);
	mkdir(argv[1], 0755);
	mkdir(cache, 0755);
	setenv("XDG_CACHE_HOME", cache, 1);
	sb_device_list *list = NULL;
	if (sb_devices_enumerate(&logger, &list) != SB_OK)
		return 1;
	const sb_device *dev = first_opencl(list);
	if (!dev) {
		printf("SKIP: no OpenCL device here (PoCL gives one)\n");
		sb_devices_free(list);
		return 77;
	}
	printf("device: %s\n", dev->label);
	char desc[512];
	int lines = 0;

	/* by default a GPU measures; a CPU driver does not (CLBlast, or the own kernel) */
	unsetenv("SB_CL_GEMM");
	unsetenv("SB_FAULT_INJECT");
	forget();
	const int gpu = dev->type == SB_DEV_GPU_DISCRETE || dev->type == SB_DEV_GPU_INTEGRATED ||
	                dev->type == SB_DEV_ACCELERATOR;
	long runs = session(dev, 1, 0, "default", desc, sizeof desc);
	if (gpu) {
		CHECK(runs > 0 && strstr(desc, "measured per shape"), "a GPU did not measure its "
		      "products by default: %s", desc);
	} else {
		CHECK(runs == -1 && !strstr(desc, "measured"), "a CPU driver measured its products "
		      "without SB_CL_GEMM=auto: %s", desc);
		CHECK(kept_count("own", &lines) == -1, "a file of products was written without "
		      "measuring");
	}

	/* each path made slower in two: the third wins every shape */
	setenv("SB_CL_GEMM", "auto", 1);
	const struct {
		const char *faults, *word;
		sb_cl_gemm_kind kind;
		int needs_clblast;
	} wins[] = {
		{"opencl:0:tune-slow:own,opencl:0:tune-slow:tiled", "clblast", SB_CL_GEMM_CLBLAST, 1},
		{"opencl:0:tune-slow:clblast,opencl:0:tune-slow:tiled", "own", SB_CL_GEMM_OWN, 0},
		{"opencl:0:tune-slow:clblast,opencl:0:tune-slow:own", "tiled", SB_CL_GEMM_TILED, 0},
	};
	for (size_t w = 0; w < sizeof wins / sizeof wins[0]; w++) {
		if (wins[w].needs_clblast && !sb_cl_blas_available()) {
			printf("  (no CLBlast in this build: its case left out)\n");
			continue;
		}
		forget();
		setenv("SB_FAULT_INJECT", wins[w].faults, 1);
		runs = session(dev, 4, 0, wins[w].word, desc, sizeof desc);
		const int n = kept_count(wins[w].word, &lines);
		printf("  %-8s %ld timed runs, kept %d of %d shapes: %s\n", wins[w].word, runs, n, lines,
		       desc);
		CHECK(runs > 0, "%s: nothing was measured", wins[w].word);
		CHECK(n == NS && lines == NS, "%s: %d of %d kept shapes name it, want all %d",
		      wins[w].word, n, lines, NS);
		char want[128];
		snprintf(want, sizeof want, "%s for %d", sb_cl_gemm_name(wins[w].kind), NS);
		CHECK(strstr(desc, want) != NULL, "%s: the description is '%s', want '%s'", wins[w].word,
		      desc, want);
		CHECK(strstr(log_text, "more shapes measured") != NULL, "%s: no log of the choice:\n%s",
		      wins[w].word, log_text);
	}
	unsetenv("SB_FAULT_INJECT");

	/* kept: a new process reads the choices and measures nothing */
	runs = session(dev, 2, 0, "kept", desc, sizeof desc);
	printf("  kept     %ld timed runs: %s\n", runs, desc);
	CHECK(runs == 0, "the kept choices were measured again (%ld timed runs)", runs);
	char want[128];
	snprintf(want, sizeof want, "measured per shape: tiled kernel for %d", NS);
	CHECK(strstr(desc, want) != NULL, "the kept choices were not used: %s", desc);
	CHECK(strstr(log_text, "shapes measured before, from") != NULL, "the file's reading is not "
	      "logged:\n%s", log_text);

	/* a path that gives wrong products on the device (a driver that miscompiles it): checked
	 * before its first use, left out with a warning, even where the kept file names it */
	setenv("SB_FAULT_INJECT", "opencl:0:tune-wrong:tiled", 1);
	runs = session(dev, 2, 0, "wrong, kept", desc, sizeof desc);
	CHECK(strstr(log_text, "the tiled kernel gave wrong products") != NULL, "a wrong path is "
	      "not reported:\n%s", log_text);
	CHECK(!strstr(desc, "tiled"), "a wrong path still serves the kept shapes: %s", desc);
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-wrong:tiled,opencl:0:tune-slow:clblast,"
	       "opencl:0:tune-slow:own", 1);
	runs = session(dev, 4, 0, "wrong, measured", desc, sizeof desc);
	if (sb_cl_blas_available()) /* else the own kernel is left alone: nothing measured */
		CHECK(kept_count("tiled", &lines) == 0 && lines == NS, "a wrong path was chosen (%s), "
		      "or shapes are missing (%d)", desc, lines);
	CHECK(!strstr(desc, "tiled"), "a wrong path was chosen: %s", desc);
	unsetenv("SB_FAULT_INJECT");

	/* a damaged file: reported with its path, measured again, rewritten whole */
	char path[4400];
	kept_file(path, sizeof path);
	FILE *f = fopen(path, "a");
	if (f) {
		fputs("96 80 sixty-four 0 1 0 own\n", f);
		fclose(f);
	}
	runs = session(dev, 4, 0, "damaged", desc, sizeof desc);
	char said[4600];
	snprintf(said, sizeof said, "ignoring %s", path);
	CHECK(strstr(log_text, said) != NULL, "a damaged file is not reported:\n%s", log_text);
	CHECK(runs > 0, "a damaged file's shapes were not measured again");
	kept_count("own", &lines);
	CHECK(lines == NS, "the damaged file was not rewritten whole: %d shape lines", lines);

	/* a file that cannot be written (its name taken by a folder): reported, products right */
	forget();
	mkdir(path, 0755);
	runs = session(dev, 4, 0, "unwritable", desc, sizeof desc);
	CHECK(runs > 0, "nothing measured beside an unwritable file");
	CHECK(strstr(log_text, "cannot keep the measured matrix products") != NULL,
	      "an unwritable file is not reported:\n%s", log_text);
	rmdir(path);

	/* a driver whose queue records no times: said once, every shape keeps the default and is
	 * kept so, and the next process measures nothing */
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-notimes", 1);
	runs = session(dev, 2, 0, "no times", desc, sizeof desc);
	unsetenv("SB_FAULT_INJECT");
	const char *def = sb_cl_blas_available() ? "clblast" : "own";
	CHECK(strstr(log_text, "not measured (the driver gives no times") != NULL,
	      "a driver without times is not reported:\n%s", log_text);
	CHECK(kept_count(def, &lines) == NS && lines == NS, "a driver without times: %d shapes "
	      "kept, want all %d through %s", lines, NS, def);
	runs = session(dev, 2, 0, "no times, kept", desc, sizeof desc);
	CHECK(runs == 0, "a driver without times was measured again (%ld timed runs)", runs);

	/* two writers (two processes, or two cards of one name): each read the file before the
	 * other wrote it, and neither drops the other's shapes */
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-slow:clblast,opencl:0:tune-slow:tiled", 1);
	sb_exec x1, x2;
	if (sb_exec_open(dev, NULL, &logger, &x1) == SB_OK) {
		if (sb_exec_open(dev, NULL, &logger, &x2) == SB_OK) {
			int bad = 0;
			for (int p = 0; p < 4; p++) /* the first products open both files' readings */
				bad += pass_some(&x1, "writer 1", 0, 1) + pass_some(&x2, "writer 2", 0, 1);
			for (int p = 0; p < 4; p++)
				bad += pass_some(&x1, "writer 1", 1, 2) + pass_some(&x2, "writer 2", 2, NS);
			CHECK(bad == 0, "two writers: %d wrong products", bad);
			const int own = kept_count("own", &lines);
			CHECK(own == NS && lines == NS, "two writers kept %d shapes (%d own), want all %d",
			      lines, own, NS);
			sb_exec_close(&x2);
		}
		sb_exec_close(&x1);
	}
	unsetenv("SB_FAULT_INJECT");

	/* profiling: nothing measured */
	forget();
	runs = session(dev, 2, 1, "profiling", desc, sizeof desc);
	CHECK(runs == 0, "products were measured while profiling (%ld timed runs)", runs);

	/* attention: a CPU driver measures it only when asked, a GPU by default */
	unsetenv("SB_CL_GEMM");
	unsetenv("SB_CL_ATTENTION");
	tag = "attention";
	forget();
	runs = session(dev, 1, 0, "attention, default", desc, sizeof desc);
	if (gpu)
		CHECK(runs > 0, "a GPU did not measure its attention by default");
	else
		CHECK(runs == -1 && kept_count("fused", &lines) == -1, "a CPU driver measured its "
		      "attention without SB_CL_ATTENTION=auto");
	setenv("SB_CL_ATTENTION", "auto", 1);
	/* the products on one path (a GPU would measure them too: see "both measured" below) */
	setenv("SB_CL_GEMM", "own", 1);
	const struct {
		const char *faults, *word, *name;
	} ways[] = {
		{"opencl:0:tune-slow:split,opencl:0:tune-slow:tiles", "fused", "attention in one pass"},
		{"opencl:0:tune-slow:split,opencl:0:tune-slow:fused", "tiles", "attention by tiles"},
		{"opencl:0:tune-slow:fused,opencl:0:tune-slow:tiles", "split",
		 "attention as two products and a softmax"},
	};
	for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
		forget();
		setenv("SB_FAULT_INJECT", ways[w].faults, 1);
		runs = session(dev, 4, 0, ways[w].word, desc, sizeof desc);
		const int n = kept_count(ways[w].word, &lines);
		printf("  %-8s %ld timed runs, kept %d of %d attention shapes: %s\n", ways[w].word, runs,
		       n, lines, desc);
		CHECK(runs > 0, "attention %s: nothing was measured", ways[w].word);
		CHECK(n == NA && lines == NA, "attention %s: %d of %d kept shapes name it, want all %d",
		      ways[w].word, n, lines, NA);
		snprintf(want, sizeof want, "%s for %d", ways[w].name, NA);
		CHECK(strstr(desc, want) != NULL, "attention %s: the description is '%s', want '%s'",
		      ways[w].word, desc, want);
		CHECK(strstr(log_text, "attention on ") && strstr(log_text, "more shapes measured"),
		      "attention %s: no log of the choice:\n%s", ways[w].word, log_text);
	}
	unsetenv("SB_FAULT_INJECT");
	runs = session(dev, 2, 0, "attention, kept", desc, sizeof desc);
	CHECK(runs == 0, "the kept attention choices were measured again (%ld timed runs)", runs);
	snprintf(want, sizeof want, "attention as two products and a softmax for %d", NA);
	CHECK(strstr(desc, want) != NULL, "the kept attention choices were not used: %s", desc);
	/* one pass, or tiles, that give wrong results: left out, measured or kept */
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-wrong:fused,opencl:0:tune-wrong:tiles,"
	       "opencl:0:tune-slow:split", 1);
	runs = session(dev, 4, 0, "attention, wrong", desc, sizeof desc);
	CHECK(strstr(log_text, "attention in one pass gave wrong results") != NULL &&
	      strstr(log_text, "attention by tiles gave wrong results") != NULL, "a wrong "
	      "attention is not reported:\n%s", log_text);
	CHECK(kept_count("fused", &lines) <= 0 && kept_count("tiles", &lines) <= 0 &&
	      !strstr(desc, "one pass") && !strstr(desc, "tiles"), "a wrong attention was chosen: "
	      "%s", desc); /* one way left: nothing measured, nothing kept */
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-wrong:tiles,opencl:0:tune-slow:split", 1);
	runs = session(dev, 4, 0, "attention, tiles wrong", desc, sizeof desc);
	CHECK(strstr(log_text, "attention by tiles gave wrong results") != NULL, "wrong tiles are "
	      "not reported:\n%s", log_text);
	snprintf(want, sizeof want, "attention in one pass for %d", NA);
	CHECK(kept_count("fused", &lines) == NA && lines == NA && strstr(desc, want) != NULL,
	      "with tiles wrong and the products' way slowed, attention is '%s' (%d of %d kept "
	      "shapes in one pass), want '%s'", desc, kept_count("fused", &lines), lines, want);
	forget();
	setenv("SB_FAULT_INJECT", "opencl:0:tune-slow:split,opencl:0:tune-slow:tiles", 1);
	session(dev, 4, 0, "attention, fused kept", desc, sizeof desc);
	setenv("SB_FAULT_INJECT", "opencl:0:tune-wrong:fused", 1);
	runs = session(dev, 2, 0, "attention, wrong kept", desc, sizeof desc);
	CHECK(strstr(log_text, "attention in one pass gave wrong results") != NULL &&
	      !strstr(desc, "one pass"), "a wrong attention still serves the kept shapes: %s", desc);
	unsetenv("SB_FAULT_INJECT");

	/* with the products measured too: the products' way counts only on decided products */
	forget();
	tag = "products";
	forget();
	setenv("SB_CL_GEMM", "auto", 1);
	setenv("SB_FAULT_INJECT", "opencl:0:tune-slow:fused,opencl:0:tune-slow:tiles,"
	       "opencl:0:tune-slow:clblast,opencl:0:tune-slow:tiled", 1);
	sb_exec x;
	const int opened = sb_exec_open(dev, NULL, &logger, &x) == SB_OK;
	CHECK(opened, "both measured: %s does not open", dev->id);
	if (opened) {
		int bad = att_pass(&x, "both measured"), passes = 1;
		snprintf(desc, sizeof desc, "%s", sb_cl_pick_describe(x.d->att_pick));
		CHECK(strstr(desc, "none yet") != NULL, "attention was decided in the first pass, before "
		      "its products: %s", desc);
		snprintf(want, sizeof want, "attention as two products and a softmax for %d", NA);
		int products_at = 0; /* the pass after which every product shape was decided */
		while (passes < 12 && !strstr(sb_cl_pick_describe(x.d->att_pick), want)) {
			if (!products_at && !strstr(sb_cl_pick_describe(x.d->pick), "none yet") &&
			    sb_cl_pick_count(x.d->pick, SB_CL_GEMM_OWN) >= 2 * NA)
				products_at = passes;
			bad += att_pass(&x, "both measured");
			passes++;
		}
		/* each way needs 3 counted runs (cl_gemm_pick.c: RUNS), a run a pass here, and the
		 * products' way's count only once its products are decided */
		CHECK(products_at > 0 && passes >= products_at + 3, "both measured: attention was "
		      "decided after pass %d, its products after pass %d: its products' way was timed "
		      "on undecided products", passes, products_at);
		snprintf(desc, sizeof desc, "%s", sb_cl_pick_describe(x.d->att_pick));
		printf("  both     attention decided after %d passes: %s; products: %s\n", passes, desc,
		       sb_cl_pick_describe(x.d->pick));
		CHECK(bad == 0, "both measured: %d wrong attentions", bad);
		CHECK(strstr(desc, want) != NULL, "both measured: attention is '%s', want '%s'", desc,
		      want);
		sb_exec_close(&x);
		const int own = kept_count("own", &lines);
		CHECK(own >= 2 * NA && own == lines, "both measured: %d of %d kept product shapes take "
		      "the own kernel, want the %d or more of the products' way, all of them", own, lines,
		      2 * NA);
	}
	tag = "attention";
	unsetenv("SB_CL_GEMM");
	unsetenv("SB_FAULT_INJECT");
	forget();
	runs = session(dev, 2, 1, "attention, profiling", desc, sizeof desc);
	CHECK(runs == 0, "attention was measured while profiling (%ld timed runs)", runs);

	unsetenv("SB_CL_ATTENTION");
	unsetenv("SB_CL_GEMM");
	sb_devices_free(list);
	printf("%d failure(s)\n", failures);
	return failures != 0;
}
