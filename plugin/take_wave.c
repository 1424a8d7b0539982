/* The take's waveform as it is recorded (take_wave.h). Threads: run() only. */
#include "take_wave.h"

#include <stdbool.h>

SB_REALTIME void sb_wave_reset(sb_wave *w)
{
	w->n = 0;
	w->per_col = SB_WAVE_FIRST_FRAMES;
	w->in_col = 0;
	w->cur_lo = w->cur_hi = 0.0f;
}

/* The columns are full: each pair becomes one, covering twice the frames. */
SB_REALTIME static void merge_pairs(sb_wave *w)
{
	for (uint32_t i = 0; i < w->n / 2; i++) {
		const float lo = w->lo[2 * i], lo2 = w->lo[2 * i + 1];
		const float hi = w->hi[2 * i], hi2 = w->hi[2 * i + 1];
		w->lo[i] = lo < lo2 ? lo : lo2;
		w->hi[i] = hi > hi2 ? hi : hi2;
	}
	w->n /= 2;
	w->per_col *= 2;
}

SB_REALTIME void sb_wave_add(sb_wave *w, const float *const *in, int channels, uint32_t from,
                             uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		float lo = w->in_col ? w->cur_lo : 0.0f, hi = w->in_col ? w->cur_hi : 0.0f;
		bool first = w->in_col == 0;
		for (int c = 0; c < channels; c++) {
			const float x = in[c] ? in[c][from + i] : 0.0f;
			const float v = x == x ? x : 0.0f; /* a NaN draws as silence */
			if (first || v < lo)
				lo = v;
			if (first || v > hi)
				hi = v;
			first = false;
		}
		w->cur_lo = lo;
		w->cur_hi = hi;
		if (++w->in_col < w->per_col)
			continue;
		w->lo[w->n] = lo;
		w->hi[w->n] = hi;
		w->n++;
		w->in_col = 0;
		/* full: merged at once, so that the columns and the one being filled never exceed
		 * SB_WAVE_COLS */
		if (w->n == SB_WAVE_COLS)
			merge_pairs(w);
	}
}
