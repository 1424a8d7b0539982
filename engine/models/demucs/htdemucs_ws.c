/* A cache of activation buffers for the HTDemucs forward pass. Every segment allocates the same
 * sequence of buffers, several of them tens of megabytes; from malloc, each of those is a fresh
 * mapping whose pages fault in one by one on every segment (7 % of a segment's time). Freed
 * buffers stay here and the next request of a size they can hold takes the smallest of them,
 * so from the second segment on nothing is mapped or zeroed again.
 *
 * Threads: one workspace per forward pass at a time; only the thread that runs the forward
 * allocates (the pool's workers use scratch handed to them).
 */
#include "models/demucs/htdemucs_internal.h"

#include <stdlib.h>
#include <string.h>

#define WS_MAX_BLOCKS 512

typedef struct {
	void *p;
	size_t size;
	int used;
} ws_block;

struct sb_htdemucs_ws {
	ws_block b[WS_MAX_BLOCKS];
	int n;
};

sb_htdemucs_ws *sb_htdemucs_ws_new(void)
{
	return calloc(1, sizeof(sb_htdemucs_ws));
}

void sb_htdemucs_ws_free(sb_htdemucs_ws *ws)
{
	if (!ws)
		return;
	for (int i = 0; i < ws->n; i++)
		free(ws->b[i].p);
	free(ws);
}

/* 64-byte aligned: whole cache lines for the vector loops, and fftw's alignment */
static void *aligned(size_t bytes)
{
	void *p = NULL;
	return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

void *hd_alloc(sb_htdemucs_ws *ws, size_t bytes)
{
	if (!ws)
		return aligned(bytes);
	int best = -1;
	for (int i = 0; i < ws->n; i++)
		if (!ws->b[i].used && ws->b[i].size >= bytes &&
		    (best < 0 || ws->b[i].size < ws->b[best].size))
			best = i;
	/* a block more than twice the request would pin memory a larger request needs later */
	if (best >= 0 && ws->b[best].size <= 2 * bytes + 65536) {
		ws->b[best].used = 1;
		return ws->b[best].p;
	}
	void *p = aligned(bytes);
	if (!p)
		return NULL;
	if (ws->n == WS_MAX_BLOCKS) {
		/* full: drop the largest free block to make room, else go without caching */
		int drop = -1;
		for (int i = 0; i < ws->n; i++)
			if (!ws->b[i].used && (drop < 0 || ws->b[i].size > ws->b[drop].size))
				drop = i;
		if (drop < 0)
			return p;
		free(ws->b[drop].p);
		ws->b[drop] = ws->b[--ws->n];
	}
	ws->b[ws->n++] = (ws_block){p, bytes, 1};
	return p;
}

void *hd_calloc(sb_htdemucs_ws *ws, size_t bytes)
{
	void *p = hd_alloc(ws, bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

void hd_free(sb_htdemucs_ws *ws, void *p)
{
	if (!p)
		return;
	if (ws)
		for (int i = 0; i < ws->n; i++)
			if (ws->b[i].p == p) {
				ws->b[i].used = 0;
				return;
			}
	free(p);
}
