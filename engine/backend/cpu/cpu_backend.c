/* The native CPU backend: the host's threads (core/thread_pool.h), matrix products split across
 * them (gemm.h: oneDNN or our kernels, chosen by instruction set, fp32 or bf16), and the
 * vectorised element-wise maths of vmath.c. Device memory is host memory: wrap() uses the
 * weights where they are.
 *
 * Operations run on the calling thread and the pool and are done when they return; nothing
 * here fails but allocation. Every operation splits its range over the pool in pieces large
 * enough to pay for the hand-off; batched ones give each worker whole batch items when there
 * are enough of them, so a frequency row stays in one core's cache from one operation to the
 * next within a row tile (row_tile()).
 *
 * Threads: a device (its pool) is used by one thread at a time, as the interface requires.
 */
#include "backend/backend_impl.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vmath.h"
#include "core/thread_pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sb_bbuf {
	float *p;
	size_t n;
	int owned;
};

enum {
	OP_GEMM, OP_ZERO, OP_COPY, OP_BIAS_ACT, OP_FILL_BIAS, OP_BIAS_COLS, OP_ADD, OP_SCALE_ADD,
	OP_GLU, OP_GLU_ADD, OP_GROUPNORM, OP_GN_TOKENS, OP_LAYERNORM, OP_SOFTMAX, OP_TRANSPOSE,
	OP_ROWS_TOKENS, OP_ADD_ROW_CHANNEL, OP_IM2COL, OP_CONVTR, OP_ATTENTION, OP_UPLOAD,
	OP_DOWNLOAD, OP_RMSNORM, OP_ROPE, OP_HEAD_GATE, OP_STFT, OP_ISTFT, OP_MOMENTS,
	OP_STANDARDISE, OP_GATHER, OP_CMUL, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
	"gemm", "zero", "copy", "bias_act", "fill_bias", "bias_cols", "add", "scale_add", "glu",
	"glu_add", "groupnorm", "groupnorm_tokens", "layernorm", "softmax", "transpose",
	"rows_tokens", "add_row_channel", "im2col_k8s4", "convtr_k8s4", "attention", "upload",
	"download", "rmsnorm", "rope", "head_gate", "stft", "istft", "moments", "standardise",
	"gather", "cmul",
};

struct sb_bdev {
	sb_pool *pool;
	int threads;
	int tile;
	sb_status st;
	int profiling;
	long calls[OP_COUNT];
	double secs[OP_COUNT], flops[OP_COUNT];
	const sb_logger *log;
	float *att;             /* attention scores, one block per thread */
	size_t att_n;
	int bf16;               /* products take bf16 inputs (asked for, and the CPU has them) */
	sb_gemm_ws **ws;        /* packing buffers, one per worker */
};

static inline float *P(sb_dv v)
{
	return v.buf->p + v.off;
}

/* ---- profiling ---- */

static double prof_t0(sb_bdev *d)
{
	return d->profiling ? sb_now() : 0.0;
}

static void prof_add(sb_bdev *d, int op, double t0, double flops)
{
	if (!d->profiling)
		return;
	d->calls[op]++;
	d->secs[op] += sb_now() - t0;
	d->flops[op] += flops;
}

static void set_profiling(sb_bdev *d, int on)
{
	d->profiling = on;
	memset(d->calls, 0, sizeof d->calls);
	memset(d->secs, 0, sizeof d->secs);
	memset(d->flops, 0, sizeof d->flops);
}

static int profile(const sb_bdev *d, sb_prof_entry *out, int max)
{
	return sb_prof_collect(d->calls, d->secs, d->flops, op_names, OP_COUNT, out, max);
}

static const char *describe(const sb_bdev *d)
{
	return sb_gemm_describe(d ? d->bf16 : 0);
}

static void details(const sb_device_props *p, char *buf, size_t len)
{
	(void)p;
	const sb_cpu_features *f = sb_cpu_features_get();
	const int bf16 = sb_gemm_bf16_available();
	snprintf(buf, len, "instructions %s (%s family %u model %u); products: fp32 %s, bf16 %s",
	         f->flags, f->vendor, f->family, f->model, sb_gemm_describe(0),
	         bf16 ? sb_gemm_describe(1) : "not available (runs fp32)");
}

static const char *precision(const sb_bdev *d)
{
	return d->bf16 ? "bf16" : "fp32";
}

/* ---- devices ---- */

static sb_status enumerate(const sb_logger *log, sb_device_props *out, size_t cap, size_t *n)
{
	(void)log;
	if (*n >= cap)
		return SB_OK;
	sb_device_props *p = &out[(*n)++];
	memset(p, 0, sizeof *p);
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	snprintf(p->id, sizeof p->id, "cpu");
	snprintf(p->key, sizeof p->key, "cpu");
	snprintf(p->name, sizeof p->name, "CPU");
	snprintf(p->platform, sizeof p->platform, "native");
	snprintf(p->vendor, sizeof p->vendor, "host");
	snprintf(p->driver, sizeof p->driver, "stembridge");
	p->type = SB_DEV_CPU_NATIVE;
	p->compute_units = nc > 0 ? (unsigned)nc : 1;
	p->global_mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	p->max_alloc = p->global_mem;
	p->index = 0;
	p->platform_index = -1;
	p->device_index = -1;
	snprintf(p->label, sizeof p->label, "CPU (%u thread%s)", p->compute_units,
	         p->compute_units == 1 ? "" : "s");
	return SB_OK;
}

