/* HTDemucs against the reference (shared/golden/htdemucs, see its README): models opened
 * through sb_model_open as a user would, outputs compared by relative L2 error.
 *
 *   test_demucs GOLDEN_DIR CASE
 *
 * CASE: tiny (one segment and every activation), pipeline (12 s through separate()), mid,
 * full (a released-size model with random weights runs), bag, errors (bad files and weights
 * give clear errors), safetensors (the reader on its own).
 */
#include "demucs/demucs.h"
#include "demucs/safetensors.h"
#include "demucs/thread_pool.h"
#include "mem_sink.h"
#include "core/device.h"
#include "models/model.h"
#include "opencl/cl_device.h"
#include "random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *golden;
static int failures;
static char last_error[2048];

#define FAIL(...)                                                                                \
	do {                                                                                         \
		printf("FAIL %s:%d: ", __FILE__, __LINE__);                                              \
		printf(__VA_ARGS__);                                                                     \
		printf("\n");                                                                            \
		failures++;                                                                              \
	} while (0)

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level == SB_LOG_ERROR)
		snprintf(last_error, sizeof last_error, "%s", msg);
	printf("  [%s] %s\n", level == SB_LOG_ERROR ? "error" : level == SB_LOG_WARNING ? "warn" : "info",
	       msg);
}
static const sb_logger logger = {log_fn, NULL};

