/* Speed and memory of MSST's families (BS-RoFormer, Mel-Band RoFormer, SCNet, MDX23C;
 * engine/models/roformer, scnet, mdx23c on models/msst_demix.c) on any backend's device, for a
 * converted model or a released-layout checkpoint + YAML (bench/msst/make_model.py writes one
 * with random weights). Prints one JSON line on stdout;
 * run.sh puts it beside the reference PyTorch (reference.py) in one table.
 *
 *   bench_msst MODEL.safetensors | MODEL.ckpt --config MODEL.yaml [-o OUT.safetensors]
 *                  [--device cpu|opencl:N] [--threads N] [--batch B]
 *                  [--warmup W] [--repeat R] [--no-profile] [--dump DIR]
 *                  [--song SECONDS] [--convert-only] [--precision fp32|bf16]
 *
 * A checkpoint is converted first (as stembridge-convert does) in a child process, so that the
 * conversion's memory is not this process's peak; OUT defaults to MODEL.safetensors beside the
 * checkpoint and is reused when newer than both inputs.
 *
 * Chunk mode (the default): one chunk of the config's chunk_size (B chunks with --batch)
 * through the family's forward pass (msst_demix.h: sb_msst_model_net): W warm-up passes, then R
 * timed ones (wall and CPU seconds per chunk); then a pass as a song runs it, counted by the
 * device where it counts (uploads, read-backs, the host's waits, launches: stderr and the
 * JSON); then one more pass with the device's profiling on (every operation timed with the
 * device drained around it), whose entries go to stderr, slowest first, with the products'
 * GFLOP/s. A RoFormer's GFLOP per chunk are counted from the config as /tmp/roformer/SPEC.md
 * section 10 does (2 x the multiply-adds of every product: the transformers' linears and
 * attention, the band split, the mask estimators); the profile's own count of the products is
 * printed beside it, and is the count of the other families.
 * --dump DIR writes DIR/input.f32 ([channels][chunk]) and DIR/output.f32 ([stems][channels]
 * [chunk]) for reference.py --compare.
 *
 * Song mode (--song S): the sb_model (sb_model_open + sb_model_separate: MSST's demix,
 * streamed) on S seconds of a generated signal (computed as it is read, so the input holds no
 * memory) into a sink that only counts: seconds, real-time factor, peak RSS. Run it for two
 * lengths in two processes: the peak should not grow with the length.
 *
 * Both modes print the RSS once the model is loaded and placed, and the peak (ru_maxrss).
 * The signal (reference.py computes the same): 16 sines at 40 Hz x 1.5^k, amplitude
 * 0.1 x 1.5^(-k/2), phase 1.3 k + 0.7 c, plus 0.02 white noise from splitmix64(2 frame + c).
 */
#include "../bench_usage.h"
#include "../dev_report.h"
#include "../prof_products.h"
#include "../null_sink.h"
#include "backend/backend.h"
#include "convert/convert.h"
#include "core/thread_pool.h"
#include "models/model.h"
#include "models/msst_demix.h"
#include "models/roformer/roformer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RATE 44100

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "bench_msst: %s\n", msg);
}
static const sb_logger logger = {log_fn, NULL};

static double rss_now_mb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atof(line + 6);
	if (f)
		fclose(f);
	return kb / 1024.0;
}

/* ---- the test signal ---- */

static float noise(int64_t frame, int c)
{
	uint64_t z = (uint64_t)frame * 2 + (uint64_t)c + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (float)((double)(z >> 40) / (double)(1 << 23) - 1.0);
}

/* frames [start, start + n) of channel c of `channels`, at out[i * stride] */
static void test_signal(int64_t start, int64_t n, int c, float *out, int stride)
{
	for (int64_t i = 0; i < n; i++)
		out[i * stride] = 0.02f * noise(start + i, c);
	for (int k = 0; k < 16; k++) {
		const double amp = 0.1 * pow(1.5, -k / 2.0), w = 2 * M_PI * 40 * pow(1.5, k) / RATE;
		/* the phase at start, then a rotation per frame (renewed every 4096 frames) */
		double cr = 0, ci = 0;
		const double wr = cos(w), wi = sin(w);
		for (int64_t i = 0; i < n; i++) {
			if (i % 4096 == 0) {
				const double ph = w * (double)(start + i) + 1.3 * k + 0.7 * c;
				cr = cos(ph);
				ci = sin(ph);
			}
			out[i * stride] += (float)(amp * ci);
			const double r = cr * wr - ci * wi;
			ci = ci * wr + cr * wi;
			cr = r;
		}
	}
}

typedef struct {
	sb_source src;
} gen_source;

