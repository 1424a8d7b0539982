/* The OpenCL backend (backend.h): any device an OpenCL driver offers (NVIDIA, AMD, Intel, PoCL
 * on a CPU). The device itself (context, in-order queue, kernel cache, error mapping, fault
 * injection) is cl_device.c; the folder reads one way above it: the base every file calls
 * (cl_base.c: launches, checks, profiling), the kernels over it (products in cl_gemm_*.c and
 * CLBlast's in cl_blas.c, attention in cl_attention.c, the signal operations in cl_signal.c,
 * the built-in separator's group in cl_classic.c), the dispatcher that chooses among them
 * (cl_ops.c), and this file, the sb_backend on top.
 *
 * Threads: a device is used by one thread at a time (the worker that opened it).
 */
#include "backend/opencl/cl_attention.h"
#include "backend/opencl/cl_classic.h"
#include "backend/opencl/cl_gemm_mma.h"
#include "backend/opencl/cl_gemm_pick.h"
#include "backend/opencl/cl_gemm_tiled.h"
#include "backend/opencl/cl_ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int wait_way(const sb_bdev *d);

/* a read fetch() enqueued: into tmp (ours) first, into the caller's dst once its pass ended */
struct cl_fetch {
	float *dst, *tmp;
	size_t n;
};


static sb_status cl_open(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
                         sb_bdev **out)
{
	*out = NULL;
	sb_bdev *d = calloc(1, sizeof *d);
	if (!d)
		return SB_ERR_NOMEM;
	d->want_bf16 = o && o->precision == SB_PREC_BF16;
	sb_status st = sb_cl_device_open(dev, log, &d->dev);
	if (st != SB_OK) {
		free(d);
		return st;
	}
	d->q = sb_cl_device_queue(d->dev);
	d->log = sb_cl_device_logger(d->dev);
	d->wait_way = wait_way(d);
	*out = d;
	return SB_OK;
}

static void cl_close(sb_bdev *d)
{
	if (!d)
		return;
	/* what the queue still runs keeps what it uses; sb_cl_device_close() waits for it */
	for (int i = 0; i < K_COUNT; i++)
		if (d->k[i])
			clReleaseKernel(d->k[i]);
	if (d->prog)
		clReleaseProgram(d->prog);
	sb_cl_attention_free(d->attention);
	sb_cl_pick_free(d->att_pick);
	sb_cl_pick_free(d->pick);
	sb_cl_tiled_free(d->tiled);
	sb_cl_mma_free(d->mma);
	sb_cl_mma_free(d->tf32);
	if (d->parts)
		clReleaseMemObject(d->parts);
	if (d->stats)
		clReleaseMemObject(d->stats);
	if (d->tw)
		clReleaseMemObject(d->tw);
	sb_cl_device_close(d->dev);
	for (int i = 0; i < d->n_fetch; i++)
		free(d->fetch[i].tmp);
	free(d->fetch);
	free(d);
}

static int cl_lost(const sb_bdev *d)
{
	return sb_cl_device_is_lost(d->dev);
}

static sb_status cl_begin_chunk(sb_bdev *d)
{
	return sb_cl_device_count_chunk(d->dev);
}

static int cl_row_tile(const sb_bdev *d)
{
	(void)d;
	return 0; /* every row in one launch: launches are what a GPU pays for */
}

/* Segments or chunks a pass: 1 on every OpenCL device, measured the fastest (README.md here:
 * the defaults' measurements); --batch still asks for more. */
static int cl_batch(const sb_bdev *d)
{
	(void)d;
	return 1;
}

static sb_status cl_alloc(sb_bdev *d, size_t floats, sb_bbuf **out)
{
	*out = NULL;
	sb_bbuf *b = calloc(1, sizeof *b);
	if (!b)
		return SB_ERR_NOMEM;
	sb_status st = sb_cl_device_alloc(d->dev, sizeof(float) * (floats ? floats : 16),
	                                  CL_MEM_READ_WRITE, &b->m);
	if (st != SB_OK) {
		free(b);
		return st;
	}
	b->n = floats;
	*out = b;
	return SB_OK;
}