static double rel_l2(const float *a, const float *ref, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		const double d = (double)a[i] - ref[i];
		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

static float *read_all(const sb_safetensors *st, const char *name, int64_t *numel)
{
	const sb_st_tensor *t = sb_safetensors_find(st, name);
	if (!t)
		return NULL;
	float *d = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
	if (d && sb_safetensors_read_f32(st, name, NULL, 0, d, "test", &logger) != SB_OK) {
		free(d);
		return NULL;
	}
	if (numel)
		*numel = t->numel;
	return d;
}

static sb_status open_golden_model(const char *name, sb_model **m)
{
	const char *dirs[] = {golden, NULL};
	return sb_model_open(name, dirs, &logger, m);
}

/* ---- one segment and its activations ---- */

#define MAX_TAPS 64
typedef struct {
	int n;
	char name[MAX_TAPS][64];
	float *data[MAX_TAPS];
	int64_t numel[MAX_TAPS];
} taps;

static void tap_fn(void *user, const char *name, const float *data, int ndim,
                   const int64_t *shape)
{
	taps *t = user;
	if (t->n == MAX_TAPS)
		return;
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	snprintf(t->name[t->n], 64, "act.%s", name);
	t->data[t->n] = malloc(sizeof(float) * (size_t)n);
	memcpy(t->data[t->n], data, sizeof(float) * (size_t)n);
	t->numel[t->n++] = n;
}

/* The first OpenCL device (PoCL in CI), opened; NULL when there is none. */
static sb_device_list *devices;
static sb_cl_device *open_cl(void)
{
	if (sb_devices_enumerate(&logger, &devices) != SB_OK)
		return NULL;
	for (size_t i = 0; i < sb_devices_count(devices); i++) {
		const sb_device_props *p = sb_devices_get(devices, i);
		sb_cl_device *d = NULL;
		if (p->opencl_index >= 0 && sb_cl_device_open(p, &logger, &d) == SB_OK) {
			printf("OpenCL device: %s\n", p->label);
			return d;
		}
	}
	return NULL;
}

/* Run one segment of 'model' on the io file's input (on 'cl' when not NULL); output within
 * out_tol, and (when acts) every act.* within 2e-3, the first one past it named. */
static void segment_case(const char *model, const char *io_name, double out_tol, int acts,
                         sb_cl_device *cl)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", golden, io_name);
	sb_model *m = NULL;
	sb_safetensors *io = NULL;
	if (open_golden_model(model, &m) != SB_OK) {
		FAIL("%s: cannot open: %s", model, last_error);
		return;
	}
	if (sb_safetensors_open(path, &logger, &io) != SB_OK) {
		FAIL("%s: cannot open", path);
		sb_model_free(m);
		return;
	}
	const sb_htdemucs *net = sb_demucs_bag_net(sb_demucs_model_bag(m), 0);
	int64_t n_in = 0, n_out = 0;
	float *in = read_all(io, "input", &n_in), *want = read_all(io, "output", &n_out);
	float *got = malloc(sizeof(float) * (size_t)n_out);
	sb_pool *pool = NULL;
	sb_pool_new(0, &pool);
	taps t = {0};
	sb_htdemucs_cl *c = NULL;
	sb_status st = cl ? sb_htdemucs_cl_new(net, cl, &logger, &c) : SB_OK;
	const double t0 = sb_now();
	if (st == SB_OK && c)
		st = sb_htdemucs_forward_cl(c, pool, NULL, in, got, acts ? tap_fn : NULL, &t, &logger);
	else if (st == SB_OK)
		st = sb_htdemucs_forward(net, pool, NULL, in, got, acts ? tap_fn : NULL, &t, &logger);
	const double dt = sb_now() - t0;
	sb_htdemucs_cl_free(c);
	if (st != SB_OK) {
		FAIL("%s: forward failed: %s", model, sb_status_str(st));
	} else {
		const double e = rel_l2(got, want, (size_t)n_out);
		printf("%s: one segment in %.2f s (%s, %lld parameters)\n", model, dt,
		       cl ? "OpenCL" : "native CPU", (long long)sb_htdemucs_params(net));
		printf("  %-28s rel L2 %.3e (limit %.0e)\n", "output", e, out_tol);
		if (!(e <= out_tol))
			FAIL("%s: output rel L2 %.3e > %.0e", model, e, out_tol);
		const char *first = NULL;
		for (int i = 0; acts && i < sb_safetensors_count(io); i++) {
			const sb_st_tensor *g = sb_safetensors_at(io, i);
			if (strncmp(g->name, "act.", 4))
				continue;
			int k = 0;
			while (k < t.n && strcmp(t.name[k], g->name))
				k++;
			if (k == t.n) {
				FAIL("%s: the engine reported no %s", model, g->name);
				continue;
			}
			if (t.numel[k] != g->numel) {
				FAIL("%s: %s has %lld values, expected %lld", model, g->name,
				     (long long)t.numel[k], (long long)g->numel);
				continue;
			}
			float *ref = read_all(io, g->name, NULL);
			const double e2 = rel_l2(t.data[k], ref, (size_t)g->numel);
			free(ref);
			printf("  %-28s rel L2 %.3e\n", g->name, e2);
			if (!(e2 <= 2e-3) && !first)
				first = g->name;
		}
		if (first)
			FAIL("%s: first layer past 2e-3: %s", model, first);
	}
	for (int i = 0; i < t.n; i++)
		free(t.data[i]);
	sb_pool_free(pool);
	free(in);
	free(want);
	free(got);
	sb_safetensors_close(io);
	sb_model_free(m);
}

/* ---- the whole-file pipeline ---- */

/* planar [ch][n] to interleaved */
static float *interleave(const float *x, int ch, int64_t n)
{
	float *o = malloc(sizeof(float) * (size_t)(ch * n));
	for (int c = 0; c < ch; c++)
		for (int64_t i = 0; i < n; i++)
			o[i * ch + c] = x[(size_t)c * n + i];
	return o;
}

