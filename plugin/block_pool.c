/* The block pool: the memory run() records into, allocated here on the service thread ahead
 * of time (and every page touched) and handed to run() through the free_blocks ring, so that
 * run() never allocates. Blocks come back with each finished take and wait on the instance's
 * spare list for the next refill.
 *
 * Threads: the service thread, and attach/cleanup while the service does not hold the
 * instance. Never run().
 */
#include "service.h"

#include <stdlib.h>
#include <string.h>

void sb_blocks_give_back(sb_instance *self, sb_block *b)
{
	while (b) {
		sb_block *next = b->next;
		b->next = self->spare;
		self->spare = b;
		b = next;
	}
}

void sb_blocks_refill(sb_instance *self)
{
	const uint32_t target = atomic_load(&self->freewheeling) ? SB_POOL_FREEWHEEL
	                                                         : SB_POOL_REALTIME;
	const size_t bytes = sizeof(sb_block) + (size_t)SB_BLOCK_FRAMES * self->channels * sizeof(float);
	while (sb_ring_count(&self->free_blocks) < target) {
		sb_block *b = self->spare;
		if (b) {
			self->spare = b->next;
		} else {
			b = malloc(bytes);
			if (!b)
				break;
			memset(b, 0, bytes); /* touch every page here, not in run() */
			self->pool_blocks++;
		}
		b->next = NULL;
		sb_ring_push(&self->free_blocks, &b);
	}
	/* Give back what a long freewheel left spare once playing in real time again. */
	while (self->spare && !atomic_load(&self->freewheeling)) {
		sb_block *b = self->spare;
		self->spare = b->next;
		free(b);
		self->pool_blocks--;
	}
}

static void free_blocks(sb_block *b)
{
	while (b) {
		sb_block *n = b->next;
		free(b);
		b = n;
	}
}

void sb_blocks_free(sb_instance *self)
{
	sb_block *b;
	while (sb_ring_pop(&self->free_blocks, &b))
		free(b);
	free_blocks(self->spare);
	free_blocks(self->rt_block);
	self->spare = self->rt_block = NULL;
}
