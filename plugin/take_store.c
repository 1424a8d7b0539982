/* A take's audio and journal on disk (take_store.h). */
#include "take_store.h"

#include "stembridge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_VERSION 1
/* frames per piece of the recording's write; a sync every SYNC_EVERY pieces keeps the last
 * fsync short, so that the service is never away from the record pools for long */
#define PIECE_FRAMES 65536
#define SYNC_EVERY 16

void sb_take_files_init(sb_take_files *f)
{
	f->audio[0] = f->journal[0] = '\0';
	f->lock = -1;
}

static void path_in(char *out, size_t len, const char *dir, const char *id, const char *tail)
{
	if (snprintf(out, len, "%s/%s%s", dir, id, tail) >= (int)len)
		out[0] = '\0';
}

static sb_status errno_status(int e)
{
	return e == ENOSPC || e == EFBIG || e == EDQUOT ? SB_ERR_NOSPACE : SB_ERR_IO;
}

static sb_status fail_errno(int e, char *why, size_t wlen, const char *what, const char *path)
{
	snprintf(why, wlen, "cannot %s %s: %s", what, path, strerror(e));
	return errno_status(e);
}

/* Gives a finished, synced temporary file its name and syncs the folder. */
static sb_status place(sb_temp *t, const char *final, int overwrite, const char *dir, char *why,
                       size_t wlen)
{
	if (sb_place_file(t->path, final, overwrite) != 0)
		return fail_errno(errno, why, wlen, "name", final);
	t->path[0] = '\0';
	if (sb_sync_dir(dir) != 0)
		return fail_errno(errno, why, wlen, "sync the folder", dir);
	return SB_OK;
}

static sb_status write_recording(const sb_take_journal *j, const float *samples,
                                 void (*idle)(void *), void *idle_user, const char *final,
                                 char *why, size_t wlen)
{
	sb_temp t;
	if (sb_temp_create(final, &t) != 0)
		return fail_errno(errno, why, wlen, "write", final);
	char desc[400];
	snprintf(desc, sizeof desc, "Stembridge take %s", j->id);
	sb_wav_writer *w = NULL;
	errno = 0;
	sb_status st = sb_wav_writer_new(t.fd, j->channels, (int)lrint(j->rate), j->timeline_start,
	                                 desc, &w);
	int e = errno;
	for (int64_t at = 0, piece = 0; st == SB_OK && at < j->frames; at += PIECE_FRAMES, piece++) {
		const int64_t n = j->frames - at < PIECE_FRAMES ? j->frames - at : PIECE_FRAMES;
		st = sb_wav_writer_write(w, samples + at * j->channels, n);
		e = errno;
		if (st == SB_OK && piece % SYNC_EVERY == SYNC_EVERY - 1 && fdatasync(t.fd) != 0) {
			e = errno;
			st = errno_status(e);
		}
		if (idle)
			idle(idle_user);
	}
	if (st == SB_OK) {
		st = sb_wav_writer_finish(w);
		e = errno;
	}
	sb_wav_writer_free(w);
	if (st == SB_OK && fsync(t.fd) != 0) {
		e = errno;
		st = errno_status(e);
	}
	if (st != SB_OK) {
		snprintf(why, wlen, "cannot write %s: %s", final,
		         e ? strerror(e) : sb_status_str(st));
		sb_temp_discard(&t);
		return st;
	}
	char dir[SB_TAKE_PATH];
	sb_dir_of(final, dir, sizeof dir);
	st = place(&t, final, 0, dir, why, wlen);
	if (st != SB_OK && !t.path[0])
		unlink(final); /* named, but the folder did not sync: not a take we can promise */
	sb_temp_discard(&t);
	return st;
}

static json_t *journal_json(const sb_take_journal *j, const char *recording)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "stembridge_take", json_integer(JOURNAL_VERSION));
	json_object_set_new(o, "id", json_string(j->id));
	json_object_set_new(o, "instance", json_string(j->instance));
	json_object_set_new(o, "track", json_string(j->track));
	json_object_set_new(o, "take", json_string(j->take));
	json_object_set_new(o, "rate", json_real(j->rate));
	json_object_set_new(o, "channels", json_integer(j->channels));
	json_object_set_new(o, "frames", json_integer(j->frames));
	json_object_set_new(o, "timeline_start", json_integer(j->timeline_start));
	json_object_set_new(o, "model", json_string(j->model));
	json_object_set_new(o, "model_file", json_string(j->model_file));
	json_object_set_new(o, "stems", json_integer(j->stems));
	json_object_set_new(o, "device", json_string(j->device));
	json_object_set_new(o, "device_port", json_integer(j->device_port));
	json_object_set_new(o, "mode", json_string(j->sequential ? "sequential" : "parallel"));
	json_object_set_new(o, "precision", json_string(j->bf16 ? "bf16" : "fp32"));
	json_object_set_new(o, "keep_audio", json_boolean(j->keep_audio));
	json_object_set_new(o, "out_dir", json_string(j->out_dir));
	json_object_set_new(o, "recording", json_string(recording));
	json_object_set_new(o, "status", json_string(j->status[0] ? j->status : "pending"));
	json_object_set_new(o, "error", json_string(j->error));
	return o;
}

