/* The families of MSST (the RoFormers, SCNet, MDX23C) against golden files made by the
 * reference code with random weights (tests/fixtures/roformer, made by make_roformer_golden.py;
 * tests/fixtures/scnet and mdx23c, made by make_msst_conv_golden.py):
 *
 *   convert   each NAME.ckpt + NAME.yaml through the converter (as stembridge-convert does),
 *             then a damaged checkpoint, a checkpoint with another model's config, a config
 *             with a key the reference does not know: one clear line each, nothing written
 *   bands     (roformer) the Mel-Band RoFormer's band assignment of the Kim vocals model's
 *             config (60 bands, n_fft 2048) and of mel-tiny against the reference's buffers
 *   chunk     one chunk through the model's forward pass on every device (cpu, opencl:N):
 *             within 1e-4 relative of the reference's output; one upload, one download, one
 *             wait a pass
 *   transfers (roformer) a chunk on the first OpenCL device as the device counts it: one
 *             upload, one read-back, one wait a pass (of 1 or 3 chunks, two in flight, a song
 *             through the demix), a pass stopped in flight writes nothing
 *   pipeline  a clip of several chunks through the sb_model (MSST's demix) on every device,
 *             and shared among all of them (models/share.h): within 2e-3 relative, and a
 *             target model's second stem is the mix minus it
 *
 * usage: test_msst FIXTURES_DIR roformer|scnet|mdx23c CASE
 */
#include "../classic/mem_sink.h"
#include "backend/device.h"
#include "convert/convert.h"
#include "convert/msst_config.h"
#include "convert/roformer_config.h"
#include "core/thread_pool.h"
#include "models/demucs/safetensors.h"
#include "models/model.h"
#include "models/msst_demix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
static char errors[4096];

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level == SB_LOG_ERROR) {
		const size_t at = strlen(errors);
		snprintf(errors + at, sizeof errors - at, "%s\n", msg);
	}
	if (level <= SB_LOG_WARNING && getenv("VERBOSE"))
		fprintf(stderr, "  [log] %s\n", msg);
}
static const sb_logger logger = {log_fn, NULL};

static void check(int ok, const char *what)
{
	printf("  %-70s %s\n", what, ok ? "ok" : "FAIL");
	if (!ok)
		failures++;
}

static const char *dir;
static char tmpdir[256];

static const char *path(const char *fmt, const char *name)
{
	static char buf[4][1024];
	static int k;
	k = (k + 1) % 4;
	char f[256];
	snprintf(f, sizeof f, fmt, name);
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, f);
	return buf[k];
}

static float *read_t(sb_safetensors *st, const char *name, int64_t *n)
{
	const sb_st_tensor *t = sb_safetensors_find(st, name);
	if (!t)
		return NULL;
	float *x = malloc(sizeof(float) * (size_t)t->numel);
	if (x && sb_safetensors_read_f32(st, name, NULL, 0, x, "io", &logger) != SB_OK) {
		free(x);
		return NULL;
	}
	if (n)
		*n = t->numel;
	return x;
}

static double rel(const float *got, const float *want, int64_t n)
{
	double e = 0, r = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			return INFINITY;
		e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
		r += (double)want[i] * want[i];
	}
	return sqrt(e / (r > 0 ? r : 1));
}

/* NAME.ckpt + NAME.yaml -> tmpdir/NAME.safetensors */
static sb_status convert(const char *name, const char *ckpt_of, const char *yaml_of,
                         char *out, size_t len)
{
	snprintf(out, len, "%s/%s.safetensors", tmpdir, name);
	const char *in[1] = {path("%s.ckpt", ckpt_of)};
	sbc_convert_opts o = {.inputs = in, .n_inputs = 1, .output = out, .overwrite = 1,
	                      .config = path("%s.yaml", yaml_of), .log = &logger};
	errors[0] = '\0';
	return sbc_convert(&o);
}

/* each family's fixtures; the first two differ in their tensors' shapes */
static const char *const roformer_models[] = {"bs-tiny", "bs-tiny-4", "mel-tiny",
                                              "bs-tiny-mono", "bs-tiny-6", NULL};
