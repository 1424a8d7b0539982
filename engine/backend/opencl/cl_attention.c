/* Attention on an OpenCL device (backend.h: attention): in one pass (attention.cl, after
 * FlashAttention: a tile's scores stay in registers with a running softmax, a query row a
 * work-item), by tiles (attention_tiles.cl: the same, a work-group's 64 rows shared by its
 * items as a product's tile is), as two strided-batched products around a softmax (the scores
 * in a buffer the device keeps), or in bf16 or tf32 on NVIDIA's tensor cores
 * (attention_mma.cl). Which of the first three runs a shape is measured on a GPU
 * (cl_gemm_pick.h), fixed per driver elsewhere; SB_CL_ATTENTION overrides.
 */
#include "backend/opencl/cl_ops.h"

#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"

#include "attention_cl.h"     /* generated: attention.cl's source */
#include "attention_mma_cl.h" /* generated: gemm_rows.cl + mma.cl + attention_mma.cl */
#include "attention_tiles_cl.h" /* generated: attention_tiles.cl's source */
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
	const sb_device *dp = sb_cl_device_props(c->dev);
	const int pocl_cpu = strstr(dp->platform, "Portable Computing Language") != NULL &&
	                     (type & CL_DEVICE_TYPE_CPU);
	const int nvidia_gpu = strstr(dp->platform, "NVIDIA") != NULL && (type & CL_DEVICE_TYPE_GPU);
	/* SB_CL_ATTENTION: "split", "fused" or "tiles" (a bench's choice), "auto" (measured per
	 * shape on any device); unset, measured on a GPU or an accelerator */
	const char *att = getenv("SB_CL_ATTENTION");
	c->att_way = att && !strcmp(att, "fused")   ? SB_CL_ATT_FUSED
	             : att && !strcmp(att, "tiles") ? SB_CL_ATT_TILES
	             : att && !strcmp(att, "split") ? SB_CL_ATT_SPLIT
	             : pocl_cpu || nvidia_gpu       ? SB_CL_ATT_FUSED
	                                            : SB_CL_ATT_SPLIT;
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
	const size_t na = strlen((const char *)attention_cl), no = strlen((const char *)ops_cl),
	             nt = strlen((const char *)attention_tiles_cl);
	char *src = malloc(na + nt + no + 1), also[160];
	if (!src)
		return SB_ERR_NOMEM;
	memcpy(src, attention_cl, na);
	memcpy(src + na, attention_tiles_cl, nt);
	memcpy(src + na + nt, ops_cl, no + 1);
	snprintf(also, sizeof also, "products %s, ATT_LOCAL %d",
	         c->pick ? "measured" : sb_cl_gemm_name(c->gemm), c->att_local);
	const sb_status st = sb_cl_pick_open(c, SB_CL_PICK_ATTENTION, 1 << SB_CL_ATT_SPLIT |
	                                     1 << SB_CL_ATT_FUSED | 1 << SB_CL_ATT_TILES,
	                                     c->att_way == SB_CL_ATT_FUSED ? SB_CL_ATT_FUSED
	                                     : SB_CL_ATT_SPLIT, src,
	                                     also, &c->att_pick);
	free(src);
	return st;
}

/* a kernel and its program released (either may be NULL), and forgotten */
static void release(cl_kernel *k, cl_program *p)
{
	if (*k)
		clReleaseKernel(*k);
	if (*p)
		clReleaseProgram(*p);
	*k = NULL;
	*p = NULL;
}

/* a way's three kernels and programs (one per head size) released */
static void release3(cl_kernel k[3], cl_program p[3])
{
	for (int i = 0; i < 3; i++)
		release(&k[i], &p[i]);
}

void sb_cl_attention_free(sb_bdev *c)
{
	release3(c->att_k, c->att_prog);
	release3(c->attt_k, c->attt_prog);
	release3(c->attm_k[0], c->attm_prog[0]);
	release3(c->attm_k[1], c->attm_prog[1]);
	sb_cl_pick_free(c->att_pick);
	c->att_pick = NULL;
}

/* 1 when st is the device's state (memory short, the device lost), not the kernel's: the pass
 * fails with it (c->st), and what failed is tried again at the next one */
static int device_failed(sb_bdev *c, sb_status st)
{
	if (st != SB_ERR_NOMEM && st != SB_ERR_DEVICE_OOM && st != SB_ERR_DEVICE_LOST)
		return 0;
	sb_cl_fail(c, st);
	return 1;
}

