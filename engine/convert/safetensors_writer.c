#include "convert/safetensors_writer.h"

#include "io/temp_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	char *name;
	sbc_tensor t; /* borrowed bytes */
	size_t order; /* insertion index, for a stable layout */
} entry;

struct sbc_st_writer {
	entry *entries;
	size_t n, cap;
	json_t *names; /* name -> true, to refuse duplicates */
	json_t *metadata;
	uint64_t data_bytes;
};

sbc_st_writer *sbc_st_writer_new(void)
{
	sbc_st_writer *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->names = json_object();
	w->metadata = json_object();
	if (!w->names || !w->metadata) {
		sbc_st_writer_free(w);
		return NULL;
	}
	return w;
}

void sbc_st_writer_free(sbc_st_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->entries[i].name);
	free(w->entries);
	json_decref(w->names);
	json_decref(w->metadata);
	free(w);
}

sb_status sbc_st_add(sbc_st_writer *w, const char *name, const sbc_tensor *t, char *err,
                     size_t errlen)
{
	if (!*name || !strcmp(name, "__metadata__")) {
		sb_errorf(err, errlen, "tensor name '%s' is reserved", name);
		return SB_ERR_INVALID;
	}
	if (json_object_get(w->names, name)) {
		sb_errorf(err, errlen, "tensor '%s' appears twice", name);
		return SB_ERR_INVALID;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		entry *e = realloc(w->entries, cap * sizeof *e);
		if (!e) {
			sb_errorf(err, errlen, "out of memory");
			return SB_ERR_NOMEM;
		}
		w->entries = e;
		w->cap = cap;
	}
	entry *e = &w->entries[w->n];
	e->name = strdup(name);
	if (!e->name || json_object_set_new(w->names, name, json_true()) != 0) {
		free(e->name);
		sb_errorf(err, errlen, "tensor name '%s' is not valid UTF-8 (or out of memory)", name);
		return SB_ERR_INVALID;
	}
	e->t = *t;
	e->t.owned = NULL;
	e->order = w->n++;
	w->data_bytes += t->nbytes;
	return SB_OK;
}

sb_status sbc_st_set_metadata(sbc_st_writer *w, const char *key, const char *value)
{
	json_t *s = json_string(value);
	if (!s || json_object_set_new(w->metadata, key, s) != 0)
		return SB_ERR_INVALID; /* not UTF-8, or out of memory */
	return SB_OK;
}

size_t sbc_st_count(const sbc_st_writer *w)
{
	return w->n;
}

uint64_t sbc_st_data_bytes(const sbc_st_writer *w)
{
	return w->data_bytes;
}

static int by_layout(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	size_t sx = sbc_dtype_size(x->t.dtype), sy = sbc_dtype_size(y->t.dtype);
	if (sx != sy)
		return sx > sy ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static char *build_header(sbc_st_writer *w, size_t *len)
{
	json_t *h = json_object();
	if (!h)
		return NULL;
	if (json_object_size(w->metadata))
		json_object_set(h, "__metadata__", w->metadata);
	uint64_t at = 0;
	for (size_t i = 0; i < w->n; i++) {
		const entry *e = &w->entries[i];
		json_t *shape = json_array(), *t = json_object(), *off = json_array();
		for (int d = 0; shape && d < e->t.ndim; d++)
			json_array_append_new(shape, json_integer((json_int_t)e->t.shape[d]));
		json_array_append_new(off, json_integer((json_int_t)at));
		json_array_append_new(off, json_integer((json_int_t)(at + e->t.nbytes)));
		at += e->t.nbytes;
		json_object_set_new(t, "dtype", json_string(sbc_dtype_name(e->t.dtype)));
		json_object_set_new(t, "shape", shape);
		json_object_set_new(t, "data_offsets", off);
		if (!shape || !t || !off || json_object_set_new(h, e->name, t) != 0) {
			json_decref(h);
			return NULL;
		}
	}
	char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	if (!s)
		return NULL;
	/* pad with spaces so that the data starts 8-byte aligned (the 8-byte length comes first) */
	size_t n = strlen(s), padded = (n + 7) / 8 * 8;
	char *out = realloc(s, padded + 1);
	if (!out) {
		free(s);
		return NULL;
	}
	memset(out + n, ' ', padded - n);
	out[padded] = '\0';
	*len = padded;
	return out;
}

static sb_status write_all(int fd, const void *buf, size_t len, char *err, size_t errlen)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : ENOSPC;
			sb_errorf(err, errlen, "cannot write: %s", strerror(e));
			return e == ENOSPC || e == EDQUOT || e == EFBIG ? SB_ERR_NOSPACE : SB_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
	}
	return SB_OK;
}

static sb_status write_file(sbc_st_writer *w, int fd, char *err, size_t errlen)
{
	size_t hlen;
	char *header = build_header(w, &hlen);
	if (!header) {
		sb_errorf(err, errlen, "cannot build the header (a name or value that is not UTF-8, or out "
		     "of memory)");
		return SB_ERR_INVALID;
	}
	uint8_t len8[8];
	for (int k = 0; k < 8; k++)
		len8[k] = (uint8_t)((uint64_t)hlen >> (8 * k));
	sb_status st = write_all(fd, len8, 8, err, errlen);
	if (st == SB_OK)
		st = write_all(fd, header, hlen, err, errlen);
	free(header);
	for (size_t i = 0; st == SB_OK && i < w->n; i++)
		st = write_all(fd, w->entries[i].t.data, w->entries[i].t.nbytes, err, errlen);
	if (st == SB_OK && fsync(fd) != 0) {
		sb_errorf(err, errlen, "cannot sync: %s", strerror(errno));
		st = errno == ENOSPC || errno == EDQUOT ? SB_ERR_NOSPACE : SB_ERR_IO;
	}
	return st;
}

sb_status sbc_st_write(sbc_st_writer *w, const char *path, int overwrite, char *err,
                       size_t errlen)
{
	struct stat sb;
	if (!overwrite && lstat(path, &sb) == 0) {
		sb_errorf(err, errlen, "exists (use --overwrite to replace it)");
		return SB_ERR_EXISTS;
	}
	qsort(w->entries, w->n, sizeof *w->entries, by_layout);
	char dir[4096];
	sb_dir_of(path, dir, sizeof dir);
	/* what an interrupted conversion or install left here, then ours: a locked temporary file
	 * of io/temp_file.h's naming, which nothing lists as a model */
	sb_temp_clean_stale(dir, NULL);
	sb_temp t;
	if (sb_temp_create(path, &t) != 0) {
		const int e = errno;
		sb_errorf(err, errlen, "cannot create a file in %s: %s", dir, strerror(e));
		return e == ENOSPC || e == EDQUOT ? SB_ERR_NOSPACE : SB_ERR_IO;
	}
	sb_status st = write_file(w, t.fd, err, errlen);
	if (st == SB_OK && sb_place_file(t.path, path, overwrite) != 0) {
		if (errno == EEXIST) {
			sb_errorf(err, errlen, "exists (use --overwrite to replace it)");
			st = SB_ERR_EXISTS;
		} else {
			sb_errorf(err, errlen, "cannot move into place: %s", strerror(errno));
			st = SB_ERR_IO;
		}
	}
	if (st == SB_OK) {
		t.path[0] = '\0'; /* placed */
		if (sb_sync_dir(dir) != 0) {
			sb_errorf(err, errlen, "cannot sync the folder %s: %s", dir, strerror(errno));
			unlink(path);
			st = SB_ERR_IO;
		}
	}
	sb_temp_discard(&t);
	return st;
}
