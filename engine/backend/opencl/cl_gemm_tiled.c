/* The register-tiled matrix product (cl_gemm_tiled.h): the per-device table of tilings, one
 * build of gemm.cl per tiling, and the launch that picks a tiling and gemm.cl's float4 paths
 * for each product.
 */
#include "backend/opencl/cl_gemm_tiled.h"

#include "backend/opencl/cl_base.h"
#include "gemm_cl.h" /* generated: gemm.cl's source */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	int tm, tn, tk, wm, wn; /* gemm.cl's TM, TN, TK, WM, WN */
} tiling;

/* Tilings by vendor, the first match wins: NVIDIA's measured on an H100, each shape's best of
 * the two (128 x 128 tiles of 8 x 8 an item, K by 8, where there is a tile per compute unit and
 * no side within half a tile; 128 x 64 of 8 x 4, K by 16, elsewhere); elsewhere a moderate
 * default that fits any OpenCL 1.2 GPU's 32 KiB, its small tiling taking products of a side of
 * 32 or less too; a thin tiling for products of few rows (HTDemucs's convolutions of 6 to 48
 * output channels), taking a product whose M is at most half the tiling it would have had and
 * which it pads less. README.md here has the figures. */
static const struct {
	const char *vendor; /* a substring of CL_DEVICE_VENDOR; NULL: any */
	tiling big, small;  /* small: for fewer big tiles than compute units, or a side of the
	                       product within half a big tile; zeros: none */
	tiling thin;        /* for products of few rows (take()); zeros: none */
} table[] = {
	{"NVIDIA", {128, 128, 8, 8, 8}, {128, 64, 16, 8, 4}, {16, 128, 8, 4, 8}},
	{NULL, {64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}, {16, 64, 16, 4, 4}},
};

#define NT 3 /* big, small, thin */

struct sb_cl_tiled {
	tiling t[NT];     /* big, small, thin; tm 0: none */
	cl_program prog[NT];
	cl_kernel k[NT];
	char word[NT][24]; /* the profile's path for each: "tiled 16x128" */
	unsigned cus;     /* compute units: fewer big tiles than this take the small tiling */
	char desc[256];
};

static int items(const tiling *t)
{
	return (t->tm / t->wm) * (t->tn / t->wn);
}

static size_t local_bytes(const tiling *t)
{
	return sizeof(float) * 2 * (size_t)t->tk * (size_t)(t->tm + 4 + t->tn + 4);
}

/* NULL when d can run t under gemm.cl's rules, else why not */
static const char *unfit(const tiling *t, size_t max_wg, cl_ulong local_mem)
{
	if (t->tm <= 0 || t->tn <= 0 || t->tk <= 0 || t->wm <= 0 || t->wn <= 0)
		return "a size is not positive";
	if (t->wm % 4 || t->wn % 4 || t->tk % 4)
		return "WM, WN and TK must be multiples of 4";
	if (t->tm % t->wm || t->tn % t->wn)
		return "TM and TN must be multiples of WM and WN";
	if ((size_t)items(t) > max_wg)
		return "more items than the device's work-group";
	if (local_bytes(t) > local_mem)
		return "more local memory than the device has";
	return NULL;
}

static int parse_tiling(const char *s, tiling *t)
{
	char tail = 0;
	const int n = sscanf(s, "%d,%d,%d,%d,%d%c", &t->tm, &t->tn, &t->tk, &t->wm, &t->wn, &tail);
	return n == 5 || (n == 6 && tail == ';');
}

const char *sb_cl_tiled_source(void)
{
	return (const char *)gemm_cl;
}

void sb_cl_tiled_free(sb_cl_tiled *t)
{
	if (!t)
		return;
	for (int i = 0; i < NT; i++) {
		if (t->k[i])
			clReleaseKernel(t->k[i]);
		if (t->prog[i])
			clReleaseProgram(t->prog[i]);
	}
	free(t);
}

const char *sb_cl_tiled_describe(const sb_cl_tiled *t)
{
	return t->desc;
}

