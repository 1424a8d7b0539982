/* A synthetic stereo song with known stems, for the classic tests and the speed bench:
 * drums (noise-burst snares and hats, pitched-down decaying sine kicks), a bass line (low
 * harmonic tone), a centred voice-like tone (harmonics with vibrato under formant peaks) and a
 * pad panned left, in SB_STEM_* order. Deterministic. */
#ifndef SB_TEST_SYNTH_MIX_H
#define SB_TEST_SYNTH_MIX_H

#include "io/stream.h"

#include <math.h>
#include <stdint.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static float synth_noise(uint32_t *r)
{
	*r = *r * 1664525u + 1013904223u;
	return (float)((*r >> 8) * (1.0 / 8388608.0)) - 1.f;
}

static double formant_gain(double f)
{
	const double fc[3] = {700, 1200, 2600}, bw[3] = {130, 150, 250}, g[3] = {1, 0.6, 0.25};
	double a = 0.02;
	for (int i = 0; i < 3; i++)
		a += g[i] / (1 + ((f - fc[i]) / bw[i]) * ((f - fc[i]) / bw[i]));
	return a;
}

/* Fill stems[s][frames*2] (interleaved stereo) with source s; the mix is their sum. */
static void synth_mix(double rate, int64_t frames, float *stems[SB_N_STEMS])
{
	uint32_t r = 987654321u;
	const double beat = 0.5;
	const double bass_notes[4] = {55.0, 73.42, 65.41, 49.0};
	const double voice_notes[6] = {220.0, 246.94, 261.63, 293.66, 261.63, 196.0};
	const double pad_notes[3] = {329.63, 392.0, 493.88};
	double vphase = 0, bphase = 0;
	for (int64_t i = 0; i < frames; i++) {
		double t = i / rate;
		/* drums */
		double tb = fmod(t, beat), th = fmod(t, beat / 2);
		double kick = tb < 0.3 ? sin(2 * M_PI * (45 * tb + 75 * 0.04 * (1 - exp(-tb / 0.04)))) *
		                             exp(-tb / 0.08)
		                       : 0;
		int beat_no = (int)(t / beat);
		double n = synth_noise(&r);
		double snare = (beat_no % 2 == 1 && tb < 0.2) ? n * exp(-tb / 0.05) * 0.6 : 0;
		double hat = th < 0.05 ? synth_noise(&r) * exp(-th / 0.012) * 0.25 : 0;
		double drums = 0.8 * kick + snare + hat;
		stems[SB_STEM_DRUMS][2 * i] = (float)(drums * 0.55);
		stems[SB_STEM_DRUMS][2 * i + 1] = (float)(drums * 0.45);
		/* bass: note per second, four harmonics */
		double bf = bass_notes[(int)t % 4];
		bphase += 2 * M_PI * bf / rate;
		double env = 1 - exp(-fmod(t, 1.0) / 0.01);
		double bass = 0.35 * env * (sin(bphase) + 0.5 * sin(2 * bphase) + 0.25 * sin(3 * bphase));
		stems[SB_STEM_BASS][2 * i] = stems[SB_STEM_BASS][2 * i + 1] = (float)bass;
		/* voice: centred, vibrato, 12 harmonics under formants, a short gap between notes */
		double vt = fmod(t, 0.75);
		double vf = voice_notes[(int)(t / 0.75) % 6] * (1 + 0.02 * sin(2 * M_PI * 5.5 * t));
		vphase += 2 * M_PI * vf / rate;
		double voice = 0;
		for (int hn = 1; hn <= 12; hn++)
			voice += formant_gain(hn * vf) * sin(hn * vphase) / hn;
		double venv = vt < 0.68 ? (1 - exp(-vt / 0.03)) : 0;
		stems[SB_STEM_VOCALS][2 * i] = stems[SB_STEM_VOCALS][2 * i + 1] = (float)(0.3 * venv * voice);
		/* pad: a held chord panned left */
		double pad = 0;
		for (int k = 0; k < 3; k++)
			pad += sin(2 * M_PI * pad_notes[k] * t) + 0.3 * sin(4 * M_PI * pad_notes[k] * t);
		pad *= 0.06 * (1 - exp(-t / 0.5));
		stems[SB_STEM_OTHER][2 * i] = (float)(pad * 0.9);
		stems[SB_STEM_OTHER][2 * i + 1] = (float)(pad * 0.2);
	}
}

#endif
