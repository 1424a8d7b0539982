/* The device table: every device of every registered backend (backend/backend.h), the native
 * CPU first, each described by the same properties (after ggml's backend registry). Filled
 * once by sb_devices_enumerate(); immutable afterwards, so any thread may read it.
 *
 * One identity from the UI to the queue. A device is named by its id, what a user types:
 * "cpu", "opencl:N" ("<backend>:<index>", N in the backend's stable order), and by its stable
 * key, what state stores, which survives re-ordering and other machines:
 *   "<backend>|<platform>|<vendor>|<device name>|<ordinal among identical names>", or "cpu".
 * sb_devices_resolve() turns either (or "auto") into a table entry, once, with the fallback
 * and its reason when the device is not here; the job engine opens that entry through its
 * backend. A plugin's port value is only how a generic host UI shows the choice: the plugin
 * maps it to a key through the table it announced.
 */
#ifndef SB_DEVICE_H
#define SB_DEVICE_H

#include "sb_common.h"

typedef struct sb_backend sb_backend;

typedef enum {
	SB_DEV_CPU_NATIVE = 0,  /* our own C code on the host threads */
	SB_DEV_GPU_DISCRETE,
	SB_DEV_GPU_INTEGRATED,   /* CL_DEVICE_HOST_UNIFIED_MEMORY */
	SB_DEV_ACCELERATOR,
	SB_DEV_OPENCL_CPU        /* a CPU through a GPU API's driver (PoCL): listed, selectable,
	                            never 'auto' */
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
	const sb_backend *backend; /* the backend that runs it */
	int index;             /* N of "<backend>:N"; 0 for the CPU */
	int platform_index;    /* the backend's own numbering, for its tools (OpenCL: the ICD */
	int device_index;      /* loader's, as clinfo and CLBlast's tuners take it); -1 none */
	void *native[2];       /* the backend's handles; opaque outside its folder */
} sb_device_props;

typedef struct sb_device_list sb_device_list;

/* Entry 0 is always the native CPU. A backend that finds no device (no driver) logs a note and
 * adds none; this never fails except for host memory. */
sb_status sb_devices_enumerate(const sb_logger *log, sb_device_list **out);
void sb_devices_free(sb_device_list *list);
size_t sb_devices_count(const sb_device_list *list);
const sb_device_props *sb_devices_get(const sb_device_list *list, size_t i);
const char *sb_device_type_str(sb_device_type t);

/* The index 'auto' means: a discrete GPU first, then another GPU or accelerator, then the
 * native CPU (never a CPU behind a GPU API). */
size_t sb_devices_auto(const sb_device_list *list);
/* A GPU or an accelerator. */
int sb_device_is_gpu(const sb_device_props *d);
/* The native CPU (entry 0). */
static inline int sb_device_is_native(const sb_device_props *d)
{
	return d->type == SB_DEV_CPU_NATIVE;
}
/* Entries that are not the native CPU, in table order: the plugin's "Device k" is the k-th. */
size_t sb_devices_count_accel(const sb_device_list *list);
const sb_device_props *sb_devices_accel(const sb_device_list *list, size_t k);
/* The entry of an id or a key exactly (no fallback), or (size_t)-1. */
size_t sb_devices_find(const sb_device_list *list, const char *id_or_key);

/* For front ends, which see devices through this header only: the name of the backend that
 * runs a device ("cpu", "opencl"); one line of how it computes, from the backend, "" where it
 * says nothing (may load libraries: never where no thread may start); and whether 'name' is a
 * registered backend other than the CPU (a saved "NAME:N" key may name a device). */
const char *sb_device_backend_name(const sb_device_props *d);
void sb_device_details(const sb_device_props *d, char *buf, size_t len);
int sb_backend_is_accelerator(const char *name);

typedef struct {
	size_t index;       /* entry to run on */
	int fell_back;      /* 1 when index is not what was asked for */
	char reason[512];   /* why, for the log and the manifest; "" when not a fallback */
} sb_device_resolution;

/* Resolve what a user or a state asked for: "auto", "cpu", "<backend>:N", "device:N" (the N-th
 * accelerator of any backend, sb_devices_accel: the plugin's "Device N+1"), or a stable key.
 * SB_ERR_INVALID for a string that is none of these (the CLI reports it and exits non-zero).
 * A well-formed request for a device that is not here resolves to the CPU with fell_back=1 and
 * a reason naming the device ("opencl:3 not found: 2 OpenCL devices present"); never silent. */
sb_status sb_devices_resolve(const sb_device_list *list, const char *request,
                             sb_device_resolution *res);

/* The request forms, for messages: "auto, all, cpu, device:N, opencl:N" with every registered
 * backend's name. */
void sb_devices_request_forms(char *buf, size_t len);

/* Several devices for one job: its segments are shared among them (models/demucs). */
#define SB_MAX_SET 16
typedef struct {
	size_t n;
	size_t index[SB_MAX_SET];      /* table entries, no repeats */
	char reason[SB_MAX_SET][512];  /* a fallback's reason per entry, "" when none */
	int fell_back;                 /* one of them is a fallback */
} sb_device_set;

/* A comma-separated list of requests ("cpu,opencl:0,opencl:1"), "all" (every GPU and
 * accelerator, and the CPU), or one request; "auto" is every GPU when there are several, else
 * sb_devices_auto(). Each part resolves as above; repeats go. SB_ERR_INVALID as above. */
sb_status sb_devices_resolve_set(const sb_device_list *list, const char *request,
                                 sb_device_set *out);

#endif
