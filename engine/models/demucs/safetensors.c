/* Checked safetensors reader and a small F32 writer; see safetensors.h.
 * Format: https://github.com/huggingface/safetensors (README, "Format"). The file is mapped
 * read-only; tensors are converted to F32 on request, so a model keeps only its own copies. */
#include "models/demucs/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; F32 tensors are copied as they are"
#endif

/* A header larger than this is not a model file (the safetensors crate uses 100 MB too). */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

typedef struct {
	sb_st_tensor t;
	char *name;
	char dtype_name[16];
	uint64_t begin, end; /* byte range in the data area */
} st_entry;

struct sb_safetensors {
	char *path;
	const unsigned char *map;
	size_t map_size;
	const unsigned char *data; /* map + 8 + header length */
	uint64_t data_size;
	st_entry *e;
	int n;
	int *sorted; /* indices of e sorted by name, for find */
	char **meta_keys, **meta_vals;
	int n_meta;
};

float sb_half_to_float(uint16_t h)
{
	const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112u) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else {
		/* subnormal half: normalise it into a float */
		int e = -1;
		do {
			e++;
			man <<= 1;
		} while (!(man & 0x400u));
		bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

float sb_bf16_to_float(uint16_t h)
{
	const uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

uint16_t sb_float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	const uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf or NaN */
		return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
	if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		if (ax < 0x33000000u)
			return sign;
		const uint32_t e = ax >> 23;
		const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
		const uint32_t shift = 126u - e; /* 14..24 */
		uint32_t v = m >> shift;
		const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
		if (rem > half || (rem == half && (v & 1u)))
			v++;
		return (uint16_t)(sign | v);
	}
	uint32_t v = ((ax >> 13) - (112u << 10));
	const uint32_t rem = ax & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (v & 1u)))
		v++;
	return (uint16_t)(sign | v);
}

static int dtype_width(const char *d, sb_st_dtype *kind)
{
	static const struct {
		const char *name;
		int width;
		sb_st_dtype kind;
	} table[] = {
		{"F32", 4, SB_ST_F32},   {"F16", 2, SB_ST_F16},     {"BF16", 2, SB_ST_BF16},
		{"F64", 8, SB_ST_OTHER}, {"I64", 8, SB_ST_OTHER},   {"U64", 8, SB_ST_OTHER},
		{"I32", 4, SB_ST_OTHER}, {"U32", 4, SB_ST_OTHER},   {"I16", 2, SB_ST_OTHER},
		{"U16", 2, SB_ST_OTHER}, {"I8", 1, SB_ST_OTHER},    {"U8", 1, SB_ST_OTHER},
		{"BOOL", 1, SB_ST_OTHER}, {"F8_E4M3", 1, SB_ST_OTHER}, {"F8_E5M2", 1, SB_ST_OTHER},
	};
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(d, table[i].name)) {
			*kind = table[i].kind;
			return table[i].width;
		}
	return 0;
}

void sb_safetensors_close(sb_safetensors *st)
{
	if (!st)
		return;
	if (st->map)
		munmap((void *)st->map, st->map_size);
	for (int i = 0; i < st->n; i++)
		free(st->e[i].name);
	for (int i = 0; i < st->n_meta; i++) {
		free(st->meta_keys[i]);
		free(st->meta_vals[i]);
	}
	free(st->meta_keys);
	free(st->meta_vals);
	free(st->e);
	free(st->sorted);
	free(st->path);
	free(st);
}

static int cmp_begin(const void *a, const void *b, void *ctx)
{
	const st_entry *e = ctx;
	const uint64_t x = e[*(const int *)a].begin, y = e[*(const int *)b].begin;
	return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const st_entry *e = ctx;
	return strcmp(e[*(const int *)a].name, e[*(const int *)b].name);
}

/* One tensor's header entry: dtype, shape and data_offsets, each checked against the data
 * area. Returns 0 on success, else fills 'why'. */