static sb_status cl_wrap(sb_bdev *d, const float *host, size_t floats, sb_bbuf **out)
{
	*out = NULL;
	sb_bbuf *b = calloc(1, sizeof *b);
	if (!b)
		return SB_ERR_NOMEM;
	sb_status st = sb_cl_device_alloc(d->dev, sizeof(float) * (floats ? floats : 16),
	                                  CL_MEM_READ_ONLY, &b->m);
	if (st == SB_OK && floats) {
		/* no wait: the host's copy outlives the buffer and never changes (backend.h); the
		 * placement waits once for all of its weights (models/resident.c) */
		const cl_int err = clEnqueueWriteBuffer(d->q, b->m, CL_FALSE, 0, sizeof(float) * floats,
		                                        host, 0, NULL, NULL);
		st = sb_cl_status(d->dev, err, "uploading");
		if (st != SB_OK)
			clReleaseMemObject(b->m);
		else {
			d->counts.uploads++;
			d->counts.bytes_up += sizeof(float) * (double)floats;
		}
	}
	if (st != SB_OK) {
		free(b);
		return st;
	}
	b->n = floats;
	*out = b;
	return SB_OK;
}

static void cl_release(sb_bdev *d, sb_bbuf *b)
{
	(void)d;
	if (!b)
		return;
	if (b->m)
		clReleaseMemObject(b->m);
	free(b);
}

/* The caller's memory is free again on return, but the host does not wait for the device
 * (sb_cl_write). */
