/* Inside the CPU backend: what its files share. Nothing outside backend/cpu includes this. */
#ifndef SB_CPU_INTERNAL_H
#define SB_CPU_INTERNAL_H

#include "backend/backend.h"
#include "core/thread_pool.h"

extern const sb_classic_ops sb_cpu_classic_ops;

/* the device's thread pool */
sb_pool *sb_cpu_pool(sb_bdev *d);

/* the signal operations (cpu_signal.c): SB_ERR_NOMEM when scratch or a plan cannot be made */
sb_status sb_cpu_stft(sb_pool *pool, const sb_stft *g, const float *x, long xs, int ch, long L,
                      const float *w, float scale, float *X);
sb_status sb_cpu_istft(sb_pool *pool, const sb_stft *g, const float *X, int ch, long L,
                       const float *w, float scale, int e0, int e1, float *o, long os, int add,
                       float *work);
void sb_cpu_moments(const float *x, size_t n, float *stats);
void sb_cpu_standardise(sb_pool *pool, const float *x, float *o, size_t n, const float *stats,
                        float eps, int inverse);
void sb_cpu_gather(sb_pool *pool, const float *x, long ldx, float *o, long ldo, size_t rows,
                   int n, const float *ptr, const float *idx, const float *w);
void sb_cpu_cmul(sb_pool *pool, const float *a, long sa, const float *c, float *o, long so,
                 size_t n, int batch);

#endif