static void cpu_close(sb_bdev *d);

static sb_status cpu_open(const sb_device_props *dev, const sb_open_opts *o, const sb_logger *log,
                          sb_bdev **out)
{
	(void)dev;
	sb_bdev *d = calloc(1, sizeof *d);
	if (!d)
		return SB_ERR_NOMEM;
	sb_status st = sb_pool_new(o ? o->threads : 0, &d->pool);
	if (st != SB_OK) {
		free(d);
		return st;
	}
	d->threads = sb_pool_threads(d->pool);
	d->log = log;
	/* two rows per thread by default: a tile's activations stay in the cores' caches */
	const char *t = getenv("SB_ROW_TILE");
	d->tile = t && atoi(t) >= 0 ? atoi(t) : 2 * d->threads;
	sb_gemm_init();
	if (o && o->precision == SB_PREC_BF16) {
		d->bf16 = sb_gemm_bf16_available();
		static atomic_flag said = ATOMIC_FLAG_INIT; /* once a process: the manifest says it
		                                                for every job */
		if (!d->bf16 && !atomic_flag_test_and_set(&said))
			sb_log(log, SB_LOG_WARNING, "bf16 products need AVX512_BF16, which this CPU (%s) "
			       "lacks: running fp32", sb_cpu_features_get()->flags);
	}
	d->ws = calloc((size_t)d->threads, sizeof *d->ws);
	int have = d->ws != NULL;
	for (int i = 0; have && i < d->threads; i++)
		have = (d->ws[i] = sb_gemm_ws_new(d->bf16)) != NULL;
	if (!have) {
		cpu_close(d);
		sb_log(log, SB_LOG_ERROR, "out of memory (matrix product buffers)");
		return SB_ERR_NOMEM;
	}
	*out = d;
	return SB_OK;
}

static void cpu_close(sb_bdev *d)
{
	if (!d)
		return;
	for (int i = 0; d->ws && i < d->threads; i++)
		sb_gemm_ws_free(d->ws[i]);
	free(d->ws);
	sb_pool_free(d->pool);
	free(d->att);
	free(d);
}

static int cpu_lost(const sb_bdev *d)
{
	(void)d;
	return 0;
}

static sb_status begin_chunk(sb_bdev *d)
{
	(void)d;
	return SB_OK;
}

static int row_tile(const sb_bdev *d)
{
	return d->tile;
}

static int cpu_batch(const sb_bdev *d)
{
	(void)d;
	return 1; /* bench/demucs: B = 2 and 4 gain nothing on the CPU's products */
}

sb_pool *sb_cpu_pool(sb_bdev *d)
{
	return d->pool;
}

/* ---- memory ---- */

static sb_status cpu_alloc(sb_bdev *d, size_t floats, sb_bbuf **out)
{
	sb_bbuf *b = calloc(1, sizeof *b);
	const size_t bytes = (sizeof(float) * (floats ? floats : 1) + 63) / 64 * 64;
	void *p = NULL;
	if (!b || posix_memalign(&p, 64, bytes) != 0) {
		free(b);
		sb_log(d->log, SB_LOG_ERROR, "out of memory (%zu MB)", bytes >> 20);
		return SB_ERR_NOMEM;
	}
	b->p = p;
	b->n = floats;
	b->owned = 1;
	*out = b;
	return SB_OK;
}

static sb_status cpu_wrap(sb_bdev *d, const float *host, size_t floats, sb_bbuf **out)
{
	(void)d;
	sb_bbuf *b = calloc(1, sizeof *b);
	if (!b)
		return SB_ERR_NOMEM;
	b->p = (float *)host; /* read only: the ops never write through a wrapped buffer */
	b->n = floats;
	*out = b;
	return SB_OK;
}

static void cpu_release(sb_bdev *d, sb_bbuf *b)
{
	(void)d;
	if (!b)
		return;
	if (b->owned)
		free(b->p);
	free(b);
}

static void cpu_upload(sb_bdev *d, sb_dv dst, const float *src, size_t n)
{
	const double t0 = prof_t0(d);
	memcpy(P(dst), src, sizeof(float) * n);
	prof_add(d, OP_UPLOAD, t0, 0);
}

static void cpu_download(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	const double t0 = prof_t0(d);
	memcpy(dst, P(src), sizeof(float) * n);
	prof_add(d, OP_DOWNLOAD, t0, 0);
}

static sb_status cpu_finish(sb_bdev *d)
{
	return d->st;
}

