/* The matrix-product seam (engine/backend/opencl/cl_blas.h) on the first OpenCL device (PoCL in CI):
 *   - sb_cl_sgemm equals a double-precision host product within 1e-5 relative for the shapes
 *     HTDemucs uses: plain, B transposed (attention), batched with a shared A (stride 0), with
 *     offsets and leading dimensions wider than the matrix, accumulating (beta 1), and beta 0
 *     into a buffer full of NaN (whatever was there must not leak through);
 *   - SB_CL_GEMM picks the backend (clblast, own, tiled), and an unknown value is reported;
 *   - tuning files (SB_CLBLAST_TUNING): this device's fastest file per kernel is applied and
 *     named in the log, another device's file is ignored, a damaged file and a file CLBlast
 *     refuses are reported with their paths, and products stay right after tuning.
 * Skipped (77) without an OpenCL device or without CLBlast in the build.
 */
#include "../check.h"
#include "log_capture.h"
#include "backend/device.h"
#include "backend/opencl/cl_blas.h"
#include "backend/opencl/cl_device.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static uint64_t seed = 12345;
static float rnd(void)
{
	seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((seed >> 40) & 0xFFFFFF) / (float)0x1000000 - 0.5f;
}

typedef struct {
	int M, N, K, lda, ldb, ldc, tb, batch;
	long sa, sb, sc;
	size_t aoff, boff, coff;
	float alpha, beta;
	int nan_c; /* fill C with NaN first (beta must be 0) */
	const char *what;
} gemm_case;

static size_t extent(size_t off, int rows, int ld, long stride, int batch)
{
	return off + (size_t)rows * (size_t)ld + (size_t)stride * (size_t)(batch - 1);
}

/* one product on the device against the host's, in double */
static void check_gemm(sb_cl_device *d, const gemm_case *g)
{
	cl_context ctx = sb_cl_device_context(d);
	cl_command_queue q = sb_cl_device_queue(d);
	const size_t na = extent(g->aoff, g->M, g->lda, g->sa, g->batch);
	const size_t nb = extent(g->boff, g->tb ? g->N : g->K, g->ldb, g->sb, g->batch);
	const size_t nc = extent(g->coff, g->M, g->ldc, g->sc, g->batch);
	float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
	float *c = malloc(sizeof(float) * nc), *got = malloc(sizeof(float) * nc);
	for (size_t i = 0; i < na; i++)
		a[i] = rnd();
	for (size_t i = 0; i < nb; i++)
		b[i] = rnd();
	for (size_t i = 0; i < nc; i++)
		c[i] = g->nan_c ? NAN : rnd();
	cl_int err;
	cl_mem A = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * na, a, &err);
	cl_mem B = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * nb, b, &err);
	cl_mem C = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * nc, c, &err);
	const sb_status st = sb_cl_sgemm(d, sb_cl_device_queue(d), g->M, g->N, g->K, g->alpha, A,
	                                 g->aoff, g->lda, g->sa, B, g->boff, g->ldb, g->sb, g->tb,
	                                 g->beta, C, g->coff, g->ldc, g->sc, g->batch);
	CHECK(st == SB_OK, "%s: sb_cl_sgemm: %s", g->what, sb_status_str(st));
	clEnqueueReadBuffer(q, C, CL_TRUE, 0, sizeof(float) * nc, got, 0, NULL, NULL);
	double e2 = 0, r2 = 0;
	int outside = 0;
	for (int bt = 0; bt < g->batch; bt++)
		for (int i = 0; i < g->M; i++)
			for (int j = 0; j < g->N; j++) {
				const float *ab = a + g->aoff + (size_t)bt * g->sa;
				const float *bb = b + g->boff + (size_t)bt * g->sb;
				const size_t at = g->coff + (size_t)bt * g->sc + (size_t)i * g->ldc + j;
				double s = 0;
				for (int k = 0; k < g->K; k++)
					s += (double)ab[(size_t)i * g->lda + k] *
					     (g->tb ? bb[(size_t)j * g->ldb + k] : bb[(size_t)k * g->ldb + j]);
				const double want = g->alpha * s + (g->beta != 0.f ? g->beta * c[at] : 0.0);
				e2 += (got[at] - want) * (got[at] - want);
				r2 += want * want;
			}
	/* what lies between the rows (ldc wider than N) is not the product's to touch */
	for (int bt = 0; bt < g->batch && !g->nan_c; bt++)
		for (int i = 0; i < g->M; i++)
			for (int j = g->N; j < g->ldc; j++) {
				const size_t at = g->coff + (size_t)bt * g->sc + (size_t)i * g->ldc + j;
				if (at < nc && got[at] != c[at])
					outside++;
			}
	const double rel = sqrt(e2 / (r2 > 0 ? r2 : 1));
	printf("  %-44s rel L2 %.2e\n", g->what, rel);
	CHECK(rel < 1e-5 && rel == rel, "%s: relative L2 %.3e (limit 1e-5)", g->what, rel);
	CHECK(outside == 0, "%s: %d values outside the product changed", g->what, outside);
	clReleaseMemObject(A);
	clReleaseMemObject(B);
	clReleaseMemObject(C);
	free(a);
	free(b);
	free(c);
	free(got);
}

