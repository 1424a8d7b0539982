/* The OpenCL backend's base (cl_base.h): a kernel's launch and the first failure kept, the
 * operations' program, the norms' statistics in slices, a kernel's check against the host, and
 * profiling. */
#include "backend/opencl/cl_base.h"

#include "ops_cl.h" /* generated: the kernels' source */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sb_cl_op_names[P_COUNT] = {
	"gemm", "add", "glu", "norm_part", "norm_final", "gn_apply", "gn_apply_tokens", "layernorm",
	"softmax_rows", "transpose", "ften_to_tokens", "tokens_to_ften", "add_freq_emb",
	"im2col_time", "convtr_gather", "rmsnorm", "rope", "head_gate", "stft_frames", "istft_frames", "istft_ola",
	"moments_final", "standardise", "gather_cols", "cmul", "bias_items", "gn_glu_add",
	"copy_rows", "permute4", "ng_stats", "ng_apply", "dwconv", "mul", "lstm_cell", "rmsnorm_seg",
	"att_gate",
	"attention_16", "attention_32", "attention_64", "attention_mma", "attention_tiles",
	"upload", "download", "copy", "zero", "finish",
};

void sb_cl_fail(sb_bdev *d, sb_status st)
{
	if (d->st == SB_OK)
		d->st = st;
}

void sb_cl_fail_cl(sb_bdev *c, cl_int err, const char *what)
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
		sb_cl_fail_cl(c, a->err, "setting kernel arguments");
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
	c->counts.launches++;
	const cl_int err = clEnqueueNDRangeKernel(c->q, a->k, dims, NULL, g, l, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		sb_cl_fail_cl(c, err, "enqueueing a kernel");
	sb_cl_prof_end(c, a->id, t0, a->flops);
}

static void CL_CALLBACK free_copy(cl_event ev, cl_int status, void *copy)
{
	(void)ev;
	(void)status;
	free(copy);
}

/* A blocking write would wait for all the work ahead of it in the queue (a pass another device
 * won, still running: the next pass's upload could not begin, nor stop, until it ended). */
void sb_cl_write(sb_bdev *c, cl_mem m, size_t off, const void *src, size_t bytes,
                 const char *what)
{
	if (c->st != SB_OK || !bytes)
		return;
	c->counts.uploads++;
	c->counts.bytes_up += (double)bytes;
	void *copy = malloc(bytes);
	cl_event ev = NULL;
	cl_int err = CL_SUCCESS;
	if (copy) {
		memcpy(copy, src, bytes);
		err = clEnqueueWriteBuffer(c->q, m, CL_FALSE, off, bytes, copy, 0, NULL, &ev);
		if (err == CL_SUCCESS &&
		    clSetEventCallback(ev, CL_COMPLETE, free_copy, copy) != CL_SUCCESS) {
			sb_cl_waited(c);
			clWaitForEvents(1, &ev); /* no callback: wait, then free it here */
			free(copy);
		} else if (err != CL_SUCCESS) {
			free(copy);
		}
		if (ev)
			clReleaseEvent(ev);
	} else {
		sb_cl_waited(c);
		err = clEnqueueWriteBuffer(c->q, m, CL_TRUE, off, bytes, src, 0, NULL, NULL);
	}
	if (err != CL_SUCCESS)
		sb_cl_fail(c, sb_cl_status(c->dev, err, what));
}

/* ---- the operations' program ---- */

const char *sb_cl_ops_source(void)
{
	return (const char *)ops_cl;
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
	const char *rw = sb_knob_get("SB_CL_RED_WG"); /* a bench's override */
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
	return SB_OK;
}

/* ---- checks against the host ---- */

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
	sb_cl_waited(c);
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
	sb_cl_waited(c);
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

/* ---- the norms' statistics ---- */

void sb_cl_need_stats(sb_bdev *c, size_t items)
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
		sb_cl_need_stats(c, (size_t)batch); /* what norm_part or norm_final writes */
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

/* 1 when every row of the operand starts 16-byte aligned in every batch item */
static int aligned4(sb_dv x, int ld, long stride)
{
	return x.off % 4 == 0 && ld % 4 == 0 && stride % 4 == 0;
}

int sb_cl_gemm_flags(sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, sb_dv C, int ldc,
                     long sc)
{
	return aligned4(A, lda, sa) | aligned4(B, ldb, sb) << 1 | aligned4(C, ldc, sc) << 2;
}

/* ---- profiling ---- */

double sb_cl_prof_begin(sb_bdev *c)
{
	if (!c->profiling)
		return 0.0;
	clFinish(c->q);
	return sb_now();
}

void sb_cl_prof_end(sb_bdev *c, int id, double t0, double flops)
{
	if (!c->profiling)
		return;
	clFinish(c->q);
	c->prof_calls[id]++;
	c->prof_s[id] += sb_now() - t0;
	c->prof_flops[id] += flops;
}

void sb_cl_prof_product(sb_bdev *c, double t0, int M, int N, int K, int tb, int batch, int bias,
                        const char *path)
{
	if (!c->profiling)
		return;
	clFinish(c->q);
	sb_prof_shape_add(&c->prof_shapes, M, N, K, tb, batch, bias, path, sb_now() - t0);
}