static sb_status cpu_status(const sb_bdev *d)
{
	return d->st;
}

static void cpu_clear(sb_bdev *d)
{
	d->st = SB_OK;
}

/* ---- operations ---- */

#define EW_GRAIN 65536

typedef struct {
	float *x, *o;
	const float *y, *b, *g, *w;
	size_t n;
	int C, T, D, act;
	long xs, ys, os;
	int CT;
	double *part;
} ew;

static void k_zero(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	memset(j->x + b, 0, sizeof(float) * (size_t)(e - b));
}

static void op_zero(sb_bdev *d, sb_dv x, size_t n)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x)};
	sb_pool_for(d->pool, (int64_t)n, EW_GRAIN, k_zero, &j);
	prof_add(d, OP_ZERO, t0, 0);
}

static void k_copy(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	memcpy(j->x + b, j->y + b, sizeof(float) * (size_t)(e - b));
}

static void op_copy(sb_bdev *d, sb_dv dst, sb_dv src, size_t n)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(dst), .y = P(src)};
	sb_pool_for(d->pool, (int64_t)n, EW_GRAIN, k_copy, &j);
	prof_add(d, OP_COPY, t0, 0);
}

/* per-channel rows of [..][C][T]: whole rows of T per call */
static void k_bias_act(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->T;
		const float bv = j->b[r % j->C];
		if (j->act == SB_ACT_GELU)
			sb_vbias_gelu(p, j->T, bv);
		else if (j->act == SB_ACT_TANH)
			sb_vbias_tanh(p, j->T, bv);
		else
			for (int t = 0; t < j->T; t++)
				p[t] += bv;
	}
}

/* the items per chunk that make a chunk worth waking a thread for (per_item values each) */
static int64_t grain_for(int64_t per_item)
{
	const int64_t g = EW_GRAIN / (per_item > 0 ? per_item : 1);
	return g > 0 ? g : 1;
}

static int64_t rows_grain(int T) { return grain_for(T); }

static void op_bias_act(sb_bdev *d, sb_dv x, size_t n, int C, int T, sb_dv b, int act)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .b = P(b), .C = C, .T = T, .act = act};
	sb_pool_for(d->pool, (int64_t)(n / (size_t)T), rows_grain(T), k_bias_act, &j);
	prof_add(d, OP_BIAS_ACT, t0, 0);
}

static void k_fill_bias(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->T;
		const float bv = j->b[r % j->C];
		for (int t = 0; t < j->T; t++)
			p[t] = bv;
	}
}

static void op_fill_bias(sb_bdev *d, sb_dv x, size_t n, int C, int T, sb_dv b)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .b = P(b), .C = C, .T = T};
	sb_pool_for(d->pool, (int64_t)(n / (size_t)T), rows_grain(T), k_fill_bias, &j);
	prof_add(d, OP_FILL_BIAS, t0, 0);
}

static void k_bias_cols(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->D;
		if (j->act == SB_ACT_GELU) {
			sb_vbias_gelu_cols(p, j->D, j->b);
		} else if (j->act == SB_ACT_TANH) {
			sb_vbias_tanh_cols(p, j->D, j->b);
		} else {
			for (int c = 0; c < j->D; c++)
				p[c] += j->b[c];
		}
	}
}

static void op_bias_cols(sb_bdev *d, sb_dv x, size_t n, int cols, sb_dv b, int act)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .b = P(b), .D = cols, .act = act};
	sb_pool_for(d->pool, (int64_t)(n / (size_t)cols), rows_grain(cols), k_bias_cols, &j);
	prof_add(d, OP_BIAS_COLS, t0, 0);
}

static void k_add(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t i = b; i < e; i++)
		j->x[i] += j->y[i];
}

static void op_add(sb_bdev *d, sb_dv x, sb_dv y, size_t n)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .y = P(y)};
	sb_pool_for(d->pool, (int64_t)n, EW_GRAIN, k_add, &j);
	prof_add(d, OP_ADD, t0, 0);
}

static void k_scale_add(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->D;
		const float *y = j->y + r * j->D;
		for (int c = 0; c < j->D; c++)
			x[c] += j->g[c] * y[c];
	}
}

static void op_scale_add(sb_bdev *d, sb_dv x, sb_dv y, sb_dv g, size_t n, int D)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .y = P(y), .g = P(g), .D = D};
	sb_pool_for(d->pool, (int64_t)(n / (size_t)D), rows_grain(D), k_scale_add, &j);
	prof_add(d, OP_SCALE_ADD, t0, 0);
}

/* GLU: index space batch * CT, split into whole items where there are enough */
static void k_glu(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	const int64_t CT = j->CT;
	while (b < e) {
		const int64_t item = b / CT, at = b % CT;
		const int64_t len = (e - b) < CT - at ? (e - b) : CT - at;
		const float *z = j->y + item * j->ys + at;
		sb_vglu(z, z + CT, j->o + item * j->os + at, len);
		b += len;
	}
}