static int parse_entry(st_entry *en, json_t *v, uint64_t data_size, char *why, size_t nwhy)
{
	if (!json_is_object(v)) {
		snprintf(why, nwhy, "its header entry is not an object");
		return -1;
	}
	json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
	       *off = json_object_get(v, "data_offsets");
	if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off)) {
		snprintf(why, nwhy, "its header entry lacks dtype, shape or data_offsets");
		return -1;
	}
	snprintf(en->dtype_name, sizeof en->dtype_name, "%s", json_string_value(dt));
	const int width = dtype_width(json_string_value(dt), &en->t.dtype);
	if (!width) {
		snprintf(why, nwhy, "unknown dtype \"%.20s\"", json_string_value(dt));
		return -1;
	}
	const size_t nd = json_array_size(sh);
	if (nd > SB_ST_MAX_DIMS) {
		snprintf(why, nwhy, "%zu dimensions (at most %d)", nd, SB_ST_MAX_DIMS);
		return -1;
	}
	en->t.ndim = (int)nd;
	uint64_t numel = 1;
	for (size_t d = 0; d < nd; d++) {
		json_t *x = json_array_get(sh, d);
		if (!json_is_integer(x) || json_integer_value(x) < 0) {
			snprintf(why, nwhy, "shape[%zu] is not a non-negative integer", d);
			return -1;
		}
		const uint64_t dim = (uint64_t)json_integer_value(x);
		if (dim && numel > UINT64_MAX / 8 / dim) {
			snprintf(why, nwhy, "its shape overflows");
			return -1;
		}
		numel *= dim;
		en->t.shape[d] = (int64_t)dim;
	}
	en->t.numel = (int64_t)numel;
	if (json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
	    !json_is_integer(json_array_get(off, 1)) ||
	    json_integer_value(json_array_get(off, 0)) < 0 ||
	    json_integer_value(json_array_get(off, 1)) < 0) {
		snprintf(why, nwhy, "data_offsets is not two non-negative integers");
		return -1;
	}
	en->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
	en->end = (uint64_t)json_integer_value(json_array_get(off, 1));
	if (en->end < en->begin) {
		snprintf(why, nwhy, "data_offsets [%llu, %llu] end before they begin",
		         (unsigned long long)en->begin, (unsigned long long)en->end);
		return -1;
	}
	if (en->end - en->begin != numel * (uint64_t)width) {
		snprintf(why, nwhy, "data_offsets hold %llu bytes but %s %s of %llu elements needs %llu",
		         (unsigned long long)(en->end - en->begin), en->dtype_name,
		         nd ? "tensor" : "scalar", (unsigned long long)numel,
		         (unsigned long long)(numel * (uint64_t)width));
		return -1;
	}
	if (en->end > data_size) {
		snprintf(why, nwhy,
		         "its data [%llu, %llu) lies past the end of the file's %llu data bytes "
		         "(truncated file?)",
		         (unsigned long long)en->begin, (unsigned long long)en->end,
		         (unsigned long long)data_size);
		return -1;
	}
	return 0;
}

