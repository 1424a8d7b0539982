/* See gemm.h. The blocking loops of BLIS (gemm_kernels.h): for each kc x nc block of B, packed
 * once, each mc x kc block of A is packed and every MR x NR tile of C computed from a panel of
 * each. Partial tiles at the edges go through a scratch tile. */
#include "backend/cpu/gemm.h"

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm_kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the portable kernel: plain C that the compiler vectorises for the baseline ---- */

enum { G_MR = 4, G_NR = 8 };

SB_GEMM_PACKERS(gen, G_MR, G_NR)

static void gen_kernel(int kc, const void *pa, const void *pb, float *c, long ldc, float alpha,
                       float beta)
{
	const float *a = pa, *b = pb;
	float acc[G_MR][G_NR] = {{0}};
	for (int k = 0; k < kc; k++, a += G_MR, b += G_NR)
		for (int i = 0; i < G_MR; i++)
			for (int j = 0; j < G_NR; j++)
				acc[i][j] += a[i] * b[j];
	for (int i = 0; i < G_MR; i++)
		for (int j = 0; j < G_NR; j++)
			c[i * ldc + j] = alpha * acc[i][j] + (beta == 0.f ? 0.f : beta * c[i * ldc + j]);
}

const sb_gemm_kernel sb_gemm_generic_f32 = {"generic fp32 4x8", G_MR, G_NR, 256, 64, 1024, 0,
                                            gen_pack_a, gen_pack_b, gen_kernel};

/* ---- choosing ---- */

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
                               const float *A, int lda, const float *B, int ldb, float beta,
                               float *C, int ldc);
typedef int (*dnnl_sgemm_fn)(char ta, char tb, long M, long N, long K, float alpha,
                             const float *A, long lda, const float *B, long ldb, float beta,
                             float *C, long ldc);
typedef void (*set_threads_fn)(int);

/* CBLAS's enumerations (cblas.h): row-major 101, no transpose 111, transpose 112. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

static struct {
	const sb_gemm_kernel *f32, *bf16; /* own kernels; bf16 NULL where the CPU has none */
	int loop;                          /* SB_GEMM=loop */
	cblas_sgemm_fn cblas;              /* SB_GEMM=openblas|blis */
	dnnl_sgemm_fn dnnl;                /* SB_GEMM=onednn */
	set_threads_fn omp_threads;        /* oneDNN's OpenMP: one thread per calling thread */
	char lib[96];
} g; /* set once, before any product (pthread_once), read-only after */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* oneDNN's names for its instruction sets (dnnl_types.h, dnnl_cpu_isa_t) */
static const char *dnnl_isa_name(int isa)
{
	switch (isa) {
	case 0x1: return "SSE4.1";
	case 0x3: return "AVX";
	case 0x7: return "AVX2";
	case 0x27: return "AVX-512";
	case 0x67: return "AVX-512 VNNI";
	case 0xe7: return "AVX-512 BF16";
	case 0x3e7: return "AMX";
	case 0x407: return "AVX2 VNNI";
	default: return "?";
	}
}

/* A library is loaded once and never unloaded (unloading one that started threads is not
 * safe). Returns whether it loaded. */
