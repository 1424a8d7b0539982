/* Audition: a finished take's stems, read back from the files the engine wrote into memory
 * that run() plays from (handed over through audition_pending, freed here when run() retires
 * it), so that run() never reads a file. The same read gives the UI its stem rows: each stem's
 * waveform in SB_VIEW_COLS columns, beside the peak and RMS the engine measured.
 *
 * Threads: the service thread, and cleanup. Never run().
 */
#include "service.h"

#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_audition_free(sb_audition *a)
{
	if (!a)
		return;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		free(a->stem[s]);
	free(a);
}

/* Audition keeps every stem of the take in memory, as float: bounded, so a long take does not
 * take the host's memory with it (the stems are still written, announced and shown). */
#define SB_AUDITION_MAX_BYTES ((int64_t)1 << 30)
#define READ_FRAMES 65536

/* Frames [at, at + n) of a stem, interleaved, into its view's columns. */
static void view_add(float *view, const float *x, int channels, int64_t at, int64_t n,
                     int64_t frames, bool *started)
{
	for (int64_t i = 0; i < n; i++) {
		const int64_t col = (at + i) * SB_VIEW_COLS / frames;
		float *lo = &view[2 * col], *hi = lo + 1;
		for (int c = 0; c < channels; c++) {
			const float v = x[i * channels + c];
			if (!(v == v))
				continue;
			if (!started[col] || v < *lo)
				*lo = v;
			if (!started[col] || v > *hi)
				*hi = v;
			started[col] = true;
		}
	}
}

/* Reads one stem file: into memory for run() when 'keep' (a->stem[s]), its view either way. */
static void read_stem(sb_instance *self, sb_audition *a, int s, const char *path, bool keep,
                      float *chunk)
{
	SF_INFO info;
	memset(&info, 0, sizeof info);
	SNDFILE *f = sf_open(path, SFM_READ, &info);
	if (!f) {
		lv2_log_warning(&self->logger, "stembridge: cannot read %s for audition: %s\n", path,
		                sf_strerror(NULL));
		return;
	}
	if (info.channels != a->channels) {
		lv2_log_warning(&self->logger, "stembridge: %s has %d channels, expected %d\n", path,
		                info.channels, a->channels);
		sf_close(f);
		return;
	}
	if (keep)
		a->stem[s] = calloc((size_t)a->frames * a->channels, sizeof(float));
	bool started[SB_VIEW_COLS] = {false};
	for (int64_t at = 0; at < a->frames;) {
		const int64_t want = a->frames - at < READ_FRAMES ? a->frames - at : READ_FRAMES;
		float *dst = a->stem[s] ? a->stem[s] + at * a->channels : chunk;
		const sf_count_t got = sf_readf_float(f, dst, want);
		if (got <= 0)
			break;
		view_add(a->view[s], dst, a->channels, at, got, a->frames, started);
		at += got;
	}
	sf_close(f);
}

/* Reads a finished take's stems (paths by stem, "" where none) and offers them to run(), with
 * the figures of r (the engine's peak and RMS of each). */
void sb_audition_load(sb_instance *self, int64_t start, int64_t frames,
                      char paths[SB_PLUGIN_STEMS][SB_TEXT], const sb_job_result *r)
{
	int n = 0;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		n += paths[s][0] != '\0';
	const bool keep = frames * self->channels * (int64_t)sizeof(float) * n <= SB_AUDITION_MAX_BYTES;
	if (!keep)
		lv2_log_note(&self->logger, "stembridge: take too long to audition in memory (%lld "
		             "frames); its stems are on disk\n", (long long)frames);
	sb_audition *a = calloc(1, sizeof *a);
	float *chunk = malloc((size_t)READ_FRAMES * self->channels * sizeof(float));
	if (!a || !chunk || frames <= 0) {
		free(a);
		free(chunk);
		return;
	}
	a->start = start;
	a->frames = frames;
	a->channels = self->channels;
	a->held = keep;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		if (!paths[s][0])
			continue;
		a->shown[s] = true;
		for (int k = 0; k < r->n_stems; k++)
			if (r->stems[k].stem == s) {
				a->peak[s] = (float)r->stems[k].peak;
				a->rms[s] = (float)r->stems[k].rms;
			}
		read_stem(self, a, s, paths[s], keep, chunk);
	}
	free(chunk);
	sb_audition_free(atomic_exchange(&self->audition_pending, a));
}
