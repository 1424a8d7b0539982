/* Attention's kernels (cl_attention.h): built at their first use, checked against the host
 * where they must be, launched; their state is this file's. */
#include "backend/opencl/cl_attention.h"

#include "backend/opencl/cl_gemm_pick.h"

#include "attention_cl.h"       /* generated: attention.cl's source */
#include "attention_mma_cl.h"   /* generated: gemm_rows.cl + mma.cl + attention_mma.cl */
#include "attention_tiles_cl.h" /* generated: attention_tiles.cl's source */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the one-pass ways: attention.cl's [0], attention_tiles.cl's [1] */
enum { ONE_PASS, BY_TILES };

struct sb_cl_attention {
	int local;                 /* attention.cl's key tiles through local memory (a GPU) */
	/* attention.cl on a GPU for heads of up to 16, 32 and 64 values, each built at its first
	 * use (all three at once where the way is checked); on a CPU driver one program, [0][0],
	 * for the three; attention_tiles.cl likewise, a program a head size */
	cl_program prog[2][3];
	cl_kernel k[2][3];         /* attention_16, _32, _64; attention_tiles for each */
	int refused[2];            /* a one-pass way that did not build here, or would not launch */
	int checked[2];            /* checked here before its first use there (measuring): 1
	                              right, -1 wrong or refused, 0 not yet */
	cl_program mma_prog[2][3]; /* attention_mma.cl in bf16 [0] and tf32 [1], for heads of 16,
	                              32, 64, built at first use */
	cl_kernel mma_k[2][3];
	int mma_tried[2][3];
	sb_bbuf scores;            /* the products' way's scores */
};

sb_status sb_cl_attention_new(cl_device_type type, sb_cl_attention **out)
{
	sb_cl_attention *a = calloc(1, sizeof *a);
	if (!a)
		return SB_ERR_NOMEM;
	a->local = type & CL_DEVICE_TYPE_CPU ? 0 : 1;
	const char *al = sb_knob_get("SB_CL_ATT_LOCAL"); /* a test's override */
	if (al && (!strcmp(al, "0") || !strcmp(al, "1")))
		a->local = atoi(al);
	*out = a;
	return SB_OK;
}

const char *sb_cl_attention_source(int way)
{
	return (const char *)(way == SB_CL_ATT_TILES ? attention_tiles_cl : attention_cl);
}

int sb_cl_attention_local(const sb_cl_attention *a)
{
	return a->local;
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

void sb_cl_attention_free(sb_cl_attention *a)
{
	if (!a)
		return;
	for (int w = 0; w < 2; w++) {
		release3(a->k[w], a->prog[w]);
		release3(a->mma_k[w], a->mma_prog[w]);
	}
	if (a->scores.m)
		clReleaseMemObject(a->scores.m);
	free(a);
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

/* the kernel of a way that runs heads of hd values: the smallest that holds them */
static int att_which(int hd)
{
	return hd <= 16 ? 0 : hd <= 32 ? 1 : 2;
}

/* attention.cl's kernel for heads of up to 16 << w values (attention_16, _32, _64): on a GPU
 * from a program of its own (the head size a constant of the build, so that a row stays in
 * registers: attention.cl), on a CPU driver from one program holding all three */
static sb_status build_one_pass(sb_bdev *c, sb_cl_attention *a, int w, const char **why)
{
	const int p = a->local ? w : 0;
	char opts[64] = "-cl-std=CL1.2 -DATT_LOCAL=0";
	if (a->local)
		snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_LOCAL=1 -DATT_HD=%d", 16 << w);
	sb_status st = SB_OK;
	if (!a->prog[ONE_PASS][p])
		st = sb_cl_device_build(c->dev, "attention", (const char *)attention_cl, opts,
		                        &a->prog[ONE_PASS][p], NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, a->prog[ONE_PASS][p],
		                         sb_cl_op_names[K_ATTENTION_16 + w], &a->k[ONE_PASS][w]);
	*why = "does not build";
	return st;
}

/* attention_tiles.cl's kernel for heads of up to 16 << w values, from a program of its own
 * (the head size a constant of the build); SB_ERR_DEVICE too where it would not launch
 * (work-groups of 128, up to 47 KB of local memory: a device of 32 KB cannot hold it) */
static sb_status build_tiles(sb_bdev *c, sb_cl_attention *a, int w, const char **why)
{
	char opts[64];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_HD=%d", 16 << w);
	sb_status st = sb_cl_device_build(c->dev, "attention_tiles",
	                                  (const char *)attention_tiles_cl, opts,
	                                  &a->prog[BY_TILES][w], NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, a->prog[BY_TILES][w], sb_cl_op_names[K_ATTENTION_TILES],
		                         &a->k[BY_TILES][w]);
	*why = "does not build";
	if (st != SB_OK)
		return st;
	cl_device_id id = sb_cl_device_id(c->dev);
	size_t wg = 0;
	cl_ulong used = 0, have = 0;
	if (clGetKernelWorkGroupInfo(a->k[BY_TILES][w], id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg,
	                             &wg, NULL) != CL_SUCCESS ||
	    clGetKernelWorkGroupInfo(a->k[BY_TILES][w], id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof used,
	                             &used, NULL) != CL_SUCCESS ||
	    clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof have, &have, NULL) != CL_SUCCESS) {
		*why = "cannot be asked what it needs";
		return SB_ERR_DEVICE;
	}
	if (wg < 128 || used > have) {
		*why = "needs more than the device has (work-groups of 128, its local memory)";
		return SB_ERR_DEVICE;
	}
	return SB_OK;
}

int sb_cl_attention_ready(sb_bdev *c, sb_cl_attention *a, int way, int hd, const char **why)
{
	const int t = way == SB_CL_ATT_TILES ? BY_TILES : ONE_PASS, w = att_which(hd);
	*why = NULL;
	if (a->k[t][w])
		return 1;
	if (a->refused[t])
		return 0;
	const char *what = NULL;
	const sb_status st = t == BY_TILES ? build_tiles(c, a, w, &what)
	                                   : build_one_pass(c, a, w, &what);
	if (st == SB_OK)
		return 1;
	release3(a->k[t], a->prog[t]);
	if (device_failed(c, st))
		return 0;
	a->refused[t] = 1;
	*why = what;
	return 0;
}

/* the arguments of attention.cl's, attention_tiles.cl's and attention_mma.cl's kernels (the
 * same list) */
static void attention_args(kargs *a, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq, int nk,
                           int heads, int hd, float scale, sb_dv o, int ldo, int batch, long sq,
                           long skv, long so, sb_dv g)
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
	a_db(a, g.buf ? g : q); /* q's buffer stands in for no gates, never read */
	a_i32(a, g.buf != NULL);
	a->flops = 4.0 * nq * nk * hd * heads * batch;
}

