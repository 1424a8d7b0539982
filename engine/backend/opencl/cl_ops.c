/* The OpenCL backend's operations (backend.h: sb_ops): one kernel of ops.cl per operation
 * (matrix products through CLBlast where it serves, cl_blas.h, or gemm.cl's tiled kernel,
 * cl_gemm_tiled.h), built through the device's kernel cache at the first operation. A failure
 * is kept in the device and every later launch is skipped until clear(), so a model's forward
 * pass reads as straight-line code and checks once at the end (and before every download, so
 * nothing reads a half-computed buffer).
 * The signal operations (STFT, standardisation, gathers) are in cl_signal.c.
 */
#include "backend/opencl/cl_ops.h"

#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"

#include "attention_cl.h" /* generated: attention.cl's source */
#include "attention_mma_cl.h" /* generated: gemm_rows.cl + mma.cl + attention_mma.cl */
#include "ops_cl.h"       /* generated: the kernels' source */

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sb_cl_op_names[P_COUNT] = {
	"gemm", "bias_act", "fill_bias", "bias_cols", "add", "glu", "glu_add", "norm_part",
	"norm_final",
	"gn_apply", "gn_apply_tokens", "layernorm", "softmax_rows", "scale_add", "transpose",
	"ften_to_tokens", "tokens_to_ften", "add_freq_emb", "im2col_time", "convtr_gather",
	"rmsnorm", "rope", "head_gate", "stft_frames", "istft_frames", "istft_ola",
	"moments_final", "standardise", "gather_cols", "cmul", "attention_16", "attention_32",
	"attention_64", "attention_mma",
	"upload", "download", "copy", "zero", "finish",
};

void sb_cl_fail(sb_bdev *d, sb_status st)
{
	if (d->st == SB_OK)
		d->st = st;
}

static void fail(sb_bdev *c, cl_int err, const char *what)
{
	if (c->st == SB_OK)
		c->st = sb_cl_status(c->dev, err, what);
}

static size_t round_up(size_t n, size_t m)
{
	return (n + m - 1) / m * m;
}

/* Enqueue with global sizes rounded up to the local ones (NULL local: 1-D, 256). */
void sb_cl_run(kargs *a, cl_uint dims, const size_t *global, const size_t *local)
{
	sb_bdev *c = a->c;
	if (c->st != SB_OK)
		return;
	if (a->err != CL_SUCCESS) {
		fail(c, a->err, "setting kernel arguments");
		return;
	}
	size_t g[3], l[3] = {256, 1, 1};
	for (cl_uint d = 0; d < dims; d++) {
		if (local)
			l[d] = local[d];
		g[d] = round_up(global[d] ? global[d] : 1, l[d]);
	}
	sb_cl_device_delay(c->dev);
	const double t0 = sb_cl_prof_begin(c);
	const cl_int err = clEnqueueNDRangeKernel(c->q, a->k, dims, NULL, g, l, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "enqueueing a kernel");
	sb_cl_prof_end(c, a->id, t0, a->flops);
}

/* ---- kernels ---- */

/* The first bf16 product on this device (--precision bf16): the tensor-core kernel where the
 * device has it (or SB_CL_MMA=emulate asks for its emulation), else fp32, said once a process
 * (the manifest says it for every job). Only running out of host memory is a failure. */
static sb_status bf16_products(sb_bdev *c)
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

/* One fp32 product through path k on c->q. SB_ERR_UNSUPPORTED when CLBlast refused it
 * (logged); any other failure is kept in c. */
