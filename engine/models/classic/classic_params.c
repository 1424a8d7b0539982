/* The tuned parameters of the built-in separator and the STFT geometry they imply
 * (classic.h steps 1 and 3). The numbers were tuned with bench/classic/bench_quality on the
 * songs of bench/classic/make_songs.sh (see bench/classic/README.md): mean SDR over four
 * stems and four songs; among settings that scored alike there, the one that did best on
 * the held-out songs (make_songs.sh --held-out) and the synthetic mix of tests/classic. */
#include "models/classic/classic_ops.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void sb_classic_params_default(sb_classic_params *p)
{
	p->n_fft = 0;
	p->kt = 4;        /* +-4 hops: about +-93 ms at 44.1 kHz; longer smears sung pitch into drums */
	p->kf = 8;        /* +-8 bins of 21.5 Hz: about +-170 Hz */
	p->kf_lo = 1;     /* +-1 bin below f_lo: a kick's low end reads as percussive, a bass note not */
	p->f_lo = 250.f;
	p->beta = 2.f;    /* a bin is mostly drums only where Pm > 2 Hm */
	p->eps = 1e-12f;
	p->f_b0 = 120.f;
	p->f_b1 = 280.f;
	p->gamma = 16.f;  /* a narrow centre: sources panned even a little stay out of vocals */
	p->c_mono = 0.5f;
	p->v_lo0 = 140.f;
	p->v_lo1 = 280.f;
	p->v_hi0 = 8000.f;
	p->v_hi1 = 10000.f;
}

int sb_classic_fft_size(double rate)
{
	double want = 2048.0 * rate / 44100.0;
	int n = 256;
	/* nearest power of two in the log domain, so 48 kHz keeps 2048 and 96 kHz gets 4096 */
	while (n < (1 << 20) && fabs(log2((double)n * 2) - log2(want)) < fabs(log2((double)n) - log2(want)))
		n *= 2;
	return n;
}

/* Kf and Kf_lo are given for 2048 bins at 44.1 kHz (21.5 Hz each); keep the same width in Hz. */
static int scaled_bins(int k, double bin_hz)
{
	int r = (int)lround(k * (44100.0 / 2048.0) / bin_hz);
	return r > 0 ? r : 1;
}

void sb_classic_geometry(const sb_classic_params *p, double rate, sb_classic_geom *g)
{
	g->n_fft = p->n_fft > 0 ? p->n_fft : sb_classic_fft_size(rate);
	g->hop = g->n_fft / 2;
	g->kt = p->kt > 0 ? p->kt : 1;
	double bin_hz = rate / g->n_fft;
	g->kf = scaled_bins(p->kf, bin_hz);
	g->kf_lo = scaled_bins(p->kf_lo, bin_hz);
	g->bins = g->n_fft / 2 + 1;
	double k_lo = ceil((double)p->f_lo * g->n_fft / rate);
	g->k_lo = k_lo < 0 ? 0 : k_lo > g->bins ? g->bins : (int)k_lo;
	g->beta = p->beta;
	g->eps = p->eps;
	g->gamma = p->gamma;
	g->c_mono = p->c_mono;
}

static float raised(float x)
{
	if (x <= 0.f)
		return 0.f;
	if (x >= 1.f)
		return 1.f;
	return 0.5f - 0.5f * cosf((float)M_PI * x);
}

void sb_classic_tables(const sb_classic_params *p, double rate, int n_fft, float *win,
                       float *bass_w, float *voice_w)
{
	for (int i = 0; i < n_fft; i++)
		win[i] = sqrtf((float)(0.5 - 0.5 * cos(2.0 * M_PI * i / n_fft)));
	for (int k = 0; k < n_fft / 2 + 1; k++) {
		float f = (float)(k * rate / n_fft);
		bass_w[k] = 1.f - raised((f - p->f_b0) / (p->f_b1 - p->f_b0));
		voice_w[k] = raised((f - p->v_lo0) / (p->v_lo1 - p->v_lo0)) *
		             (1.f - raised((f - p->v_hi0) / (p->v_hi1 - p->v_hi0)));
	}
}
