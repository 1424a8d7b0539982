/* The take lane's waveform (plugin/take_wave.c) on its own: fed in blocks of uneven sizes, each
 * column holds exactly the min and max of its frames over both channels, whatever the take's
 * length; the whole take fits in at most SB_WAVE_COLS columns; a NaN draws as silence. */
#include "take_wave.h"

#include "../check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float sample(int64_t i, int c)
{
	return (float)(0.8 * sin(0.0013 * (double)i * (c + 1)) * sin(0.00007 * (double)i) +
	               (i % 9973 == 0 ? 0.15 : 0.0));
}

/* Feeds 'frames' frames in blocks of 1..1023 frames and checks every column. */
static void check_length(int64_t frames)
{
	static sb_wave w;
	sb_wave_reset(&w);
	float *l = malloc(1024 * sizeof(float)), *r = malloc(1024 * sizeof(float));
	const float *in[2] = {l, r};
	uint32_t block = 1;
	for (int64_t at = 0; at < frames;) {
		block = block * 7 % 1023 + 1;
		const uint32_t n = (uint32_t)(frames - at < block ? frames - at : block);
		for (uint32_t i = 0; i < n; i++) {
			l[i] = sample(at + i, 0);
			r[i] = sample(at + i, 1);
		}
		sb_wave_add(&w, in, 2, 0, n);
		at += n;
	}
	const uint32_t cols = sb_wave_columns(&w);
	CHECK(cols <= SB_WAVE_COLS && (frames < SB_WAVE_COLS * (int64_t)SB_WAVE_FIRST_FRAMES ||
	                               cols >= SB_WAVE_COLS / 2),
	      "%lld frames: %u columns", (long long)frames, cols);
	CHECK((int64_t)w.n * w.per_col + w.in_col == frames && w.in_col < w.per_col,
	      "%lld frames: %u columns of %u and %u frames", (long long)frames, w.n, w.per_col, w.in_col);
	double worst = 0;
	for (uint32_t c = 0; c < cols; c++) {
		float lo = INFINITY, hi = -INFINITY;
		for (int64_t f = (int64_t)c * w.per_col; f < (int64_t)(c + 1) * w.per_col && f < frames;
		     f++)
			for (int ch = 0; ch < 2; ch++) {
				lo = fminf(lo, sample(f, ch));
				hi = fmaxf(hi, sample(f, ch));
			}
		const float glo = c < w.n ? w.lo[c] : w.cur_lo, ghi = c < w.n ? w.hi[c] : w.cur_hi;
		worst = fmax(worst, fabs(glo - lo) + fabs(ghi - hi));
	}
	CHECK(worst == 0.0, "%lld frames: a column's min or max is off by %g", (long long)frames,
	      worst);
	free(l);
	free(r);
}

int main(void)
{
	const int64_t lengths[] = {1, 63, 64, 65, 32767, 32768, 32769, 100000, 48000 * 61 + 5,
	                           48000LL * 60 * 12};
	for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
		check_length(lengths[i]);

	/* one channel missing (NULL: silence) and a NaN: both draw as 0 */
	sb_wave w;
	sb_wave_reset(&w);
	float x[64];
	for (int i = 0; i < 64; i++)
		x[i] = 0.5f;
	x[10] = NAN;
	const float *in[2] = {x, NULL};
	sb_wave_add(&w, in, 2, 0, 64);
	CHECK(w.n == 1 && w.lo[0] == 0.0f && w.hi[0] == 0.5f, "NaN and a missing channel: %u "
	      "columns, %g..%g", w.n, w.lo[0], w.hi[0]);
	printf("take_wave: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