/* separate() of 'model' on in [ch][n] into sink, on 'pipeline_cl' when set */
static sb_cl_device *pipeline_cl;
static sb_status run_pipeline(sb_model *m, const float *in, int ch, int64_t n, mem_sink *sink,
                              double *seconds)
{
	float *il = interleave(in, ch, n);
	sb_source *src = NULL;
	sb_status st = sb_source_memory(il, n, ch, 44100, &src);
	mem_sink_init(sink, ch);
	sb_run_ctx ctx = {.log = &logger, .threads = 0, .seed = 1, .cl = pipeline_cl};
	const double t0 = sb_now();
	if (st == SB_OK)
		st = sb_model_separate(m, &ctx, src, &sink->sink);
	if (seconds)
		*seconds = sb_now() - t0;
	if (src)
		src->close(src);
	free(il);
	return st;
}

/* the sink's stems (SB order, interleaved) as the reference's [source][ch][n] */
static float *sink_as_reference(const mem_sink *s, const sb_model *m, int ch, int64_t n)
{
	static const char *const ref_order[4] = {"drums", "bass", "other", "vocals"};
	float *o = malloc(sizeof(float) * (size_t)(4 * ch * n));
	for (int r = 0; r < 4; r++) {
		int k = 0;
		while (k < SB_N_STEMS && strcmp(m->info.stem_names[k], ref_order[r]))
			k++;
		for (int c = 0; c < ch; c++)
			for (int64_t i = 0; i < n; i++)
				o[((size_t)r * ch + c) * n + i] =
					k < SB_N_STEMS && s->frames[k] == n ? s->data[k][i * ch + c] : NAN;
	}
	return o;
}

static void pipeline_case(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/htdemucs-tiny-io.safetensors", golden);
	sb_model *m = NULL;
	sb_safetensors *io = NULL;
	if (open_golden_model("htdemucs-tiny", &m) != SB_OK ||
	    sb_safetensors_open(path, &logger, &io) != SB_OK) {
		FAIL("cannot open htdemucs-tiny or %s", path);
		sb_model_free(m);
		return;
	}
	int64_t n_in = 0, n_out = 0;
	float *in = read_all(io, "pipeline.input", &n_in), *want = read_all(io, "pipeline.output", &n_out);
	const int64_t n = n_in / 2;
	mem_sink sink;
	double secs = 0;
	sb_status st = run_pipeline(m, in, 2, n, &sink, &secs);
	if (st != SB_OK) {
		FAIL("pipeline failed: %s (%s)", sb_status_str(st), last_error);
	} else {
		float *got = sink_as_reference(&sink, m, 2, n);
		const double e = rel_l2(got, want, (size_t)n_out);
		printf("htdemucs-tiny pipeline, %.1f s of audio in %.2f s\n", (double)n / 44100, secs);
		printf("  %-28s rel L2 %.3e (limit 2e-3)\n", "pipeline.output", e);
		static const char *const names[4] = {"drums", "bass", "other", "vocals"};
		for (int s = 0; s < 4; s++)
			printf("    %-26s rel L2 %.3e\n", names[s],
			       rel_l2(got + (size_t)s * 2 * n, want + (size_t)s * 2 * n, (size_t)(2 * n)));
		if (!(e <= 2e-3))
			FAIL("pipeline.output rel L2 %.3e > 2e-3", e);
		free(got);
	}
	mem_sink_free(&sink);
	free(in);
	free(want);
	sb_safetensors_close(io);
	sb_model_free(m);
}

/* ---- a full-size model with random weights ---- */

static sb_cl_device *open_cl(void);

