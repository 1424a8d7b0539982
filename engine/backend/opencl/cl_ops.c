/* The OpenCL backend's dispatcher (cl_ops.h): the sb_ops table. Most entries launch one kernel
 * of ops.cl through the base (cl_base.h); the products go to their dispatcher (cl_products.c),
 * the signal operations to cl_signal.c, and attention takes the way chosen or measured for its
 * shape here, over its kernels (cl_attention.c) or as two products around a softmax. A failure
 * is kept in the device and every later launch is skipped until clear(), so a model's forward
 * pass reads as straight-line code and checks once at the end (and before every download, so
 * nothing reads a half-computed buffer).
 */
#include "backend/opencl/cl_ops.h"

#include "backend/opencl/cl_attention.h"
#include "backend/opencl/cl_convnet.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_products.h"
#include "backend/opencl/cl_signal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sb_status attention_setup(sb_bdev *c, cl_device_type type);
static sb_status attention_measure(sb_bdev *c);

/* The products' path and attention's way, chosen once, at the first product or attention on
 * the device (ops.cl built): CLBlast, the own kernel, the tiled one or tf32 on the tensor cores
 * (SB_CL_GEMM), each measured per shape on a GPU (cl_gemm_pick.h); attention likewise. */
static sb_status choose(sb_bdev *c)
{
	if (c->chosen)
		return c->st;
	c->chosen = 1;
	cl_device_type type = 0;
	clGetDeviceInfo(sb_cl_device_id(c->dev), CL_DEVICE_TYPE, sizeof type, &type, NULL);
	sb_status st = attention_setup(c, type); /* before anything below can fail */
	if (st != SB_OK) {
		sb_cl_fail(c, st);
		return st;
	}
	st = sb_cl_products_choose(c);
	if (st != SB_OK)
		return st;
	st = attention_measure(c);
	if (st != SB_OK) {
		sb_cl_fail(c, st);
		return st;
	}
	sb_log(c->log, SB_LOG_INFO, "matrix products on %s through %s; attention %s",
	       sb_cl_device_props(c->dev)->label, sb_cl_products_describe(c),
	       c->att_pick ? sb_cl_pick_describe(c->att_pick)
	       : c->att_way == SB_CL_ATT_TILES ? "by tiles"
	       : c->att_way == SB_CL_ATT_FUSED ? "in one pass" : "as two products around a softmax");
	return SB_OK;
}

/* ---- the launches of ops.cl's kernels ---- */

static void op_bias_cols(sb_bdev *c, sb_dv x, size_t n, int cols, sb_dv b, int act)
{
	const sb_bias e = {b, 0, 1, act};
	sb_cl_bias_items(c, (int)(n / (size_t)cols), cols, x, cols, 0, 1, &e);
}

static sb_status attention_setup(sb_bdev *c, cl_device_type type);
static sb_status attention_measure(sb_bdev *c);

static void op_gemm_bias(sb_bdev *c, int M, int N, int K, float alpha, sb_dv A, int lda,
                         long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                         long sc, int batch, int batch2, long sa2, long sb2, long sc2,
                         const sb_bias *e)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0 || c->st != SB_OK)
		return;
	if (sb_cl_ops_ready(c) != SB_OK || choose(c) != SB_OK)
		return;
	sb_cl_product(c, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc, batch, batch2,
	              sa2, sb2, sc2, e);
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
	c->counts.launches++;
	const cl_float zero = 0.f;
	const cl_int err = clEnqueueFillBuffer(c->q, x.buf->m, &zero, sizeof zero,
	                                       sizeof(float) * x.off, sizeof(float) * n, 0, NULL,
	                                       NULL);
	if (err != CL_SUCCESS)
		sb_cl_fail_cl(c, err, "clearing a buffer");
	sb_cl_prof_end(c, P_ZERO, t0, 0.0);
}

