/* The built-in separator ("builtin"): classic signal processing on an STFT, no download.
 *
 * THE ALGORITHM (the CPU path in engine/backend/cpu/classic_cpu.c and the OpenCL path in
 * engine/backend/opencl/cl_classic.c implement
 * exactly this; a change here changes both, and the tests compare them within 1e-4):
 *
 * 1. STFT per channel. Frame size N = the power of two nearest 2048 * rate / 44100 (at least
 *    256), hop H = N/2, periodic sqrt-Hann analysis and synthesis windows (Hann at 50 % overlap
 *    sums to exactly 1, so analysis * synthesis overlap-adds to one: perfect reconstruction).
 *    Frame t covers input samples [t*H - N/2, t*H + N/2); the input is zero outside [0, len).
 *    Frames t = 0 .. floor((len - 1) / H) + 1 cover every sample twice. Frames outside the
 *    file read zeros, so the medians near the ends see zero frames (the same in every chunk).
 * 2. Analysis magnitude per bin k, frame t: M = sqrt(mean over channels |X_c|^2).
 * 3. Harmonic/percussive (Fitzgerald 2010, soft masks as Driedger et al. 2014):
 *    Hm = median of M over time (frames t-Kt..t+Kt), Pm = median over frequency
 *    (bins k-Kf..k+Kf, clamped at the edges; below f_lo, bins k-Kf_lo..k+Kf_lo: in the bass
 *    range a kick is only a few bins wide, and a wide median there calls it harmonic and bass
 *    notes percussive). mask_p = Pm^2 / ((beta Hm)^2 + Pm^2 + eps), mask_h = 1 - mask_p;
 *    beta is Driedger's separation factor (> 1: a bin must be clearly percussive to count).
 * 4. Bass: low-band weight b(f) = 1 below f_b0, raised-cosine to 0 at f_b1.
 *    m_bass = mask_h * b.
 * 5. Vocals: centre/side analysis of channels 0 and 1 (Avendano & Jot 2002 panning
 *    similarity) psi = 2 |X0 conj(X1)| / (|X0|^2 + |X1|^2 + eps) in [0, 1], 1 when centred;
 *    centre weight c = psi^gamma (mono input: c = c_mono). Voice band weight v(f), raised-cosine
 *    edges. m_vocals = mask_h * (1 - b) * v * c.
 * 6. Drums: m_drums = mask_p. Other: m_other = 1 - m_vocals - m_drums - m_bass (>= 0).
 *    The four masks sum to one in every bin, and the same real mask applies to every channel.
 * 7. Inverse STFT of X_c * m_s for vocals, drums and bass; other = input - (vocals + drums +
 *    bass) in the time domain, so the stems add back to the input to float rounding.
 *
 * Parameters (classic_params_default() holds the tuned values; keep this list in step):
 *    Kt, Kf, Kf_lo, f_lo, beta, eps, f_b0, f_b1, gamma, c_mono, voice band edges.
 *
 * The exact arithmetic (windows, median rank, band weights) and the per-chunk seam between the
 * streaming driver and a backend are in classic_ops.h.
 *
 * Streaming in bounded memory with no seams: the mask of frame t depends only on frames
 * t-Kt..t+Kt, so a chunk that computes frames [t0, t1) from STFT frames [t0-Kt, t1+Kt) gives
 * the same result as processing the whole file at once; output samples before t1*H - N/2 are
 * final after that chunk and are written out. Chunk length does not change the stems.
 */
#ifndef SB_CLASSIC_H
#define SB_CLASSIC_H

#include "models/model.h"

typedef struct {
	int n_fft;        /* 0: from the rate as above */
	int kt, kf;       /* median half-lengths, frames and bins (bins scaled with rate) */
	int kf_lo;        /* frequency-median half-length below f_lo, bins (scaled like kf) */
	float f_lo;       /* Hz */
	float beta;       /* separation factor of the percussive mask */
	float eps;
	float f_b0, f_b1; /* Hz */
	float gamma, c_mono;
	float v_lo0, v_lo1, v_hi0, v_hi1; /* voice band: rises v_lo0..v_lo1, falls v_hi0..v_hi1 */
} sb_classic_params;

void sb_classic_params_default(sb_classic_params *p);
/* N for a rate, per step 1 */
int sb_classic_fft_size(double rate);


#endif