static void cl_upload(sb_bdev *d, sb_dv dst, const float *src, size_t n)
{
	if (d->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(d);
	sb_cl_write(d, dst.buf->m, sizeof(float) * dst.off, src, sizeof(float) * n, "uploading");
	sb_cl_prof_end(d, P_UPLOAD, t0, 0.0);
}

static void cl_download(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	if (d->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(d);
	d->counts.downloads++;
	d->counts.bytes_down += sizeof(float) * (double)n;
	sb_cl_waited(d);
	const cl_int err = clEnqueueReadBuffer(d->q, src.buf->m, CL_TRUE, sizeof(float) * src.off,
	                                       sizeof(float) * n, dst, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		sb_cl_fail(d, sb_cl_status(d->dev, err, "downloading"));
	sb_cl_prof_end(d, P_DOWNLOAD, t0, 0.0);
}

/* ---- read-backs and passes: one wait a pass (issue #50) ---- */

struct sb_bpass {
	cl_event end;          /* a marker after the pass's work and reads; NULL: none made */
	sb_status st;          /* the pass's first failure while it was enqueued */
	struct cl_fetch *f;
	int nf;
	long enq;              /* the device's launches and transfers when it ended */
};

static long enqueued(const sb_bdev *d)
{
	return d->counts.launches + d->counts.uploads + d->counts.downloads;
}

static void cl_fetch(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	if (d->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(d);
	if (d->n_fetch == d->cap_fetch) {
		const int cap = d->cap_fetch ? 2 * d->cap_fetch : 4;
		struct cl_fetch *f = realloc(d->fetch, sizeof *f * (size_t)cap);
		if (!f) {
			sb_cl_fail(d, SB_ERR_NOMEM);
			return;
		}
		d->fetch = f;
		d->cap_fetch = cap;
	}
	float *tmp = malloc(sizeof(float) * n);
	if (!tmp) {
		sb_cl_fail(d, SB_ERR_NOMEM);
		return;
	}
	d->counts.downloads++;
	d->counts.bytes_down += sizeof(float) * (double)n;
	const cl_int err = clEnqueueReadBuffer(d->q, src.buf->m, CL_FALSE, sizeof(float) * src.off,
	                                       sizeof(float) * n, tmp, 0, NULL, NULL);
	if (err != CL_SUCCESS) {
		free(tmp);
		sb_cl_fail(d, sb_cl_status(d->dev, err, "downloading"));
		return;
	}
	d->fetch[d->n_fetch++] = (struct cl_fetch){dst, tmp, n};
	sb_cl_prof_end(d, P_DOWNLOAD, t0, 0.0);
}

static void free_pass(sb_bpass *p)
{
	for (int i = 0; i < p->nf; i++)
		free(p->f[i].tmp);
	free(p->f);
	if (p->end)
		clReleaseEvent(p->end);
	free(p);
}

/* a pass nobody waits for any more: its memory is freed once its reads have run */
static void CL_CALLBACK pass_dropped(cl_event ev, cl_int status, void *user)
{
	(void)ev;
	(void)status;
	free_pass(user);
}

static void drop_pass(sb_bdev *d, sb_bpass *p)
{
	if (p->nf && p->end && clSetEventCallback(p->end, CL_COMPLETE, pass_dropped, p) == CL_SUCCESS)
		return;
	if (p->nf) { /* reads may still land in its memory: wait for them */
		sb_cl_waited(d);
		if (p->end)
			clWaitForEvents(1, &p->end);
		else
			clFinish(d->q);
	}
	free_pass(p);
}

static sb_bpass *cl_pass_end(sb_bdev *d)
{
	sb_bpass *p = calloc(1, sizeof *p);
	if (!p) {
		sb_cl_fail(d, SB_ERR_NOMEM);
		return NULL;
	}
	p->f = d->fetch;
	p->nf = d->n_fetch;
	d->fetch = NULL;
	d->n_fetch = d->cap_fetch = 0;
	p->st = d->st;
	if (clEnqueueMarkerWithWaitList(d->q, 0, NULL, &p->end) != CL_SUCCESS) {
		p->end = NULL;
		if (p->st == SB_OK)
			p->st = SB_ERR_DEVICE;
		sb_cl_fail(d, SB_ERR_DEVICE);
	}
	p->enq = d->enq_at_end = enqueued(d);
	d->passes_out++;
	return p;
}

/* after a wait: the measuring runs that have ended counted (cl_gemm_pick.c) */
static void collect_runs(sb_bdev *d)
{
	if (d->pick)
		sb_cl_pick_collect(d, d->pick);
	if (d->att_pick)
		sb_cl_pick_collect(d, d->att_pick);
}

/* the reads of a pass that ended well, into their places */
static void put_reads(struct cl_fetch *f, int n)
{
	for (int i = 0; i < n; i++)
		memcpy(f[i].dst, f[i].tmp, sizeof(float) * f[i].n);
}

/* everything enqueued has run: the reads not yet in a pass land too */
static sb_status cl_finish(sb_bdev *d)
{
	const double t0 = sb_cl_prof_begin(d);
	sb_cl_waited(d);
	const cl_int err = clFinish(d->q);
	sb_cl_prof_end(d, P_FINISH, t0, 0.0);
	if (err != CL_SUCCESS)
		sb_cl_fail(d, sb_cl_status(d->dev, err, "waiting for the device"));
	else if (d->st == SB_OK) /* the timed runs of the pass have ended */
		collect_runs(d);
	if (d->st == SB_OK)
		put_reads(d->fetch, d->n_fetch);
	for (int i = 0; i < d->n_fetch; i++)
		free(d->fetch[i].tmp);
	d->n_fetch = 0;
	return d->st;
}

/* A wait for the end of a pass that may be given up: the driver's callback on the pass's
 * marker says when it ended, the waiter looks at the stop flags every 2 ms meanwhile. Shared by
 * the waiting thread and the callback, freed by the last of the two (the callback may come
 * after the wait was given up). */
typedef struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, refs;
} drain_waiter;

static void waiter_unref(drain_waiter *w)
{
	pthread_mutex_lock(&w->lock);
	const int left = --w->refs;
	pthread_mutex_unlock(&w->lock);
	if (left)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

static void CL_CALLBACK pass_ended(cl_event ev, cl_int status, void *user)
{
	(void)ev;
	(void)status;
	drain_waiter *w = user;
	pthread_mutex_lock(&w->lock);
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	waiter_unref(w);
}

/* How a pass's end is waited for, SB_CL_WAIT=callback|poll|finish, else by the device:
 *   callback: the host sleeps until the driver's callback on the pass's marker (a CPU driver:
 *             a poll would take the cores the pass computes on);
 *   poll:     the marker's status read every 50 us (a GPU, where the callback costs more:
 *             README.md here);
 *   finish:   clFinish, the stop flags not looked at (for comparison only). */
enum { WAIT_CALLBACK, WAIT_POLL, WAIT_FINISH };

/* read once, at the device's opening */
static int wait_way(const sb_bdev *d)
{
	const char *e = sb_knob_get("SB_CL_WAIT");
	if (e && !strcmp(e, "callback"))
		return WAIT_CALLBACK;
	if (e && !strcmp(e, "poll"))
		return WAIT_POLL;
	if (e && !strcmp(e, "finish"))
		return WAIT_FINISH;
	if (e && *e)
		sb_log(d->log, SB_LOG_WARNING, "SB_CL_WAIT='%s' is none of 'callback', 'poll', "
		       "'finish': ignored", e);
	const sb_device *p = sb_cl_device_props(d->dev);
	return p->type == SB_DEV_OPENCL_CPU ? WAIT_CALLBACK : WAIT_POLL;
}

/* Polls ev until it ends or a flag is set: 1 when stopped. */
static int poll_pass(cl_event ev, const atomic_int *const *stop, int n)
{
	for (;;) {
		cl_int state = CL_COMPLETE;
		if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state,
		                   NULL) != CL_SUCCESS || state <= CL_COMPLETE)
			return 0;
		if (sb_stop_set(stop, n))
			return 1;
		const struct timespec t = {0, 50000};
		nanosleep(&t, NULL);
	}
}

/* Sleeps until the driver's callback on ev, or a flag is set: 1 when stopped; -1 when the
 * driver takes no callback. */
static int sleep_pass(sb_bdev *d, cl_event ev, const atomic_int *const *stop, int n)
{
	drain_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->lock, NULL);
	w->refs = 2;
	if (clSetEventCallback(ev, CL_COMPLETE, pass_ended, w) != CL_SUCCESS) {
		w->refs = 1;
		waiter_unref(w);
		return -1;
	}
	clFlush(d->q);
	int stopped = 0;
	pthread_mutex_lock(&w->lock);
	while (!w->done && !(stopped = sb_stop_set(stop, n))) {
		const struct timespec t = sb_deadline(CLOCK_MONOTONIC, 2);
		pthread_cond_timedwait(&w->cond, &w->lock, &t);
	}
	pthread_mutex_unlock(&w->lock);
	waiter_unref(w);
	return stopped;
}

/* Waits for pass p (wait_way above) unless a flag is set first. The work goes on in the queue
 * when this gives up; the next pass's work queues behind it. With profiling on every operation
 * has waited already. The newest pass with nothing enqueued after it and no flag to look at is
 * waited for by clFinish, as every pass was before passes could be pipelined. */
static sb_status cl_pass_wait(sb_bdev *d, sb_bpass *p, const atomic_int *const *stop, int n)
{
	if (!p)
		return d->st != SB_OK ? d->st : SB_ERR_NOMEM;
	d->passes_out--;
	int flags = 0;
	for (int i = 0; i < n; i++)
		flags |= stop[i] != NULL;
	sb_status st = p->st;
	if (st == SB_OK && sb_stop_set(stop, n))
		st = SB_ERR_CANCELLED;
	const int last = d->passes_out == 0 && enqueued(d) == p->enq;
	if (st == SB_OK && (d->profiling || (last && (!flags || d->wait_way == WAIT_FINISH)))) {
		const double t0 = sb_cl_prof_begin(d);
		sb_cl_waited(d);
		const cl_int err = clFinish(d->q);
		sb_cl_prof_end(d, P_FINISH, t0, 0.0);
		if (err != CL_SUCCESS)
			st = sb_cl_status(d->dev, err, "waiting for the device");
	} else if (st == SB_OK) {
		const double t0 = sb_cl_prof_begin(d);
		sb_cl_waited(d);
		int stopped = 0;
		if (d->wait_way == WAIT_FINISH)
			clWaitForEvents(1, &p->end);
		else if (d->wait_way == WAIT_CALLBACK)
			stopped = sleep_pass(d, p->end, stop, n);
		else
			stopped = -1;
		if (stopped < 0) {
			/* polled, or the driver took no callback */
			clFlush(d->q);
			stopped = poll_pass(p->end, stop, n);
		}
		sb_cl_prof_end(d, P_FINISH, t0, 0.0);
		cl_int state = CL_COMPLETE;
		if (stopped)
			st = SB_ERR_CANCELLED;
		else if (clGetEventInfo(p->end, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state,
		                        &state, NULL) == CL_SUCCESS && state < 0)
			st = sb_cl_status(d->dev, state, "running the pass"); /* a command failed */
	}
	if (st != SB_OK) {
		if (st != SB_ERR_CANCELLED)
			sb_cl_fail(d, st);
		drop_pass(d, p);
		return st;
	}
	collect_runs(d);
	put_reads(p->f, p->nf);
	free_pass(p);
	return SB_OK;
}

/* finish() that stops waiting when a flag is set: the work since the last pass ended, as a
 * pass */
static sb_status cl_drain(sb_bdev *d, const atomic_int *const *stop, int n)
{
	return cl_pass_wait(d, cl_pass_end(d), stop, n);
}

static void cl_counts(const sb_bdev *d, sb_dev_counts *out)
{
	*out = d->counts;
}

static sb_status cl_status(const sb_bdev *d)
{
	return d->st;
}

static void cl_clear(sb_bdev *d)
{
	d->st = SB_OK;
}

static void cl_set_profiling(sb_bdev *d, int on)
{
	d->profiling = on;
	memset(d->prof_calls, 0, sizeof d->prof_calls);
	memset(d->prof_s, 0, sizeof d->prof_s);
	memset(d->prof_flops, 0, sizeof d->prof_flops);
	memset(&d->prof_shapes, 0, sizeof d->prof_shapes);
}

static int cl_profile_products(const sb_bdev *d, sb_prof_product *out, int max)
{
	return sb_prof_shapes_collect(&d->prof_shapes, out, max);
}

static int cl_profile(const sb_bdev *d, sb_prof_entry *out, int max)
{
	return sb_prof_collect(d->prof_calls, d->prof_s, d->prof_flops, sb_cl_op_names, P_COUNT, out,
	                       max);
}

static const char *cl_describe(const sb_bdev *d)
{
	if (d->want_bf16 && d->mma)
		return sb_cl_mma_describe(d->mma);
	if (d->chosen && d->tf32 && d->gemm == SB_CL_GEMM_TF32)
		return sb_cl_mma_describe(d->tf32);
	if (d->chosen && d->pick)
		return sb_cl_pick_describe(d->pick);
	if (d->chosen && d->tiled && d->gemm == SB_CL_GEMM_TILED)
		return sb_cl_tiled_describe(d->tiled); /* with its tiling */
	return sb_cl_gemm_name(d->chosen ? d->gemm : sb_cl_gemm_planned());
}

static const char *cl_precision(const sb_bdev *d)
{
	return d->want_bf16 && d->mma ? "bf16" : d->gemm == SB_CL_GEMM_TF32 && d->tf32 ? "tf32" : "fp32";
}

/* the next products' precision; the tensor-core kernel is built at the first bf16 product */
static void cl_set_precision(sb_bdev *d, sb_precision p)
{
	d->want_bf16 = p == SB_PREC_BF16;
}

/* for `stembridge devices`: what runs the products, and whether bf16 can (no device opened) */
static void cl_details(const sb_device *p, char *buf, size_t len)
{
	unsigned cc = 0;
	const char *why = NULL;
	const char *fp32 = sb_cl_gemm_measured(p) ? "the fastest path for each shape, measured there"
	                   : sb_cl_gemm_name(sb_cl_gemm_planned());
	if (sb_cl_mma_native_id((cl_device_id)p->native[1], p->platform, &cc, &why))
		snprintf(buf, len, "products: fp32 %s, bf16 on its tensor cores (compute capability "
		         "%u.%u)", fp32, cc / 10, cc % 10);
	else
		snprintf(buf, len, "products: fp32 %s, bf16 not available (runs fp32)", fp32);
}

const sb_backend sb_backend_opencl_impl = {
	.api = SB_BACKEND_API,
	.name = "opencl",
	.enumerate = sb_cl_enumerate,
	.open = cl_open,
	.close = cl_close,
	.lost = cl_lost,
	.begin_chunk = cl_begin_chunk,
	.row_tile = cl_row_tile,
	.batch = cl_batch,
	.alloc = cl_alloc,
	.wrap = cl_wrap,
	.release = cl_release,
	.upload = cl_upload,
	.download = cl_download,
	.fetch = cl_fetch,
	.finish = cl_finish,
	.drain = cl_drain,
	.pass_end = cl_pass_end,
	.pass_wait = cl_pass_wait,
	.counts = cl_counts,
	.status = cl_status,
	.clear = cl_clear,
	.ops = &sb_cl_ops,
	.classic = &sb_cl_classic_ops,
	.set_profiling = cl_set_profiling,
	.profile = cl_profile,
	.profile_products = cl_profile_products,
	.describe = cl_describe,
	.precision = cl_precision,
	.set_precision = cl_set_precision,
	.details = cl_details,
};