static void op_glu(sb_bdev *d, sb_dv z, long zs, sb_dv o, long os, int CT, int batch)
{
	const double t0 = prof_t0(d);
	ew j = {.y = P(z), .ys = zs, .o = P(o), .os = os, .CT = CT};
	sb_pool_for(d->pool, (int64_t)CT * batch, EW_GRAIN, k_glu, &j);
	prof_add(d, OP_GLU, t0, 0);
}

static void k_glu_add(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	const int64_t CT = j->CT, T = j->T;
	/* whole rows of T (a row shares one scale) */
	for (int64_t r = b; r < e; r++) {
		const int64_t item = r / (CT / T), c = r % (CT / T);
		const float *z = j->y + item * j->ys + c * T;
		sb_vglu_add(j->x + item * j->xs + c * T, z, z + CT, j->g[c], T);
	}
}

static void op_glu_add(sb_bdev *d, sb_dv x, long xs, sb_dv z, long zs, int CT, int T,
                       sb_dv scale, int batch)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .xs = xs, .y = P(z), .ys = zs, .CT = CT, .T = T, .g = P(scale)};
	sb_pool_for(d->pool, (int64_t)(CT / T) * batch, rows_grain(T), k_glu_add, &j);
	prof_add(d, OP_GLU_ADD, t0, 0);
}

/* GroupNorm: per batch item, mean and variance in double over its C x T values */
static void gn_item(float *x, int C, int T, const float *w, const float *b, int act)
{
	double s = 0, q = 0;
	sb_vsum_sq(x, (int64_t)C * T, &s, &q);
	const double n = (double)C * T, mean = s / n;
	double var = q / n - mean * mean;
	var = var < 0 ? 0 : var;
	const double rstd = 1.0 / sqrt(var + 1e-5);
	for (int c = 0; c < C; c++)
		sb_vnorm_affine(x + (size_t)c * T, T, (float)mean, (float)(rstd * w[c]), b[c], act);
}

static void k_gn_items(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t i = b; i < e; i++)
		gn_item(j->x + i * j->xs, j->C, j->T, j->w, j->b, j->act);
}

/* one item split across the pool: partial sums per row, then the rows normalised */
static void k_gn_stats(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	ew *j = v;
	for (int64_t r = b; r < e; r++)
		sb_vsum_sq(j->x + r * j->T, j->T, &j->part[2 * r], &j->part[2 * r + 1]);
}

typedef struct {
	float *x;
	const float *w, *b;
	int T, act;
	float mean;
	double rstd;
	int C;
} gn_apply_job;

static void k_gn_apply(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	gn_apply_job *j = v;
	for (int64_t r = b; r < e; r++)
		sb_vnorm_affine(j->x + r * j->T, j->T, j->mean, (float)(j->rstd * j->w[r % j->C]),
		                j->b[r % j->C], j->act);
}

static void gn_split(sb_bdev *d, float *x, int C, int T, const float *w, const float *b,
                     int act, int64_t rows_total, int col_cycle)
{
	/* rows_total rows of T values form one group; channel of row r is r % col_cycle */
	double stack[2 * 4096];
	double *part = rows_total <= 4096 ? stack : malloc(sizeof(double) * 2 * (size_t)rows_total);
	if (!part) {
		d->st = d->st != SB_OK ? d->st : SB_ERR_NOMEM;
		return;
	}
	ew j = {.x = x, .T = T, .part = part};
	sb_pool_for(d->pool, rows_total, rows_grain(T), k_gn_stats, &j);
	double s = 0, q = 0;
	for (int64_t r = 0; r < rows_total; r++) {
		s += part[2 * r];
		q += part[2 * r + 1];
	}
	const double n = (double)rows_total * T, mean = s / n;
	double var = q / n - mean * mean;
	var = var < 0 ? 0 : var;
	gn_apply_job a = {x, w, b, T, act, (float)mean, 1.0 / sqrt(var + 1e-5), col_cycle};
	sb_pool_for(d->pool, rows_total, rows_grain(T), k_gn_apply, &a);
	if (part != stack)
		free(part);
	(void)C;
}

static void op_groupnorm(sb_bdev *d, sb_dv x, long stride, int C, int T, int batch, sb_dv w,
                         sb_dv b, int act)
{
	const double t0 = prof_t0(d);
	if (batch >= d->threads) {
		ew j = {.x = P(x), .xs = stride, .C = C, .T = T, .w = P(w), .b = P(b), .act = act};
		sb_pool_for(d->pool, batch, grain_for((int64_t)C * T), k_gn_items, &j);
	} else {
		for (int i = 0; i < batch; i++)
			gn_split(d, P(x) + (size_t)i * stride, C, T, P(w), P(b), act, C, C);
	}
	prof_add(d, OP_GROUPNORM, t0, 0);
}

/* tokens [n][D]: one group over everything, affine per column (rows of D as T, column c) */
typedef struct {
	float *x;
	const float *w, *b;
	int D;
	float mean;
	double rstd;
} gnt_job;

