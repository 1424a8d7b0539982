/* Separation quality of the built-in separator on songs with known stems (make_songs.sh).
 *
 * For each song folder (vocals.wav, drums.wav, bass.wav, other.wav: same rate, channels and
 * length) the mix is the sum of the stems, and three estimates of each stem are scored by
 * SDR = 10 log10(|s|^2 / |s - s_est|^2) over the whole song and all channels:
 *   builtin  the "builtin" model through the model seam (sb_model_open / sb_model_separate);
 *   IRM      the ideal ratio mask |S_i| / sum_j |S_j| per bin and channel on the STFT of
 *            classic.h (sqrt-Hann, N = sb_classic_fft_size, hop N/2, overlap-add), applied to
 *            the mix: an oracle that knows the stems, the ceiling for a mask on that STFT;
 *   mix/4    the mix divided by four: what doing nothing scores, the floor.
 * The goal is a mean builtin SDR of at least half the IRM's.
 *
 * --set NAME=VALUE (any field of sb_classic_params: kt, kf, kf_lo, f_lo, beta, eps, f_b0, f_b1,
 * gamma, c_mono, v_lo0, v_lo1, v_hi0, v_hi1, n_fft)
 * runs the same driver with changed parameters instead of the model, to tune
 * classic_params.c; the table is then headed "tuned".
 *
 * Usage: bench_quality [--set NAME=VALUE]... SONGDIR...
 * Exit status: 0 goal met, 1 goal missed, 2 bad input or a failed separation.
 */
#include "models/classic/classic_ops.h"
#include "mem_sink.h"
#include "models/model.h"

#include <fftw3.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MAX_SONGS 16
enum { EST_BUILTIN, EST_IRM, EST_MIX4, N_EST };

typedef struct {
	char name[64];
	int channels;
	double rate;
	int64_t frames;
	float *stem[SB_N_STEMS]; /* interleaved */
	float *mix;
} song;

static void log_stderr(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	fprintf(stderr, "%s\n", msg);
}

static float *read_wav(const char *path, int *channels, double *rate, int64_t *frames)
{
	SF_INFO info = {0};
	SNDFILE *f = sf_open(path, SFM_READ, &info);
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, sf_strerror(NULL));
		return NULL;
	}
	float *x = info.frames > 0 ? malloc(sizeof(float) * (size_t)(info.frames * info.channels)) : NULL;
	if (!x || sf_readf_float(f, x, info.frames) != info.frames) {
		fprintf(stderr, "%s: cannot read %lld frames\n", path, (long long)info.frames);
		free(x);
		sf_close(f);
		return NULL;
	}
	sf_close(f);
	*channels = info.channels;
	*rate = info.samplerate;
	*frames = info.frames;
	return x;
}

static int load_song(const char *dir, song *s)
{
	memset(s, 0, sizeof *s);
	/* the folder's last component names the song ("songs/song1_pop/" -> "song1_pop") */
	size_t end = strlen(dir);
	while (end > 1 && dir[end - 1] == '/')
		end--;
	size_t start = end;
	while (start > 0 && dir[start - 1] != '/')
		start--;
	snprintf(s->name, sizeof s->name, "%.*s", (int)(end - start), dir + start);
	for (int i = 0; i < SB_N_STEMS; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s.wav", dir, sb_stem_names[i]);
		int ch;
		double rate;
		int64_t frames;
		s->stem[i] = read_wav(path, &ch, &rate, &frames);
		if (!s->stem[i])
			return -1;
		if (i == 0) {
			s->channels = ch;
			s->rate = rate;
			s->frames = frames;
		} else if (ch != s->channels || rate != s->rate || frames != s->frames) {
			fprintf(stderr, "%s: %d ch, %g Hz, %lld frames; %s.wav has %d, %g, %lld\n", path, ch,
			        rate, (long long)frames, sb_stem_names[0], s->channels, s->rate,
			        (long long)s->frames);
			return -1;
		}
	}
	size_t n = (size_t)(s->frames * s->channels);
	s->mix = calloc(n, sizeof(float));
	if (!s->mix)
		return -1;
	for (int i = 0; i < SB_N_STEMS; i++)
		for (size_t j = 0; j < n; j++)
			s->mix[j] += s->stem[i][j];
	return 0;
}