static sb_status gemm_path(sb_bdev *c, sb_cl_gemm_kind k, int M, int N, int K, float alpha,
                           sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                           float beta, sb_dv C, int ldc, long sc, int batch)
{
	if (k == SB_CL_GEMM_CLBLAST) {
		const double t0 = sb_cl_prof_begin(c);
		const sb_status st = sb_cl_sgemm(c->dev, c->q, M, N, K, alpha, A.buf->m, A.off, lda, sa,
		                                 B.buf->m, B.off, ldb, sb, tb, beta, C.buf->m, C.off,
		                                 ldc, sc, batch);
		sb_cl_prof_end(c, K_GEMM, t0, 2.0 * M * N * K * batch);
		if (st != SB_OK && st != SB_ERR_UNSUPPORTED)
			sb_cl_fail(c, st);
		return st == SB_ERR_UNSUPPORTED ? st : SB_OK;
	}
	if (k == SB_CL_GEMM_TILED) {
		sb_cl_tiled_gemm(c, c->tiled, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc,
		                 sc, batch);
		return SB_OK;
	}
	kargs a = args(c, K_GEMM);
	a_gemm(&a, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc);
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

sb_status sb_cl_check_open(sb_bdev *c, size_t na, size_t nb, size_t nc, unsigned seed,
                           const char *what, sb_cl_check *k)
{
	memset(k, 0, sizeof *k);
	k->A.n = na;
	k->B.n = nb;
	k->C.n = nc;
	k->a = malloc(sizeof(float) * na);
	k->b = malloc(sizeof(float) * nb);
	k->c = malloc(sizeof(float) * nc);
	sb_status st = k->a && k->b && k->c ? SB_OK : SB_ERR_NOMEM;
	if (st == SB_OK)
		st = sb_cl_device_alloc(c->dev, sizeof(float) * na, CL_MEM_READ_WRITE, &k->A.m);
	if (st == SB_OK)
		st = sb_cl_device_alloc(c->dev, sizeof(float) * nb, CL_MEM_READ_WRITE, &k->B.m);
	if (st == SB_OK)
		st = sb_cl_device_alloc(c->dev, sizeof(float) * nc, CL_MEM_READ_WRITE, &k->C.m);
	for (size_t i = 0; st == SB_OK && i < na + nb; i++) {
		seed = seed * 1664525u + 1013904223u;
		(i < na ? k->a : k->b)[i < na ? i : i - na] = (float)(seed >> 8) / 8388608.f - 1.f;
	}
	if (st != SB_OK)
		return st;
	cl_int err = clEnqueueWriteBuffer(c->q, k->A.m, CL_TRUE, 0, sizeof(float) * na, k->a, 0,
	                                  NULL, NULL);
	if (err == CL_SUCCESS)
		err = clEnqueueWriteBuffer(c->q, k->B.m, CL_TRUE, 0, sizeof(float) * nb, k->b, 0, NULL,
		                           NULL);
	return err == CL_SUCCESS ? SB_OK : sb_cl_status(c->dev, err, what);
}

sb_status sb_cl_check_result(sb_bdev *c, cl_mem m, size_t n, float *dst, const char *what)
{
	sb_status st = c->st;
	if (st != SB_OK && st != SB_ERR_DEVICE_LOST) {
		c->st = SB_OK;
		return SB_ERR_DEVICE;
	}
	if (st != SB_OK)
		return st;
	const cl_int err = clEnqueueReadBuffer(c->q, m, CL_TRUE, 0, sizeof(float) * n, dst, 0, NULL,
	                                       NULL);
	return err == CL_SUCCESS ? SB_OK : sb_cl_status(c->dev, err, what);
}

void sb_cl_check_close(sb_cl_check *k)
{
	if (k->A.m)
		clReleaseMemObject(k->A.m);
	if (k->B.m)
		clReleaseMemObject(k->B.m);
	if (k->C.m)
		clReleaseMemObject(k->C.m);
	free(k->a);
	free(k->b);
	free(k->c);
	memset(k, 0, sizeof *k);
}

/* Before the own or the tiled kernel runs anything on a device that measures its paths (where
 * it may never have run: an AMD or Intel GPU), its products against the host's, in double
 * precision: both layouts of B, rows 16-byte aligned and not (the float4 and the plain reads
 * and writes), each on a small product (the tiled kernel's small tiling) and on a batch of two
 * accumulating into C (beta) with a large tile for every compute unit (its large tiling); and
 * every float of C outside the products unchanged. SB_OK with *worst the largest relative L2
 * error; SB_ERR_DEVICE when the driver refused a launch; a failure of the device's own (memory,
 * a lost device) is also kept in c. Waits for the device. */
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
	for (int cs = 0; st == SB_OK && cs < 8; cs++) {
		const int big = cs >= 4, tb = cs & 1, al = !(cs & 2);
		const int m = big ? BM : M, n = big ? BN : N, kk = big ? BK : K, batch = big ? 2 : 1;
		const int pad = al ? (big ? 0 : PAD) : 1;
		const int lda = kk + pad, ldb = (tb ? kk : n) + pad, ldc = n + pad;
		const size_t off = al ? 0 : 1;
		const long sa = (long)m * lda, sb = (long)kk * ldb, sc = (long)m * ldc;
		const float alpha = big ? 0.5f : 1.f, beta = big ? 0.5f : 0.f;
		const cl_int err = clEnqueueWriteBuffer(c->q, bc.m, CL_TRUE, 0, sizeof(float) * nc, h0,
		                                        0, NULL, NULL);
		if (err != CL_SUCCESS) {
			st = sb_cl_status(c->dev, err, "uploading a product path's check");
			break;
		}
		if (gemm_path(c, k, m, n, kk, alpha, (sb_dv){&ba, off}, lda, sa, (sb_dv){&bb, off}, ldb,
		              sb, tb, beta, (sb_dv){&bc, off}, ldc, sc, batch) != SB_OK)
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

/* Under measuring (cl_gemm_pick.h): the path this product takes, after the timed runs of the
 * candidates its shape still needs, on the measuring queue into a scratch output. */
static sb_cl_gemm_kind measured_path(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A,
                                     int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                                     float beta, sb_dv C, int ldc, long sc, int batch)
{
	sb_cl_pick *p = c->pick;
	const sb_cl_shape s = {{M, N, K, tb, batch, sb_cl_gemm_flags(A, lda, sa, B, ldb, sb, C, ldc,
	                                                             sc)}};
	int want = 0, slot = -1;
	const int may_time = !c->profiling && !c->timing;
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
	sb_dv S;
	cl_command_queue tq = sb_cl_pick_begin(c, p, slot, floats, &S);
	if (!tq)
		return k;
	S.off = lead;
	cl_command_queue q = c->q;
	c->q = tq;
	for (int j = 0; j < 3 && c->st == SB_OK; j++) {
		const sb_cl_gemm_kind t = (sb_cl_gemm_kind)j;
		if (!(want >> j & 1))
			continue;
		sb_cl_pick_mark(p);
		const sb_status st = gemm_path(c, t, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, S,
		                               ldc, sc, batch);
		if (st == SB_ERR_UNSUPPORTED) {
			sb_cl_pick_drop(p, t); /* CLBlast refused the shape (logged) */
		} else if (c->st != SB_OK) {
			/* a timed run that could not be enqueued (memory for CLBlast's own buffers beside
			 * the scratch output, say) is this shape's loss of that path, not the pass's; a
			 * lost device is the pass's too */
			sb_log(c->log, SB_LOG_INFO, "a timed %s product failed (%s): measured without it",
			       sb_cl_gemm_name(t), sb_status_str(c->st));
			if (c->st != SB_ERR_DEVICE_LOST)
				c->st = SB_OK;
			sb_cl_pick_failed(p, slot, t);
		} else {
			sb_cl_pick_timed(p, slot, t);
		}
	}
	c->q = q;
	sb_cl_pick_end(c, p);
	return (sb_cl_gemm_kind)sb_cl_pick_path(p, &s, 0, &want, &slot); /* one may be dropped */
}

static void gemm_one(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                     sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                     int batch)
{
	if (c->want_bf16 && !c->mma_tried) {
		const sb_status st = bf16_products(c);
		if (st != SB_OK) {
			c->st = st;
			return;
		}
	}
	if (c->want_bf16 && c->mma) {
		sb_cl_mma_gemm(c, c->mma, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		               batch);
		return;
	}
	if (c->gemm == SB_CL_GEMM_TF32) {
		sb_cl_mma_gemm(c, c->tf32, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		               batch);
		return;
	}
	const sb_cl_gemm_kind k = c->pick ? measured_path(c, M, N, K, alpha, A, lda, sa, B, ldb, sb,
	                                                  tb, beta, C, ldc, sc, batch)
	                                  : c->gemm;
	if (c->st != SB_OK ||
	    gemm_path(c, k, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch) ==
	        SB_OK)
		return;
	/* CLBlast refused (logged): the own kernel from now on, still on this device; under
	 * measuring, the next default of the paths left (checked at their first use) */
	c->gemm = SB_CL_GEMM_OWN;
	if (c->pick) {
		sb_cl_pick_drop(c->pick, SB_CL_GEMM_CLBLAST);
		c->gemm = measured_path(c, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc,
		                        batch);
		if (c->st != SB_OK)
			return;
	}
	sb_log(c->log, SB_LOG_WARNING, "matrix products through the %s from now on",
	       sb_cl_gemm_name(c->gemm));
	gemm_path(c, c->gemm, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch);
}

/* the second batch level: one strided-batched product per item of it */
static void op_gemm(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                    sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                    int batch, int batch2, long sa2, long sb2, long sc2)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0 || c->st != SB_OK)
		return;
	if (sb_cl_ops_ready(c) != SB_OK)
		return;
	for (int j = 0; j < batch2 && c->st == SB_OK; j++)
		gemm_one(c, M, N, K, alpha, sb_dv_at(A, (size_t)(j * sa2)), lda, sa,
		         sb_dv_at(B, (size_t)(j * sb2)), ldb, sb, tb, beta,
		         sb_dv_at(C, (size_t)(j * sc2)), ldc, sc, batch);
}

