/* Stem files, all or nothing (stem_writer.h). Runs on the job's thread only. */
#include "io/stem_writer.h"

#include "sb_common.h"

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

#define MAX_EXTRA 4
#define MAX_DIRS (SB_MAX_STEMS + MAX_EXTRA)

typedef struct {
	int stem;
	char final[PATH_MAX];
	sb_temp t;
	SNDFILE *sf;          /* integer WAV, FLAC */
	sb_wav_writer *wf;    /* float WAV */
	double peak, sumsq;
	int64_t frames;
	int finished;         /* flushed, header final, synced */
	int placed;
	char backup[PATH_MAX];/* with overwrite: the file it replaced, until the commit holds */
} stem_file;

typedef struct {
	char final[PATH_MAX];
	sb_temp t;
	int placed;
	char backup[PATH_MAX];
} extra_file;

struct sb_stem_writer {
	sb_sink sink;
	sb_stem_writer_opts o;
	const sb_logger *log;
	stem_file f[SB_MAX_STEMS];
	int n;
	int by_stem[SB_MAX_STEMS]; /* index in f, -1 when the stem is not written */
	extra_file x[MAX_EXTRA];
	int nx;
	char dirs[MAX_DIRS][PATH_MAX]; /* every folder a file of this job goes to */
	int ndirs;
	char made[16][4096];   /* folders this writer created: removed again without a commit */
	int nmade;
	int bad_stem;          /* first non-finite sample: stem (-1 none) and frame */
	int64_t bad_frame;
	int committed;
};

static const char *sb_format_ext(sb_format f)
{
	return f == SB_FORMAT_FLAC ? "flac" : "wav";
}

const char *sb_track_name(const char *path, char *buf, size_t len)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	snprintf(buf, len, "%s", b);
	char *dot = strrchr(buf, '.');
	if (dot && dot != buf)
		*dot = '\0';
	return buf;
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

static sb_status errno_status(int e)
{
	if (e == ENOSPC || e == EFBIG || e == EDQUOT)
		return SB_ERR_NOSPACE;
	if (e == ENOMEM)
		return SB_ERR_NOMEM;
	return SB_ERR_IO;
}

static const char *space_hint(sb_status st)
{
	return st == SB_ERR_NOSPACE ? "no space left (disk full or file size limit): " : "";
}

static void close_writers(stem_file *s)
{
	if (s->sf)
		sf_close(s->sf); /* opened with close_desc 0: the descriptor and its lock stay */
	s->sf = NULL;
	sb_wav_writer_free(s->wf);
	s->wf = NULL;
}

static void drop_temp(stem_file *s)
{
	close_writers(s);
	sb_temp_discard(&s->t);
	s->finished = 0;
}

static int sf_format_of(sb_format f)
{
	switch (f) {
	case SB_FORMAT_WAV16: return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
	case SB_FORMAT_WAV24: return SF_FORMAT_WAV | SF_FORMAT_PCM_24;
	case SB_FORMAT_FLAC: return SF_FORMAT_FLAC | SF_FORMAT_PCM_24;
	case SB_FORMAT_WAVF32: break;
	}
	return SF_FORMAT_WAV | SF_FORMAT_FLOAT;
}

static void remember_dir(sb_stem_writer *w, const char *file)
{
	char d[PATH_MAX];
	sb_dir_of(file, d, sizeof d);
	for (int i = 0; i < w->ndirs; i++)
		if (!strcmp(w->dirs[i], d))
			return;
	if (w->ndirs < MAX_DIRS) {
		snprintf(w->dirs[w->ndirs++], PATH_MAX, "%s", d);
		sb_temp_clean_stale(d, w->log);
	}
}

