/* The OpenCL backend's classic operation group (backend.h): the built-in separator's steps
 * 1-7 (models/classic/classic.h) for one chunk, with the arithmetic fixed in
 * models/classic/classic_ops.h, on the kernels of classic.cl. The CPU backend's
 * (backend/cpu/classic_cpu.c) is the reference; tests/backend holds this one to it within 1e-4
 * relative per stem.
 *
 * Per chunk: one upload of the input window, about twenty kernels on one in-order queue, and
 * one blocking read of the three stems. Every intermediate (spectra, magnitudes, medians,
 * masks) stays on the device; all buffers are sized once in create() from max_frames, so
 * process() never allocates.
 *
 * FFT: our own Stockham autosort kernels (radix 4, plus one radix-2 pass for odd powers),
 * batched over every frame and channel of the chunk, with the real transforms done through a
 * half-length complex FFT. Chosen over VkFFT because the sizes are small powers of two
 * (512..8192 at 8-192 kHz), the FFT is a minor share of the work next to the medians, the
 * kernels stay plain OpenCL C 1.2 that PoCL, NVIDIA, AMD and Intel all compile, and there is
 * no second code generator (and its own compile cache) to keep in step with ours. Twiddles
 * come from a table computed in double precision on the host, so the transform is as
 * accurate as fftw's in float.
 * Reference: E. Bainville, "OpenCL Fast Fourier Transform" (2010), for the Stockham passes.
 */
#include "backend/opencl/cl_classic.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Work-group size: a multiple of the warp/wavefront width everywhere, and small enough for
 * every driver's limit; kernels check bounds, so global sizes round up to it. */
#define LOCAL_SIZE 64

enum { C_PACK, C_RADIX2, C_RADIX4, C_R2C, C_TMED, C_MASKS, C_C2R, C_OLA, C_COUNT };
static const char *const kernel_names[C_COUNT] = {
	"stft_pack", "fft_radix2", "fft_radix4", "r2c_mag",
	"median_time", "masks", "c2r_pack", "overlap_add",
};

struct sb_classic_state {
	sb_cl_device *dev;
	cl_command_queue q;
	sb_classic_geom g;
	int channels, max_frames, half, log2_half;
	size_t local;
	cl_kernel k[C_COUNT];
	cl_mem in, za, zb, spec, mag, hmed, mask, out; /* per chunk */
	cl_mem win, tw, bass_w, voice_w;              /* constant tables */
};
typedef struct sb_classic_state ocl_state;

static void ocl_destroy(sb_classic_state *s)
{
	if (!s)
		return;
	if (s->q)
		clFinish(s->q);
	cl_mem *mems[] = {&s->in, &s->za, &s->zb, &s->spec, &s->mag, &s->hmed, &s->mask, &s->out,
	                  &s->win, &s->tw, &s->bass_w, &s->voice_w};
	for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
		if (*mems[i])
			clReleaseMemObject(*mems[i]);
	for (int i = 0; i < C_COUNT; i++)
		if (s->k[i])
			clReleaseKernel(s->k[i]);
	free(s);
}

typedef struct {
	size_t size;
	const void *ptr;
} kernel_arg;
#define ARG(x) {sizeof(x), &(x)}

static cl_int set_args(cl_kernel k, const kernel_arg *a, int n)
{
	for (int i = 0; i < n; i++) {
		cl_int err = clSetKernelArg(k, (cl_uint)i, a[i].size, a[i].ptr);
		if (err != CL_SUCCESS)
			return err;
	}
	return CL_SUCCESS;
}

static cl_int launch(ocl_state *s, int kernel, const kernel_arg *a, int n, size_t total)
{
	cl_int err = set_args(s->k[kernel], a, n);
	if (err != CL_SUCCESS)
		return err;
	size_t global = (total + s->local - 1) / s->local * s->local;
	return clEnqueueNDRangeKernel(s->q, s->k[kernel], 1, NULL, &global, &s->local, 0, NULL,
	                              NULL);
}

