/* Several models' stems combined per stem (model.h: sb_model_ensemble), as UVR's and
 * Music-Source-Separation-Training's users ensemble them (MSST's ensemble.py):
 *
 *   avg_wave  the weighted mean of the members' waveforms (the default: it scores best)
 *   max_spec  per time-frequency bin the member value of the largest magnitude, min_spec the
 *             smallest (a vocals / instrumental pair's usual choices); STFT of 2048 points,
 *             hop 1024, periodic Hann, centred with zeros, inverse by overlap-add over the
 *             window's squared sum, as ensemble.py's librosa calls compute it
 *
 * Each stem is combined over the members that make it. The members run one after another
 * over the whole input on the job's devices; every member but the last writes its stems to
 * temporary files (raw floats, unlinked at once), and the last one's stems are combined with
 * them block by block as it writes: memory is one member's run plus a block per stem, flat in
 * the song's length. */
#include "core/fftw_lock.h"
#include "models/model.h"

#include <fftw3.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_N 2048
#define SPEC_HOP 1024
#define SPEC_BINS (SPEC_N / 2 + 1)
#define SPEC_STRIDE (SPEC_BINS + 1) /* each member's spectrum 16-byte aligned, as planned */
#define BLOCK 16384 /* frames of a tape read or a stem written at a time */

typedef struct {
	sb_model *m[SB_ENSEMBLE_MAX];
	double w[SB_ENSEMBLE_MAX];
	int n, mode;
	char stem_models[SB_MAX_STEMS][SB_ENSEMBLE_MAX * 66];
} ensemble;

/* ---- the spectral combination of one stem, streamed ---- */

typedef struct {
	int k, ch, mode;
	int64_t L;             /* frames of the whole stem */
	int64_t got;           /* input frames received of every member */
	int64_t t;             /* the next STFT frame */
	int64_t done;          /* output frames sent */
	float *in;             /* [k][ch][cap]: input frames from 'base' on */
	int64_t base, cap;
	double *ola, *env;     /* [ch][cap], [cap]: overlap-add from 'base' on */
	float *win;            /* [SPEC_N] */
	float *frame;          /* [SPEC_N] */
	fftwf_complex *spec;   /* [k][SPEC_STRIDE] */
	fftwf_complex *pick;   /* [SPEC_BINS] */
	fftwf_plan fwd, inv;
	float *emit;           /* [BLOCK ch] interleaved */
} spec_state;

static void spec_free(spec_state *s)
{
	if (!s)
		return;
	sb_fftw_plan_lock();
	if (s->fwd)
		fftwf_destroy_plan(s->fwd);
	if (s->inv)
		fftwf_destroy_plan(s->inv);
	sb_fftw_plan_unlock();
	free(s->in);
	free(s->ola);
	free(s->env);
	free(s->win);
	fftwf_free(s->frame);
	fftwf_free(s->spec);
	fftwf_free(s->pick);
	free(s->emit);
	free(s);
}

static spec_state *spec_new(int k, int ch, int mode, int64_t L)
{
	spec_state *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->k = k;
	s->ch = ch;
	s->mode = mode;
	s->L = L;
	s->cap = BLOCK + 2 * SPEC_N;
	s->in = calloc((size_t)k * ch * s->cap, sizeof(float));
	s->ola = calloc((size_t)ch * s->cap, sizeof(double));
	s->env = calloc((size_t)s->cap, sizeof(double));
	s->win = malloc(sizeof(float) * SPEC_N);
	s->frame = fftwf_malloc(sizeof(float) * SPEC_N);
	s->spec = fftwf_malloc(sizeof(fftwf_complex) * SPEC_STRIDE * (size_t)k);
	s->pick = fftwf_malloc(sizeof(fftwf_complex) * SPEC_BINS);
	s->emit = malloc(sizeof(float) * BLOCK * (size_t)ch);
	if (!s->in || !s->ola || !s->env || !s->win || !s->frame || !s->spec || !s->pick || !s->emit) {
		spec_free(s);
		return NULL;
	}
	for (int i = 0; i < SPEC_N; i++)
		s->win[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / SPEC_N));
	sb_fftw_plan_lock();
	s->fwd = fftwf_plan_dft_r2c_1d(SPEC_N, s->frame, s->pick, FFTW_ESTIMATE);
	s->inv = fftwf_plan_dft_c2r_1d(SPEC_N, s->pick, s->frame, FFTW_ESTIMATE);
	sb_fftw_plan_unlock();
	if (!s->fwd || !s->inv) {
		spec_free(s);
		return NULL;
	}
	return s;
}

/* original frame i of member m, channel c (0 before the start, past the end and outside what
 * is held) */