static void op_copy(sb_bdev *c, sb_dv dst, sb_dv src, size_t n)
{
	if (c->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(c);
	c->counts.launches++;
	const cl_int err = clEnqueueCopyBuffer(c->q, src.buf->m, dst.buf->m, sizeof(float) * src.off,
	                                       sizeof(float) * dst.off, sizeof(float) * n, 0, NULL,
	                                       NULL);
	if (err != CL_SUCCESS)
		sb_cl_fail_cl(c, err, "copying");
	sb_cl_prof_end(c, P_COPY, t0, 0.0);
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

static void op_rmsnorm_seg(sb_bdev *c, sb_dv x, sb_dv o, size_t rows, long ld, int nseg,
                           sb_dv seg, sb_dv w)
{
	kargs a = args(c, K_RMSNORM_SEG);
	a_db(&a, x);
	a_db(&a, o);
	a_i64(&a, ld);
	a_i32(&a, nseg);
	a_db(&a, seg);
	a_db(&a, w);
	const size_t g = rows * (size_t)nseg * c->red_wg, l = c->red_wg;
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

/* ---- attention: the way a shape takes ---- */

static sb_status attention_setup(sb_bdev *c, cl_device_type type)
{
	/* Until a shape is measured (or where nothing is): one pass where it was measured faster,
	 * on PoCL's CPU device and on NVIDIA's driver (README.md here); the products' way on any
	 * other driver. */
	const sb_device *dp = sb_cl_device_props(c->dev);
	const int pocl_cpu = strstr(dp->platform, "Portable Computing Language") != NULL &&
	                     (type & CL_DEVICE_TYPE_CPU);
	const int nvidia_gpu = strstr(dp->platform, "NVIDIA") != NULL && (type & CL_DEVICE_TYPE_GPU);
	/* SB_CL_ATTENTION: "split", "fused" or "tiles" (a bench's choice), "auto" (measured per
	 * shape on any device); unset, measured on a GPU or an accelerator */
	const char *att = sb_knob_get("SB_CL_ATTENTION");
	c->att_way = att && !strcmp(att, "fused")   ? SB_CL_ATT_FUSED
	             : att && !strcmp(att, "tiles") ? SB_CL_ATT_TILES
	             : att && !strcmp(att, "split") ? SB_CL_ATT_SPLIT
	             : pocl_cpu || nvidia_gpu       ? SB_CL_ATT_FUSED
	                                            : SB_CL_ATT_SPLIT;
	return sb_cl_attention_new(type, &c->attention);
}

static sb_status attention_measure(sb_bdev *c)
{
	if (!sb_cl_measured(sb_cl_device_props(c->dev), "SB_CL_ATTENTION"))
		return SB_OK;
	/* the file is named by the one-pass kernels and what the products' way runs (the softmax,
	 * the own kernel; how the products are chosen), and by how one pass is built */
	const char *fused = sb_cl_attention_source(SB_CL_ATT_FUSED),
	           *tiles = sb_cl_attention_source(SB_CL_ATT_TILES);
	const size_t na = strlen(fused), no = strlen(sb_cl_ops_source()), nt = strlen(tiles);
	char *src = malloc(na + nt + no + 1), also[160];
	if (!src)
		return SB_ERR_NOMEM;
	memcpy(src, fused, na);
	memcpy(src + na, tiles, nt);
	memcpy(src + na + nt, sb_cl_ops_source(), no + 1);
	snprintf(also, sizeof also, "products %s, ATT_LOCAL %d",
	         c->pick ? "measured" : sb_cl_gemm_name(c->gemm),
	         sb_cl_attention_local(c->attention));
	const sb_status st = sb_cl_pick_open(c, SB_CL_PICK_ATTENTION, 1 << SB_CL_ATT_SPLIT |
	                                     1 << SB_CL_ATT_FUSED | 1 << SB_CL_ATT_TILES,
	                                     c->att_way == SB_CL_ATT_FUSED ? SB_CL_ATT_FUSED
	                                     : SB_CL_ATT_SPLIT, src,
	                                     also, &c->att_pick);
	free(src);
	return st;
}

/* A one-pass way's kernel for heads of hd values, ready (cl_attention.c builds it). At its
 * first refusal on the device (logged) attention takes another way from then on, at every head
 * size: the products' where nothing is measured. */
static int way_ready(sb_bdev *c, int way, int hd)
{
	const char *why = NULL;
	if (sb_cl_attention_ready(c, c->attention, way, hd, &why))
		return 1;
	if (!why) /* the device's state (c->st), or refused before */
		return 0;
	if (c->att_way == way)
		c->att_way = SB_CL_ATT_SPLIT;
	if (c->att_pick)
		sb_cl_pick_drop(c->att_pick, way);
	sb_log(c->log, SB_LOG_WARNING, "%s %s on %s: %s instead",
	       way == SB_CL_ATT_TILES ? "attention by tiles" : "attention in one pass", why,
	       sb_cl_device_props(c->dev)->label, c->att_pick ? "another way"
	       : c->att_way == SB_CL_ATT_FUSED ? "in one pass" : "as two products around a softmax");
	return 0;
}

/* Under measuring, a one-pass way serves a shape only once checked on the device
 * (cl_attention.c): 1, 0 (refused: not the way where nothing is measured either), -1 (the
 * device failed meanwhile) */
static int way_checked(sb_bdev *c, int way)
{
	const int ok = sb_cl_attention_checked(c, c->attention, way);
	if (ok == 0 && c->att_way == way)
		c->att_way = SB_CL_ATT_SPLIT;
	return ok;
}

/* the per-head gates of an attention its products' way ran (backend.h: attention's g) */
static void attention_gates(sb_bdev *c, sb_dv o, int ldo, long so, sb_dv g, int ldq, long sq,
                            int nq, int heads, int hd, int batch)
{
	kargs a = args(c, K_ATT_GATE);
	a_db(&a, o);
	a_i32(&a, ldo);
	a_i64(&a, so);
	a_db(&a, g);
	a_i32(&a, ldq);
	a_i64(&a, sq);
	a_i32(&a, hd);
	a_i32(&a, heads * hd);
	const size_t gs[3] = {(size_t)heads * hd, (size_t)nq, (size_t)batch}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, gs, l);
}

/* Attention as two strided-batched products around a softmax, every head of a group of items
 * at once (the scores, heads x nq x nk floats an item, in a buffer cl_attention.c keeps,
 * never more than SCORES_MAX floats: long sequences go a few items at a time): three launches
 * a group. */
#define SCORES_MAX ((size_t)32 << 20)

static void attention_split(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so, sb_dv g)
{
	const size_t item = (size_t)heads * nq * nk;
	int group = item >= SCORES_MAX ? 1 : (int)(SCORES_MAX / item);
	group = group < batch ? group : batch;
	const sb_dv s = sb_cl_attention_scores(c, c->attention, item * (size_t)group);
	if (!s.buf)
		return;
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
	if (g.buf)
		attention_gates(c, o, ldo, so, g, ldq, sq, nq, heads, hd, batch);
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
	sb_dv g;
} att_op;

static sb_status att_timed(sb_bdev *c, int way, sb_dv out, const void *op)
{
	const att_op *a = op;
	if (way == SB_CL_ATT_SPLIT)
		attention_split(c, a->q, a->ldq, a->k, a->v, a->ldkv, a->nq, a->nk, a->heads, a->hd,
		                a->scale, out, a->ldo, a->batch, a->sq, a->skv, a->so, a->g);
	else
		sb_cl_attention_run(c, c->attention, way, a->q, a->ldq, a->k, a->v, a->ldkv, a->nq,
		                    a->nk, a->heads, a->hd, a->scale, out, a->ldo, a->batch, a->sq,
		                    a->skv, a->so, a->g);
	return c->st;
}

/* Under measuring (cl_gemm_pick.h): attention's way for this shape, after the timed runs its
 * shape still needs, on the measuring queue into a scratch output. A timed run of the two
 * products' way counts once its products are decided (sb_cl_time_paths). */
static int measured_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                              int nk, int heads, int hd, float scale, sb_dv o, int ldo,
                              int batch, long sq, long skv, long so, sb_dv g)
{
	sb_cl_pick *p = c->att_pick;
	const sb_cl_shape s = {{nq, nk, hd, heads, batch, sb_cl_gemm_flags(q, ldq, sq, k, ldkv, skv,
	                                                                   o, ldo, so)}};
	const int may_time = !c->profiling;
	int want = 0, slot = -1;
	int way = sb_cl_pick_path(p, &s, may_time, &want, &slot);
	/* the two one-pass ways, each checked before its first use here */
	for (int w = SB_CL_ATT_FUSED; w <= SB_CL_ATT_TILES; w++) {
		if (way != w && !(want >> w & 1))
			continue;
		const int ok = way_checked(c, w);
		if (ok < 0)
			return way; /* the pass has failed */
		if (!ok) { /* dropped here, or already when it did not build (attention_ready, ...) */
			const int dropped = sb_cl_pick_drop(p, w);
			way = sb_cl_pick_path(p, &s, may_time, &want, &slot);
			want &= ~(1 << w);
			if (dropped || way != w)
				w = SB_CL_ATT_FUSED - 1; /* what replaces it is checked too */
		}
	}
	if (!want || c->st != SB_OK)
		return way;
	/* O's extent: the scratch output keeps its strides and its alignment */
	const size_t lead = o.off % 4;
	const size_t floats = lead + (size_t)(batch - 1) * (size_t)(so > 0 ? so : 0) +
	                      (size_t)(nq - 1) * (size_t)ldo + (size_t)heads * hd;
	const att_op op = {q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, ldo, batch, sq, skv, so, g};
	sb_cl_time_paths(c, p, slot, want, lead, floats, att_timed, &op);
	return sb_cl_pick_path(p, &s, 0, &want, &slot);
}

/* Attention in one pass (attention_fused) or by tiles (attention_tiles) where the device is set
 * to or measured it faster for the shape and the heads are small enough, else as two products
 * around a softmax. */
static void op_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so, sb_dv g)
{
	if (nq <= 0 || nk <= 0 || heads <= 0 || batch <= 0 || c->st != SB_OK ||
	    sb_cl_ops_ready(c) != SB_OK || choose(c) != SB_OK)
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
	/* bf16 or tf32 on the tensor cores (the products' precision): attention_mma.cl where one
	 * pass would run, not measured (its rounding is not fp32's) */
	const int tf32 = !c->want_bf16 && c->gemm == SB_CL_GEMM_TF32 && c->tf32;
	if (((c->want_bf16 && c->mma) || tf32) && c->att_way == SB_CL_ATT_FUSED &&
	    (hd == 16 || hd == 32 || hd == 64) &&
	    sb_cl_attention_mma_ready(c, c->attention, tf32 ? c->tf32 : c->mma, tf32, hd)) {
		sb_cl_attention_mma(c, c->attention, tf32, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale,
		                    o, ldo, batch, sq, skv, so, g);
		return;
	}
	int way = c->att_way;
	if (fits && c->att_pick && !c->want_bf16) {
		way = measured_attention(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch,
		                         sq, skv, so, g);
		if (c->st != SB_OK)
			return;
	}
	if (way != SB_CL_ATT_SPLIT && fits && c->att_pick) { /* where measured, a one-pass way runs
	                                                        only once checked there, in any
	                                                        precision */
		const int ok = way_checked(c, way);
		if (ok < 0)
			return;
		way = ok ? way : SB_CL_ATT_SPLIT;
	}
	if ((way == SB_CL_ATT_TILES || way == SB_CL_ATT_FUSED) && fits && way_ready(c, way, hd)) {
		sb_cl_attention_run(c, c->attention, way, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o,
		                    ldo, batch, sq, skv, so, g);
		return;
	}
	if (c->st != SB_OK) /* a build failed for the device's state */
		return;
	attention_split(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so,
	                g);
}

