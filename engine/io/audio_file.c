/* libsndfile input (audio_file.h). Reads are random access with a cursor, so the sequential
 * windows a model asks for (each overlapping the last by a little) seek only a short way. */
#include "io/audio_file.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
	SNDFILE *f;
	int64_t cursor;
	const sb_logger *log;
	char path[4096];
} file_source;

static sb_status file_read(sb_source *self, int64_t start, int64_t n, float *out)
{
	file_source *fs = self->impl;
	const int ch = self->channels;
	int64_t i = 0;
	/* before the file: zeros */
	while (i < n && start + i < 0) {
		memset(out + i * ch, 0, sizeof(float) * (size_t)ch);
		i++;
	}
	int64_t from = start + i;
	int64_t want = n - i;
	if (from + want > self->frames)
		want = self->frames - from;
	if (want > 0) {
		if (fs->cursor != from) {
			if (sf_seek(fs->f, from, SEEK_SET) != from) {
				sb_log(fs->log, SB_LOG_ERROR, "%s: cannot seek to frame %lld: %s", fs->path,
				       (long long)from, sf_strerror(fs->f));
				return SB_ERR_IO;
			}
			fs->cursor = from;
		}
		sf_count_t got = sf_readf_float(fs->f, out + i * ch, want);
		if (got < 0)
			got = 0;
		fs->cursor += got;
		if (got != want) {
			sb_log(fs->log, SB_LOG_ERROR,
			       "%s: truncated: the audio ends at frame %lld, the header promised %lld",
			       fs->path, (long long)(from + got), (long long)self->frames);
			return SB_ERR_FORMAT;
		}
		const float *p = out + i * ch;
		for (int64_t k = 0; k < want * ch; k++) {
			if (!isfinite(p[k])) {
				sb_log(fs->log, SB_LOG_ERROR,
				       "%s: sample %lld (channel %d) is %s: the file holds invalid audio",
				       fs->path, (long long)(from + k / ch), (int)(k % ch) + 1,
				       isnan(p[k]) ? "NaN" : "infinite");
				return SB_ERR_FORMAT;
			}
		}
		i += want;
	}
	if (i < n)
		memset(out + i * ch, 0, sizeof(float) * (size_t)(n - i) * (size_t)ch);
	return SB_OK;
}

static void file_close(sb_source *self)
{
	file_source *fs = self->impl;
	if (fs && fs->f)
		sf_close(fs->f);
	free(fs);
	free(self);
}

/* libsndfile shortens a file whose data chunk claims more bytes than there are, and says so
 * only in its log ("data : 352800 (should be 199956)"). A streamed header (0 or 0xFFFFFFFF)
 * is not a truncation. */
static int log_says_truncated(SNDFILE *f)
{
	char log[8192];
	if (sf_command(f, SFC_GET_LOG_INFO, log, sizeof log) <= 0)
		return 0;
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		while (*line == ' ')
			line++;
		if (strncmp(line, "data", 4) && strncmp(line, "SSND", 4))
			continue;
		unsigned long long claimed = 0, real = 0;
		const char *c = strchr(line, ':');
		const char *s = strstr(line, "(should be ");
		if (!c || !s)
			continue;
		claimed = strtoull(c + 1, NULL, 10);
		real = strtoull(s + 11, NULL, 10);
		if (claimed > real && claimed != 0xFFFFFFFFull && claimed != 0)
			return 1;
	}
	return 0;
}

static void format_name(int fmt, char *buf, size_t len)
{
	const char *major = "audio";
	switch (fmt & SF_FORMAT_TYPEMASK) {
	case SF_FORMAT_WAV: major = "WAV"; break;
	case SF_FORMAT_WAVEX: major = "WAV"; break;
	case SF_FORMAT_RF64: major = "RF64"; break;
	case SF_FORMAT_AIFF: major = "AIFF"; break;
	case SF_FORMAT_FLAC: major = "FLAC"; break;
	case SF_FORMAT_OGG: major = "Ogg"; break;
	case SF_FORMAT_W64: major = "W64"; break;
	case SF_FORMAT_CAF: major = "CAF"; break;
	default: break;
	}
	const char *sub = "";
	switch (fmt & SF_FORMAT_SUBMASK) {
	case SF_FORMAT_PCM_S8: case SF_FORMAT_PCM_U8: sub = " 8-bit"; break;
	case SF_FORMAT_PCM_16: sub = " 16-bit"; break;
	case SF_FORMAT_PCM_24: sub = " 24-bit"; break;
	case SF_FORMAT_PCM_32: sub = " 32-bit"; break;
	case SF_FORMAT_FLOAT: sub = " float"; break;
	case SF_FORMAT_DOUBLE: sub = " double"; break;
	case SF_FORMAT_VORBIS: sub = " Vorbis"; break;
	case SF_FORMAT_OPUS: sub = " Opus"; break;
	default: break;
	}
	snprintf(buf, len, "%s%s", major, sub);
}

