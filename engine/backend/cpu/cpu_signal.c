/* The CPU backend's signal operations (backend.h: stft, istft, moments, standardise, gather,
 * cmul): the short-time Fourier transforms through fftw3f, split over the device's threads a
 * frame or a stretch of output at a time, a mean and standard deviation summed in double, and
 * the column gathers and complex products around a RoFormer's bands.
 *
 * Plans: one r2c and one c2r plan per transform length, made once a process (FFTW_ESTIMATE,
 * under the process's planner lock) and executed with fftw's new-array interface on
 * per-worker buffers from fftwf_malloc, whose alignment is the one the plans were made with.
 * The arithmetic is the one the models' host code did before these operations existed, in the
 * same order, so a CPU's stems keep their bits.
 */
#include "backend/cpu/cpu_internal.h"
#include "core/fftw_lock.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans, one pair per length ---- */

#define PLAN_SIZES 8

typedef struct {
	int n;
	fftwf_plan fwd, inv;
} plan_pair;

static plan_pair plans[PLAN_SIZES];
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

static const plan_pair *plans_for(int n)
{
	const plan_pair *found = NULL;
	pthread_mutex_lock(&plans_lock);
	for (int i = 0; i < PLAN_SIZES && !found; i++) {
		if (plans[i].n == n) {
			found = &plans[i];
		} else if (plans[i].n == 0) {
			float *r = fftwf_malloc(sizeof(float) * (size_t)(n + 8));
			fftwf_complex *c = fftwf_malloc(sizeof(fftwf_complex) * (size_t)(n / 2 + 1));
			if (r && c) {
				sb_fftw_plan_lock();
				plans[i].fwd = fftwf_plan_dft_r2c_1d(n, r, c, FFTW_ESTIMATE);
				plans[i].inv = fftwf_plan_dft_c2r_1d(n, c, r, FFTW_ESTIMATE);
				sb_fftw_plan_unlock();
			}
			fftwf_free(r);
			fftwf_free(c);
			if (!plans[i].fwd || !plans[i].inv) {
				sb_fftw_plan_lock();
				if (plans[i].fwd)
					fftwf_destroy_plan(plans[i].fwd);
				if (plans[i].inv)
					fftwf_destroy_plan(plans[i].inv);
				sb_fftw_plan_unlock();
				plans[i].fwd = plans[i].inv = NULL;
				break;
			}
			plans[i].n = n;
			found = &plans[i];
		}
	}
	pthread_mutex_unlock(&plans_lock);
	return found;
}

/* per worker: n + 64 real values, then n / 2 + 1 complex ones, each on a 256-byte boundary */
static size_t real_floats(int n)
{
	return ((size_t)n + 64 + 63) / 64 * 64;
}

static size_t scratch_floats(int n)
{
	return real_floats(n) + ((size_t)(2 * (n / 2 + 1)) + 63) / 64 * 64;
}

static inline long reflect(long s, long L)
{
	if (s < 0)
		s = -s;
	if (s >= L)
		s = 2 * (L - 1) - s;
	return s;
}

/* ---- STFT ---- */

typedef struct {
	const sb_stft *g;
	const plan_pair *p;
	const float *x, *w;
	long xs, L;
	float scale;
	float *X, *scratch;
} stft_job;

static void k_stft(void *v, int64_t b, int64_t e, int wk)
{
	const stft_job *j = v;
	const sb_stft *g = j->g;
	const int n = g->n_fft;
	float *in = j->scratch + (size_t)wk * scratch_floats(n);
	fftwf_complex *out = (fftwf_complex *)(in + real_floats(n));
	for (int64_t task = b; task < e; task++) {
		const int c = (int)(task / g->frames), t = (int)(task % g->frames);
		const float *x = j->x + (size_t)c * j->xs;
		const long start = (long)g->hop * t - g->pad;
		for (int i = 0; i < n; i++) {
			const long s = start + i;
			const float v2 = s >= 0 && s < j->L ? x[s] : x[reflect(s, j->L)];
			in[i] = v2 * j->w[i];
		}
		fftwf_execute_dft_r2c(j->p->fwd, in, out);
		float *o = j->X + (size_t)c * g->sc + (size_t)t * g->st;
		for (int f = 0; f < g->bins; f++) {
			o[(size_t)f * g->sf] = out[f][0] * j->scale;
			o[(size_t)f * g->sf + g->sri] = out[f][1] * j->scale;
		}
	}
}

