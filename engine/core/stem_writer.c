/* Stem files, all or nothing (stem_writer.h). Runs on the job's thread only. */
#include "core/stem_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

typedef struct {
	int stem;
	char final[PATH_MAX];
	char temp[PATH_MAX];
	int fd;
	SNDFILE *sf;
	double peak, sumsq;
	int64_t frames;
	int committed;
} stem_file;

struct sb_stem_writer {
	sb_sink sink;
	sb_stem_writer_opts o;
	const sb_logger *log;
	stem_file f[SB_N_STEMS];
	int n;
	int by_stem[SB_N_STEMS]; /* index in f, -1 when the stem is not written */
	int committed;
};

const char *sb_format_ext(sb_format f)
{
	return f == SB_FORMAT_FLAC ? "flac" : "wav";
}

sb_status sb_expand_template(const char *tmpl, const char *track, const char *take,
                             const char *stem, const char *model, const char *ext,
                             char *out, size_t len)
{
	size_t at = 0;
	for (const char *p = tmpl; *p;) {
		const char *val = NULL;
		size_t adv = 1;
		if (*p == '{') {
			const char *close = strchr(p, '}');
			if (!close)
				return SB_ERR_INVALID;
			size_t n = (size_t)(close - p - 1);
			if (n == 5 && !strncmp(p + 1, "track", 5))
				val = track;
			else if (n == 4 && !strncmp(p + 1, "take", 4))
				val = take;
			else if (n == 4 && !strncmp(p + 1, "stem", 4))
				val = stem;
			else if (n == 5 && !strncmp(p + 1, "model", 5))
				val = model;
			else if (n == 3 && !strncmp(p + 1, "ext", 3))
				val = ext;
			else
				return SB_ERR_INVALID;
			adv = n + 2;
			if (!val)
				val = "";
			for (const char *v = val; *v; v++) {
				if (at + 1 >= len)
					return SB_ERR_INVALID;
				/* a field never makes folders of its own */
				out[at++] = (*v == '/' || (unsigned char)*v < 32) ? '_' : *v;
			}
		} else {
			if (at + 1 >= len)
				return SB_ERR_INVALID;
			out[at++] = *p;
		}
		p += adv;
	}
	out[at] = '\0';
	if (out[0] == '/' || !strcmp(out, "..") || !strncmp(out, "../", 3) || strstr(out, "/../") ||
	    (at >= 3 && !strcmp(out + at - 3, "/..")))
		return SB_ERR_INVALID;
	return SB_OK;
}

int sb_make_parents(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, 0777);
		int e = errno;
		*p = '/';
		if (r != 0 && e != EEXIST) {
			errno = e;
			return -1;
		}
	}
	return 0;
}

static sb_status errno_status(int e)
{
	if (e == ENOSPC || e == EFBIG || e == EDQUOT)
		return SB_ERR_NOSPACE;
	if (e == ENOMEM)
		return SB_ERR_NOMEM;
	return SB_ERR_IO;
}

