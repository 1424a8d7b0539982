/* The registered backends. Registering one is one line here (and its folder in
 * backend/meson.build); the CPU backend comes first and is always there. */
#include "backend/backend_impl.h"

#include <stdlib.h>
#include <string.h>

extern const sb_backend sb_backend_cpu_impl;
extern const sb_backend sb_backend_opencl_impl;
extern const sb_backend sb_backend_toy_impl;

static const sb_backend *const registry[] = {
	&sb_backend_cpu_impl,
#ifdef SB_HAVE_OPENCL
	&sb_backend_opencl_impl, /* -Dopencl=auto: where an OpenCL loader is installed */
#endif
#ifdef SB_TOY_BACKEND
	&sb_backend_toy_impl, /* tests only (-Dtoy_backend=true) */
#endif
};

const sb_backend *sb_backend_at(size_t i)
{
	return i < sizeof registry / sizeof registry[0] ? registry[i] : NULL;
}

const sb_backend *sb_backend_by_name(const char *name)
{
	for (size_t i = 0; sb_backend_at(i); i++)
		if (!strcmp(registry[i]->name, name))
			return registry[i];
	return NULL;
}

const sb_backend *sb_backend_cpu(void)
{
	return registry[0];
}

sb_status sb_exec_open(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
                       sb_exec *out)
{
	memset(out, 0, sizeof *out);
	const sb_backend *be = dev->backend;
	if (!be || be->api != SB_BACKEND_API) {
		sb_log(log, SB_LOG_ERROR, "%s: its backend speaks another interface version",
		       dev->label);
		return SB_ERR_DEVICE;
	}
	sb_status st = be->open(dev, o, log, &out->d);
	if (st != SB_OK)
		return st;
	out->be = be;
	out->props = dev;
	return SB_OK;
}

void sb_exec_close(sb_exec *x)
{
	if (x && x->be && x->d)
		x->be->close(x->d);
	if (x)
		x->d = NULL;
}

int sb_prof_collect(const long *calls, const double *secs, const double *flops,
                    const char *const *names, int count, sb_prof_entry *out, int max)
{
	int n = 0;
	for (int i = 0; i < count && n < max; i++)
		if (calls[i]) {
			int at = n++;
			while (at > 0 && out[at - 1].seconds < secs[i]) {
				out[at] = out[at - 1];
				at--;
			}
			out[at] = (sb_prof_entry){names[i], calls[i], secs[i], flops[i]};
		}
	return n;
}

void sb_prof_shape_add(sb_prof_shapes *t, int M, int N, int K, int tb, int batch, int bias,
                       const char *path, double seconds)
{
	sb_prof_product *e = NULL;
	for (int i = 0; i < t->n && !e; i++) {
		sb_prof_product *x = &t->e[i];
		if (x->M == M && x->N == N && x->K == K && x->tb == tb && x->batch == batch &&
		    x->bias == bias && x->path == path)
			e = x;
	}
	if (!e && t->n < SB_PROF_SHAPES) {
		e = &t->e[t->n++];
		*e = (sb_prof_product){M, N, K, tb, batch, bias, path, 0, 0.0, 0.0};
	} else if (!e) {
		e = &t->e[SB_PROF_SHAPES]; /* M stays 0 */
		e->path = "-";
	}
	e->calls++;
	e->seconds += seconds;
	e->flops += 2.0 * M * N * K * batch;
}

static int slower(const void *a, const void *b)
{
	const double x = ((const sb_prof_product *)a)->seconds,
	             y = ((const sb_prof_product *)b)->seconds;
	return x < y ? 1 : x > y ? -1 : 0;
}

int sb_prof_shapes_collect(const sb_prof_shapes *t, sb_prof_product *out, int max)
{
	sb_prof_product all[SB_PROF_SHAPES + 1];
	int n = 0;
	for (int i = 0; i <= SB_PROF_SHAPES; i++)
		if (t->e[i].calls > 0)
			all[n++] = t->e[i];
	qsort(all, (size_t)n, sizeof *all, slower); /* the slowest first, then the first max */
	n = n < max ? n : max;
	memcpy(out, all, sizeof *out * (size_t)(n > 0 ? n : 0));
	return n;
}