static void op_bias_act(sb_bdev *c, sb_dv x, size_t n, int C, int T, sb_dv b, int act)
{
	kargs a = args(c, K_BIAS_ACT);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, C);
	a_i32(&a, T);
	a_db(&a, b);
	a_i32(&a, act);
	sb_cl_run(&a, 1, &n, NULL);
}

static void op_fill_bias(sb_bdev *c, sb_dv x, size_t n, int C, int T, sb_dv b)
{
	kargs a = args(c, K_FILL_BIAS);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, C);
	a_i32(&a, T);
	a_db(&a, b);
	sb_cl_run(&a, 1, &n, NULL);
}

static void op_bias_cols(sb_bdev *c, sb_dv x, size_t n, int cols, sb_dv b, int act)
{
	kargs a = args(c, K_BIAS_COLS);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, cols);
	a_db(&a, b);
	a_i32(&a, act);
	sb_cl_run(&a, 1, &n, NULL);
}

static void op_add(sb_bdev *c, sb_dv x, sb_dv y, size_t n)
{
	kargs a = args(c, K_ADD);
	a_db(&a, x);
	a_db(&a, y);
	a_u64(&a, n);
	sb_cl_run(&a, 1, &n, NULL);
}

static void op_glu(sb_bdev *c, sb_dv z, long zstride, sb_dv out, long ostride, int CT,
                   int batch)
{
	kargs a = args(c, K_GLU);
	a_db(&a, z);
	a_i64(&a, zstride);
	a_db(&a, out);
	a_i64(&a, ostride);
	a_i32(&a, CT);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}

static void op_glu_add(sb_bdev *c, sb_dv x, long xstride, sb_dv z, long zstride, int CT,
                       int T, sb_dv scale, int batch)
{
	kargs a = args(c, K_GLU_ADD);
	a_db(&a, x);
	a_i64(&a, xstride);
	a_db(&a, z);
	a_i64(&a, zstride);
	a_i32(&a, CT);
	a_i32(&a, T);
	a_db(&a, scale);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}

/* the stats buffer holds mean and rstd for every batch item of the current norm */
static void need_stats(sb_bdev *c, size_t items)
{
	if (c->st != SB_OK || c->stats_n >= items)
		return;
	if (c->stats)
		clReleaseMemObject(c->stats);
	c->stats = NULL;
	c->stats_n = 0;
	const size_t n = items < 4096 ? 4096 : items;
	sb_status st = sb_cl_device_alloc(c->dev, sizeof(float) * 2 * n, CL_MEM_READ_WRITE, &c->stats);
	if (st != SB_OK)
		c->st = st;
	else
		c->stats_n = n;
}

/* Slices an item's statistics are split into: about 16 values a work-item, enough
 * work-groups to fill a large GPU, at most 1024 (norm_final merges them). */
static int norm_slices(const sb_bdev *c, long n)
{
	const long per = 16 * (long)c->red_wg;
	const long g = (n + per - 1) / per;
	return g < 1 ? 1 : g > 1024 ? 1024 : (int)g;
}

/* norm_part: G slices of each batch item's count, mean and M2 in c->parts; returns G */
int sb_cl_part_stats(sb_bdev *c, sb_dv x, long stride, long n, int batch)
{
	const int G = norm_slices(c, n);
	const size_t parts = (size_t)batch * (size_t)G;
	if (c->st == SB_OK && c->parts_n < parts) {
		if (c->parts)
			clReleaseMemObject(c->parts);
		c->parts = NULL;
		c->parts_n = 0;
		const size_t want = parts < 4096 ? 4096 : parts;
		sb_status st = sb_cl_device_alloc(c->dev, sizeof(float) * 3 * want, CL_MEM_READ_WRITE,
		                                  &c->parts);
		if (st != SB_OK)
			c->st = st;
		else
			c->parts_n = want;
	}
	kargs a = args(c, K_NORM_PART);
	a_db(&a, x);
	a_i64(&a, stride);
	a_i64(&a, n);
	a_i32(&a, G);
	a_mem(&a, c->parts);
	const size_t g = parts * c->red_wg, l = c->red_wg;
	sb_cl_run(&a, 1, &g, &l);
	return G;
}

static void stats(sb_bdev *c, sb_dv x, long stride, long n, int batch)
{
	need_stats(c, (size_t)batch);
	const int G = sb_cl_part_stats(c, x, stride, n, batch);
	const size_t l = c->red_wg;
	kargs f = args(c, K_NORM_FINAL);
	a_mem(&f, c->parts);
	a_i32(&f, G);
	a_mem(&f, c->stats);
	const size_t gf = (size_t)batch * c->red_wg;
	sb_cl_run(&f, 1, &gf, &l);
}