static void close_file(stem_file *s)
{
	if (s->sf)
		sf_close(s->sf);
	s->sf = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

static void drop_temp(stem_file *s)
{
	close_file(s);
	if (s->temp[0])
		unlink(s->temp);
	s->temp[0] = '\0';
}

static int sf_format_of(sb_format f)
{
	switch (f) {
	case SB_FORMAT_WAV16: return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
	case SB_FORMAT_WAV24: return SF_FORMAT_WAV | SF_FORMAT_PCM_24;
	case SB_FORMAT_WAVF32: return SF_FORMAT_WAV | SF_FORMAT_FLOAT;
	case SB_FORMAT_FLAC: return SF_FORMAT_FLAC | SF_FORMAT_PCM_24;
	}
	return SF_FORMAT_WAV | SF_FORMAT_FLOAT;
}

static sb_status open_temp(sb_stem_writer *w, stem_file *s)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", s->final);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : s->final;
	if (slash)
		*slash = '\0';
	if (snprintf(s->temp, sizeof s->temp, "%s/.%s.part-XXXXXX", slash ? dir : ".", base) >=
	    (int)sizeof s->temp) {
		s->temp[0] = '\0';
		sb_log(w->log, SB_LOG_ERROR, "%s: path too long", s->final);
		return SB_ERR_INVALID;
	}
	s->fd = mkstemp(s->temp);
	if (s->fd < 0) {
		int e = errno;
		sb_log(w->log, SB_LOG_ERROR, "cannot create a file in %s: %s", slash ? dir : ".",
		       strerror(e));
		s->temp[0] = '\0';
		return errno_status(e);
	}
	fchmod(s->fd, 0644); /* mkstemp makes 0600; a stem is an ordinary file of the user's */
	SF_INFO si;
	memset(&si, 0, sizeof si);
	si.channels = w->o.channels;
	si.samplerate = (int)lround(w->o.rate);
	si.format = sf_format_of(w->o.format);
	s->sf = sf_open_fd(s->fd, SFM_WRITE, &si, 0);
	if (!s->sf) {
		sb_log(w->log, SB_LOG_ERROR, "%s: cannot write this format (%d channels, %d Hz): %s",
		       s->final, si.channels, si.samplerate, sf_strerror(NULL));
		drop_temp(s);
		return SB_ERR_UNSUPPORTED;
	}
	/* Integer formats clip rather than wrap a stem that peaks above full scale. */
	sf_command(s->sf, SFC_SET_CLIPPING, NULL, SF_TRUE);
	if (w->o.format != SB_FORMAT_FLAC && w->o.timeline_start >= 0) {
		SF_BROADCAST_INFO bi;
		memset(&bi, 0, sizeof bi);
		snprintf(bi.description, sizeof bi.description, "Stembridge %s stem",
		         sb_stem_names[s->stem]);
		snprintf(bi.originator, sizeof bi.originator, "Stembridge");
		bi.time_reference_low = (uint32_t)((uint64_t)w->o.timeline_start & 0xFFFFFFFFu);
		bi.time_reference_high = (uint32_t)((uint64_t)w->o.timeline_start >> 32);
		bi.version = 1;
		sf_command(s->sf, SFC_SET_BROADCAST_INFO, &bi, sizeof bi);
	}
	s->peak = s->sumsq = 0;
	s->frames = 0;
	return SB_OK;
}

static sb_status sink_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	sb_stem_writer *w = self->impl;
	if (stem < 0 || stem >= SB_N_STEMS)
		return SB_ERR_INVALID;
	int i = w->by_stem[stem];
	if (i < 0)
		return SB_OK;
	stem_file *s = &w->f[i];
	if (!s->sf)
		return SB_ERR_IO;
	const int ch = w->o.channels;
	for (int64_t k = 0; k < n * ch; k++) {
		double v = data[k];
		double a = fabs(v);
		if (a > s->peak)
			s->peak = a;
		s->sumsq += v * v;
	}
	errno = 0;
	sf_count_t put = sf_writef_float(s->sf, data, n);
	if (put != n) {
		int e = errno;
		sb_status st = e ? errno_status(e) : SB_ERR_IO;
		sb_log(w->log, SB_LOG_ERROR, "writing %s failed: %s%s", s->final,
		       st == SB_ERR_NOSPACE ? "no space left (disk full or file size limit): " : "",
		       e ? strerror(e) : sf_strerror(s->sf));
		return st;
	}
	s->frames += n;
	return SB_OK;
}

