/* The synthetic song of synth_mix.h through "builtin": each source lands mostly in its own
 * stem, measured as SDR = 10 log10(|s|^2 / |s - s_est|^2). */
#include "mem_sink.h"
#include "models/model.h"
#include "synth_mix.h"

#include <stdio.h>
#include <stdlib.h>

/* Floors: the SDR measured when this test was written minus 3 dB of margin for float and
 * libm differences between machines (see the printed values; README in bench/classic). */
static const double sdr_floor[SB_N_STEMS] = {SDR_FLOOR_VOCALS, SDR_FLOOR_DRUMS, SDR_FLOOR_BASS,
                                             SDR_FLOOR_OTHER};

void test_synthetic_sdr(void);
void test_synthetic_sdr(void)
{
	const double rate = 44100;
	const int64_t frames = 44100 * 8;
	float *stems[SB_N_STEMS];
	float *mix = calloc((size_t)frames * 2, sizeof(float));
	for (int s = 0; s < SB_N_STEMS; s++)
		stems[s] = calloc((size_t)frames * 2, sizeof(float));
	synth_mix(rate, frames, stems);
	for (int64_t i = 0; i < frames * 2; i++)
		for (int s = 0; s < SB_N_STEMS; s++)
			mix[i] += stems[s][i];
	sb_model *m = NULL;
	sb_source *src = NULL;
	mem_sink ms;
	mem_sink_init(&ms, 2);
	sb_run_ctx ctx = {0};
	int bad = sb_model_open("builtin", NULL, NULL, &m) != SB_OK ||
	          sb_source_memory(mix, frames, 2, rate, &src) != SB_OK ||
	          sb_model_separate(m, &ctx, src, &ms.sink) != SB_OK;
	if (bad) {
		fprintf(stderr, "FAIL: synthetic mix did not separate\n");
		exit(1);
	}
	int fail = 0;
	for (int s = 0; s < SB_N_STEMS; s++) {
		double e = 0, d = 0;
		for (int64_t i = 0; i < frames * 2; i++) {
			e += (double)stems[s][i] * stems[s][i];
			d += ((double)stems[s][i] - ms.data[s][i]) * ((double)stems[s][i] - ms.data[s][i]);
		}
		double sdr = 10 * log10(e / d);
		fprintf(stderr, "%s SDR %.2f dB (floor %.1f)\n", sb_stem_names[s], sdr, sdr_floor[s]);
		if (!(sdr >= sdr_floor[s])) {
			fprintf(stderr, "FAIL: %s SDR %.2f below %.1f\n", sb_stem_names[s], sdr, sdr_floor[s]);
			fail = 1;
		}
	}
	src->close(src);
	sb_model_free(m);
	mem_sink_free(&ms);
	for (int s = 0; s < SB_N_STEMS; s++)
		free(stems[s]);
	free(mix);
	if (fail)
		exit(1);
}