static void op_groupnorm(sb_bdev *c, sb_dv x, long stride, int C, int T, int batch,
                         sb_dv w, sb_dv b, int act)
{
	const int CT = C * T;
	stats(c, x, stride, CT, batch);
	kargs a = args(c, K_GN_APPLY);
	a_db(&a, x);
	a_i64(&a, stride);
	a_i32(&a, CT);
	a_i32(&a, T);
	a_mem(&a, c->stats);
	a_db(&a, w);
	a_db(&a, b);
	a_i32(&a, act);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}

static void op_groupnorm_tokens(sb_bdev *c, sb_dv x, size_t n, int D, sb_dv w, sb_dv b)
{
	const size_t total = n * (size_t)D;
	stats(c, x, 0, (long)total, 1);
	kargs a = args(c, K_GN_APPLY_TOKENS);
	a_db(&a, x);
	a_u64(&a, total);
	a_i32(&a, D);
	a_mem(&a, c->stats);
	a_db(&a, w);
	a_db(&a, b);
	sb_cl_run(&a, 1, &total, NULL);
}

static void op_layernorm(sb_bdev *c, sb_dv x, sb_dv out, size_t n, int D, sb_dv w, sb_dv b)
{
	kargs a = args(c, K_LAYERNORM);
	a_db(&a, x);
	a_db(&a, out);
	a_i32(&a, D);
	a_db(&a, w);
	a_db(&a, b);
	const size_t g = n * c->red_wg, l = c->red_wg;
	sb_cl_run(&a, 1, &g, &l);
}

static void op_softmax(sb_bdev *c, sb_dv x, size_t rows, int n)
{
	kargs a = args(c, K_SOFTMAX);
	a_db(&a, x);
	a_i32(&a, n);
	const size_t g = rows * c->red_wg, l = c->red_wg;
	sb_cl_run(&a, 1, &g, &l);
}

static void op_scale_add(sb_bdev *c, sb_dv x, sb_dv y, sb_dv g, size_t n, int D)
{
	kargs a = args(c, K_SCALE_ADD);
	a_db(&a, x);
	a_db(&a, y);
	a_db(&a, g);
	a_u64(&a, n);
	a_i32(&a, D);
	sb_cl_run(&a, 1, &n, NULL);
}

static void op_transpose(sb_bdev *c, sb_dv in, sb_dv out, int R, int Cc)
{
	kargs a = args(c, K_TRANSPOSE);
	a_db(&a, in);
	a_db(&a, out);
	a_i32(&a, R);
	a_i32(&a, Cc);
	const size_t g[2] = {(size_t)Cc, (size_t)R}, l[2] = {16, 16};
	sb_cl_run(&a, 2, g, l);
}

