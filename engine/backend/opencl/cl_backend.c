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
		const cl_int err = clEnqueueWriteBuffer(d->q, b->m, CL_TRUE, 0, sizeof(float) * floats,
		                                        host, 0, NULL, NULL);
		st = sb_cl_status(d->dev, err, "uploading");
		if (st != SB_OK)
			clReleaseMemObject(b->m);
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

static void CL_CALLBACK free_copy(cl_event ev, cl_int status, void *copy)
{
	(void)ev;
	(void)status;
	free(copy);
}

/* The caller's memory is free again on return, but the host does not wait for the device: the
 * data goes through a copy of its own, freed when the write has run. A blocking write would
 * wait for all the work ahead of it in the queue (a pass another device won, still running:
 * the next pass's upload could not begin, nor stop, until it ended). Without memory for the
 * copy, or without an event to free it by, the write blocks as before. */
static void cl_upload(sb_bdev *d, sb_dv dst, const float *src, size_t n)
{
	if (d->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(d);
	const size_t bytes = sizeof(float) * n;
	float *copy = malloc(bytes);
	cl_event ev = NULL;
	cl_int err = CL_SUCCESS;
	if (copy) {
		memcpy(copy, src, bytes);
		err = clEnqueueWriteBuffer(d->q, dst.buf->m, CL_FALSE, sizeof(float) * dst.off, bytes,
		                           copy, 0, NULL, &ev);
		if (err == CL_SUCCESS && clSetEventCallback(ev, CL_COMPLETE, free_copy, copy) != CL_SUCCESS) {
			clWaitForEvents(1, &ev); /* no callback: wait, then free it here */
			free(copy);
		} else if (err != CL_SUCCESS) {
			free(copy);
		}
		if (ev)
			clReleaseEvent(ev);
	} else {
		err = clEnqueueWriteBuffer(d->q, dst.buf->m, CL_TRUE, sizeof(float) * dst.off, bytes,
		                           src, 0, NULL, NULL);
	}
	if (err != CL_SUCCESS)
		sb_cl_fail(d, sb_cl_status(d->dev, err, "uploading"));
	sb_cl_prof_end(d, P_UPLOAD, t0, 0.0);
}

static void cl_download(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	if (d->st != SB_OK || !n)
		return;
	const double t0 = sb_cl_prof_begin(d);
	const cl_int err = clEnqueueReadBuffer(d->q, src.buf->m, CL_TRUE, sizeof(float) * src.off,
	                                       sizeof(float) * n, dst, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		sb_cl_fail(d, sb_cl_status(d->dev, err, "downloading"));
	sb_cl_prof_end(d, P_DOWNLOAD, t0, 0.0);
}

static sb_status cl_finish(sb_bdev *d)
{
	const double t0 = sb_cl_prof_begin(d);
	const cl_int err = clFinish(d->q);
	sb_cl_prof_end(d, P_FINISH, t0, 0.0);
	if (err != CL_SUCCESS)
		sb_cl_fail(d, sb_cl_status(d->dev, err, "waiting for the device"));
	else if (d->st == SB_OK) { /* the timed runs of the pass have ended */
		if (d->pick)
			sb_cl_pick_collect(d, d->pick);
		if (d->att_pick)
			sb_cl_pick_collect(d, d->att_pick);
	}
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

/* finish() that stops waiting when a flag is set (wait_way above). The work goes on in the
 * queue when this gives up; the next pass's work queues behind it. With profiling on every
 * operation has waited already. */
static sb_status cl_drain(sb_bdev *d, const atomic_int *const *stop, int n)
{
	int flags = 0;
	for (int i = 0; i < n; i++)
		flags |= stop[i] != NULL;
	const int way = d->wait_way;
	if (!flags || d->profiling || d->st != SB_OK || way == WAIT_FINISH)
		return cl_finish(d);
	if (sb_stop_set(stop, n))
		return SB_ERR_CANCELLED;
	cl_event ev = NULL;
	if (clEnqueueMarkerWithWaitList(d->q, 0, NULL, &ev) != CL_SUCCESS)
		return cl_finish(d);
	int stopped = way == WAIT_CALLBACK ? sleep_pass(d, ev, stop, n) : -1;
	if (stopped < 0) { /* polled, or the driver took no callback */
		clFlush(d->q);
		stopped = poll_pass(ev, stop, n);
	}
	if (stopped) {
		clReleaseEvent(ev);
		return SB_ERR_CANCELLED;
	}
	cl_int state = CL_COMPLETE;
	if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) ==
	        CL_SUCCESS && state < 0) /* a command of the pass failed: its error code */
		sb_cl_fail(d, sb_cl_status(d->dev, state, "running the pass"));
	clReleaseEvent(ev);
	return cl_finish(d);
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
	.finish = cl_finish,
	.drain = cl_drain,
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