static void free_song(song *s)
{
	for (int i = 0; i < SB_N_STEMS; i++)
		free(s->stem[i]);
	free(s->mix);
}

/* builtin: the model as a user runs it, or the driver with tuned parameters. */
static int run_builtin(const song *s, const sb_classic_params *tuned, float *est[SB_N_STEMS])
{
	sb_logger log = {log_stderr, NULL};
	sb_source *src = NULL;
	if (sb_source_memory(s->mix, s->frames, s->channels, s->rate, &src) != SB_OK)
		return -1;
	mem_sink ms;
	mem_sink_init(&ms, s->channels);
	sb_run_ctx ctx = {0};
	ctx.log = &log;
	ctx.threads = 1;
	sb_status st;
	sb_device_list *devs = NULL;
	sb_exec cpu = {0};
	const sb_open_opts one = {1, SB_PREC_FP32, 0};
	st = sb_devices_enumerate(&log, &devs);
	if (st == SB_OK)
		st = sb_exec_open(sb_devices_get(devs, 0), &one, &log, &cpu);
	ctx.dev = &cpu;
	ctx.n_dev = 1;
	if (st != SB_OK) {
		/* reported below */
	} else if (tuned) {
		st = sb_classic_run(&cpu, tuned, &ctx, src, &ms.sink);
	} else {
		sb_model *m = NULL;
		st = sb_model_open("builtin", NULL, &log, &m);
		if (st == SB_OK)
			st = sb_model_separate(m, &ctx, src, &ms.sink);
		sb_model_free(m);
	}
	sb_exec_close(&cpu);
	sb_devices_free(devs);
	src->close(src);
	if (st != SB_OK) {
		fprintf(stderr, "%s: builtin: %s\n", s->name, sb_status_str(st));
		mem_sink_free(&ms);
		return -1;
	}
	for (int i = 0; i < SB_N_STEMS; i++) {
		if (ms.frames[i] != s->frames) {
			fprintf(stderr, "%s: builtin wrote %lld frames of %s, want %lld\n", s->name,
			        (long long)ms.frames[i], sb_stem_names[i], (long long)s->frames);
			mem_sink_free(&ms);
			return -1;
		}
		est[i] = ms.data[i]; /* handed over: the caller frees */
	}
	return 0;
}

/* The ideal ratio mask on classic.h's STFT: frames t = 0 .. (len-1)/H + 1, frame t over
 * samples [(t-1)H, (t+1)H), each channel masked by its own stems' magnitudes. */