/* attention_mma.cl's and attention_tiles.cl's launch: a work-group of 128 items for 64 query
 * rows of a head of a batch item */
static void attention_by_64_rows(sb_bdev *c, cl_kernel kernel, int name, sb_dv q, int ldq,
                                 sb_dv k, sb_dv v, int ldkv, int nq, int nk, int heads, int hd,
                                 float scale, sb_dv o, int ldo, int batch, long sq, long skv,
                                 long so, sb_dv g)
{
	kargs a = {c, kernel, name, 0.0, 0, CL_SUCCESS};
	attention_args(&a, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so,
	               g);
	const size_t gs[3] = {(size_t)(nq + 63) / 64 * 128, (size_t)heads, (size_t)batch},
	             l[3] = {128, 1, 1};
	sb_cl_run(&a, 3, gs, l);
}

void sb_cl_attention_mma(sb_bdev *c, sb_cl_attention *a, int tf32, sb_dv q, int ldq, sb_dv k,
                         sb_dv v, int ldkv, int nq, int nk, int heads, int hd, float scale,
                         sb_dv o, int ldo, int batch, long sq, long skv, long so, sb_dv g)
{
	attention_by_64_rows(c, a->mma_k[tf32][att_which(hd)], K_ATTENTION_MMA, q, ldq, k, v, ldkv,
	                     nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so, g);
}

/* in one pass: a query row a work-item (attention.cl: the scores stay in registers), the
 * kernel for the smallest head size that holds hd; by tiles of 64 query rows
 * (attention_tiles.cl) */
void sb_cl_attention_run(sb_bdev *c, sb_cl_attention *a, int way, sb_dv q, int ldq, sb_dv k,
                         sb_dv v, int ldkv, int nq, int nk, int heads, int hd, float scale,
                         sb_dv o, int ldo, int batch, long sq, long skv, long so, sb_dv g)
{
	const int which = att_which(hd);
	if (way == SB_CL_ATT_TILES) {
		attention_by_64_rows(c, a->k[BY_TILES][which], K_ATTENTION_TILES, q, ldq, k, v, ldkv,
		                     nq, nk, heads, hd, scale, o, ldo, batch, sq, skv, so, g);
		return;
	}
	kargs ka = {c, a->k[ONE_PASS][which], K_ATTENTION_16 + which, 0.0, 0, CL_SUCCESS};
	attention_args(&ka, q, ldq, k, v, ldkv, nq, nk, heads, hd, scale, o, ldo, batch, sq, skv,
	               so, g);
	const size_t gs[3] = {(size_t)nq, (size_t)heads, (size_t)batch}, l[3] = {64, 1, 1};
	sb_cl_run(&ka, 3, gs, l);
}

/* One attention of 70 query rows over 100 keys (two blocks, ragged) on the device against the
 * host, as the products are checked before first use (cl_gemm_mma.c): on the tensor cores
 * (ATT_BF16 or ATT_TF32; the kernel's shuffles and its scores turned into the next product's
 * fragments are what this adds to the products' check), or in fp32 in one pass (ATT_FP32:
 * attention.cl) or by tiles (ATT_TILES: attention_tiles.cl), on a device that measures them
 * against the products' way, which may never have run them. *err: the relative error (bf16:
 * the rounding of the weights at each block's maximum, about 1e-3; tf32 about 1e-4). */
enum { ATT_FP32, ATT_TILES, ATT_BF16, ATT_TF32 };