static sb_status parse_header(sb_safetensors *st, const char *hdr, size_t len,
                              const sb_logger *log)
{
	json_error_t jerr;
	json_t *root = json_loadb(hdr, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root || !json_is_object(root)) {
		sb_log(log, SB_LOG_ERROR, "%s: not a safetensors file: header is not a JSON object (%s)",
		       st->path, root ? "another JSON value" : jerr.text);
		json_decref(root);
		return SB_ERR_FORMAT;
	}
	const size_t n = json_object_size(root);
	st->e = calloc(n ? n : 1, sizeof *st->e);
	st->sorted = calloc(n ? n : 1, sizeof *st->sorted);
	if (!st->e || !st->sorted) {
		json_decref(root);
		sb_log(log, SB_LOG_ERROR, "%s: out of memory reading the header", st->path);
		return SB_ERR_NOMEM;
	}
	sb_status status = SB_OK;
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			if (!json_is_object(v)) {
				sb_log(log, SB_LOG_ERROR, "%s: __metadata__ is not an object", st->path);
				status = SB_ERR_FORMAT;
				break;
			}
			const size_t m = json_object_size(v);
			st->meta_keys = calloc(m ? m : 1, sizeof(char *));
			st->meta_vals = calloc(m ? m : 1, sizeof(char *));
			if (!st->meta_keys || !st->meta_vals) {
				status = SB_ERR_NOMEM;
				break;
			}
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv) {
				if (!json_is_string(mv)) {
					sb_log(log, SB_LOG_ERROR, "%s: __metadata__ value of \"%s\" is not a string",
					       st->path, mk);
					status = SB_ERR_FORMAT;
					break;
				}
				st->meta_keys[st->n_meta] = strdup(mk);
				st->meta_vals[st->n_meta] = strdup(json_string_value(mv));
				if (!st->meta_keys[st->n_meta] || !st->meta_vals[st->n_meta++]) {
					status = SB_ERR_NOMEM;
					break;
				}
			}
			if (status != SB_OK)
				break;
			continue;
		}
		st_entry *en = &st->e[st->n];
		char why[256];
		if (parse_entry(en, v, st->data_size, why, sizeof why) != 0) {
			sb_log(log, SB_LOG_ERROR, "%s: tensor \"%s\": %s", st->path, key, why);
			status = SB_ERR_FORMAT;
			break;
		}
		en->name = strdup(key);
		if (!en->name) {
			status = SB_ERR_NOMEM;
			break;
		}
		en->t.name = en->name;
		en->t.dtype_name = en->dtype_name;
		st->sorted[st->n] = st->n;
		st->n++;
	}
	json_decref(root);
	if (status == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "%s: out of memory reading the header", st->path);
	if (status != SB_OK)
		return status;

	/* As the format's reference reader (safetensors' Metadata::validate) requires: the tensors
	 * tile the data area exactly, in order of their offsets, from its first byte to its last.
	 * Overlaps (two tensors sharing bytes), holes, and bytes the header does not declare are a
	 * damaged or hostile file; a header length that is off by a few bytes shows up here as
	 * such bytes, since every tensor would otherwise be read shifted. */
	qsort_r(st->sorted, (size_t)st->n, sizeof(int), cmp_begin, st->e);
	uint64_t at = 0;
	for (int i = 0; i < st->n; i++) {
		const st_entry *b = &st->e[st->sorted[i]];
		if (b->begin != at) {
			if (b->begin < at)
				sb_log(log, SB_LOG_ERROR, "%s: tensor \"%s\": its data overlaps tensor \"%s\"",
				       st->path, b->name, st->e[st->sorted[i - 1]].name);
			else
				sb_log(log, SB_LOG_ERROR, "%s: tensor \"%s\": its data starts at byte %llu, but "
				       "the tensor before it ends at %llu: the file has bytes its header does not "
				       "declare", st->path, b->name, (unsigned long long)b->begin,
				       (unsigned long long)at);
			return SB_ERR_FORMAT;
		}
		at = b->end;
	}
	if (at != st->data_size) {
		sb_log(log, SB_LOG_ERROR, "%s: not a well-formed safetensors file: its header declares "
		       "%llu bytes of tensors, but %llu follow the header (%s)", st->path,
		       (unsigned long long)at, (unsigned long long)st->data_size,
		       at < st->data_size ? "a wrong header length or trailing bytes"
		                          : "a truncated file");
		return SB_ERR_FORMAT;
	}
	qsort_r(st->sorted, (size_t)st->n, sizeof(int), cmp_name, st->e);
	return SB_OK;
}

