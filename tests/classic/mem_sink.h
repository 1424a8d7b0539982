/* A memory sink for the classic tests and benches: four growable stems. */
#ifndef SB_TEST_MEM_SINK_H
#define SB_TEST_MEM_SINK_H

#include "core/stream.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_sink sink;
	float *data[SB_N_STEMS];
	int64_t frames[SB_N_STEMS], cap[SB_N_STEMS];
} mem_sink;

static sb_status mem_sink_write(sb_sink *self, int stem, const float *d, int64_t n)
{
	mem_sink *m = self->impl;
	if (stem < 0 || stem >= SB_N_STEMS)
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

static void mem_sink_init(mem_sink *m, int channels)
{
	memset(m, 0, sizeof *m);
	m->sink.n_stems = SB_N_STEMS;
	m->sink.channels = channels;
	m->sink.write = mem_sink_write;
	m->sink.impl = m;
}

static void mem_sink_free(mem_sink *m)
{
	for (int s = 0; s < SB_N_STEMS; s++)
		free(m->data[s]);
}

#endif
