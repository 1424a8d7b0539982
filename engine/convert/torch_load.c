/* torch.save's zip format as torch/serialization.py (`_save`, `_load`) and torch/_utils.py
 * (`_rebuild_tensor_v2`, `_rebuild_parameter`) write and read it. */
#include "convert/torch_load.h"

#include "convert/zip_reader.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A strided view is gathered into a copy; a view far larger than its storage (stride 0) must
 * not make us allocate without bound. */
#define MAX_COPY ((size_t)1 << 30)

struct sbc_torch {
	sbc_zip *zip;
	sbc_pickle *pickle;
	char prefix[256]; /* "archive/" */
};

/* Why a file that is no zip is no checkpoint: its first bytes say what it is instead. */
static void explain_not_zip(const char *path, const char *zip_err, char *err, size_t errlen)
{
	uint8_t head[4] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, head, sizeof head) : -1;
	if (fd >= 0)
		close(fd);
	if (got == 0)
		sb_errorf(err, errlen, "an empty file, not a PyTorch checkpoint");
	else if (got >= 2 && head[0] == 0x80 && head[1] <= 5)
		sb_errorf(err, errlen, "a PyTorch checkpoint in the legacy format of torch < 1.6, which is not "
		     "supported (load it with torch and save it again with torch.save)");
	else if (got == 4 && !memcmp(head, "PK\3\4", 4))
		sb_errorf(err, errlen, "a damaged zip archive: %s", zip_err);
	else
		sb_errorf(err, errlen, "not a PyTorch checkpoint (not a zip archive)");
}

