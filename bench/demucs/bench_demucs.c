/* HTDemucs speed and memory for a released-size model (random weights from
 * released-shapes.json, or a converted file given with --model), on any backend's device:
 * seconds per 7.8 s segment, seconds for a whole song through separate() (normalisation,
 * overlapping segments, blending), and the process's peak RSS. Prints one JSON line;
 * run_bench.sh puts it beside the reference PyTorch run.
 *
 *   bench_demucs SHAPES_JSON [--model FILE] [--write-model FILE] [--threads N]
 *                [--seconds S] [--repeat N] [--device cpu|opencl:N|LIST] [--batch B]
 *                [--gemm auto|clblast|own|tiled|tf32] [--precision fp32|bf16] [--profile]
 *                [--beside N]
 *
 * --device names the device of the segment timing (the first of a list) and the devices the
 * song is shared among ("cpu,opencl:0,opencl:1"); --batch B runs B segments per forward pass
 * (the segment time is a pass's time over B); --gemm picks the OpenCL matrix products
 * (SB_CL_GEMM); --precision bf16 asks the devices for bf16 products (the CPU's need
 * AVX512_BF16; the JSON's "precision" says what ran); --profile adds one more pass with the device drained around every operation
 * and prints, on stderr, where its time went (operation, calls, ms, GFLOP/s of the products),
 * and in the JSON the products' rate and the operations launched per segment. --beside N
 * opens the CPU as beside N GPUs (a core left to each, its threads at nice +10; by default the
 * list's GPUs, as the job engine counts them), for a PoCL device standing in for a GPU.
 */
#include "../bench_usage.h"
#include "../dev_report.h"
#include "../null_sink.h"
#include "../prof_products.h"
#include "backend/backend.h"
#include "core/thread_pool.h"
#include "models/demucs/demucs.h"
#include "models/pace_cache.h"
#include "random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "bench_demucs: %s\n", msg);
}

static void progress(void *user, double fraction, const char *stage)
{
	(void)user;
	(void)stage;
	fprintf(stderr, "\r  song: %3.0f %%", 100 * fraction);
}