static float spec_in(const spec_state *s, int m, int c, int64_t i)
{
	if (i < 0 || i >= s->L || i < s->base || i >= s->base + s->cap)
		return 0.f;
	return s->in[((size_t)m * s->ch + c) * s->cap + (size_t)(i - s->base)];
}

/* STFT frames whose samples have all come in: each member's spectrum, the bins picked, the
 * inverse overlap-added */
static void spec_frames(spec_state *s)
{
	const int64_t T = 1 + s->L / SPEC_HOP;
	while (s->t < T && (s->t * SPEC_HOP + SPEC_N / 2 <= s->got || s->got == s->L)) {
		const int64_t start = s->t * SPEC_HOP - SPEC_N / 2;
		for (int c = 0; c < s->ch; c++) {
			for (int m = 0; m < s->k; m++) {
				for (int i = 0; i < SPEC_N; i++)
					s->frame[i] = spec_in(s, m, c, start + i) * s->win[i];
				fftwf_execute_dft_r2c(s->fwd, s->frame, s->spec + (size_t)m * SPEC_STRIDE);
			}
			for (int f = 0; f < SPEC_BINS; f++) {
				int best = 0;
				double bm = 0;
				for (int m = 0; m < s->k; m++) {
					const fftwf_complex *z = &s->spec[(size_t)m * SPEC_STRIDE + f];
					const double mag = (double)(*z)[0] * (*z)[0] + (double)(*z)[1] * (*z)[1];
					if (!m || (s->mode == SB_ENSEMBLE_MAX_SPEC ? mag > bm : mag < bm)) {
						bm = mag;
						best = m;
					}
				}
				s->pick[f][0] = s->spec[(size_t)best * SPEC_STRIDE + f][0];
				s->pick[f][1] = s->spec[(size_t)best * SPEC_STRIDE + f][1];
			}
			fftwf_execute_dft_c2r(s->inv, s->pick, s->frame);
			for (int i = 0; i < SPEC_N; i++) {
				const int64_t at = start + i - s->base;
				if (start + i < 0 || start + i >= s->L)
					continue;
				s->ola[(size_t)c * s->cap + (size_t)at] +=
				    (double)s->frame[i] / SPEC_N * s->win[i];
				if (!c)
					s->env[at] += (double)s->win[i] * s->win[i];
			}
		}
		s->t++;
	}
}

/* output frames final once every frame over them is in, to the sink; the window slides */
static sb_status spec_emit(spec_state *s, sb_sink *out, int stem)
{
	const int64_t T = 1 + s->L / SPEC_HOP;
	/* frames before t * hop - n / 2 take nothing more from frame t on */
	int64_t ready = s->t >= T ? s->L : s->t * SPEC_HOP - SPEC_N / 2;
	ready = ready > s->L ? s->L : ready;
	while (s->done < ready) {
		const int64_t n = ready - s->done < BLOCK ? ready - s->done : BLOCK;
		for (int64_t i = 0; i < n; i++) {
			const int64_t at = s->done + i - s->base;
			const double e = s->env[at];
			for (int c = 0; c < s->ch; c++) {
				const double v = s->ola[(size_t)c * s->cap + (size_t)at];
				s->emit[i * s->ch + c] = (float)(e > 1e-11 ? v / e : v);
			}
		}
		sb_status st = out->write(out, stem, s->emit, n);
		if (st != SB_OK)
			return st;
		s->done += n;
	}
	/* keep what the next frames read and write: from the next frame's start on */
	const int64_t keep_from = s->t * SPEC_HOP - SPEC_N / 2 < s->done ? s->t * SPEC_HOP - SPEC_N / 2
	                                                                  : s->done;
	const int64_t drop = keep_from - s->base;
	if (drop > 0) {
		const size_t keep = (size_t)(s->cap - drop);
		for (int r = 0; r < s->k * s->ch; r++) {
			float *a = s->in + (size_t)r * s->cap;
			memmove(a, a + drop, sizeof(float) * keep);
			memset(a + keep, 0, sizeof(float) * (size_t)drop);
		}
		for (int c = 0; c < s->ch; c++) {
			double *a = s->ola + (size_t)c * s->cap;
			memmove(a, a + drop, sizeof(double) * keep);
			memset(a + keep, 0, sizeof(double) * (size_t)drop);
		}
		memmove(s->env, s->env + drop, sizeof(double) * keep);
		memset(s->env + keep, 0, sizeof(double) * (size_t)drop);
		s->base = keep_from;
	}
	return SB_OK;
}

/* n frames of every member (interleaved, [k][n ch]) into the window, at most BLOCK */
static sb_status spec_push(spec_state *s, const float *const *x, int64_t n, sb_sink *out,
                           int stem)
{
	for (int m = 0; m < s->k; m++)
		for (int64_t i = 0; i < n; i++)
			for (int c = 0; c < s->ch; c++)
				s->in[((size_t)m * s->ch + c) * s->cap + (size_t)(s->got + i - s->base)] =
				    x[m][i * s->ch + c];
	s->got += n;
	spec_frames(s);
	return spec_emit(s, out, stem);
}

