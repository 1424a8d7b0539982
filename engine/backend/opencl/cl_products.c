/* The products' dispatcher (cl_products.h): which path runs a product, chosen once per device
 * (SB_CL_GEMM) or measured per shape (cl_gemm_pick.h), each path other than CLBlast checked
 * against the host before its first use where it is measured; bf16 and tf32 on the tensor
 * cores (cl_gemm_mma.c), the tiled kernel (cl_gemm_tiled.c), CLBlast (cl_blas.c) and ops.cl's
 * own product below it. */
#include "backend/opencl/cl_products.h"

#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first bf16 product on this device (--precision bf16): the tensor-core kernel where the
 * device has it (or SB_CL_MMA=emulate asks for its emulation), else fp32, said once a process
 * (the manifest says it for every job). Only running out of host memory is a failure. */
sb_status sb_cl_bf16_products(sb_bdev *c)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	c->mma_tried = 1;
	const int emulate = sb_cl_mma_emulate_asked();
	const char *why = NULL;
	if (!emulate && !sb_cl_mma_native(c->dev, &why)) {
		if (!atomic_flag_test_and_set(&said))
			sb_log(c->log, SB_LOG_WARNING, "bf16 products on OpenCL need %s, which %s "
			       "lacks: running fp32", why, sb_cl_device_props(c->dev)->label);
		return SB_OK;
	}
	const sb_status st = sb_cl_mma_open(c, emulate, 0, &c->mma);
	if (st == SB_ERR_NOMEM)
		return st;
	if (st != SB_OK && !atomic_flag_test_and_set(&said))
		sb_log(c->log, SB_LOG_WARNING, "the tensor-core product cannot be used on %s (why "
		       "above): running fp32", sb_cl_device_props(c->dev)->label);
	return SB_OK;
}