static sb_status open_temp(sb_stem_writer *w, stem_file *s)
{
	s->peak = s->sumsq = 0;
	s->frames = 0;
	s->finished = 0;
	if (sb_temp_create(s->final, &s->t) != 0) {
		const int e = errno;
		char dir[PATH_MAX];
		sb_dir_of(s->final, dir, sizeof dir);
		sb_log(w->log, SB_LOG_ERROR, "cannot create a file in %s: %s", dir, strerror(e));
		return errno_status(e);
	}
	char desc[64];
	snprintf(desc, sizeof desc, "Stembridge %s stem", sb_stem_names[s->stem]);
	if (w->o.format == SB_FORMAT_WAVF32) {
		const sb_status st = sb_wav_writer_new(s->t.fd, w->o.channels, (int)lround(w->o.rate),
		                                       w->o.timeline_start, desc, &s->wf);
		if (st != SB_OK) {
			const int e = errno;
			sb_log(w->log, SB_LOG_ERROR, "writing %s failed: %s%s", s->final, space_hint(st),
			       strerror(e));
			drop_temp(s);
		}
		return st;
	}
	SF_INFO si;
	memset(&si, 0, sizeof si);
	si.channels = w->o.channels;
	si.samplerate = (int)lround(w->o.rate);
	si.format = sf_format_of(w->o.format);
	s->sf = sf_open_fd(s->t.fd, SFM_WRITE, &si, 0);
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
		snprintf(bi.description, sizeof bi.description, "%s", desc);
		snprintf(bi.originator, sizeof bi.originator, "Stembridge");
		bi.time_reference_low = (uint32_t)((uint64_t)w->o.timeline_start & 0xFFFFFFFFu);
		bi.time_reference_high = (uint32_t)((uint64_t)w->o.timeline_start >> 32);
		bi.version = 1;
		sf_command(s->sf, SFC_SET_BROADCAST_INFO, &bi, sizeof bi);
	}
	return SB_OK;
}

static sb_status sink_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	sb_stem_writer *w = self->impl;
	if (stem < 0 || stem >= SB_MAX_STEMS)
		return SB_ERR_INVALID;
	int i = w->by_stem[stem];
	if (i < 0)
		return SB_OK;
	stem_file *s = &w->f[i];
	if ((!s->sf && !s->wf) || s->finished)
		return SB_ERR_IO;
	const int ch = w->o.channels;
	double peak = s->peak, sumsq = s->sumsq;
	for (int64_t k = 0; k < n * ch; k++) {
		const double v = data[k];
		if (!isfinite(v)) {
			if (w->bad_stem < 0) {
				w->bad_stem = stem;
				w->bad_frame = s->frames + k / ch;
			}
			return SB_ERR_NONFINITE;
		}
		const double a = fabs(v);
		if (a > peak)
			peak = a;
		sumsq += v * v;
	}
	s->peak = peak;
	s->sumsq = sumsq;
	errno = 0;
	sb_status st = SB_OK;
	if (s->wf) {
		st = sb_wav_writer_write(s->wf, data, n);
	} else if (sf_writef_float(s->sf, data, n) != n) {
		st = errno ? errno_status(errno) : SB_ERR_IO;
	}
	if (st != SB_OK) {
		const int e = errno;
		sb_log(w->log, SB_LOG_ERROR, "writing %s failed: %s%s", s->final, space_hint(st),
		       e ? strerror(e) : s->sf ? sf_strerror(s->sf) : "short write");
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
	w->bad_stem = -1;
	w->sink.n_stems = SB_MAX_STEMS;
	w->sink.channels = o->channels;
	w->sink.write = sink_write;
	w->sink.impl = w;
	const unsigned mask = o->stems ? o->stems : (1u << SB_N_STEMS) - 1;
	const char *tmpl = o->name_template ? o->name_template : "{track}/{stem}.{ext}";
	sb_status st = SB_OK;
	for (int s = 0; s < SB_MAX_STEMS; s++) {
		w->by_stem[s] = -1;
		w->f[s].t.fd = -1;
	}
	for (int s = 0; s < SB_MAX_STEMS; s++) {
		if (!(mask & (1u << s)))
			continue;
		if (s >= SB_N_KNOWN_STEMS) {
			sb_log(w->log, SB_LOG_ERROR, "stem %d has no name", s);
			st = SB_ERR_INVALID;
			break;
		}
		stem_file *f = &w->f[w->n];
		f->stem = s;
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
			sb_log(w->log, SB_LOG_ERROR, "%s exists: not overwriting a stem you already have",
			       f->final);
			st = SB_ERR_EXISTS;
			break;
		}
		if (sb_make_parents_tracked(f->final, w->made, &w->nmade, 16) != 0) {
			int e = errno;
			sb_log(w->log, SB_LOG_ERROR, "cannot create the folder for %s: %s", f->final,
			       strerror(e));
			st = errno_status(e);
			break;
		}
		w->by_stem[s] = w->n++;
	}
	for (int i = 0; st == SB_OK && i < w->n; i++)
		remember_dir(w, w->f[i].final);
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
	w->bad_stem = -1;
	for (int i = 0; i < w->n; i++) {
		drop_temp(&w->f[i]);
		if (st == SB_OK)
			st = open_temp(w, &w->f[i]);
	}
	return st;
}