/* The journal's text to a locked temporary file, synced and renamed into place (over the old
 * one when overwrite). *fd: the new file's descriptor, which keeps its lock. */
static sb_status write_journal(json_t *o, const char *final, int overwrite, int *fd, char *why,
                               size_t wlen)
{
	*fd = -1;
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text) {
		snprintf(why, wlen, "out of memory for the journal %s", final);
		return SB_ERR_NOMEM;
	}
	sb_temp t;
	if (sb_temp_create(final, &t) != 0) {
		free(text);
		return fail_errno(errno, why, wlen, "write", final);
	}
	const size_t len = strlen(text);
	size_t done = 0;
	int e = 0;
	while (done < len + 1 && !e) {
		/* the text and a newline */
		const char *p = done < len ? text + done : "\n";
		const size_t n = done < len ? len - done : 1;
		const ssize_t w = write(t.fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			e = w < 0 ? errno : ENOSPC;
		else
			done += (size_t)w;
	}
	free(text);
	if (!e && fsync(t.fd) != 0)
		e = errno;
	if (e) {
		sb_temp_discard(&t);
		return fail_errno(e, why, wlen, "write", final);
	}
	char dir[SB_TAKE_PATH];
	sb_dir_of(final, dir, sizeof dir);
	const sb_status st = place(&t, final, overwrite, dir, why, wlen);
	if (st != SB_OK) {
		if (!t.path[0] && !overwrite)
			unlink(final);
		sb_temp_discard(&t);
		return st;
	}
	*fd = t.fd; /* placed: the descriptor and its lock are the journal's now */
	return SB_OK;
}

sb_status sb_take_save(const sb_take_journal *j, const float *samples, void (*idle)(void *),
                       void *idle_user, sb_take_files *f, char *why, size_t wlen)
{
	sb_take_files_init(f);
	char audio[SB_TAKE_PATH], journal[SB_TAKE_PATH];
	path_in(audio, sizeof audio, j->out_dir, j->id, "-recording.wav");
	path_in(journal, sizeof journal, j->out_dir, j->id, "-journal.json");
	if (!audio[0] || !journal[0]) {
		snprintf(why, wlen, "the take's folder name is too long");
		return SB_ERR_INVALID;
	}
	sb_status st = write_recording(j, samples, idle, idle_user, audio, why, wlen);
	if (st != SB_OK)
		return st;
	json_t *o = journal_json(j, strrchr(audio, '/') + 1);
	int fd = -1;
	st = o ? write_journal(o, journal, 0, &fd, why, wlen) : SB_ERR_NOMEM;
	if (!o)
		snprintf(why, wlen, "out of memory for the journal %s", journal);
	json_decref(o);
	if (st != SB_OK) {
		/* a recording without its journal is no take: nothing half-written stays */
		unlink(audio);
		sb_sync_dir(j->out_dir);
		return st;
	}
	snprintf(f->audio, sizeof f->audio, "%s", audio);
	snprintf(f->journal, sizeof f->journal, "%s", journal);
	f->lock = fd;
	return SB_OK;
}

/* One string member that fits, or a damage message. */
static bool get_str(json_t *o, const char *key, char *out, size_t len, bool may_be_empty,
                    char *why, size_t wlen)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (!s || strlen(s) >= len || (!may_be_empty && !s[0]) || strlen(s) != json_string_length(v)) {
		snprintf(why, wlen, "its \"%s\" is missing or damaged", key);
		return false;
	}
	snprintf(out, len, "%s", s);
	return true;
}

static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, char *why,
                    size_t wlen)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		snprintf(why, wlen, "its \"%s\" is missing or out of range", key);
		return false;
	}
	*out = json_integer_value(v);
	return true;
}

static bool one_of(const char *s, const char *a, const char *b)
{
	return !strcmp(s, a) || !strcmp(s, b);
}

