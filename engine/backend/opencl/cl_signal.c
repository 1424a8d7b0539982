/* The OpenCL backend's signal operations (backend.h: sb_ops): short-time Fourier transforms,
 * one work-group a frame with a local-memory radix-2 FFT and overlap-add a sample a work-item;
 * the moments and standardisation of a whole segment through the norms' slices; the band
 * gathers and complex products of the RoFormers. Launched through the base (cl_base.h).
 */
#include "backend/opencl/cl_signal.h"

#include <math.h>
#include <stdlib.h>

#define TW_N 8192 /* the twiddle table's transform length */

static int log2i(int n)
{
	int b = 0;
	while ((1 << b) < n)
		b++;
	return b;
}

/* the twiddle table, made at the first transform; SB_OK when the device can run the FFT
 * kernels (n_fft a power of two from 8 to 8192, 32 KB of local memory) */
static sb_status fft_ready(sb_bdev *c, int n_fft)
{
	if (c->st != SB_OK || sb_cl_ops_ready(c) != SB_OK)
		return SB_ERR_DEVICE;
	if (n_fft < 8 || n_fft > TW_N || (n_fft & (n_fft - 1))) {
		sb_log(c->log, SB_LOG_ERROR, "an STFT of %d points: the OpenCL backend takes powers "
		       "of two from 8 to %d", n_fft, TW_N);
		sb_cl_fail(c, SB_ERR_DEVICE); /* the job runner finishes on the CPU */
		return SB_ERR_DEVICE;
	}
	if (c->tw)
		return SB_OK;
	cl_ulong local = 0;
	clGetDeviceInfo(sb_cl_device_id(c->dev), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local,
	                NULL);
	if (local < sizeof(float) * TW_N) {
		sb_log(c->log, SB_LOG_ERROR, "the device's local memory (%lu bytes) is below the "
		       "STFT's %zu", (unsigned long)local, sizeof(float) * TW_N);
		sb_cl_fail(c, SB_ERR_DEVICE);
		return SB_ERR_DEVICE;
	}
	float *h = malloc(sizeof(float) * TW_N);
	if (!h) {
		sb_cl_fail(c, SB_ERR_NOMEM);
		return SB_ERR_NOMEM;
	}
	for (int m = 0; m < TW_N / 2; m++) {
		const double a = -2.0 * M_PI * m / TW_N;
		h[2 * m] = (float)cos(a);
		h[2 * m + 1] = (float)sin(a);
	}
	sb_status st = sb_cl_device_alloc(c->dev, sizeof(float) * TW_N, CL_MEM_READ_ONLY, &c->tw);
	if (st == SB_OK)
		sb_cl_write(c, c->tw, 0, h, sizeof(float) * TW_N, "uploading the FFT's twiddles");
	free(h);
	if (st != SB_OK)
		sb_cl_fail(c, st);
	return c->st;
}

static size_t fft_wg(const sb_bdev *c, int n_fft)
{
	size_t wg = c->red_wg;
	while (wg > 32 && wg > (size_t)n_fft / 4)
		wg /= 2;
	return wg;
}

/* a spectrum's arguments, in the order both FFT kernels take them */
static void a_spectrum(kargs *a, sb_dv X, const sb_stft *g)
{
	a_db(a, X);
	a_i32(a, g->bins);
	a_i64(a, g->sc);
	a_i64(a, g->sf);
	a_i64(a, g->st);
	a_i64(a, g->sri);
}

/* one work-group a (frame, channel) */
static void run_frames(sb_bdev *c, kargs *a, const sb_stft *g, int ch)
{
	const size_t wg = fft_wg(c, g->n_fft);
	const size_t gs[2] = {(size_t)g->frames * wg, (size_t)ch}, l[2] = {wg, 1};
	sb_cl_run(a, 2, gs, l);
}

