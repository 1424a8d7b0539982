/* HTDemucs files, bags and inputs (see demucs_test.h): bad files and weights are refused
 * with a message naming the file and the tensor, a bag gives each source its model's stems,
 * mono, silent, cancelled and unsupported inputs behave, and the safetensors reader on its own.
 */
#include "demucs_test.h"
#include "random_model.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void errors_case(void)
{
	char tiny[4096], path[] = "/tmp/sb-demucs-bad-XXXXXX";
	snprintf(tiny, sizeof tiny, "%s/%s.safetensors", golden, small_name);
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
void bag_case(void)
{
	char tiny[4096], mid[4096], path[] = "/tmp/sb-demucs-bag-XXXXXX";
	snprintf(tiny, sizeof tiny, "%s/%s.safetensors", golden, small_name);
	snprintf(mid, sizeof mid, "%s/%s.safetensors", golden, second_name);
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
	    open_golden_model(small_name, &t) != SB_OK ||
	    open_golden_model(second_name, &m) != SB_OK) {
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

/* ---- inputs the pipeline must handle or refuse ---- */

void inputs_case(void)
{
	sb_model *m = NULL;
	if (open_golden_model(small_name, &m) != SB_OK) {
		FAIL("cannot open %s", small_name);
		return;
	}
	if (m->info.native_rate != 44100 || m->info.n_stems != SB_N_STEMS ||
	    strcmp(m->info.stem_names[SB_STEM_VOCALS], "vocals") ||
	    strcmp(m->info.stem_names[SB_STEM_OTHER], "other"))
		FAIL("model info: rate %g, %d stems", m->info.native_rate, m->info.n_stems);
	const int64_t n = 3 * 44100; /* shorter than a segment: one centred, zero-padded chunk */
	float *mono = malloc(sizeof(float) * (size_t)n), *stereo = malloc(sizeof(float) * (size_t)(2 * n));
	for (int64_t i = 0; i < n; i++) {
		mono[i] = 0.3f * sinf(0.05f * (float)i) * sinf(0.0003f * (float)i);
		stereo[i] = stereo[n + i] = mono[i];
	}
	/* mono in: the model sees it on both channels, and the stems are the mean of its two */
	mem_sink s1, s2;
	if (run_pipeline(m, mono, 1, n, &s1, NULL) != SB_OK ||
	    run_pipeline(m, stereo, 2, n, &s2, NULL) != SB_OK) {
		FAIL("mono or stereo 3 s input failed: %s", last_error);
	} else {
		for (int s = 0; s < SB_N_STEMS; s++) {
			if (s1.frames[s] != n || s2.frames[s] != n) {
				FAIL("stem %s: %lld and %lld frames, expected %lld", sb_stem_names[s],
				     (long long)s1.frames[s], (long long)s2.frames[s], (long long)n);
				continue;
			}
			float *avg = malloc(sizeof(float) * (size_t)n);
			for (int64_t i = 0; i < n; i++)
				avg[i] = 0.5f * (s2.data[s][2 * i] + s2.data[s][2 * i + 1]);
			const double e = rel_l2(s1.data[s], avg, (size_t)n);
			if (!(e < 1e-6))
				FAIL("mono stem %s is not the mean of the stereo one: %.3e", sb_stem_names[s], e);
			free(avg);
		}
		printf("ok: mono and stereo 3 s inputs\n");
	}
	mem_sink_free(&s1);
	mem_sink_free(&s2);
	/* silence: no std to normalise by; silent stems */
	memset(mono, 0, sizeof(float) * (size_t)n);
	if (run_pipeline(m, mono, 1, n, &s1, NULL) != SB_OK || s1.frames[0] != n)
		FAIL("silent input failed");
	else
		for (int s = 0; s < SB_N_STEMS; s++)
			for (int64_t i = 0; i < n; i++)
				if (s1.data[s][i] != 0.f) {
					FAIL("silent input gave a non-silent %s", sb_stem_names[s]);
					break;
				}
	mem_sink_free(&s1);
	/* three channels and another rate are refused with a message */
	float *three = calloc((size_t)(3 * n), sizeof(float));
	sb_source *src = NULL;
	mem_sink_init(&s1, 3);
	sb_run_ctx ctx = {.log = &logger};
	last_error[0] = 0;
	if (sb_source_memory(three, n, 3, 44100, &src) == SB_OK &&
	    (sb_model_separate(m, &ctx, src, &s1.sink) != SB_ERR_UNSUPPORTED ||
	     !strstr(last_error, "3 channels")))
		FAIL("3 channels: \"%s\"", last_error);
	if (src)
		src->close(src);
	mem_sink_free(&s1);
	mem_sink_init(&s1, 1);
	src = NULL;
	if (sb_source_memory(mono, n, 1, 48000, &src) == SB_OK &&
	    sb_model_separate(m, &ctx, src, &s1.sink) != SB_ERR_INVALID)
		FAIL("48 kHz input was not refused");
	if (src)
		src->close(src);
	mem_sink_free(&s1);
	/* cancelling stops the job */
	atomic_int cancel = 1;
	sb_run_ctx cctx = {.log = &logger, .cancel = &cancel};
	mem_sink_init(&s1, 2);
	src = NULL;
	float *il = interleave(stereo, 2, n);
	if (sb_source_memory(il, n, 2, 44100, &src) == SB_OK &&
	    sb_model_separate(m, &cctx, src, &s1.sink) != SB_ERR_CANCELLED)
		FAIL("a cancelled job did not stop");
	if (src)
		src->close(src);
	mem_sink_free(&s1);
	free(il);
	free(three);
	free(mono);
	free(stereo);
	sb_model_free(m);
}

/* ---- the reader on its own ---- */

void safetensors_case(void)
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
	snprintf(mid, sizeof mid, "%s/%s.safetensors", golden, second_name);
	sb_safetensors *st;
	if (sb_safetensors_open(mid, &logger, &st) != SB_OK) {
		FAIL("cannot open %s", mid);
		return;
	}
	const sb_st_tensor *t = sb_safetensors_find(st, "freq_emb.embedding.weight");
	const char *ch = sb_safetensors_meta(st, "channels");
	if (!t || !ch || t->dtype != SB_ST_F16 || t->ndim != 2 || t->shape[0] != 512 ||
	    t->shape[1] != atoi(ch))
		FAIL("%s: freq_emb.embedding.weight should be F16 [512, channels]", second_name);
	if (!sb_safetensors_meta(st, "sources") || !sb_safetensors_meta(st, "segment"))
		FAIL("%s: metadata", second_name);
	if (sb_safetensors_find(st, "no.such.tensor") || sb_safetensors_meta(st, "no-such-key"))
		FAIL("lookups of absent names");
	sb_safetensors_close(st);
}
