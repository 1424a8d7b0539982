/* The tensor-core product (cl_gemm_mma.h): where it runs, its tilings, one build of mma.cl per
 * tiling, and the launch that picks a tiling and the float4 reads for each product.
 */
#include "backend/opencl/cl_gemm_mma.h"

#include "backend/opencl/cl_gemm_tiled.h"
#include "backend/opencl/cl_base.h"
#include "mma_cl.h" /* generated: gemm_rows.cl + mma.cl */

#include <math.h>
#include <stdint.h>
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
	int tf32;        /* mma.cl's MMA_TF32 */
	char shared[64]; /* the build options of the instruction as built: bf16 or tf32, native
	                    or emulated, and the spelling of inline assembly the driver took */
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
		*why = "an NVIDIA GPU's tensor cores";
		return 0;
	}
	cl_uint major = 0, minor = 0;
	if (clGetDeviceInfo(id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL) !=
	            CL_SUCCESS ||
	    major < 8) {
		*why = "tensor cores of compute capability 8.0 or later (Ampere, Ada, Hopper)";
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

/* local memory a tiling takes: two buffers of both operands' rows of 20 words, and the
 * emulation's scratch */
static size_t local_bytes(const tiling *t, int emulate)
{
	return 160 * (size_t)(t->bm + t->bn) + (emulate ? 3072 : 0);
}

/* NULL when mma.cl can run t on a device with local_mem bytes of local memory, else why not
 * (BN 16 or a multiple of 32: B's reads as K x N cover a tile in runs of 8 units) */
static const char *unfit(const tiling *t, cl_ulong local_mem, int emulate)
{
	if (t->bm < 32 || t->bm % 32 || (t->bn != 16 && (t->bn < 32 || t->bn % 32)))
		return "BM must be a multiple of 32, BN 16 or a multiple of 32";
	if (local_bytes(t, emulate) > local_mem)
		return "more local memory than the device has";
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

const char *sb_cl_mma_options(const sb_cl_mma *m)
{
	return m->shared;
}

int sb_cl_mma_emulate_asked(void)
{
	const char *env = sb_knob_get("SB_CL_MMA");
	return env && !strcmp(env, "emulate");
}

/* one product on tiling w */
static void launch(sb_bdev *c, const sb_cl_mma *m, int w, int M, int N, int K, float alpha,
                   sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, int tb, float beta,
                   sb_dv C, int ldc, long sc, int batch, const sb_bias *e)
{
	const tiling *g = &m->t[w];
	kargs a = {c, m->k[w], K_GEMM, 0.0, 0, CL_SUCCESS};
	a_gemm(&a, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc);
	a_i32(&a, sb_cl_gemm_flags(A, lda, sa, B, ldb, sb, C, ldc, sc));
	a_ep(&a, e, C);
	const size_t gs[3] = {(size_t)(N + g->bn - 1) / g->bn * 128,
	                      (size_t)(M + g->bm - 1) / g->bm, (size_t)batch};
	const size_t l[3] = {128, 1, 1};
	a.flops = 2.0 * M * N * K * batch;
	sb_cl_run(&a, 3, gs, l);
}

float sb_cl_mma_round(float x, int tf32)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	u = tf32 ? (u + 0x1000u) & 0xffffe000u : (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* The products checked once, before any stem depends on them: each tiling, both layouts of B,
 * with and without float4 reads, on the device against the host (the inputs rounded the same
 * way, sums in double). The emulation that the tests run is a model of the instruction; a
 * driver that runs it otherwise (or a mistake only the native path has) shows here as a
 * product off by its own size, where the fp32 sums' error is about 1e-7. SB_ERR_DEVICE when a
 * product is off (*worst says by how much), a device failure as it comes. */
static sb_status check_products(sb_bdev *c, const sb_cl_mma *m, double *worst)
{
	enum { M = 70, N = 90, K = 100, PAD = 4 }; /* ragged for every tiling */
	const size_t na = (size_t)M * (K + PAD) + 1, nb = (size_t)(K + PAD) * (N + PAD) + 1,
	             nc = (size_t)M * (N + PAD) + 1;
	sb_cl_check ck;
	sb_status st = sb_cl_check_open(c, na, nb, nc, 2024u, "uploading the tensor-core check",
	                                &ck);
	const float *ha = ck.a, *hb = ck.b;
	float *hc = ck.c;
	sb_bbuf ba = ck.A, bb = ck.B, bc = ck.C;
	*worst = 0;
	for (int w = 0; st == SB_OK && w < m->n; w++)
		for (int cs = 0; st == SB_OK && cs < 4; cs++) {
			const int tb = cs & 1, al = cs >> 1; /* al: rows 16-byte aligned (float4) */
			const int lda = al ? K + PAD : K + 1, ldb = (tb ? K : N) + (al ? PAD : 1),
			          ldc = al ? N + PAD : N + 1;
			const size_t off = al ? 0 : 1;
			launch(c, m, w, M, N, K, 1.f, (sb_dv){&ba, off}, lda, 0, (sb_dv){&bb, off}, ldb,
			       0, tb, 0.f, (sb_dv){&bc, off}, ldc, 0, 1, NULL);
			st = sb_cl_check_result(c, bc.m, nc, hc, "reading the tensor-core check");
			double e = 0, ref = 0;
			for (int i = 0; st == SB_OK && i < M; i++)
				for (int j = 0; j < N; j++) {
					double sum = 0;
					for (int k = 0; k < K; k++) {
						const float a = ha[off + (size_t)i * lda + k],
						            b = tb ? hb[off + (size_t)j * ldb + k]
						                   : hb[off + (size_t)k * ldb + j];
						sum += (double)sb_cl_mma_round(a, m->tf32) *
						       sb_cl_mma_round(b, m->tf32);
					}
					const double d = hc[off + (size_t)i * ldc + j] - sum;
					e += d * d;
					ref += sum * sum;
				}
			const double rel = sqrt(e / (ref > 0 ? ref : 1));
			if (st == SB_OK && !(rel <= *worst))
				*worst = rel;
		}
	if (st == SB_OK && !(*worst < 1e-4))
		st = SB_ERR_DEVICE;
	sb_cl_check_close(&ck);
	return st;
}

sb_status sb_cl_mma_open(sb_bdev *c, int emulate, int tf32, sb_cl_mma **out)
{
	*out = NULL;
	const sb_device *p = sb_cl_device_props(c->dev);
	sb_cl_mma *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR_NOMEM;
	cl_ulong local_mem = 32768;
	clGetDeviceInfo(sb_cl_device_id(c->dev), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem,
	                &local_mem, NULL);
	m->tf32 = tf32;
	/* bf16: 64 x 64 tiles on every product, measured the fastest on an H100 (README.md here);
	 * tf32 keeps the pair (its 64 x 64 not measured yet). */
	m->t[0] = tf32 ? (tiling){128, 64} : (tiling){64, 64};
	m->t[1] = (tiling){64, 64};
	m->n = tf32 ? 2 : 1;
	m->cus = p->compute_units ? p->compute_units : 1;
	const char *env = sb_knob_get("SB_CL_MMA_TILE");
	if (env && *env) {
		tiling w[2] = {{0, 0}, {0, 0}};
		char tail = 0;
		const int got = sscanf(env, "%d,%d%c%d,%d", &w[0].bm, &w[0].bn, &tail, &w[1].bm,
		                       &w[1].bn);
		const int n = got == 5 && tail == ';' ? 2 : 1;
		const char *why = got != 2 && n != 2 ? "not BM,BN[;BM,BN]" : NULL;
		for (int i = 0; !why && i < n; i++)
			why = unfit(&w[i], local_mem, emulate);
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
			         "-DMMA_TF32=%d -DMMA_BREAK=%d%s", m->t[i].bm, m->t[i].bn, !emulate, tf32,
			         sb_cl_device_fault_mma(c->dev), spelling ? " -DSB_ASM=__asm__" : "");
			st = sb_cl_device_build(c->dev, "mma", (const char *)mma_cl, opts, &m->prog[i],
			                        NULL);
			snprintf(m->shared, sizeof m->shared, "-DMMA_PTX=%d -DMMA_TF32=%d%s", !emulate, tf32,
			         spelling ? " -DSB_ASM=__asm__" : "");
		}
		if (st == SB_OK)
			st = sb_cl_device_kernel(c->dev, m->prog[i], "gemm_mma", &m->k[i]);
		if (st != SB_OK) {
			sb_cl_mma_free(m);
			return st;
		}
	}
	double worst = 0;
	const sb_status cst = check_products(c, m, &worst);
	if (cst != SB_OK) {
		if (cst == SB_ERR_DEVICE)
			sb_log(c->log, SB_LOG_WARNING, "the tensor-core product (%s) is wrong on %s: "
			       "relative error %.1e against the host's, where its sums' is about 1e-7",
			       tf32 ? "tf32" : "bf16", p->label, worst);
		sb_cl_mma_free(m);
		return cst;
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
                    long sc, int batch, const sb_bias *e)
{
	const long big = (long)((M + m->t[0].bm - 1) / m->t[0].bm) *
	                 ((N + m->t[0].bn - 1) / m->t[0].bn) * batch;
	launch(c, m, m->n == 2 && big < (long)m->cus, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb,
	       beta, C, ldc, sc, batch, e);
}
