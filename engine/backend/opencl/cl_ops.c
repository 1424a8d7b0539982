/* The OpenCL backend's operations (backend.h: sb_ops): one kernel of ops.cl per operation
 * (matrix products through CLBlast where it serves, cl_blas.h, or gemm.cl's tiled kernel,
 * cl_gemm_tiled.h), built through the device's kernel cache at the first operation. A failure
 * is kept in the device and every later launch is skipped until clear(), so a model's forward
 * pass reads as straight-line code and checks once at the end (and before every download, so
 * nothing reads a half-computed buffer).
 * The signal operations (STFT, standardisation, gathers) are in cl_signal.c, attention in
 * cl_attention.c.
 */
#include "backend/opencl/cl_ops.h"

#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"

#include "ops_cl.h" /* generated: the kernels' source */

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sb_cl_op_names[P_COUNT] = {
	"gemm", "add", "glu", "norm_part", "norm_final", "gn_apply", "gn_apply_tokens", "layernorm",
	"softmax_rows", "transpose", "ften_to_tokens", "tokens_to_ften", "add_freq_emb",
	"im2col_time", "convtr_gather", "rmsnorm", "rope", "head_gate", "stft_frames", "istft_frames", "istft_ola",
	"moments_final", "standardise", "gather_cols", "cmul", "bias_items", "gn_glu_add",
	"attention_16", "attention_32", "attention_64", "attention_mma", "attention_tiles",
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
static void bias_items(sb_bdev *c, int M, int N, sb_dv C, int ldc, long sc, int batch,
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

static void op_bias_cols(sb_bdev *c, sb_dv x, size_t n, int cols, sb_dv b, int act)
{
	const sb_bias e = {b, 0, 1, act};
	bias_items(c, (int)(n / (size_t)cols), cols, x, cols, 0, 1, &e);
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
		const sb_status st = sb_cl_sgemm(c->dev, c->q, M, N, K, alpha, A.buf->m, A.off, lda, sa,
		                                 B.buf->m, B.off, ldb, sb, tb, beta, C.buf->m, C.off,
		                                 ldc, sc, batch);
		sb_cl_prof_end(c, K_GEMM, t0, 2.0 * M * N * K * batch);
		if (st != SB_OK && st != SB_ERR_UNSUPPORTED)
			sb_cl_fail(c, st);
		if (st == SB_OK && e)
			bias_items(c, M, N, C, ldc, sc, batch, e);
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

void sb_cl_time_paths(sb_bdev *c, struct sb_cl_pick *p, int slot, int want, size_t lead,
                      size_t floats, sb_cl_timed_fn run, const void *op)
{
	sb_dv S;
	cl_command_queue tq = sb_cl_pick_begin(c, p, slot, floats, &S);
	if (!tq)
		return;
	S.off = lead;
	cl_command_queue q = c->q;
	c->q = tq;
	for (int j = 0; j < 3 && c->st == SB_OK; j++) {
		if (!(want >> j & 1))
			continue;
		/* a run that leaned on what is not settled yet (a product of attention's products'
		 * way still undecided, so run through the default and timed inside this run, or
		 * checked inside it) is not this path's own time */
		const long provisional = c->pick ? sb_cl_pick_provisional(c->pick) : 0;
		const int tried = c->paths_tried;
		sb_cl_pick_mark(p);
		const sb_status st = run(c, j, S, op);
		const int leaned = (c->pick && sb_cl_pick_provisional(c->pick) != provisional) ||
		                   c->paths_tried != tried;
		if (st == SB_ERR_UNSUPPORTED) {
			sb_cl_pick_drop(p, j); /* CLBlast refused the shape (logged) */
		} else if (c->st == SB_ERR_DEVICE_LOST || c->st == SB_ERR_NOMEM) {
			sb_cl_pick_discard(p, slot, j); /* the pass's failure, not the path's */
		} else if (leaned) {
			/* a failure may be the unsettled work's (memory for a default's buffers beside
			 * the scratch outputs), not the path's: tried again */
			c->st = SB_OK;
			sb_cl_pick_discard(p, slot, j);
		} else if (c->st != SB_OK) {
			/* a timed run that could not be enqueued (memory for CLBlast's own buffers beside
			 * the scratch output, say) is this shape's loss of that path, not the pass's */
			sb_log(c->log, SB_LOG_INFO, "a timed run of %s failed (%s): measured without it",
			       sb_cl_pick_name(p, j), sb_status_str(c->st));
			c->st = SB_OK;
			sb_cl_pick_failed(p, slot, j);
		} else {
			sb_cl_pick_timed(p, slot, j);
		}
	}
	c->q = q;
	sb_cl_pick_end(c, p);
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
static void op_gemm_bias(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda,
                         long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                         long sc, int batch, int batch2, long sa2, long sb2, long sc2,
                         const sb_bias *e)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0 || c->st != SB_OK)
		return;
	if (sb_cl_ops_ready(c) != SB_OK)
		return;
	for (int j = 0; j < batch2 && c->st == SB_OK; j++)
		gemm_one(c, M, N, K, alpha, sb_dv_at(A, (size_t)(j * sa2)), lda, sa,
		         sb_dv_at(B, (size_t)(j * sb2)), ldb, sb, tb, beta,
		         sb_dv_at(C, (size_t)(j * sc2)), ldc, sc, batch, e);
}

static void op_gemm(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                    sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                    int batch, int batch2, long sa2, long sb2, long sc2)
{
	op_gemm_bias(c, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch, batch2,
	             sa2, sb2, sc2, NULL);
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

/* norm_part: G slices of each batch item's count, mean and M2 in c->parts; returns G. With
 * to_stats, where one slice an item is enough (items of one slice, or enough items to fill the
 * device twice), a norm's mean and rstd go straight to c->stats: returns 0 (no norm_final). */
int sb_cl_part_stats(sb_bdev *c, sb_dv x, long stride, long n, int batch, int to_stats)
{
	const long cus = (long)sb_cl_device_props(c->dev)->compute_units;
	int G = norm_slices(c, n);
	const int final = to_stats && (G == 1 || batch >= 2 * (cus > 0 ? cus : 1));
	if (final)
		G = 1;
	if (to_stats)
		need_stats(c, (size_t)batch); /* what norm_part or norm_final writes */
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
	a_mem(&a, final ? c->stats : c->parts); /* not written unless final */
	a_i32(&a, final);
	const size_t g = parts * c->red_wg, l = c->red_wg;
	sb_cl_run(&a, 1, &g, &l);
	return final ? 0 : G;
}

static void stats(sb_bdev *c, sb_dv x, long stride, long n, int batch)
{
	const int G = sb_cl_part_stats(c, x, stride, n, batch, 1);
	if (G == 0)
		return;
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

static void op_gn_glu_add(sb_bdev *c, sb_dv x, long xs, sb_dv z, long zs, int C, int T,
                          sb_dv w, sb_dv b, sb_dv scale, int batch)
{
	const int CT = C * T;
	stats(c, z, zs, 2L * CT, batch);
	kargs a = args(c, K_GN_GLU_ADD);
	a_db(&a, x);
	a_i64(&a, xs);
	a_db(&a, z);
	a_i64(&a, zs);
	a_i32(&a, CT);
	a_i32(&a, T);
	a_mem(&a, c->stats);
	a_db(&a, w);
	a_db(&a, b);
	a_db(&a, scale);
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
	sb_cl_attention_setup(c, type); /* before anything below can fail */
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
		                     "", &c->pick);
		if (st != SB_OK) {
			sb_cl_fail(c, st);
			return st;
		}
	}
	st = sb_cl_attention_measure(c);
	if (st != SB_OK) {
		sb_cl_fail(c, st);
		return st;
	}
	sb_log(c->log, SB_LOG_INFO, "matrix products on %s through %s; attention %s",
	       sb_cl_device_props(c->dev)->label, c->pick ? sb_cl_pick_describe(c->pick)
	       : c->tiled ? sb_cl_tiled_describe(c->tiled)
	       : c->tf32 ? sb_cl_mma_describe(c->tf32) : sb_cl_gemm_name(c->gemm),
	       c->att_pick ? sb_cl_pick_describe(c->att_pick)
	       : c->att_way == SB_CL_ATT_TILES ? "by tiles"
	       : c->att_way == SB_CL_ATT_FUSED ? "in one pass" : "as two products around a softmax");
	return SB_OK;
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
	.gemm = op_gemm,
	.zero = op_zero,
	.copy = op_copy,
	.bias_cols = op_bias_cols,
	.add = op_add,
	.glu = op_glu,
	.groupnorm = op_groupnorm,
	.groupnorm_tokens = op_groupnorm_tokens,
	.layernorm = op_layernorm,
	.softmax = op_softmax,
	.transpose = op_transpose,
	.rows_tokens = op_rows_tokens,
	.add_row_channel = op_add_row_channel,
	.attention = sb_cl_op_attention,
	.rmsnorm = op_rmsnorm,
	.rope = op_rope,
	.head_gate = op_head_gate,
	.stft = sb_cl_op_stft,
	.istft = sb_cl_op_istft,
	.moments = sb_cl_op_moments,
	.standardise = sb_cl_op_standardise,
	.gather = sb_cl_op_gather,
	.cmul = sb_cl_op_cmul,
	.gemm_bias = op_gemm_bias,
	/* SB_OPS_HTDEMUCS */
	.im2col_k8s4 = op_im2col,
	.convtr_k8s4 = op_convtr,
	.gn_glu_add = op_gn_glu_add,
};