/* backend.h's lstm: the input products of every step and direction as one product each (their
 * biases in its epilogue), then per step one product a direction of the previous states onto
 * that step's input products (beta 1) and one launch of the gates for both directions */
static void op_lstm(sb_bdev *c, sb_dv x, int n, int S, int D, int H, int dirs, sb_dv wih,
                    sb_dv whh, sb_dv b, sb_dv o, sb_dv work)
{
	const long G = 4L * H, rows = (long)n * S;
	for (int r = 0; r < dirs && c->st == SB_OK; r++) {
		const sb_bias e = {sb_dv_at(b, (size_t)(r * G)), 0, 1, SB_ACT_NONE};
		sb_cl_product(c, (int)rows, (int)G, D, 1.f, x, D, 0, sb_dv_at(wih, (size_t)(r * G * D)),
		              D, 0, 1, 0.f, sb_dv_at(work, (size_t)(r * rows * G)), (int)G, 0, 1, 1, 0,
		              0, 0, &e);
	}
	const sb_dv cs = sb_dv_at(work, (size_t)(dirs * rows * G));
	op_zero(c, cs, (size_t)dirs * n * H);
	for (int k = 0; k < S && c->st == SB_OK; k++) {
		for (int r = 0; k && r < dirs; r++) {
			const long s = r ? S - 1 - k : k, prev = r ? s + 1 : s - 1;
			sb_cl_product(c, n, (int)G, H, 1.f, sb_dv_at(o, (size_t)(prev * dirs * H + r * H)),
			              S * dirs * H, 0, sb_dv_at(whh, (size_t)(r * G * H)), H, 0, 1, 1.f,
			              sb_dv_at(work, (size_t)(r * rows * G + s * G)), (int)(S * G), 0, 1, 1,
			              0, 0, 0, NULL);
		}
		sb_cl_lstm_cell(c, work, cs, o, n, S, H, dirs, k);
	}
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
	.attention = op_attention,
	.rmsnorm = op_rmsnorm,
	.rmsnorm_seg = op_rmsnorm_seg,
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
	/* SB_OPS_LSTM */
	.lstm = op_lstm,
	/* SB_OPS_CONVNET */
	.copy_rows = sb_cl_op_copy_rows,
	.permute = sb_cl_op_permute,
	.norm_groups = sb_cl_op_norm_groups,
	.dwconv = sb_cl_op_dwconv,
	.mul = sb_cl_op_mul,
};
