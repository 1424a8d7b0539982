/* The OpenCL backend's classic operation group (cl_classic.c, over the base): the built-in
 * separator's chunk on classic.cl's kernels, whose program the device builds at its opening
 * (cl_device.c). */
#ifndef SB_CL_CLASSIC_H
#define SB_CL_CLASSIC_H

#include "backend/opencl/cl_base.h"

extern const sb_classic_ops sb_cl_classic_ops;

#endif
