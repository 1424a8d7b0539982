/* The tuned parameters of the built-in separator and the STFT geometry they imply
 * (classic.h steps 1 and 3; the numbers were tuned with bench/classic/classic_quality). */
#include "classic/classic_ops.h"

#include <math.h>

void sb_classic_params_default(sb_classic_params *p)
{
	p->n_fft = 0;
	p->kt = 8;        /* +-8 hops: about +-190 ms at 44.1 kHz */
	p->kf = 8;        /* +-8 bins of 21.5 Hz: about +-170 Hz */
	p->eps = 1e-12f;
	p->f_b0 = 140.f;
	p->f_b1 = 280.f;
	p->gamma = 4.f;
	p->c_mono = 0.5f;
	p->v_lo0 = 140.f;
	p->v_lo1 = 280.f;
	p->v_hi0 = 5000.f;
	p->v_hi1 = 9000.f;
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

void sb_classic_geometry(const sb_classic_params *p, double rate, sb_classic_geom *g)
{
	g->n_fft = p->n_fft > 0 ? p->n_fft : sb_classic_fft_size(rate);
	g->hop = g->n_fft / 2;
	g->kt = p->kt > 0 ? p->kt : 1;
	/* Kf is given for 2048 bins at 44.1 kHz (21.5 Hz each); keep the same width in Hz. */
	double bin_hz = rate / g->n_fft;
	int kf = (int)lround(p->kf * (44100.0 / 2048.0) / bin_hz);
	g->kf = kf > 0 ? kf : 1;
	g->bins = g->n_fft / 2 + 1;
}
