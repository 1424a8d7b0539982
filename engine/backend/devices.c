/* The device table (device.h): the native CPU first, then every OpenCL device the ICD loader
 * offers, in a stable order (platforms sorted by name, devices in the platform's order).
 *
 * Threads: sb_devices_enumerate() runs once on a non-real-time thread; the list is immutable
 * afterwards and may be read from any thread.
 */
#include "backend/device.h"

#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sb_device_list {
	size_t n;
	sb_device_props *dev;
};

const char *sb_device_type_str(sb_device_type t)
{
	switch (t) {
	case SB_DEV_CPU_NATIVE: return "native CPU";
	case SB_DEV_GPU_DISCRETE: return "discrete GPU";
	case SB_DEV_GPU_INTEGRATED: return "integrated GPU";
	case SB_DEV_ACCELERATOR: return "accelerator";
	case SB_DEV_OPENCL_CPU: return "OpenCL CPU";
	}
	return "unknown";
}

static void fmt_gib(char *buf, size_t len, uint64_t bytes)
{
	snprintf(buf, len, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

static void cl_str(cl_device_id d, cl_device_info what, char *buf, size_t len)
{
	buf[0] = '\0';
	if (clGetDeviceInfo(d, what, len - 1, buf, NULL) != CL_SUCCESS)
		snprintf(buf, len, "?");
	buf[len - 1] = '\0';
	/* Drivers pad names with spaces (Intel) */
	size_t n = strlen(buf);
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
}

typedef struct {
	cl_platform_id id;
	char name[256];
	int order;
} platform_entry;

static int platform_cmp(const void *a, const void *b)
{
	const platform_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : x->order - y->order;
}

static sb_status list_push(sb_device_list *l, const sb_device_props *p)
{
	sb_device_props *nd = realloc(l->dev, sizeof *nd * (l->n + 1));
	if (!nd)
		return SB_ERR_NOMEM;
	l->dev = nd;
	l->dev[l->n++] = *p;
	return SB_OK;
}

static void fill_cpu(sb_device_props *p)
{
	memset(p, 0, sizeof *p);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	snprintf(p->id, sizeof p->id, "cpu");
	snprintf(p->key, sizeof p->key, "cpu");
	snprintf(p->name, sizeof p->name, "CPU");
	snprintf(p->platform, sizeof p->platform, "native");
	snprintf(p->vendor, sizeof p->vendor, "host");
	snprintf(p->driver, sizeof p->driver, "stembridge");
	p->type = SB_DEV_CPU_NATIVE;
	p->compute_units = n > 0 ? (unsigned)n : 1;
	p->global_mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	p->max_alloc = p->global_mem;
	p->opencl_index = -1;
	p->cl_platform_index = -1;
	p->cl_device_index = -1;
	snprintf(p->label, sizeof p->label, "CPU (%u thread%s)", p->compute_units,
	         p->compute_units == 1 ? "" : "s");
}

static void add_opencl(sb_device_list *l, const sb_logger *log)
{
	cl_uint np = 0;
	cl_int err = clGetPlatformIDs(0, NULL, &np);
	if (err != CL_SUCCESS || np == 0) {
		sb_log(log, SB_LOG_INFO, "no OpenCL platform (%s): only the native CPU is available",
		       err == CL_SUCCESS ? "none installed" : "the ICD loader found no driver");
		return;
	}
	cl_platform_id *ids = calloc(np, sizeof *ids);
	platform_entry *pe = calloc(np, sizeof *pe);
	if (!ids || !pe || clGetPlatformIDs(np, ids, NULL) != CL_SUCCESS) {
		free(ids);
		free(pe);
		return;
	}
	for (cl_uint i = 0; i < np; i++) {
		pe[i].id = ids[i];
		pe[i].order = (int)i;
		if (clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof pe[i].name - 1, pe[i].name,
		                      NULL) != CL_SUCCESS)
			snprintf(pe[i].name, sizeof pe[i].name, "platform %u", i);
	}
	qsort(pe, np, sizeof *pe, platform_cmp);
	int index = 0;
	for (cl_uint i = 0; i < np; i++) {
		cl_uint nd = 0;
		err = clGetDeviceIDs(pe[i].id, CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
		if (err != CL_SUCCESS || nd == 0) {
			sb_log(log, SB_LOG_INFO, "OpenCL platform '%s' has no device", pe[i].name);
			continue;
		}
		cl_device_id *dv = calloc(nd, sizeof *dv);
		if (!dv || clGetDeviceIDs(pe[i].id, CL_DEVICE_TYPE_ALL, nd, dv, NULL) != CL_SUCCESS) {
			free(dv);
			continue;
		}
		for (cl_uint j = 0; j < nd; j++) {
			sb_device_props p;
			memset(&p, 0, sizeof p);
			snprintf(p.platform, sizeof p.platform, "%s", pe[i].name);
			cl_str(dv[j], CL_DEVICE_NAME, p.name, sizeof p.name);
			cl_str(dv[j], CL_DEVICE_VENDOR, p.vendor, sizeof p.vendor);
			cl_str(dv[j], CL_DRIVER_VERSION, p.driver, sizeof p.driver);
			cl_device_type t = 0;
			cl_bool unified = CL_FALSE;
			cl_ulong gm = 0, ma = 0;
			cl_uint cu = 0;
			clGetDeviceInfo(dv[j], CL_DEVICE_TYPE, sizeof t, &t, NULL);
			clGetDeviceInfo(dv[j], CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
			clGetDeviceInfo(dv[j], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
			clGetDeviceInfo(dv[j], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
			clGetDeviceInfo(dv[j], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
			if (t & CL_DEVICE_TYPE_GPU)
				p.type = unified ? SB_DEV_GPU_INTEGRATED : SB_DEV_GPU_DISCRETE;
			else if (t & CL_DEVICE_TYPE_CPU)
				p.type = SB_DEV_OPENCL_CPU;
			else
				p.type = SB_DEV_ACCELERATOR;
			p.global_mem = gm;
			p.max_alloc = ma;
			p.compute_units = cu;
			p.opencl_index = index;
			p.cl_platform_index = pe[i].order;
			p.cl_device_index = (int)j;
			p.cl_platform = pe[i].id;
			p.cl_device = dv[j];
			snprintf(p.id, sizeof p.id, "opencl:%d", index);
			/* The ordinal among identical names keeps two equal cards apart in saved state. */
			int ordinal = 0;
			for (size_t k = 0; k < l->n; k++)
				if (l->dev[k].opencl_index >= 0 && !strcmp(l->dev[k].platform, p.platform) &&
				    !strcmp(l->dev[k].vendor, p.vendor) && !strcmp(l->dev[k].name, p.name))
					ordinal++;
			snprintf(p.key, sizeof p.key, "opencl|%s|%s|%s|%d", p.platform, p.vendor, p.name,
			         ordinal);
			char mem[32];
			fmt_gib(mem, sizeof mem, gm);
			snprintf(p.label, sizeof p.label, "%s (%s, %s)", p.name, p.platform, mem);
			if (list_push(l, &p) != SB_OK)
				break;
			index++;
		}
		free(dv);
	}
	free(ids);
	free(pe);
}

sb_status sb_devices_enumerate(const sb_logger *log, sb_device_list **out)
{
	sb_device_list *l = calloc(1, sizeof *l);
	if (!l)
		return SB_ERR_NOMEM;
	sb_device_props cpu;
	fill_cpu(&cpu);
	if (list_push(l, &cpu) != SB_OK) {
		free(l);
		return SB_ERR_NOMEM;
	}
	add_opencl(l, log);
	*out = l;
	return SB_OK;
}

void sb_devices_free(sb_device_list *list)
{
	if (!list)
		return;
	free(list->dev);
	free(list);
}

size_t sb_devices_count(const sb_device_list *list)
{
	return list ? list->n : 0;
}

const sb_device_props *sb_devices_get(const sb_device_list *list, size_t i)
{
	return list && i < list->n ? &list->dev[i] : NULL;
}

size_t sb_devices_auto(const sb_device_list *list)
{
	static const sb_device_type order[] = {SB_DEV_GPU_DISCRETE, SB_DEV_GPU_INTEGRATED,
	                                       SB_DEV_ACCELERATOR};
	for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
		for (size_t i = 0; i < list->n; i++)
			if (list->dev[i].type == order[o])
				return i;
	return 0;
}

static size_t count_opencl(const sb_device_list *l)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		n += l->dev[i].opencl_index >= 0;
	return n;
}

/* A key names a device of another machine as well as this one: match it field by field, and
 * when the exact ordinal is gone, take another card of the same name (a reordered PCI bus). */
static int resolve_key(const sb_device_list *l, const char *key, sb_device_resolution *res)
{
	char buf[640];
	snprintf(buf, sizeof buf, "%s", key + strlen("opencl|"));
	char *f[4] = {0};
	char *p = buf;
	for (int i = 0; i < 4 && p; i++) {
		f[i] = p;
		p = i < 3 ? strchr(p, '|') : NULL;
		if (p)
			*p++ = '\0';
	}
	if (!f[3])
		return 0;
	char *end = NULL;
	long ord = strtol(f[3], &end, 10);
	if (!end || *end || ord < 0)
		return 0;
	long seen = 0;
	size_t same_name = (size_t)-1;
	for (size_t i = 0; i < l->n; i++) {
		const sb_device_props *d = &l->dev[i];
		if (d->opencl_index < 0 || strcmp(d->platform, f[0]) || strcmp(d->vendor, f[1]) ||
		    strcmp(d->name, f[2]))
			continue;
		if (same_name == (size_t)-1)
			same_name = i;
		if (seen++ == ord) {
			res->index = i;
			return 1;
		}
	}
	if (same_name != (size_t)-1) {
		res->index = same_name;
		return 1;
	}
	res->index = 0;
	res->fell_back = 1;
	snprintf(res->reason, sizeof res->reason,
	         "saved device '%.200s' (%.200s) not found on this machine: %zu OpenCL device%s present",
	         f[2], f[0], count_opencl(l), count_opencl(l) == 1 ? "" : "s");
	return 1;
}

sb_status sb_devices_resolve(const sb_device_list *list, const char *request,
                             sb_device_resolution *res)
{
	memset(res, 0, sizeof *res);
	if (!list || !request)
		return SB_ERR_INVALID;
	if (!*request || !strcmp(request, "auto")) {
		res->index = sb_devices_auto(list);
		return SB_OK;
	}
	if (!strcmp(request, "cpu")) {
		res->index = 0;
		return SB_OK;
	}
	if (!strncmp(request, "opencl:", 7)) {
		char *end = NULL;
		long n = strtol(request + 7, &end, 10);
		if (request[7] == '\0' || !end || *end || n < 0)
			return SB_ERR_INVALID;
		for (size_t i = 0; i < list->n; i++)
			if (list->dev[i].opencl_index == n) {
				res->index = i;
				return SB_OK;
			}
		size_t have = count_opencl(list);
		res->index = 0;
		res->fell_back = 1;
		snprintf(res->reason, sizeof res->reason, "%.100s not found: %zu OpenCL device%s present",
		         request, have, have == 1 ? "" : "s");
		return SB_OK;
	}
	if (!strncmp(request, "opencl|", 7)) {
		if (resolve_key(list, request, res))
			return SB_OK;
		return SB_ERR_INVALID;
	}
	return SB_ERR_INVALID;
}