static void k_gnt_apply(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	gnt_job *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->D;
		for (int c = 0; c < j->D; c++)
			p[c] = (p[c] - j->mean) * (float)(j->rstd * j->w[c]) + j->b[c];
	}
}

static void op_groupnorm_tokens(sb_bdev *d, sb_dv x, size_t n, int D, sb_dv w, sb_dv b)
{
	const double t0 = prof_t0(d);
	double stack[2 * 4096];
	double *part = n <= 4096 ? stack : malloc(sizeof(double) * 2 * n);
	if (!part) {
		d->st = d->st != SB_OK ? d->st : SB_ERR_NOMEM;
		return;
	}
	ew j = {.x = P(x), .T = D, .part = part};
	sb_pool_for(d->pool, (int64_t)n, rows_grain(D), k_gn_stats, &j);
	double s = 0, q = 0;
	for (size_t r = 0; r < n; r++) {
		s += part[2 * r];
		q += part[2 * r + 1];
	}
	const double cnt = (double)n * D, mean = s / cnt;
	double var = q / cnt - mean * mean;
	var = var < 0 ? 0 : var;
	gnt_job a = {P(x), P(w), P(b), D, (float)mean, 1.0 / sqrt(var + 1e-5)};
	sb_pool_for(d->pool, (int64_t)n, rows_grain(D), k_gnt_apply, &a);
	if (part != stack)
		free(part);
	prof_add(d, OP_GN_TOKENS, t0, 0);
}

static void k_layernorm(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		const float *p = j->x + r * j->D;
		float *o = j->o + r * j->D;
		double s = 0, q = 0;
		sb_vsum_sq(p, j->D, &s, &q);
		const double mean = s / j->D;
		double var = q / j->D - mean * mean;
		var = var < 0 ? 0 : var;
		const float m = (float)mean, rs = (float)(1.0 / sqrt(var + 1e-5));
		for (int c = 0; c < j->D; c++)
			o[c] = (p[c] - m) * rs * j->w[c] + j->b[c];
	}
}

static void op_layernorm(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w, sb_dv b)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .o = P(o), .D = D, .w = P(w), .b = P(b)};
	sb_pool_for(d->pool, (int64_t)rows, rows_grain(D), k_layernorm, &j);
	prof_add(d, OP_LAYERNORM, t0, 0);
}

static void k_softmax(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) {
		float *p = j->x + r * j->D;
		const float m = sb_vmax(p, j->D);
		const float s = sb_vexp_sum(p, j->D, m);
		sb_vscale(p, j->D, 1.f / s);
	}
}

static void op_softmax(sb_bdev *d, sb_dv x, size_t rows, int n)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .D = n};
	sb_pool_for(d->pool, (int64_t)rows, rows_grain(n), k_softmax, &j);
	prof_add(d, OP_SOFTMAX, t0, 0);
}

/* transpose in 32 x 32 blocks, parallel over block rows */
typedef struct {
	const float *in;
	float *out;
	int R, C;
} tr_job;

static void k_transpose(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	tr_job *j = v;
	for (int64_t rb = b; rb < e; rb++) {
		const int r0 = (int)rb * 32, r1 = r0 + 32 < j->R ? r0 + 32 : j->R;
		for (int c0 = 0; c0 < j->C; c0 += 32) {
			const int c1 = c0 + 32 < j->C ? c0 + 32 : j->C;
			for (int r = r0; r < r1; r++)
				for (int c = c0; c < c1; c++)
					j->out[(size_t)c * j->R + r] = j->in[(size_t)r * j->C + c];
		}
	}
}

static void op_transpose(sb_bdev *d, sb_dv in, sb_dv out, int R, int C)
{
	const double t0 = prof_t0(d);
	tr_job j = {P(in), P(out), R, C};
	sb_pool_for(d->pool, (R + 31) / 32, grain_for((int64_t)32 * C), k_transpose, &j);
	prof_add(d, OP_TRANSPOSE, t0, 0);
}

/* rows [F][C][T] <-> tokens [T F][C]: per row f, a C x T transpose into a strided target */
typedef struct {
	const float *x;
	float *o;
	int F, C, T, back;
} rt_job;

static void k_rows_tokens(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	rt_job *j = v;
	for (int64_t f = b; f < e; f++)
		for (int c = 0; c < j->C; c++)
			for (int t = 0; t < j->T; t++) {
				const size_t row = ((size_t)f * j->C + c) * j->T + t;
				const size_t tok = ((size_t)t * j->F + f) * j->C + c;
				if (j->back)
					j->o[row] = j->x[tok];
				else
					j->o[tok] = j->x[row];
			}
}

static void op_rows_tokens(sb_bdev *d, sb_dv x, sb_dv o, int F, int C, int T, int back)
{
	const double t0 = prof_t0(d);
	rt_job j = {P(x), P(o), F, C, T, back};
	sb_pool_for(d->pool, F, grain_for((int64_t)C * T), k_rows_tokens, &j);
	prof_add(d, OP_ROWS_TOKENS, t0, 0);
}