static int load_library(const char *want)
{
	if (!strcmp(want, "onednn")) {
		void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
		dnnl_sgemm_fn f = lib ? (dnnl_sgemm_fn)dlsym(lib, "dnnl_sgemm") : NULL;
		int (*isa)(void) = lib ? (int (*)(void))dlsym(lib, "dnnl_get_effective_cpu_isa") : NULL;
		int (*cap)(int) = lib ? (int (*)(int))dlsym(lib, "dnnl_set_max_cpu_isa") : NULL;
		g.omp_threads = lib ? (set_threads_fn)dlsym(lib, "omp_set_num_threads") : NULL;
		if (!f || !isa)
			return 0;
		/* SB_CPU_ISA's cap holds for oneDNN's JIT too (its avx512_core_vnni: no BF16) */
		const sb_cpu_features *cf = sb_cpu_features_get();
		if (cap && sb_knob_get("SB_CPU_ISA"))
			cap(cf->isa == SB_ISA_GENERIC ? 0x1 : cf->isa == SB_ISA_AVX2 ? 0x7
			    : cf->avx512_bf16 ? 0x0 : 0x67);
		g.dnnl = f;
		snprintf(g.lib, sizeof g.lib, "oneDNN sgemm (%s)", dnnl_isa_name(isa()));
		return 1;
	}
	if (!strcmp(want, "openblas")) {
		void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
		set_threads_fn st = lib ? (set_threads_fn)dlsym(lib, "openblas_set_num_threads") : NULL;
		cblas_sgemm_fn f = lib ? (cblas_sgemm_fn)dlsym(lib, "cblas_sgemm") : NULL;
		char *(*core)(void) = lib ? (char *(*)(void))dlsym(lib, "openblas_get_corename") : NULL;
		if (!st || !f)
			return 0;
		st(1);
		g.cblas = f;
		snprintf(g.lib, sizeof g.lib, "OpenBLAS (%s core)", core ? core() : "?");
		return 1;
	}
	if (!strcmp(want, "blis")) {
		void *lib = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
		cblas_sgemm_fn f = lib ? (cblas_sgemm_fn)dlsym(lib, "cblas_sgemm") : NULL;
		set_threads_fn st = lib ? (set_threads_fn)dlsym(lib, "bli_thread_set_num_threads") : NULL;
		int (*arch_id)(void) = lib ? (int (*)(void))dlsym(lib, "bli_arch_query_id") : NULL;
		const char *(*arch)(int) = lib ? (const char *(*)(int))dlsym(lib, "bli_arch_string")
		                               : NULL;
		if (!f || !st)
			return 0;
		st(1);
		g.cblas = f;
		snprintf(g.lib, sizeof g.lib, "BLIS (%s kernels)", arch && arch_id ? arch(arch_id()) : "?");
		return 1;
	}
	return 0;
}

/* fp32: oneDNN's sgemm where it is installed (its kernels are generated for the instructions
 * present, and it beat every other choice on HTDemucs's shapes: bench/cpu/README.md), else our
 * kernels for the widest instruction set present. bf16: our AVX512_BF16 kernel. */
static void init_once(void)
{
	const sb_cpu_features *f = sb_cpu_features_get();
	g.f32 = &sb_gemm_generic_f32;
#if defined(__x86_64__)
	if (f->isa == SB_ISA_AVX512)
		g.f32 = &sb_gemm_avx512_f32;
	else if (f->isa == SB_ISA_AVX2)
		g.f32 = &sb_gemm_avx2_f32;
	if (f->avx512_bf16)
		g.bf16 = &sb_gemm_avx512_bf16;
#else
	(void)f;
#endif
	const char *want = sb_knob_get("SB_GEMM");
	if (!want || !*want || !strcmp(want, "auto"))
		want = "onednn";
	if (!strcmp(want, "loop"))
		g.loop = 1;
	else if (strcmp(want, "own"))
		load_library(want); /* one that does not load leaves our own kernels */
}

void sb_gemm_init(void)
{
	pthread_once(&once, init_once);
}

int sb_gemm_bf16_available(void)
{
	sb_gemm_init();
	return g.bf16 != NULL;
}

const char *sb_gemm_describe(int bf16)
{
	sb_gemm_init();
	if (bf16 && g.bf16)
		return g.bf16->name;
	if (g.loop)
		return "unpacked loop";
	if (g.cblas || g.dnnl)
		return g.lib;
	return g.f32->name;
}

/* ---- workspace ---- */

struct sb_gemm_ws {
	const sb_gemm_kernel *k;
	void *a, *b;
};

