/* A third backend for the tests of the backend seam (issue #26): the CPU backend registered a
 * second time as "toy", a CPU behind another backend (listed, selectable, never "auto"),
 * without the built-in model's operation group. It proves what a new backend touches: this
 * folder, its line in backend/meson.build and one line in registry.c. Built only with
 * -Dtoy_backend=true (tools/dev.sh test builds it in build-toy and runs the 'toy' suite).
 *
 * Every function forwards to the CPU backend: the devices it opens are CPU devices.
 */
#include "backend/backend_impl.h"

#include <stdio.h>
#include <string.h>

/* the CPU's operations, copied when the library loads (a constant table of another file
 * cannot initialise this one's) */
static sb_ops toy_ops;

__attribute__((constructor)) static void copy_ops(void)
{
	toy_ops = *sb_backend_cpu()->ops;
}

static const sb_backend *cpu(void)
{
	return sb_backend_cpu();
}

static sb_status enumerate(const sb_logger *log, sb_device *out, size_t cap, size_t *n)
{
	const size_t before = *n;
	sb_status st = cpu()->enumerate(log, out, cap, n);
	if (st != SB_OK || *n == before)
		return st;
	sb_device *p = &out[before];
	snprintf(p->id, sizeof p->id, "toy:0");
	snprintf(p->name, sizeof p->name, "Toy accelerator");
	snprintf(p->platform, sizeof p->platform, "toy");
	snprintf(p->vendor, sizeof p->vendor, "stembridge");
	snprintf(p->key, sizeof p->key, "toy|toy|stembridge|Toy accelerator|0");
	p->type = SB_DEV_OPENCL_CPU;
	p->index = 0;
	snprintf(p->label, sizeof p->label, "Toy accelerator (the CPU under another backend)");
	return SB_OK;
}

static sb_status toy_open(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
                          sb_bdev **out)
{
	return cpu()->open(dev, o, log, out);
}

static void toy_close(sb_bdev *d) { cpu()->close(d); }
static int toy_lost(const sb_bdev *d) { return cpu()->lost(d); }
static sb_status toy_begin_chunk(sb_bdev *d) { return cpu()->begin_chunk(d); }
static int toy_row_tile(const sb_bdev *d) { return cpu()->row_tile(d); }
static int toy_batch(const sb_bdev *d) { return cpu()->batch(d); }

static sb_status toy_alloc(sb_bdev *d, size_t floats, sb_bbuf **out)
{
	return cpu()->alloc(d, floats, out);
}

static sb_status toy_wrap(sb_bdev *d, const float *host, size_t floats, sb_bbuf **out)
{
	return cpu()->wrap(d, host, floats, out);
}

static void toy_release(sb_bdev *d, sb_bbuf *b) { cpu()->release(d, b); }

static void toy_upload(sb_bdev *d, sb_dv dst, const float *src, size_t n)
{
	cpu()->upload(d, dst, src, n);
}

static void toy_download(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	cpu()->download(d, dst, src, n);
}

static void toy_fetch(sb_bdev *d, float *dst, sb_dv src, size_t n)
{
	cpu()->fetch(d, dst, src, n);
}

static sb_status toy_finish(sb_bdev *d) { return cpu()->finish(d); }
static sb_status toy_drain(sb_bdev *d, const atomic_int *const *stop, int n)
{
	return cpu()->drain(d, stop, n);
}
static sb_status toy_status(const sb_bdev *d) { return cpu()->status(d); }
static void toy_clear(sb_bdev *d) { cpu()->clear(d); }
static void toy_set_profiling(sb_bdev *d, int on) { cpu()->set_profiling(d, on); }

static int toy_profile(const sb_bdev *d, sb_prof_entry *out, int max)
{
	return cpu()->profile(d, out, max);
}

static const char *toy_describe(const sb_bdev *d) { return cpu()->describe(d); }

const sb_backend sb_backend_toy_impl = {
	.api = SB_BACKEND_API,
	.name = "toy",
	.enumerate = enumerate,
	.open = toy_open,
	.close = toy_close,
	.lost = toy_lost,
	.begin_chunk = toy_begin_chunk,
	.row_tile = toy_row_tile,
	.batch = toy_batch,
	.alloc = toy_alloc,
	.wrap = toy_wrap,
	.release = toy_release,
	.upload = toy_upload,
	.download = toy_download,
	.fetch = toy_fetch,
	.finish = toy_finish,
	.drain = toy_drain,
	.status = toy_status,
	.clear = toy_clear,
	.ops = &toy_ops,
	.classic = NULL,
	.set_profiling = toy_set_profiling,
	.profile = toy_profile,
	.describe = toy_describe,
};
