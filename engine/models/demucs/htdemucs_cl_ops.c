/* The OpenCL path's state and kernel launches (see htdemucs_cl_internal.h): the net's weights
 * uploaded once into one buffer, htdemucs.cl built through the device's kernel cache, and one
 * function per kernel. A failure is kept in the state and every later launch of the same
 * forward is skipped, so the forward reads as straight-line code and checks once at the end
 * (and before every download, so nothing reads a half-computed buffer).
 */
#include "models/demucs/htdemucs_cl_internal.h"

#include "htdemucs_cl.h" /* generated: the kernels' source */

#include <stdlib.h>
#include <string.h>

static const char *const kernel_names[P_COUNT] = {
	"gemm", "bias_act", "fill_bias", "bias_cols", "add", "glu", "glu_add", "norm_stats",
	"gn_apply", "gn_apply_tokens", "layernorm", "softmax_rows", "scale_add", "transpose",
	"ften_to_tokens", "tokens_to_ften", "add_freq_emb", "im2col_time", "convtr_gather",
	"upload", "download",
};

static void fail(sb_htdemucs_cl *c, cl_int err, const char *what)
{
	if (c->st == SB_OK)
		c->st = sb_cl_status(c->dev, err, what);
}

/* ---- arguments ---- */

typedef struct {
	sb_htdemucs_cl *c;
	cl_kernel k;
	int id;
	double flops; /* for the profile (matrix products) */
	cl_uint i;
	cl_int err;
} kargs;

static kargs args(sb_htdemucs_cl *c, int kernel)
{
	kargs a = {c, c->k[kernel], kernel, 0.0, 0, CL_SUCCESS};
	return a;
}

/* ---- profiling: the queue drained around each step, wall time per entry ---- */

static double prof_begin(sb_htdemucs_cl *c)
{
	if (!c->profiling)
		return 0.0;
	clFinish(c->q);
	return sb_now();
}

static void prof_end(sb_htdemucs_cl *c, int id, double t0, double flops)
{
	if (!c->profiling)
		return;
	clFinish(c->q);
	c->prof_calls[id]++;
	c->prof_s[id] += sb_now() - t0;
	c->prof_flops[id] += flops;
}

void sb_htdemucs_cl_set_profiling(sb_htdemucs_cl *c, int on)
{
	c->profiling = on;
	memset(c->prof_calls, 0, sizeof c->prof_calls);
	memset(c->prof_s, 0, sizeof c->prof_s);
	memset(c->prof_flops, 0, sizeof c->prof_flops);
}

int sb_htdemucs_cl_profile(const sb_htdemucs_cl *c, sb_htdemucs_cl_prof *out, int max)
{
	int n = 0;
	for (int i = 0; i < P_COUNT && n < max; i++)
		if (c->prof_calls[i]) {
			int at = n++;
			while (at > 0 && out[at - 1].seconds < c->prof_s[i]) {
				out[at] = out[at - 1];
				at--;
			}
			out[at] = (sb_htdemucs_cl_prof){kernel_names[i], c->prof_calls[i], c->prof_s[i],
			                                c->prof_flops[i]};
		}
	return n;
}

const char *sb_htdemucs_cl_gemm(const sb_htdemucs_cl *c)
{
	return sb_cl_gemm_name(c->gemm);
}

static void set(kargs *a, size_t size, const void *p)
{
	if (a->err == CL_SUCCESS)
		a->err = clSetKernelArg(a->k, a->i, size, p);
	a->i++;
}

static void a_db(kargs *a, hd_db b)
{
	cl_ulong off = b.off;
	set(a, sizeof b.m, &b.m);
	set(a, sizeof off, &off);
}

static void a_w(kargs *a, const float *host)
{
	a_db(a, hd_cl_w(a->c, host));
}

static void a_i32(kargs *a, int v)
{
	cl_int x = v;
	set(a, sizeof x, &x);
}

static void a_i64(kargs *a, long v)
{
	cl_long x = v;
	set(a, sizeof x, &x);
}

static void a_u64(kargs *a, size_t v)
{
	cl_ulong x = v;
	set(a, sizeof x, &x);
}

static void a_f32(kargs *a, float v)
{
	cl_float x = v;
	set(a, sizeof x, &x);
}

