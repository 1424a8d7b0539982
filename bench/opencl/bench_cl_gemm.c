/* Matrix products on an OpenCL device through each product path of the backend (SB_CL_GEMM:
 * CLBlast, the own kernel, the tiled kernel of gemm.cl, and the tiled kernel with other
 * tilings through SB_CL_TILE), on HTDemucs's shapes at full size (issue #24: the three largest
 * products of a segment and the two strided-batched products of its attention, 8 heads of 64
 * over 2688 tokens, laid out as the backend's attention runs them), in TFLOP/s.
 *
 *   bench_cl_gemm [--device opencl:N] [--gemm clblast,own,tiled,mma] [--tiles T1/T2/...]
 *                 [--mma-tiles T1/T2/...] [--tf32-tiles T1/T2/...] [--scale S] [--seconds S]
 *                 [--model htdemucs|roformer|thin]
 *     --device  the device (default: the first GPU, else the first OpenCL device)
 *     --gemm    the product paths to time, in order (default clblast,own,tiled); mma is the
 *               device opened for bf16 products (--precision bf16: NVIDIA's tensor cores,
 *               cl_gemm_mma.h; SB_CL_MMA=emulate elsewhere), tf32 the tensor cores with tf32
 *               inputs (SB_CL_GEMM=tf32); their vs_first is the rounding's
 *     --tiles   more runs of the tiled kernel, one per tiling "TM,TN,TK,WM,WN" ('/' between
 *               them), each alone (SB_CL_TILE), e.g. 128,128,16,8,8/128,64,16,8,4
 *     --mma-tiles  more runs of the tensor-core kernel, one per "BM,BN" (SB_CL_MMA_TILE)
 *     --tf32-tiles the same with tf32 inputs (SB_CL_GEMM=tf32)
 *     --scale   divide every dimension by S (heads stay 8): a smoke test on PoCL
 *     --seconds time per shape and path, after one warm-up product (default 0.25)
 *     --model   whose shapes: HTDemucs's (default), BS-RoFormer ep_317's (a layer's four
 *               products over a chunk's 49,662 tokens and a band's mask MLP), or HTDemucs's
 *               products of few rows or few sums (its frequency branch's convolutions over 336
 *               frames, one weight for every frequency row of the batch; the gemm.cl thin
 *               tiling's shapes)
 *
 * One JSON line per path and shape, then one per path for the whole set. Times are wall clock
 * around a run of products enqueued back to back and one wait, so launch costs count as they
 * do in a model; each path's results are compared with the first path's ("vs_first", relative
 * L2), so a fast wrong kernel shows. Opening the device and building kernels are not timed.
 */
#include "backend/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "%s\n", msg);
}
static const sb_logger logger = {log_fn, NULL};

typedef struct {
	int M, N, K, tb, batch;
	int lda, ldb, ldc;   /* 0: dense */
	long sa, sb, sc;     /* batch strides */
	const char *what;
} shape;

#define TOKENS 2688
#define HEADS 8
#define HD 64
#define D (HEADS * HD)

/* HTDemucs (full size) per segment; the attention's q, k, v are the fused projection's
 * [tokens][3 D] rows, a head every 64 columns; its scores [head][tokens][tokens] */
static const shape htdemucs_shapes[] = {
	{2688, 2048, 512, 1, 1, 0, 0, 0, 0, 0, 0, "transformer feed-forward in (x W^T)"},
	{384, 2688, 1536, 0, 1, 0, 0, 0, 0, 0, 0, "encoder convolution as a product"},
	{2048, 2048, 512, 0, 1, 0, 0, 0, 0, 0, 0, "square, B not transposed"},
	{TOKENS, TOKENS, HD, 1, HEADS, 3 * D, 3 * D, TOKENS, HD, HD, (long)TOKENS * TOKENS,
	 "attention scores Q K^T, heads strided"},
	{TOKENS, HD, TOKENS, 0, HEADS, TOKENS, 3 * D, D, (long)TOKENS * TOKENS, HD, HD,
	 "attention P V, heads strided"},
};

/* BS-RoFormer ep_317 (dim 512, 8 heads of 64 and their gates, feed-forward 2048) per 8 s chunk:
 * a transformer layer's four products over all 62 bands x 801 frames at once, 24 layers a
 * chunk (86 % of its arithmetic), then a band's mask MLP (62 a chunk, 801 frames each) */