static const char *const scnet_models[] = {"scnet-tiny", "scnet-tiny-2", NULL};
static const char *const mdx23c_models[] = {"mdx23c-tiny", "mdx23c-tiny-4", NULL};
static const char *const *models;
static size_t N_MODELS;
static const char *family;


/* tmpdir/name: model's configuration with its first 'find' replaced by 'with'; NULL when the
 * fixture cannot be read or has no 'find' */
static const char *edited_config(const char *model, const char *find, const char *with,
                                 const char *name)
{
	static char out[512];
	char buf[65536];
	FILE *f = fopen(path("%s.yaml", model), "rb");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	const char *at = strstr(buf, find);
	snprintf(out, sizeof out, "%s/%s", tmpdir, name);
	FILE *g = at ? fopen(out, "wb") : NULL;
	if (!g)
		return NULL;
	fwrite(buf, 1, (size_t)(at - buf), g);
	fputs(with, g);
	fputs(at + strlen(find), g);
	fclose(g);
	return out;
}

/* the converter on a checkpoint and a configuration; its error line printed */
static sb_status convert_with(const char *ckpt, const char *yaml, const char *out)
{
	const char *in[1] = {ckpt};
	sbc_convert_opts o = {.inputs = in, .n_inputs = 1, .output = out, .config = yaml,
	                      .log = &logger};
	errors[0] = '\0';
	const sb_status st = yaml ? sbc_convert(&o) : SB_ERR_IO;
	printf("    %s", errors);
	return st;
}

static void case_convert(void)
{
	char out[512];
	for (size_t i = 0; i < N_MODELS; i++) {
		char what[128];
		snprintf(what, sizeof what, "%s: checkpoint + config convert", models[i]);
		check(convert(models[i], models[i], models[i], out, sizeof out) == SB_OK, what);
	}
	/* a truncated checkpoint */
	char bad[512];
	snprintf(bad, sizeof bad, "%s/bad.ckpt", tmpdir);
	FILE *f = fopen(path("%s.ckpt", models[0]), "rb"), *g = fopen(bad, "wb");
	char buf[65536];
	size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
	if (g)
		fwrite(buf, 1, n / 2, g);
	if (f)
		fclose(f);
	if (g)
		fclose(g);
	snprintf(out, sizeof out, "%s/never.safetensors", tmpdir);
	const char *in[1] = {bad};
	sbc_convert_opts o = {.inputs = in, .n_inputs = 1, .output = out,
	                      .config = path("%s.yaml", models[0]), .log = &logger};
	errors[0] = '\0';
	sb_status st = sbc_convert(&o);
	printf("    %s", errors);
	check(st != SB_OK && strstr(errors, "bad.ckpt") && !strchr(errors, '\n')[1] &&
	          access(out, F_OK) != 0, "a truncated checkpoint: one line naming it, nothing written");
	/* another model's configuration */
	errors[0] = '\0';
	st = convert("never", models[1], models[0], out, sizeof out);
	printf("    %s", errors);
	char what[160];
	snprintf(what, sizeof what, "%s's checkpoint with %s's config: the tensor named, nothing "
	         "written", models[1], models[0]);
	check(st == SB_ERR_MODEL && strstr(errors, "tensor '") && access(out, F_OK) != 0, what);
	/* a key the reference does not know */
	const char *yaml = edited_config(models[0], "model:\n", "model:\n  dim_hyper: 3\n",
	                                 "unknown.yaml");
	st = convert_with(path("%s.ckpt", models[0]), yaml, out);
	check(yaml && st == SB_ERR_UNSUPPORTED && strstr(errors, "model.dim_hyper") &&
	          !strchr(errors, '\n')[1] && access(out, F_OK) != 0,
	      "an unknown config key: refused by its name in one line");
	/* a stem this build does not write: refused by name, not folded into "other" with the
	 * stems it would lose */
	const int rf = !strcmp(family, "roformer"), sc = !strcmp(family, "scnet");
	const char *model = rf ? "bs-tiny-6" : models[0];
	yaml = edited_config(model, rf ? "- guitar\n" : sc ? "  - vocals\n  lr:" : "  - other\n  lr:",
	                     rf ? "- kazoo\n" : "  - kazoo\n  lr:", "kazoo.yaml");
	st = convert_with(path("%s.ckpt", model), yaml, out);
	check(yaml && st != SB_OK && strstr(errors, "training.instruments: 'kazoo'") &&
	          access(out, F_OK) != 0, "an instrument that is no stem we write: refused by name");
}