static void a_mem(kargs *a, cl_mem m)
{
	set(a, sizeof m, &m);
}

static size_t round_up(size_t n, size_t m)
{
	return (n + m - 1) / m * m;
}

/* Enqueue with global sizes rounded up to the local ones (NULL local: 1-D, 256). */
static void run(kargs *a, cl_uint dims, const size_t *global, const size_t *local)
{
	sb_htdemucs_cl *c = a->c;
	if (c->st != SB_OK)
		return;
	if (a->err != CL_SUCCESS) {
		fail(c, a->err, "htdemucs: setting kernel arguments");
		return;
	}
	size_t g[3], l[3] = {256, 1, 1};
	for (cl_uint d = 0; d < dims; d++) {
		if (local)
			l[d] = local[d];
		g[d] = round_up(global[d] ? global[d] : 1, l[d]);
	}
	const double t0 = prof_begin(c);
	const cl_int err = clEnqueueNDRangeKernel(c->q, a->k, dims, NULL, g, l, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "htdemucs: enqueueing a kernel");
	prof_end(c, a->id, t0, a->flops);
}

/* ---- state ---- */

static int cmp_ptr(const void *a, const void *b)
{
	const float *x = *(const float *const *)a, *y = *(const float *const *)b;
	return x < y ? -1 : x > y;
}

