/* Helpers for backend implementations (backend/<name>/): not for models or the job engine. */
#ifndef SB_BACKEND_IMPL_H
#define SB_BACKEND_IMPL_H

#include "backend/backend.h"

/* Profile entries from per-operation counters (calls, seconds, flops, names), the slowest
 * first; returns how many were copied. */
int sb_prof_collect(const long *calls, const double *secs, const double *flops,
                    const char *const *names, int count, sb_prof_entry *out, int max);

/* A profile's matrix products by shape and path (profile_products): one entry a shape and path
 * told apart, the last taking every one past them (its M 0, its path "-"). Zeroed: empty. */
#define SB_PROF_SHAPES 192 /* HTDemucs has about 100 */
typedef struct {
	sb_prof_product e[SB_PROF_SHAPES + 1];
	int n;
} sb_prof_shapes;

/* a product of 'seconds' counted under its shape and path (path: a string that outlives the
 * table, compared by address) */
void sb_prof_shape_add(sb_prof_shapes *t, int M, int N, int K, int tb, int batch, int bias,
                       const char *path, double seconds);
/* the entries, the slowest first, at most max; returns how many were copied */
int sb_prof_shapes_collect(const sb_prof_shapes *t, sb_prof_product *out, int max);

#endif