static int run_irm(const song *s, float *est[SB_N_STEMS])
{
	const int n = sb_classic_fft_size(s->rate), h = n / 2, b = n / 2 + 1, C = s->channels;
	const size_t bs = (size_t)(b + 3) & ~(size_t)3; /* slot stride: every slot as aligned as the
	                                                     planned one, as fftw's new-array execute needs */
	const int64_t len = s->frames, total = (len - 1) / h + 2;
	float *win = malloc(sizeof(float) * n);
	float *buf = fftwf_malloc(sizeof(float) * n);
	fftwf_complex *spec = fftwf_malloc(sizeof(fftwf_complex) * bs * (SB_N_STEMS + 1));
	float *mag = malloc(sizeof(float) * (size_t)b * SB_N_STEMS);
	for (int i = 0; i < SB_N_STEMS; i++)
		est[i] = calloc((size_t)(len * C), sizeof(float));
	int ok = win && buf && spec && mag;
	for (int i = 0; i < SB_N_STEMS; i++)
		ok = ok && est[i];
	fftwf_plan fwd = ok ? fftwf_plan_dft_r2c_1d(n, buf, spec, FFTW_ESTIMATE) : NULL;
	fftwf_plan inv = ok ? fftwf_plan_dft_c2r_1d(n, spec, buf, FFTW_ESTIMATE) : NULL;
	if (!fwd || !inv) {
		ok = 0;
		goto done;
	}
	for (int i = 0; i < n; i++)
		win[i] = sqrtf((float)(0.5 - 0.5 * cos(2.0 * M_PI * i / n)));
	for (int64_t t = 0; t < total; t++) {
		const int64_t start = (t - 1) * h;
		for (int c = 0; c < C; c++) {
			/* spectra of the four stems (slots 0..3) and of the mix (slot 4) */
			for (int src = 0; src <= SB_N_STEMS; src++) {
				const float *x = src < SB_N_STEMS ? s->stem[src] : s->mix;
				for (int i = 0; i < n; i++) {
					int64_t j = start + i;
					buf[i] = j >= 0 && j < len ? x[j * C + c] * win[i] : 0.f;
				}
				fftwf_execute_dft_r2c(fwd, buf, spec + (size_t)src * bs);
			}
			for (int k = 0; k < b; k++) {
				for (int i = 0; i < SB_N_STEMS; i++) {
					const float *z = spec[(size_t)i * bs + k];
					mag[(size_t)i * b + k] = sqrtf(z[0] * z[0] + z[1] * z[1]);
				}
			}
			const fftwf_complex *X = spec + (size_t)SB_N_STEMS * bs;
			for (int i = 0; i < SB_N_STEMS; i++) {
				fftwf_complex *y = spec + (size_t)i * bs; /* the stem's spectrum is used up */
				for (int k = 0; k < b; k++) {
					float sum = 0.f;
					for (int j = 0; j < SB_N_STEMS; j++)
						sum += mag[(size_t)j * b + k];
					float m = sum > 0.f ? mag[(size_t)i * b + k] / sum : 1.f / SB_N_STEMS;
					y[k][0] = X[k][0] * m;
					y[k][1] = X[k][1] * m;
				}
				fftwf_execute_dft_c2r(inv, y, buf);
				for (int q = 0; q < n; q++) {
					int64_t j = start + q;
					if (j >= 0 && j < len)
						est[i][j * C + c] += buf[q] * win[q] / (float)n;
				}
			}
		}
	}
done:
	if (fwd)
		fftwf_destroy_plan(fwd);
	if (inv)
		fftwf_destroy_plan(inv);
	free(win);
	fftwf_free(buf);
	fftwf_free(spec);
	free(mag);
	if (!ok) {
		fprintf(stderr, "%s: IRM: out of memory\n", s->name);
		for (int i = 0; i < SB_N_STEMS; i++) {
			free(est[i]);
			est[i] = NULL;
		}
		return -1;
	}
	return 0;
}

static int run_mix4(const song *s, float *est[SB_N_STEMS])
{
	size_t n = (size_t)(s->frames * s->channels);
	for (int i = 0; i < SB_N_STEMS; i++) {
		est[i] = malloc(sizeof(float) * n);
		if (!est[i])
			return -1;
		for (size_t j = 0; j < n; j++)
			est[i][j] = s->mix[j] * 0.25f;
	}
	return 0;
}

static double sdr(const float *ref, const float *est, size_t n)
{
	double e = 0, d = 0;
	for (size_t i = 0; i < n; i++) {
		double r = ref[i], q = (double)ref[i] - est[i];
		e += r * r;
		d += q * q;
	}
	return 10 * log10(e / d);
}

/* --set NAME=VALUE onto p; -1 for an unknown name or a bad number. */
static int set_param(sb_classic_params *p, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq)
		return -1;
	char *end;
	double v = strtod(eq + 1, &end);
	if (*end || end == eq + 1)
		return -1;
	size_t len = (size_t)(eq - arg);
