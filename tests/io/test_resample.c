/* Rate conversion around fixed-rate models: a 48 kHz input reaches a 44.1 kHz model as the same
 * waveform, and stems come back at 48 kHz with exactly the input's frame count and no shift
 * (a shift of one sample would show as a large error against the analytic signal). */
#include "../check.h"
#include "../classic/mem_sink.h"
#include "io/resample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float tone(double t, int c)
{
	return (float)(0.4 * sin(2 * M_PI * 997 * t + c) + 0.2 * sin(2 * M_PI * 3001 * t));
}

static void roundtrip(double in_rate, double model_rate, int64_t frames)
{
	float *x = malloc(sizeof(float) * (size_t)frames * 2);
	for (int64_t i = 0; i < frames; i++)
		for (int c = 0; c < 2; c++)
			x[i * 2 + c] = tone((double)i / in_rate, c);
	sb_source *src = NULL, *rs = NULL;
	sb_source_memory(x, frames, 2, in_rate, &src);
	sb_status st = sb_source_resampled(src, model_rate, NULL, NULL, &rs);
	CHECK(st == SB_OK, "resampled source: %s", sb_status_str(st));
	if (st != SB_OK)
		return;
	int64_t mf = rs->frames;
	CHECK(mf == llround((double)frames * model_rate / in_rate), "model length %lld", (long long)mf);
	float *y = malloc(sizeof(float) * (size_t)mf * 2);
	rs->read(rs, 0, mf, y);
	double err = 0, ref = 0;
	for (int64_t i = 200; i < mf - 200; i++)
		for (int c = 0; c < 2; c++) {
			double d = y[i * 2 + c] - tone((double)i / model_rate, c);
			err += d * d;
			ref += (double)y[i * 2 + c] * y[i * 2 + c];
		}
	CHECK(sqrt(err / ref) < 1e-3, "%g->%g Hz input differs from the analytic tone by %g", in_rate,
	      model_rate, sqrt(err / ref));

	/* the model "writes" the tone at its rate in uneven pieces; the stems come back */
	mem_sink ms;
	mem_sink_init(&ms, 2);
	sb_resample_sink *rk = NULL;
	st = sb_resample_sink_new(&ms.sink, model_rate, in_rate, frames, &rk);
	CHECK(st == SB_OK, "resample sink");
	sb_sink *k = sb_resample_sink_sink(rk);
	for (int s = 0; s < SB_N_STEMS; s++) {
		int64_t at = 0, piece = 1000 + 777 * s;
		while (at < mf) {
			int64_t n = mf - at < piece ? mf - at : piece;
			k->write(k, s, y + at * 2, n);
			at += n;
		}
	}
	st = sb_resample_sink_finish(rk);
	CHECK(st == SB_OK, "finish");
	for (int s = 0; s < SB_N_STEMS; s++) {
		CHECK(ms.frames[s] == frames, "stem %d: %lld frames, input %lld", s,
		      (long long)ms.frames[s], (long long)frames);
		double e2 = 0, r2 = 0;
		for (int64_t i = 400; i < frames - 400 && ms.frames[s] == frames; i++)
			for (int c = 0; c < 2; c++) {
				double d = ms.data[s][i * 2 + c] - x[i * 2 + c];
				e2 += d * d;
				r2 += (double)x[i * 2 + c] * x[i * 2 + c];
			}
		CHECK(ms.frames[s] == frames && sqrt(e2 / r2) < 2e-3,
		      "%g Hz stem %d after the round trip differs by %g", in_rate, s, sqrt(e2 / r2));
	}
	sb_resample_sink_free(rk);
	mem_sink_free(&ms);
	free(y);
	rs->close(rs);
	src->close(src);
	free(x);
}

int main(void)
{
	roundtrip(48000, 44100, 48000 * 3 + 17);
	roundtrip(96000, 44100, 96000 * 2 + 5);
	roundtrip(22050, 44100, 22050 * 2 + 3);
	roundtrip(8000, 44100, 8000 + 1);
	printf("resample: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
