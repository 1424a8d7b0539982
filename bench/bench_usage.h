/* What a benchmark reports of its own process: CPU seconds and peak memory (getrusage). */
#ifndef SB_BENCH_USAGE_H
#define SB_BENCH_USAGE_H

#include <sys/resource.h>

/* CPU seconds of the whole process: on a shared machine a steadier measure than the wall
 * clock (other jobs take cores, not cycles) */
static inline double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
	       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* The process's peak resident memory so far (ru_maxrss), in MiB */
static inline double peak_rss_mb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

#endif
