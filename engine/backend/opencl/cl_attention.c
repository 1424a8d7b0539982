/* Attention on an OpenCL device (backend.h: attention): in one pass (attention.cl, after
 * FlashAttention: a tile's scores stay in registers with a running softmax), as two
 * strided-batched products around a softmax (the scores in a buffer the device keeps), or in
 * bf16 on NVIDIA's tensor cores (attention_mma.cl). Which of the first two runs a shape is
 * measured on a GPU (cl_gemm_pick.h), fixed per driver elsewhere; SB_CL_ATTENTION overrides.
 */
#include "backend/opencl/cl_ops.h"

#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"

#include "attention_cl.h"     /* generated: attention.cl's source */
#include "attention_mma_cl.h" /* generated: gemm_rows.cl + mma.cl + attention_mma.cl */
#include "ops_cl.h"           /* generated: the kernels' source (the softmax, the own product) */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_cl_attention_setup(sb_bdev *c, cl_device_type type)
{
	/* Until a shape is measured (or where nothing is): one pass where it was measured faster
	 * (bench/gpu/README.md), on PoCL's CPU device (a RoFormer chunk 11.4 -> 8.8 s, an HTDemucs
	 * segment 25.4 -> 22.4 s) and on NVIDIA's driver (H100: an ep_317 chunk 0.479 -> 0.405 s);
	 * the products' way on any other driver. Its key tiles go through local memory on a GPU,
	 * where they are (the caches) on a CPU driver. */
	const sb_device_props *dp = sb_cl_device_props(c->dev);
	const int pocl_cpu = strstr(dp->platform, "Portable Computing Language") != NULL &&
	                     (type & CL_DEVICE_TYPE_CPU);
	const int nvidia_gpu = strstr(dp->platform, "NVIDIA") != NULL && (type & CL_DEVICE_TYPE_GPU);
	/* SB_CL_ATTENTION: "split" or "fused" (a bench's choice), "auto" (measured per shape on
	 * any device); unset, measured on a GPU or an accelerator */
	const char *att = getenv("SB_CL_ATTENTION");
	c->att_fused = att && !strcmp(att, "fused") ? 1 : att && !strcmp(att, "split") ? 0
	               : pocl_cpu || nvidia_gpu;
	c->att_local = type & CL_DEVICE_TYPE_CPU ? 0 : 1;
	const char *al = getenv("SB_CL_ATT_LOCAL"); /* a test's override */
	if (al && (!strcmp(al, "0") || !strcmp(al, "1")))
		c->att_local = atoi(al);
}

sb_status sb_cl_attention_measure(sb_bdev *c)
{
	if (!sb_cl_measured(sb_cl_device_props(c->dev), "SB_CL_ATTENTION"))
		return SB_OK;
	/* the file is named by the one-pass kernels and what the products' way runs (the softmax,
	 * the own kernel; how the products are chosen), and by how one pass is built */
	const size_t na = strlen((const char *)attention_cl), no = strlen((const char *)ops_cl);
	char *src = malloc(na + no + 1), also[160];
	if (!src)
		return SB_ERR_NOMEM;
	memcpy(src, attention_cl, na);
	memcpy(src + na, ops_cl, no + 1);
	snprintf(also, sizeof also, "products %s, ATT_LOCAL %d",
	         c->pick ? "measured" : sb_cl_gemm_name(c->gemm), c->att_local);
	const sb_status st = sb_cl_pick_open(c, SB_CL_PICK_ATTENTION, 1 << SB_CL_ATT_SPLIT |
	                                     1 << SB_CL_ATT_FUSED, c->att_fused ? SB_CL_ATT_FUSED
	                                     : SB_CL_ATT_SPLIT, src, also, &c->att_pick);
	free(src);
	return st;
}

/* attention.cl's kernel for heads of up to 16 << w values (attention_16, _32, _64), built at
 * its first call: on a GPU from a program of its own (the head size a constant of the build,
 * so that a row stays in registers: attention.cl), on a CPU driver from one program holding
 * all three. 0 when it does not build on the device (logged): its attention takes the
 * products' way from then on, at every head size. */
static int attention_ready(sb_bdev *c, int w)
{
	if (c->att_k[w])
		return 1;
	const int p = c->att_local ? w : 0;
	char opts[64] = "-cl-std=CL1.2 -DATT_LOCAL=0";
	if (c->att_local)
		snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_LOCAL=1 -DATT_HD=%d", 16 << w);
	sb_status st = SB_OK;
	if (!c->att_prog[p])
		st = sb_cl_device_build(c->dev, "attention", (const char *)attention_cl, opts,
		                        &c->att_prog[p], NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, c->att_prog[p], sb_cl_op_names[K_ATTENTION_16 + w],
		                         &c->att_k[w]);
	if (st == SB_OK)
		return 1;
	for (int i = 0; i < 3; i++) {
		if (c->att_k[i])
			clReleaseKernel(c->att_k[i]);
		if (c->att_prog[i])
			clReleaseProgram(c->att_prog[i]);
	}
	memset(c->att_k, 0, sizeof c->att_k);
	memset(c->att_prog, 0, sizeof c->att_prog);
	c->att_fused = 0;
	if (c->att_pick)
		sb_cl_pick_drop(c->att_pick, SB_CL_ATT_FUSED);
	sb_log(c->log, SB_LOG_WARNING, "attention in one pass does not build on %s: as two "
	       "products around a softmax instead", sb_cl_device_props(c->dev)->label);
	return 0;
}

