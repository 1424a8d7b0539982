/* Storage for sb_ring; called on non-real-time threads only. */
#include "realtime.h"

#include <stdlib.h>

int sb_ring_init(sb_ring *r, uint32_t capacity_pow2, size_t elem)
{
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->mask = capacity_pow2 - 1;
	r->elem = elem;
	r->buf = calloc(capacity_pow2, elem);
	return r->buf != NULL;
}

void sb_ring_free(sb_ring *r)
{
	free(r->buf);
	r->buf = NULL;
}