/* Every value checked before the take is trusted (errors at the edge). */
static bool parse_journal(json_t *o, const char *path, sb_take_journal *j, char *recording,
                          size_t rlen, char *why, size_t wlen)
{
	memset(j, 0, sizeof *j);
	int64_t x = 0;
	char mode[16], precision[16];
	json_t *rate = json_object_get(o, "rate"), *keep = json_object_get(o, "keep_audio");
	if (!json_is_object(o)) {
		snprintf(why, wlen, "it is not a JSON object");
		return false;
	}
	if (!get_int(o, "stembridge_take", JOURNAL_VERSION, JOURNAL_VERSION, &x, why, wlen))
		return false;
	if (!get_str(o, "id", j->id, sizeof j->id, false, why, wlen) ||
	    !get_str(o, "instance", j->instance, sizeof j->instance, true, why, wlen) ||
	    !get_str(o, "track", j->track, sizeof j->track, false, why, wlen) ||
	    !get_str(o, "take", j->take, sizeof j->take, false, why, wlen) ||
	    !get_str(o, "model", j->model, sizeof j->model, false, why, wlen) ||
	    !get_str(o, "model_file", j->model_file, sizeof j->model_file, true, why, wlen) ||
	    !get_str(o, "device", j->device, sizeof j->device, false, why, wlen) ||
	    !get_str(o, "mode", mode, sizeof mode, false, why, wlen) ||
	    !get_str(o, "precision", precision, sizeof precision, false, why, wlen) ||
	    !get_str(o, "out_dir", j->out_dir, sizeof j->out_dir, false, why, wlen) ||
	    !get_str(o, "recording", recording, rlen, false, why, wlen) ||
	    !get_str(o, "status", j->status, sizeof j->status, false, why, wlen) ||
	    !get_str(o, "error", j->error, sizeof j->error, true, why, wlen))
		return false;
	if (!get_int(o, "channels", 1, 8, &x, why, wlen))
		return false;
	j->channels = (int)x;
	if (!get_int(o, "frames", 1, INT64_MAX / 64, &j->frames, why, wlen) ||
	    !get_int(o, "timeline_start", -1, INT64_MAX / 2, &j->timeline_start, why, wlen))
		return false;
	if (!get_int(o, "stems", 0, 63, &x, why, wlen))
		return false;
	j->stems = (unsigned)x;
	if (!get_int(o, "device_port", -1, 64, &x, why, wlen))
		return false;
	j->device_port = (int)x;
	if (!json_is_number(rate) || !(json_number_value(rate) >= 1000.0 &&
	                               json_number_value(rate) <= 768000.0)) {
		snprintf(why, wlen, "its \"rate\" is missing or out of range");
		return false;
	}
	j->rate = json_number_value(rate);
	if (!json_is_boolean(keep)) {
		snprintf(why, wlen, "its \"keep_audio\" is missing or damaged");
		return false;
	}
	j->keep_audio = json_is_true(keep);
	if (!one_of(mode, "parallel", "sequential") || !one_of(precision, "fp32", "bf16") ||
	    !one_of(j->status, "pending", "failed")) {
		snprintf(why, wlen, "its mode, precision or status is none it knows");
		return false;
	}
	j->sequential = !strcmp(mode, "sequential");
	j->bf16 = !strcmp(precision, "bf16");
	/* the journal belongs to its folder: the folder's name is its id, the stems go there and
	 * the recording is beside it (a journal copied elsewhere is not run against other files) */
	char dir[SB_TAKE_PATH];
	sb_dir_of(path, dir, sizeof dir);
	const char *base = strrchr(dir, '/');
	if (strcmp(base ? base + 1 : dir, j->id) != 0 || j->out_dir[0] != '/' ||
	    strchr(recording, '/') || recording[0] == '.') {
		snprintf(why, wlen, "its id, folder or recording does not match the folder it is in");
		return false;
	}
	snprintf(j->out_dir, sizeof j->out_dir, "%s", dir);
	return true;
}

sb_status sb_take_open(const char *journal, sb_take_journal *j, sb_take_files *f, char *why,
                       size_t wlen)
{
	sb_take_files_init(f);
	const int fd = open(journal, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail_errno(errno, why, wlen, "open", journal);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
		close(fd);
		snprintf(why, wlen, "%s is in use by a running job", journal);
		return SB_ERR_EXISTS;
	}
	json_error_t err;
	json_t *o = json_loadfd(fd, JSON_REJECT_DUPLICATES, &err);
	char recording[512] = "";
	if (!o) {
		snprintf(why, wlen, "%s cannot be read (line %d: %s)", journal, err.line, err.text);
		close(fd);
		return SB_ERR_FORMAT;
	}
	char what[300];
	const bool ok = parse_journal(o, journal, j, recording, sizeof recording, what, sizeof what);
	json_decref(o);
	if (!ok) {
		snprintf(why, wlen, "%s cannot be used: %s", journal, what);
		close(fd);
		return SB_ERR_FORMAT;
	}
	snprintf(f->journal, sizeof f->journal, "%s", journal);
	char audio[SB_TAKE_PATH + 600];
	snprintf(audio, sizeof audio, "%s/%s", j->out_dir, recording);
	struct stat st;
	if (strlen(audio) < sizeof f->audio && stat(audio, &st) == 0 && S_ISREG(st.st_mode))
		snprintf(f->audio, sizeof f->audio, "%s", audio);
	f->lock = fd;
	return SB_OK;
}