/* the mel bands against the reference's freq_indices / num_bands_per_freq */
static void bands_against(const char *file, const char *pre, int rate, int n_fft, int nb, int ch)
{
	sb_safetensors *st = NULL;
	if (sb_safetensors_open(file, &logger, &st) != SB_OK) {
		check(0, file);
		return;
	}
	char k1[64], k2[64];
	snprintf(k1, sizeof k1, "%sfreq_indices", pre);
	snprintf(k2, sizeof k2, "%snum_bands_per_freq", pre);
	const sb_st_tensor *ti = sb_safetensors_find(st, k1), *tc = sb_safetensors_find(st, k2);
	const int bins = n_fft / 2 + 1;
	unsigned char *in = malloc((size_t)nb * bins);
	int ok = ti && tc && in && sb_rf_mel_bands(rate, n_fft, nb, in) == SB_OK;
	/* I32 tensors: read the raw header via F32 is not possible; compare through the file */
	int64_t n_idx = ti ? ti->numel : 0;
	int32_t *idx = malloc(sizeof(int32_t) * (size_t)(n_idx + 1));
	FILE *f = fopen(file, "rb");
	uint64_t hl = 0;
	char *hdr = NULL;
	if (ok && f && fread(&hl, 8, 1, f) == 1 && hl < (1u << 24) && (hdr = calloc(hl + 1, 1)) &&
	    fread(hdr, 1, hl, f) == hl) {
		/* data_offsets of the tensor: "name":{"dtype":"I32","shape":[..],"data_offsets":[a,b]} */
		char key[80];
		snprintf(key, sizeof key, "\"%s\"", k1);
		const char *p = strstr(hdr, key);
		p = p ? strstr(p, "data_offsets") : NULL;
		long a = 0;
		if (p && sscanf(strchr(p, '[') + 1, "%ld", &a) == 1 &&
		    fseek(f, (long)(8 + hl) + a, SEEK_SET) == 0 &&
		    fread(idx, sizeof(int32_t), (size_t)n_idx, f) == (size_t)n_idx) {
			int64_t j = 0;
			for (int b = 0; b < nb && ok; b++)
				for (int q = 0; q < bins && ok; q++)
					if (in[(size_t)b * bins + q])
						for (int s = 0; s < ch && ok; s++, j++)
							ok = j < n_idx && idx[j] == q * ch + s;
			ok = ok && j == n_idx;
		} else {
			ok = 0;
		}
	} else {
		ok = 0;
	}
	if (f)
		fclose(f);
	free(hdr);
	free(idx);
	free(in);
	sb_safetensors_close(st);
	char what[128];
	snprintf(what, sizeof what, "mel bands, %d bands of n_fft %d: the reference's frequencies", nb,
	         n_fft);
	check(ok, what);
}

/* every device's exec, opened */
static int open_devices(sb_exec *x, sb_device *props, int max)
{
	sb_device_list *list = NULL;
	if (sb_devices_enumerate(&logger, &list) != SB_OK)
		return 0;
	int n = 0;
	for (size_t i = 0; i < sb_devices_count(list) && n < max; i++) {
		props[n] = *sb_devices_get(list, i);
		const sb_open_opts oo = {0};
		if (sb_exec_open(&props[n], &oo, &logger, &x[n]) == SB_OK) {
			x[n].props = &props[n];
			n++;
		}
	}
	sb_devices_free(list);
	return n;
}