void sb_cl_op_stft(sb_bdev *c, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
                    float scale, sb_dv X)
{
	if (g->frames <= 0 || ch <= 0 || fft_ready(c, g->n_fft) != SB_OK)
		return;
	kargs a = args(c, K_STFT_FRAMES);
	a_db(&a, x);
	a_i64(&a, xs);
	a_i64(&a, L);
	a_i32(&a, g->n_fft);
	a_i32(&a, log2i(g->n_fft / 2));
	a_i32(&a, g->hop);
	a_i64(&a, g->pad);
	a_db(&a, w);
	a_f32(&a, scale);
	a_mem(&a, c->tw);
	a_i32(&a, TW_N / g->n_fft);
	a_spectrum(&a, X, g);
	run_frames(c, &a, g, ch);
}

void sb_cl_op_istft(sb_bdev *c, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w,
                     float scale, int e0, int e1, sb_dv o, long os, int add, sb_dv work)
{
	if (g->frames <= 0 || ch <= 0 || fft_ready(c, g->n_fft) != SB_OK)
		return;
	kargs a = args(c, K_ISTFT_FRAMES);
	a_spectrum(&a, X, g);
	a_i32(&a, g->frames);
	a_i32(&a, g->n_fft);
	a_i32(&a, log2i(g->n_fft / 2));
	a_db(&a, w);
	a_f32(&a, scale);
	a_mem(&a, c->tw);
	a_i32(&a, TW_N / g->n_fft);
	a_db(&a, work);
	run_frames(c, &a, g, ch);
	kargs b = args(c, K_ISTFT_OLA);
	a_db(&b, work);
	a_i32(&b, g->frames);
	a_i32(&b, g->n_fft);
	a_i32(&b, g->hop);
	a_i64(&b, g->pad);
	a_i64(&b, L);
	a_db(&b, w);
	a_i32(&b, e0);
	a_i32(&b, e1);
	a_db(&b, o);
	a_i64(&b, os);
	a_i32(&b, add);
	const size_t go[2] = {(size_t)L, (size_t)ch}, lo[2] = {256, 1};
	sb_cl_run(&b, 2, go, lo);
}

/* ---- standardisation: norm_part's slices, merged into a mean and a std ---- */

void sb_cl_op_moments(sb_bdev *c, sb_dv x, size_t n, sb_dv stats)
{
	if (n == 0 || c->st != SB_OK || sb_cl_ops_ready(c) != SB_OK)
		return;
	const int G = sb_cl_part_stats(c, x, 0, (long)n, 1, 0);
	kargs f = args(c, K_MOMENTS_FINAL);
	a_mem(&f, c->parts);
	a_i32(&f, G);
	a_db(&f, stats);
	const size_t l = c->red_wg;
	sb_cl_run(&f, 1, &l, &l);
}

void sb_cl_op_standardise(sb_bdev *c, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
                           int inverse)
{
	kargs a = args(c, K_STANDARDISE);
	a_db(&a, x);
	a_db(&a, o);
	a_u64(&a, n);
	a_db(&a, stats);
	a_f32(&a, eps);
	a_i32(&a, inverse);
	sb_cl_run(&a, 1, &n, NULL);
}

void sb_cl_op_gather(sb_bdev *c, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
                      sb_dv ptr, sb_dv idx, sb_dv w)
{
	kargs a = args(c, K_GATHER);
	a_db(&a, x);
	a_i64(&a, ldx);
	a_db(&a, o);
	a_i64(&a, ldo);
	a_i32(&a, n);
	a_db(&a, ptr);
	a_db(&a, idx);
	a_db(&a, w);
	const size_t g[2] = {(size_t)n, rows}, l[2] = {64, 1};
	sb_cl_run(&a, 2, g, l);
}

void sb_cl_op_cmul(sb_bdev *c, sb_dv x, long sa, sb_dv y, sb_dv o, long so, size_t n,
                    int batch)
{
	kargs a = args(c, K_CMUL);
	a_db(&a, x);
	a_i64(&a, sa);
	a_db(&a, y);
	a_db(&a, o);
	a_i64(&a, so);
	a_u64(&a, n);
	const size_t g[2] = {n, (size_t)batch}, l[2] = {256, 1};
	sb_cl_run(&a, 2, g, l);
}
