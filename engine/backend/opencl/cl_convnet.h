/* The OpenCL backend's convolution nets' group (cl_convnet.c, over the base): row copies,
 * transposes, grouped norms, depthwise convolutions and products of elements on ops.cl's
 * kernels; and the LSTM's gates, whose products the dispatcher (cl_ops.c) runs. */
#ifndef SB_CL_CONVNET_H
#define SB_CL_CONVNET_H

#include "backend/opencl/cl_base.h"

void sb_cl_op_copy_rows(sb_bdev *c, sb_dv dst, long ldd, long ldi, sb_dv src, long lds,
                        long lsi, int rows, long n, int batch);
void sb_cl_op_permute(sb_bdev *c, sb_dv x, const int dims[4], const long os[4], sb_dv o);
void sb_cl_op_norm_groups(sb_bdev *c, sb_dv x, const sb_norm_geom *g, sb_dv w, sb_dv b,
                          int act, sb_dv o);
void sb_cl_op_dwconv(sb_bdev *c, sb_dv x, int rows, int C, int T, int k, sb_dv w, sb_dv b,
                     sb_dv o);
void sb_cl_op_mul(sb_bdev *c, sb_dv x, sb_dv y, size_t n);
/* step k of an LSTM's recurrence (backend.h: lstm): the gates of z [dirs][n S][4H] (the step's
 * products added), the cell states cs [dirs][n][H], h into o [n][S][dirs H] */
void sb_cl_lstm_cell(sb_bdev *c, sb_dv z, sb_dv cs, sb_dv o, int n, int S, int H, int dirs,
                     int k);

#endif