static sb_status attention_check(sb_bdev *c, sb_cl_attention *at, int hd, int kind, double *err)
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
			sb_cl_attention_mma(c, at, kind == ATT_TF32, (sb_dv){&bq, 0}, hd, (sb_dv){&bk, 0},
			                    (sb_dv){&bk, nkf}, hd, NQ, NK, 1, hd, scale, (sb_dv){&bo, 0}, hd,
			                    1, 0, 0, 0, (sb_dv){NULL, 0});
		else
			sb_cl_attention_run(c, at, kind == ATT_TILES ? SB_CL_ATT_TILES : SB_CL_ATT_FUSED,
			                    (sb_dv){&bq, 0}, hd, (sb_dv){&bk, 0}, (sb_dv){&bk, nkf}, hd, NQ,
			                    NK, 1, hd, scale, (sb_dv){&bo, 0}, hd, 1, 0, 0, 0,
			                    (sb_dv){NULL, 0});
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

int sb_cl_attention_mma_ready(sb_bdev *c, sb_cl_attention *a, const sb_cl_mma *mma, int tf32,
                              int hd)
{
	const int w = att_which(hd);
	cl_kernel *k = &a->mma_k[tf32][w];
	cl_program *prog = &a->mma_prog[tf32][w];
	if (*k || a->mma_tried[tf32][w])
		return *k != NULL;
	a->mma_tried[tf32][w] = 1;
	char opts[128];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DATT_HD=%d %s", hd, sb_cl_mma_options(mma));
	sb_status st = sb_cl_device_build(c->dev, "attention_mma", (const char *)attention_mma_cl,
	                                  opts, prog, NULL);
	if (st == SB_OK)
		st = sb_cl_device_kernel(c->dev, *prog, "attention_mma", k);
	double err = 0;
	if (st == SB_OK &&
	    (st = attention_check(c, a, hd, tf32 ? ATT_TF32 : ATT_BF16, &err)) == SB_OK)
		return 1;
	release(k, prog);
	if (device_failed(c, st)) {
		a->mma_tried[tf32][w] = 0; /* tried again next time */
		return 0;
	}
	sb_log(c->log, SB_LOG_WARNING, "%s attention on the tensor cores %s on %s: in fp32 "
	       "instead", tf32 ? "tf32" : "bf16",
	       err > 0 ? "is wrong (relative error against the host's above 1e-2)"
	               : "does not build or its launch is refused",
	       sb_cl_device_props(c->dev)->label);
	return 0;
}

int sb_cl_attention_checked(sb_bdev *c, sb_cl_attention *a, int way)
{
	const int tiles = way == SB_CL_ATT_TILES;
	int *checked = &a->checked[tiles ? BY_TILES : ONE_PASS];
	if (*checked)
		return *checked > 0;
	const char *label = sb_cl_device_props(c->dev)->label,
	           *name = tiles ? "attention by tiles" : "attention in one pass";
	for (int hd = 16; hd <= 64; hd *= 2) {
		const char *why = NULL;
		if (!sb_cl_attention_ready(c, a, way, hd, &why)) {
			if (c->st != SB_OK)
				return -1; /* the device's state: asked again next pass */
			if (why)
				sb_log(c->log, SB_LOG_WARNING, "%s %s on %s: another way instead", name, why,
				       label);
			*checked = -1;
			return 0;
		}
	}
	const double t0 = sb_now();
	double worst = 0, e = 0; /* e: the last check's error (0 when it could not run) */
	sb_status st = SB_OK;
	for (int hd = 16; hd <= 64 && st == SB_OK; hd *= 2) { /* the kernels for 16, 32, 64 */
		st = attention_check(c, a, hd, tiles ? ATT_TILES : ATT_FP32, &e);
		worst = e > worst ? e : worst;
	}
	if (device_failed(c, st) || c->st != SB_OK)
		return -1;
	*checked = st == SB_OK ? 1 : -1;
	if (st == SB_OK)
		sb_log(c->log, SB_LOG_INFO, "%s passed its check on %s (relative error %.1e, %.2f s)",
		       name, label, worst, sb_now() - t0);
	else if (e > 0)
		sb_log(c->log, SB_LOG_WARNING, "%s gave wrong results on %s (relative error %.1e "
		       "against the host's): another way instead", name, label, e);
	else
		sb_log(c->log, SB_LOG_WARNING, "%s cannot run on %s: another way instead", name, label);
	return *checked > 0;
}

sb_dv sb_cl_attention_scores(sb_bdev *c, sb_cl_attention *a, size_t floats)
{
	if (a->scores.n < floats) {
		if (a->scores.m)
			clReleaseMemObject(a->scores.m);
		a->scores.m = NULL;
		a->scores.n = 0;
		const sb_status st = sb_cl_device_alloc(c->dev, sizeof(float) * floats,
		                                        CL_MEM_READ_WRITE, &a->scores.m);
		if (st != SB_OK) {
			sb_cl_fail(c, st);
			return (sb_dv){NULL, 0};
		}
		a->scores.n = floats;
	}
	return (sb_dv){&a->scores, 0};
}