static sb_status upload(ocl_state *s, cl_mem m, const void *data, size_t bytes)
{
	cl_int err = clEnqueueWriteBuffer(s->q, m, CL_TRUE, 0, bytes, data, 0, NULL, NULL);
	return sb_cl_status(s->dev, err, "uploading the tables");
}

static int ilog2(int n)
{
	int l = 0;
	while ((1 << l) < n)
		l++;
	return l;
}

static sb_status ocl_create(sb_bdev *bd, const sb_classic_geom *g, sb_classic_state **out)
{
	*out = NULL;
	sb_cl_device *dev = bd->dev;
	const sb_logger *log = sb_cl_device_logger(dev);
	const int channels = g->channels, max_frames = g->max_frames;
	if (channels < 1 || max_frames < 1)
		return SB_ERR_INVALID;
	if (sb_cl_device_is_lost(dev))
		return SB_ERR_DEVICE_LOST;
	const sb_device *props = sb_cl_device_props(dev);
	ocl_state *s = calloc(1, sizeof *s);
	if (!s)
		return SB_ERR_NOMEM;
	s->dev = dev;
	s->q = sb_cl_device_queue(dev);
	s->g = *g;
	s->channels = channels;
	s->max_frames = max_frames;
	const int n_fft = s->g.n_fft, h = s->g.hop, b = s->g.bins, kt = s->g.kt;
	s->half = n_fft / 2;
	s->log2_half = ilog2(s->half);
	if (n_fft < 8 || (n_fft & (n_fft - 1)) != 0) {
		sb_log(log, SB_LOG_ERROR, "builtin: OpenCL path needs a power-of-two FFT size, not %d",
		       n_fft);
		ocl_destroy(s);
		return SB_ERR_DEVICE;
	}

	/* Buffer sizes in elements (layouts at the top of classic.cl). */
	const uint64_t C = (uint64_t)channels, mf = (uint64_t)max_frames, nf = mf + 2 * (uint64_t)kt;
	const uint64_t n_in = (mf + 2 * (uint64_t)kt + 1) * (uint64_t)h * C;
	const uint64_t batch = nf * C > 3 * mf * C ? nf * C : 3 * mf * C;
	const uint64_t n_z = batch * (uint64_t)s->half;
	const uint64_t n_spec = mf * C * (uint64_t)b, n_mag = nf * (uint64_t)b;
	const uint64_t n_hmed = mf * (uint64_t)b, n_mask = 3 * mf * (uint64_t)b;
	const uint64_t n_out = 3 * (mf + 1) * (uint64_t)h * C;
	const cl_mem_flags rw = CL_MEM_READ_WRITE, ro = CL_MEM_READ_ONLY;
	struct {
		cl_mem *m;
		uint64_t count, elem; /* elements, bytes per element */
		cl_mem_flags flags;
	} bufs[] = {
		{&s->in, n_in, 4, ro},          {&s->za, n_z, 8, rw},       {&s->zb, n_z, 8, rw},
		{&s->spec, n_spec, 8, rw},      {&s->mag, n_mag, 4, rw},    {&s->hmed, n_hmed, 4, rw},
		{&s->mask, n_mask, 4, rw},      {&s->out, n_out, 4, rw},    {&s->win, (uint64_t)n_fft, 4, ro},
		{&s->tw, (uint64_t)n_fft, 8, ro}, {&s->bass_w, (uint64_t)b, 4, ro},
		{&s->voice_w, (uint64_t)b, 4, ro},
	};
	const size_t n_bufs = sizeof bufs / sizeof bufs[0];

	/* Too big for the device: say so before allocating anything, so the runner halves the
	 * chunk at once. Limits: each buffer within the largest allocation and the kernels' int
	 * indices, all of them within half the device memory (the rest is for other jobs and the
	 * driver). */
	uint64_t total = 0;
	int too_big = 0;
	for (size_t i = 0; i < n_bufs; i++) {
		uint64_t bytes = bufs[i].count * bufs[i].elem;
		total += bytes;
		too_big |= bufs[i].count > INT_MAX || (props->max_alloc && bytes > props->max_alloc);
	}
	too_big |= props->global_mem && total > props->global_mem / 2;
	if (too_big) {
		sb_log(log, SB_LOG_WARNING,
		       "builtin: %d frames per chunk need %.1f MiB on %s (%.1f MiB of memory, "
		       "%.1f MiB per buffer): too big",
		       max_frames, (double)total / 1048576.0, props->id,
		       (double)props->global_mem / 1048576.0, (double)props->max_alloc / 1048576.0);
		ocl_destroy(s);
		return SB_ERR_DEVICE_OOM;
	}

	sb_status r = SB_OK;
	cl_program prog = sb_cl_device_classic_program(dev);
	for (int i = 0; i < C_COUNT && r == SB_OK; i++)
		r = sb_cl_device_kernel(dev, prog, kernel_names[i], &s->k[i]);
	s->local = LOCAL_SIZE;
	for (int i = 0; i < C_COUNT && r == SB_OK; i++) {
		size_t wg = 0;
		if (clGetKernelWorkGroupInfo(s->k[i], sb_cl_device_id(dev), CL_KERNEL_WORK_GROUP_SIZE,
		                             sizeof wg, &wg, NULL) == CL_SUCCESS && wg > 0 && wg < s->local)
			s->local = wg;
	}
	for (size_t i = 0; i < n_bufs && r == SB_OK; i++)
		r = sb_cl_device_alloc(dev, (size_t)(bufs[i].count * bufs[i].elem), bufs[i].flags,
		                       bufs[i].m);

	if (r == SB_OK) {
		float *win = malloc(sizeof(float) * n_fft), *tw = malloc(sizeof(float) * 2 * n_fft);
		float *bw = malloc(sizeof(float) * b), *vw = malloc(sizeof(float) * b);
		if (!win || !tw || !bw || !vw) {
			r = SB_ERR_NOMEM;
		} else {
			memcpy(win, g->win, sizeof(float) * n_fft);
			memcpy(bw, g->bass_w, sizeof(float) * b);
			memcpy(vw, g->voice_w, sizeof(float) * b);
			for (int i = 0; i < n_fft; i++) {
				tw[2 * i] = (float)cos(-2.0 * M_PI * i / n_fft);
				tw[2 * i + 1] = (float)sin(-2.0 * M_PI * i / n_fft);
			}
			r = upload(s, s->win, win, sizeof(float) * n_fft);
			if (r == SB_OK)
				r = upload(s, s->tw, tw, sizeof(float) * 2 * n_fft);
			if (r == SB_OK)
				r = upload(s, s->bass_w, bw, sizeof(float) * b);
			if (r == SB_OK)
				r = upload(s, s->voice_w, vw, sizeof(float) * b);
		}
		free(win);
		free(tw);
		free(bw);
		free(vw);
	}
	if (r != SB_OK) {
		ocl_destroy(s);
		return r;
	}
	*out = s;
	return SB_OK;
}