#define RF_TOKENS (62 * 801)
static const shape roformer_shapes[] = {
	{RF_TOKENS, 3 * 512 + 8, 512, 1, 1, 0, 0, 0, 0, 0, 0, "roformer q, k, v and gates (x W^T)"},
	{RF_TOKENS, 512, 512, 1, 1, 0, 0, 0, 0, 0, 0, "roformer attention out (x W^T)"},
	{RF_TOKENS, 2048, 512, 1, 1, 0, 0, 0, 0, 0, 0, "roformer feed-forward in (x W^T)"},
	{RF_TOKENS, 512, 2048, 1, 1, 0, 0, 0, 0, 0, 0, "roformer feed-forward out (x W^T)"},
	{801, 2048, 512, 1, 1, 0, 0, 0, 0, 0, 0, "roformer mask MLP in, one band (x W^T)"},
};
/* HTDemucs (full size) per segment, the products of few rows or few sums the per-shape profile
 * lists (bench_demucs --profile): a convolution's tap or phase over one frequency row's frames,
 * batched over the rows with one weight for all (sa 0) */
#define CONV(m, n, k, rows, what) \
	{m, n, k, 0, rows, 0, 0, 0, 0, (long)(k) * (n), (long)(m) * (n), what}
static const shape thin_shapes[] = {
	CONV(6, 335, 48, 512, "DConv in, frequency layer 1 (a tap)"),
	CONV(16, 336, 96, 512, "decoder out, frequency (a phase of the transposed convolution)"),
	CONV(48, 336, 32, 512, "encoder in, frequency (the spectrogram's 4 channels x 8 taps)"),
	CONV(12, 335, 96, 128, "DConv in, frequency layer 2 (a tap)"),
	CONV(96, 336, 6, 512, "DConv out, frequency layer 1 (6 sums)"),
	CONV(6, 85995, 48, 1, "DConv in, time layer 1 (a tap)"),
};
#undef CONV

#define MAX_SHAPES 8
static const shape *shapes = htdemucs_shapes;
static size_t n_shapes = sizeof htdemucs_shapes / sizeof htdemucs_shapes[0];

static int div_up(int x, int s)
{
	return (x + s - 1) / s;
}

/* the shape at 1/s of its size, strides kept consistent */
static shape scaled(shape h, int s)
{
	if (s <= 1)
		return h;
	const int hd = div_up(HD, s), tokens = div_up(TOKENS, s), d = HEADS * hd;
	if (h.batch > 1 && h.sa == 0) { /* a convolution over rows: the rows stay */
		h.M = div_up(h.M, s);
		h.N = div_up(h.N, s);
		h.K = div_up(h.K, s);
		h.sb = (long)h.K * h.N;
		h.sc = (long)h.M * h.N;
		return h;
	}
	h.M = div_up(h.M, s);
	h.N = h.batch > 1 && h.N == HD ? hd : div_up(h.N, s);
	h.K = h.batch > 1 && h.K == HD ? hd : div_up(h.K, s);
	if (h.batch > 1) {
		if (h.tb) { /* scores */
			h.lda = h.ldb = 3 * d;
			h.ldc = tokens;
			h.sa = h.sb = hd;
			h.sc = (long)tokens * tokens;
		} else {    /* P V */
			h.lda = tokens;
			h.ldb = 3 * d;
			h.ldc = d;
			h.sa = (long)tokens * tokens;
			h.sb = h.sc = hd;
		}
	}
	return h;
}

static size_t span(int rows, int ld, long stride, int batch)
{
	return (size_t)((long)(batch - 1) * stride + (long)(rows - 1) * ld) + (size_t)ld;
}

typedef struct {
	float *c[MAX_SHAPES]; /* the first path's results */
	size_t n[MAX_SHAPES];
} firsts;