/* cl: also run the segment there and compare it with the native path (within 1e-4) */
static void full_case(sb_cl_device *cl)
{
	char shapes[4096], path[] = "/tmp/sb-demucs-full-XXXXXX";
	snprintf(shapes, sizeof shapes, "%s/released-shapes.json", golden);
	const int fd = mkstemp(path);
	if (fd < 0) {
		FAIL("mkstemp");
		return;
	}
	close(fd);
	double t0 = sb_now();
	if (random_model_write(shapes, "htdemucs", path, NULL) != 0) {
		FAIL("cannot write a random htdemucs to %s", path);
		unlink(path);
		return;
	}
	printf("random full-size htdemucs written in %.1f s\n", sb_now() - t0);
	sb_model *m = NULL;
	t0 = sb_now();
	if (sb_demucs_model_open(path, "htdemucs", NULL, &logger, &m) != SB_OK) {
		FAIL("full-size htdemucs does not open: %s", last_error);
		unlink(path);
		return;
	}
	printf("opened in %.1f s: %s\n", sb_now() - t0, m->info.description);
	const sb_htdemucs *net = sb_demucs_bag_net(sb_demucs_model_bag(m), 0);
	if (sb_htdemucs_params(net) != 41984456)
		FAIL("full-size htdemucs has %lld parameters, expected 41984456",
		     (long long)sb_htdemucs_params(net));
	const int64_t L = sb_htdemucs_cfg(net)->segment_length;
	float *in = malloc(sizeof(float) * (size_t)(2 * L));
	float *out = malloc(sizeof(float) * (size_t)(8 * L));
	uint64_t seed = 7;
	for (int64_t i = 0; i < 2 * L; i++)
		in[i] = 0.3f * sinf(0.01f * (float)(i % L)) +
		        0.1f * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
	sb_pool *pool = NULL;
	sb_pool_new(0, &pool);
	t0 = sb_now();
	sb_status st = sb_htdemucs_forward(net, pool, NULL, in, out, NULL, NULL, &logger);
	const double dt = sb_now() - t0;
	if (st != SB_OK) {
		FAIL("full-size forward failed: %s", sb_status_str(st));
	} else {
		int64_t bad = 0;
		double energy = 0;
		for (int64_t i = 0; i < 8 * L; i++) {
			bad += !isfinite(out[i]);
			energy += (double)out[i] * out[i];
		}
		printf("full-size htdemucs: one segment in %.2f s (%d threads), output rms %.3g\n", dt,
		       sb_pool_threads(pool), sqrt(energy / (double)(8 * L)));
		if (bad)
			FAIL("full-size output has %lld non-finite values", (long long)bad);
		if (!(energy > 0))
			FAIL("full-size output is silent");
	}
	sb_htdemucs_cl *c = NULL;
	if (st == SB_OK && cl && sb_htdemucs_cl_new(net, cl, &logger, &c) == SB_OK) {
		float *dev_out = malloc(sizeof(float) * (size_t)(8 * L));
		t0 = sb_now();
		st = sb_htdemucs_forward_cl(c, pool, NULL, in, dev_out, NULL, NULL, &logger);
		const double e = rel_l2(dev_out, out, (size_t)(8 * L));
		printf("full-size htdemucs on OpenCL: one segment in %.2f s, rel L2 to the native path "
		       "%.3e (limit 1e-4)\n", sb_now() - t0, e);
		if (st != SB_OK || !(e <= 1e-4))
			FAIL("full-size OpenCL: %s, rel L2 %.3e", sb_status_str(st), e);
		free(dev_out);
		sb_htdemucs_cl_free(c);
	} else if (cl) {
		FAIL("full-size OpenCL state: %s", last_error);
	}
	sb_pool_free(pool);
	free(in);
	free(out);
	sb_model_free(m);
	unlink(path);
}

/* ---- files that must be refused ---- */

/* the tiny model's tensors, for rewriting with one change */
typedef struct {
	int n;
	sb_st_write_tensor t[1200];
	float *data[1200];
	const char *meta[64];
} model_copy;