sb_status sb_stem_writer_new(const sb_stem_writer_opts *o, sb_stem_writer **out)
{
	if (!o || !o->out_dir || !*o->out_dir || o->channels < 1 || !(o->rate > 0))
		return SB_ERR_INVALID;
	sb_stem_writer *w = calloc(1, sizeof *w);
	if (!w)
		return SB_ERR_NOMEM;
	w->o = *o;
	w->log = o->log;
	w->sink.n_stems = SB_N_STEMS;
	w->sink.channels = o->channels;
	w->sink.write = sink_write;
	w->sink.impl = w;
	const unsigned mask = o->stems ? o->stems : (1u << SB_N_STEMS) - 1;
	const char *tmpl = o->name_template ? o->name_template : "{track}/{stem}.{ext}";
	sb_status st = SB_OK;
	for (int s = 0; s < SB_N_STEMS; s++) {
		w->by_stem[s] = -1;
		if (!(mask & (1u << s)))
			continue;
		stem_file *f = &w->f[w->n];
		f->stem = s;
		f->fd = -1;
		char rel[PATH_MAX];
		st = sb_expand_template(tmpl, o->track, o->take, sb_stem_names[s], o->model,
		                        sb_format_ext(o->format), rel, sizeof rel);
		if (st != SB_OK) {
			sb_log(w->log, SB_LOG_ERROR, "bad file name template '%s'", tmpl);
			break;
		}
		if (snprintf(f->final, sizeof f->final, "%s/%s", o->out_dir, rel) >=
		    (int)sizeof f->final) {
			sb_log(w->log, SB_LOG_ERROR, "stem path too long in %s", o->out_dir);
			st = SB_ERR_INVALID;
			break;
		}
		for (int k = 0; k < w->n; k++)
			if (!strcmp(w->f[k].final, f->final)) {
				sb_log(w->log, SB_LOG_ERROR,
				       "file name template '%s' gives two stems the same name %s", tmpl,
				       f->final);
				st = SB_ERR_INVALID;
			}
		if (st != SB_OK)
			break;
		struct stat sbuf;
		if (!o->overwrite && lstat(f->final, &sbuf) == 0) {
			sb_log(w->log, SB_LOG_ERROR,
			       "%s exists: not overwriting a stem you already have (use overwrite)",
			       f->final);
			st = SB_ERR_EXISTS;
			break;
		}
		if (sb_make_parents(f->final) != 0) {
			int e = errno;
			sb_log(w->log, SB_LOG_ERROR, "cannot create the folder for %s: %s", f->final,
			       strerror(e));
			st = errno_status(e);
			break;
		}
		w->by_stem[s] = w->n++;
	}
	for (int i = 0; st == SB_OK && i < w->n; i++)
		st = open_temp(w, &w->f[i]);
	if (st != SB_OK) {
		sb_stem_writer_free(w);
		return st;
	}
	*out = w;
	return SB_OK;
}

sb_sink *sb_stem_writer_sink(sb_stem_writer *w)
{
	return &w->sink;
}

sb_status sb_stem_writer_reset(sb_stem_writer *w)
{
	sb_status st = SB_OK;
	for (int i = 0; i < w->n; i++) {
		drop_temp(&w->f[i]);
		if (st == SB_OK)
			st = open_temp(w, &w->f[i]);
	}
	return st;
}

static void unlink_committed(sb_stem_writer *w)
{
	for (int i = 0; i < w->n; i++)
		if (w->f[i].committed) {
			unlink(w->f[i].final);
			w->f[i].committed = 0;
		}
}

int sb_place_file(const char *from, const char *to, int overwrite)
{
	if (overwrite)
		return rename(from, to);
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* file systems without RENAME_NOREPLACE: link() refuses an existing name just as well */
	if (link(from, to) != 0)
		return -1;
	unlink(from);
	return 0;
}

/* Flushes and closes a stem's temporary file and syncs it to disk; a no-op once done. */
static sb_status finish_file(sb_stem_writer *w, stem_file *s)
{
	if (!s->sf && s->fd < 0)
		return SB_OK;
	sb_status st = SB_OK;
	int err = 0, r = 0;
	if (s->sf) {
		sf_write_sync(s->sf);
		err = sf_error(s->sf);
		r = sf_close(s->sf);
		s->sf = NULL;
	}
	errno = 0;
	if (err || r || fsync(s->fd) != 0) {
		int e = errno ? errno : EIO;
		st = errno_status(e);
		sb_log(w->log, SB_LOG_ERROR, "finishing %s failed: %s%s", s->final,
		       st == SB_ERR_NOSPACE ? "no space left (disk full or file size limit): " : "",
		       strerror(e));
	}
	if (close(s->fd) != 0 && st == SB_OK) {
		int e = errno;
		sb_log(w->log, SB_LOG_ERROR, "finishing %s failed: %s", s->final, strerror(e));
		st = errno_status(e);
	}
	s->fd = -1;
	return st;
}

