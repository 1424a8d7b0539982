/* Helpers for backend implementations (backend/<name>/): not for models or the job engine. */
#ifndef SB_BACKEND_IMPL_H
#define SB_BACKEND_IMPL_H

#include "backend/backend.h"

/* Profile entries from per-operation counters (calls, seconds, flops, names), the slowest
 * first; returns how many were copied. */
int sb_prof_collect(const long *calls, const double *secs, const double *flops,
                    const char *const *names, int count, sb_prof_entry *out, int max);

#endif
