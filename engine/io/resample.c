/* Rate conversion around fixed-rate models (resample.h), with libsamplerate. */
#include "io/resample.h"

#include <math.h>
#include <samplerate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 8192

static const int converter = SRC_SINC_BEST_QUALITY;

/* ---- source side ---- */

/* An unlinked temporary file in $TMPDIR (tmpfile() ignores it), gone when closed. */
static FILE *temp_file(void)
{
	const char *dir = sb_knob_get("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/stembridge-resample-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	unlink(path);
	FILE *f = fdopen(fd, "w+b");
	if (!f)
		close(fd);
	return f;
}

typedef struct {
	FILE *f; /* unlinked temporary file of interleaved floats */
	const sb_logger *log;
} rs_source;

static sb_status rs_read(sb_source *self, int64_t start, int64_t n, float *out)
{
	rs_source *r = self->impl;
	const int ch = self->channels;
	int64_t i = 0;
	while (i < n && start + i < 0) {
		memset(out + i * ch, 0, sizeof(float) * (size_t)ch);
		i++;
	}
	int64_t from = start + i, want = n - i;
	if (from + want > self->frames)
		want = self->frames - from;
	if (want > 0) {
		if (fseeko(r->f, (off_t)from * ch * (off_t)sizeof(float), SEEK_SET) != 0 ||
		    fread(out + i * ch, sizeof(float) * (size_t)ch, (size_t)want, r->f) != (size_t)want) {
			sb_log(r->log, SB_LOG_ERROR, "reading the resampled input failed");
			return SB_ERR_IO;
		}
		i += want;
	}
	if (i < n)
		memset(out + i * ch, 0, sizeof(float) * (size_t)(n - i) * (size_t)ch);
	return SB_OK;
}

static void rs_close(sb_source *self)
{
	rs_source *r = self->impl;
	if (r && r->f)
		fclose(r->f);
	free(r);
	free(self);
}

sb_status sb_source_resampled(sb_source *in, double rate, const sb_logger *log,
                              const atomic_int *cancel, sb_source **out)
{
	const int ch = in->channels;
	const double ratio = rate / in->rate;
	const int64_t target = (int64_t)llround((double)in->frames * ratio);
	int err = 0;
	SRC_STATE *src = src_new(converter, ch, &err);
	float *ibuf = malloc(sizeof(float) * BLOCK * (size_t)ch);
	const long ocap = (long)(BLOCK * ratio) + 64;
	float *obuf = malloc(sizeof(float) * (size_t)ocap * (size_t)ch);
	FILE *f = temp_file();
	sb_source *s = calloc(1, sizeof *s);
	rs_source *r = calloc(1, sizeof *r);
	sb_status st = SB_OK;
	if (!src || !ibuf || !obuf || !s || !r) {
		st = SB_ERR_NOMEM;
	} else if (!f) {
		sb_log(log, SB_LOG_ERROR, "cannot create a temporary file for resampling");
		st = SB_ERR_IO;
	}
	int64_t read = 0, written = 0;
	while (st == SB_OK && written < target) {
		if (cancel && atomic_load(cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		int64_t n = in->frames - read < BLOCK ? in->frames - read : BLOCK;
		if (n > 0) {
			st = in->read(in, read, n, ibuf);
			if (st != SB_OK)
				break;
		}
		SRC_DATA d = {.data_in = ibuf,
		              .data_out = obuf,
		              .input_frames = (long)(n > 0 ? n : 0),
		              .output_frames = ocap,
		              .end_of_input = read + n >= in->frames,
		              .src_ratio = ratio};
		if ((err = src_process(src, &d)) != 0) {
			sb_log(log, SB_LOG_ERROR, "resampling failed: %s", src_strerror(err));
			st = SB_ERR_INVALID;
			break;
		}
		read += d.input_frames_used;
		int64_t put = d.output_frames_gen;
		if (written + put > target)
			put = target - written;
		if (put > 0 && fwrite(obuf, sizeof(float) * (size_t)ch, (size_t)put, f) != (size_t)put) {
			sb_log(log, SB_LOG_ERROR, "writing the resampled input to a temporary file failed "
			       "(is $TMPDIR full?)");
			st = SB_ERR_NOSPACE;
			break;
		}
		written += put;
		if (d.end_of_input && d.output_frames_gen == 0) {
			/* the converter is drained: pad the rounding difference with silence */
			memset(obuf, 0, sizeof(float) * (size_t)ch);
			while (written < target && st == SB_OK) {
				if (fwrite(obuf, sizeof(float) * (size_t)ch, 1, f) != 1)
					st = SB_ERR_NOSPACE;
				written++;
			}
		}
	}
	if (src)
		src_delete(src);
	free(ibuf);
	free(obuf);
	if (st != SB_OK) {
		if (f)
			fclose(f);
		free(s);
		free(r);
		return st;
	}
	r->f = f;
	r->log = log;
	s->channels = ch;
	s->rate = rate;
	s->frames = target;
	s->read = rs_read;
	s->close = rs_close;
	s->impl = r;
	*out = s;
	return SB_OK;
}

/* ---- sink side ---- */

struct sb_resample_sink {
	sb_sink sink;
	sb_sink *out;
	double ratio;
	int64_t frames;
	SRC_STATE *src[SB_MAX_STEMS];
	int64_t written[SB_MAX_STEMS];
	int touched[SB_MAX_STEMS];      /* stems the model wrote to: only these are finished */
	float *obuf;
	long ocap;
};

static sb_status push(sb_resample_sink *rs, int stem, const float *data, int64_t n, int last)
{
	const int ch = rs->out->channels;
	int64_t at = 0;
	do {
		long chunk = (long)(n - at > BLOCK ? BLOCK : n - at);
		SRC_DATA d = {.data_in = data ? data + at * ch : NULL,
		              .data_out = rs->obuf,
		              .input_frames = chunk,
		              .output_frames = rs->ocap,
		              .end_of_input = last && at + chunk >= n,
		              .src_ratio = rs->ratio};
		if (src_process(rs->src[stem], &d) != 0)
			return SB_ERR_INVALID;
		at += d.input_frames_used;
		int64_t put = d.output_frames_gen;
		if (rs->written[stem] + put > rs->frames)
			put = rs->frames - rs->written[stem];
		if (put > 0) {
			sb_status st = rs->out->write(rs->out, stem, rs->obuf, put);
			if (st != SB_OK)
				return st;
			rs->written[stem] += put;
		}
		if (last && at >= n && d.output_frames_gen == 0)
			break;
	} while (at < n || last);
	return SB_OK;
}

static sb_status rsink_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	sb_resample_sink *rs = self->impl;
	if (stem < 0 || stem >= rs->sink.n_stems)
		return SB_ERR_INVALID;
	rs->touched[stem] = 1;
	return push(rs, stem, data, n, 0);
}

sb_status sb_resample_sink_new(sb_sink *out, double from_rate, double to_rate, int64_t frames,
                               sb_resample_sink **res)
{
	sb_resample_sink *rs = calloc(1, sizeof *rs);
	if (!rs || out->n_stems > SB_MAX_STEMS)
		return free(rs), SB_ERR_NOMEM;
	rs->out = out;
	rs->ratio = to_rate / from_rate;
	rs->frames = frames;
	rs->ocap = (long)(BLOCK * rs->ratio) + 64;
	rs->obuf = malloc(sizeof(float) * (size_t)rs->ocap * (size_t)out->channels);
	rs->sink.n_stems = out->n_stems;
	rs->sink.channels = out->channels;
	rs->sink.write = rsink_write;
	rs->sink.impl = rs;
	int err = 0;
	for (int s = 0; s < out->n_stems; s++)
		if (!(rs->src[s] = src_new(converter, out->channels, &err)))
			break;
	if (!rs->obuf || err) {
		sb_resample_sink_free(rs);
		return SB_ERR_NOMEM;
	}
	*res = rs;
	return SB_OK;
}

sb_sink *sb_resample_sink_sink(sb_resample_sink *rs)
{
	return &rs->sink;
}

sb_status sb_resample_sink_finish(sb_resample_sink *rs)
{
	const int ch = rs->out->channels;
	for (int s = 0; s < rs->sink.n_stems; s++) {
		if (!rs->touched[s])
			continue; /* a stem the model does not make */
		float zero[1] = {0};
		sb_status st = push(rs, s, zero, 0, 1);
		if (st != SB_OK)
			return st;
		memset(rs->obuf, 0, sizeof(float) * (size_t)rs->ocap * (size_t)ch);
		while (rs->written[s] < rs->frames) {
			int64_t n = rs->frames - rs->written[s];
			if (n > rs->ocap)
				n = rs->ocap;
			st = rs->out->write(rs->out, s, rs->obuf, n);
			if (st != SB_OK)
				return st;
			rs->written[s] += n;
		}
	}
	return SB_OK;
}

sb_status sb_resample_sink_reset(sb_resample_sink *rs)
{
	for (int s = 0; s < rs->sink.n_stems; s++) {
		src_reset(rs->src[s]);
		rs->written[s] = 0;
		rs->touched[s] = 0;
	}
	return SB_OK;
}

void sb_resample_sink_free(sb_resample_sink *rs)
{
	if (!rs)
		return;
	for (int s = 0; s < SB_MAX_STEMS; s++)
		if (rs->src[s])
			src_delete(rs->src[s]);
	free(rs->obuf);
	free(rs);
}