/* One path: every shape; 0 when all ran */
static int run_path(const sb_device *dev, const char *label, int scale, double seconds,
                    firsts *first, int is_first, int bf16)
{
	sb_exec x;
	const sb_open_opts oo = {0, bf16 ? SB_PREC_BF16 : SB_PREC_FP32, 0};
	if (sb_exec_open(dev, &oo, &logger, &x) != SB_OK) {
		fprintf(stderr, "bench_cl_gemm: %s does not open\n", dev->id);
		return 1;
	}
	double all_flops = 0, all_s = 0;
	int failed = 0;
	const char *products = "";
	for (size_t i = 0; i < n_shapes; i++) {
		const shape h = scaled(shapes[i], scale);
		const int lda = h.lda ? h.lda : h.K, ldb = h.ldb ? h.ldb : (h.tb ? h.K : h.N),
		          ldc = h.ldc ? h.ldc : h.N;
		const long sa = h.sa, sb = h.sb, sc = h.sc;
		const size_t na = span(h.M, lda, sa, h.batch),
		             nb = span(h.tb ? h.N : h.K, ldb, sb, h.batch),
		             nc = span(h.M, ldc, sc, h.batch);
		float *ha = malloc(sizeof(float) * na), *hb = malloc(sizeof(float) * nb);
		float *hc = malloc(sizeof(float) * nc);
		unsigned r = 12345u;
		for (size_t j = 0; j < na; j++)
			ha[j] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.f - 0.5f;
		for (size_t j = 0; j < nb; j++)
			hb[j] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.f - 0.5f;
		memset(hc, 0, sizeof(float) * nc);
		sb_bbuf *ba = NULL, *bb = NULL, *bc = NULL;
		sb_status st = x.be->alloc(x.d, na, &ba);
		if (st == SB_OK)
			st = x.be->alloc(x.d, nb, &bb);
		if (st == SB_OK)
			st = x.be->alloc(x.d, nc, &bc);
		const sb_dv A = {ba, 0}, B = {bb, 0}, C = {bc, 0};
		double t = 0, flops = 2.0 * h.M * h.N * h.K * h.batch;
		int reps = 0;
		if (st == SB_OK) {
			x.be->upload(x.d, A, ha, na);
			x.be->upload(x.d, B, hb, nb);
			x.be->upload(x.d, C, hc, nc);
			/* a warm-up (kernel builds, CLBlast's first call), then runs of doubling length */
			x.be->ops->gemm(x.d, h.M, h.N, h.K, 1.f, A, lda, sa, B, ldb, sb, h.tb, 0.f, C,
			                ldc, sc, h.batch, 1, 0, 0, 0);
			st = x.be->finish(x.d);
			for (int n = 1; st == SB_OK && t < seconds; n *= 2) {
				const double t0 = sb_now();
				for (int k = 0; k < n; k++)
					x.be->ops->gemm(x.d, h.M, h.N, h.K, 1.f, A, lda, sa, B, ldb, sb, h.tb,
					                0.f, C, ldc, sc, h.batch, 1, 0, 0, 0);
				st = x.be->finish(x.d);
				t += sb_now() - t0;
				reps += n;
			}
			if (st == SB_OK)
				x.be->download(x.d, hc, C, nc);
			if (st == SB_OK)
				st = x.be->finish(x.d);
		}
		products = x.be->describe(x.d);
		double vs = 0;
		if (st == SB_OK && is_first) {
			first->c[i] = hc;
			first->n[i] = nc;
			hc = NULL;
		} else if (st == SB_OK && first->c[i] && first->n[i] == nc) {
			double e = 0, w = 0;
			for (size_t j = 0; j < nc; j++) {
				const double d = (double)hc[j] - first->c[i][j];
				e += d * d;
				w += (double)first->c[i][j] * first->c[i][j];
			}
			vs = isfinite(e) ? sqrt(e / (w > 0 ? w : 1)) : INFINITY;
		}
		if (st != SB_OK) {
			printf("{\"path\": \"%s\", \"shape\": \"%dx%dx%d%s x%d\", \"error\": \"%s\"}\n",
			       label, h.M, h.N, h.K, h.tb ? " (B^T)" : "", h.batch, sb_status_str(st));
			failed = 1;
			x.be->clear(x.d);
		} else {
			const double per = t / reps;
			all_flops += flops;
			all_s += per;
			printf("{\"path\": \"%s\", \"products\": \"%s\", \"shape\": \"%dx%dx%d%s x%d\", "
			       "\"what\": \"%s\", \"ms\": %.4f, \"tflops\": %.2f, \"reps\": %d, "
			       "\"vs_first\": %.1e}\n", label, products, h.M, h.N, h.K,
			       h.tb ? " (B^T)" : "", h.batch, h.what, 1e3 * per, flops / per / 1e12, reps,
			       vs);
			/* bf16 or tf32 inputs (2^-9, 2^-12 relative each): 1e-2 over a sum */
			const int reduced = strcmp(x.be->precision ? x.be->precision(x.d) : "fp32",
			                           "fp32");
			if (!(vs < (reduced ? 1e-2 : 1e-4))) {
				fprintf(stderr, "bench_cl_gemm: %s differs from the first path on %s "
				        "(rel L2 %.1e)\n", label, h.what, vs);
				failed = 1;
			}
		}
		fflush(stdout);
		if (ba)
			x.be->release(x.d, ba);
		if (bb)
			x.be->release(x.d, bb);
		if (bc)
			x.be->release(x.d, bc);
		free(ha);
		free(hb);
		free(hc);
	}
	printf("{\"path\": \"%s\", \"products\": \"%s\", \"precision\": \"%s\", "
	       "\"device\": \"%s\", \"scale\": %d, \"ms\": %.3f, \"tflops\": %.2f}\n", label,
	       products, x.be->precision ? x.be->precision(x.d) : "fp32", dev->label, scale,
	       1e3 * all_s, all_s > 0 ? all_flops / all_s / 1e12 : 0.0);
	if (bf16 && strcmp(x.be->precision ? x.be->precision(x.d) : "fp32", "bf16")) {
		fprintf(stderr, "bench_cl_gemm: %s ran fp32, not bf16\n", label);
		failed = 1;
	}
	sb_exec_close(&x);
	return failed;
}