static void k_add_row_channel(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	for (int64_t r = b; r < e; r++) { /* r = f C + c */
		float *p = j->x + r * j->T;
		const float ev = j->y[r];
		for (int t = 0; t < j->T; t++)
			p[t] += ev;
	}
}

static void op_add_row_channel(sb_bdev *d, sb_dv x, int F, int C, int T, sb_dv emb)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .y = P(emb), .T = T};
	sb_pool_for(d->pool, (int64_t)F * C, rows_grain(T), k_add_row_channel, &j);
	prof_add(d, OP_ADD_ROW_CHANNEL, t0, 0);
}

typedef struct {
	const float *x, *p, *b;
	float *o;
	long lin, lout, length;
	int cin, cout, act;
} conv_job;

static void k_im2col(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	conv_job *j = v;
	for (int64_t row = b; row < e; row++) {
		const int ci = (int)(row / 8), k = (int)(row % 8);
		const float *x = j->x + (size_t)ci * j->lin;
		float *col = j->o + (size_t)row * j->lout;
		for (long t = 0; t < j->lout; t++) {
			const long idx = 4 * t + k - 2;
			col[t] = idx >= 0 && idx < j->lin ? x[idx] : 0.f;
		}
	}
}

static void op_im2col(sb_bdev *d, sb_dv x, long lin, int cin, sb_dv col, long lout)
{
	const double t0 = prof_t0(d);
	conv_job j = {.x = P(x), .o = P(col), .lin = lin, .lout = lout, .cin = cin};
	sb_pool_for(d->pool, (int64_t)cin * 8, grain_for(lout), k_im2col, &j);
	prof_add(d, OP_IM2COL, t0, 0);
}

static void k_convtr(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	conv_job *j = v;
	for (int64_t co = b; co < e; co++) {
		float *o = j->o + (size_t)co * j->length;
		for (long to = 0; to < j->length; to++) {
			const long u = to + 2, t1 = u >> 2, t2 = t1 - 1;
			const int k1 = (int)(u & 3);
			float val = j->b[co];
			if (t1 < j->lin)
				val += j->p[((size_t)k1 * j->cout + co) * j->lin + t1];
			if (t2 >= 0 && t2 < j->lin)
				val += j->p[((size_t)(k1 + 4) * j->cout + co) * j->lin + t2];
			o[to] = val;
		}
		if (j->act)
			sb_vbias_gelu(o, j->length, 0.f);
	}
}

static void op_convtr(sb_bdev *d, sb_dv p, long lin, int cout, long length, sb_dv b, int act,
                      sb_dv o)
{
	const double t0 = prof_t0(d);
	conv_job j = {.p = P(p), .b = P(b), .o = P(o), .lin = lin, .length = length, .cout = cout,
	              .act = act};
	sb_pool_for(d->pool, cout, grain_for(length), k_convtr, &j);
	prof_add(d, OP_CONVTR, t0, 0);
}

/* ---- attention: tasks of one head and a block of queries, each on one thread, so that the
 * block's scores stay in its core's cache from the product to the softmax to the next product */

#define ATT_ROWS 256

typedef struct {
	sb_gemm_ws *const *ws;
	const float *q, *k, *v;
	float *o, *s;
	int ldq, ldkv, ldo, nq, nk, hd, heads, blocks;
	long sq, skv, so;
	float scale;
} att_job;

static void k_attention(void *vj, int64_t b, int64_t e, int wk)
{
	const att_job *j = vj;
	sb_gemm_ws *ws = j->ws[wk];
	float *s = j->s + (size_t)wk * ATT_ROWS * (size_t)j->nk;
	for (int64_t task = b; task < e; task++) {
		const int64_t item = task / ((int64_t)j->heads * j->blocks);
		const int h = (int)(task / j->blocks % j->heads);
		const int q0 = (int)(task % j->blocks) * ATT_ROWS;
		const int m = j->nq - q0 < ATT_ROWS ? j->nq - q0 : ATT_ROWS;
		const float *q = j->q + item * j->sq, *k = j->k + item * j->skv,
		            *v = j->v + item * j->skv;
		sb_sgemm(ws, 0, 1, m, j->nk, j->hd, j->scale, q + (size_t)q0 * j->ldq + (size_t)h * j->hd,
		         j->ldq, k + (size_t)h * j->hd, j->ldkv, 0.f, s, j->nk);
		/* the softmax's division goes to the product's hd outputs of a row, not its nk
		 * scores: one pass over the scores fewer (they do not fit a core's L2) */
		float inv[ATT_ROWS];
		for (int r = 0; r < m; r++) {
			float *row = s + (size_t)r * j->nk;
			inv[r] = 1.f / sb_vexp_sum(row, j->nk, sb_vmax(row, j->nk));
		}
		float *o = j->o + item * j->so + (size_t)q0 * j->ldo + (size_t)h * j->hd;
		sb_sgemm(ws, 0, 0, m, j->hd, j->nk, 1.f, s, j->nk, v + (size_t)h * j->hd, j->ldkv, 0.f,
		         o, j->ldo);
		for (int r = 0; r < m; r++)
			sb_vscale(o + (size_t)r * j->ldo, j->hd, inv[r]);
	}
}