int main(int argc, char **argv)
{
	const char *shapes = NULL, *model = NULL, *write_model = NULL, *device = "cpu";
	int threads = 0, repeat = 1, profile = 0, batch = 1, bf16 = 0, beside = -1;
	double seconds = 180;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "--write-model") && i + 1 < argc)
			write_model = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gemm") && i + 1 < argc)
			setenv("SB_CL_GEMM", argv[++i], 1);
		else if (!strcmp(argv[i], "--precision") && i + 1 < argc)
			bf16 = !strcmp(argv[++i], "bf16");
		else if (!strcmp(argv[i], "--profile"))
			profile = 1;
		else if (!strcmp(argv[i], "--beside") && i + 1 < argc)
			beside = atoi(argv[++i]);
		else if (argv[i][0] != '-' && !shapes)
			shapes = argv[i];
		else {
			fprintf(stderr, "usage: bench_demucs SHAPES_JSON [--model FILE] [--write-model FILE] "
			                "[--threads N] [--seconds S] [--repeat N] [--device cpu|opencl:N|LIST] "
			                "[--batch B] [--gemm auto|clblast|own|tiled|tf32] [--precision fp32|bf16] "
			                "[--profile] [--beside N]\n");
			return 2;
		}
	}
	char tmp[] = "/tmp/sb-bench-htdemucs-XXXXXX";
	if (!model) {
		if (!shapes) {
			fprintf(stderr, "bench_demucs: give released-shapes.json or --model\n");
			return 2;
		}
		if (write_model) {
			model = write_model;
		} else {
			const int fd = mkstemp(tmp);
			if (fd < 0)
				return 1;
			close(fd);
			model = tmp;
		}
		if (random_model_write(shapes, "htdemucs", model, NULL) != 0)
			return 1;
	}
	const sb_logger log = {log_fn, NULL};
	sb_device_list *devs = NULL;
	sb_device_set set;
	sb_exec dev[SB_MAX_SET];
	if (batch < 1 || sb_devices_enumerate(&log, &devs) != SB_OK ||
	    sb_devices_resolve_set(devs, device, &set) != SB_OK || set.fell_back) {
		fprintf(stderr, "bench_demucs: no device '%s' here (or a bad --batch)\n", device);
		return 1;
	}
	/* as the job engine opens them: a CPU beside GPUs leaves them cores and runs below them */
	int gpus = 0, has_cpu = 0;
	for (size_t i = 0; i < set.n; i++) {
		gpus += sb_device_is_gpu(sb_devices_get(devs, set.index[i]));
		has_cpu |= sb_device_is_native(sb_devices_get(devs, set.index[i]));
	}
	if (beside >= 0)
		gpus = beside;
	const sb_open_opts oo = {threads, bf16 ? SB_PREC_BF16 : SB_PREC_FP32, gpus};
	for (size_t i = 0; i < set.n; i++)
		if (sb_exec_open(sb_devices_get(devs, set.index[i]), &oo, &log, &dev[i]) != SB_OK) {
			fprintf(stderr, "bench_demucs: cannot open %s\n",
			        sb_devices_get(devs, set.index[i])->id);
			return 1;
		}
	const char *dev_label = dev[0].props->label;
	sb_model *m = NULL;
	double t0 = sb_now();
	if (sb_demucs_model_open(model, "htdemucs", NULL, &log, &m) != SB_OK)
		return 1;
	const double load_s = sb_now() - t0;
	const sb_htdemucs *net = sb_demucs_bag_net(sb_demucs_model_bag(m), 0);
	const int64_t L = sb_htdemucs_cfg(net)->segment_length;

	/* one segment: a warm-up, then the timed runs */
	float *in = malloc(sizeof(float) * (size_t)(2 * L) * batch);
	float *out = malloc(sizeof(float) * (size_t)(8 * L) * batch);
	uint64_t seed = 1;
	for (int64_t i = 0; i < 2 * L * batch; i++)
		in[i] = 0.1f * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
	sb_htdemucs_on *on = NULL;
	if (sb_htdemucs_place(net, &dev[0], &log, &on) != SB_OK)
		return 1;
	/* a warm-up (first touch of buffers, kernel builds), then the timed runs */
	sb_status fst = sb_htdemucs_forward(on, batch, in, out, NULL, NULL);
	t0 = sb_now();
	double c0 = cpu_seconds();
	for (int r = 0; r < repeat && fst == SB_OK; r++)
		fst = sb_htdemucs_forward(on, batch, in, out, NULL, NULL);
	if (fst != SB_OK) {
		fprintf(stderr, "bench_demucs: forward failed: %s\n", sb_status_str(fst));
		return 1;
	}
	const double seg_s = (sb_now() - t0) / repeat / batch;
	const double seg_cpu = (cpu_seconds() - c0) / repeat / batch;
	char gemm[128];
	snprintf(gemm, sizeof gemm, "%s", dev[0].be->describe(dev[0].d));
	double gemm_s = 0, gemm_flops = 0, prof_s = 0;
	long launches = 0;
	if (profile) {
		dev[0].be->set_profiling(dev[0].d, 1);
		t0 = sb_now();
		fst = sb_htdemucs_forward(on, batch, in, out, NULL, NULL);
		prof_s = sb_now() - t0;
		sb_prof_entry p[64];
		const int np = dev[0].be->profile(dev[0].d, p, 64);
		double dev_s = 0;
		fprintf(stderr, "profile of one pass of %d segment%s (%s, products through %s), %.1f ms "
		        "in all:\n", batch, batch == 1 ? "" : "s", dev_label, gemm, 1e3 * prof_s);
		fprintf(stderr, "  %-18s %6s %10s %7s %9s\n", "operation", "calls", "ms", "share",
		        "GFLOP/s");
		for (int i = 0; i < np; i++) {
			dev_s += p[i].seconds;
			if (strcmp(p[i].name, "upload") && strcmp(p[i].name, "download"))
				launches += p[i].calls;
			char rate[32] = "";
			if (p[i].flops > 0)
				snprintf(rate, sizeof rate, "%9.1f", p[i].flops / p[i].seconds / 1e9);
			fprintf(stderr, "  %-18s %6ld %10.2f %6.1f%% %9s\n", p[i].name, p[i].calls,
			        1e3 * p[i].seconds, 100 * p[i].seconds / prof_s, rate);
			if (!strcmp(p[i].name, "gemm")) {
				gemm_s = p[i].seconds;
				gemm_flops = p[i].flops;
			}
		}
		fprintf(stderr, "  %-18s %6s %10.2f %6.1f%%\n", "host and gaps", "",
		        1e3 * (prof_s - dev_s), 100 * (prof_s - dev_s) / prof_s);
		print_products(dev[0].be, dev[0].d, prof_s, 25);
		dev[0].be->set_profiling(dev[0].d, 0);
	}
	sb_htdemucs_unplace(on);
	const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	/* the CPU's: every core alone, one less for each GPU beside it (cpu_backend.c) */
	int used_threads = threads > 0 ? threads : nproc > 0 ? (int)nproc : 1;
	if (threads <= 0 && gpus > 0 && has_cpu)
		used_threads = used_threads > gpus + 1 ? used_threads - gpus : 1;
	free(in);
	free(out);

	/* a whole song */
	const int64_t n = (int64_t)(seconds * 44100);
	float *song = malloc(sizeof(float) * (size_t)(2 * n));
	for (int64_t i = 0; i < n; i++) {
		const double t = (double)i / 44100;
		song[2 * i] = (float)(0.3 * sin(2 * M_PI * 220 * t)) +
		              0.05f * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
		song[2 * i + 1] = (float)(0.3 * sin(2 * M_PI * 330 * t)) +
		                  0.05f * (2.f * (float)(rm_next(&seed) >> 40) / (float)(1 << 24) - 1.f);
	}
	sb_source *src = NULL;
	sb_source_memory(song, n, 2, 44100, &src);
	null_sink ns = {.sink = {.n_stems = SB_N_STEMS, .channels = 2, .write = null_write}};
	ns.sink.impl = &ns;
	dev_report dr = {0};
	/* several devices: their paces from earlier runs, as the job runner keeps them
	 * (models/pace_cache.h), and what this song measured kept for the next */
	sb_pace_entry pace[8];
	char pace_job[256];
	int paces_known = 0;
	sb_pace_cache_job(pace_job, sizeof pace_job, "htdemucs", bf16, threads, batch);
	if (set.n > 1 && set.n <= 8) {
		sb_pace_cache_load(pace_job, dev, (int)set.n, pace, &log);
		for (size_t i = 0; i < set.n; i++)
			paces_known += pace[i].kept > 0;
	}
	/* as the job engine runs a song: the devices stay open and the model keeps its weights on
	 * them after the call (freed with the model, outside the timings), so the song ends
	 * without waiting for a pass another device won (resident.h: sb_resident_drain) */
	sb_run_ctx ctx = {.log = &log, .threads = threads, .progress = progress, .dev = dev,
	                  .n_dev = (int)set.n, .batch = batch, .progress_user = &dr,
	                  .device_report = dev_report_take, .keep = (1u << set.n) - 1,
	                  .pace = set.n > 1 && set.n <= 8 ? pace : NULL};
	t0 = sb_now();
	c0 = cpu_seconds();
	const sb_status st = sb_model_separate(m, &ctx, src, &ns.sink);
	const double song_s = sb_now() - t0;
	const double song_cpu = cpu_seconds() - c0;
	if (set.n > 1 && set.n <= 8 && st == SB_OK)
		sb_pace_cache_save(pace_job, dev, (int)set.n, pace, &log);
	fprintf(stderr, "\n");
	src->close(src);
	free(song);
	const double peak_mb = peak_rss_mb();
	if (st != SB_OK || ns.frames[0] != n) {
		fprintf(stderr, "bench_demucs: separation failed: %s\n", sb_status_str(st));
		return 1;
	}
	printf("{\"impl\": \"stembridge\", \"device\": \"%s\", \"devices\": %zu, \"batch\": %d, "
	       "\"gemm\": \"%s\", \"precision\": \"%s\", \"threads\": %d, \"load_s\": %.3f, "
	       "\"segment_s\": %.3f, \"segment_cpu_s\": %.3f, \"song_s\": %.3f, "
	       "\"song_cpu_s\": %.3f, \"song_seconds\": %.1f, \"peak_rss_mb\": %.1f",
	       dev_label, set.n, batch, gemm,
	       dev[0].be->precision ? dev[0].be->precision(dev[0].d) : "fp32", used_threads, load_s, seg_s, seg_cpu, song_s, song_cpu,
	       seconds,
	       peak_mb);
	if (dr.done > 0)
		printf(", \"dev0_busy_s\": %.3f, \"dev0_wait_ms_per_segment\": %.2f", dr.busy_s,
		       1e3 * dr.wait_s / (double)dr.done);
	if (set.n > 1) {
		printf(", \"paces_kept_before\": %d, \"segments_per_device\": [", paces_known);
		for (size_t i = 0; i < set.n && i < 8; i++)
			printf("%s%ld", i ? ", " : "", dr.units[i]);
		printf("]");
	}
	if (prof_s > 0)
		printf(", \"profiled_segment_s\": %.4f, \"gemm_s\": %.4f, \"gemm_gflop\": %.1f, "
		       "\"gemm_gflops\": %.1f, \"launches_per_segment\": %.1f", prof_s / batch,
		       gemm_s / batch, gemm_flops / 1e9 / batch,
		       gemm_s > 0 ? gemm_flops / gemm_s / 1e9 : 0.0, (double)launches / batch);
	printf("}\n");
	sb_model_free(m);
	for (size_t i = 0; i < set.n; i++)
		sb_exec_close(&dev[i]);
	sb_devices_free(devs);
	if (model == tmp)
		unlink(tmp);
	return 0;
}