sb_status sb_source_file(const char *path, const sb_logger *log, sb_source **out,
                         sb_audio_info *info)
{
	if (!path || !*path || !out)
		return SB_ERR_INVALID;
	struct stat sbuf;
	if (stat(path, &sbuf) == 0 && S_ISDIR(sbuf.st_mode)) {
		sb_log(log, SB_LOG_ERROR, "%s: is a folder, not an audio file", path);
		return SB_ERR_INVALID;
	}
	FILE *probe = fopen(path, "rb");
	if (!probe) {
		sb_log(log, SB_LOG_ERROR, "%s: cannot open: %s", path, strerror(errno));
		return SB_ERR_IO;
	}
	fclose(probe);
	SF_INFO si;
	memset(&si, 0, sizeof si);
	SNDFILE *f = sf_open(path, SFM_READ, &si);
	if (!f) {
		sb_log(log, SB_LOG_ERROR, "%s: not an audio file libsndfile can read (%s)", path,
		       sf_strerror(NULL));
		return SB_ERR_FORMAT;
	}
	sb_status st = SB_OK;
	if (log_says_truncated(f)) {
		sb_log(log, SB_LOG_ERROR,
		       "%s: truncated: the header promises more audio than the file holds "
		       "(%lld frames readable); refusing to separate a partial recording",
		       path, (long long)si.frames);
		st = SB_ERR_FORMAT;
	} else if (si.channels < 1 || si.channels > 8) {
		sb_log(log, SB_LOG_ERROR, "%s: %d channels; Stembridge separates 1 to 8", path,
		       si.channels);
		st = SB_ERR_FORMAT;
	} else if (si.samplerate < 8000 || si.samplerate > 192000) {
		sb_log(log, SB_LOG_ERROR, "%s: sample rate %d Hz; Stembridge separates 8 to 192 kHz",
		       path, si.samplerate);
		st = SB_ERR_FORMAT;
	} else if (si.frames <= 0) {
		sb_log(log, SB_LOG_ERROR, "%s: no audio (zero length)", path);
		st = SB_ERR_EMPTY;
	}
	sb_source *s = NULL;
	file_source *fs = NULL;
	if (st == SB_OK) {
		s = calloc(1, sizeof *s);
		fs = calloc(1, sizeof *fs);
		if (!s || !fs)
			st = SB_ERR_NOMEM;
	}
	if (st != SB_OK) {
		free(s);
		free(fs);
		sf_close(f);
		return st;
	}
	fs->f = f;
	fs->log = log;
	snprintf(fs->path, sizeof fs->path, "%s", path);
	s->channels = si.channels;
	s->rate = si.samplerate;
	s->frames = si.frames;
	s->read = file_read;
	s->close = file_close;
	s->impl = fs;
	if (info) {
		memset(info, 0, sizeof *info);
		info->channels = si.channels;
		info->rate = si.samplerate;
		info->frames = si.frames;
		info->format = si.format;
		format_name(si.format, info->format_name, sizeof info->format_name);
	}
	*out = s;
	return SB_OK;
}

double sb_audio_file_seconds(const char *path)
{
	SF_INFO si;
	memset(&si, 0, sizeof si);
	SNDFILE *f = path ? sf_open(path, SFM_READ, &si) : NULL;
	if (!f)
		return 0;
	sf_close(f);
	return si.frames > 0 && si.samplerate > 0 ? (double)si.frames / si.samplerate : 0;
}