sb_status sb_take_read_audio(const sb_take_files *f, const sb_take_journal *j, float **samples,
                             const sb_logger *log, char *why, size_t wlen)
{
	*samples = NULL;
	if (!f->audio[0]) {
		snprintf(why, wlen, "the take's recording is not in %s", j->out_dir);
		return SB_ERR_IO;
	}
	const sb_logger quiet = {NULL, NULL};
	sb_source *src = NULL;
	sb_audio_info info;
	sb_status st = sb_source_file(f->audio, log ? log : &quiet, &src, &info);
	if (st != SB_OK) {
		snprintf(why, wlen, "%s cannot be read: %s", f->audio, sb_status_str(st));
		return st;
	}
	if (info.channels != j->channels || fabs(info.rate - j->rate) > 0.5 ||
	    info.frames != j->frames) {
		snprintf(why, wlen, "%s holds %lld frames x %d at %g Hz, its journal says %lld x %d at "
		         "%g Hz", f->audio, (long long)info.frames, info.channels, info.rate,
		         (long long)j->frames, j->channels, j->rate);
		sb_source_close(src);
		return SB_ERR_FORMAT;
	}
	float *buf = malloc((size_t)j->frames * (size_t)j->channels * sizeof(float));
	if (!buf) {
		sb_source_close(src);
		snprintf(why, wlen, "out of memory for the take's %lld frames", (long long)j->frames);
		return SB_ERR_NOMEM;
	}
	st = sb_source_read(src, 0, j->frames, buf);
	sb_source_close(src);
	if (st != SB_OK) {
		free(buf);
		snprintf(why, wlen, "%s cannot be read: %s", f->audio, sb_status_str(st));
		return st;
	}
	*samples = buf;
	return SB_OK;
}

bool sb_take_committed(const sb_take_journal *j)
{
	char manifest[SB_TAKE_PATH];
	path_in(manifest, sizeof manifest, j->out_dir, j->id, "-manifest.json");
	return manifest[0] && access(manifest, F_OK) == 0;
}

void sb_take_release(sb_take_files *f)
{
	if (f->lock >= 0)
		close(f->lock);
	f->lock = -1;
}

void sb_take_done(sb_take_files *f, bool keep_audio)
{
	char dir[SB_TAKE_PATH] = "";
	if (f->journal[0]) {
		sb_dir_of(f->journal, dir, sizeof dir);
		unlink(f->journal);
	}
	if (f->audio[0] && !keep_audio)
		unlink(f->audio);
	if (dir[0])
		sb_sync_dir(dir);
	sb_take_release(f);
	f->journal[0] = '\0';
	if (!keep_audio)
		f->audio[0] = '\0';
}

sb_status sb_take_failed(sb_take_files *f, const char *error, char *why, size_t wlen)
{
	if (!f->journal[0]) {
		sb_take_release(f);
		return SB_OK;
	}
	json_error_t err;
	json_t *o = json_load_file(f->journal, 0, &err);
	sb_status st = SB_ERR_FORMAT;
	if (!o)
		snprintf(why, wlen, "%s cannot be read again (%s)", f->journal, err.text);
	if (o && json_object_set_new(o, "status", json_string("failed")) == 0 &&
	    json_object_set_new(o, "error", json_string(error ? error : "")) == 0) {
		int fd = -1;
		st = write_journal(o, f->journal, 1, &fd, why, wlen);
		if (fd >= 0)
			close(fd);
	}
	json_decref(o);
	sb_take_release(f);
	return st;
}

uint32_t sb_take_number(const char *name, const char *track)
{
	const size_t tl = strlen(track);
	if (strncmp(name, track, tl) != 0 || strncmp(name + tl, "-take", 5) != 0)
		return 0;
	const char *q = name + tl + 5;
	char *end;
	unsigned long n = strtoul(q, &end, 10);
	if (end == q || *q == '0' || (*end && *end != '-' && *end != '.') || n > 9999999)
		return 0;
	return (uint32_t)n;
}

int sb_take_scan(const char *root, const char *track,
                 void (*found)(void *user, const char *journal), void *user)
{
	DIR *d = opendir(root);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		/* the folder itself, "<track>-take<N>", not a file of that name */
		const uint32_t k = sb_take_number(e->d_name, track);
		char name[80];
		snprintf(name, sizeof name, "-take%u", k);
		if (!k || strcmp(e->d_name + strlen(track), name) != 0)
			continue;
		char journal[SB_TAKE_PATH];
		if (snprintf(journal, sizeof journal, "%s/%s/%s-journal.json", root, e->d_name,
		             e->d_name) >= (int)sizeof journal)
			continue;
		struct stat st;
		if (lstat(journal, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		found(user, journal);
		n++;
	}
	closedir(d);
	return n;
}