hd_db hd_cl_w(sb_htdemucs_cl *c, const float *host)
{
	/* the last array starting at or before host */
	int lo = 0, hi = c->n_w - 1, at = -1;
	while (lo <= hi) {
		const int mid = (lo + hi) / 2;
		if (c->wptr[mid] <= host) {
			at = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (at >= 0 && host < c->wptr[at] + c->wlen[at])
		return (hd_db){c->weights, c->woff[at] + (size_t)(host - c->wptr[at])};
	/* an array that is not one of the net's: a bug, reported rather than crashing */
	if (c->st == SB_OK) {
		sb_log(c->log, SB_LOG_ERROR, "htdemucs: internal error: weight not on the device");
		c->st = SB_ERR_DEVICE;
	}
	return (hd_db){c->weights, 0};
}

void sb_htdemucs_cl_free(sb_htdemucs_cl *c)
{
	if (!c)
		return;
	if (c->q)
		clFinish(c->q);
	for (int i = 0; i < c->n_blocks; i++)
		clReleaseMemObject(c->blocks[i].m);
	for (int i = 0; i < K_COUNT; i++)
		if (c->k[i])
			clReleaseKernel(c->k[i]);
	if (c->prog)
		clReleaseProgram(c->prog);
	if (c->weights)
		clReleaseMemObject(c->weights);
	if (c->stats)
		clReleaseMemObject(c->stats);
	free(c->wptr);
	free(c->woff);
	free(c->wlen);
	free(c);
}

sb_status sb_htdemucs_cl_new(const sb_htdemucs *net, sb_cl_device *dev, const sb_logger *log,
                             sb_htdemucs_cl **out)
{
	*out = NULL;
	sb_htdemucs_cl *c = calloc(1, sizeof *c);
	if (!c)
		return SB_ERR_NOMEM;
	c->net = net;
	c->dev = dev;
	c->q = sb_cl_device_queue(dev);
	c->log = log;
	c->gemm = sb_cl_gemm_choose(dev);
	sb_log(log, SB_LOG_INFO, "htdemucs: matrix products on %s through %s",
	       sb_cl_device_props(dev)->label, sb_cl_gemm_name(c->gemm));
	sb_status st;
	/* a power of two the device allows for the reductions */
	size_t max_wg = 256;
	clGetDeviceInfo(sb_cl_device_id(dev), CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
	                NULL);
	c->red_wg = 256;
	while (c->red_wg > max_wg)
		c->red_wg /= 2;
	char opts[64];
	snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DRED_WG=%zu", c->red_wg);
	st = sb_cl_device_build(dev, "htdemucs", (const char *)htdemucs_cl, opts, &c->prog, NULL);
	for (int i = 0; st == SB_OK && i < K_COUNT; i++)
		st = sb_cl_device_kernel(dev, c->prog, kernel_names[i], &c->k[i]);
	if (st == SB_OK && max_wg < 256) {
		sb_log(log, SB_LOG_ERROR, "htdemucs: the device's work-groups (%zu) are smaller than the "
		       "16 x 16 of the matrix product", max_wg);
		st = SB_ERR_DEVICE;
	}
	/* the weights: every array the net owns, sorted by address for lookups */
	size_t total = 0;
	if (st == SB_OK) {
		c->n_w = net->n_owned;
		c->wptr = malloc(sizeof *c->wptr * (size_t)c->n_w);
		c->woff = malloc(sizeof *c->woff * (size_t)c->n_w);
		c->wlen = malloc(sizeof *c->wlen * (size_t)c->n_w);
		if (!c->wptr || !c->woff || !c->wlen)
			st = SB_ERR_NOMEM;
	}
	if (st == SB_OK) {
		for (int i = 0; i < c->n_w; i++)
			c->wptr[i] = net->owned[i];
		qsort(c->wptr, (size_t)c->n_w, sizeof *c->wptr, cmp_ptr);
		for (int i = 0; i < c->n_w; i++) {
			int j = 0;
			while (net->owned[j] != c->wptr[i])
				j++;
			c->woff[i] = total;
			c->wlen[i] = net->owned_n[j];
			total += round_up(net->owned_n[j], 16); /* 64-byte aligned starts */
		}
		st = sb_cl_device_alloc(dev, sizeof(float) * total, CL_MEM_READ_ONLY, &c->weights);
	}
	for (int i = 0; st == SB_OK && i < c->n_w; i++) {
		int j = 0;
		while (net->owned[j] != c->wptr[i])
			j++;
		const cl_int err = clEnqueueWriteBuffer(c->q, c->weights, CL_FALSE,
		                                        sizeof(float) * c->woff[i],
		                                        sizeof(float) * net->owned_n[j], c->wptr[i], 0,
		                                        NULL, NULL);
		if (err != CL_SUCCESS)
			st = sb_cl_status(dev, err, "htdemucs: uploading the weights");
	}
	if (st == SB_OK) {
		const cl_int err = clFinish(c->q);
		if (err != CL_SUCCESS)
			st = sb_cl_status(dev, err, "htdemucs: uploading the weights");
	}
	if (st != SB_OK) {
		if (st == SB_ERR_NOMEM)
			sb_log(log, SB_LOG_ERROR, "htdemucs: out of memory");
		sb_htdemucs_cl_free(c);
		return st;
	}
	*out = c;
	return SB_OK;
}

/* ---- buffers ---- */

hd_db hd_cl_alloc(sb_htdemucs_cl *c, size_t floats)
{
	hd_db none = {NULL, 0};
	if (c->st != SB_OK)
		return none;
	const size_t bytes = sizeof(float) * (floats ? floats : 16);
	int best = -1;
	for (int i = 0; i < c->n_blocks; i++)
		if (!c->blocks[i].used && c->blocks[i].bytes >= bytes &&
		    (best < 0 || c->blocks[i].bytes < c->blocks[best].bytes))
			best = i;
	if (best >= 0 && c->blocks[best].bytes <= 2 * bytes + 65536) {
		c->blocks[best].used = 1;
		return (hd_db){c->blocks[best].m, 0};
	}
	if (c->n_blocks == HD_CL_MAX_BLOCKS) {
		int drop = -1;
		for (int i = 0; i < c->n_blocks; i++)
			if (!c->blocks[i].used && (drop < 0 || c->blocks[i].bytes > c->blocks[drop].bytes))
				drop = i;
		if (drop < 0) {
			sb_log(c->log, SB_LOG_ERROR, "htdemucs: too many device buffers");
			c->st = SB_ERR_DEVICE;
			return none;
		}
		clReleaseMemObject(c->blocks[drop].m);
		c->blocks[drop] = c->blocks[--c->n_blocks];
	}
	cl_mem m;
	sb_status st = sb_cl_device_alloc(c->dev, bytes, CL_MEM_READ_WRITE, &m);
	if (st != SB_OK && c->n_blocks) {
		/* out of device memory: give back the cached buffers no one uses, then try again */
		for (int i = c->n_blocks - 1; i >= 0; i--)
			if (!c->blocks[i].used) {
				clReleaseMemObject(c->blocks[i].m);
				c->blocks[i] = c->blocks[--c->n_blocks];
			}
		st = sb_cl_device_alloc(c->dev, bytes, CL_MEM_READ_WRITE, &m);
	}
	if (st != SB_OK) {
		c->st = st;
		return none;
	}
	c->blocks[c->n_blocks++] = (hd_dblock){m, bytes, 1};
	return (hd_db){m, 0};
}

void hd_cl_release(sb_htdemucs_cl *c, hd_db b)
{
	for (int i = 0; b.m && i < c->n_blocks; i++)
		if (c->blocks[i].m == b.m) {
			c->blocks[i].used = 0;
			return;
		}
}

void hd_cl_zero(sb_htdemucs_cl *c, hd_db b, size_t floats)
{
	if (c->st != SB_OK || !floats)
		return;
	const cl_float zero = 0.f;
	const cl_int err = clEnqueueFillBuffer(c->q, b.m, &zero, sizeof zero, sizeof(float) * b.off,
	                                       sizeof(float) * floats, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "htdemucs: clearing a buffer");
}

sb_status hd_cl_dften_alloc(sb_htdemucs_cl *c, hd_dften *x, int F, int C, int T)
{
	x->F = F;
	x->C = C;
	x->T = T;
	const size_t row = (size_t)C * T;
	x->base = hd_cl_alloc(c, (size_t)(F + 2 * HD_FPAD) * row);
	hd_cl_zero(c, x->base, HD_FPAD * row);
	hd_cl_zero(c, hd_drow(x, F), HD_FPAD * row);
	return c->st;
}

void hd_cl_dften_free(sb_htdemucs_cl *c, hd_dften *x)
{
	hd_cl_release(c, x->base);
	x->base.m = NULL;
}

void hd_cl_upload(sb_htdemucs_cl *c, hd_db dst, const float *src, size_t floats)
{
	if (c->st != SB_OK)
		return;
	const double t0 = prof_begin(c);
	const cl_int err = clEnqueueWriteBuffer(c->q, dst.m, CL_TRUE, sizeof(float) * dst.off,
	                                        sizeof(float) * floats, src, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "htdemucs: uploading");
	prof_end(c, P_UPLOAD, t0, 0.0);
}

void hd_cl_download(sb_htdemucs_cl *c, float *dst, hd_db src, size_t floats)
{
	if (c->st != SB_OK)
		return;
	const double t0 = prof_begin(c);
	const cl_int err = clEnqueueReadBuffer(c->q, src.m, CL_TRUE, sizeof(float) * src.off,
	                                       sizeof(float) * floats, dst, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		fail(c, err, "htdemucs: downloading");
	prof_end(c, P_DOWNLOAD, t0, 0.0);
}

/* ---- kernels ---- */

void hd_cl_gemm(sb_htdemucs_cl *c, int M, int N, int K, float alpha, hd_db A, int lda, long sa,
                hd_db B, int ldb, long sb, int tb, float beta, hd_db C, int ldc, long sc,
                int batch)
{
	if (M <= 0 || N <= 0 || batch <= 0 || c->st != SB_OK)
		return;
	if (c->gemm == SB_CL_GEMM_CLBLAST) {
		const double t0 = prof_begin(c);
		const sb_status st = sb_cl_sgemm(c->dev, M, N, K, alpha, A.m, A.off, lda, sa, B.m, B.off,
		                                 ldb, sb, tb, beta, C.m, C.off, ldc, sc, batch);
		prof_end(c, K_GEMM, t0, 2.0 * M * N * K * batch);
		if (st == SB_OK)
			return;
		if (st != SB_ERR_UNSUPPORTED) {
			c->st = st;
			return;
		}
		/* CLBlast refused (logged): the own kernel from now on, still on this device */
		sb_log(c->log, SB_LOG_WARNING, "htdemucs: matrix products through the own kernel "
		       "from now on");
		c->gemm = SB_CL_GEMM_OWN;
	}
	kargs a = args(c, K_GEMM);
	a_i32(&a, M);
	a_i32(&a, N);
	a_i32(&a, K);
	a_f32(&a, alpha);
	a_db(&a, A);
	a_i32(&a, lda);
	a_i64(&a, sa);
	a_db(&a, B);
	a_i32(&a, ldb);
	a_i64(&a, sb);
	a_i32(&a, tb);
	a_f32(&a, beta);
	a_db(&a, C);
	a_i32(&a, ldc);
	a_i64(&a, sc);
	const size_t g[3] = {(size_t)(N + 63) / 64 * 16, (size_t)(M + 63) / 64 * 16, (size_t)batch};
	const size_t l[3] = {16, 16, 1};
	a.flops = 2.0 * M * N * K * batch;
	run(&a, 3, g, l);
}

void hd_cl_bias_act(sb_htdemucs_cl *c, hd_db x, size_t n, int C, int T, const float *b, int act)
{
	kargs a = args(c, K_BIAS_ACT);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, C);
	a_i32(&a, T);
	a_w(&a, b);
	a_i32(&a, act);
	run(&a, 1, &n, NULL);
}

void hd_cl_fill_bias(sb_htdemucs_cl *c, hd_db x, size_t n, int C, int T, const float *b)
{
	kargs a = args(c, K_FILL_BIAS);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, C);
	a_i32(&a, T);
	a_w(&a, b);
	run(&a, 1, &n, NULL);
}

void hd_cl_bias_cols(sb_htdemucs_cl *c, hd_db x, size_t n, int cols, const float *b, int act)
{
	kargs a = args(c, K_BIAS_COLS);
	a_db(&a, x);
	a_u64(&a, n);
	a_i32(&a, cols);
	a_w(&a, b);
	a_i32(&a, act);
	run(&a, 1, &n, NULL);
}

void hd_cl_add(sb_htdemucs_cl *c, hd_db x, hd_db y, size_t n)
{
	kargs a = args(c, K_ADD);
	a_db(&a, x);
	a_db(&a, y);
	a_u64(&a, n);
	run(&a, 1, &n, NULL);
}

void hd_cl_glu(sb_htdemucs_cl *c, hd_db z, long zstride, hd_db out, long ostride, int CT,
               int batch)
{
	kargs a = args(c, K_GLU);
	a_db(&a, z);
	a_i64(&a, zstride);
	a_db(&a, out);
	a_i64(&a, ostride);
	a_i32(&a, CT);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	run(&a, 2, g, l);
}

void hd_cl_glu_add(sb_htdemucs_cl *c, hd_db x, long xstride, hd_db z, long zstride, int CT,
                   int T, const float *scale, int batch)
{
	kargs a = args(c, K_GLU_ADD);
	a_db(&a, x);
	a_i64(&a, xstride);
	a_db(&a, z);
	a_i64(&a, zstride);
	a_i32(&a, CT);
	a_i32(&a, T);
	a_w(&a, scale);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	run(&a, 2, g, l);
}

/* the stats buffer holds mean and rstd for every batch item of the current norm */
static void need_stats(sb_htdemucs_cl *c, size_t items)
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

static void stats(sb_htdemucs_cl *c, hd_db x, long stride, long n, int batch)
{
	need_stats(c, (size_t)batch);
	kargs a = args(c, K_NORM_STATS);
	a_db(&a, x);
	a_i64(&a, stride);
	a_i64(&a, n);
	a_mem(&a, c->stats);
	const size_t g = (size_t)batch * c->red_wg, l = c->red_wg;
	run(&a, 1, &g, &l);
}

void hd_cl_groupnorm(sb_htdemucs_cl *c, hd_db x, long stride, int C, int T, int batch,
                     const float *w, const float *b, int act)
{
	const int CT = C * T;
	stats(c, x, stride, CT, batch);
	kargs a = args(c, K_GN_APPLY);
	a_db(&a, x);
	a_i64(&a, stride);
	a_i32(&a, CT);
	a_i32(&a, T);
	a_mem(&a, c->stats);
	a_w(&a, w);
	a_w(&a, b);
	a_i32(&a, act);
	const size_t g[2] = {(size_t)CT, (size_t)batch}, l[2] = {256, 1};
	run(&a, 2, g, l);
}

void hd_cl_groupnorm_tokens(sb_htdemucs_cl *c, hd_db x, size_t n, int D, const float *w,
                            const float *b)
{
	const size_t total = n * (size_t)D;
	stats(c, x, 0, (long)total, 1);
	kargs a = args(c, K_GN_APPLY_TOKENS);
	a_db(&a, x);
	a_u64(&a, total);
	a_i32(&a, D);
	a_mem(&a, c->stats);
	a_w(&a, w);
	a_w(&a, b);
	run(&a, 1, &total, NULL);
}

void hd_cl_layernorm(sb_htdemucs_cl *c, hd_db x, hd_db out, size_t n, int D, const float *w,
                     const float *b)
{
	kargs a = args(c, K_LAYERNORM);
	a_db(&a, x);
	a_db(&a, out);
	a_i32(&a, D);
	a_w(&a, w);
	a_w(&a, b);
	const size_t g = n * c->red_wg, l = c->red_wg;
	run(&a, 1, &g, &l);
}

void hd_cl_softmax(sb_htdemucs_cl *c, hd_db x, size_t rows, int n)
{
	kargs a = args(c, K_SOFTMAX);
	a_db(&a, x);
	a_i32(&a, n);
	const size_t g = rows * c->red_wg, l = c->red_wg;
	run(&a, 1, &g, &l);
}

void hd_cl_scale_add(sb_htdemucs_cl *c, hd_db x, hd_db y, const float *g, size_t n, int D)
{
	kargs a = args(c, K_SCALE_ADD);
	a_db(&a, x);
	a_db(&a, y);
	a_w(&a, g);
	a_u64(&a, n);
	a_i32(&a, D);
	run(&a, 1, &n, NULL);
}

void hd_cl_transpose(sb_htdemucs_cl *c, hd_db in, hd_db out, int R, int Cc)
{
	kargs a = args(c, K_TRANSPOSE);
	a_db(&a, in);
	a_db(&a, out);
	a_i32(&a, R);
	a_i32(&a, Cc);
	const size_t g[2] = {(size_t)Cc, (size_t)R}, l[2] = {16, 16};
	run(&a, 2, g, l);
}

void hd_cl_ften_tokens(sb_htdemucs_cl *c, hd_db x, hd_db out, int Fr, int C, int T, int back)
{
	kargs a = args(c, back ? K_TOKENS_TO_FTEN : K_FTEN_TO_TOKENS);
	a_db(&a, x);
	a_db(&a, out);
	a_i32(&a, Fr);
	a_i32(&a, C);
	a_i32(&a, T);
	const size_t g[3] = {(size_t)T, (size_t)C, (size_t)Fr}, l[3] = {64, 1, 1};
	run(&a, 3, g, l);
}

void hd_cl_add_freq_emb(sb_htdemucs_cl *c, hd_db x, int F, int C, int T, const float *emb)
{
	kargs a = args(c, K_ADD_FREQ_EMB);
	a_db(&a, x);
	a_i32(&a, C);
	a_i32(&a, T);
	a_w(&a, emb);
	const size_t g[3] = {(size_t)T, (size_t)C, (size_t)F}, l[3] = {64, 1, 1};
	run(&a, 3, g, l);
}

void hd_cl_im2col_time(sb_htdemucs_cl *c, hd_db x, long lin, int cin, hd_db col, long lout)
{
	kargs a = args(c, K_IM2COL_TIME);
	a_db(&a, x);
	a_i64(&a, lin);
	a_db(&a, col);
	a_i64(&a, lout);
	const size_t g[2] = {(size_t)lout, (size_t)cin * 8}, l[2] = {256, 1};
	run(&a, 2, g, l);
}

void hd_cl_convtr_gather(sb_htdemucs_cl *c, hd_db p, long lin, int cout, long length,
                         const float *b, int act, hd_db out)
{
	kargs a = args(c, K_CONVTR_GATHER);
	a_db(&a, p);
	a_i64(&a, lin);
	a_i32(&a, cout);
	a_i64(&a, length);
	a_w(&a, b);
	a_i32(&a, act);
	a_db(&a, out);
	const size_t g[2] = {(size_t)length, (size_t)cout}, l[2] = {256, 1};
	run(&a, 2, g, l);
}

void hd_cl_linear(sb_htdemucs_cl *c, hd_db x, size_t n, int in, const float *w, const float *b,
                  int out, hd_db y, int act)
{
	hd_cl_gemm(c, (int)n, out, in, 1.f, x, in, 0, hd_cl_w(c, w), in, 0, 1, 0.f, y, out, 0, 1);
	hd_cl_bias_cols(c, y, n * (size_t)out, out, b, act);
}