static void op_rows_tokens(sb_bdev *c, sb_dv x, sb_dv out, int Fr, int C, int T, int back)
{
	kargs a = args(c, back ? K_TOKENS_TO_FTEN : K_FTEN_TO_TOKENS);
	a_db(&a, x);
	a_db(&a, out);
	a_i32(&a, Fr);
	a_i32(&a, C);
	a_i32(&a, T);
	const size_t g[3] = {(size_t)T, (size_t)C, (size_t)Fr}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

static void op_add_row_channel(sb_bdev *c, sb_dv x, int F, int C, int T, sb_dv emb)
{
	kargs a = args(c, K_ADD_FREQ_EMB);
	a_db(&a, x);
	a_i32(&a, C);
	a_i32(&a, T);
	a_db(&a, emb);
	const size_t g[3] = {(size_t)T, (size_t)C, (size_t)F}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

static void op_im2col(sb_bdev *c, sb_dv x, long lin, int cin, sb_dv col, long lout)
{
	kargs a = args(c, K_IM2COL_TIME);
	a_db(&a, x);
	a_i64(&a, lin);
	a_db(&a, col);
	a_i64(&a, lout);
	const size_t g[2] = {(size_t)lout, (size_t)cin * 8}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}

static void op_convtr(sb_bdev *c, sb_dv p, long lin, int cout, long length, sb_dv b,
                      int act, sb_dv out)
{
	kargs a = args(c, K_CONVTR_GATHER);
	a_db(&a, p);
	a_i64(&a, lin);
	a_i32(&a, cout);
	a_i64(&a, length);
	a_db(&a, b);
	a_i32(&a, act);
	a_db(&a, out);
	const size_t g[2] = {(size_t)length, (size_t)cout}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}

static void op_zero(sb_bdev *c, sb_dv x, size_t n)
{
	if (c->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(c);
	const cl_float zero = 0.f;
	const cl_int err = clEnqueueFillBuffer(c->q, x.buf->m, &zero, sizeof zero,
	                                       sizeof(float) * x.off, sizeof(float) * n, 0, NULL,
	                                       NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "clearing a buffer");
	sb_cl_prof_end(c, P_ZERO, t0, 0.0);
}

static void op_copy(sb_bdev *c, sb_dv dst, sb_dv src, size_t n)
{
	if (c->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(c);
	const cl_int err = clEnqueueCopyBuffer(c->q, src.buf->m, dst.buf->m, sizeof(float) * src.off,
	                                       sizeof(float) * dst.off, sizeof(float) * n, 0, NULL,
	                                       NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "copying");
	sb_cl_prof_end(c, P_COPY, t0, 0.0);
}

sb_status sb_cl_ops_ready(sb_bdev *c)
{
	if (c->built)
		return c->prog ? SB_OK : SB_ERR_DEVICE;
	c->built = 1;
	cl_device_id id = sb_cl_device_id(c->dev);
	size_t max_wg = 256;
	clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
	/* a reduction's work-group: 256 on a GPU; 32 on a CPU driver (PoCL), which runs a
	 * work-group's items as loops between barriers, so each halving step costs a pass over
	 * the group: softmax and LayerNorm 4 to 25 times faster there (bench/demucs/README.md) */
	cl_device_type type = 0;
	clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
	c->red_wg = type & CL_DEVICE_TYPE_CPU ? 32 : 256;
	const char *rw = getenv("SB_CL_RED_WG"); /* a bench's override */
	if (rw && atoi(rw) >= 16 && atoi(rw) <= 256 && !(atoi(rw) & (atoi(rw) - 1)))
		c->red_wg = (size_t)atoi(rw);
	while (c->red_wg > max_wg)
		c->red_wg /= 2;
	if (max_wg < 256) {
		sb_log(c->log, SB_LOG_ERROR, "the device's work-groups (%zu) are smaller than the "
		       "16 x 16 of the matrix product", max_wg);
		sb_cl_fail(c, SB_ERR_DEVICE);
		return SB_ERR_DEVICE;
	}
	char opts[64];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DRED_WG=%zu", c->red_wg);
	cl_program prog = NULL;
	sb_status st = sb_cl_device_build(c->dev, "ops", (const char *)ops_cl, opts, &prog, NULL);
	for (int i = 0; st == SB_OK && i < K_COUNT; i++)
		st = sb_cl_device_kernel(c->dev, prog, sb_cl_op_names[i], &c->k[i]);
	if (st != SB_OK) {
		for (int i = 0; i < K_COUNT; i++)
			if (c->k[i])
				clReleaseKernel(c->k[i]);
		memset(c->k, 0, sizeof c->k);
		if (prog)
			clReleaseProgram(prog);
		sb_cl_fail(c, st);
		return st;
	}
	c->prog = prog;
	/* attention in one pass where it was measured faster (bench/gpu/README.md): on PoCL's CPU
	 * device (a RoFormer chunk 11.4 -> 8.8 s, an HTDemucs segment 25.4 -> 22.4 s) and on
	 * NVIDIA's driver (H100: an ep_317 chunk 0.479 -> 0.405 s, an HTDemucs segment 0.036 s
	 * either way); any other driver keeps the products' way until bench/gpu has measured it
	 * there. Its key tiles go through local memory on a GPU, where they are (the caches) on a
	 * CPU driver. */
	const sb_device_props *dp = sb_cl_device_props(c->dev);
	const int pocl_cpu = strstr(dp->platform, "Portable Computing Language") != NULL &&
	                     (type & CL_DEVICE_TYPE_CPU);
	const int nvidia_gpu = strstr(dp->platform, "NVIDIA") != NULL && (type & CL_DEVICE_TYPE_GPU);
	/* SB_CL_ATTENTION: "split" or "fused" (a bench's choice), "auto" (measured per shape on
	 * any device); unset, measured on a GPU or an accelerator, the way above meanwhile */
	const char *att = getenv("SB_CL_ATTENTION");
	c->att_fused = att && !strcmp(att, "fused") ? 1 : att && !strcmp(att, "split") ? 0
	               : pocl_cpu || nvidia_gpu;
	const int att_measure = att && *att ? !strcmp(att, "auto")
	                        : dp->type == SB_DEV_GPU_DISCRETE ||
	                          dp->type == SB_DEV_GPU_INTEGRATED || dp->type == SB_DEV_ACCELERATOR;
	c->att_local = type & CL_DEVICE_TYPE_CPU ? 0 : 1;
	const char *al = getenv("SB_CL_ATT_LOCAL"); /* a test's override */
	if (al && (!strcmp(al, "0") || !strcmp(al, "1")))
		c->att_local = atoi(al);
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
		                     clblast ? SB_CL_GEMM_CLBLAST : SB_CL_GEMM_OWN, (const char *)ops_cl,
		                     &c->pick);
		if (st != SB_OK) {
			sb_cl_fail(c, st);
			return st;
		}
	}
	if (att_measure) {
		/* the one-pass kernels and what the two products' way runs besides (the softmax,
		 * the own kernel) name the file */
		const size_t na = strlen((const char *)attention_cl), no = strlen((const char *)ops_cl);
		char *src = malloc(na + no + 1);
		st = src ? SB_OK : SB_ERR_NOMEM;
		if (src) {
			memcpy(src, attention_cl, na);
			memcpy(src + na, ops_cl, no + 1);
			st = sb_cl_pick_open(c, SB_CL_PICK_ATTENTION, 1 << SB_CL_ATT_SPLIT |
			                     1 << SB_CL_ATT_FUSED, c->att_fused ? SB_CL_ATT_FUSED
			                     : SB_CL_ATT_SPLIT, src, &c->att_pick);
			free(src);
		}
		if (st != SB_OK) {
			sb_cl_fail(c, st);
			return st;
		}
	}
	sb_log(c->log, SB_LOG_INFO, "matrix products on %s through %s; attention %s",
	       sb_cl_device_props(c->dev)->label, c->pick ? sb_cl_pick_describe(c->pick)
	       : c->tiled ? sb_cl_tiled_describe(c->tiled)
	       : c->tf32 ? sb_cl_mma_describe(c->tf32) : sb_cl_gemm_name(c->gemm),
	       c->att_pick ? sb_cl_pick_describe(c->att_pick)
	       : c->att_fused ? "in one pass" : "as two products around a softmax");
	return SB_OK;
}

/* attention.cl's program and kernels, built at the first call; 0 when they do not build on
 * the device (logged): its attention takes the products' way from then on */
static int attention_ready(sb_bdev *c)
{
	if (c->att_prog)
		return 1;
	char opts[64];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_LOCAL=%d", c->att_local);
	sb_status st = sb_cl_device_build(c->dev, "attention", (const char *)attention_cl, opts,
	                                  &c->att_prog, NULL);
	for (int i = 0; i < 3 && st == SB_OK; i++)
		st = sb_cl_device_kernel(c->dev, c->att_prog, sb_cl_op_names[K_ATTENTION_16 + i],
		                         &c->att_k[i]);
	if (st == SB_OK)
		return 1;
	for (int i = 0; i < 3; i++)
		if (c->att_k[i])
			clReleaseKernel(c->att_k[i]);
	memset(c->att_k, 0, sizeof c->att_k);
	if (c->att_prog)
		clReleaseProgram(c->att_prog);
	c->att_prog = NULL;
	c->att_fused = 0;
	if (c->att_pick)
		sb_cl_pick_drop(c->att_pick, SB_CL_ATT_FUSED);
	sb_log(c->log, SB_LOG_WARNING, "attention in one pass does not build on %s: as two "
	       "products around a softmax instead", sb_cl_device_props(c->dev)->label);
	return 0;
}

/* the arguments of attention.cl's and attention_mma.cl's kernels (the same list) */
static void attention_args(kargs *a, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq, int nk,
                           int heads, int hd, float scale, sb_dv o, int ldo, int batch, long sq,
                           long skv, long so)
{
	a_db(a, q);
	a_i32(a, ldq);
	a_i64(a, sq);
	a_db(a, k);
	a_db(a, v);
	a_i32(a, ldkv);
	a_i64(a, skv);
	a_i32(a, nq);
	a_i32(a, nk);
	a_i32(a, hd);
	a_f32(a, scale);
	a_db(a, o);
	a_i32(a, ldo);
	a_i64(a, so);
	a->flops = 4.0 * nq * nk * hd * heads * batch;
}

static void attention_mma(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                          int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                          long sq, long skv, long so);

static void attention_fused(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so);

/* One attention of 70 query rows over 100 keys (two blocks, ragged) on the device against the
 * host, as the products are checked before first use (cl_gemm_mma.c): in bf16 on the tensor
 * cores ('mma': the kernel's shuffles and its scores turned into the next product's fragments
 * are what this adds to the products' check), or in fp32 in one pass (attention.cl, on a device
 * that measures it against the products' way, which may never have run it). *err: the
 * relative error (bf16: the rounding of the weights at each block's maximum, about 1e-3). */
static sb_status attention_check(sb_bdev *c, int hd, int mma, double *err)
{
	enum { NQ = 70, NK = 100 };
	const size_t nqf = (size_t)NQ * hd, nkf = (size_t)NK * hd;
	sb_cl_check ck; /* A: the queries, B: the keys then the values, C: the output */
	sb_status st = sb_cl_check_open(c, nqf, 2 * nkf, nqf, 77u + (unsigned)hd,
	                                "uploading the attention check", &ck);
	double *p = malloc(sizeof(double) * NK);
	if (st == SB_OK && !p)
		st = SB_ERR_NOMEM;
	const float *q = ck.a, *kv = ck.b;
	float *o = ck.c;
	sb_bbuf bq = ck.A, bk = ck.B, bo = ck.C;
	const float scale = 1.f / sqrtf((float)hd);
	if (st == SB_OK) {
		(mma ? attention_mma : attention_fused)(c, (sb_dv){&bq, 0}, hd, (sb_dv){&bk, 0},
		                                        (sb_dv){&bk, nkf}, hd, NQ, NK, 1, hd, scale,
		                                        (sb_dv){&bo, 0}, hd, 1, 0, 0, 0);
		st = sb_cl_check_result(c, bo.m, nqf, o, "reading the attention check");
		if (st == SB_OK && !mma && sb_cl_device_fault_tune_wrong(c->dev, 4 + SB_CL_ATT_FUSED))
			o[hd + 3] += 1.f; /* opencl:N:tune-wrong:fused */
	}
	/* the reference rounds the products' inputs as the kernel does (bf16), or not at all */
#define ATT_IN(x) (mma ? sb_cl_mma_round((x), 0) : (x))
	double d2 = 0, w2 = 0;
	for (int i = 0; st == SB_OK && i < NQ; i++) {
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j < NK; j++) {
			double s = 0;
			for (int x = 0; x < hd; x++)
				s += (double)ATT_IN(scale * q[i * hd + x]) * ATT_IN(kv[j * hd + x]);
			p[j] = s;
			mx = s > mx ? s : mx;
		}
		for (int j = 0; j < NK; j++)
			sum += (p[j] = exp(p[j] - mx));
		for (int x = 0; x < hd; x++) {
			double w = 0;
			for (int j = 0; j < NK; j++)
				w += (mma ? sb_cl_mma_round((float)p[j], 0) : p[j]) *
				     (double)ATT_IN(kv[nkf + j * hd + x]);
			w /= sum;
			d2 += (o[i * hd + x] - w) * (o[i * hd + x] - w);
			w2 += w * w;
		}
	}
#undef ATT_IN
	*err = st == SB_OK ? sqrt(d2 / (w2 > 0 ? w2 : 1)) : 0;
	if (st == SB_OK && !(*err < (mma ? 1e-2 : 1e-5)))
		st = SB_ERR_DEVICE;
	sb_cl_check_close(&ck);
	free(p);
	return st;
}

/* attention_mma.cl's program for heads of hd values (16, 32, 64), built and checked at its
 * first use on the device; 0 when it does not build there or computes something else (logged;
 * the fp32 kernel runs instead) */
static int attention_mma_ready(sb_bdev *c, int hd)
{
	const int w = hd == 16 ? 0 : hd == 32 ? 1 : 2;
	if (c->attm_k[w] || c->attm_tried[w])
		return c->attm_k[w] != NULL;
	c->attm_tried[w] = 1;
	char opts[128];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_HD=%d %s", hd, sb_cl_mma_options(c->mma));
	sb_status st = sb_cl_device_build(c->dev, "attention_mma", (const char *)attention_mma_cl,
	                                  opts, &c->attm_prog[w], NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, c->attm_prog[w], "attention_mma", &c->attm_k[w]);
	double err = 0;
	if (st == SB_OK && (st = attention_check(c, hd, 1, &err)) == SB_OK)
		return 1;
	if (c->attm_k[w])
		clReleaseKernel(c->attm_k[w]);
	c->attm_k[w] = NULL;
	if (c->attm_prog[w])
		clReleaseProgram(c->attm_prog[w]);
	c->attm_prog[w] = NULL;
	if (st == SB_ERR_NOMEM || st == SB_ERR_DEVICE_OOM || st == SB_ERR_DEVICE_LOST) {
		c->attm_tried[w] = 0; /* memory that was short once: tried again next time */
		c->st = st;
		return 0;
	}
	sb_log(c->log, SB_LOG_WARNING, "bf16 attention on the tensor cores %s on %s: in fp32 "
	       "instead", err > 0 ? "is wrong (relative error against the host's above 1e-2)"
	                          : "does not build or its launch is refused",
	       sb_cl_device_props(c->dev)->label);
	return 0;
}

/* Attention in one launch on the tensor cores, bf16 (attention_mma.cl), heads of 16, 32, 64 */
static void attention_mma(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                          int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                          long sq, long skv, long so)
{
	kargs a = {c, c->attm_k[hd == 16 ? 0 : hd == 32 ? 1 : 2], K_ATTENTION_MMA, 0.0, 0,
	           CL_SUCCESS};
	attention_args(&a, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
	const size_t g[3] = {(size_t)(nq + 63) / 64 * 128, (size_t)heads, (size_t)batch},
	             l[3] = {128, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

/* Attention in one launch for heads of up to 64 values (attention.cl: the scores stay in
 * registers), the kernel for the smallest head size that holds hd. */
static void attention_fused(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so)
{
	const int which = hd <= 16 ? 0 : hd <= 32 ? 1 : 2;
	kargs a = {c, c->att_k[which], K_ATTENTION_16 + which, 0.0, 0, CL_SUCCESS};
	attention_args(&a, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
	const size_t g[3] = {(size_t)nq, (size_t)heads, (size_t)batch}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

/* Attention as two strided-batched products around a softmax, every head of a group of items
 * at once (the scores, heads x nq x nk floats an item, in a buffer the device keeps for it,
 * never more than SCORES_MAX floats: long sequences go a few items at a time): three launches
 * a group. */
#define SCORES_MAX ((size_t)32 << 20)

static void attention_split(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so)
{
	const size_t item = (size_t)heads * nq * nk;
	int group = item >= SCORES_MAX ? 1 : (int)(SCORES_MAX / item);
	group = group < batch ? group : batch;
	const size_t need = item * (size_t)group;
	if (c->att_n < need) {
		if (c->att)
			clReleaseMemObject(c->att);
		c->att = NULL;
		c->att_n = 0;
		sb_status st = sb_cl_device_alloc(c->dev, sizeof(float) * need, CL_MEM_READ_WRITE,
		                                  &c->att);
		if (st != SB_OK) {
			c->st = st;
			return;
		}
		c->att_n = need;
	}
	sb_bbuf sbuf = {c->att, need};
	const sb_dv s = {&sbuf, 0};
	for (int b0 = 0; b0 < batch; b0 += group) {
		const int nb = batch - b0 < group ? batch - b0 : group;
		const sb_dv qb = sb_dv_at(q, (size_t)b0 * sq), kb = sb_dv_at(k, (size_t)b0 * skv),
		            vb = sb_dv_at(v, (size_t)b0 * skv), ob = sb_dv_at(o, (size_t)b0 * so);
		const long hs = (long)nq * nk;
		if (nb <= heads) { /* a launch per item, its heads batched */
			op_gemm(c, nq, nk, hd, scale, qb, ldq, hd, kb, ldkv, hd, 1, 0.f, s, nk, hs, heads, nb,
			        sq, skv, (long)item);
			op_softmax(c, s, (size_t)heads * nq * nb, nk);
			op_gemm(c, nq, hd, nk, 1.f, s, nk, hs, vb, ldkv, hd, 0, 0.f, ob, ldo, hd, heads, nb,
			        (long)item, skv, so);
			continue;
		}
		/* many short sequences (an axial transformer's): a launch per head, its items batched */
		op_gemm(c, nq, nk, hd, scale, qb, ldq, sq, kb, ldkv, skv, 1, 0.f, s, nk, (long)item, nb,
		        heads, hd, hd, hs);
		op_softmax(c, s, (size_t)heads * nq * nb, nk);
		op_gemm(c, nq, hd, nk, 1.f, s, nk, (long)item, vb, ldkv, skv, 0, 0.f, ob, ldo, so, nb,
		        heads, hs, hd, hd);
	}
}

/* Under measuring, attention in one pass serves a device only once it has passed its check
 * there (each of its kernels against the host, in double precision; one wait): 1 right, 0 not
 * (warned once; the caller leaves it out), -1 not known (c->st: the device failed meanwhile,
 * asked again next pass). */
static int fused_usable(sb_bdev *c)
{
	if (c->att_checked)
		return c->att_checked > 0;
	if (!attention_ready(c)) { /* logged, and left out of the measured ways */
		c->att_checked = -1;
		return 0;
	}
	const double t0 = sb_now();
	double worst = 0, e = 0;
	sb_status st = SB_OK;
	for (int hd = 16; hd <= 64 && st == SB_OK; hd *= 2) { /* attention_16, _32, _64 */
		st = attention_check(c, hd, 0, &e);
		worst = e > worst ? e : worst;
	}
	if (st == SB_ERR_NOMEM || st == SB_ERR_DEVICE_OOM || st == SB_ERR_DEVICE_LOST ||
	    c->st != SB_OK) {
		sb_cl_fail(c, st != SB_OK ? st : c->st); /* the device's state, not the kernel's */
		return -1;
	}
	const char *label = sb_cl_device_props(c->dev)->label;
	c->att_checked = st == SB_OK ? 1 : -1;
	if (st == SB_OK)
		sb_log(c->log, SB_LOG_INFO, "attention in one pass passed its check on %s (relative "
		       "error %.1e, %.2f s)", label, worst, sb_now() - t0);
	else if (worst > 0)
		sb_log(c->log, SB_LOG_WARNING, "attention in one pass gave wrong results on %s "
		       "(relative error %.1e against the host's): as two products around a softmax",
		       label, worst);
	else
		sb_log(c->log, SB_LOG_WARNING, "attention in one pass cannot run on %s: as two "
		       "products around a softmax", label);
	return c->att_checked > 0;
}

/* Under measuring (cl_gemm_pick.h): attention's way for this shape, after the timed runs its
 * shape still needs, on the measuring queue into a scratch output. The two products' way runs
 * its products through their paths as they stand, timing none of them (c->timing). */
static int measured_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                              int nk, int heads, int hd, float scale, sb_dv o, int ldo,
                              int batch, long sq, long skv, long so)
{
	sb_cl_pick *p = c->att_pick;
	const sb_cl_shape s = {{nq, nk, hd, heads, batch, sb_cl_gemm_flags(q, ldq, sq, k, ldkv, skv,
	                                                                   o, ldo, so)}};
	const int may_time = !c->profiling && !c->timing;
	int want = 0, slot = -1;
	int way = sb_cl_pick_path(p, &s, may_time, &want, &slot);
	if (way == SB_CL_ATT_FUSED || want >> SB_CL_ATT_FUSED & 1) {
		const int ok = fused_usable(c);
		if (ok < 0)
			return way; /* the pass has failed */
		if (!ok) { /* dropped here, or already when it did not build (attention_ready) */
			sb_cl_pick_drop(p, SB_CL_ATT_FUSED);
			way = sb_cl_pick_path(p, &s, may_time, &want, &slot);
			want &= ~(1 << SB_CL_ATT_FUSED);
		}
	}
	if (!want || c->st != SB_OK)
		return way;
	/* O's extent: the scratch output keeps its strides and its alignment */
	const size_t lead = o.off % 4;
	const size_t floats = lead + (size_t)(batch - 1) * (size_t)so + (size_t)(nq - 1) * ldo +
	                      (size_t)heads * hd;
	sb_dv S;
	cl_command_queue tq = sb_cl_pick_begin(c, p, slot, floats, &S);
	if (!tq)
		return way;
	S.off = lead;
	cl_command_queue main = c->q;
	c->q = tq;
	c->timing = 1;
	for (int j = 0; j < 2 && c->st == SB_OK; j++) {
		if (!(want >> j & 1))
			continue;
		sb_cl_pick_mark(p);
		(j == SB_CL_ATT_FUSED ? attention_fused : attention_split)(c, q, ldq, k, v, ldkv, nq, nk,
		                                                           heads, hd, scale, S, ldo,
		                                                           batch, sq, skv, so);
		if (c->st != SB_OK) { /* as a product's timed run (measured_path) */
			sb_log(c->log, SB_LOG_INFO, "a timed attention %s failed (%s): measured without it",
			       j == SB_CL_ATT_FUSED ? "in one pass" : "as products", sb_status_str(c->st));
			if (c->st != SB_ERR_DEVICE_LOST)
				c->st = SB_OK;
			sb_cl_pick_failed(p, slot, j);
		} else {
			sb_cl_pick_timed(p, slot, j);
		}
	}
	c->timing = 0;
	c->q = main;
	sb_cl_pick_end(c, p);
	return sb_cl_pick_path(p, &s, 0, &want, &slot);
}

/* Attention in one pass (attention_fused) where the device is set to or measured it faster for
 * the shape and the heads are small enough, else as two products around a softmax. */
static void op_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so)
{
	if (nq <= 0 || nk <= 0 || heads <= 0 || batch <= 0 || c->st != SB_OK ||
	    sb_cl_ops_ready(c) != SB_OK)
		return;
	/* bf16: its two products on the tensor cores, as the products' way would run them */
	if (c->want_bf16 && !c->mma_tried) {
		const sb_status st = bf16_products(c);
		if (st != SB_OK) {
			c->st = st;
			return;
		}
	}
	const int fits = hd <= 64 && hd % 4 == 0; /* attention.cl's heads */
	if (c->want_bf16 && c->mma && c->att_fused && (hd == 16 || hd == 32 || hd == 64) &&
	    attention_mma_ready(c, hd)) {
		attention_mma(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
		              so);
		return;
	}
	int fused = c->att_fused;
	if (fits && c->att_pick && !c->want_bf16) {
		fused = measured_attention(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch,
		                           sq, skv, so) == SB_CL_ATT_FUSED;
		if (c->st != SB_OK)
			return;
	}
	if (fused && fits && attention_ready(c)) {
		attention_fused(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
		                so);
		return;
	}
	attention_split(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
}

static void op_rmsnorm(sb_bdev *c, sb_dv x, sb_dv out, size_t n, int D, sb_dv w)
{
	kargs a = args(c, K_RMSNORM);
	a_db(&a, x);
	a_db(&a, out);
	a_i32(&a, D);
	a_db(&a, w);
	const size_t g = n * c->red_wg, l = c->red_wg;
	sb_cl_run(&a, 1, &g, &l);
}

static void op_rope(sb_bdev *c, sb_dv x, size_t rows, int ld, int cols, int hd, sb_dv cs,
                    int div, int mod)
{
	kargs a = args(c, K_ROPE);
	a_db(&a, x);
	a_i32(&a, ld);
	a_i32(&a, cols);
	a_i32(&a, hd);
	a_db(&a, cs);
	a_i32(&a, div > 0 ? div : 1);
	a_i32(&a, mod > 0 ? mod : 1);
	const size_t g[2] = {(size_t)cols / 2, rows}, l[2] = {64, 1};
	sb_cl_run(&a, 2, g, l);
}

static void op_head_gate(sb_bdev *c, sb_dv x, int ldx, sb_dv g, int ldg, size_t rows,
                         int heads, int hd)
{
	kargs a = args(c, K_HEAD_GATE);
	a_db(&a, x);
	a_i32(&a, ldx);
	a_db(&a, g);
	a_i32(&a, ldg);
	a_i32(&a, hd);
	a_i32(&a, heads * hd);
	const size_t gs[2] = {(size_t)heads * hd, rows}, l[2] = {64, 1};
	sb_cl_run(&a, 2, gs, l);
}

const sb_ops sb_cl_ops = {
	op_gemm, op_zero, op_copy, op_bias_act, op_fill_bias, op_bias_cols, op_add, op_scale_add,
	op_glu, op_glu_add, op_groupnorm, op_groupnorm_tokens, op_layernorm, op_softmax,
	op_transpose, op_rows_tokens, op_add_row_channel, op_im2col, op_convtr, op_attention,
	op_rmsnorm, op_rope, op_head_gate, sb_cl_op_stft, sb_cl_op_istft, sb_cl_op_moments,
	sb_cl_op_standardise, sb_cl_op_gather, sb_cl_op_cmul,
};