static int copy_model(const char *path, const char *prefix, model_copy *mc, int append)
{
	sb_safetensors *st;
	if (sb_safetensors_open(path, &logger, &st) != SB_OK)
		return -1;
	if (!append)
		memset(mc, 0, sizeof *mc);
	for (int i = 0; i < sb_safetensors_count(st); i++) {
		const sb_st_tensor *t = sb_safetensors_at(st, i);
		sb_st_write_tensor *w = &mc->t[mc->n];
		char name[256];
		snprintf(name, sizeof name, "%s%s", prefix, t->name);
		w->name = strdup(name);
		w->ndim = t->ndim;
		memcpy(w->shape, t->shape, sizeof w->shape);
		mc->data[mc->n] = read_all(st, t->name, NULL);
		w->data = mc->data[mc->n];
		mc->n++;
	}
	static const char *const keys[] = {"channels", "bottom_channels", "t_layers", "t_heads",
	                                   "dconv_mode", "sources", "samplerate", "segment",
	                                   "audio_channels"};
	static char store[2][16][64];
	static char keystore[2][16][64];
	int nm = 0;
	while (mc->meta[nm])
		nm += 2;
	const int slot = append ? 1 : 0;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		snprintf(keystore[slot][k], 64, "%s%s", prefix, keys[k]);
		snprintf(store[slot][k], 64, "%s", sb_safetensors_meta(st, keys[k]));
		mc->meta[nm++] = keystore[slot][k];
		mc->meta[nm++] = store[slot][k];
	}
	mc->meta[nm] = NULL;
	sb_safetensors_close(st);
	return 0;
}

static void free_copy(model_copy *mc)
{
	for (int i = 0; i < mc->n; i++) {
		free((void *)mc->t[i].name);
		free(mc->data[i]);
	}
	mc->n = 0;
}

static int find_copy(const model_copy *mc, const char *name)
{
	for (int i = 0; i < mc->n; i++)
		if (!strcmp(mc->t[i].name, name))
			return i;
	return -1;
}

/* Opening 'path' as a model must fail with 'want' and a message containing each of the
 * NULL-terminated words. */
static void expect_refused(const char *what, const char *path, sb_status want, const char *w1,
                           const char *w2)
{
	sb_model *m = NULL;
	last_error[0] = 0;
	const sb_status st = sb_demucs_model_open(path, "htdemucs-test", NULL, &logger, &m);
	if (st == SB_OK) {
		FAIL("%s: opened", what);
		sb_model_free(m);
		return;
	}
	if (st != want)
		FAIL("%s: status '%s', expected '%s'", what, sb_status_str(st), sb_status_str(want));
	if ((w1 && !strstr(last_error, w1)) || (w2 && !strstr(last_error, w2)))
		FAIL("%s: message \"%s\" should name \"%s\"%s%s", what, last_error, w1, w2 ? " and " : "",
		     w2 ? w2 : "");
	else
		printf("ok: %s refused: %s\n", what, last_error);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(data, 1, n, f);
		fclose(f);
	}
}

