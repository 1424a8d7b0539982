/* A memory sink for the tests and benches: growable stems, four unless mem_sink_init_n asks
 * for more (up to SB_MAX_STEMS, by canonical index). */
#ifndef SB_TEST_MEM_SINK_H
#define SB_TEST_MEM_SINK_H

#include "io/stream.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_sink sink;
	float *data[SB_MAX_STEMS];
	int64_t frames[SB_MAX_STEMS], cap[SB_MAX_STEMS];
} mem_sink;

static inline sb_status mem_sink_write(sb_sink *self, int stem, const float *d, int64_t n)
{
	mem_sink *m = self->impl;
	if (stem < 0 || stem >= self->n_stems)
		return SB_ERR_INVALID;
	if (m->frames[stem] + n > m->cap[stem]) {
		int64_t cap = (m->frames[stem] + n) * 2;
		float *p = realloc(m->data[stem], sizeof(float) * (size_t)(cap * self->channels));
		if (!p)
			return SB_ERR_NOMEM;
		m->data[stem] = p;
		m->cap[stem] = cap;
	}
	memcpy(m->data[stem] + m->frames[stem] * self->channels, d,
	       sizeof(float) * (size_t)(n * self->channels));
	m->frames[stem] += n;
	return SB_OK;
}

static inline void mem_sink_init_n(mem_sink *m, int channels, int n_stems)
{
	memset(m, 0, sizeof *m);
	m->sink.n_stems = n_stems;
	m->sink.channels = channels;
	m->sink.write = mem_sink_write;
	m->sink.impl = m;
}

static inline void mem_sink_init(mem_sink *m, int channels)
{
	mem_sink_init_n(m, channels, SB_N_STEMS);
}

static inline void mem_sink_free(mem_sink *m)
{
	for (int s = 0; s < SB_MAX_STEMS; s++)
		free(m->data[s]);
}

#endif
