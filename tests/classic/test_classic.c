/* Tests of the built-in separator through the public model seam (sb_model_open("builtin")):
 * the stems add back to the input, have its length, do not depend on the chunk length, put a
 * synthetic mix's sources in their own stems, stop on cancel and stay silent on silence. */
#include "../check.h"
#include "models/classic/classic_ops.h"
#include "mem_sink.h"
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static uint32_t rng = 12345;
static float frand(void) /* uniform in [-1, 1) */
{
	rng = rng * 1664525u + 1013904223u;
	return (float)((rng >> 8) * (1.0 / 8388608.0)) - 1.f;
}

static sb_status separate(const float *x, int64_t frames, int ch, double rate, int64_t chunk,
                          atomic_int *cancel, mem_sink *ms)
{
	sb_model *m = NULL;
	sb_status st = sb_model_open("builtin", NULL, NULL, &m);
	if (st != SB_OK)
		return st;
	sb_source *src = NULL;
	st = sb_source_memory(x, frames, ch, rate, &src);
	if (st == SB_OK) {
		sb_run_ctx ctx = {0};
		ctx.chunk_frames = chunk;
		ctx.cancel = cancel;
		ctx.threads = 1;
		mem_sink_init(ms, ch);
		st = sb_model_separate(m, &ctx, src, &ms->sink);
		src->close(src);
	}
	sb_model_free(m);
	return st;
}

/* Stems add back to the input and have its length, for several channel counts and rates. */
static void test_sum_and_length(void)
{
	const int chans[] = {1, 2, 6};
	const double rates[] = {8000, 44100, 48000, 96000, 192000};
	for (int ci = 0; ci < 3; ci++) {
		for (int ri = 0; ri < 5; ri++) {
			int ch = chans[ci];
			double rate = rates[ri];
			int64_t frames = (int64_t)(rate * 0.7) + 37; /* not a multiple of any hop */
			float *x = malloc(sizeof(float) * frames * ch);
			for (int64_t i = 0; i < frames; i++)
				for (int c = 0; c < ch; c++)
					x[i * ch + c] = 0.3f * sinf((float)(2 * M_PI * (110 * (c + 1)) * i / rate)) +
					                0.1f * frand();
			mem_sink ms;
			sb_status st = separate(x, frames, ch, rate, 0, NULL, &ms);
			CHECK(st == SB_OK, "separate %d ch %g Hz: %s", ch, rate, sb_status_str(st));
			if (st == SB_OK) {
				for (int s = 0; s < SB_N_STEMS; s++)
					CHECK(ms.frames[s] == frames, "%d ch %g Hz stem %d: %lld frames, want %lld",
					      ch, rate, s, (long long)ms.frames[s], (long long)frames);
				double err = 0, ref = 0;
				for (int64_t i = 0; i < frames * ch; i++) {
					double sum = 0;
					for (int s = 0; s < SB_N_STEMS; s++)
						sum += ms.data[s][i];
					err += (sum - x[i]) * (sum - x[i]);
					ref += (double)x[i] * x[i];
				}
				double rel = sqrt(err / ref);
				CHECK(rel < 1e-4, "%d ch %g Hz: stems sum back with relative error %g", ch, rate,
				      rel);
				/* the split must do something: the drums and vocals stems are not empty and the
				 * bass stem holds the 110 Hz tone */
				double eb = 0;
				for (int64_t i = 0; i < frames * ch; i++)
					eb += (double)ms.data[SB_STEM_BASS][i] * ms.data[SB_STEM_BASS][i];
				CHECK(eb > 0.05 * ref, "%d ch %g Hz: bass stem holds %g of the energy", ch, rate,
				      eb / ref);
			}
			mem_sink_free(&ms);
			free(x);
		}
	}
}

/* Two chunk lengths give the same stems: no seams where chunks meet. */
static void test_chunk_invariance(void)
{
	const double rate = 44100;
	const int ch = 2;
	int64_t frames = 44100 * 3 + 501;
	float *x = malloc(sizeof(float) * frames * ch);
	for (int64_t i = 0; i < frames * ch; i++)
		x[i] = 0.5f * frand() * (float)((i / 9000) % 3) + 0.2f * sinf((float)i * 0.01f);
	mem_sink a, b;
	sb_status sa = separate(x, frames, ch, rate, 1024 * 5, NULL, &a);
	sb_status sb2 = separate(x, frames, ch, rate, 1024 * 37, NULL, &b);
	CHECK(sa == SB_OK && sb2 == SB_OK, "separate failed");
	if (sa == SB_OK && sb2 == SB_OK) {
		for (int s = 0; s < SB_N_STEMS; s++) {
			double md = 0, mx = 0;
			for (int64_t i = 0; i < frames * ch; i++) {
				double d = fabs((double)a.data[s][i] - b.data[s][i]);
				md = d > md ? d : md;
				mx = fabs(a.data[s][i]) > mx ? fabs(a.data[s][i]) : mx;
			}
			CHECK(md <= 1e-6 * (mx > 1 ? mx : 1), "stem %d differs by %g between chunk lengths",
			      s, md);
		}
	}
	mem_sink_free(&a);
	mem_sink_free(&b);
	free(x);
}

static void test_cancel_and_silence(void)
{
	int64_t frames = 48000 * 2;
	float *x = calloc((size_t)frames * 2, sizeof(float));
	atomic_int cancel = 1;
	mem_sink ms;
	sb_status st = separate(x, frames, 2, 48000, 0, &cancel, &ms);
	CHECK(st == SB_ERR_CANCELLED, "cancel gave %s", sb_status_str(st));
	mem_sink_free(&ms);
	st = separate(x, frames, 2, 48000, 0, NULL, &ms);
	CHECK(st == SB_OK, "silence: %s", sb_status_str(st));
	if (st == SB_OK)
		for (int s = 0; s < SB_N_STEMS; s++)
			for (int64_t i = 0; i < frames * 2; i++)
				if (ms.data[s][i] != 0.f || isnan(ms.data[s][i])) {
					CHECK(0, "silence in gave %g in stem %d", ms.data[s][i], s);
					break;
				}
	mem_sink_free(&ms);
	free(x);
}

void test_synthetic_sdr(void);

int main(void)
{
	test_sum_and_length();
	test_chunk_invariance();
	test_cancel_and_silence();
	test_synthetic_sdr();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