static void case_chunk(void)
{
	sb_exec x[8];
	sb_device props[8];
	const int nd = open_devices(x, props, 8);
	for (size_t i = 0; i < N_MODELS; i++) {
		char file[512];
		if (convert(models[i], models[i], models[i], file, sizeof file) != SB_OK) {
			check(0, errors);
			continue;
		}
		sb_model *m = NULL;
		sb_safetensors *io = NULL;
		const sb_msst_net *net = NULL;
		if (sb_model_open(file, NULL, &logger, &m) != SB_OK || !(net = sb_msst_model_net(m)) ||
		    sb_safetensors_open(path("%s-io.safetensors", models[i]), &logger, &io) != SB_OK) {
			check(0, "load");
			sb_model_free(m);
			continue;
		}
		int64_t n_in = 0, n_out = 0;
		float *in = read_t(io, "input", &n_in), *want = read_t(io, "output", &n_out);
		float *got = calloc((size_t)n_out, sizeof(float));
		for (int d = 0; d < nd && in && want; d++) {
			sb_op_group lacks;
			if (!sb_exec_has_groups(&x[d], m->info.ops, &lacks)) {
				printf("  %s on %s: not supported (no %s operations)\n", models[i],
				       x[d].props->id, sb_op_group_name(lacks));
				continue;
			}
			void *on = NULL;
			sb_status st = net->place(net->net, &x[d], &logger, &on);
			/* the chunk stays on the device: one upload, one read back, one wait a pass */
			x[d].be->set_profiling(x[d].d, 1);
			if (st == SB_OK)
				st = net->forward(on, 1, in, got);
			long up = 0, down = 0, wait = 0;
			sb_prof_entry pe[96];
			const int np = x[d].be->profile(x[d].d, pe, 96);
			for (int k = 0; k < np; k++) {
				up += strcmp(pe[k].name, "upload") ? 0 : pe[k].calls;
				down += strcmp(pe[k].name, "download") ? 0 : pe[k].calls;
				wait += strcmp(pe[k].name, "finish") ? 0 : pe[k].calls;
			}
			x[d].be->set_profiling(x[d].d, 0);
			if (st == SB_OK && strcmp(x[d].be->name, "cpu")) {
				char tr[160];
				snprintf(tr, sizeof tr, "%s on %s: %ld upload, %ld download, %ld wait a pass (1 each)",
				         models[i], x[d].props->id, up, down, wait);
				check(up == 1 && down == 1 && wait == 1, tr);
			}
			if (on)
				net->unplace(on);
			const double e = st == SB_OK ? rel(got, want, n_out) : INFINITY;
			char what[160];
			snprintf(what, sizeof what, "%s, one chunk on %s: rel. error %.2e (< 1e-4)",
			         models[i], x[d].props->id, e);
			check(e < 1e-4, what);
		}
		free(in);
		free(want);
		free(got);
		sb_safetensors_close(io);
		sb_model_free(m);
	}
	for (int d = 0; d < nd; d++)
		sb_exec_close(&x[d]);
}

static float *interleave(const float *x, int ch, int64_t n);

/* the device's counts since the last call (backend.h: sb_dev_counts) */
static sb_dev_counts counted(const sb_exec *x, sb_dev_counts *last)
{
	sb_dev_counts now = {0}, d;
	if (x->be->counts)
		x->be->counts(x->d, &now);
	d.launches = now.launches - last->launches;
	d.uploads = now.uploads - last->uploads;
	d.downloads = now.downloads - last->downloads;
	d.waits = now.waits - last->waits;
	d.bytes_up = now.bytes_up - last->bytes_up;
	d.bytes_down = now.bytes_down - last->bytes_down;
	*last = now;
	return d;
}

/* the MSST settings a converted model's file carries (its "config"); NULL when unreadable */
static const sb_msst_common *read_common(const char *file, sb_msst_common *cfg)
{
	sb_safetensors *mf = NULL;
	sb_msst_yaml *y = NULL;
	char err[256];
	int ok = 0;
	if (sb_safetensors_open(file, &logger, &mf) == SB_OK) {
		const char *text = sb_safetensors_meta(mf, "config");
		ok = text && sb_msst_yaml_load(text, strlen(text), &y, err, sizeof err) == SB_OK &&
		     sb_msst_read_common(y, cfg, 1) == SB_OK;
		sb_msst_yaml_free(y);
		sb_safetensors_close(mf);
	}
	return ok ? cfg : NULL;
}

static int one_each(const sb_dev_counts *c, long n)
{
	return c->uploads == n && c->downloads == n && c->waits == n;
}