sb_status sb_cpu_stft(sb_pool *pool, const sb_stft *g, const float *x, long xs, int ch, long L,
                      const float *w, float scale, float *X)
{
	const plan_pair *p = plans_for(g->n_fft);
	const int threads = sb_pool_threads(pool);
	float *scratch = fftwf_malloc(sizeof(float) * scratch_floats(g->n_fft) * (size_t)threads);
	if (!p || !scratch) {
		fftwf_free(scratch);
		return SB_ERR_NOMEM;
	}
	stft_job j = {g, p, x, w, xs, L, scale, X, scratch};
	sb_pool_for(pool, (int64_t)ch * g->frames, 8, k_stft, &j);
	fftwf_free(scratch);
	return SB_OK;
}

/* ---- inverse STFT ---- */

typedef struct {
	const sb_stft *g;
	const plan_pair *p;
	const float *X, *w;
	float scale;
	float *work, *scratch;
	/* overlap-add */
	const float *inv_env;
	long L;
	int ch;
	float *o;
	long os;
	int add;
} istft_job;

/* frame (c, t) to work [c][t][n_fft], windowed and scaled */
static void k_istft_frames(void *v, int64_t b, int64_t e, int wk)
{
	const istft_job *j = v;
	const sb_stft *g = j->g;
	const int n = g->n_fft, half = n / 2;
	float *buf = j->scratch + (size_t)wk * scratch_floats(n);
	fftwf_complex *spec = (fftwf_complex *)(buf + real_floats(n));
	for (int64_t task = b; task < e; task++) {
		const int c = (int)(task / g->frames), t = (int)(task % g->frames);
		const float *x = j->X + (size_t)c * g->sc + (size_t)t * g->st;
		for (int f = 0; f <= half; f++) {
			const int have = f < g->bins;
			spec[f][0] = have ? x[(size_t)f * g->sf] : 0.f;
			spec[f][1] = have && f > 0 && f < half ? x[(size_t)f * g->sf + g->sri] : 0.f;
		}
		fftwf_execute_dft_c2r(j->p->inv, spec, buf);
		float *o = j->work + (size_t)task * n;
		for (int i = 0; i < n; i++)
			o[i] = buf[i] * j->scale * j->w[i];
	}
}

/* output samples of one channel, a stretch a task: the frames over each, in frame order */
#define OLA_STRETCH 4096

static void k_istft_ola(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const istft_job *j = v;
	const sb_stft *g = j->g;
	const long stretches = (j->L + OLA_STRETCH - 1) / OLA_STRETCH;
	const int n = g->n_fft;
	for (int64_t task = b; task < e; task++) {
		const int c = (int)(task / stretches);
		const long j0 = (task % stretches) * OLA_STRETCH;
		const long j1 = j0 + OLA_STRETCH < j->L ? j0 + OLA_STRETCH : j->L;
		const float *fr = j->work + (size_t)c * g->frames * n;
		float *o = j->o + (size_t)c * j->os;
		for (long s = j0; s < j1; s++) {
			const long p = s + g->pad;
			long t0 = p - n < 0 ? 0 : (p - n) / g->hop + 1;
			long t1 = p / g->hop;
			if (t1 > g->frames - 1)
				t1 = g->frames - 1;
			float acc = 0.f;
			for (long t = t0; t <= t1; t++)
				acc += fr[(size_t)t * n + (size_t)(p - t * g->hop)];
			const float v2 = acc * j->inv_env[s];
			o[s] = j->add ? o[s] + v2 : v2;
		}
	}
}