static sb_status gen_read(sb_source *self, int64_t start, int64_t n, float *out)
{
	const int ch = self->channels;
	for (int c = 0; c < ch; c++) {
		int64_t a = start, b = start + n;
		for (int64_t i = 0; i < n; i++) /* frames outside the input read as zero */
			if (start + i < 0 || start + i >= self->frames)
				out[i * ch + c] = 0.f;
		a = a < 0 ? 0 : a;
		b = b > self->frames ? self->frames : b;
		if (b > a)
			test_signal(a, b - a, c, out + (a - start) * ch + c, ch);
	}
	return SB_OK;
}

static void gen_close(sb_source *self)
{
	(void)self;
}

/* ---- the arithmetic of one chunk, counted from the config (SPEC.md section 10) ---- */

typedef struct {
	double linears, attention, split, masks; /* multiply-adds */
} rf_macs;

static rf_macs count_macs(const sb_roformer *net)
{
	const sb_rf_config *c = &net->cfg;
	const double T = net->frames, nb = net->nb, d = c->dim, H = c->heads, dh = c->dim_head,
	             inner = net->inner, tokens = T * nb;
	const double per_token = d * (3 * inner + (net->gates ? H : 0)) + inner * d +
	                         2 * d * net->hidden;
	rf_macs m;
	m.linears = tokens * per_token * c->depth * (c->time_depth + c->freq_depth);
	m.attention = c->depth * (c->time_depth * nb * 2 * H * T * T * dh +
	                          c->freq_depth * T * 2 * H * nb * nb * dh);
	m.split = T * net->total * d;
	const int layers = sb_rf_mask_layers(c);
	double mask = 0;
	for (int k = 0; k < net->nb; k++) {
		double in = d;
		for (int l = 0; l < layers; l++) {
			const double out = l == layers - 1 ? 2.0 * net->din[k] : net->mlp_hidden;
			mask += in * out;
			in = out;
		}
	}
	m.masks = net->n_stems * T * mask;
	return m;
}

/* ---- conversion in a child process ---- */

static time_t mtime(const char *p)
{
	struct stat s;
	return stat(p, &s) == 0 ? s.st_mtime : 0;
}

static int convert(const char *ckpt, const char *yaml, const char *out)
{
	if (mtime(out) && mtime(out) >= mtime(ckpt) && mtime(out) >= mtime(yaml)) {
		fprintf(stderr, "bench_msst: %s is newer than its checkpoint and config: reused\n",
		        out);
		return 0;
	}
	const double t0 = sb_now();
	const pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		const char *in[1] = {ckpt};
		sbc_convert_opts o = {.inputs = in, .n_inputs = 1, .output = out, .config = yaml,
		                      .overwrite = 1, .log = &logger};
		_exit(sbc_convert(&o) == SB_OK ? 0 : 1);
	}
	int ws = 0;
	if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		return -1;
	fprintf(stderr, "bench_msst: converted %s + %s -> %s in %.1f s\n", ckpt, yaml, out,
	        sb_now() - t0);
	return 0;
}

static int write_raw(const char *dir, const char *name, const float *x, size_t n)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	const int ok = f && fwrite(x, sizeof(float), n, f) == n;
	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_msst MODEL.safetensors | MODEL.ckpt --config MODEL.yaml "
	                "[-o OUT.safetensors] [--device cpu|opencl:N] [--threads N] [--batch B] "
	                "[--warmup W] [--repeat R] [--no-profile] [--dump DIR] [--song SECONDS] [--convert-only]\n"
	                "       [--precision fp32|bf16]\n");
}