/* ---- the combining sink: the last member's stems, with the others' tapes ---- */

typedef struct {
	ensemble *e;
	sb_sink *out;
	int64_t frames;
	FILE *tape[SB_ENSEMBLE_MAX][SB_MAX_STEMS]; /* members before the last, per stem */
	int last;                                   /* the member writing now */
	float *buf[SB_ENSEMBLE_MAX];                /* [BLOCK ch] a tape's block */
	float *mix;                                 /* [BLOCK ch] */
	spec_state *spec[SB_MAX_STEMS];
} combine;

/* a member before the last writes its stem to its tape */
static sb_status tape_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	combine *c = self->impl;
	if (stem < 0 || stem >= SB_MAX_STEMS)
		return SB_ERR_INVALID;
	FILE **f = &c->tape[c->last][stem];
	if (!*f && !(*f = tmpfile()))
		return SB_ERR_IO;
	return fwrite(data, sizeof(float) * (size_t)self->channels, (size_t)n, *f) == (size_t)n
	           ? SB_OK : SB_ERR_NOSPACE;
}

/* one block of stem s: the members before the last (their tapes) and, when it makes it, the
 * last one's data, combined into the sink */
static sb_status combine_block(combine *c, int stem, const float *last, int64_t n)
{
	const int ch = c->out->channels;
	const float *x[SB_ENSEMBLE_MAX];
	double w[SB_ENSEMBLE_MAX];
	int k = 0;
	for (int m = 0; m < c->last; m++) {
		FILE *f = c->tape[m][stem];
		if (!f)
			continue;
		if (fread(c->buf[m], sizeof(float) * (size_t)ch, (size_t)n, f) != (size_t)n)
			return SB_ERR_IO;
		x[k] = c->buf[m];
		w[k++] = c->e->w[m];
	}
	if (last) {
		x[k] = last;
		w[k++] = c->e->w[c->last];
	}
	if (c->e->mode != SB_ENSEMBLE_AVG_WAVE) {
		if (!c->spec[stem] &&
		    !(c->spec[stem] = spec_new(k, ch, c->e->mode, c->frames)))
			return SB_ERR_NOMEM;
		return spec_push(c->spec[stem], x, n, c->out, stem);
	}
	double sw = 0;
	for (int m = 0; m < k; m++)
		sw += w[m];
	for (int64_t i = 0; i < n * ch; i++) {
		double v = 0;
		for (int m = 0; m < k; m++)
			v += w[m] * x[m][i];
		c->mix[i] = (float)(v / sw);
	}
	return c->out->write(c->out, stem, c->mix, n);
}

static sb_status last_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	combine *c = self->impl;
	if (stem < 0 || stem >= SB_MAX_STEMS)
		return SB_ERR_INVALID;
	sb_status st = SB_OK;
	for (int64_t at = 0; at < n && st == SB_OK; at += BLOCK) {
		const int64_t m = n - at < BLOCK ? n - at : BLOCK;
		st = combine_block(c, stem, data + at * self->channels, m);
	}
	return st;
}

/* the stems the last member does not make, from the tapes alone */
static sb_status tapes_only(combine *c, unsigned last_stems)
{
	sb_status st = SB_OK;
	for (int s = 0; s < SB_MAX_STEMS && st == SB_OK; s++) {
		int any = 0;
		for (int m = 0; m < c->last; m++)
			any |= c->tape[m][s] != NULL;
		if (!any || (last_stems & (1u << s)))
			continue;
		for (int64_t at = 0; at < c->frames && st == SB_OK; at += BLOCK)
			st = combine_block(c, s, NULL, c->frames - at < BLOCK ? c->frames - at : BLOCK);
	}
	return st;
}

/* ---- the model ---- */

