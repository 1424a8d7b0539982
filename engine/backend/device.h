/* The device table's entries inside the engine (stembridge.h declares the table and the
 * getters a front end reads a device through): each device of every registered backend
 * (backend/backend.h), the native CPU first, described by the same properties. Filled once by
 * sb_devices_enumerate(); immutable afterwards, so any thread may read it.
 *
 * sb_devices_resolve() turns a request (an id, a stable key or "auto") into a table entry,
 * once, with the fallback and its reason when the device is not here; the job engine opens
 * that entry through its backend. A plugin's port value is only how a generic host UI shows
 * the choice: the plugin maps it to a key through the table it announced.
 */
#ifndef SB_DEVICE_H
#define SB_DEVICE_H

#include "sb_common.h"

typedef struct sb_backend sb_backend;

struct sb_device {
	char id[32];           /* "cpu" or "opencl:N" */
	char key[640];         /* stable key (stembridge.h) */
	char name[256];        /* "NVIDIA H100 80GB HBM3", "CPU" */
	char platform[256];    /* "NVIDIA CUDA", "Portable Computing Language", "native" */
	char vendor[128];
	char driver[128];      /* driver version */
	char label[384];       /* what a person reads: "NVIDIA H100 80GB HBM3 (NVIDIA CUDA, 79.1 GiB)" */
	sb_device_type type;
	uint64_t global_mem;   /* bytes */
	uint64_t max_alloc;    /* bytes */
	unsigned compute_units;/* threads for the native CPU */
	const sb_backend *backend; /* the backend that runs it */
	int index;             /* N of "<backend>:N"; 0 for the CPU */
	int platform_index;    /* the backend's own numbering, for its tools (OpenCL: the ICD */
	int device_index;      /* loader's, as clinfo and CLBlast's tuners take it); -1 none */
	void *native[2];       /* the backend's handles; opaque outside its folder */
};

#endif
