/* The native CPU backend: the host's threads (core/thread_pool.h), matrix products split across
 * them (gemm.h: oneDNN or our kernels, chosen by instruction set, fp32 or bf16), and the
 * vectorised element-wise maths of vmath.c. Device memory is host memory: wrap() uses the
 * weights where they are.
 *
 * This file is the device: its properties, opening and closing it, memory, the profile and the
 * sb_backend table. The operations are in cpu_ops.c (element-wise, norms, layouts, the
 * RoFormers' and the signal operations), cpu_products.c (matrix products and attention) and
 * cpu_signal.c (STFT and the rest of the signal arithmetic).
 *
 * Threads: a device (its pool) is used by one thread at a time, as the interface requires.
 */
#include "backend/backend_impl.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/gemm.h"
#include "core/thread_pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* how far below a GPU's feeding thread the CPU's threads run beside it (sb_open_opts.beside):
 * at +10 the scheduler gives a nice-0 thread sharing a core about 90 % of it; the environment's
 * SB_CPU_BESIDE_NICE overrides it (0: none, for the bench's comparison) */
#define SB_CPU_BESIDE_NICE 10

/* ---- profiling ---- */

/* in the order of the OP_ enum (cpu_internal.h) */
static const char *const op_names[OP_COUNT] = {
	"gemm", "zero", "copy", "bias_cols", "add", "glu", "glu_add", "groupnorm",
	"groupnorm_tokens", "layernorm", "softmax", "transpose",
	"rows_tokens", "add_row_channel", "im2col_k8s4", "convtr_k8s4", "attention", "upload",
	"download", "rmsnorm", "rope", "head_gate", "stft", "istft", "moments", "standardise",
	"gather", "cmul", "lstm", "copy_rows", "permute", "norm_groups", "dwconv", "mul",
	"rmsnorm_seg",
};

static void set_profiling(sb_bdev *d, int on)
{
	d->profiling = on;
	memset(d->calls, 0, sizeof d->calls);
	memset(d->secs, 0, sizeof d->secs);
	memset(d->flops, 0, sizeof d->flops);
	memset(&d->shapes, 0, sizeof d->shapes);
}

static int profile(const sb_bdev *d, sb_prof_entry *out, int max)
{
	return sb_prof_collect(d->calls, d->secs, d->flops, op_names, OP_COUNT, out, max);
}

static int profile_products(const sb_bdev *d, sb_prof_product *out, int max)
{
	return sb_prof_shapes_collect(&d->shapes, out, max);
}

static const char *describe(const sb_bdev *d)
{
	return sb_gemm_describe(d ? d->bf16 : 0);
}

static void details(const sb_device *p, char *buf, size_t len)
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

static sb_status enumerate(const sb_logger *log, sb_device *out, size_t cap, size_t *n)
{
	(void)log;
	if (*n >= cap)
		return SB_OK;
	sb_device *p = &out[(*n)++];
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

static sb_status cpu_open(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
                          sb_bdev **out)
{
	(void)dev;
	sb_bdev *d = calloc(1, sizeof *d);
	if (!d)
		return SB_ERR_NOMEM;
	/* Beside GPUs (sb_open_opts.beside) the CPU is the helper: each GPU's feeding thread keeps
	 * a core, and the pool's threads run below it, so that a GPU runs as fast as alone (a CPU
	 * on every thread slowed an H100's segments: bench/gpu/README.md). */
	const int beside = o && o->beside > 0 ? o->beside : 0;
	int threads = o ? o->threads : 0;
	if (threads <= 0 && beside > 0) {
		const long nc = sysconf(_SC_NPROCESSORS_ONLN);
		threads = nc > beside + 1 ? (int)nc - beside : 1;
	}
	const char *ns = sb_knob_get("SB_CPU_BESIDE_NICE");
	const int nice = !beside ? 0 : ns && *ns ? atoi(ns) : SB_CPU_BESIDE_NICE;
	sb_status st = sb_pool_new(threads, nice, &d->pool);
	if (st != SB_OK) {
		free(d);
		return st;
	}
	d->threads = sb_pool_threads(d->pool);
	d->log = log;
	if (beside)
		sb_log(log, SB_LOG_INFO, "the CPU beside %d GPU%s: %d thread%s, %d of them (all but the "
		       "job's own) at nice +%d below %s feeding thread%s", beside, beside == 1 ? "" : "s",
		       d->threads, d->threads == 1 ? "" : "s", d->threads - 1, nice > 0 ? nice : 0,
		       beside == 1 ? "its" : "their", beside == 1 ? "" : "s");
	/* two rows per thread by default: a tile's activations stay in the cores' caches */
	const char *t = sb_knob_get("SB_ROW_TILE");
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

/* the work has run: the read-back is done at once */
static void cpu_fetch(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	cpu_download(d, dst, src, n);
}

static sb_status cpu_finish(sb_bdev *d)
{
	return d->st;
}

/* operations run on return: there is nothing to give up waiting for */
static sb_status cpu_drain(sb_bdev *d, const atomic_int *const *stop, int n)
{
	return sb_stop_set(stop, n) ? SB_ERR_CANCELLED : d->st;
}

static sb_status cpu_status(const sb_bdev *d)
{
	return d->st;
}

static void cpu_clear(sb_bdev *d)
{
	d->st = SB_OK;
}

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
	.fetch = cpu_fetch,
	.finish = cpu_finish,
	.drain = cpu_drain,
	.status = cpu_status,
	.clear = cpu_clear,
	.ops = &sb_cpu_ops,
	.classic = &sb_cpu_classic_ops,
	.set_profiling = set_profiling,
	.profile = profile,
	.profile_products = profile_products,
	.describe = describe,
	.precision = precision,
	.details = details,
};
