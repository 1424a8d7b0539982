/* HTDemucs._spec and ._ispec (demucs/htdemucs.py, demucs/spec.py) without torch.stft:
 *
 * _spec: the segment is reflect-padded by 3/2 hop on the left and up to a whole number of
 * hops plus 3/2 hop on the right, then torch.stft(n_fft 4096, hop 1024, periodic Hann,
 * normalized, center=True with reflect padding) is taken and frames 2 .. 2+T-1 kept, with the
 * Nyquist bin dropped. The kept frames never reach stft's own centre padding, so frame t
 * starts at sample 1024 t - 1536 of the segment with one level of reflection.
 *
 * _ispec: the inverse with the Nyquist bin and two frames on each side zeroed, then
 * torch.istft: irfft of each frame times sqrt(n_fft) (undoing "normalized"), windowed,
 * overlap-added and divided by the overlap-added squared window (over all T+4 frames), and
 * the centre and 3/2-hop padding cropped away.
 */
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-worker FFT scratch: a real frame, then the spectrum, each starting on a 256-byte
 * boundary, so that every worker's arrays are aligned like the ones the plans were made with
 * (fftw's new-array execute requires it). */
#define FFT_REAL_FLOATS (HD_NFFT + 64)
#define FFT_SCRATCH_FLOATS (FFT_REAL_FLOATS + ((2 * (HD_NFFT / 2 + 1) + 63) / 64) * 64)

typedef struct {
	const sb_htdemucs *net;
	const float *mix;
	int64_t L;
	int T, ac;
	float *z;
	float *scratch; /* per worker: HD_NFFT real + (HD_NFFT/2+1) complex */
} spec_job;

static inline int64_t reflect(int64_t n, int64_t L)
{
	if (n < 0)
		n = -n;
	if (n >= L)
		n = 2 * (L - 1) - n;
	return n;
}

static void spec_part(void *vj, int64_t b, int64_t e, int worker)
{
	const spec_job *j = vj;
	const int F = HD_NFFT / 2;
	float *in = j->scratch + (size_t)worker * FFT_SCRATCH_FLOATS;
	fftwf_complex *out = (fftwf_complex *)(in + FFT_REAL_FLOATS);
	const float norm = 1.f / sqrtf((float)HD_NFFT);
	for (int64_t task = b; task < e; task++) {
		const int c = (int)(task / j->T), t = (int)(task % j->T);
		const float *x = j->mix + (size_t)c * j->L;
		const int64_t start = (int64_t)HD_HOP * t - HD_HOP / 2 * 3;
		for (int i = 0; i < HD_NFFT; i++) {
			const int64_t n = start + i;
			const float v = n >= 0 && n < j->L ? x[n] : x[reflect(n, j->L)];
			in[i] = v * j->net->window[i];
		}
		fftwf_execute_dft_r2c(j->net->fwd, in, out);
		float *o = j->z + (((size_t)c * F) * j->T + t) * 2;
		for (int f = 0; f < F; f++) {
			o[(size_t)f * j->T * 2] = out[f][0] * norm;
			o[(size_t)f * j->T * 2 + 1] = out[f][1] * norm;
		}
	}
}

static float *alloc_fft_scratch(sb_htdemucs_ws *ws, int threads)
{
	return hd_alloc(ws, sizeof(float) * FFT_SCRATCH_FLOATS * (size_t)threads);
}

sb_status hd_spec(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws, const float *mix,
                  int ac, int64_t L, float *z)
{
	const int T = (int)((L + HD_HOP - 1) / HD_HOP);
	spec_job j = {net, mix, L, T, ac, z, alloc_fft_scratch(ws, sb_pool_threads(pool))};
	if (!j.scratch)
		return SB_ERR_NOMEM;
	sb_pool_for(pool, (int64_t)ac * T, 8, spec_part, &j);
	hd_free(ws, j.scratch);
	return SB_OK;
}

typedef struct {
	const sb_htdemucs *net;
	const hd_ften *x;
	float std_, mean;
	int64_t L;
	float *out;
	float *scratch;
	float *ola; /* per worker */
	float *inv_env;
	int64_t ola_len;
} ispec_job;

/* one (source, channel) waveform per task: its T frames overlap-added in a private buffer */
static void ispec_part(void *vj, int64_t b, int64_t e, int worker)
{
	const ispec_job *j = vj;
	const int F = HD_NFFT / 2, T = j->x->T, C = j->x->C;
	float *buf = j->scratch + (size_t)worker * FFT_SCRATCH_FLOATS;
	fftwf_complex *spec = (fftwf_complex *)(buf + FFT_REAL_FLOATS);
	float *ola = j->ola + (size_t)worker * j->ola_len;
	/* undo "normalized" (times sqrt(n_fft)) and irfft's missing 1/n in one factor */
	const float scale = sqrtf((float)HD_NFFT) / (float)HD_NFFT;
	for (int64_t task = b; task < e; task++) {
		const int ch = (int)task; /* channel pair (2 ch, 2 ch + 1) of x: re, im */
		memset(ola, 0, sizeof(float) * (size_t)j->ola_len);
		for (int t = 0; t < T; t++) {
			for (int f = 0; f < F; f++) {
				const float *row = hd_row(j->x, f);
				spec[f][0] = row[(size_t)(2 * ch) * T + t] * j->std_ + j->mean;
				spec[f][1] = row[(size_t)(2 * ch + 1) * T + t] * j->std_ + j->mean;
			}
			spec[F][0] = 0.f;
			spec[F][1] = 0.f;
			fftwf_execute_dft_c2r(j->net->inv, spec, buf);
			float *o = ola + (size_t)t * HD_HOP;
			for (int i = 0; i < HD_NFFT; i++)
				o[i] += buf[i] * scale * j->net->window[i];
		}
		/* frame t (kept frame index) sits at torch's frame t+2; output sample n is OLA
		 * position 2048 + 1536 + n of torch's buffer, i.e. n + 1536 in ours */
		float *dst = j->out + (size_t)ch * j->L;
		const int64_t off = HD_HOP / 2 * 3;
		for (int64_t n = 0; n < j->L; n++)
			dst[n] += ola[n + off] * j->inv_env[n];
	}
	(void)C;
}

sb_status hd_ispec_add(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws,
                       const hd_ften *x, float std_, float mean, int64_t L, float *out)
{
	const int T = x->T, threads = sb_pool_threads(pool);
	const int64_t ola_len = (int64_t)HD_HOP * (T - 1) + HD_NFFT;
	if ((int64_t)HD_HOP * T < L)
		return SB_ERR_INVALID;
	ispec_job j = {net, x, std_, mean, L, out, alloc_fft_scratch(ws, threads),
	               hd_alloc(ws, sizeof(float) * (size_t)ola_len * (size_t)threads),
	               hd_alloc(ws, sizeof(float) * (size_t)L), ola_len};
	if (!j.scratch || !j.ola || !j.inv_env) {
		hd_free(ws, j.scratch);
		hd_free(ws, j.ola);
		hd_free(ws, j.inv_env);
		return SB_ERR_NOMEM;
	}
	/* the squared-window envelope of torch's T+4 frames at output sample n (position
	 * p = 3584 + n of its buffer); frames outside the data are zero but count here */
	for (int64_t n = 0; n < L; n++) {
		const int64_t p = (int64_t)HD_NFFT / 2 + HD_HOP / 2 * 3 + n;
		double env = 0;
		for (int64_t f = p / HD_HOP - 3; f <= p / HD_HOP; f++) {
			if (f < 0 || f >= T + 4)
				continue;
			const int64_t i = p - f * HD_HOP;
			if (i >= 0 && i < HD_NFFT)
				env += (double)net->window[i] * net->window[i];
		}
		j.inv_env[n] = env > 1e-11 ? (float)(1.0 / env) : 0.f;
	}
	sb_pool_for(pool, x->C / 2, 1, ispec_part, &j);
	hd_free(ws, j.scratch);
	hd_free(ws, j.ola);
	hd_free(ws, j.inv_env);
	return SB_OK;
}