int main(int argc, char **argv)
{
	const char *model = NULL, *yaml = NULL, *out_path = NULL, *device = "cpu", *dump = NULL;
	int threads = 2, batch = 0, warmup = 1, repeat = 1, profile = 1, convert_only = 0, bf16 = 0;
	double song = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			yaml = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out_path = argv[++i];
		else if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			warmup = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--convert-only"))
			convert_only = 1;
		else if (!strcmp(argv[i], "--no-profile"))
			profile = 0;
		else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
			dump = argv[++i];
		else if (!strcmp(argv[i], "--song") && i + 1 < argc)
			song = atof(argv[++i]);
		else if (!strcmp(argv[i], "--precision") && i + 1 < argc &&
		         (!strcmp(argv[i + 1], "fp32") || !strcmp(argv[i + 1], "bf16")))
			bf16 = !strcmp(argv[++i], "bf16");
		else if (argv[i][0] != '-' && !model)
			model = argv[i];
		else {
			usage();
			return 2;
		}
	}
	if (!model || repeat < 1 || warmup < 0 || batch < 0 || song < 0) {
		usage();
		return 2;
	}
	/* a checkpoint: convert it first */
	char conv[1024];
	const size_t ml = strlen(model);
	if (ml > 5 && !strcmp(model + ml - 5, ".ckpt")) {
		if (!yaml) {
			fprintf(stderr, "bench_msst: a checkpoint needs --config MODEL.yaml\n");
			return 2;
		}
		if (!out_path) {
			snprintf(conv, sizeof conv, "%.*s.safetensors", (int)(ml - 5), model);
			out_path = conv;
		}
		if (convert(model, yaml, out_path) != 0) {
			fprintf(stderr, "bench_msst: could not convert %s\n", model);
			return 1;
		}
		model = out_path;
	}
	if (convert_only)
		return 0;

	sb_device_list *devs = NULL;
	sb_device_set set;
	sb_exec dev;
	if (sb_devices_enumerate(&logger, &devs) != SB_OK ||
	    sb_devices_resolve_set(devs, device, &set) != SB_OK || set.fell_back || set.n != 1) {
		fprintf(stderr, "bench_msst: no device '%s' here\n", device);
		return 1;
	}
	const sb_open_opts oo = {threads, bf16 ? SB_PREC_BF16 : SB_PREC_FP32, 0};
	if (sb_exec_open(sb_devices_get(devs, set.index[0]), &oo, &logger, &dev) != SB_OK) {
		fprintf(stderr, "bench_msst: cannot open %s\n", device);
		return 1;
	}
	char gemm_desc[128];
	snprintf(gemm_desc, sizeof gemm_desc, "%s", dev.be->describe(dev.d));

	if (song > 0) {
		sb_model *m = NULL;
		double t0 = sb_now();
		if (sb_model_open(model, NULL, &logger, &m) != SB_OK)
			return 1;
		const double load_s = sb_now() - t0;
		const double rss_loaded = rss_now_mb();
		const int64_t n = (int64_t)(song * RATE);
		gen_source gs = {{2, RATE, n, gen_read, gen_close, NULL}};
		null_sink ns = {.sink = {.n_stems = SB_MAX_STEMS, .channels = 2, .write = null_write}};
		ns.sink.impl = &ns;
		dev_report dr = {0};
		sb_run_ctx ctx = {.log = &logger, .threads = threads, .dev = &dev, .n_dev = 1,
		                  .batch = batch, .progress_user = &dr, .device_report = dev_report_take};
		t0 = sb_now();
		const double c0 = cpu_seconds();
		const sb_status st = sb_model_separate(m, &ctx, &gs.src, &ns.sink);
		const double song_s = sb_now() - t0, song_cpu = cpu_seconds() - c0;
		if (st != SB_OK || ns.frames[SB_STEM_VOCALS] + ns.frames[SB_STEM_DRUMS] == 0) {
			fprintf(stderr, "bench_msst: separation failed: %s\n", sb_status_str(st));
			return 1;
		}
		int stems = 0;
		for (int s = 0; s < SB_MAX_STEMS; s++)
			if (ns.frames[s]) {
				stems++;
				if (ns.frames[s] != n) {
					fprintf(stderr, "bench_msst: stem %d has %lld frames of %lld\n", s,
					        (long long)ns.frames[s], (long long)n);
					return 1;
				}
			}
		/* what ran: the tensor-core kernel is built at the first bf16 product */
		snprintf(gemm_desc, sizeof gemm_desc, "%s", dev.be->describe(dev.d));
		printf("{\"impl\": \"stembridge\", \"mode\": \"song\", \"device\": \"%s\", \"gemm\": "
		       "\"%s\", \"precision\": \"%s\", \"threads\": %d, \"batch\": %d, \"model\": \"%s\", \"load_s\": %.2f, "
		       "\"song_seconds\": %.1f, \"song_s\": %.3f, \"song_cpu_s\": %.3f, \"rtf\": %.4f, "
		       "\"stems\": %d, \"rss_loaded_mb\": %.1f, \"peak_rss_mb\": %.1f, "
		       "\"dev0_busy_s\": %.3f, \"dev0_wait_ms_per_chunk\": %.2f}\n",
		       dev.props->label, gemm_desc,
		       dev.be->precision ? dev.be->precision(dev.d) : "fp32", threads, batch, model,
		       load_s, song, song_s,
		       song_cpu, song_s / song, stems, rss_loaded, peak_rss_mb(), dr.busy_s,
		       dr.done > 0 ? 1e3 * dr.wait_s / (double)dr.done : 0.0);
		sb_model_free(m);
		sb_exec_close(&dev);
		sb_devices_free(devs);
		return 0;
	}

	/* one chunk */
	sb_model *m = NULL;
	double t0 = sb_now();
	if (sb_model_open(model, NULL, &logger, &m) != SB_OK)
		return 1;
	const double load_s = sb_now() - t0;
	const sb_msst_net *net = sb_msst_model_net(m);
	if (!net) {
		fprintf(stderr, "bench_msst: %s is no model of MSST's families\n", model);
		return 1;
	}
	const int B = batch > 0 ? batch : 1, ch = net->channels, S = net->outputs;
	const int64_t L = m->info.default_chunk_frames;
	float *in = malloc(sizeof(float) * (size_t)B * ch * L);
	float *out = malloc(sizeof(float) * (size_t)B * S * ch * L);
	if (!in || !out)
		return 1;
	for (int b = 0; b < B; b++)
		for (int s = 0; s < ch; s++)
			test_signal((int64_t)b * L, L, s, in + ((int64_t)b * ch + s) * L, 1);
	sb_pool *pool = NULL;
	sb_pool_new(threads, 0, &pool);
	void *on = NULL;
	if (net->place(net->net, &dev, &logger, &on) != SB_OK)
		return 1;
	const double rss_loaded = rss_now_mb();
	sb_status st = SB_OK;
	for (int r = 0; r < warmup && st == SB_OK; r++)
		st = net->forward(on, B, in, out);
	t0 = sb_now();
	double c0 = cpu_seconds();
	for (int r = 0; r < repeat && st == SB_OK; r++)
		st = net->forward(on, B, in, out);
	if (st != SB_OK) {
		fprintf(stderr, "bench_msst: forward failed: %s\n", sb_status_str(st));
		return 1;
	}
	const double chunk_s = (sb_now() - t0) / repeat / B, chunk_cpu = (cpu_seconds() - c0) / repeat / B;
	/* a RoFormer's arithmetic counted from its config; the others' from the profile below */
	static const char *const rf_families[] = {"bs_roformer", "mel_band_roformer", NULL};
	const int roformer = sb_msst_file_is(model, rf_families);
	const rf_macs mac = roformer ? count_macs((const sb_roformer *)net->net) : (rf_macs){0, 0, 0, 0};
	double gflop = 2e-9 * (mac.linears + mac.attention + mac.split + mac.masks);
	double in2 = 0, out2 = 0;
	for (int64_t i = 0; i < (int64_t)ch * L; i++)
		in2 += (double)in[i] * in[i];
	for (int64_t i = 0; i < (int64_t)S * ch * L; i++)
		out2 += (double)out[i] * out[i];
	if (dump && (write_raw(dump, "input.f32", in, (size_t)ch * L) != 0 ||
	             write_raw(dump, "output.f32", out, (size_t)S * ch * L) != 0)) {
		fprintf(stderr, "bench_msst: cannot write to %s\n", dump);
		return 1;
	}
	/* a pass as a song's are run (its stop flags in place), counted by the device: uploads,
	 * read-backs, the host's waits and launches a chunk (issue #50) */
	sb_dev_counts n0 = {0}, n1 = {0};
	const int counts = dev.be->counts != NULL;
	if (counts) {
		atomic_int stop = 0;
		net->on_stop(on, &stop, NULL);
		dev.be->counts(dev.d, &n0);
		st = net->forward(on, B, in, out);
		dev.be->counts(dev.d, &n1);
		net->on_stop(on, NULL, NULL);
		fprintf(stderr, "a pass of %d chunk%s as a song runs it: %ld upload%s, %ld read-back%s, "
		        "%ld wait%s, %ld launches (%.1f a chunk)\n", B, B == 1 ? "" : "s",
		        n1.uploads - n0.uploads, n1.uploads - n0.uploads == 1 ? "" : "s",
		        n1.downloads - n0.downloads, n1.downloads - n0.downloads == 1 ? "" : "s",
		        n1.waits - n0.waits, n1.waits - n0.waits == 1 ? "" : "s", n1.launches - n0.launches,
		        (double)(n1.launches - n0.launches) / B);
	}
	/* the profiled pass */
	double prof_s = 0, gemm_s = 0, gemm_fl = 0, att_s = 0, att_fl = 0;
	long launches = 0;
	if (profile && dev.be->set_profiling && dev.be->profile) {
		dev.be->set_profiling(dev.d, 1);
		t0 = sb_now();
		st = net->forward(on, B, in, out);
		prof_s = sb_now() - t0;
		sb_prof_entry p[64];
		const int np = dev.be->profile(dev.d, p, 64);
		double dev_s = 0;
		fprintf(stderr, "profile of one pass of %d chunk%s (%s, products: %s), %.2f s in all:\n",
		        B, B == 1 ? "" : "s", dev.props->label, gemm_desc, prof_s);
		fprintf(stderr, "  %-14s %7s %10s %7s %9s %9s\n", "operation", "calls", "s", "share",
		        "GFLOP", "GFLOP/s");
		for (int i = 0; i < np; i++) {
			dev_s += p[i].seconds;
			if (strcmp(p[i].name, "upload") && strcmp(p[i].name, "download"))
				launches += p[i].calls;
			char fl[32] = "", rate[32] = "";
			if (p[i].flops > 0) {
				snprintf(fl, sizeof fl, "%9.1f", p[i].flops / 1e9);
				snprintf(rate, sizeof rate, "%9.1f", p[i].flops / p[i].seconds / 1e9);
			}
			fprintf(stderr, "  %-14s %7ld %10.3f %6.1f%% %9s %9s\n", p[i].name, p[i].calls,
			        p[i].seconds, 100 * p[i].seconds / prof_s, fl, rate);
			if (!strcmp(p[i].name, "gemm")) {
				gemm_s = p[i].seconds;
				gemm_fl = p[i].flops;
			} else if (!strcmp(p[i].name, "attention")) {
				att_s = p[i].seconds;
				att_fl = p[i].flops;
			}
		}
		fprintf(stderr, "  %-14s %7s %10.3f %6.1f%%   (enqueueing and waits: the whole chunk runs on the device)\n",
		        "host and gaps", "", prof_s - dev_s, 100 * (prof_s - dev_s) / prof_s);
		if (roformer)
			fprintf(stderr, "counted from the config: %.1f GFLOP a chunk = linears %.1f + "
			        "attention %.1f + band split %.1f + masks %.1f\n", gflop,
			        2e-9 * mac.linears, 2e-9 * mac.attention, 2e-9 * mac.split,
			        2e-9 * mac.masks);
		else
			gflop = 1e-9 * gemm_fl / B;
		print_products(dev.be, dev.d, prof_s, 15);
		dev.be->set_profiling(dev.d, 0);
	}
	snprintf(gemm_desc, sizeof gemm_desc, "%s", dev.be->describe(dev.d));
	printf("{\"impl\": \"stembridge\", \"mode\": \"chunk\", \"device\": \"%s\", \"gemm\": \"%s\", "
	       "\"precision\": \"%s\", \"threads\": %d, \"batch\": %d, \"model\": \"%s\", \"params\": %lld, \"load_s\": %.2f, "
	       "\"chunk_seconds\": %.3f, \"chunk_s\": %.3f, \"chunk_cpu_s\": %.3f, "
	       "\"gflop_chunk\": %.1f, \"gflops_effective\": %.1f, \"out_rms_over_in_rms\": %.4f, "
	       "\"rss_loaded_mb\": %.1f, \"peak_rss_mb\": %.1f",
	       dev.props->label, gemm_desc, dev.be->precision ? dev.be->precision(dev.d) : "fp32",
	       sb_pool_threads(pool), B, model, (long long)net->params,
	       load_s, (double)L / RATE, chunk_s, chunk_cpu, gflop, gflop / chunk_s,
	       sqrt(out2 / (in2 > 0 ? in2 : 1)), rss_loaded, peak_rss_mb());
	if (counts)
		printf(", \"uploads_per_pass\": %ld, \"downloads_per_pass\": %ld, \"waits_per_pass\": %ld, "
		       "\"launches_per_chunk_counted\": %.1f", n1.uploads - n0.uploads,
		       n1.downloads - n0.downloads, n1.waits - n0.waits,
		       (double)(n1.launches - n0.launches) / B);
	if (prof_s > 0)
		printf(", \"profiled_chunk_s\": %.3f, \"gemm_s\": %.3f, \"gemm_gflop\": %.1f, "
		       "\"gemm_gflops\": %.1f, \"attention_s\": %.3f, \"attention_gflop\": %.1f, "
		       "\"attention_gflops\": %.1f, \"launches_per_chunk\": %.0f",
		       prof_s / B, gemm_s / B, gemm_fl / 1e9 / B, gemm_s > 0 ? gemm_fl / gemm_s / 1e9 : 0,
		       att_s / B, att_fl / 1e9 / B, att_s > 0 ? att_fl / att_s / 1e9 : 0,
		       (double)launches / B);
	printf("}\n");
	net->unplace(on);
	sb_model_free(m);
	sb_pool_free(pool);
	free(in);
	free(out);
	sb_exec_close(&dev);
	sb_devices_free(devs);
	return st == SB_OK ? 0 : 1;
}