sb_status sbc_torch_open(const char *path, sbc_torch **out, const sbc_pk **root, char *err,
                         size_t errlen)
{
	*out = NULL;
	*root = NULL;
	char zerr[256];
	sbc_zip *z = NULL;
	sb_status st = sbc_zip_open(path, &z, zerr, sizeof zerr);
	if (st != SB_OK) {
		if (st == SB_ERR_FORMAT)
			explain_not_zip(path, zerr, err, errlen);
		else
			sb_errorf(err, errlen, "%s", zerr);
		return st;
	}
	sbc_torch *t = calloc(1, sizeof *t);
	if (!t) {
		sbc_zip_close(z);
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	t->zip = z;
	/* the record folder is the one that holds data.pkl (torch names it after the file, or
	 * "archive" when saving to a buffer as demucs does) */
	const sbc_zip_entry *pkl = NULL;
	for (size_t i = 0; i < sbc_zip_count(z); i++) {
		const char *name = sbc_zip_entry_at(z, i)->name;
		const char *slash = strchr(name, '/');
		if (slash && slash != name && !strcmp(slash, "/data.pkl")) {
			if (pkl) {
				sb_errorf(err, errlen, "not a PyTorch checkpoint (two data.pkl records)");
				sbc_torch_close(t);
				return SB_ERR_FORMAT;
			}
			pkl = sbc_zip_entry_at(z, i);
		}
	}
	if (!pkl || strlen(pkl->name) - strlen("data.pkl") >= sizeof t->prefix) {
		sb_errorf(err, errlen, "a zip archive, but not a PyTorch checkpoint (no <folder>/data.pkl)");
		sbc_torch_close(t);
		return SB_ERR_FORMAT;
	}
	snprintf(t->prefix, sizeof t->prefix, "%.*s", (int)(strlen(pkl->name) - strlen("data.pkl")),
	         pkl->name);
	char name[512];
	snprintf(name, sizeof name, "%sbyteorder", t->prefix);
	const sbc_zip_entry *bo = sbc_zip_find(z, name);
	if (bo) {
		const uint8_t *b;
		if ((st = sbc_zip_data(z, bo, &b, err, errlen)) != SB_OK) {
			sbc_torch_close(t);
			return st;
		}
		if (bo->size != 6 || memcmp(b, "little", 6)) {
			sb_errorf(err, errlen, "a checkpoint saved on a big-endian machine, which is not supported");
			sbc_torch_close(t);
			return SB_ERR_UNSUPPORTED;
		}
	}
	const uint8_t *data;
	if ((st = sbc_zip_data(z, pkl, &data, err, errlen)) != SB_OK) {
		sbc_torch_close(t);
		return st;
	}
	if (pkl->size > SIZE_MAX) {
		sb_errorf(err, errlen, "data.pkl too large");
		sbc_torch_close(t);
		return SB_ERR_FORMAT;
	}
	char perr[256];
	if ((st = sbc_pickle_load(data, (size_t)pkl->size, &t->pickle, root, perr, sizeof perr)) !=
	    SB_OK) {
		sb_errorf(err, errlen, "%s: %s", pkl->name, perr);
		sbc_torch_close(t);
		return st;
	}
	*out = t;
	return SB_OK;
}

void sbc_torch_close(sbc_torch *t)
{
	if (!t)
		return;
	sbc_pickle_free(t->pickle);
	sbc_zip_close(t->zip);
	free(t);
}

/* The argument tuple of a _rebuild_tensor call, unwrapping the Parameter and subclass
 * wrappers around it (a few levels at most). */
static const sbc_pk *rebuild_args(const sbc_pk *v)
{
	for (int depth = 0; depth < 4 && v && v->type == SBC_PK_CALL; depth++) {
		const sbc_pk *fn = v->a, *args = v->b;
		if (sbc_pk_is_global(fn, "torch._utils", "_rebuild_tensor_v2") ||
		    sbc_pk_is_global(fn, "torch._utils", "_rebuild_tensor"))
			return args->n >= 4 ? args : NULL;
		if (sbc_pk_is_global(fn, "torch._utils", "_rebuild_parameter") ||
		    sbc_pk_is_global(fn, "torch._utils", "_rebuild_parameter_with_state")) {
			v = args->n >= 1 ? args->items[0] : NULL;
			continue;
		}
		/* torch._tensor._rebuild_from_type_v2(func, new_type, args, state) */
		if (sbc_pk_is_global(fn, "torch._tensor", "_rebuild_from_type_v2") && args->n >= 3 &&
		    (sbc_pk_is_global(args->items[0], "torch._utils", "_rebuild_tensor_v2") ||
		     sbc_pk_is_global(args->items[0], "torch._utils", "_rebuild_tensor")) &&
		    args->items[2]->type == SBC_PK_TUPLE)
			return args->items[2]->n >= 4 ? args->items[2] : NULL;
		return NULL;
	}
	return NULL;
}

int sbc_torch_is_tensor(const sbc_pk *v)
{
	return rebuild_args(v) != NULL;
}

static int storage_dtype(const sbc_pk *g, sbc_dtype *dt)
{
	static const struct {
		const char *name;
		sbc_dtype dt;
	} map[] = {
		{"DoubleStorage", SBC_DT_F64}, {"FloatStorage", SBC_DT_F32},
		{"HalfStorage", SBC_DT_F16},   {"BFloat16Storage", SBC_DT_BF16},
		{"LongStorage", SBC_DT_I64},   {"IntStorage", SBC_DT_I32},
		{"ShortStorage", SBC_DT_I16},  {"CharStorage", SBC_DT_I8},
		{"ByteStorage", SBC_DT_U8},    {"BoolStorage", SBC_DT_BOOL},
	};
	for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
		if (sbc_pk_is_global(g, "torch", map[k].name)) {
			*dt = map[k].dt;
			return 1;
		}
	return 0;
}

static int int_tuple(const sbc_pk *v, int64_t *out, int max, int *n)
{
	if (!v || (v->type != SBC_PK_TUPLE && v->type != SBC_PK_LIST) || v->n > (size_t)max)
		return 0;
	for (size_t k = 0; k < v->n; k++) {
		if (v->items[k]->type != SBC_PK_INT || v->items[k]->i < 0)
			return 0;
		out[k] = v->items[k]->i;
	}
	*n = (int)v->n;
	return 1;
}

/* a * b, failing beyond 2^62 */
static int mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	if (b && a > ((uint64_t)1 << 62) / b)
		return 0;
	*r = a * b;
	return 1;
}

