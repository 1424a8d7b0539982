/* The waveform of the take being recorded, for the UI's take lane: the smallest and largest
 * sample (over the channels) of each column of frames, in a fixed array. When the columns are
 * full, neighbours merge in pairs and a column covers twice the frames, so a take of any length
 * fits and the picture always shows all of it.
 *
 * Threads: run() only (SB_REALTIME: no allocation, no call that can block); run() forges the
 * array onto the notify port (plugin.c) a few times a second while a UI listens.
 */
#ifndef SB_TAKE_WAVE_H
#define SB_TAKE_WAVE_H

#include "realtime.h"

#include <stdint.h>

#define SB_WAVE_COLS 512          /* at most; at least half of it once the take is long */
#define SB_WAVE_FIRST_FRAMES 64u  /* frames per column at a take's start (1.3 ms at 48 kHz) */

typedef struct {
	float lo[SB_WAVE_COLS], hi[SB_WAVE_COLS];
	uint32_t n;          /* complete columns */
	uint32_t per_col;    /* frames per column */
	uint32_t in_col;     /* frames in the column being filled (not among the n) */
	float cur_lo, cur_hi;
} sb_wave;

SB_REALTIME void sb_wave_reset(sb_wave *w);
/* Frames [from, from + n) of the input channels (a NULL channel counts as silence). */
SB_REALTIME void sb_wave_add(sb_wave *w, const float *const *in, int channels, uint32_t from,
                             uint32_t n);
/* Columns to show: the complete ones and the one being filled. */
SB_REALTIME static inline uint32_t sb_wave_columns(const sb_wave *w)
{
	return w->n + (w->in_col > 0);
}

#endif