int sb_stem_writer_nonfinite(const sb_stem_writer *w, int *stem, int64_t *frame)
{
	if (w->bad_stem < 0)
		return 0;
	if (stem)
		*stem = w->bad_stem;
	if (frame)
		*frame = w->bad_frame;
	return 1;
}

/* Flushes a stem's temporary file, makes its header final and syncs it; the descriptor (and
 * its lock) stays open until the file is placed or removed. A no-op once done. */
static sb_status finish_file(sb_stem_writer *w, stem_file *s)
{
	if (s->finished)
		return SB_OK;
	if (!s->sf && !s->wf)
		return SB_ERR_IO;
	sb_status st = SB_OK;
	errno = 0;
	if (s->wf) {
		st = sb_wav_writer_finish(s->wf);
	} else {
		sf_write_sync(s->sf);
		if (sf_error(s->sf) || sf_close(s->sf) != 0)
			st = errno ? errno_status(errno) : SB_ERR_IO;
		s->sf = NULL;
	}
	if (st == SB_OK && fsync(s->t.fd) != 0)
		st = errno_status(errno);
	if (st != SB_OK) {
		const int e = errno ? errno : EIO;
		sb_log(w->log, SB_LOG_ERROR, "finishing %s failed: %s%s", s->final, space_hint(st),
		       strerror(e));
		return st;
	}
	close_writers(s);
	s->finished = 1;
	return SB_OK;
}

