/* The tensor-core product (cl_gemm_mma.h): where it runs, its tilings, one build of mma.cl per
 * tiling, and the launch that picks a tiling and the float4 reads for each product.
 */
#include "backend/opencl/cl_gemm_mma.h"

#include "backend/opencl/cl_gemm_tiled.h"
#include "backend/opencl/cl_ops.h"
#include "mma_cl.h" /* generated: gemm_rows.cl + mma.cl */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000 /* cl_nv_device_attribute_query */
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif

typedef struct {
	int bm, bn;
} tiling;

struct sb_cl_mma {
	tiling t[2];     /* big, small */
	int n;           /* 2, or 1 when SB_CL_MMA_TILE names one */
	cl_program prog[2];
	cl_kernel k[2];
	unsigned cus;
	char desc[160];
};

int sb_cl_mma_native_id(cl_device_id id, const char *platform, unsigned *cc, const char **why)
{
	cl_device_type type = 0;
	clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
	*cc = 0;
	if (!strstr(platform, "NVIDIA") || !(type & CL_DEVICE_TYPE_GPU)) {
		*why = "bf16 products on OpenCL need an NVIDIA GPU's tensor cores";
		return 0;
	}
	cl_uint major = 0, minor = 0;
	if (clGetDeviceInfo(id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL) !=
	            CL_SUCCESS ||
	    major < 8) {
		*why = "bf16 products need compute capability 8.0 or later (Ampere, Ada, Hopper)";
		return 0;
	}
	clGetDeviceInfo(id, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof minor, &minor, NULL);
	*cc = major * 10 + minor;
	*why = NULL;
	return 1;
}

int sb_cl_mma_native(sb_cl_device *d, const char **why)
{
	unsigned cc = 0;
	return sb_cl_mma_native_id(sb_cl_device_id(d), sb_cl_device_props(d)->platform, &cc, why);
}

/* NULL when mma.cl can run t, else why not */
static const char *unfit(const tiling *t)
{
	if (t->bm < 32 || t->bn < 16 || t->bm % 32 || t->bn % 16)
		return "BM must be a multiple of 32, BN of 16";
	if (t->bm > 256 || t->bn > 256)
		return "BM and BN are at most 256";
	return NULL;
}

void sb_cl_mma_free(sb_cl_mma *m)
{
	if (!m)
		return;
	for (int i = 0; i < 2; i++) {
		if (m->k[i])
			clReleaseKernel(m->k[i]);
		if (m->prog[i])
			clReleaseProgram(m->prog[i]);
	}
	free(m);
}

const char *sb_cl_mma_describe(const sb_cl_mma *m)
{
	return m->desc;
}

sb_status sb_cl_mma_open(sb_bdev *c, int emulate, int tf32, sb_cl_mma **out)
{
	*out = NULL;
	const sb_device_props *p = sb_cl_device_props(c->dev);
	sb_cl_mma *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR_NOMEM;
	m->t[0] = (tiling){128, 64};
	m->t[1] = (tiling){64, 64};
	m->n = 2;
	m->cus = p->compute_units ? p->compute_units : 1;
	const char *env = getenv("SB_CL_MMA_TILE");
	if (env && *env) {
		tiling w[2] = {{0, 0}, {0, 0}};
		char tail = 0;
		const int got = sscanf(env, "%d,%d%c%d,%d", &w[0].bm, &w[0].bn, &tail, &w[1].bm,
		                       &w[1].bn);
		const int n = got == 5 && tail == ';' ? 2 : 1;
		const char *why = got != 2 && n != 2 ? "not BM,BN[;BM,BN]" : NULL;
		for (int i = 0; !why && i < n; i++)
			why = unfit(&w[i]);
		if (why) {
			sb_log(c->log, SB_LOG_WARNING, "SB_CL_MMA_TILE='%s' ignored: %s", env, why);
		} else {
			m->t[0] = w[0];
			m->t[1] = w[1];
			m->n = n;
		}
	}
	for (int i = 0; i < m->n; i++) {
		/* inline assembly spelt asm, then __asm__ (mma.cl's SB_ASM) */
		sb_status st = SB_ERR_DEVICE;
		for (int spelling = 0; st == SB_ERR_DEVICE && spelling < (emulate ? 1 : 2); spelling++) {
			char opts[160];
			snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DBM=%d -DBN=%d -DMMA_PTX=%d "
			         "-DMMA_TF32=%d%s", m->t[i].bm, m->t[i].bn, !emulate, tf32,
			         spelling ? " -DSB_ASM=__asm__" : "");
			st = sb_cl_device_build(c->dev, "mma", (const char *)mma_cl, opts, &m->prog[i],
			                        NULL);
		}
		if (st == SB_OK)
			st = sb_cl_device_kernel(c->dev, m->prog[i], "gemm_mma", &m->k[i]);
		if (st != SB_OK) {
			sb_cl_mma_free(m);
			return st;
		}
	}
	int at = snprintf(m->desc, sizeof m->desc, "tensor cores, %s%s (mma %s), %dx%d tiles",
	                  tf32 ? "tf32" : "bf16", emulate ? " emulated" : "",
	                  tf32 ? "m16n8k8" : "m16n8k16", m->t[0].bm, m->t[0].bn);
	if (m->n == 2)
		snprintf(m->desc + at, sizeof m->desc - (size_t)at, ", %dx%d below %u", m->t[1].bm,
		         m->t[1].bn, m->cus);
	*out = m;
	return SB_OK;
}

void sb_cl_mma_gemm(sb_bdev *c, sb_cl_mma *m, int M, int N, int K, float alpha, sb_dv A, int lda,
                    long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                    long sc, int batch)
{
	const long big = (long)((M + m->t[0].bm - 1) / m->t[0].bm) *
	                 ((N + m->t[0].bn - 1) / m->t[0].bn) * batch;
	const int w = m->n == 2 && big < (long)m->cus;
	const tiling *g = &m->t[w];
	kargs a = {c, m->k[w], K_GEMM, 0.0, 0, CL_SUCCESS};
	a_gemm(&a, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc);
	a_i32(&a, sb_cl_gemm_flags(A, lda, sa, B, ldb, sb, C, ldc, sc));
	const size_t gs[3] = {(size_t)(N + g->bn - 1) / g->bn * 128,
	                      (size_t)(M + g->bm - 1) / g->bm, (size_t)batch};
	const size_t l[3] = {128, 1, 1};
	a.flops = 2.0 * M * N * K * batch;
	sb_cl_run(&a, 3, gs, l);
}