/* chunk b of B of the golden input: the input scaled by 1 - b / 4 */
static float *chunks_of(const float *in, int64_t n, int B)
{
	float *x = malloc(sizeof(float) * (size_t)(n * B));
	for (int b = 0; x && b < B; b++)
		for (int64_t i = 0; i < n; i++)
			x[b * n + i] = in[i] * (1.f - 0.25f * (float)b);
	return x;
}

/* The RoFormer's chunk stays on the device (issue #50), on the first OpenCL device, counted as
 * the device counts them (backend.h: counts) with the pass's stop flags in place as a song's
 * passes have them: a pass of 1 chunk and of 3 makes one upload, one read-back and one wait,
 * the same stems as passes of one; two passes in flight (submit, submit, collect, collect) two of
 * each and the same stems; a pass stopped while in flight leaves its output untouched and the
 * next one right; then a song through MSST's demix, the model kept between two runs: one of each
 * a pass. Launches a chunk are printed (bench/gpu/README.md's table). */
static void case_transfers(void)
{
	sb_exec x[8];
	sb_device props[8];
	const int nd = open_devices(x, props, 8);
	int d = 0;
	while (d < nd && (strcmp(x[d].be->name, "opencl") || !x[d].be->counts))
		d++;
	if (d == nd) {
		printf("SKIP: no OpenCL device with counts\n");
		for (int i = 0; i < nd; i++)
			sb_exec_close(&x[i]);
		return;
	}
	sb_exec *cl = &x[d];
	const char *name = "bs-tiny";
	char file[512];
	sb_model *m = NULL;
	sb_safetensors *io = NULL;
	const sb_msst_net *net = NULL;
	if (convert(name, name, name, file, sizeof file) != SB_OK ||
	    sb_model_open(file, NULL, &logger, &m) != SB_OK || !(net = sb_msst_model_net(m)) ||
	    !net->submit ||
	    sb_safetensors_open(path("%s-io.safetensors", name), &logger, &io) != SB_OK) {
		check(0, "open bs-tiny, its net in two steps, its golden file");
		sb_model_free(m);
		return;
	}
	int64_t n_in = 0, n_out = 0;
	float *one = read_t(io, "input", &n_in), *want = read_t(io, "output", &n_out);
	float *in = one ? chunks_of(one, n_in, 3) : NULL;
	float *single = malloc(sizeof(float) * (size_t)n_out * 3);
	float *got = malloc(sizeof(float) * (size_t)n_out * 3);
	void *on = NULL;
	atomic_int stop = 0, lost = 0;
	sb_status st = in && single && got ? net->place(net->net, cl, &logger, &on) : SB_ERR_NOMEM;
	if (st == SB_OK)
		net->on_stop(on, &stop, &lost);
	sb_dev_counts last = {0}, c;
	counted(cl, &last);
	/* the first pass (kernels built, the FFT's table uploaded), then passes of one */
	for (int b = 0; b < 3 && st == SB_OK; b++) {
		st = net->forward(on, 1, in + b * n_in, single + b * n_out);
		c = counted(cl, &last);
		if (b == 0)
			printf("  the first pass: %ld uploads, %ld read-backs, %ld waits, %ld launches\n",
			       c.uploads, c.downloads, c.waits, c.launches);
	}
	char what[200];
	const double e0 = st == SB_OK ? rel(single, want, n_out) : INFINITY;
	snprintf(what, sizeof what, "%s on %s: the golden chunk within %.2e (< 1e-4)", name,
	         cl->props->id, e0);
	check(e0 < 1e-4, what);
	for (int B = 1; B <= 3 && st == SB_OK; B += 2) {
		st = net->forward(on, B, in, got);
		c = counted(cl, &last);
		const double e = rel(got, single, n_out * B);
		snprintf(what, sizeof what, "a pass of %d: %ld upload, %ld read-back, %ld wait, %ld "
		         "launches (%.1f a chunk), %.0f + %.0f KB", B, c.uploads, c.downloads, c.waits,
		         c.launches, (double)c.launches / B, c.bytes_up / 1024, c.bytes_down / 1024);
		check(st == SB_OK && one_each(&c, 1), what);
		snprintf(what, sizeof what, "a pass of %d: passes of one within %.1e (< 1e-5)", B, e);
		check(e <= 1e-5, what);
	}
	/* two passes in flight: the second enqueued before the first is waited for */
	sb_resident_pass q[2];
	memset(got, 0, sizeof(float) * (size_t)n_out * 3);
	sb_status s0 = net->submit(on, 1, in + n_in, got, &q[0]);
	sb_status s1 = net->submit(on, 2, in + n_in, got + n_out, &q[1]);
	s0 = s0 == SB_OK ? net->collect(on, &q[0]) : (net->collect(on, &q[0]), s0);
	s1 = s1 == SB_OK ? net->collect(on, &q[1]) : (net->collect(on, &q[1]), s1);
	c = counted(cl, &last);
	const double ep = rel(got, single + n_out, n_out) + rel(got + n_out, single + n_out, 2 * n_out);
	snprintf(what, sizeof what, "two passes in flight: %ld uploads, %ld read-backs, %ld waits "
	         "(2 each), the stems of passes of one (%.1e)", c.uploads, c.downloads, c.waits, ep);
	check(s0 == SB_OK && s1 == SB_OK && one_each(&c, 2) && ep <= 2e-5, what);
	/* a pass stopped in flight: nothing written, nothing waited for; the next pass right */
	for (int64_t i = 0; i < n_out; i++)
		got[i] = 12345.f;
	s0 = net->submit(on, 1, in, got, &q[0]);
	atomic_store(&lost, 1);
	s1 = net->collect(on, &q[0]);
	atomic_store(&lost, 0);
	c = counted(cl, &last);
	int untouched = 1;
	for (int64_t i = 0; i < n_out; i++)
		untouched &= got[i] == 12345.f;
	st = net->forward(on, 1, in + 2 * n_in, got);
	const double es = rel(got, single + 2 * n_out, n_out);
	snprintf(what, sizeof what, "a pass stopped in flight: %s, its output untouched, %ld waits; "
	         "the next pass right (%.1e)", sb_status_str(s1), c.waits, es);
	check(s0 == SB_OK && s1 == SB_ERR_CANCELLED && untouched && c.waits == 0 && st == SB_OK &&
	          es <= 1e-5, what);
	if (on)
		net->unplace(on);
	/* a song through MSST's demix on the device, its model kept from the first run to the
	 * second: the second run's counts are its passes' alone */
	int64_t n_mix = 0;
	const sb_st_tensor *ti = sb_safetensors_find(io, "pipeline.input");
	float *mix = read_t(io, "pipeline.input", &n_mix);
	const int ch = ti ? (int)ti->shape[0] : 1;
	const int64_t N = ti ? ti->shape[1] : 0;
	float *il = mix ? interleave(mix, ch, N) : NULL;
	sb_msst_common cfg;
	const sb_msst_common *mc = read_common(file, &cfg);
	long chunks = 0;
	if (mc) { /* msst_demix.c's count */
		const int64_t C = mc->chunk_size, step = C / mc->num_overlap, border = C - step;
		const int64_t off = N > 2 * border && border > 0 ? border : 0;
		chunks = (long)((N + 2 * off + step - 1) / step);
	}
	float *first = NULL;
	for (int run = 0; run < 2 && il && chunks; run++) {
		sb_source *src = NULL;
		mem_sink sink;
		mem_sink_init_n(&sink, ch, SB_MAX_STEMS);
		st = sb_source_memory(il, N, ch, 44100, &src);
		sb_run_ctx ctx = {.log = &logger, .dev = cl, .n_dev = 1, .keep = 1};
		counted(cl, &last);
		if (st == SB_OK)
			st = sb_model_separate(m, &ctx, src, &sink.sink);
		c = counted(cl, &last);
		const float *v = sink.data[SB_STEM_VOCALS];
		if (run == 0 && st == SB_OK && v) {
			first = malloc(sizeof(float) * (size_t)(N * ch));
			if (first)
				memcpy(first, v, sizeof(float) * (size_t)(N * ch));
		}
		if (run == 1) {
			const int same = st == SB_OK && first && v && sink.frames[SB_STEM_VOCALS] == N &&
			                 !memcmp(first, v, sizeof(float) * (size_t)(N * ch));
			snprintf(what, sizeof what, "a song of %ld chunks, the model kept: %ld uploads, %ld "
			         "read-backs, %ld waits, %.1f launches a chunk; the same stems", chunks,
			         c.uploads, c.downloads, c.waits, (double)c.launches / (double)chunks);
			check(same && one_each(&c, chunks), what);
		}
		if (src)
			src->close(src);
		mem_sink_free(&sink);
	}
	if (!chunks)
		check(0, "the golden file's song and its configuration");
	free(first);
	free(il);
	free(mix);
	free(in);
	free(one);
	free(want);
	free(single);
	free(got);
	sb_safetensors_close(io);
	sb_model_free(m);
	for (int i = 0; i < nd; i++)
		sb_exec_close(&x[i]);
}