static void op_attention(sb_bdev *d, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so)
{
	if (nq <= 0 || nk <= 0 || heads <= 0 || batch <= 0 || d->st != SB_OK)
		return;
	const double t0 = prof_t0(d);
	const size_t need = (size_t)d->threads * ATT_ROWS * (size_t)nk;
	if (d->att_n < need) {
		float *s = realloc(d->att, sizeof(float) * need);
		if (!s) {
			d->st = SB_ERR_NOMEM;
			return;
		}
		d->att = s;
		d->att_n = need;
	}
	att_job j = {d->ws, P(q), P(k), P(v), P(o), d->att, ldq, ldkv, ldo, nq, nk, hd, heads,
	             (nq + ATT_ROWS - 1) / ATT_ROWS, sq, skv, so, scale};
	sb_pool_for(d->pool, (int64_t)batch * heads * j.blocks, 1, k_attention, &j);
	prof_add(d, OP_ATTENTION, t0, 4.0 * nq * nk * hd * heads * batch);
}

/* ---- the RoFormers' operations ---- */

static void k_rmsnorm(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	ew *j = v;
	const double sd = sqrt((double)j->D);
	for (int64_t r = b; r < e; r++) {
		const float *p = j->x + r * j->D;
		float *o = j->o + r * j->D;
		double s = 0, q = 0;
		sb_vsum_sq(p, j->D, &s, &q);
		const double nrm = sqrt(q);
		const float a = (float)(sd / (nrm > 1e-12 ? nrm : 1e-12));
		for (int c = 0; c < j->D; c++)
			o[c] = p[c] * a * j->w[c];
	}
}

static void op_rmsnorm(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w)
{
	const double t0 = prof_t0(d);
	ew j = {.x = P(x), .o = P(o), .D = D, .w = P(w)};
	sb_pool_for(d->pool, (int64_t)rows, rows_grain(D), k_rmsnorm, &j);
	prof_add(d, OP_RMSNORM, t0, 0);
}

typedef struct {
	float *x;
	const float *cs;
	int ld, cols, hd, div, mod;
} rope_job;

static void k_rope(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const rope_job *j = v;
	const int half = j->hd / 2;
	for (int64_t r = b; r < e; r++) {
		float *x = j->x + r * j->ld;
		const float *cs = j->cs + (size_t)((r / j->div) % j->mod) * (size_t)j->hd;
		for (int i = 0; i < j->cols / 2; i++) {
			const float c = cs[2 * (i % half)], s = cs[2 * (i % half) + 1];
			const float x0 = x[2 * i], x1 = x[2 * i + 1];
			x[2 * i] = x0 * c - x1 * s;
			x[2 * i + 1] = x1 * c + x0 * s;
		}
	}
}

static void op_rope(sb_bdev *d, sb_dv x, size_t rows, int ld, int cols, int hd, sb_dv cs,
                    int div, int mod)
{
	const double t0 = prof_t0(d);
	rope_job j = {P(x), P(cs), ld, cols, hd, div > 0 ? div : 1, mod > 0 ? mod : 1};
	sb_pool_for(d->pool, (int64_t)rows, rows_grain(cols), k_rope, &j);
	prof_add(d, OP_ROPE, t0, 0);
}

typedef struct {
	float *x;
	const float *g;
	int ldx, ldg, heads, hd;
} gate_job;

static void k_head_gate(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const gate_job *j = v;
	for (int64_t r = b; r < e; r++)
		for (int h = 0; h < j->heads; h++) {
			const float s = 1.f / (1.f + expf(-j->g[r * j->ldg + h]));
			sb_vscale(j->x + r * j->ldx + (int64_t)h * j->hd, j->hd, s);
		}
}

static void op_head_gate(sb_bdev *d, sb_dv x, int ldx, sb_dv g, int ldg, size_t rows,
                         int heads, int hd)
{
	const double t0 = prof_t0(d);
	gate_job j = {P(x), P(g), ldx, ldg, heads, hd};
	sb_pool_for(d->pool, (int64_t)rows, rows_grain(heads * hd), k_head_gate, &j);
	prof_add(d, OP_HEAD_GATE, t0, 0);
}

/* ---- matrix products ---- */

typedef struct {
	sb_gemm_ws *const *ws;
	int M, N, K, lda, ldb, ldc, tb;
	float alpha, beta;
	const float *A, *B;
	float *C;
	long sa, sb, sc;
} gemm_job;

static void k_gemm_items(void *v, int64_t b, int64_t e, int wk)
{
	gemm_job *j = v;
	for (int64_t i = b; i < e; i++)
		sb_sgemm(j->ws[wk], 0, j->tb, j->M, j->N, j->K, j->alpha, j->A + i * j->sa, j->lda,
		         j->B + i * j->sb, j->ldb, j->beta, j->C + i * j->sc, j->ldc);
}