static void products(sb_cl_device *d)
{
	const gemm_case cases[] = {
		{.M = 48, .N = 336, .K = 32, .lda = 32, .ldb = 336, .ldc = 336, .batch = 1,
		 .alpha = 1.f, .what = "encoder-like 48 x 336 x 32"},
		{.M = 96, .N = 200, .K = 48, .lda = 48, .ldb = 210, .ldc = 205, .batch = 5, .sa = 0,
		 .sb = 48 * 210, .sc = 96 * 205, .aoff = 7, .boff = 3, .coff = 11, .alpha = 1.f,
		 .beta = 1.f, .what = "batched, shared A, offsets, beta 1"},
		{.M = 64, .N = 64, .K = 16, .lda = 48, .ldb = 48, .ldc = 64, .tb = 1, .batch = 3,
		 .sa = 16, .sb = 16, .sc = 64 * 64, .alpha = 0.25f, .what = "attention QK^T (B^T)"},
		{.M = 512, .N = 384, .K = 512, .lda = 512, .ldb = 384, .ldc = 384, .batch = 1,
		 .alpha = 1.f, .nan_c = 1, .what = "512 x 384 x 512, beta 0 over NaN"},
		{.M = 130, .N = 77, .K = 300, .lda = 300, .ldb = 77, .ldc = 77, .batch = 4,
		 .sa = 130 * 300, .sb = 300 * 77, .sc = 130 * 77, .alpha = 1.f, .nan_c = 1,
		 .what = "odd sizes, batch 4, beta 0 over NaN"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		check_gemm(d, &cases[i]);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* a file as CLBlast's tuners write it (best_kernel names the kernel function, not the
 * database entry: the family does) */
static void tuner_file(const char *path, const char *device, const char *vendor,
                       const char *family, const char *time, const char *params)
{
	char text[4096];
	snprintf(text, sizeof text,
	         "{\n  \"kernel_family\": \"%s\",\n  \"precision\": \"32\",\n"
	         "  \"best_kernel\": \"SomeKernelFunction\",\n  \"best_time\": \"%s\",\n"
	         "  \"best_parameters\": \"%s\",\n  \"device\": \"%s\",\n"
	         "  \"platform_vendor\": \"%s\",\n  \"results\": []\n}\n",
	         family, time, params, device, vendor);
	write_file(path, text);
}

#define XGEMM_FAST "GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 NDIMB=8 NDIMC=8 " \
                   "NWG=32 PRECISION=32 SA=0 SB=0 STRM=0 STRN=0 VWM=4 VWN=4"

static void tuning(sb_cl_device *d, const char *dir)
{
	cl_device_id id = sb_cl_device_id(d);
	char name[256] = "", vendor[256] = "";
	cl_platform_id plat = NULL;
	clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
	clGetDeviceInfo(id, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
	clGetPlatformInfo(plat, CL_PLATFORM_VENDOR, sizeof vendor - 1, vendor, NULL);
	char sub[4200], p[4300];
	snprintf(sub, sizeof sub, "%s/this-device", dir);
	mkdir(dir, 0755);
	mkdir(sub, 0755);
	/* the fastest file for Xgemm, one folder down as tools/clblast_tune.sh leaves them */
	snprintf(p, sizeof p, "%s/clblast_xgemm_2_32.json", sub);
	tuner_file(p, name, vendor, "xgemm_2", "0.05", XGEMM_FAST);
	/* a slower Xgemm file whose parameters CLBlast would refuse: it must lose */
	snprintf(p, sizeof p, "%s/clblast_xgemm_1_32.json", dir);
	tuner_file(p, name, vendor, "xgemm_1", "0.90", "KWG=32 MWG=64");
	/* a file for XgemmDirect that lacks parameters: refused, reported */
	snprintf(p, sizeof p, "%s/clblast_xgemm_direct_1_32.json", dir);
	tuner_file(p, name, vendor, "xgemm_direct_1", "0.10", "WGD=8 MDIMCD=8");
	/* another device's: ignored without a word */
	snprintf(p, sizeof p, "%s/other_32.json", dir);
	tuner_file(p, "Some Other GPU", vendor, "copy", "0.01", "COPY_DIMX=8 COPY_DIMY=8 "
	           "COPY_VW=1 COPY_WPT=1");
	/* this device's copy and transpose kernels (families copy, transpose) */
	snprintf(p, sizeof p, "%s/clblast_copy_32.json", sub);
	tuner_file(p, name, vendor, "copy", "0.02", "COPY_DIMX=8 COPY_DIMY=32 COPY_VW=8 COPY_WPT=1 "
	           "PRECISION=32");
	snprintf(p, sizeof p, "%s/clblast_transpose_32.json", sub);
	tuner_file(p, name, vendor, "transpose", "0.02", "PRECISION=32 TRA_DIM=16 TRA_PAD=0 "
	           "TRA_SHUFFLE=1 TRA_WPT=8");
	/* damaged */
	snprintf(p, sizeof p, "%s/broken.json", dir);
	write_file(p, "{\"device\": \"half a file");
	setenv("SB_CLBLAST_TUNING", dir, 1);
	unsetenv("SB_CL_GEMM");
	log_len = 0;
	log_text[0] = '\0';
	const sb_cl_gemm_kind k = sb_cl_gemm_choose(d);
	CHECK(k == SB_CL_GEMM_CLBLAST, "the default on a build with CLBlast is CLBlast");
	CHECK(sb_cl_blas_tuned_kernels(d) == 3, "tuned kernels: %d, want 3 (Xgemm, Copy, Transpose)",
	      sb_cl_blas_tuned_kernels(d));
	char want[4400];
	snprintf(want, sizeof want, "tuned parameters for Xgemm from %s/clblast_xgemm_2_32.json",
	         sub);
	CHECK(strstr(log_text, want) != NULL, "the log names the applied file:\n%s", log_text);
	CHECK(!strstr(log_text, "clblast_xgemm_1_32.json"), "the slower Xgemm file was used:\n%s",
	      log_text);
	snprintf(want, sizeof want, "refused the tuned parameters for XgemmDirect in "
	         "%s/clblast_xgemm_direct_1_32.json", dir);
	CHECK(strstr(log_text, want) != NULL, "a refused file is reported:\n%s", log_text);
	snprintf(want, sizeof want, "%s/broken.json is damaged", dir);
	CHECK(strstr(log_text, want) != NULL, "a damaged file is reported:\n%s", log_text);
	snprintf(want, sizeof want, "tuned parameters for Copy from %s/clblast_copy_32.json", sub);
	CHECK(strstr(log_text, want) != NULL, "the copy kernel's file is applied:\n%s", log_text);
	snprintf(want, sizeof want, "tuned parameters for Transpose from %s/clblast_transpose_32.json",
	         sub);
	CHECK(strstr(log_text, want) != NULL, "the transpose kernel's file is applied:\n%s",
	      log_text);
	CHECK(!strstr(log_text, "other_32.json"), "another device's file was read:\n%s", log_text);
	/* once per device: a second choice does not read the folder again */
	log_len = 0;
	log_text[0] = '\0';
	sb_cl_gemm_choose(d);
	CHECK(!strstr(log_text, "tuning"), "tuning files read twice:\n%s", log_text);
	/* products run with the tuned Xgemm (the 512-sized one goes through Xgemm) */
	products(d);
	setenv("SB_CL_GEMM", "own", 1);
	CHECK(sb_cl_gemm_choose(d) == SB_CL_GEMM_OWN, "SB_CL_GEMM=own");
	setenv("SB_CL_GEMM", "tiled", 1);
	CHECK(sb_cl_gemm_choose(d) == SB_CL_GEMM_TILED, "SB_CL_GEMM=tiled");
	setenv("SB_CL_GEMM", "fastest", 1);
	log_len = 0;
	CHECK(sb_cl_gemm_choose(d) == SB_CL_GEMM_CLBLAST, "an unknown SB_CL_GEMM keeps the default");
	CHECK(strstr(log_text, "SB_CL_GEMM='fastest'") != NULL, "an unknown SB_CL_GEMM is reported");
	unsetenv("SB_CL_GEMM");
}

int main(int argc, char **argv)
{
	const char *tmp = argc > 1 ? argv[1] : "/tmp";
	if (!sb_cl_blas_available()) {
		printf("SKIP: this build has no CLBlast\n");
		return 77;
	}
	sb_device_list *list = NULL;
	sb_devices_enumerate(&logger, &list);
	sb_cl_device *d = NULL;
	for (size_t i = 0; list && i < sb_devices_count(list) && !d; i++) {
		const sb_device *p = sb_devices_get(list, i);
		if (p->native[1] && sb_cl_device_open(p, &logger, &d) == SB_OK)
			printf("OpenCL device: %s\n", p->label);
	}
	if (!d) {
		printf("SKIP: no OpenCL device\n");
		sb_devices_free(list);
		return 77;
	}
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/clblast-tuning-%d", tmp, (int)getpid());
	tuning(d, dir);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	sb_cl_device_close(d);
	sb_devices_free(list);
	printf("cl_blas: %s\n", failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