sb_status sb_stem_writer_residual(sb_stem_writer *w, sb_source *in, int target,
                                  const atomic_int *cancel, double *changed_db)
{
	enum { BLOCK = 8192 };
	if (w->n != SB_N_STEMS || target < 0 || target >= SB_N_STEMS || in->channels != w->o.channels)
		return SB_ERR_UNSUPPORTED;
	sb_status st = SB_OK;
	for (int i = 0; i < w->n && st == SB_OK; i++)
		st = finish_file(w, &w->f[i]);
	if (st != SB_OK)
		return st;
	const int ch = w->o.channels;
	stem_file *t = &w->f[w->by_stem[target]];
	SNDFILE *rd[SB_N_STEMS] = {0};
	char old_temp[PATH_MAX];
	snprintf(old_temp, sizeof old_temp, "%s", t->temp);
	float *x = malloc(sizeof(float) * BLOCK * (size_t)ch);
	float *y = malloc(sizeof(float) * BLOCK * (size_t)ch);
	float *acc = malloc(sizeof(float) * BLOCK * (size_t)ch);
	if (!x || !y || !acc)
		st = SB_ERR_NOMEM;
	for (int s = 0; s < SB_N_STEMS && st == SB_OK; s++) {
		SF_INFO si;
		memset(&si, 0, sizeof si);
		rd[s] = sf_open(s == target ? old_temp : w->f[w->by_stem[s]].temp, SFM_READ, &si);
		if (!rd[s]) {
			sb_log(w->log, SB_LOG_ERROR, "cannot read back the %s stem: %s", sb_stem_names[s],
			       sf_strerror(NULL));
			st = SB_ERR_IO;
		}
	}
	double diff = 0, ref = 0;
	if (st == SB_OK) {
		t->temp[0] = '\0';
		st = open_temp(w, t); /* the new stem; the model's own stays in old_temp until done */
	}
	for (int64_t at = 0; st == SB_OK && at < in->frames; at += BLOCK) {
		if (cancel && atomic_load(cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		const int64_t n = in->frames - at < BLOCK ? in->frames - at : BLOCK;
		st = in->read(in, at, n, x);
		for (int i = 0; i < n * ch && st == SB_OK; i++)
			acc[i] = 0.f;
		/* the other stems summed into acc; y ends with the model's own target stem */
		for (int k = 1; k <= SB_N_STEMS && st == SB_OK; k++) {
			const int s = (target + k) % SB_N_STEMS;
			if (sf_readf_float(rd[s], y, n) != n) {
				sb_log(w->log, SB_LOG_ERROR, "reading back the %s stem came up short",
				       sb_stem_names[s]);
				st = SB_ERR_IO;
			} else if (s != target) {
				for (int i = 0; i < n * ch; i++)
					acc[i] += y[i];
			}
		}
		if (st != SB_OK)
			break;
		for (int i = 0; i < n * ch; i++) {
			const float v = x[i] - acc[i];
			diff += ((double)v - y[i]) * ((double)v - y[i]);
			ref += (double)x[i] * x[i];
			acc[i] = v;
		}
		st = sink_write(&w->sink, target, acc, n);
	}
	for (int s = 0; s < SB_N_STEMS; s++)
		if (rd[s])
			sf_close(rd[s]);
	free(x);
	free(y);
	free(acc);
	if (st != SB_OK) {
		/* the writer is failed as a whole; both temporaries go with it */
		unlink(old_temp);
		return st;
	}
	unlink(old_temp);
	if (changed_db)
		*changed_db = diff > 0 && ref > 0 ? 10 * log10(diff / ref) : -INFINITY;
	return SB_OK;
}

sb_status sb_stem_writer_commit(sb_stem_writer *w)
{
	sb_status st = SB_OK;
	for (int i = 0; i < w->n && st == SB_OK; i++)
		st = finish_file(w, &w->f[i]);
	for (int i = 0; i < w->n && st == SB_OK; i++) {
		stem_file *s = &w->f[i];
		if (sb_place_file(s->temp, s->final, w->o.overwrite) != 0) {
			int e = errno;
			if (e == EEXIST)
				sb_log(w->log, SB_LOG_ERROR,
				       "%s appeared while separating: not overwriting it", s->final);
			else
				sb_log(w->log, SB_LOG_ERROR, "cannot name %s: %s", s->final, strerror(e));
			st = e == EEXIST ? SB_ERR_EXISTS : errno_status(e);
			break;
		}
		s->temp[0] = '\0';
		s->committed = 1;
	}
	if (st != SB_OK) {
		unlink_committed(w);
		for (int i = 0; i < w->n; i++)
			drop_temp(&w->f[i]);
		return st;
	}
	w->committed = 1;
	return SB_OK;
}

void sb_stem_writer_free(sb_stem_writer *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n; i++)
		drop_temp(&w->f[i]);
	free(w);
}

int sb_stem_writer_count(const sb_stem_writer *w)
{
	return w->n;
}

void sb_stem_writer_info(const sb_stem_writer *w, int i, sb_stem_info *info)
{
	const stem_file *s = &w->f[i];
	info->stem = s->stem;
	info->path = s->final;
	info->peak = s->peak;
	info->frames = s->frames;
	info->rms = s->frames > 0 ? sqrt(s->sumsq / ((double)s->frames * w->o.channels)) : 0.0;
}
