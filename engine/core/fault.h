/* The fault injector's one reading of SB_FAULT_INJECT (tests only): comma-separated entries,
 * each its subsystem's ("<subsystem>:..."), whose grammar the subsystem documents:
 *   io:rename:K, io:dirsync:K     io/temp_file.h (the commit's rollback)
 *   job:slow:MS                   jobs/job_run.h (a job still running when a test needs one)
 *   job:slow-write:MS             jobs/job_run.h (a slow disk: the stems' writing waits)
 *   opencl:N:...                  backend/opencl/cl_device.h (a device that fails, or is slow)
 * Threads: any; the variable is read at each call.
 */
#ifndef SB_FAULT_H
#define SB_FAULT_H

#include "sb_common.h"

/* N of an entry "<key>N" (key such as "io:rename:"), N > 0; 0 when there is none. */
long sb_fault_number(const char *key);
/* The entries that start with prefix ("opencl:"), the prefix left out, in their order, at most
 * max of them (each cut to 127 characters); returns how many. */
int sb_fault_entries(const char *prefix, char (*out)[128], int max);

#endif
