/* Inside the CPU backend: what its files share. Nothing outside backend/cpu includes this. */
#ifndef SB_CPU_INTERNAL_H
#define SB_CPU_INTERNAL_H

#include "backend/backend.h"
#include "core/thread_pool.h"

extern const sb_classic_ops sb_cpu_classic_ops;

/* the device's thread pool */
sb_pool *sb_cpu_pool(sb_bdev *d);

#endif
