/* The device table: the native CPU path plus every OpenCL device, each described by the same
 * properties (after ggml's backend registry). Filled once by sb_devices_enumerate(); immutable
 * afterwards, so any thread may read it.
 *
 * Names a user types: "auto", "cpu", "opencl:N" (N in a stable order: platforms and devices as
 * the ICD loader lists them, sorted by platform name then device order). State stores the
 * stable key instead, which survives re-ordering and other machines:
 *   "opencl|<platform>|<vendor>|<device name>|<ordinal among identical names>" or "cpu".
 */
#ifndef SB_DEVICE_H
#define SB_DEVICE_H

#include "sb_common.h"

typedef enum {
	SB_DEV_CPU_NATIVE = 0,  /* our own C code on the host threads */
	SB_DEV_GPU_DISCRETE,
	SB_DEV_GPU_INTEGRATED,   /* CL_DEVICE_HOST_UNIFIED_MEMORY */
	SB_DEV_ACCELERATOR,
	SB_DEV_OPENCL_CPU        /* a CPU driver such as PoCL: listed, selectable, never 'auto' */
} sb_device_type;

typedef struct {
	char id[32];           /* "cpu" or "opencl:N" */
	char key[640];         /* stable key, see above */
	char name[256];        /* "NVIDIA H100 80GB HBM3", "CPU" */
	char platform[256];    /* "NVIDIA CUDA", "Portable Computing Language", "native" */
	char vendor[128];
	char driver[128];      /* driver version */
	char label[384];       /* what a person reads: "NVIDIA H100 80GB HBM3 (NVIDIA CUDA, 79.1 GiB)" */
	sb_device_type type;
	uint64_t global_mem;   /* bytes */
	uint64_t max_alloc;    /* bytes */
	unsigned compute_units;/* threads for the native CPU */
	int opencl_index;      /* N of "opencl:N", -1 for the native CPU */
	int cl_platform_index; /* the ICD loader's numbering (clinfo, CLBlast's tuners' -platform */
	int cl_device_index;   /* and -device); -1 for the native CPU */
	void *cl_platform;     /* cl_platform_id, NULL for the CPU */
	void *cl_device;       /* cl_device_id, NULL for the CPU */
} sb_device_props;

typedef struct sb_device_list sb_device_list;

/* Entry 0 is always the native CPU. OpenCL failures (no ICD, no platform) are logged and leave
 * a list with the CPU only; this never fails except for host memory. */
sb_status sb_devices_enumerate(const sb_logger *log, sb_device_list **out);
void sb_devices_free(sb_device_list *list);
size_t sb_devices_count(const sb_device_list *list);
const sb_device_props *sb_devices_get(const sb_device_list *list, size_t i);
const char *sb_device_type_str(sb_device_type t);

/* The index 'auto' means: a discrete GPU first, then another GPU or accelerator, then the
 * native CPU (never an OpenCL CPU driver). */
size_t sb_devices_auto(const sb_device_list *list);

typedef struct {
	size_t index;       /* entry to run on */
	int fell_back;      /* 1 when index is not what was asked for */
	char reason[512];   /* why, for the log and the manifest; "" when not a fallback */
} sb_device_resolution;

/* Resolve what a user or a state asked for: "auto", "cpu", "opencl:N", or a stable key.
 * SB_ERR_INVALID for a string that is none of these (the CLI reports it and exits non-zero).
 * A well-formed request for a device that is not here resolves to the CPU with fell_back=1 and
 * a reason naming the device ("opencl:3 not found: 2 OpenCL devices present"); never silent. */
sb_status sb_devices_resolve(const sb_device_list *list, const char *request,
                             sb_device_resolution *res);

#endif