sb_status sbc_torch_tensor(sbc_torch *t, const sbc_pk *v, sbc_tensor *out, char *err,
                           size_t errlen)
{
	memset(out, 0, sizeof *out);
	const sbc_pk *args = rebuild_args(v);
	char what[160];
	if (!args) {
		sbc_pk_describe(v, what, sizeof what);
		sb_errorf(err, errlen, "not a tensor (%s)", what);
		return SB_ERR_FORMAT;
	}
	const sbc_pk *pid = args->items[0], *off = args->items[1];
	const sbc_pk *id = pid->type == SBC_PK_PERSID ? pid->a : NULL;
	if (!id || id->type != SBC_PK_TUPLE || id->n != 5 || !sbc_pk_is_str(id->items[0], "storage") ||
	    id->items[2]->type != SBC_PK_STR || id->items[4]->type != SBC_PK_INT ||
	    id->items[4]->i < 0) {
		sb_errorf(err, errlen, "its storage is not a persistent ('storage', type, key, location, "
		     "numel) record");
		return SB_ERR_FORMAT;
	}
	sbc_dtype dt;
	if (!storage_dtype(id->items[1], &dt)) {
		sbc_pk_describe(id->items[1], what, sizeof what);
		sb_errorf(err, errlen, "storage type %s is not supported", what);
		return SB_ERR_UNSUPPORTED;
	}
	const sbc_pk *key = id->items[2];
	size_t esize = sbc_dtype_size(dt);
	int64_t size[SBC_MAX_DIMS], stride[SBC_MAX_DIMS];
	int nd = 0, nstride = 0;
	if (off->type != SBC_PK_INT || off->i < 0 || !int_tuple(args->items[2], size, SBC_MAX_DIMS, &nd) ||
	    !int_tuple(args->items[3], stride, SBC_MAX_DIMS, &nstride) || nd != nstride) {
		sb_errorf(err, errlen, "bad offset, size or stride (or more than %d dimensions)", SBC_MAX_DIMS);
		return SB_ERR_FORMAT;
	}
	char name[600];
	snprintf(name, sizeof name, "%sdata/%.*s", t->prefix, (int)(key->len > 256 ? 256 : key->len),
	         key->s);
	const sbc_zip_entry *e = key->len <= 256 && !memchr(key->s, '\0', key->len)
	                       ? sbc_zip_find(t->zip, name) : NULL;
	if (!e) {
		sb_errorf(err, errlen, "its storage record '%s' is missing from the archive", name);
		return SB_ERR_FORMAT;
	}
	uint64_t storage_bytes;
	if (!mul_ok((uint64_t)id->items[4]->i, esize, &storage_bytes) || storage_bytes != e->size) {
		sb_errorf(err, errlen, "storage '%s' holds %llu bytes, but its record says %lld elements of %zu",
		     name, (unsigned long long)e->size, (long long)id->items[4]->i, esize);
		return SB_ERR_FORMAT;
	}
	/* numel and the furthest element the view reaches; both must stay inside the storage */
	uint64_t numel = 1, last = (uint64_t)off->i;
	int contiguous = 1;
	uint64_t expect = 1;
	for (int k = nd - 1; k >= 0; k--) {
		if (!mul_ok(numel, (uint64_t)size[k], &numel)) {
			sb_errorf(err, errlen, "size too large");
			return SB_ERR_FORMAT;
		}
		if (size[k] != 1 && (uint64_t)stride[k] != expect)
			contiguous = 0;
		if (!mul_ok(expect, (uint64_t)size[k], &expect))
			expect = (uint64_t)1 << 62;
	}
	if (numel) {
		for (int k = 0; k < nd; k++) {
			uint64_t reach;
			if (!mul_ok((uint64_t)(size[k] - 1), (uint64_t)stride[k], &reach) ||
			    reach > ((uint64_t)1 << 62) - last) {
				sb_errorf(err, errlen, "stride too large");
				return SB_ERR_FORMAT;
			}
			last += reach;
		}
		if (last >= (uint64_t)id->items[4]->i) {
			sb_errorf(err, errlen, "the view (offset %lld) reaches element %llu of a storage of %lld",
			     (long long)off->i, (unsigned long long)last, (long long)id->items[4]->i);
			return SB_ERR_FORMAT;
		}
	}
	uint64_t nbytes;
	if (!mul_ok(numel, esize, &nbytes) || nbytes > SIZE_MAX) {
		sb_errorf(err, errlen, "size too large");
		return SB_ERR_FORMAT;
	}
	const uint8_t *base = NULL;
	sb_status st = sbc_zip_data(t->zip, e, &base, err, errlen);
	if (st != SB_OK)
		return st;
	out->dtype = dt;
	out->ndim = nd;
	memcpy(out->shape, size, sizeof(int64_t) * (size_t)nd);
	out->nbytes = (size_t)nbytes;
	if (!numel) {
		out->data = base;
		return SB_OK;
	}
	if (contiguous) {
		out->data = base + (size_t)off->i * esize;
		return SB_OK;
	}
	if (nbytes > MAX_COPY) {
		sb_errorf(err, errlen, "a strided view of %llu bytes is too large to copy",
		     (unsigned long long)nbytes);
		return SB_ERR_UNSUPPORTED;
	}
	uint8_t *copy = malloc((size_t)nbytes);
	if (!copy) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	/* walk the view in row-major order with an odometer over the dimensions */
	int64_t idx[SBC_MAX_DIMS] = {0};
	uint64_t src = (uint64_t)off->i;
	for (uint64_t n = 0; n < numel; n++) {
		memcpy(copy + n * esize, base + src * esize, esize);
		for (int k = nd - 1; k >= 0; k--) {
			if (++idx[k] < size[k]) {
				src += (uint64_t)stride[k];
				break;
			}
			src -= (uint64_t)stride[k] * (uint64_t)(size[k] - 1);
			idx[k] = 0;
		}
	}
	out->owned = copy;
	out->data = copy;
	return SB_OK;
}