sb_status sb_cl_tiled_open(sb_bdev *c, sb_cl_tiled **out)
{
	*out = NULL;
	const sb_device *p = sb_cl_device_props(c->dev);
	cl_device_id id = sb_cl_device_id(c->dev);
	size_t max_wg = 256;
	cl_ulong local_mem = 32768;
	clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
	clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, NULL);
	sb_cl_tiled *t = calloc(1, sizeof *t);
	if (!t)
		return SB_ERR_NOMEM;
	size_t row = 0;
	while (table[row].vendor && !strstr(p->vendor, table[row].vendor))
		row++;
	t->t[0] = table[row].big;
	t->t[1] = table[row].small;
	t->t[2] = table[row].thin;
	t->cus = p->compute_units ? p->compute_units : 1;
	const char *env = sb_knob_get("SB_CL_TILE");
	if (env && *env) {
		tiling w[NT] = {{0}, {0}, {0}};
		const char *why = NULL;
		const char *at = env;
		for (int i = 0; at && !why; i++) {
			if (i == NT || !parse_tiling(at, &w[i]))
				why = "not TM,TN,TK,WM,WN[;TM,TN,TK,WM,WN[;TM,TN,TK,WM,WN]]";
			else
				why = unfit(&w[i], max_wg, local_mem);
			at = strchr(at, ';');
			at = at ? at + 1 : NULL;
		}
		if (why)
			sb_log(c->log, SB_LOG_WARNING, "SB_CL_TILE='%s' ignored: %s", env, why);
		else
			memcpy(t->t, w, sizeof w);
	}
	for (int i = 0; i < NT; i++) {
		if (t->t[i].tm <= 0)
			continue;
		const char *why = unfit(&t->t[i], max_wg, local_mem);
		if (why) {
			sb_log(c->log, SB_LOG_WARNING, "the tiled product's %dx%dx%d tiling does not fit "
			       "%s (%s)", t->t[i].tm, t->t[i].tn, t->t[i].tk, p->label, why);
			sb_cl_tiled_free(t);
			return SB_ERR_DEVICE;
		}
		char opts[160];
		snprintf(opts, sizeof opts, "-cl-std=CL1.2 -cl-mad-enable -DTM=%d -DTN=%d -DTK=%d "
		         "-DWM=%d -DWN=%d", t->t[i].tm, t->t[i].tn, t->t[i].tk, t->t[i].wm, t->t[i].wn);
		sb_status st = sb_cl_device_build(c->dev, "gemm", (const char *)gemm_cl, opts,
		                                  &t->prog[i], NULL);
		if (st == SB_OK)
			st = sb_cl_device_kernel(c->dev, t->prog[i], "gemm_tiled", &t->k[i]);
		if (st != SB_OK) {
			sb_cl_tiled_free(t);
			return st;
		}
		snprintf(t->word[i], sizeof t->word[i], "tiled %dx%d", t->t[i].tm, t->t[i].tn);
	}
	int at = snprintf(t->desc, sizeof t->desc, "tiled kernel %dx%dx%d (%dx%d an item)",
	                  t->t[0].tm, t->t[0].tn, t->t[0].tk, t->t[0].wm, t->t[0].wn);
	if (t->t[1].tm > 0)
		at += snprintf(t->desc + at, sizeof t->desc - (size_t)at, ", %dx%dx%d (%dx%d) below %u "
		               "tiles or a side within half a tile", t->t[1].tm, t->t[1].tn,
		               t->t[1].tk, t->t[1].wm, t->t[1].wn, t->cus);
	if (t->t[2].tm > 0)
		snprintf(t->desc + at, sizeof t->desc - (size_t)at, ", %dx%dx%d (%dx%d) for few rows",
		         t->t[2].tm, t->t[2].tn, t->t[2].tk, t->t[2].wm, t->t[2].wn);
	*out = t;
	return SB_OK;
}

static long tiles(const tiling *t, int M, int N, int batch)
{
	return (long)((M + t->tm - 1) / t->tm) * ((N + t->tn - 1) / t->tn) * batch;
}

/* the values of an M x N product padded to whole tiles of t */
static long padded(const tiling *t, int M, int N)
{
	return (long)(M + t->tm - 1) / t->tm * t->tm * ((N + t->tn - 1) / t->tn * t->tn);
}

/* The tiling for M x N (batch items): the small one where the big one would leave compute units
 * idle, or use half a tile or less along a side the small one covers in fewer; then the thin one
 * where M is within half of that tiling's rows and the thin one pads the product less. */
static int take(const sb_cl_tiled *t, int M, int N, int batch)
{
	const tiling *b = &t->t[0], *s = &t->t[1], *h = &t->t[2];
	int w = s->tm > 0 && (tiles(b, M, N, batch) < (long)t->cus ||
	                      (N <= b->tn / 2 && s->tn < b->tn) || (M <= b->tm / 2 && s->tm < b->tm));
	if (h->tm > 0 && M <= t->t[w].tm / 2 && padded(h, M, N) < padded(&t->t[w], M, N))
		w = 2;
	return w;
}

void sb_cl_tiled_table(char *buf, size_t len)
{
	int at = 0;
	for (size_t i = 0; i < sizeof table / sizeof table[0] && at >= 0 && (size_t)at < len; i++) {
		const tiling *b = &table[i].big, *s = &table[i].small, *h = &table[i].thin;
		at += snprintf(buf + at, len - (size_t)at, "%s %d,%d,%d,%d,%d;%d,%d,%d,%d,%d;"
		               "%d,%d,%d,%d,%d ", table[i].vendor ? table[i].vendor : "*", b->tm, b->tn,
		               b->tk, b->wm, b->wn, s->tm, s->tn, s->tk, s->wm, s->wn, h->tm, h->tn,
		               h->tk, h->wm, h->wn);
	}
}

const char *sb_cl_tiled_gemm(sb_bdev *c, sb_cl_tiled *t, int M, int N, int K, float alpha,
                             sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, int tb,
                             float beta, sb_dv C, int ldc, long sc, int batch, const sb_bias *e)
{
	const int w = take(t, M, N, batch);
	const tiling *g = &t->t[w];
	const int flags = sb_cl_gemm_flags(A, lda, sa, B, ldb, sb, C, ldc, sc);
	kargs a = {c, t->k[w], K_GEMM, 0.0, 0, CL_SUCCESS};
	a_gemm(&a, M, N, K, alpha, A, lda, sa, B, ldb, sb, tb, beta, C, ldc, sc);
	a_i32(&a, flags);
	a_ep(&a, e, C);
	const size_t dn = (size_t)(g->tn / g->wn), dm = (size_t)(g->tm / g->wm);
	const size_t gs[3] = {(size_t)(N + g->tn - 1) / g->tn * dn,
	                      (size_t)(M + g->tm - 1) / g->tm * dm, (size_t)batch};
	const size_t l[3] = {dn, dm, 1};
	a.flops = 2.0 * M * N * K * batch;
	sb_cl_run(&a, 3, gs, l);
	return t->word[w];
}
