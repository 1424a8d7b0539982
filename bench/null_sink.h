/* A sink that only counts what a model writes: a benchmark measures the engine, not the disk.
 * The sum of every 4096th sample keeps the compiler from dropping the work. */
#ifndef SB_BENCH_NULL_SINK_H
#define SB_BENCH_NULL_SINK_H

#include "io/stream.h"

typedef struct {
	sb_sink sink;
	int64_t frames[SB_MAX_STEMS];
	double sum;
} null_sink;

static inline sb_status null_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	null_sink *s = self->impl;
	s->frames[stem] += n;
	for (int64_t i = 0; i < n * self->channels; i += 4096)
		s->sum += data[i];
	return SB_OK;
}

#endif
