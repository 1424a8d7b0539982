/* The OpenCL backend's dispatcher (cl_ops.c): the sb_ops table of backend.h, each entry a
 * launch over the base (cl_base.h) or a choice among the kernels that do it: a product's path
 * (CLBlast, the own kernel, the tiled one, the tensor cores), attention's way (in one pass, by
 * tiles, as two products around a softmax, on the tensor cores). Only cl_backend.c includes
 * this. */
#ifndef SB_CL_OPS_H
#define SB_CL_OPS_H

#include "backend/opencl/cl_base.h"

extern const sb_ops sb_cl_ops;

#endif