/* the kernel of attention.cl that runs heads of hd values: the smallest that holds them */
static int att_which(int hd)
{
	return hd <= 16 ? 0 : hd <= 32 ? 1 : 2;
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
	const int w = att_which(hd);
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
	kargs a = {c, c->attm_k[att_which(hd)], K_ATTENTION_MMA, 0.0, 0, CL_SUCCESS};
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
	const int which = att_which(hd);
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
	const sb_ops *op = &sb_cl_ops; /* its products and softmax, as a model calls them */
	for (int b0 = 0; b0 < batch; b0 += group) {
		const int nb = batch - b0 < group ? batch - b0 : group;
		const sb_dv qb = sb_dv_at(q, (size_t)b0 * sq), kb = sb_dv_at(k, (size_t)b0 * skv),
		            vb = sb_dv_at(v, (size_t)b0 * skv), ob = sb_dv_at(o, (size_t)b0 * so);
		const long hs = (long)nq * nk;
		if (nb <= heads) { /* a launch per item, its heads batched */
			op->gemm(c, nq, nk, hd, scale, qb, ldq, hd, kb, ldkv, hd, 1, 0.f, s, nk, hs, heads,
			         nb, sq, skv, (long)item);
			op->softmax(c, s, (size_t)heads * nq * nb, nk);
			op->gemm(c, nq, hd, nk, 1.f, s, nk, hs, vb, ldkv, hd, 0, 0.f, ob, ldo, hd, heads, nb,
			         (long)item, skv, so);
			continue;
		}
		/* many short sequences (an axial transformer's): a launch per head, its items batched */
		op->gemm(c, nq, nk, hd, scale, qb, ldq, sq, kb, ldkv, skv, 1, 0.f, s, nk, (long)item, nb,
		         heads, hd, hd, hs);
		op->softmax(c, s, (size_t)heads * nq * nb, nk);
		op->gemm(c, nq, hd, nk, 1.f, s, nk, (long)item, vb, ldkv, skv, 0, 0.f, ob, ldo, so, nb,
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
	for (int w = 0; w < 3; w++)
		if (!attention_ready(c, w)) { /* logged, and left out of the measured ways */
			c->att_checked = -1;
			return 0;
		}
	const double t0 = sb_now();
	double worst = 0, e = 0; /* e: the last check's error (0 when it could not run) */
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
	else if (e > 0)
		sb_log(c->log, SB_LOG_WARNING, "attention in one pass gave wrong results on %s "
		       "(relative error %.1e against the host's): as two products around a softmax",
		       label, e);
	else
		sb_log(c->log, SB_LOG_WARNING, "attention in one pass cannot run on %s: as two "
		       "products around a softmax", label);
	return c->att_checked > 0;
}

/* One attention's operands, for its timed runs */
typedef struct {
	sb_dv q;
	int ldq;
	sb_dv k, v;
	int ldkv, nq, nk, heads, hd;
	float scale;
	int ldo, batch;
	long sq, skv, so;
} att_op;

static sb_status att_timed(sb_bdev *c, int way, sb_dv out, const void *op)
{
	const att_op *a = op;
	(way == SB_CL_ATT_FUSED ? attention_fused : attention_split)(c, a->q, a->ldq, a->k, a->v,
	                                                             a->ldkv, a->nq, a->nk,
	                                                             a->heads, a->hd, a->scale, out,
	                                                             a->ldo, a->batch, a->sq,
	                                                             a->skv, a->so);
	return c->st;
}

/* Under measuring (cl_gemm_pick.h): attention's way for this shape, after the timed runs its
 * shape still needs, on the measuring queue into a scratch output. A timed run of the two
 * products' way counts once its products are decided (sb_cl_time_paths). */
static int measured_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                              int nk, int heads, int hd, float scale, sb_dv o, int ldo,
                              int batch, long sq, long skv, long so)
{
	sb_cl_pick *p = c->att_pick;
	const sb_cl_shape s = {{nq, nk, hd, heads, batch, sb_cl_gemm_flags(q, ldq, sq, k, ldkv, skv,
	                                                                   o, ldo, so)}};
	const int may_time = !c->profiling;
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
	const size_t floats = lead + (size_t)(batch - 1) * (size_t)(so > 0 ? so : 0) +
	                      (size_t)(nq - 1) * (size_t)ldo + (size_t)heads * hd;
	const att_op op = {q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, ldo, batch, sq, skv, so};
	sb_cl_time_paths(c, p, slot, want, lead, floats, att_timed, &op);
	return sb_cl_pick_path(p, &s, 0, &want, &slot);
}

/* Attention in one pass (attention_fused) where the device is set to or measured it faster for
 * the shape and the heads are small enough, else as two products around a softmax. */
void sb_cl_op_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so)
{
	if (nq <= 0 || nk <= 0 || heads <= 0 || batch <= 0 || c->st != SB_OK ||
	    sb_cl_ops_ready(c) != SB_OK)
		return;
	/* bf16: its two products on the tensor cores, as the products' way would run them */
	if (c->want_bf16 && !c->mma_tried) {
		const sb_status st = sb_cl_bf16_products(c);
		if (st != SB_OK) {
			c->st = st;
			return;
		}
	}
	const int fits = hd <= 64 && hd % 4 == 0; /* attention.cl's heads */
	/* bf16 on the tensor cores: attention_mma.cl where one pass would run, not measured (its
	 * rounding is not fp32's) */
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
	if (fused && fits && c->att_pick) { /* where measured, one pass runs only once checked
	                                       there, in any precision */
		const int ok = fused_usable(c);
		if (ok < 0)
			return;
		fused = ok;
	}
	if (fused && fits && attention_ready(c, att_which(hd))) {
		attention_fused(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
		                so);
		return;
	}
	attention_split(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
}