static void op_gemm(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                    sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                    int batch, int batch2, long sa2, long sb2, long sc2)
{
	if (M <= 0 || N <= 0 || batch <= 0 || batch2 <= 0)
		return;
	const double t0 = prof_t0(d);
	for (int j = 0; j < batch2; j++) {
		gemm_job g = {d->ws, M, N, K, lda, ldb, ldc, tb, alpha, beta, P(A) + j * sa2, P(B) + j * sb2,
		              P(C) + j * sc2, sa, sb, sc};
		if (batch >= d->threads && batch > 1) {
			/* products too small to be worth a wake-up run on this thread */
			const int64_t mnk = (int64_t)M * N * K, small = 4 * 65536;
			sb_pool_for(d->pool, batch, mnk < small ? (small + mnk - 1) / mnk : 1, k_gemm_items,
			            &g);
		} else {
			for (int i = 0; i < batch; i++)
				sb_sgemm_par(d->pool, d->ws, 0, tb, M, N, K, alpha, g.A + i * sa, lda, g.B + i * sb, ldb,
				             beta, g.C + i * sc, ldc);
		}
	}
	prof_add(d, OP_GEMM, t0, 2.0 * M * N * K * batch * batch2);
}

/* ---- signal operations (cpu_signal.c) ---- */

static void op_stft(sb_bdev *d, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
                    float scale, sb_dv X)
{
	const double t0 = prof_t0(d);
	if (d->st == SB_OK && sb_cpu_stft(d->pool, g, P(x), xs, ch, L, P(w), scale, P(X)) != SB_OK)
		d->st = SB_ERR_NOMEM;
	prof_add(d, OP_STFT, t0, 0);
}

static void op_istft(sb_bdev *d, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w,
                     float scale, int e0, int e1, sb_dv o, long os, int add, sb_dv work)
{
	const double t0 = prof_t0(d);
	if (d->st == SB_OK && sb_cpu_istft(d->pool, g, P(X), ch, L, P(w), scale, e0, e1, P(o), os,
	                                   add, P(work)) != SB_OK)
		d->st = SB_ERR_NOMEM;
	prof_add(d, OP_ISTFT, t0, 0);
}

static void op_moments(sb_bdev *d, sb_dv x, size_t n, sb_dv stats)
{
	const double t0 = prof_t0(d);
	sb_cpu_moments(P(x), n, P(stats));
	prof_add(d, OP_MOMENTS, t0, 0);
}

static void op_standardise(sb_bdev *d, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
                           int inverse)
{
	const double t0 = prof_t0(d);
	sb_cpu_standardise(d->pool, P(x), P(o), n, P(stats), eps, inverse);
	prof_add(d, OP_STANDARDISE, t0, 0);
}

static void op_gather(sb_bdev *d, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
                      sb_dv ptr, sb_dv idx, sb_dv w)
{
	const double t0 = prof_t0(d);
	sb_cpu_gather(d->pool, P(x), ldx, P(o), ldo, rows, n, P(ptr), P(idx), P(w));
	prof_add(d, OP_GATHER, t0, 0);
}

static void op_cmul(sb_bdev *d, sb_dv a, long sa, sb_dv c, sb_dv o, long so, size_t n,
                    int batch)
{
	const double t0 = prof_t0(d);
	sb_cpu_cmul(d->pool, P(a), sa, P(c), P(o), so, n, batch);
	prof_add(d, OP_CMUL, t0, 0);
}

static const sb_ops cpu_ops = {
	op_gemm, op_zero, op_copy, op_bias_act, op_fill_bias, op_bias_cols, op_add, op_scale_add,
	op_glu, op_glu_add, op_groupnorm, op_groupnorm_tokens, op_layernorm, op_softmax,
	op_transpose, op_rows_tokens, op_add_row_channel, op_im2col, op_convtr, op_attention,
	op_rmsnorm, op_rope, op_head_gate, op_stft, op_istft, op_moments, op_standardise,
	op_gather, op_cmul,
};

const sb_backend sb_backend_cpu_impl = {
	.api = SB_BACKEND_API,
	.name = "cpu",
	.enumerate = enumerate,
	.open = cpu_open,
	.close = cpu_close,
	.lost = cpu_lost,
	.begin_chunk = begin_chunk,
	.row_tile = row_tile,
	.batch = cpu_batch,
	.alloc = cpu_alloc,
	.wrap = cpu_wrap,
	.release = cpu_release,
	.upload = cpu_upload,
	.download = cpu_download,
	.finish = cpu_finish,
	.status = cpu_status,
	.clear = cpu_clear,
	.ops = &cpu_ops,
	.classic = &sb_cpu_classic_ops,
	.set_profiling = set_profiling,
	.profile = profile,
	.describe = describe,
	.precision = precision,
	.details = details,
};