static sb_status separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	ensemble *e = m->impl;
	combine c = {.e = e, .out = out, .frames = in->frames};
	sb_status st = SB_OK;
	c.mix = malloc(sizeof(float) * BLOCK * (size_t)out->channels);
	for (int i = 0; i < e->n - 1; i++)
		if (!(c.buf[i] = malloc(sizeof(float) * BLOCK * (size_t)out->channels)))
			st = SB_ERR_NOMEM;
	if (!c.mix)
		st = SB_ERR_NOMEM;
	for (int i = 0; i < e->n && st == SB_OK; i++) {
		c.last = i;
		const int final = i == e->n - 1;
		sb_sink ms = {out->n_stems, out->channels, final ? last_write : tape_write, &c};
		sb_member_share sh;
		const sb_run_ctx pc = sb_run_ctx_member(ctx, &sh, i, e->n);
		sb_log(ctx->log, SB_LOG_INFO, "ensemble: %s (%d of %d)", e->m[i]->info.name, i + 1, e->n);
		if (final)
			for (int k = 0; k < i; k++)
				for (int s = 0; s < SB_MAX_STEMS; s++)
					if (c.tape[k][s])
						rewind(c.tape[k][s]);
		st = sb_model_separate(e->m[i], &pc, in, &ms);
		if (st == SB_OK && final)
			st = tapes_only(&c, e->m[i]->info.stems);
	}
	for (int i = 0; i < SB_ENSEMBLE_MAX; i++) {
		free(c.buf[i]);
		for (int s = 0; s < SB_MAX_STEMS; s++)
			if (c.tape[i][s])
				fclose(c.tape[i][s]);
	}
	for (int s = 0; s < SB_MAX_STEMS; s++)
		spec_free(c.spec[s]);
	free(c.mix);
	return st;
}

static void ensemble_free(sb_model *m)
{
	if (!m)
		return;
	ensemble *e = m->impl;
	for (int i = 0; e && i < e->n; i++)
		sb_model_free(e->m[i]);
	free(e);
	free(m);
}

static const sb_model_vtable ensemble_vt = {separate, ensemble_free};

const char *sb_ensemble_mode_name(int mode)
{
	return mode == SB_ENSEMBLE_MAX_SPEC ? "max_spec" : mode == SB_ENSEMBLE_MIN_SPEC ? "min_spec"
	                                                                              : "avg_wave";
}

sb_status sb_model_ensemble(sb_model *const *members, const double *weights, int n, int mode,
                            const sb_logger *log, sb_model **out)
{
	*out = NULL;
	if (n < 2 || n > SB_ENSEMBLE_MAX || mode < SB_ENSEMBLE_AVG_WAVE ||
	    mode > SB_ENSEMBLE_MIN_SPEC)
		return SB_ERR_INVALID;
	for (int i = 1; i < n; i++)
		if (members[i]->info.native_rate != members[0]->info.native_rate) {
			sb_log(log, SB_LOG_ERROR, "%s and %s run at different rates: not an ensemble",
			       members[0]->info.name, members[i]->info.name);
			return SB_ERR_INVALID;
		}
	for (int i = 0; weights && i < n; i++)
		if (!(weights[i] >= 0) || !isfinite(weights[i])) {
			sb_log(log, SB_LOG_ERROR, "ensemble weight %d: %g is not a weight", i + 1, weights[i]);
			return SB_ERR_INVALID;
		}
	sb_model *m = calloc(1, sizeof *m);
	ensemble *e = calloc(1, sizeof *e);
	if (!m || !e) {
		free(m);
		free(e);
		return SB_ERR_NOMEM;
	}
	m->vt = &ensemble_vt;
	m->impl = e;
	e->n = n;
	e->mode = mode;
	sb_model_info *info = &m->info;
	info->native_rate = members[0]->info.native_rate;
	info->shares_devices = 1;
	/* means of stems that add back to the input add back too (the same stems of every
	 * member) */
	info->stems_sum = mode == SB_ENSEMBLE_AVG_WAVE;
	for (int i = 0; i < n; i++) {
		const sb_model_info *mi = &members[i]->info;
		e->m[i] = members[i];
		e->w[i] = weights && weights[i] > 0 ? weights[i] : 1.0;
		info->stems_sum &= mi->stems_sum && mi->stems == members[0]->info.stems;
		info->stems |= mi->stems;
		info->shares_devices &= mi->shares_devices;
		info->ops |= mi->ops;
		if (!info->default_chunk_frames ||
		    (mi->default_chunk_frames && mi->default_chunk_frames < info->default_chunk_frames))
			info->default_chunk_frames = mi->default_chunk_frames;
		const size_t used = strlen(info->name);
		snprintf(info->name + used, sizeof info->name - used, "%s%s", i ? "," : "", mi->name);
	}
	/* every model in a stem, named in the manifest */
	for (int s = 0; s < SB_MAX_STEMS; s++) {
		char *t = e->stem_models[s];
		for (int i = 0; i < n; i++)
			if (members[i]->info.stems & (1u << s)) {
				const size_t at = strlen(t);
				snprintf(t + at, sizeof e->stem_models[s] - at, "%s%s", at ? ", " : "",
				         members[i]->info.name);
			}
		info->stem_model[s] = t[0] ? t : NULL;
	}
	snprintf(info->description, sizeof info->description, "ensemble (%s) of %s",
	         sb_ensemble_mode_name(mode), info->name);
	info->n_stems = 0;
	for (int s = 0; s < SB_MAX_STEMS; s++)
		if (info->stems & (1u << s))
			info->stem_names[info->n_stems++] = sb_stem_names[s];
	*out = m;
	return SB_OK;
}
