/* An opened OpenCL device: context, one in-order queue, built kernels (cached on disk), and
 * what the fault-injection switch says about it. One per device per engine, opened lazily by
 * the worker that runs on it; a job runs on it from one thread at a time.
 */
#ifndef SB_CL_DEVICE_H
#define SB_CL_DEVICE_H

#include "core/device.h"
#include "sb_common.h"

typedef struct sb_cl_device sb_cl_device;

/* Creates the context and queue and builds (or loads from $XDG_CACHE_HOME/stembridge/) the
 * kernels. SB_ERR_DEVICE with the reason (and the compiler's log) logged on failure. */
sb_status sb_cl_device_open(const sb_device_props *dev, const sb_logger *log, sb_cl_device **out);
void sb_cl_device_close(sb_cl_device *d);
/* Once a device is lost it stays lost for the rest of the process. */
int sb_cl_device_is_lost(const sb_cl_device *d);
const sb_device_props *sb_cl_device_props(const sb_cl_device *d);

#endif