static void errors_case(void)
{
	char tiny[4096], path[] = "/tmp/sb-demucs-bad-XXXXXX";
	snprintf(tiny, sizeof tiny, "%s/htdemucs-tiny.safetensors", golden);
	const int fd = mkstemp(path);
	if (fd < 0) {
		FAIL("mkstemp");
		return;
	}
	close(fd);

	/* truncated: the last tensor's data runs past the end */
	FILE *f = fopen(tiny, "rb");
	fseek(f, 0, SEEK_END);
	const long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *bytes = malloc((size_t)size);
	if (fread(bytes, 1, (size_t)size, f) != (size_t)size)
		FAIL("cannot read %s", tiny);
	fclose(f);
	write_bytes(path, bytes, (size_t)size - 1000);
	expect_refused("a truncated file", path, SB_ERR_FORMAT, "truncated", "tensor \"");
	/* a header length past the end */
	unsigned char bad[16];
	memcpy(bad, bytes, 16);
	bad[5] = 0x7f;
	write_bytes(path, bad, 16);
	expect_refused("a header length past the end", path, SB_ERR_FORMAT, "header length", NULL);
	/* not JSON */
	memcpy(bytes + 8, "{\"x\" 1", 6);
	write_bytes(path, bytes, (size_t)size);
	expect_refused("a corrupt header", path, SB_ERR_FORMAT, "JSON", NULL);
	free(bytes);
	/* an empty file */
	write_bytes(path, "", 0);
	expect_refused("an empty file", path, SB_ERR_FORMAT, "8-byte", NULL);

	model_copy *mc = calloc(1, sizeof *mc);
	copy_model(tiny, "", mc, 0);
	/* a wrong shape */
	int k = find_copy(mc, "encoder.1.conv.weight");
	mc->t[k].shape[2] = 4;
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	expect_refused("a wrong-shape tensor", path, SB_ERR_MODEL, "encoder.1.conv.weight",
	               "expected [16, 8, 8, 1]");
	mc->t[k].shape[2] = 8;
	/* a missing tensor */
	sb_st_write_tensor saved = mc->t[k];
	mc->t[k] = mc->t[mc->n - 1];
	mc->n--;
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	expect_refused("a missing tensor", path, SB_ERR_MODEL, "encoder.1.conv.weight", "missing");
	mc->t[mc->n] = mc->t[k];
	mc->t[k] = saved;
	mc->n++;
	/* a tensor the settings do not explain (t_layers says 1, the file has 2) */
	for (int i = 0; mc->meta[i]; i += 2)
		if (!strcmp(mc->meta[i], "t_layers"))
			mc->meta[i + 1] = "1";
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	expect_refused("settings that do not match the tensors", path, SB_ERR_MODEL,
	               "crosstransformer.layers", "not part");
	/* an unsupported setting */
	for (int i = 0; mc->meta[i]; i += 2)
		if (!strcmp(mc->meta[i], "t_layers"))
			mc->meta[i + 1] = "2";
	int nm = 0;
	while (mc->meta[nm])
		nm += 2;
	mc->meta[nm] = "depth";
	mc->meta[nm + 1] = "6";
	mc->meta[nm + 2] = NULL;
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	expect_refused("an unsupported setting", path, SB_ERR_MODEL, "depth", "not supported");
	mc->meta[nm] = NULL;
	/* the file must still be good after all that */
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	sb_model *m = NULL;
	if (sb_demucs_model_open(path, "htdemucs-test", NULL, &logger, &m) != SB_OK)
		FAIL("the rewritten tiny model does not open: %s", last_error);
	sb_model_free(m);
	free_copy(mc);
	free(mc);

	/* a model that is not installed */
	const char *dirs[] = {"/nonexistent-sb-dir", NULL};
	last_error[0] = 0;
	if (sb_model_open("htdemucs_ft", dirs, &logger, &m) != SB_ERR_MODEL ||
	    !strstr(last_error, "htdemucs_ft.safetensors") || !strstr(last_error, "stembridge-convert"))
		FAIL("a missing model: \"%s\"", last_error);
	unlink(path);
}

/* ---- bags ---- */

/* A bag of the tiny and the mid model, drums and bass from the first, the rest from the second:
 * its stems must be those of each model run on its own. */