#define PARAM(field, conv)                                                                    \
	if (len == strlen(#field) && !strncmp(arg, #field, len)) {                                \
		p->field = (conv)v;                                                                   \
		return 0;                                                                             \
	}
	PARAM(n_fft, int)
	PARAM(kt, int)
	PARAM(kf, int)
	PARAM(kf_lo, int)
	PARAM(f_lo, float)
	PARAM(beta, float)
	PARAM(eps, float)
	PARAM(f_b0, float)
	PARAM(f_b1, float)
	PARAM(gamma, float)
	PARAM(c_mono, float)
	PARAM(v_lo0, float)
	PARAM(v_lo1, float)
	PARAM(v_hi0, float)
	PARAM(v_hi1, float)
#undef PARAM
	return -1;
}

int main(int argc, char **argv)
{
	sb_classic_params params;
	sb_classic_params_default(&params);
	int tuned = 0, n_songs = 0;
	const char *dirs[MAX_SONGS];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--set") && i + 1 < argc) {
			if (set_param(&params, argv[++i]) != 0) {
				fprintf(stderr, "bench_quality: bad --set %s\n", argv[i]);
				return 2;
			}
			tuned = 1;
		} else if (argv[i][0] == '-' || n_songs == MAX_SONGS) {
			fprintf(stderr, "usage: %s [--set NAME=VALUE]... SONGDIR... (at most %d)\n", argv[0],
			        MAX_SONGS);
			return 2;
		} else {
			dirs[n_songs++] = argv[i];
		}
	}
	if (n_songs == 0) {
		fprintf(stderr, "usage: %s [--set NAME=VALUE]... SONGDIR...\n", argv[0]);
		return 2;
	}

	static double res[MAX_SONGS][SB_N_STEMS][N_EST];
	static const char *est_names[N_EST] = {"builtin", "IRM", "mix/4"};
	if (tuned)
		est_names[EST_BUILTIN] = "tuned";
	printf("%-16s %-7s %9s %9s %9s\n", "song", "stem", est_names[0], est_names[1], est_names[2]);
	for (int si = 0; si < n_songs; si++) {
		song s;
		if (load_song(dirs[si], &s) != 0) {
			free_song(&s);
			return 2;
		}
		for (int e = 0; e < N_EST; e++) {
			float *est[SB_N_STEMS] = {0};
			int r = e == EST_BUILTIN ? run_builtin(&s, tuned ? &params : NULL, est)
			        : e == EST_IRM   ? run_irm(&s, est)
			                         : run_mix4(&s, est);
			for (int i = 0; i < SB_N_STEMS && r == 0; i++)
				res[si][i][e] = sdr(s.stem[i], est[i], (size_t)(s.frames * s.channels));
			for (int i = 0; i < SB_N_STEMS; i++)
				free(est[i]);
			if (r != 0) {
				free_song(&s);
				return 2;
			}
		}
		for (int i = 0; i < SB_N_STEMS; i++)
			printf("%-16s %-7s %9.2f %9.2f %9.2f\n", s.name, sb_stem_names[i], res[si][i][0],
			       res[si][i][1], res[si][i][2]);
		free_song(&s);
	}

	double all[N_EST] = {0};
	for (int i = 0; i < SB_N_STEMS; i++) {
		double m[N_EST] = {0};
		for (int e = 0; e < N_EST; e++) {
			for (int si = 0; si < n_songs; si++)
				m[e] += res[si][i][e] / n_songs;
			all[e] += m[e] / SB_N_STEMS;
		}
		printf("%-16s %-7s %9.2f %9.2f %9.2f\n", "mean", sb_stem_names[i], m[0], m[1], m[2]);
	}
	printf("%-16s %-7s %9.2f %9.2f %9.2f\n", "mean", "all", all[0], all[1], all[2]);
	int met = all[EST_BUILTIN] >= 0.5 * all[EST_IRM];
	printf("goal: mean %s SDR %.2f dB >= half the IRM's (%.2f dB): %s\n", est_names[0],
	       all[EST_BUILTIN], 0.5 * all[EST_IRM], met ? "met" : "MISSED");
	return met ? 0 : 1;
}
