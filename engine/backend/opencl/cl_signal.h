/* The OpenCL backend's signal operations (cl_signal.c, over the base): the sb_ops entries of
 * backend.h's STFT, inverse STFT, moments, standardisation, gather and complex products. */
#ifndef SB_CL_SIGNAL_H
#define SB_CL_SIGNAL_H

#include "backend/opencl/cl_base.h"

void sb_cl_op_stft(sb_bdev *c, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
                   float scale, sb_dv X);
void sb_cl_op_istft(sb_bdev *c, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w,
                    float scale, int e0, int e1, sb_dv o, long os, int add, sb_dv work);
void sb_cl_op_moments(sb_bdev *c, sb_dv x, size_t n, sb_dv stats);
void sb_cl_op_standardise(sb_bdev *c, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
                          int inverse);
void sb_cl_op_gather(sb_bdev *c, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
                     sb_dv ptr, sb_dv idx, sb_dv w);
void sb_cl_op_cmul(sb_bdev *c, sb_dv x, long sa, sb_dv y, sb_dv o, long so, size_t n,
                   int batch);

#endif