static float *interleave(const float *x, int ch, int64_t n)
{
	float *o = malloc(sizeof(float) * (size_t)(ch * n));
	for (int c = 0; c < ch; c++)
		for (int64_t i = 0; i < n; i++)
			o[i * ch + c] = x[c * n + i];
	return o;
}

/* the pipeline of one model on one device against pipeline.<pre>output */
static void pipeline_on(const char *name, const char *pre, sb_exec *dev, int n_dev)
{
	char file[512];
	snprintf(file, sizeof file, "%s/%s.safetensors", tmpdir, name);
	sb_model *m = NULL;
	sb_safetensors *io = NULL;
	if (sb_model_open(file, NULL, &logger, &m) != SB_OK ||
	    sb_safetensors_open(path("%s-io.safetensors", name), &logger, &io) != SB_OK) {
		check(0, "open");
		return;
	}
	for (int d = 0; d < n_dev; d++) {
		sb_op_group lacks;
		if (!sb_exec_has_groups(&dev[d], m->info.ops, &lacks)) {
			printf("  %s on %s: not supported (no %s operations)\n", name, dev[d].props->id,
			       sb_op_group_name(lacks));
			sb_safetensors_close(io);
			sb_model_free(m);
			return;
		}
	}
	char kin[64], kout[64];
	snprintf(kin, sizeof kin, "pipeline.%sinput", pre);
	snprintf(kout, sizeof kout, "pipeline.%soutput", pre);
	const sb_st_tensor *ti = sb_safetensors_find(io, kin);
	int64_t n_in = 0, n_out = 0;
	float *in = read_t(io, kin, &n_in), *want = read_t(io, kout, &n_out);
	const int ch = ti ? (int)ti->shape[0] : 1;
	const int64_t N = ti ? ti->shape[1] : 0;
	float *il = in ? interleave(in, ch, N) : NULL;
	sb_source *src = NULL;
	mem_sink sink;
	mem_sink_init_n(&sink, ch, SB_MAX_STEMS);
	sb_status st = il ? sb_source_memory(il, N, ch, 44100, &src) : SB_ERR_IO;
	sb_run_ctx ctx = {.log = &logger, .dev = dev, .n_dev = n_dev, .batch = n_dev > 1 ? 1 : 0};
	if (st == SB_OK)
		st = sb_model_separate(m, &ctx, src, &sink.sink);
	/* the instruments in the reference's order: the target alone, or every instrument */
	sb_msst_common cfg;
	const sb_msst_common *c = read_common(file, &cfg);
	double worst = 0;
	int ok = st == SB_OK && c && want;
	const char *names[SB_MSST_MAX_STEMS];
	const int ni = c ? sb_msst_stems(c, names) : 0;
	unsigned want_mask = 0, got_mask = 0;
	for (int s = 0; ok && s < ni; s++) {
		const int k = sb_stem_index(names[s]);
		ok = k >= 0 && sink.frames[k] == N;
		if (!ok)
			break;
		want_mask |= 1u << k;
		float *w = interleave(want + (int64_t)s * ch * N, ch, N);
		const double e = rel(sink.data[k], w, N * ch);
		worst = e > worst ? e : worst;
		free(w);
	}
	/* every instrument of the config is its own stem, and nothing else is written (a target
	 * model adds its residual) */
	for (int k = 0; k < SB_MAX_STEMS; k++)
		got_mask |= sink.frames[k] ? 1u << k : 0;
	if (ok && !c->target[0] && !pre[0] && n_dev == 1 && !strcmp(dev->be->name, "cpu")) {
		char what[200];
		snprintf(what, sizeof what, "%s: its %d instruments, %d stems in the model, %d written",
		         name, ni, m->info.n_stems, __builtin_popcount(got_mask));
		check(m->info.n_stems == ni && m->info.stems == want_mask && got_mask == want_mask,
		      what);
	}
	char what[200];
	snprintf(what, sizeof what, "%s, %s%ld frames through demix on %s%s: rel. error %.2e (< 2e-3)",
	         name, pre, (long)N, dev->props->id, n_dev > 1 ? " and the others, shared" : "",
	         worst);
	check(ok && worst < 2e-3, what);
	/* a target model: its other stem is the mix minus the target, exactly as stored */
	if (ok && c->target[0] && !pre[0]) {
		const int kt = sb_stem_index(c->target), ko = SB_STEM_OTHER;
		double e = 0;
		for (int64_t i = 0; i < N * ch; i++)
			e = fmax(e, fabs((double)il[i] - sink.data[kt][i] - sink.data[ko][i]));
		int64_t n_ins = 0;
		float *ins = read_t(io, "pipeline.instrumental", &n_ins);
		double ei = INFINITY;
		if (ins) {
			float *w = interleave(ins, ch, N);
			ei = rel(sink.data[ko], w, N * ch);
			free(w);
		}
		free(ins);
		snprintf(what, sizeof what, "%s: vocals + other = the mix (max %.1e), other = MSST's "
		         "instrumental (%.1e)", name, e, ei);
		check(sink.frames[ko] == N && e < 1e-5 && ei < 2e-3, what);
	}
	if (src)
		src->close(src);
	mem_sink_free(&sink);
	free(il);
	free(in);
	free(want);
	sb_safetensors_close(io);
	sb_model_free(m);
}

