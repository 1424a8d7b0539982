/* The profile's matrix products by shape and path (backend.h: profile_products), the slowest
 * first: which of a pass's products a device loses its time on, for bench_demucs and
 * bench_msst's --profile (issue #24: products near cuBLAS). */
#ifndef SB_BENCH_PROF_PRODUCTS_H
#define SB_BENCH_PROF_PRODUCTS_H

#include "backend/backend.h"

#include <stdio.h>

static inline void print_products(const sb_backend *be, const sb_bdev *d, double prof_s, int top)
{
	sb_prof_product p[256];
	const int n = be->profile_products ? be->profile_products(d, p, 256) : 0;
	if (n <= 0)
		return;
	double s = 0;
	int shapes = 0;
	for (int i = 0; i < n; i++) {
		s += p[i].seconds;
		shapes += p[i].M > 0;
	}
	fprintf(stderr, "  the products by shape (%d shapes%s, %.2f ms), the slowest %d:\n", shapes,
	        shapes < n ? " and more" : "", 1e3 * s, n < top ? n : top);
	fprintf(stderr, "  %-34s %-13s %6s %10s %7s %9s\n", "M x N x K, batch", "path", "calls", "ms",
	        "share", "GFLOP/s");
	for (int i = 0; i < n && i < top; i++) {
		char shape[64] = "(other shapes)";
		if (p[i].M > 0)
			snprintf(shape, sizeof shape, "%dx%dx%d%s b%d%s", p[i].M, p[i].N, p[i].K,
			         p[i].tb ? " tB" : "", p[i].batch, p[i].bias ? " +bias" : "");
		fprintf(stderr, "  %-34s %-13s %6ld %10.3f %6.1f%% %9.1f\n", shape, p[i].path, p[i].calls,
		        1e3 * p[i].seconds, 100 * p[i].seconds / prof_s,
		        p[i].seconds > 0 ? p[i].flops / p[i].seconds / 1e9 : 0.0);
	}
}

#endif