/* Batched FFT of 'batch' sequences of length n = N/2 in *cur; *cur holds the result after
 * and *other the scratch (they swap on each pass). */
static cl_int fft(ocl_state *s, int batch, int inv, cl_mem *cur, cl_mem *other)
{
	int n = s->half, p = 1;
	cl_int err = CL_SUCCESS;
	while (p < n && err == CL_SUCCESS) {
		/* One radix-2 pass first when log2(n) is odd, radix 4 for the rest. */
		int radix = (s->log2_half % 2 == 1 && p == 1) ? 2 : 4;
		int total = batch * (n / radix);
		kernel_arg a[] = {ARG(*cur), ARG(*other), ARG(s->tw), ARG(n), ARG(p), ARG(inv), ARG(total)};
		err = launch(s, radix == 2 ? C_RADIX2 : C_RADIX4, a, 7, (size_t)total);
		cl_mem t = *cur;
		*cur = *other;
		*other = t;
		p *= radix;
	}
	return err;
}

static sb_status ocl_process(sb_classic_state *s, int nt, const float *in, float *out)
{
	if (nt < 1 || nt > s->max_frames)
		return SB_ERR_INVALID;
	const int n = s->half, h = s->g.hop, b = s->g.bins, kt = s->g.kt, kf = s->g.kf;
	const int C = s->channels, nf = nt + 2 * kt;
	const size_t in_bytes = sizeof(float) * (size_t)(nt + 2 * kt + 1) * h * C;
	const size_t out_bytes = sizeof(float) * 3 * (size_t)(nt + 1) * h * C;
	const char *what = "uploading the chunk";
	cl_mem cur = s->za, other = s->zb;

	/* Non-blocking: the caller's 'in' outlives this call, which ends in a blocking read (or
	 * a clFinish on the error path) on the same in-order queue. */
	cl_int err = clEnqueueWriteBuffer(s->q, s->in, CL_FALSE, 0, in_bytes, in, 0, NULL, NULL);
	if (err == CL_SUCCESS) {
		what = "the forward STFT";
		int total = nf * C * n;
		kernel_arg a[] = {ARG(s->in), ARG(s->win), ARG(cur), ARG(C), ARG(h), ARG(n), ARG(total)};
		err = launch(s, C_PACK, a, 7, (size_t)total);
	}
	if (err == CL_SUCCESS)
		err = fft(s, nf * C, 0, &cur, &other);
	if (err == CL_SUCCESS) {
		int total = nf * b;
		kernel_arg a[] = {ARG(cur), ARG(s->tw), ARG(s->spec), ARG(s->mag), ARG(C), ARG(n),
		                  ARG(kt), ARG(nt), ARG(total)};
		err = launch(s, C_R2C, a, 9, (size_t)total);
	}
	if (err == CL_SUCCESS) {
		what = "the medians and masks";
		int total = nt * b;
		kernel_arg a[] = {ARG(s->mag), ARG(s->hmed), ARG(b), ARG(kt), ARG(total)};
		err = launch(s, C_TMED, a, 5, (size_t)total);
	}
	if (err == CL_SUCCESS) {
		int total = nt * b;
		float eps = s->g.eps, gamma = s->g.gamma, c_mono = s->g.c_mono, beta = s->g.beta;
		int kf_lo = s->g.kf_lo, k_lo = s->g.k_lo;
		kernel_arg a[] = {ARG(s->mag),    ARG(s->hmed), ARG(s->spec), ARG(s->bass_w),
		                  ARG(s->voice_w), ARG(s->mask), ARG(b),      ARG(kt),
		                  ARG(kf),        ARG(nt),      ARG(C),       ARG(eps),
		                  ARG(gamma),     ARG(c_mono),  ARG(kf_lo),   ARG(k_lo),
		                  ARG(beta),      ARG(total)};
		err = launch(s, C_MASKS, a, 18, (size_t)total);
	}
	if (err == CL_SUCCESS) {
		what = "the inverse STFT";
		int total = 3 * nt * C * n;
		kernel_arg a[] = {ARG(s->spec), ARG(s->mask), ARG(s->tw), ARG(cur), ARG(C), ARG(n), ARG(nt),
		                  ARG(total)};
		err = launch(s, C_C2R, a, 8, (size_t)total);
	}
	if (err == CL_SUCCESS)
		err = fft(s, 3 * nt * C, 1, &cur, &other);
	if (err == CL_SUCCESS) {
		int total = 3 * (nt + 1) * h * C;
		float inv_n = 1.f / (float)s->g.n_fft;
		kernel_arg a[] = {ARG(cur), ARG(s->win), ARG(s->out), ARG(C), ARG(h), ARG(n), ARG(nt),
		                  ARG(inv_n), ARG(total)};
		err = launch(s, C_OLA, a, 9, (size_t)total);
	}
	if (err == CL_SUCCESS) {
		what = "reading the stems back";
		err = clEnqueueReadBuffer(s->q, s->out, CL_TRUE, 0, out_bytes, out, 0, NULL, NULL);
	}
	if (err != CL_SUCCESS) {
		clFinish(s->q); /* nothing may still read 'in' once we return */
		return sb_cl_status(s->dev, err, what);
	}
	return SB_OK;
}

const sb_classic_ops sb_cl_classic_ops = {
	.create = ocl_create,
	.process = ocl_process,
	.destroy = ocl_destroy,
};