static void case_pipeline(void)
{
	sb_exec x[8];
	sb_device props[8];
	const int nd = open_devices(x, props, 8);
	char file[512];
	for (size_t i = 0; i < N_MODELS; i++)
		if (convert(models[i], models[i], models[i], file, sizeof file) != SB_OK)
			check(0, errors);
	for (int d = 0; d < nd; d++) {
		for (size_t i = 0; i < N_MODELS; i++)
			pipeline_on(models[i], "", &x[d], 1);
		if (!strcmp(family, "roformer"))
			pipeline_on("bs-tiny", "short.", &x[d], 1);
	}
	/* one clip shared among every device, a chunk per task: the same stems */
	if (nd > 1)
		for (size_t i = 0; i < N_MODELS; i++)
			pipeline_on(models[i], "", &x[0], nd);
	for (int d = 0; d < nd; d++)
		sb_exec_close(&x[d]);
}

int main(int argc, char **argv)
{
	family = argc == 4 ? argv[2] : "";
	models = !strcmp(family, "roformer") ? roformer_models : !strcmp(family, "scnet")
	         ? scnet_models : !strcmp(family, "mdx23c") ? mdx23c_models : NULL;
	if (!models) {
		fprintf(stderr, "usage: test_msst FIXTURES_DIR roformer|scnet|mdx23c "
		        "convert|bands|chunk|pipeline\n");
		return 2;
	}
	while (models[N_MODELS])
		N_MODELS++;
	dir = argv[1];
	snprintf(tmpdir, sizeof tmpdir, "/tmp/sb-msst-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	const char *c = argv[3];
	printf("%s %s\n", family, c);
	if (!strcmp(c, "convert"))
		case_convert();
	else if (!strcmp(c, "bands") && !strcmp(family, "roformer")) {
		bands_against(path("%s", "mel-kim-bands.safetensors"), "kim.", 44100, 2048, 60, 2);
		bands_against(path("%s", "mel-tiny-io.safetensors"), "mel.", 44100, 128, 12, 2);
	} else if (!strcmp(c, "chunk"))
		case_chunk();
	else if (!strcmp(c, "pipeline"))
		case_pipeline();
	else if (!strcmp(c, "transfers") && !strcmp(family, "roformer"))
		case_transfers();
	else {
		fprintf(stderr, "unknown case %s\n", c);
		return 2;
	}
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