sb_status sb_cpu_istft(sb_pool *pool, const sb_stft *g, const float *X, int ch, long L,
                       const float *w, float scale, int e0, int e1, float *o, long os, int add,
                       float *work)
{
	const plan_pair *p = plans_for(g->n_fft);
	const int threads = sb_pool_threads(pool), n = g->n_fft;
	float *scratch = fftwf_malloc(sizeof(float) * scratch_floats(n) * (size_t)threads);
	float *inv_env = malloc(sizeof(float) * (size_t)(L > 0 ? L : 1));
	if (!p || !scratch || !inv_env) {
		fftwf_free(scratch);
		free(inv_env);
		return SB_ERR_NOMEM;
	}
	/* the squared-window envelope over frames -e0 .. frames + e1 - 1, in double */
	for (long s = 0; s < L; s++) {
		const long pos = s + g->pad;
		double env = 0;
		for (long f = pos / g->hop - (n / g->hop) - 1; f <= pos / g->hop; f++) {
			if (f < -e0 || f >= g->frames + e1)
				continue;
			const long i = pos - f * g->hop;
			if (i >= 0 && i < n)
				env += (double)w[i] * w[i];
		}
		inv_env[s] = env > 1e-11 ? (float)(1.0 / env) : 0.f;
	}
	istft_job j = {g, p, X, w, scale, work, scratch, inv_env, L, ch, o, os, add};
	sb_pool_for(pool, (int64_t)ch * g->frames, 8, k_istft_frames, &j);
	sb_pool_for(pool, (int64_t)ch * ((L + OLA_STRETCH - 1) / OLA_STRETCH), 1, k_istft_ola, &j);
	fftwf_free(scratch);
	free(inv_env);
	return SB_OK;
}

/* ---- mean and standard deviation ---- */

void sb_cpu_moments(const float *x, size_t n, float *stats)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	const double m = s / (double)(n ? n : 1);
	double q = 0;
	for (size_t i = 0; i < n; i++)
		q += (x[i] - m) * (x[i] - m);
	stats[0] = (float)m;
	stats[1] = (float)sqrt(q / (double)(n > 1 ? n - 1 : 1));
}

typedef struct {
	const float *x;
	float *o;
	float m, s;
	int inverse;
} std_job;

static void k_standardise(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const std_job *j = v;
	if (j->inverse) {
		for (int64_t i = b; i < e; i++)
			j->o[i] = j->x[i] * j->s + j->m;
	} else {
		for (int64_t i = b; i < e; i++)
			j->o[i] = (j->x[i] - j->m) / j->s;
	}
}

void sb_cpu_standardise(sb_pool *pool, const float *x, float *o, size_t n, const float *stats,
                        float eps, int inverse)
{
	std_job j = {x, o, stats[0], inverse ? stats[1] : eps + stats[1], inverse};
	sb_pool_for(pool, (int64_t)n, 1 << 16, k_standardise, &j);
}

/* ---- gathers and complex products ---- */

typedef struct {
	const float *x, *ptr, *idx, *w, *a, *c;
	float *o;
	long ldx, ldo, sa, so;
	int n;
	size_t pairs;
} col_job;

static void k_gather(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const col_job *j = v;
	for (int64_t r = b; r < e; r++) {
		const float *x = j->x + r * j->ldx;
		float *o = j->o + r * j->ldo;
		for (int i = 0; i < j->n; i++) {
			float acc = 0.f;
			for (int p = (int)j->ptr[i]; p < (int)j->ptr[i + 1]; p++)
				acc += x[(int)j->idx[p]];
			o[i] = acc * j->w[i];
		}
	}
}

void sb_cpu_gather(sb_pool *pool, const float *x, long ldx, float *o, long ldo, size_t rows,
                   int n, const float *ptr, const float *idx, const float *w)
{
	col_job j = {.x = x, .ptr = ptr, .idx = idx, .w = w, .o = o, .ldx = ldx, .ldo = ldo, .n = n};
	sb_pool_for(pool, (int64_t)rows, 4, k_gather, &j);
}

static void k_cmul(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	const col_job *j = v;
	for (int64_t item = b; item < e; item++) {
		const float *a = j->a + item * j->sa;
		float *o = j->o + item * j->so;
		for (size_t i = 0; i < j->pairs; i++) {
			const float ar = a[2 * i], ai = a[2 * i + 1], cr = j->c[2 * i], ci = j->c[2 * i + 1];
			o[2 * i] = ar * cr - ai * ci;
			o[2 * i + 1] = ar * ci + ai * cr;
		}
	}
}

void sb_cpu_cmul(sb_pool *pool, const float *a, long sa, const float *c, float *o, long so,
                 size_t n, int batch)
{
	col_job j = {.a = a, .c = c, .o = o, .sa = sa, .so = so, .pairs = n};
	sb_pool_for(pool, batch, 1, k_cmul, &j);
}