/* bytes of packed panels holding `width` rows of A (or columns of B), kc deep */
static size_t panel_bytes(const sb_gemm_kernel *k, int width, int kc)
{
	return (size_t)width * (size_t)(k->bf16 ? (kc + 1) / 2 * 4 : kc * 4);
}

sb_gemm_ws *sb_gemm_ws_new(int bf16)
{
	sb_gemm_init();
	sb_gemm_ws *ws = calloc(1, sizeof *ws);
	if (!ws)
		return NULL;
	ws->k = bf16 && g.bf16 ? g.bf16 : g.f32;
	return ws;
}

/* The packing buffers, at the first packed product: a workspace whose products all go to a
 * library never needs them. 0 when out of memory (the product then runs the loop). */
static int ws_buffers(sb_gemm_ws *ws)
{
	if (ws->a && ws->b)
		return 1;
	const sb_gemm_kernel *k = ws->k;
	const size_t abytes = panel_bytes(k, (k->mc + k->mr - 1) / k->mr * k->mr, k->kc);
	const size_t bbytes = panel_bytes(k, (k->nc + k->nr - 1) / k->nr * k->nr, k->kc);
	if ((!ws->a && posix_memalign(&ws->a, 64, abytes)) ||
	    (!ws->b && posix_memalign(&ws->b, 64, bbytes))) {
		free(ws->a);
		free(ws->b);
		ws->a = ws->b = NULL;
		return 0;
	}
	return 1;
}

void sb_gemm_ws_free(sb_gemm_ws *ws)
{
	if (!ws)
		return;
	free(ws->a);
	free(ws->b);
	free(ws);
}

/* ---- products ---- */

/* The reference: no packing, no workspace. Blocked so that a K-slice of B stays in cache while
 * rows of A stream past it. */
static void loop_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	enum { KB = 128, NB = 512 };
	float acc[NB];
	for (int j0 = 0; j0 < N; j0 += NB) {
		const int nb = N - j0 < NB ? N - j0 : NB;
		for (int i = 0; i < M; i++) {
			memset(acc, 0, sizeof(float) * (size_t)nb);
			for (int k0 = 0; k0 < K; k0 += KB) {
				const int kb = K - k0 < KB ? K - k0 : KB;
				for (int k = k0; k < k0 + kb; k++) {
					const float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
					if (tb)
						for (int j = 0; j < nb; j++)
							acc[j] += a * B[(size_t)(j0 + j) * ldb + k];
					else {
						const float *b = B + (size_t)k * ldb + j0;
						for (int j = 0; j < nb; j++)
							acc[j] += a * b[j];
					}
				}
			}
			float *c = C + (size_t)i * ldc + j0;
			for (int j = 0; j < nb; j++)
				c[j] = alpha * acc[j] + (beta == 0.f ? 0.f : beta * c[j]);
		}
	}
}

static void packed_sgemm(sb_gemm_ws *ws, int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, long lda, const float *B, long ldb, float beta,
                         float *C, long ldc)
{
	const sb_gemm_kernel *k = ws->k;
	const int MR = k->mr, NR = k->nr;
	float tile[16 * 32] __attribute__((aligned(64)));
	for (int jc = 0; jc < N; jc += k->nc) {
		const int nc = N - jc < k->nc ? N - jc : k->nc;
		for (int pc = 0; pc < K; pc += k->kc) {
			const int kc = K - pc < k->kc ? K - pc : k->kc;
			const float bet = pc == 0 ? beta : 1.f;
			k->pack_b(tb, kc, nc, tb ? B + jc * ldb + pc : B + pc * ldb + jc, ldb, ws->b);
			const size_t ap = panel_bytes(k, MR, kc), bp = panel_bytes(k, NR, kc);
			for (int ic = 0; ic < M; ic += k->mc) {
				const int mc = M - ic < k->mc ? M - ic : k->mc;
				k->pack_a(ta, mc, kc, ta ? A + pc * lda + ic : A + ic * lda + pc, lda, ws->a);
				for (int jr = 0; jr < nc; jr += NR) {
					const int n = nc - jr < NR ? nc - jr : NR;
					const char *bpan = (const char *)ws->b + (size_t)(jr / NR) * bp;
					for (int ir = 0; ir < mc; ir += MR) {
						const int m = mc - ir < MR ? mc - ir : MR;
						const char *apan = (const char *)ws->a + (size_t)(ir / MR) * ap;
						float *c = C + (ic + ir) * ldc + jc + jr;
						if (m == MR && n == NR) {
							k->kernel(kc, apan, bpan, c, ldc, alpha, bet);
							continue;
						}
						k->kernel(kc, apan, bpan, tile, NR, 1.f, 0.f);
						for (int i = 0; i < m; i++)
							for (int j = 0; j < n; j++) {
								float *cij = c + i * ldc + j;
								*cij = alpha * tile[i * NR + j] + (bet == 0.f ? 0.f : bet * *cij);
							}
					}
				}
			}
		}
	}
}