sb_status sb_safetensors_open(const char *path, const sb_logger *log, sb_safetensors **out)
{
	*out = NULL;
	sb_safetensors *st = calloc(1, sizeof *st);
	if (!st || !(st->path = strdup(path))) {
		free(st);
		sb_log(log, SB_LOG_ERROR, "%s: out of memory", path);
		return SB_ERR_NOMEM;
	}
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		sb_log(log, SB_LOG_ERROR, "%s: cannot open: %s", path, strerror(errno));
		sb_safetensors_close(st);
		return SB_ERR_IO;
	}
	struct stat sbuf;
	if (fstat(fd, &sbuf) != 0 || !S_ISREG(sbuf.st_mode)) {
		sb_log(log, SB_LOG_ERROR, "%s: not a regular file", path);
		close(fd);
		sb_safetensors_close(st);
		return SB_ERR_IO;
	}
	const uint64_t size = (uint64_t)sbuf.st_size;
	if (size < 8) {
		sb_log(log, SB_LOG_ERROR, "%s: not a safetensors file: %llu bytes, shorter than the "
		       "8-byte header length", path, (unsigned long long)size);
		close(fd);
		sb_safetensors_close(st);
		return SB_ERR_FORMAT;
	}
	void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	const int map_errno = errno;
	close(fd);
	if (map == MAP_FAILED) {
		sb_log(log, SB_LOG_ERROR, "%s: cannot map: %s", path, strerror(map_errno));
		sb_safetensors_close(st);
		return SB_ERR_IO;
	}
	st->map = map;
	st->map_size = (size_t)size;
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | st->map[i];
	if (hlen < 2 || hlen > MAX_HEADER_BYTES || hlen > size - 8) {
		sb_log(log, SB_LOG_ERROR, "%s: not a safetensors file: header length %llu does not fit "
		       "the file's %llu bytes", path, (unsigned long long)hlen,
		       (unsigned long long)size);
		sb_safetensors_close(st);
		return SB_ERR_FORMAT;
	}
	/* the header is a JSON object from its first byte (trailing spaces allowed, as the format
	 * pads it), UTF-8 throughout: jansson checks the rest */
	if (st->map[8] != '{') {
		sb_log(log, SB_LOG_ERROR, "%s: not a safetensors file: the header does not start with "
		       "'{'", path);
		sb_safetensors_close(st);
		return SB_ERR_FORMAT;
	}
	st->data = st->map + 8 + hlen;
	st->data_size = size - 8 - hlen;
	sb_status s = parse_header(st, (const char *)st->map + 8, (size_t)hlen, log);
	if (s != SB_OK) {
		sb_safetensors_close(st);
		return s;
	}
	*out = st;
	return SB_OK;
}

const char *sb_safetensors_path(const sb_safetensors *st)
{
	return st->path;
}

const char *sb_safetensors_meta(const sb_safetensors *st, const char *key)
{
	for (int i = 0; i < st->n_meta; i++)
		if (!strcmp(st->meta_keys[i], key))
			return st->meta_vals[i];
	return NULL;
}

int sb_safetensors_count(const sb_safetensors *st)
{
	return st->n;
}

const sb_st_tensor *sb_safetensors_at(const sb_safetensors *st, int i)
{
	return i >= 0 && i < st->n ? &st->e[i].t : NULL;
}