static void bag_case(void)
{
	char tiny[4096], mid[4096], path[] = "/tmp/sb-demucs-bag-XXXXXX";
	snprintf(tiny, sizeof tiny, "%s/htdemucs-tiny.safetensors", golden);
	snprintf(mid, sizeof mid, "%s/htdemucs-mid.safetensors", golden);
	const int fd = mkstemp(path);
	if (fd < 0) {
		FAIL("mkstemp");
		return;
	}
	close(fd);
	model_copy *mc = calloc(1, sizeof *mc);
	copy_model(tiny, "0.", mc, 0);
	copy_model(mid, "1.", mc, 1);
	int nm = 0;
	while (mc->meta[nm])
		nm += 2;
	const char *extra[] = {"bag", "2", "bag_weights", "1,1,0,0;0,0,1,1", "sources",
	                       "drums,bass,other,vocals", NULL};
	for (int i = 0; extra[i]; i++)
		mc->meta[nm++] = extra[i];
	mc->meta[nm] = NULL;
	sb_safetensors_write(path, mc->t, mc->n, mc->meta, &logger);
	free_copy(mc);
	free(mc);

	/* 10 s: two segments, the second one short */
	const int64_t n = 441000;
	float *in = malloc(sizeof(float) * (size_t)(2 * n));
	uint64_t seed = 99;
	for (int64_t i = 0; i < 2 * n; i++)
		in[i] = 0.2f * sinf(0.002f * (float)i) +
		        0.05f * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
	sb_model *b = NULL, *t = NULL, *m = NULL;
	if (sb_demucs_model_open(path, "bag-test", NULL, &logger, &b) != SB_OK ||
	    open_golden_model("htdemucs-tiny", &t) != SB_OK ||
	    open_golden_model("htdemucs-mid", &m) != SB_OK) {
		FAIL("cannot open the bag (%s)", last_error);
	} else {
		mem_sink sb, st_, sm;
		double secs;
		if (run_pipeline(b, in, 2, n, &sb, &secs) != SB_OK || run_pipeline(t, in, 2, n, &st_, NULL) ||
		    run_pipeline(m, in, 2, n, &sm, NULL)) {
			FAIL("bag pipeline failed: %s", last_error);
		} else {
			printf("bag of 2 on 10 s in %.2f s: %s\n", secs, b->info.description);
			for (int s = 0; s < SB_N_STEMS; s++) {
				const int from_tiny = s == SB_STEM_DRUMS || s == SB_STEM_BASS;
				const mem_sink *ref = from_tiny ? &st_ : &sm;
				const double e = rel_l2(sb.data[s], ref->data[s], (size_t)(2 * n));
				printf("  %-8s from %s: rel L2 %.3e\n", sb_stem_names[s], from_tiny ? "tiny" : "mid", e);
				if (!(e <= 1e-6) || sb.frames[s] != n)
					FAIL("bag stem %s differs from its model's: %.3e", sb_stem_names[s], e);
			}
		}
		mem_sink_free(&sb);
		mem_sink_free(&st_);
		mem_sink_free(&sm);
	}
	/* shifts: averaged random shifts stay close to the unshifted result on a stationary input */
	if (t) {
		sb_demucs_opts o = {.shifts = 2, .overlap = 0.25};
		mem_sink s0, s2;
		run_pipeline(t, in, 2, n, &s0, NULL);
		sb_demucs_model_set_opts(t, &o);
		if (run_pipeline(t, in, 2, n, &s2, NULL) != SB_OK)
			FAIL("shifts=2 failed");
		else
			for (int s = 0; s < SB_N_STEMS; s++) {
				const double e = rel_l2(s2.data[s], s0.data[s], (size_t)(2 * n));
				printf("  shifts=2 vs 0, %-8s rel L2 %.3e\n", sb_stem_names[s], e);
				if (!(e < 1.0) || s2.frames[s] != n)
					FAIL("shifts=2 output of %s is off: %.3e", sb_stem_names[s], e);
			}
		mem_sink_free(&s0);
		mem_sink_free(&s2);
	}
	sb_model_free(b);
	sb_model_free(t);
	sb_model_free(m);
	free(in);
	unlink(path);
}

/* ---- the reader on its own ---- */