sb_status sb_stem_writer_residual(sb_stem_writer *w, sb_source *in, int target,
                                  const atomic_int *cancel, double *changed_db)
{
	enum { BLOCK = 8192 };
	if (target < 0 || target >= SB_MAX_STEMS || w->by_stem[target] < 0 ||
	    in->channels != w->o.channels)
		return SB_ERR_UNSUPPORTED;
	sb_status st = SB_OK;
	for (int i = 0; i < w->n && st == SB_OK; i++)
		st = finish_file(w, &w->f[i]);
	if (st != SB_OK)
		return st;
	const int ch = w->o.channels;
	stem_file *t = &w->f[w->by_stem[target]];
	SNDFILE *rd[SB_MAX_STEMS] = {0};
	/* the model's own target stem stays in 'old' until the new one is written */
	sb_temp old = t->t;
	t->t.fd = -1;
	t->t.path[0] = '\0';
	float *x = malloc(sizeof(float) * BLOCK * (size_t)ch);
	float *y = malloc(sizeof(float) * BLOCK * (size_t)ch);
	float *acc = malloc(sizeof(float) * BLOCK * (size_t)ch);
	if (!x || !y || !acc)
		st = SB_ERR_NOMEM;
	for (int i = 0; i < w->n && st == SB_OK; i++) {
		SF_INFO si;
		memset(&si, 0, sizeof si);
		const stem_file *s = &w->f[i];
		rd[i] = sf_open(s == t ? old.path : s->t.path, SFM_READ, &si);
		if (!rd[i]) {
			sb_log(w->log, SB_LOG_ERROR, "cannot read back the %s stem: %s",
			       sb_stem_names[s->stem], sf_strerror(NULL));
			st = SB_ERR_IO;
		}
	}
	double diff = 0, ref = 0;
	if (st == SB_OK)
		st = open_temp(w, t); /* the new target stem */
	for (int64_t at = 0; st == SB_OK && at < in->frames; at += BLOCK) {
		if (cancel && atomic_load(cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		const int64_t n = in->frames - at < BLOCK ? in->frames - at : BLOCK;
		st = in->read(in, at, n, x);
		for (int64_t i = 0; i < n * ch && st == SB_OK; i++)
			acc[i] = 0.f;
		/* the other written stems summed into acc; y ends with the model's own target */
		for (int k = 1; k <= w->n && st == SB_OK; k++) {
			const int i = (w->by_stem[target] + k) % w->n;
			if (sf_readf_float(rd[i], y, n) != n) {
				sb_log(w->log, SB_LOG_ERROR, "reading back the %s stem came up short",
				       sb_stem_names[w->f[i].stem]);
				st = SB_ERR_IO;
			} else if (&w->f[i] != t) {
				for (int64_t j = 0; j < n * ch; j++)
					acc[j] += y[j];
			}
		}
		if (st != SB_OK)
			break;
		for (int64_t j = 0; j < n * ch; j++) {
			const float v = x[j] - acc[j];
			diff += ((double)v - y[j]) * ((double)v - y[j]);
			ref += (double)x[j] * x[j];
			acc[j] = v;
		}
		st = sink_write(&w->sink, target, acc, n);
	}
	for (int i = 0; i < w->n; i++)
		if (rd[i])
			sf_close(rd[i]);
	free(x);
	free(y);
	free(acc);
	sb_temp_discard(&old);
	if (st != SB_OK)
		return st; /* the writer is failed as a whole; free() removes what is left */
	if (changed_db)
		*changed_db = diff > 0 && ref > 0 ? 10 * log10(diff / ref) : -INFINITY;
	return SB_OK;
}

void sb_stem_writer_abs_path(const char *final, char *out, size_t len)
{
	char dir[PATH_MAX];
	sb_dir_of(final, dir, sizeof dir);
	const char *slash = strrchr(final, '/');
	const char *base = slash ? slash + 1 : final;
	char *r = realpath(dir, NULL);
	if (r)
		snprintf(out, len, "%s/%s", strcmp(r, "/") ? r : "", base);
	else
		snprintf(out, len, "%s", final);
	free(r);
}

sb_status sb_stem_writer_add_file(sb_stem_writer *w, const char *final, const void *data,
                                  size_t len)
{
	if (w->nx == MAX_EXTRA || strlen(final) >= PATH_MAX)
		return SB_ERR_INVALID;
	extra_file *x = &w->x[w->nx];
	snprintf(x->final, sizeof x->final, "%s", final);
	x->t.fd = -1;
	x->placed = 0;
	struct stat sbuf;
	if (!w->o.overwrite && lstat(final, &sbuf) == 0) {
		sb_log(w->log, SB_LOG_ERROR, "%s exists: not overwriting it", final);
		return SB_ERR_EXISTS;
	}
	if (sb_make_parents_tracked(x->final, w->made, &w->nmade, 16) != 0) {
		const int e = errno;
		sb_log(w->log, SB_LOG_ERROR, "cannot create the folder for %s: %s", final, strerror(e));
		return errno_status(e);
	}
	remember_dir(w, final);
	if (sb_temp_create(final, &x->t) != 0) {
		const int e = errno;
		sb_log(w->log, SB_LOG_ERROR, "cannot write %s: %s", final, strerror(e));
		return errno_status(e);
	}
	w->nx++; /* from here free() removes it */
	const unsigned char *p = data;
	size_t left = len;
	int e = 0;
	while (left) {
		const ssize_t n = write(x->t.fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? errno : ENOSPC;
			break;
		}
		p += n;
		left -= (size_t)n;
	}
	if (!e && fsync(x->t.fd) != 0)
		e = errno;
	if (e) {
		const sb_status st = errno_status(e);
		sb_log(w->log, SB_LOG_ERROR, "cannot write %s: %s%s", final, space_hint(st),
		       strerror(e));
		return st;
	}
	return SB_OK;
}

/* Undoes what commit() placed: each file it replaced comes back, each new one goes. */
static void unplace(const char *final, int *placed, char *backup)
{
	if (*placed) {
		if (backup[0])
			rename(backup, final);
		else
			unlink(final);
	} else if (backup[0]) {
		unlink(backup);
	}
	*placed = 0;
	backup[0] = '\0';
}

static void unplace_all(sb_stem_writer *w)
{
	for (int i = 0; i < w->n; i++)
		unplace(w->f[i].final, &w->f[i].placed, w->f[i].backup);
	for (int i = 0; i < w->nx; i++)
		unplace(w->x[i].final, &w->x[i].placed, w->x[i].backup);
}

static void drop_backup(char *backup)
{
	if (backup[0])
		unlink(backup);
	backup[0] = '\0';
}

static sb_status place(sb_stem_writer *w, sb_temp *t, const char *final, int *placed,
                       char *backup)
{
	backup[0] = '\0';
	if (w->o.overwrite) {
		/* keep what is there under a name of ours (a hard link: no copy), so that a commit
		 * that fails later gives it back */
		struct stat sbuf;
		sb_temp b;
		if (lstat(final, &sbuf) == 0 && S_ISREG(sbuf.st_mode) && sb_temp_create(final, &b) == 0) {
			unlink(b.path);
			sb_temp_close(&b);
			if (link(final, b.path) == 0)
				snprintf(backup, PATH_MAX, "%s", b.path);
		}
	}
	if (sb_place_file(t->path, final, w->o.overwrite) != 0) {
		const int e = errno;
		if (e == EEXIST)
			sb_log(w->log, SB_LOG_ERROR, "%s appeared while separating: not overwriting it",
			       final);
		else
			sb_log(w->log, SB_LOG_ERROR, "cannot name %s: %s", final, strerror(e));
		return e == EEXIST ? SB_ERR_EXISTS : errno_status(e);
	}
	t->path[0] = '\0';
	*placed = 1;
	return SB_OK;
}

sb_status sb_stem_writer_commit(sb_stem_writer *w)
{
	sb_status st = SB_OK;
	for (int i = 0; i < w->n && st == SB_OK; i++) {
		stem_file *s = &w->f[i];
		st = finish_file(w, s);
		if (st == SB_OK && w->o.frames > 0 && s->frames != w->o.frames) {
			/* an invariant of every model: each stem exactly as long as the input */
			sb_log(w->log, SB_LOG_ERROR, "%s: the model wrote %lld frames of the %s stem, the "
			       "input has %lld", w->o.model ? w->o.model : "model", (long long)s->frames,
			       sb_stem_names[s->stem], (long long)w->o.frames);
			st = SB_ERR_INVALID;
		}
	}
	/* the stems first, then the added files in order (the manifest last) */
	for (int i = 0; i < w->n && st == SB_OK; i++)
		st = place(w, &w->f[i].t, w->f[i].final, &w->f[i].placed, w->f[i].backup);
	for (int i = 0; i < w->nx && st == SB_OK; i++)
		st = place(w, &w->x[i].t, w->x[i].final, &w->x[i].placed, w->x[i].backup);
	for (int i = 0; i < w->ndirs && st == SB_OK; i++)
		if (sb_sync_dir(w->dirs[i]) != 0) {
			const int e = errno;
			sb_log(w->log, SB_LOG_ERROR, "cannot sync the folder %s: %s", w->dirs[i],
			       strerror(e));
			st = errno_status(e);
		}
	if (st != SB_OK) {
		unplace_all(w);
		return st;
	}
	for (int i = 0; i < w->n; i++) {
		drop_backup(w->f[i].backup);
		sb_temp_close(&w->f[i].t);
	}
	for (int i = 0; i < w->nx; i++) {
		drop_backup(w->x[i].backup);
		sb_temp_close(&w->x[i].t);
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
	for (int i = 0; i < w->nx; i++)
		sb_temp_discard(&w->x[i].t);
	if (!w->committed)
		sb_remove_made_dirs(w->made, w->nmade);
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
	info->name = sb_stem_names[s->stem];
	info->path = s->final;
	info->peak = s->peak;
	info->frames = s->frames;
	info->rms = s->frames > 0 ? sqrt(s->sumsq / ((double)s->frames * w->o.channels)) : 0.0;
}