static const st_entry *find_entry(const sb_safetensors *st, const char *name)
{
	int lo = 0, hi = st->n - 1;
	while (lo <= hi) {
		const int mid = (lo + hi) / 2;
		const st_entry *e = &st->e[st->sorted[mid]];
		const int c = strcmp(name, e->name);
		if (!c)
			return e;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

const sb_st_tensor *sb_safetensors_find(const sb_safetensors *st, const char *name)
{
	const st_entry *e = find_entry(st, name);
	return e ? &e->t : NULL;
}

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t n)
{
	size_t at = (size_t)snprintf(buf, n, "[");
	for (int d = 0; d < ndim && at < n; d++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
}

sb_status sb_safetensors_read_f32(const sb_safetensors *st, const char *name,
                                  const int64_t *shape, int ndim, float *dst,
                                  const char *what, const sb_logger *log)
{
	const char *pre = what ? what : "";
	const char *sep = what ? ": " : "";
	const st_entry *e = find_entry(st, name);
	if (!e) {
		char want[128] = "";
		if (shape)
			shape_str(shape, ndim, want, sizeof want);
		sb_log(log, SB_LOG_ERROR, "%s%s%s: tensor \"%s\" %s%s is missing", pre, sep, st->path,
		       name, shape ? "of shape " : "", want);
		return SB_ERR_MODEL;
	}
	if (shape) {
		int same = e->t.ndim == ndim;
		for (int d = 0; same && d < ndim; d++)
			same = e->t.shape[d] == shape[d];
		if (!same) {
			char want[128], got[128];
			shape_str(shape, ndim, want, sizeof want);
			shape_str(e->t.shape, e->t.ndim, got, sizeof got);
			sb_log(log, SB_LOG_ERROR, "%s%s%s: tensor \"%s\" has shape %s, expected %s", pre, sep,
			       st->path, name, got, want);
			return SB_ERR_MODEL;
		}
	}
	const unsigned char *p = st->data + e->begin;
	const int64_t n = e->t.numel;
	switch (e->t.dtype) {
	case SB_ST_F32:
		memcpy(dst, p, (size_t)n * sizeof(float));
		break;
	case SB_ST_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = sb_half_to_float((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		break;
	case SB_ST_BF16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = sb_bf16_to_float((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		break;
	default:
		sb_log(log, SB_LOG_ERROR, "%s%s%s: tensor \"%s\" is %s; only F32, F16 and BF16 can be "
		       "read", pre, sep, st->path, name, e->dtype_name);
		return SB_ERR_FORMAT;
	}
	return SB_OK;
}

sb_status sb_safetensors_write(const char *path, const sb_st_write_tensor *tensors, int n,
                               const char *const *meta, const sb_logger *log)
{
	json_t *root = json_object();
	uint64_t off = 0;
	for (int i = 0; root && i < n; i++) {
		json_t *shape = json_array();
		int64_t numel = 1;
		for (int d = 0; d < tensors[i].ndim; d++) {
			json_array_append_new(shape, json_integer(tensors[i].shape[d]));
			numel *= tensors[i].shape[d];
		}
		const uint64_t bytes = (uint64_t)numel * 4u;
		json_t *en = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape,
		                       "data_offsets", (json_int_t)off, (json_int_t)(off + bytes));
		if (!en || json_object_set_new(root, tensors[i].name, en) != 0) {
			json_decref(root);
			root = NULL;
		}
		off += bytes;
	}
	if (root && meta) {
		json_t *m = json_object();
		for (int i = 0; meta[i] && meta[i + 1]; i += 2)
			json_object_set_new(m, meta[i], json_string(meta[i + 1]));
		json_object_set_new(root, "__metadata__", m);
	}
	char *hdr = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	if (!hdr) {
		sb_log(log, SB_LOG_ERROR, "%s: out of memory building the header", path);
		return SB_ERR_NOMEM;
	}
	size_t hlen = strlen(hdr);
	const size_t padded = (hlen + 7) & ~(size_t)7; /* data aligned to 8 bytes */
	FILE *f = fopen(path, "wb");
	if (!f) {
		sb_log(log, SB_LOG_ERROR, "%s: cannot create: %s", path, strerror(errno));
		free(hdr);
		return SB_ERR_IO;
	}
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
	int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
	for (size_t i = hlen; ok && i < padded; i++)
		ok = fputc(' ', f) != EOF;
	for (int i = 0; ok && i < n; i++) {
		size_t numel = 1;
		for (int d = 0; d < tensors[i].ndim; d++)
			numel *= (size_t)tensors[i].shape[d];
		ok = fwrite(tensors[i].data, sizeof(float), numel, f) == numel;
	}
	free(hdr);
	if (fclose(f) != 0)
		ok = 0;
	if (!ok) {
		sb_log(log, SB_LOG_ERROR, "%s: write failed: %s", path, strerror(errno));
		return errno == ENOSPC ? SB_ERR_NOSPACE : SB_ERR_IO;
	}
	return SB_OK;
}