static void safetensors_case(void)
{
	static const struct {
		uint16_t h;
		float f;
	} halves[] = {{0x3c00, 1.f}, {0xc000, -2.f}, {0x7bff, 65504.f}, {0x0001, 5.9604645e-8f},
	              {0x0400, 6.1035156e-5f}, {0x3555, 0.33325195f}, {0x0000, 0.f}};
	for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
		if (sb_half_to_float(halves[i].h) != halves[i].f)
			FAIL("half %04x -> %g, expected %g", halves[i].h, sb_half_to_float(halves[i].h),
			     halves[i].f);
		if (sb_float_to_half(halves[i].f) != halves[i].h)
			FAIL("float %g -> half %04x, expected %04x", halves[i].f,
			     sb_float_to_half(halves[i].f), halves[i].h);
	}
	if (!isinf(sb_half_to_float(0x7c00)) || !isnan(sb_half_to_float(0x7e00)))
		FAIL("half infinity or NaN");
	if (sb_bf16_to_float(0x3f80) != 1.f || sb_bf16_to_float(0xc040) != -3.f)
		FAIL("bf16");
	/* every half survives the round trip */
	for (uint32_t h = 0; h < 0x10000; h++) {
		const float f = sb_half_to_float((uint16_t)h);
		if (!isnan(f) && sb_float_to_half(f) != h)
			FAIL("half %04x does not round-trip", h);
	}
	/* the mid model is F16: it reads and matches its own F32 conversion */
	char mid[4096];
	snprintf(mid, sizeof mid, "%s/htdemucs-mid.safetensors", golden);
	sb_safetensors *st;
	if (sb_safetensors_open(mid, &logger, &st) != SB_OK) {
		FAIL("cannot open %s", mid);
		return;
	}
	const sb_st_tensor *t = sb_safetensors_find(st, "freq_emb.embedding.weight");
	if (!t || t->dtype != SB_ST_F16 || t->ndim != 2 || t->shape[0] != 512 || t->shape[1] != 16)
		FAIL("mid: freq_emb.embedding.weight should be F16 [512, 16]");
	if (!sb_safetensors_meta(st, "sources") || strcmp(sb_safetensors_meta(st, "segment"), "39/5"))
		FAIL("mid: metadata");
	if (sb_safetensors_find(st, "no.such.tensor") || sb_safetensors_meta(st, "no-such-key"))
		FAIL("lookups of absent names");
	sb_safetensors_close(st);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_demucs GOLDEN_DIR tiny|pipeline|mid|full|bag|errors|safetensors\n");
		return 2;
	}
	golden = argv[1];
	char probe[4096];
	snprintf(probe, sizeof probe, "%s/htdemucs-tiny.safetensors", golden);
	if (access(probe, R_OK) != 0) {
		printf("SKIP: no golden files in %s\n", golden);
		return 77;
	}
	const char *c = argv[2];
	if (!strcmp(c, "tiny"))
		segment_case("htdemucs-tiny", "htdemucs-tiny-io.safetensors", 1e-5, 1, NULL);
	else if (!strcmp(c, "mid"))
		segment_case("htdemucs-mid", "htdemucs-mid-io.safetensors", 1e-5, 0, NULL);
	else if (!strcmp(c, "opencl") || !strcmp(c, "opencl-mid") || !strcmp(c, "opencl-full")) {
		/* the OpenCL path: the same golden vectors within 1e-4 */
		sb_cl_device *d = open_cl();
		if (!d) {
			printf("SKIP: no OpenCL device\n");
			sb_devices_free(devices);
			return 77;
		}
		if (!strcmp(c, "opencl")) {
			segment_case("htdemucs-tiny", "htdemucs-tiny-io.safetensors", 1e-4, 1, d);
			pipeline_cl = d;
			pipeline_case();
			pipeline_cl = NULL;
		} else if (!strcmp(c, "opencl-mid")) {
			segment_case("htdemucs-mid", "htdemucs-mid-io.safetensors", 1e-4, 0, d);
		} else {
			full_case(d);
		}
		sb_cl_device_close(d);
		sb_devices_free(devices);
	}
	else if (!strcmp(c, "pipeline"))
		pipeline_case();
	else if (!strcmp(c, "full"))
		full_case(NULL);
	else if (!strcmp(c, "bag"))
		bag_case();
	else if (!strcmp(c, "errors"))
		errors_case();
	else if (!strcmp(c, "safetensors"))
		safetensors_case();
	else {
		fprintf(stderr, "unknown case '%s'\n", c);
		return 2;
	}
	printf("%s: %s\n", c, failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