/* gemm_bias's epilogue as a pass of its own, after a product that has none (CLBlast's) */
void sb_cl_bias_items(sb_bdev *c, int M, int N, sb_dv C, int ldc, long sc, int batch,
                      const sb_bias *e)
{
	kargs a = args(c, K_BIAS_ITEMS);
	a_db(&a, C);
	a_i32(&a, M);
	a_i32(&a, N);
	a_i32(&a, ldc);
	a_i64(&a, sc);
	a_ep(&a, e, C);
	const size_t g[3] = {(size_t)N, (size_t)M, (size_t)batch}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

/* the paths in the profile's products (sb_cl_gemm_kind, then bf16; the tiled kernel names its
 * tiling instead) */
static const char *const path_word[] = {"own", "clblast", "tiled", "tf32", "bf16"};

/* One fp32 product through path k on c->q, with gemm_bias's epilogue e (NULL: none); *ran (when
 * not NULL) is set to the path's word for the profile. SB_ERR_UNSUPPORTED when CLBlast refused it
 * (logged); any other failure is kept in c. */
static sb_status gemm_path(sb_bdev *c, sb_cl_gemm_kind k, int M, int N, int K, float alpha,
                           sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                           float beta, sb_dv C, int ldc, long sc, int batch, const sb_bias *e,
                           const char **ran)
{
	if (ran)
		*ran = path_word[k];
	if (k == SB_CL_GEMM_CLBLAST) {
		const double t0 = sb_cl_prof_begin(c);
		c->counts.launches++; /* CLBlast's kernels: one call, one launch or a few */
		const sb_status st = sb_cl_sgemm(c->dev, c->q, M, N, K, alpha, A.buf->m, A.off, lda, sa,
		                                 B.buf->m, B.off, ldb, sb, tb, beta, C.buf->m, C.off,
		                                 ldc, sc, batch);
		sb_cl_prof_end(c, K_GEMM, t0, 2.0 * M * N * K * batch);
		if (st != SB_OK && st != SB_ERR_UNSUPPORTED)
			sb_cl_fail(c, st);
		if (st == SB_OK && e)
			sb_cl_bias_items(c, M, N, C, ldc, sc, batch, e);
		return st == SB_ERR_UNSUPPORTED ? st : SB_OK;
	}
	if (k == SB_CL_GEMM_TILED) {
		const char *w = sb_cl_tiled_gemm(c, c->tiled, M, N, K, alpha, A, lda, sa, B, ldb, sb,
		                                 tb, beta, C, ldc, sc, batch, e);
		if (ran)
			*ran = w;
		return SB_OK;
	}
	kargs a = args(c, K_GEMM);
	a_gemm(&a, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc);
	a_ep(&a, e, C);
	const size_t g[3] = {(size_t)(N + 63) / 64 * 16, (size_t)(M + 63) / 64 * 16, (size_t)batch};
	const size_t l[3] = {16, 16, 1};
	a.flops = 2.0 * M * N * K * batch;
	sb_cl_run(&a, 3, g, l);
	return SB_OK;
}

/* the tiled kernel's programs, built at its first use (SB_CL_GEMM=tiled, or a candidate when
 * measuring); 0 when it cannot run: out of host memory (kept in c), or logged with 'instead' */
static int tiled_ready(sb_bdev *c, const char *instead)
{
	if (c->tiled)
		return 1;
	const sb_status st = sb_cl_tiled_open(c, &c->tiled);
	if (st == SB_ERR_NOMEM)
		sb_cl_fail(c, st);
	else if (st != SB_OK)
		sb_log(c->log, SB_LOG_WARNING, "the tiled matrix product cannot run on %s: %s",
		       sb_cl_device_props(c->dev)->label, instead);
	return st == SB_OK;
}

sb_status sb_cl_products_choose(sb_bdev *c)
{
	sb_status st = SB_OK;
	c->gemm = sb_cl_gemm_choose(c->dev);
	if (c->gemm == SB_CL_GEMM_TILED && !tiled_ready(c, "the own kernel instead")) {
		if (c->st != SB_OK)
			return c->st;
		c->gemm = SB_CL_GEMM_OWN;
	}
	if (c->gemm == SB_CL_GEMM_TF32) {
		const char *why = NULL;
		const int emulate = sb_cl_mma_emulate_asked();
		st = emulate || sb_cl_mma_native(c->dev, &why) ? sb_cl_mma_open(c, emulate, 1, &c->tf32)
		                                               : SB_ERR_UNSUPPORTED;
		if (st == SB_ERR_NOMEM) {
			sb_cl_fail(c, st);
			return st;
		}
		if (st != SB_OK) {
			if (why)
				sb_log(c->log, SB_LOG_WARNING, "SB_CL_GEMM=tf32 needs %s, which %s lacks: "
				       "the own kernel instead", why, sb_cl_device_props(c->dev)->label);
			else
				sb_log(c->log, SB_LOG_WARNING, "SB_CL_GEMM=tf32 cannot be used on %s (why "
				       "above): the own kernel instead", sb_cl_device_props(c->dev)->label);
			c->gemm = SB_CL_GEMM_OWN;
		}
	}
	if ((c->gemm == SB_CL_GEMM_CLBLAST || c->gemm == SB_CL_GEMM_OWN) &&
	    sb_cl_gemm_measured(sb_cl_device_props(c->dev))) {
		const int clblast = c->gemm == SB_CL_GEMM_CLBLAST;
		st = sb_cl_pick_open(c, SB_CL_PICK_PRODUCTS, 1 << SB_CL_GEMM_OWN | 1 << SB_CL_GEMM_TILED |
		                     clblast << SB_CL_GEMM_CLBLAST,
		                     clblast ? SB_CL_GEMM_CLBLAST : SB_CL_GEMM_OWN, sb_cl_ops_source(),
		                     "", &c->pick);
		if (st != SB_OK) {
			sb_cl_fail(c, st);
			return st;
		}
	}
	return SB_OK;
}

const char *sb_cl_products_describe(const sb_bdev *c)
{
	return c->pick ? sb_cl_pick_describe(c->pick)
	       : c->tiled ? sb_cl_tiled_describe(c->tiled)
	       : c->tf32 ? sb_cl_mma_describe(c->tf32) : sb_cl_gemm_name(c->gemm);
}

/* Before the own or the tiled kernel runs anything on a device that measures its paths (where
 * it may never have run: an AMD or Intel GPU), its products against the host's, in double
 * precision: both layouts of B, rows 16-byte aligned and not (the float4 and the plain reads
 * and writes), each on a small product (the tiled kernel's small tiling), on one of 6 rows (its
 * thin tiling) and on a batch of two accumulating into C (beta) with a large tile for every
 * compute unit (its large tiling); and every float of C outside the products unchanged. SB_OK
 * with *worst the largest relative L2 error; SB_ERR_DEVICE when the driver refused a launch; a
 * failure of the device's own (memory, a lost device) is also kept in c. Waits for the device. */
static sb_status path_right(sb_bdev *c, sb_cl_gemm_kind k, double *worst)
{
	enum { M = 70, N = 90, K = 100, PAD = 4, BN = 1152, BK = 40 };
	/* large tiles of up to 128 x 64: BN / 64 = 18 of them a row of tiles */
	const unsigned cu = sb_cl_device_props(c->dev)->compute_units;
	const int BM = 128 * (int)((cu + 17) / 18) > 1024 ? 128 * (int)((cu + 17) / 18) : 1024;
	const size_t na = (size_t)2 * BM * (BK + 1) + 1, nb = (size_t)2 * (BK + 1) * (BN + 1) + 1,
	             nc = (size_t)2 * BM * (BN + 1) + 1;
	sb_cl_check ck;
	sb_status st = sb_cl_check_open(c, na, nb, nc, 2025u, "uploading a product path's check",
	                                &ck);
	float *ha = ck.a, *hb = ck.b, *hc = ck.c, *h0 = malloc(sizeof(float) * nc);
	sb_bbuf ba = ck.A, bb = ck.B, bc = ck.C;
	if (st == SB_OK && !h0)
		st = SB_ERR_NOMEM;
	for (size_t i = 0; st == SB_OK && i < nc; i++) /* C before the products (beta) */
		h0[i] = (float)((i * 2654435761u) >> 8 & 0xffff) / 32768.f - 1.f;
	*worst = 0;
	for (int cs = 0; st == SB_OK && cs < 12; cs++) {
		const int big = cs >= 4 && cs < 8, thin = cs >= 8, tb = cs & 1, al = !(cs & 2);
		const int m = big ? BM : thin ? 6 : M, n = big ? BN : N, kk = big ? BK : K;
		const int batch = big ? 2 : 1;
		const int pad = al ? (big ? 0 : PAD) : 1;
		const int lda = kk + pad, ldb = (tb ? kk : n) + pad, ldc = n + pad;
		const size_t off = al ? 0 : 1;
		const long sa = (long)m * lda, sb = (long)kk * ldb, sc = (long)m * ldc;
		const float alpha = big ? 0.5f : 1.f, beta = big ? 0.5f : 0.f;
		sb_cl_waited(c);
		const cl_int err = clEnqueueWriteBuffer(c->q, bc.m, CL_TRUE, 0, sizeof(float) * nc, h0,
		                                        0, NULL, NULL);
		if (err != CL_SUCCESS) {
			st = sb_cl_status(c->dev, err, "uploading a product path's check");
			break;
		}
		if (gemm_path(c, k, m, n, kk, alpha, (sb_dv){&ba, off}, lda, sa, (sb_dv){&bb, off}, ldb,
		              sb, tb, beta, (sb_dv){&bc, off}, ldc, sc, batch, NULL, NULL) != SB_OK)
			st = SB_ERR_DEVICE; /* refused */
		if (st == SB_OK)
			st = sb_cl_check_result(c, bc.m, nc, hc, "reading a product path's check");
		if (st == SB_OK && sb_cl_device_fault_tune_wrong(c->dev, k))
			hc[off + (size_t)ldc + 3] += 1.f; /* opencl:N:tune-wrong:KIND */
		double e = 0, ref = 0;
		for (int b = 0; st == SB_OK && b < batch; b++)
			for (int i = 0; i < m; i += big ? 15 : 1) /* the large case: every 15th row */
				for (int j = 0; j < n; j++) {
					double sum = 0;
					for (int q = 0; q < kk; q++) {
						const float a = ha[off + (size_t)(b * sa + (long)i * lda + q)],
						            v = tb ? hb[off + (size_t)(b * sb + (long)j * ldb + q)]
						                   : hb[off + (size_t)(b * sb + (long)q * ldb + j)];
						sum += (double)a * v;
					}
					const size_t o = off + (size_t)(b * sc + (long)i * ldc + j);
					sum = alpha * sum + beta * (double)h0[o];
					const double d = hc[o] - sum;
					e += d * d;
					ref += sum * sum;
				}
		/* outside the products (the offset, the rows' padding, past the last): as it was */
		for (size_t o = 0; st == SB_OK && o < nc; o++) {
			const size_t x = o - off, b = x / (size_t)sc, r = x % (size_t)sc;
			const int inside = o >= off && b < (size_t)batch && r / (size_t)ldc < (size_t)m &&
			                   r % (size_t)ldc < (size_t)n;
			if (!inside && memcmp(&hc[o], &h0[o], sizeof(float)))
				e += 1.0, ref += ref > 0 ? 0 : 1; /* a write outside: wrong whatever the rest */
		}
		const double rel = sqrt(e / (ref > 0 ? ref : 1));
		if (st == SB_OK && !(rel <= *worst))
			*worst = rel;
	}
	sb_cl_check_close(&ck);
	free(h0);
	if (st == SB_ERR_NOMEM)
		sb_cl_fail(c, st); /* the host's state, not the path's */
	return st;
}

/* Under measuring, a path other than CLBlast serves a product on a device only once
 * path_right() has passed it there. 1: it may; 0: it gave wrong products or cannot run there
 * (warned once; the caller leaves it out); -1: not known, the device failed meanwhile (c->st:
 * memory, a lost device), asked again on the next pass. */
static int path_usable(sb_bdev *c, sb_cl_gemm_kind k)
{
	if (k == (sb_cl_gemm_kind)SB_CL_GEMM_CLBLAST || (c->paths_ok >> k & 1))
		return 1;
	if (c->paths_tried >> k & 1)
		return 0;
	if (c->st != SB_OK)
		return -1;
	if (k == SB_CL_GEMM_TILED && !tiled_ready(c, "measured without it")) {
		if (c->st != SB_OK)
			return -1;
		c->paths_tried |= 1 << k;
		return 0;
	}
	double worst = 0;
	const double t0 = sb_now();
	const sb_status st = path_right(c, k, &worst);
	if (c->st != SB_OK)
		return -1;
	c->paths_tried |= 1 << k;
	if (st == SB_OK && worst < 1e-5) {
		c->paths_ok |= 1 << k;
		sb_log(c->log, SB_LOG_INFO, "the %s passed its check on %s (relative error %.1e, "
		       "%.2f s)", sb_cl_gemm_name(k), sb_cl_device_props(c->dev)->label, worst,
		       sb_now() - t0);
		return 1;
	}
	if (st == SB_OK)
		sb_log(c->log, SB_LOG_WARNING, "the %s gave wrong products on %s (relative error "
		       "%.1e against the host's): left out of the measured paths", sb_cl_gemm_name(k),
		       sb_cl_device_props(c->dev)->label, worst);
	else
		sb_log(c->log, SB_LOG_WARNING, "the %s cannot run on %s (%s): left out of the measured "
		       "paths", sb_cl_gemm_name(k), sb_cl_device_props(c->dev)->label,
		       sb_status_str(st));
	return 0;
}

/* One product's operands, for its timed runs */
typedef struct {
	int M, N, K;
	float alpha;
	sb_dv A;
	int lda;
	long sa;
	sb_dv B;
	int ldb;
	long sb;
	int tb;
	float beta;
	int ldc;
	long sc;
	int batch;
	const sb_bias *e;
} gemm_op;

/* a timed run: the path with its epilogue, as the pass would run it (CLBlast's as a pass of
 * its own, counted against it) */
static sb_status gemm_timed(sb_bdev *c, int path, sb_dv out, const void *op)
{
	const gemm_op *g = op;
	return gemm_path(c, (sb_cl_gemm_kind)path, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->sa,
	                 g->B, g->ldb, g->sb, g->tb, g->beta, out, g->ldc, g->sc, g->batch, g->e,
	                 NULL);
}

/* Under measuring (cl_gemm_pick.h): the path this product takes, after the timed runs of the
 * candidates its shape still needs, on the measuring queue into a scratch output. */
static sb_cl_gemm_kind measured_path(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A,
                                     int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                                     float beta, sb_dv C, int ldc, long sc, int batch,
                                     const sb_bias *e)
{
	sb_cl_pick *p = c->pick;
	/* a product with an epilogue is a shape of its own (8 in the alignment's field): CLBlast
	 * runs it as a pass more */
	const sb_cl_shape s = {{M, N, K, tb, batch,
	                        sb_cl_gemm_flags(A, lda, sa, B, ldb, sb, C, ldc, sc) | (e ? 8 : 0)}};
	int want = 0, slot = -1;
	const int may_time = !c->profiling;
	sb_cl_gemm_kind k = (sb_cl_gemm_kind)sb_cl_pick_path(p, &s, may_time, &want, &slot);
	int ok = path_usable(c, k);
	while (ok == 0 && sb_cl_pick_drop(p, k)) { /* kept from an earlier process, wrong here */
		k = (sb_cl_gemm_kind)sb_cl_pick_path(p, &s, may_time, &want, &slot);
		ok = path_usable(c, k);
	}
	for (int j = 0; j < 3 && ok >= 0; j++) /* checked on the pass's queue, before the timed runs */
		if (want >> j & 1 && (ok = path_usable(c, (sb_cl_gemm_kind)j)) == 0) {
			sb_cl_pick_drop(p, (sb_cl_gemm_kind)j);
			want &= ~(1 << j);
			ok = 1;
		}
	if (!want || c->st != SB_OK)
		return k;
	/* C's extent: the scratch output keeps C's strides and its alignment (C.off modulo a
	 * float4), so every path runs the code it would run on C */
	const size_t lead = C.off % 4;
	const size_t floats = lead + (size_t)(batch - 1) * (size_t)(sc > 0 ? sc : 0) +
	                      (size_t)(M - 1) * (size_t)ldc + (size_t)N;
	const gemm_op op = {M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, ldc, sc, batch, e};
	sb_cl_time_paths(c, p, slot, want, lead, floats, gemm_timed, &op);
	return (sb_cl_gemm_kind)sb_cl_pick_path(p, &s, 0, &want, &slot); /* one may be dropped */
}

/* one product; returns the path that ran it (path_word; the tiled kernel's tiling, "tiled
 * 16x128"), NULL when none did */
static const char *gemm_run(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda,
                            long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C,
                            int ldc, long sc, int batch, const sb_bias *e)
{
	if (c->want_bf16 && !c->mma_tried) {
		const sb_status st = sb_cl_bf16_products(c);
		if (st != SB_OK) {
			c->st = st;
			return NULL;
		}
	}
	if (c->want_bf16 && c->mma) {
		sb_cl_mma_gemm(c, c->mma, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		               batch, e);
		return path_word[4];
	}
	if (c->gemm == SB_CL_GEMM_TF32) {
		sb_cl_mma_gemm(c, c->tf32, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		               batch, e);
		return path_word[SB_CL_GEMM_TF32];
	}
	const sb_cl_gemm_kind k = c->pick ? measured_path(c, M, N, K, alpha, A, lda, sa, B, ldb, sb,
	                                                  tb, beta, C, ldc, sc, batch, e)
	                                  : c->gemm;
	if (c->st != SB_OK)
		return NULL;
	const char *ran = NULL;
	if (gemm_path(c, k, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch, e,
	              &ran) == SB_OK)
		return ran;
	/* CLBlast refused (logged): the own kernel from now on, still on this device; under
	 * measuring, the next default of the paths left (checked at their first use) */
	c->gemm = SB_CL_GEMM_OWN;
	if (c->pick) {
		sb_cl_pick_drop(c->pick, SB_CL_GEMM_CLBLAST);
		c->gemm = measured_path(c, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		                        batch, e);
		if (c->st != SB_OK)
			return NULL;
	}
	sb_log(c->log, SB_LOG_WARNING, "matrix products through the %s from now on",
	       sb_cl_gemm_name(c->gemm));
	gemm_path(c, c->gemm, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch,
	          e, &ran);
	return ran;
}

static void gemm_one(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                     sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                     int batch, const sb_bias *e)
{
	const double t0 = sb_cl_prof_begin(c);
	const char *path = gemm_run(c, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
	                            batch, e);
	if (path)
		sb_cl_prof_product(c, t0, M, N, K, tb, batch, e != NULL, path);
}

/* the second batch level: one strided-batched product per item of it */
void sb_cl_product(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                   sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                   int batch, int batch2, long sa2, long sb2, long sc2, const sb_bias *e)
{
	for (int j = 0; j < batch2 && c->st == SB_OK; j++)
		gemm_one(c, M, N, K, alpha, sb_dv_at(A, (size_t)(j * sa2)), lda, sa,
		         sb_dv_at(B, (size_t)(j * sb2)), ldb, sb, tb, beta,
		         sb_dv_at(C, (size_t)(j * sc2)), ldc, sc, batch, e);
}

