/* What the OpenCL backend's files need from an opened device beyond cl_device.h:
 * the context and queue, cached program builds, kernels, allocations that honour the fault
 * injector, and the mapping of OpenCL error codes to sb_status. Only code that enqueues work
 * includes this (the files of engine/backend/opencl/); everything else goes
 * through cl_device.h and never sees an OpenCL type.
 *
 * Threads: like the device, one job at a time. Kernel objects hold argument state, so each
 * backend state creates its own (sb_cl_device_kernel) instead of sharing the device's.
 */
#ifndef SB_CL_INTERNAL_H
#define SB_CL_INTERNAL_H

#include "backend/opencl/cl_device.h"

#include <CL/cl.h>


cl_context sb_cl_device_context(const sb_cl_device *d);
cl_command_queue sb_cl_device_queue(const sb_cl_device *d);
cl_device_id sb_cl_device_id(const sb_cl_device *d);
/* The built-in separator's program, built at open; owned by the device. */
cl_program sb_cl_device_classic_program(const sb_cl_device *d);
/* The logger given to sb_cl_device_open (a copy owned by the device). */
const sb_logger *sb_cl_device_logger(const sb_cl_device *d);

/* Build 'source' with 'options' for this device through the disk cache; 'tag' names the cache
 * file ("classic"). The caller releases *out. *from_cache (may be NULL) says whether the binary
 * came from the cache. SB_ERR_DEVICE with the compiler's log logged when the build fails. */
sb_status sb_cl_device_build(sb_cl_device *d, const char *tag, const char *source,
                             const char *options, cl_program *out, int *from_cache);

/* A new kernel object owned by the caller; SB_ERR_DEVICE (logged) when 'name' is missing. */
sb_status sb_cl_device_kernel(sb_cl_device *d, cl_program prog, const char *name,
                              cl_kernel *out);

/* clCreateBuffer through the fault injector. SB_ERR_DEVICE_OOM when the size exceeds the
 * device's largest allocation, the driver reports memory exhaustion, or the injector says so;
 * SB_ERR_DEVICE_LOST when the device is lost. Logged. */
sb_status sb_cl_device_alloc(sb_cl_device *d, size_t bytes, cl_mem_flags flags, cl_mem *out);

/* Map an OpenCL result to a status: SB_OK for CL_SUCCESS; SB_ERR_DEVICE_OOM for
 * CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY;
 * SB_ERR_DEVICE_LOST for failures that mean the device is gone (CL_DEVICE_NOT_AVAILABLE,
 * CL_INVALID_COMMAND_QUEUE, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, NVIDIA's -9999),
 * which also marks d lost; SB_ERR_DEVICE otherwise. A failure is logged once with 'what' and
 * the error's name. d may be NULL (nothing to mark, nothing logged). */
sb_status sb_cl_status(sb_cl_device *d, cl_int err, const char *what);
/* "CL_OUT_OF_RESOURCES" and so on; "unknown OpenCL error" for codes not in the headers. */
const char *sb_cl_error_name(cl_int err);

#endif
