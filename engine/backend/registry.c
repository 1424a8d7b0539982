/* The registered backends. Registering one is one line here (and its folder in
 * backend/meson.build); the CPU backend comes first and is always there. */
#include "backend/backend_impl.h"

#include <string.h>

extern const sb_backend sb_backend_cpu_impl;
extern const sb_backend sb_backend_opencl_impl;
extern const sb_backend sb_backend_toy_impl;

static const sb_backend *const registry[] = {
	&sb_backend_cpu_impl,
	&sb_backend_opencl_impl,
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

sb_status sb_exec_open(const sb_device_props *dev, const sb_open_opts *o, const sb_logger *log,
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
