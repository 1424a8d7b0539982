/* Real-time discipline for plugin/: the SB_REALTIME marker and a lock-free single-producer
 * single-consumer ring.
 *
 * SB_REALTIME marks every function run() reaches. With clang 20+ it becomes the
 * `nonblocking` attribute that -Wfunction-effects checks; elsewhere it documents the promise,
 * and tests/plugin/rt_trap.c checks it at run time by counting allocations, locks and file I/O
 * made on the run() thread.
 */
#ifndef SB_REALTIME_H
#define SB_REALTIME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(nonblocking)
#define SB_REALTIME __attribute__((nonblocking))
#endif
#endif
#ifndef SB_REALTIME
#define SB_REALTIME
#endif

/* One producer thread, one consumer thread, fixed-size elements copied in and out. The
 * storage is allocated by sb_ring_init on a non-real-time thread; push and pop never block. */
typedef struct {
	_Atomic uint32_t head; /* written by the producer */
	_Atomic uint32_t tail; /* written by the consumer */
	uint32_t mask;
	size_t elem;
	unsigned char *buf;
} sb_ring;

int sb_ring_init(sb_ring *r, uint32_t capacity_pow2, size_t elem);
void sb_ring_free(sb_ring *r);

SB_REALTIME static inline int sb_ring_push(sb_ring *r, const void *e)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (h - t > r->mask)
		return 0;
	memcpy(r->buf + (size_t)(h & r->mask) * r->elem, e, r->elem);
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return 1;
}

SB_REALTIME static inline int sb_ring_pop(sb_ring *r, void *e)
{
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	if (h == t)
		return 0;
	memcpy(e, r->buf + (size_t)(t & r->mask) * r->elem, r->elem);
	atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	return 1;
}

SB_REALTIME static inline uint32_t sb_ring_count(sb_ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_acquire) -
	       atomic_load_explicit(&r->tail, memory_order_acquire);
}

#endif