/* attention.cl's kernel for heads of up to 16 << w values (attention_16, _32, _64), built at
 * its first call: on a GPU from a program of its own (the head size a constant of the build,
 * so that a row stays in registers: attention.cl), on a CPU driver from one program holding
 * all three. 0 when it does not build on the device (logged): its attention takes another way
 * from then on (the products' where nothing is measured), at every head size. */
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
	release3(c->att_k, c->att_prog);
	if (device_failed(c, st))
		return 0;
	if (c->att_way == SB_CL_ATT_FUSED)
		c->att_way = SB_CL_ATT_SPLIT;
	if (c->att_pick)
		sb_cl_pick_drop(c->att_pick, SB_CL_ATT_FUSED);
	sb_log(c->log, SB_LOG_WARNING, "attention in one pass does not build on %s: %s instead",
	       sb_cl_device_props(c->dev)->label,
	       c->att_pick ? "another way" : "as two products around a softmax");
	return 0;
}

/* attention_tiles.cl's kernel for heads of up to 16 << w values, from a program of its own
 * (the head size a constant of the build), built at its first call. 0 when it does not build
 * on the device, or would not launch there (work-groups of 128, up to 47 KB of local memory:
 * a device of 32 KB cannot hold it), logged: attention takes another way from then on, at
 * every head size. */
static int tiles_ready(sb_bdev *c, int w)
{
	if (c->attt_k[w])
		return 1;
	if (c->attt_checked < 0)
		return 0;
	char opts[64];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_HD=%d", 16 << w);
	sb_status st = sb_cl_device_build(c->dev, "attention_tiles",
	                                  (const char *)attention_tiles_cl, opts, &c->attt_prog[w],
	                                  NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, c->attt_prog[w], sb_cl_op_names[K_ATTENTION_TILES],
		                         &c->attt_k[w]);
	const char *why = "does not build";
	if (st == SB_OK) {
		cl_device_id id = sb_cl_device_id(c->dev);
		size_t wg = 0;
		cl_ulong used = 0, have = 0;
		if (clGetKernelWorkGroupInfo(c->attt_k[w], id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg,
		                             NULL) != CL_SUCCESS ||
		    clGetKernelWorkGroupInfo(c->attt_k[w], id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof used,
		                             &used, NULL) != CL_SUCCESS ||
		    clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof have, &have, NULL) !=
		        CL_SUCCESS)
			why = "cannot be asked what it needs";
		else if (wg < 128 || used > have)
			why = "needs more than the device has (work-groups of 128, its local memory)";
		else
			return 1;
	}
	release3(c->attt_k, c->attt_prog);
	if (device_failed(c, st))
		return 0;
	c->attt_checked = -1;
	if (c->att_way == SB_CL_ATT_TILES)
		c->att_way = SB_CL_ATT_SPLIT;
	if (c->att_pick)
		sb_cl_pick_drop(c->att_pick, SB_CL_ATT_TILES);
	sb_log(c->log, SB_LOG_WARNING, "attention by tiles %s on %s: %s instead", why,
	       sb_cl_device_props(c->dev)->label, c->att_pick ? "another way"
	       : c->att_way == SB_CL_ATT_FUSED ? "in one pass" : "as two products around a softmax");
	return 0;
}

/* the kernel of attention.cl that runs heads of hd values: the smallest that holds them */
static int att_which(int hd)
{
	return hd <= 16 ? 0 : hd <= 32 ? 1 : 2;
}

/* the arguments of attention.cl's, attention_tiles.cl's and attention_mma.cl's kernels (the
 * same list) */
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

/* attention_mma.cl's and attention_tiles.cl's launch: a work-group of 128 items for 64 query
 * rows of a head of a batch item */