void sb_sgemm(sb_gemm_ws *ws, int ta, int tb, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return;
	sb_gemm_init();
	if (K <= 0) {
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++)
				C[(size_t)i * ldc + j] = beta == 0.f ? 0.f : beta * C[(size_t)i * ldc + j];
		return;
	}
	const int bf16 = ws && ws->k->bf16;
	if (!bf16 && g.cblas) {
		g.cblas(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
		        tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	} else if (!bf16 && g.dnnl) {
		if (g.omp_threads)
			g.omp_threads(1); /* per calling thread: our pool does the splitting */
		/* it fails only on allocation; our kernels then compute the same product */
		if (g.dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C,
		           ldc) != 0) {
			if (ws && ws_buffers(ws))
				packed_sgemm(ws, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
			else
				loop_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
		}
	} else if (ws && !g.loop && ws_buffers(ws)) {
		packed_sgemm(ws, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	} else {
		loop_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	}
}

typedef struct {
	sb_gemm_ws *const *ws;
	int ta, tb, M, N, K, by_rows;
	float alpha, beta;
	const float *A, *B;
	float *C;
	int lda, ldb, ldc;
} gemm_job;

static void gemm_part(void *vj, int64_t b, int64_t e, int worker)
{
	const gemm_job *j = vj;
	sb_gemm_ws *ws = j->ws ? j->ws[worker] : NULL;
	if (j->by_rows) {
		const float *a = j->ta ? j->A + b : j->A + b * j->lda;
		sb_sgemm(ws, j->ta, j->tb, (int)(e - b), j->N, j->K, j->alpha, a, j->lda, j->B, j->ldb,
		         j->beta, j->C + b * j->ldc, j->ldc);
	} else {
		const float *bb = j->tb ? j->B + b * j->ldb : j->B + b;
		sb_sgemm(ws, j->ta, j->tb, j->M, (int)(e - b), j->K, j->alpha, j->A, j->lda, bb, j->ldb,
		         j->beta, j->C + b, j->ldc);
	}
}

void sb_sgemm_par(sb_pool *pool, sb_gemm_ws *const *ws, int ta, int tb, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc)
{
	const int threads = sb_pool_threads(pool);
	if (threads == 1 || (int64_t)M * N * K < 4 * 65536) {
		sb_sgemm(ws ? ws[0] : NULL, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
		return;
	}
	sb_gemm_init();
	gemm_job j = {ws, ta, tb, M, N, K, M >= N, alpha, beta, A, B, C, lda, ldb, ldc};
	/* whole tiles per thread: the other side of the split packs in full on every thread */
	const sb_gemm_kernel *k = ws && ws[0] ? ws[0]->k : g.f32;
	const int64_t n = j.by_rows ? M : N;
	const int64_t grain = j.by_rows ? k->mr : k->nr;
	int64_t per = (n + threads - 1) / threads;
	per = (per + grain - 1) / grain * grain;
	sb_pool_for(pool, n, per, gemm_part, &j);
}
