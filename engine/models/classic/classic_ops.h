/* The built-in separator's streaming driver and the arithmetic both sides of its per-chunk
 * seam agree on. The driver (classic_driver.c) owns reading, overlap-add, the "other" stem and
 * writing; the backend's classic operation group (backend/backend.h: sb_classic_ops; the CPU's
 * in backend/cpu/classic_cpu.c, OpenCL's in backend/opencl/cl_classic.c) owns steps 1-6 and
 * the inverse STFT of step 7 in classic.h for one chunk of frames. Backends agree within 1e-4
 * relative per stem (tests/backend).
 *
 * GEOMETRY (sb_classic_geom): N = FFT size, H = N/2 hop, Kt = time-median half-length
 * (frames), Kf = frequency-median half-length in bins for this rate, B = N/2 + 1 bins,
 * Kf_lo = the frequency-median half-length in bins below f_lo, k_lo = ceil(f_lo * N / rate)
 * clamped to [0, B]: the number of bins below f_lo.
 * STFT frame t covers input samples [(t-1)H, (t+1)H).
 *
 * ONE CALL process(st, nt, in, out) computes the masked output frames t0 .. t0+nt-1 (t0 is
 * implied by where the driver cut 'in'; nothing in the algorithm depends on t0 itself):
 *   in:  interleaved, 'channels' wide, (nt + 2*Kt + 1) * H frames = input samples
 *        [(t0-Kt-1)H, (t0+nt+Kt)H), zeros outside the file (the driver fills them).
 *        From it the backend takes STFT frames t0-Kt .. t0+nt+Kt-1 (context frames only feed
 *        the time median of M; they get no output).
 *   out: 3 stems (vocals, drums, bass) one after another, each (nt+1)*H frames interleaved
 *        'channels' wide = samples [(t0-1)H, (t0+nt)H). process() OVERWRITES it with the sum
 *        over frames t in [t0, t0+nt) of syn_win * IFFT(X_c(t) * m_s(t)) / N placed at
 *        (t-1)H. It must not add frames outside the chunk; the driver adds the previous
 *        chunk's last H frames (the half-frame overlap) itself.
 * Rules that fix the arithmetic, so backends get the same numbers:
 *   - windows: w[n] = sqrt(0.5 - 0.5 cos(2 pi n / N)), n = 0..N-1, for analysis and synthesis.
 *   - FFT unnormalised forward; inverse divided by N.
 *   - median of n values = the element of rank n/2 (0-based) after sorting ascending (for even
 *     n the upper middle). Time median over frames t-Kt..t+Kt (always 2Kt+1 values); frequency
 *     median over bins max(0,k-K)..min(B-1,k+K) with K = Kf_lo for k < k_lo, else K = Kf.
 *   - mask_p = Pm*Pm / (hb*hb + Pm*Pm + eps) with hb = beta*Hm.
 *   - M, psi and the masks as in classic.h; the band weights b(f), v(f) use f = k * rate / N and
 *     the raised cosine r(x) = 0.5 - 0.5 cos(pi x) for x in [0,1].
 *
 * Threads: the driver and its backend state run on the job's thread; one state per job.
 */
#ifndef SB_CLASSIC_OPS_H
#define SB_CLASSIC_OPS_H

#include "backend/backend.h"
#include "models/classic/classic.h"

/* The geometry for a rate (fills n_fft when p->n_fft is 0, scales Kf with the bin width) and
 * the mask constants; the tables and the chunk size are the caller's. */
void sb_classic_geometry(const sb_classic_params *p, double rate, sb_classic_geom *g);

/* The tables both backends start from: the sqrt-Hann window (n_fft values) and the band
 * weights b(f), v(f) (n_fft/2 + 1 values each), computed once here so they are identical. */
void sb_classic_tables(const sb_classic_params *p, double rate, int n_fft, float *win,
                       float *bass_w, float *voice_w);

/* The streaming driver: runs the device's classic operations over the whole source and writes
 * four stems to the sink; nt_max frames per chunk (from ctx->chunk_frames). Used by the model
 * and by tests that compare backends. */
sb_status sb_classic_run(const sb_exec *dev, const sb_classic_params *p, const sb_run_ctx *ctx,
                         sb_source *in, sb_sink *out);

#endif