static void attention_by_64_rows(sb_bdev *c, cl_kernel kernel, int name, sb_dv q, int ldq,
                                 sb_dv k, sb_dv v, int ldkv, int nq, int nk, int heads, int hd,
                                 float scale, sb_dv o, int ldo, int batch, long sq, long skv,
                                 long so)
{
	kargs a = {c, kernel, name, 0.0, 0, CL_SUCCESS};
	attention_args(&a, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
	const size_t g[3] = {(size_t)(nq + 63) / 64 * 128, (size_t)heads, (size_t)batch},
	             l[3] = {128, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

static void attention_mma(sb_bdev *c, int tf32, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv,
                          int nq, int nk, int heads, int hd, float scale, sb_dv o, int ldo,
                          int batch, long sq, long skv, long so);

static void attention_fused(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so);

static void attention_tiles(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so);

/* One attention of 70 query rows over 100 keys (two blocks, ragged) on the device against the
 * host, as the products are checked before first use (cl_gemm_mma.c): on the tensor cores
 * (ATT_BF16 or ATT_TF32; the kernel's shuffles and its scores turned into the next product's
 * fragments are what this adds to the products' check), or in fp32 in one pass (ATT_FP32:
 * attention.cl) or by tiles (ATT_TILES: attention_tiles.cl), on a device that measures them
 * against the products' way, which may never have run them. *err: the relative error (bf16:
 * the rounding of the weights at each block's maximum, about 1e-3; tf32 about 1e-4). */
enum { ATT_FP32, ATT_TILES, ATT_BF16, ATT_TF32 };

static sb_status attention_check(sb_bdev *c, int hd, int kind, double *err)
{
	const int mma = kind == ATT_BF16 || kind == ATT_TF32;
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
		if (mma)
			attention_mma(c, kind == ATT_TF32, (sb_dv){&bq, 0}, hd, (sb_dv){&bk, 0},
			              (sb_dv){&bk, nkf}, hd, NQ, NK, 1, hd, scale, (sb_dv){&bo, 0}, hd, 1,
			              0, 0, 0);
		else
			(kind == ATT_TILES ? attention_tiles : attention_fused)(
			    c, (sb_dv){&bq, 0}, hd, (sb_dv){&bk, 0}, (sb_dv){&bk, nkf}, hd, NQ, NK, 1, hd,
			    scale, (sb_dv){&bo, 0}, hd, 1, 0, 0, 0);
		st = sb_cl_check_result(c, bo.m, nqf, o, "reading the attention check");
		if (st == SB_OK && !mma &&
		    sb_cl_device_fault_tune_wrong(c->dev, 4 + (kind == ATT_TILES ? SB_CL_ATT_TILES
		                                                                 : SB_CL_ATT_FUSED)))
			o[hd + 3] += 1.f; /* opencl:N:tune-wrong:fused or :tiles */
	}
	/* the reference rounds the products' inputs as the kernel does (bf16, tf32), or not at all */
#define ATT_IN(x) (mma ? sb_cl_mma_round((x), kind == ATT_TF32) : (x))
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
				w += (mma ? sb_cl_mma_round((float)p[j], kind == ATT_TF32) : p[j]) *
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

/* attention_mma.cl's program in bf16 or tf32 (as the products' mma, or tf32, was built) for
 * heads of hd values (16, 32, 64), built and checked at its first use on the device; 0 when it
 * does not build there or computes something else (logged; the fp32 kernel runs instead) */
static int attention_mma_ready(sb_bdev *c, int tf32, int hd)
{
	const int w = att_which(hd);
	cl_kernel *k = &c->attm_k[tf32][w];
	cl_program *prog = &c->attm_prog[tf32][w];
	if (*k || c->attm_tried[tf32][w])
		return *k != NULL;
	c->attm_tried[tf32][w] = 1;
	char opts[128];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_HD=%d %s", hd,
	         sb_cl_mma_options(tf32 ? c->tf32 : c->mma));
	sb_status st = sb_cl_device_build(c->dev, "attention_mma", (const char *)attention_mma_cl,
	                                  opts, prog, NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, *prog, "attention_mma", k);
	double err = 0;
	if (st == SB_OK && (st = attention_check(c, hd, tf32 ? ATT_TF32 : ATT_BF16, &err)) == SB_OK)
		return 1;
	release(k, prog);
	if (device_failed(c, st)) {
		c->attm_tried[tf32][w] = 0; /* tried again next time */
		return 0;
	}
	sb_log(c->log, SB_LOG_WARNING, "%s attention on the tensor cores %s on %s: in fp32 "
	       "instead", tf32 ? "tf32" : "bf16",
	       err > 0 ? "is wrong (relative error against the host's above 1e-2)"
	               : "does not build or its launch is refused",
	       sb_cl_device_props(c->dev)->label);
	return 0;
}

/* Attention in one launch on the tensor cores, bf16 or tf32 (attention_mma.cl), heads of 16,
 * 32, 64 */
static void attention_mma(sb_bdev *c, int tf32, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv,
                          int nq, int nk, int heads, int hd, float scale, sb_dv o, int ldo,
                          int batch, long sq, long skv, long so)
{
	attention_by_64_rows(c, c->attm_k[tf32][att_which(hd)], K_ATTENTION_MMA, q, ldq, k, v, ldkv,
	                     nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
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

/* Attention in one launch by tiles of 64 query rows (attention_tiles.cl), for heads of up to 64
 * values, the kernel for the smallest head size that holds hd. */
static void attention_tiles(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                            int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                            long sq, long skv, long so)
{
	attention_by_64_rows(c, c->attt_k[att_which(hd)], K_ATTENTION_TILES, q, ldq, k, v, ldkv, nq,
	                     nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
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

/* Under measuring, attention in one pass (or by tiles: 'tiles') serves a device only once it
 * has passed its check there (each of its kernels against the host, in double precision; one
 * wait): 1 right, 0 not (warned once; the caller leaves it out), -1 not known (c->st: the
 * device failed meanwhile, asked again next pass). */
static int way_usable(sb_bdev *c, int tiles)
{
	int *checked = tiles ? &c->attt_checked : &c->att_checked;
	if (*checked)
		return *checked > 0;
	for (int w = 0; w < 3; w++)
		if (!(tiles ? tiles_ready(c, w) : attention_ready(c, w))) { /* logged, and left out
		                                                               of the measured ways */
			if (c->st != SB_OK)
				return -1; /* the device's state: asked again next pass */
			*checked = -1;
			return 0;
		}
	const double t0 = sb_now();
	double worst = 0, e = 0; /* e: the last check's error (0 when it could not run) */
	sb_status st = SB_OK;
	for (int hd = 16; hd <= 64 && st == SB_OK; hd *= 2) { /* the kernels for 16, 32, 64 */
		st = attention_check(c, hd, tiles ? ATT_TILES : ATT_FP32, &e);
		worst = e > worst ? e : worst;
	}
	if (device_failed(c, st) || c->st != SB_OK)
		return -1;
	const char *label = sb_cl_device_props(c->dev)->label,
	           *way = tiles ? "attention by tiles" : "attention in one pass";
	*checked = st == SB_OK ? 1 : -1;
	if (st == SB_OK)
		sb_log(c->log, SB_LOG_INFO, "%s passed its check on %s (relative error %.1e, %.2f s)",
		       way, label, worst, sb_now() - t0);
	else if (e > 0)
		sb_log(c->log, SB_LOG_WARNING, "%s gave wrong results on %s (relative error %.1e "
		       "against the host's): another way instead", way, label, e);
	else
		sb_log(c->log, SB_LOG_WARNING, "%s cannot run on %s: another way instead", way, label);
	return *checked > 0;
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
	(way == SB_CL_ATT_FUSED   ? attention_fused
	 : way == SB_CL_ATT_TILES ? attention_tiles
	                          : attention_split)(c, a->q, a->ldq, a->k, a->v, a->ldkv, a->nq,
	                                             a->nk, a->heads, a->hd, a->scale, out, a->ldo,
	                                             a->batch, a->sq, a->skv, a->so);
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
	/* the two one-pass ways, each checked before its first use here */
	for (int w = SB_CL_ATT_FUSED; w <= SB_CL_ATT_TILES; w++) {
		if (way != w && !(want >> w & 1))
			continue;
		const int ok = way_usable(c, w == SB_CL_ATT_TILES);
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
	const att_op op = {q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, ldo, batch, sq, skv, so};
	sb_cl_time_paths(c, p, slot, want, lead, floats, att_timed, &op);
	return sb_cl_pick_path(p, &s, 0, &want, &slot);
}

/* Attention in one pass (attention_fused) or by tiles (attention_tiles) where the device is set
 * to or measured it faster for the shape and the heads are small enough, else as two products
 * around a softmax. */
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
	/* bf16 or tf32 on the tensor cores (the products' precision): attention_mma.cl where one
	 * pass would run, not measured (its rounding is not fp32's) */
	const int tf32 = !c->want_bf16 && c->gemm == SB_CL_GEMM_TF32 && c->tf32;
	if (((c->want_bf16 && c->mma) || tf32) && c->att_way == SB_CL_ATT_FUSED &&
	    (hd == 16 || hd == 32 || hd == 64) && attention_mma_ready(c, tf32, hd)) {
		attention_mma(c, tf32, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq,
		              skv, so);
		return;
	}
	int way = c->att_way;
	if (fits && c->att_pick && !c->want_bf16) {
		way = measured_attention(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch,
		                         sq, skv, so);
		if (c->st != SB_OK)
			return;
	}
	if (way != SB_CL_ATT_SPLIT && fits && c->att_pick) { /* where measured, a one-pass way runs
	                                                        only once checked there, in any
	                                                        precision */
		const int ok = way_usable(c, way == SB_CL_ATT_TILES);
		if (ok < 0)
			return;
		way = ok ? way : SB_CL_ATT_SPLIT;
	}
	if (way == SB_CL_ATT_TILES && fits && tiles_ready(c, att_which(hd))) {
		attention_tiles(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
		                so);
		return;
	}
	if (way == SB_CL_ATT_FUSED && fits && attention_ready(c, att_which(hd))) {
		attention_fused(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
		                so);
		return;
	}
	if (c->st != SB_OK) /* a build failed for the device's state */
		return;
	attention_split(c, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so);
}