int main(int argc, char **argv)
{
	const char *device = NULL, *gemms = "clblast,own,tiled", *tiles = "", *mma_tiles = "",
	           *tf32_tiles = "";
	int scale = 1;
	double seconds = 0.25;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--gemm") && i + 1 < argc)
			gemms = argv[++i];
		else if (!strcmp(argv[i], "--tiles") && i + 1 < argc)
			tiles = argv[++i];
		else if (!strcmp(argv[i], "--mma-tiles") && i + 1 < argc)
			mma_tiles = argv[++i];
		else if (!strcmp(argv[i], "--tf32-tiles") && i + 1 < argc)
			tf32_tiles = argv[++i];
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--model") && i + 1 < argc &&
		         (!strcmp(argv[i + 1], "htdemucs") || !strcmp(argv[i + 1], "roformer") ||
		          !strcmp(argv[i + 1], "thin"))) {
			if (!strcmp(argv[++i], "roformer")) {
				shapes = roformer_shapes;
				n_shapes = sizeof roformer_shapes / sizeof roformer_shapes[0];
			} else if (!strcmp(argv[i], "thin")) {
				shapes = thin_shapes;
				n_shapes = sizeof thin_shapes / sizeof thin_shapes[0];
			}
		} else {
			fprintf(stderr, "usage: bench_cl_gemm [--device opencl:N] [--gemm clblast,own,tiled,mma] "
			        "[--tiles T1/T2] [--mma-tiles T1/T2] [--tf32-tiles T1/T2] [--scale S] "
			        "[--seconds S] [--model htdemucs|roformer|thin]\n");
			return 2;
		}
	}
	sb_device_list *list = NULL;
	if (sb_devices_enumerate(&logger, &list) != SB_OK)
		return 1;
	const sb_device *dev = NULL;
	for (size_t i = 0; i < sb_devices_count(list); i++) {
		const sb_device *p = sb_devices_get(list, i);
		if (device) {
			if (!strcmp(p->id, device))
				dev = p;
		} else if (!strcmp(sb_device_backend_name(p), "opencl") &&
		           (!dev || (sb_device_is_gpu(p) && !sb_device_is_gpu(dev)))) {
			dev = p;
		}
	}
	if (!dev || strcmp(sb_device_backend_name(dev), "opencl")) {
		fprintf(stderr, "bench_cl_gemm: no OpenCL device%s%s\n", device ? " " : "",
		        device ? device : "");
		sb_devices_free(list);
		return 1;
	}
	firsts first;
	memset(&first, 0, sizeof first);
	int failed = 0, runs = 0;
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", gemms);
	char *save = NULL;
	for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
		const int mma = !strcmp(g, "mma");
		if (!mma)
			setenv("SB_CL_GEMM", g, 1);
		else
			unsetenv("SB_CL_GEMM"); /* its fp32 path unused: the default, not built twice */
		unsetenv("SB_CL_TILE");
		unsetenv("SB_CL_MMA_TILE");
		failed |= run_path(dev, g, scale, seconds, &first, runs++ == 0, mma);
	}
	/* more runs of one path at other tilings, each alone: the tiled kernel's (SB_CL_TILE), the
	 * tensor cores' in bf16 and in tf32 (SB_CL_MMA_TILE) */
	const struct {
		const char *list, *label, *gemm, *var; /* gemm NULL: SB_CL_GEMM unset */
		int bf16;
	} more[] = {{tiles, "tiled", "tiled", "SB_CL_TILE", 0},
	            {mma_tiles, "mma", NULL, "SB_CL_MMA_TILE", 1},
	            {tf32_tiles, "tf32", "tf32", "SB_CL_MMA_TILE", 0}};
	for (size_t m = 0; m < sizeof more / sizeof more[0]; m++) {
		snprintf(buf, sizeof buf, "%s", more[m].list);
		for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
			char label[96];
			snprintf(label, sizeof label, "%s:%s", more[m].label, t);
			if (more[m].gemm)
				setenv("SB_CL_GEMM", more[m].gemm, 1);
			else
				unsetenv("SB_CL_GEMM");
			setenv(more[m].var, t, 1);
			failed |= run_path(dev, label, scale, seconds, &first, runs++ == 0, more[m].bf16);
		}
	}
	for (size_t i = 0; i < n_shapes; i++)
		free(first.c[i]);
	sb_devices_free(list);
	return failed;
}
