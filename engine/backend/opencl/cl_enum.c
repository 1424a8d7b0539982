/* The OpenCL backend's devices: every device the ICD loader offers, in a stable order
 * (platforms sorted by name, devices in the platform's order), with the stable key
 * "opencl|<platform>|<vendor>|<name>|<ordinal>" (stembridge.h).
 */
#include "backend/opencl/cl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

sb_status sb_cl_enumerate(const sb_logger *log, sb_device *out, size_t cap, size_t *n)
{
	const size_t first = *n;
	cl_uint np = 0;
	cl_int err = clGetPlatformIDs(0, NULL, &np);
	if (err != CL_SUCCESS || np == 0) {
		sb_log(log, SB_LOG_INFO, "no OpenCL platform (%s): only the native CPU is available",
		       err == CL_SUCCESS ? "none installed" : "the ICD loader found no driver");
		return SB_OK;
	}
	cl_platform_id *ids = calloc(np, sizeof *ids);
	platform_entry *pe = calloc(np, sizeof *pe);
	if (!ids || !pe || clGetPlatformIDs(np, ids, NULL) != CL_SUCCESS) {
		free(ids);
		free(pe);
		return SB_ERR_NOMEM;
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
			sb_device p;
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
			p.index = index;
			p.platform_index = pe[i].order;
			p.device_index = (int)j;
			p.native[0] = pe[i].id;
			p.native[1] = dv[j];
			snprintf(p.id, sizeof p.id, "opencl:%d", index);
			/* The ordinal among identical names keeps two equal cards apart in saved state. */
			int ordinal = 0;
			for (size_t k = first; k < *n; k++)
				if (!strcmp(out[k].platform, p.platform) && !strcmp(out[k].vendor, p.vendor) &&
				    !strcmp(out[k].name, p.name))
					ordinal++;
			snprintf(p.key, sizeof p.key, "opencl|%s|%s|%s|%d", p.platform, p.vendor, p.name,
			         ordinal);
			char mem[32];
			fmt_gib(mem, sizeof mem, gm);
			snprintf(p.label, sizeof p.label, "%s (%s, %s)", p.name, p.platform, mem);
			if (*n == cap) {
				sb_log(log, SB_LOG_WARNING, "more devices than the table holds: %s left out",
				       p.label);
				break;
			}
			out[(*n)++] = p;
			index++;
		}
		free(dv);
	}
	free(ids);
	free(pe);
	return SB_OK;
}

