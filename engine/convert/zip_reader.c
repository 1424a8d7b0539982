/* Zip reading as PKWARE's APPNOTE.TXT (6.3.x) describes it, limited to what torch.save and
 * ordinary zip tools write: one disk, no encryption, stored or deflated entries, zip64 sizes
 * and offsets. torch's writer (miniz) sets the data-descriptor flag and leaves the sizes in the
 * local headers zero, so sizes come from the central directory only; the local header is read
 * just for the length of its name and extra field. */
#include "convert/zip_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_EOCD64_LOC 0x07064b50u
/* A deflated entry is inflated into memory; nothing in a checkpoint comes near this. */
#define MAX_INFLATED ((uint64_t)1 << 30)

struct sbc_zip {
	const uint8_t *map;
	size_t len;
	sbc_zip_entry *entries;
	size_t n;
	size_t *by_name;      /* entry indices sorted by name */
	uint8_t **inflated;   /* per entry: inflated bytes, or NULL */
	unsigned char *crc_ok;
};

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* off + need <= len, without overflow */
static int fits(uint64_t off, uint64_t need, uint64_t len)
{
	return off <= len && need <= len - off;
}

static int cmp_names(const void *a, const void *b, void *ctx)
{
	const sbc_zip *z = ctx;
	return strcmp(z->entries[*(const size_t *)a].name, z->entries[*(const size_t *)b].name);
}

/* The end-of-central-directory record: searched backwards over the last 64 KiB + 22 bytes (the
 * most a comment can add), and accepted only where its comment ends exactly at the file end. */
static sb_status find_eocd(const sbc_zip *z, uint64_t *eocd, char *err, size_t errlen)
{
	if (z->len < 22) {
		sb_errorf(err, errlen, "too short for a zip archive (%zu bytes)", z->len);
		return SB_ERR_FORMAT;
	}
	size_t lo = z->len > 22 + 65535 ? z->len - 22 - 65535 : 0;
	for (size_t at = z->len - 22 + 1; at-- > lo;) {
		if (rd32(z->map + at) == SIG_EOCD && at + 22 + rd16(z->map + at + 20) == z->len) {
			*eocd = at;
			return SB_OK;
		}
	}
	sb_errorf(err, errlen, "no zip end-of-central-directory record (truncated?)");
	return SB_ERR_FORMAT;
}

static sb_status read_directory(sbc_zip *z, char *err, size_t errlen)
{
	uint64_t eocd;
	sb_status st = find_eocd(z, &eocd, err, errlen);
	if (st != SB_OK)
		return st;
	const uint8_t *e = z->map + eocd;
	uint64_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
	uint64_t n_disk = rd16(e + 8), n_total = rd16(e + 10);
	uint64_t cd_size = rd32(e + 12), cd_off = rd32(e + 16);
	/* zip64: the locator sits just before the EOCD and points at the zip64 record, whose
	 * values replace the 16- and 32-bit ones (torch writes it even for small files). */
	if (eocd >= 20 && rd32(z->map + eocd - 20) == SIG_EOCD64_LOC) {
		uint64_t rec = rd64(z->map + eocd - 20 + 8);
		if (!fits(rec, 56, eocd - 20) || rd32(z->map + rec) != SIG_EOCD64) {
			sb_errorf(err, errlen, "corrupt zip64 end-of-central-directory record");
			return SB_ERR_FORMAT;
		}
		const uint8_t *r = z->map + rec;
		disk = rd32(r + 16);
		cd_disk = rd32(r + 20);
		n_disk = rd64(r + 24);
		n_total = rd64(r + 32);
		cd_size = rd64(r + 40);
		cd_off = rd64(r + 48);
		eocd = rec; /* the central directory ends before the zip64 record */
	}
	if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
		sb_errorf(err, errlen, "multi-disk zip archives are not supported");
		return SB_ERR_FORMAT;
	}
	if (!fits(cd_off, cd_size, eocd) || n_total > cd_size / 46) {
		sb_errorf(err, errlen,
		     "corrupt zip central directory (%llu entries, %llu bytes at offset %llu, "
		     "file is %zu bytes; truncated?)",
		     (unsigned long long)n_total, (unsigned long long)cd_size,
		     (unsigned long long)cd_off, z->len);
		return SB_ERR_FORMAT;
	}
	if (n_total == 0) {
		sb_errorf(err, errlen, "empty zip archive");
		return SB_ERR_FORMAT;
	}
	z->n = (size_t)n_total;
	z->entries = calloc(z->n, sizeof *z->entries);
	z->by_name = calloc(z->n, sizeof *z->by_name);
	z->inflated = calloc(z->n, sizeof *z->inflated);
	z->crc_ok = calloc(z->n, 1);
	if (!z->entries || !z->by_name || !z->inflated || !z->crc_ok) {
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	uint64_t at = cd_off, cd_end = cd_off + cd_size;
	for (size_t i = 0; i < z->n; i++) {
		if (!fits(at, 46, cd_end) || rd32(z->map + at) != SIG_CENTRAL) {
			sb_errorf(err, errlen, "corrupt zip central directory at entry %zu", i);
			return SB_ERR_FORMAT;
		}
		const uint8_t *c = z->map + at;
		uint16_t flags = rd16(c + 8), method = rd16(c + 10);
		uint64_t comp = rd32(c + 20), size = rd32(c + 24), local = rd32(c + 42);
		size_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
		if (!fits(at + 46, (uint64_t)name_len + extra_len + comment_len, cd_end) || !name_len) {
			sb_errorf(err, errlen, "corrupt zip central directory at entry %zu", i);
			return SB_ERR_FORMAT;
		}
		const uint8_t *name = c + 46, *extra = name + name_len;
		/* zip64 extended information: the fields that are all ones, in this order */
		for (size_t x = 0; x + 4 <= extra_len;) {
			uint16_t id = rd16(extra + x), sz = rd16(extra + x + 2);
			if (x + 4 + sz > extra_len)
				break;
			if (id == 0x0001) {
				const uint8_t *f = extra + x + 4, *f_end = f + sz;
				if (size == 0xffffffffu && f + 8 <= f_end)
					size = rd64(f), f += 8;
				if (comp == 0xffffffffu && f + 8 <= f_end)
					comp = rd64(f), f += 8;
				if (local == 0xffffffffu && f + 8 <= f_end)
					local = rd64(f), f += 8;
			}
			x += 4 + (size_t)sz;
		}
		char *copy = malloc(name_len + 1);
		if (!copy) {
			sb_errorf(err, errlen, "out of memory");
			return SB_ERR_NOMEM;
		}
		memcpy(copy, name, name_len);
		copy[name_len] = '\0';
		sbc_zip_entry *en = &z->entries[i];
		en->name = copy;
		z->by_name[i] = i;
		if (memchr(name, '\0', name_len)) {
			sb_errorf(err, errlen, "zip entry %zu has a NUL in its name", i);
			return SB_ERR_FORMAT;
		}
		if (flags & 0x41) {
			sb_errorf(err, errlen, "zip entry '%s' is encrypted", copy);
			return SB_ERR_FORMAT;
		}
		if (method != 0 && method != 8) {
			sb_errorf(err, errlen, "zip entry '%s' uses compression method %u (only stored and "
			     "deflate are supported)", copy, method);
			return SB_ERR_FORMAT;
		}
		if (method == 0 && comp != size) {
			sb_errorf(err, errlen, "zip entry '%s': stored with %llu bytes but sized %llu", copy,
			     (unsigned long long)comp, (unsigned long long)size);
			return SB_ERR_FORMAT;
		}
		/* the local header and the data must lie before the central directory */
		if (!fits(local, 30, cd_off) || rd32(z->map + local) != SIG_LOCAL) {
			sb_errorf(err, errlen, "zip entry '%s': bad local header offset %llu", copy,
			     (unsigned long long)local);
			return SB_ERR_FORMAT;
		}
		const uint8_t *lh = z->map + local;
		uint64_t data = local + 30 + rd16(lh + 26) + rd16(lh + 28);
		if (rd16(lh + 26) != name_len || memcmp(lh + 30, name, name_len) != 0 ||
		    !fits(data, comp, cd_off)) {
			sb_errorf(err, errlen, "zip entry '%s' runs past the end of the data (%llu bytes at "
			     "offset %llu; truncated or corrupt)", copy, (unsigned long long)comp,
			     (unsigned long long)data);
			return SB_ERR_FORMAT;
		}
		en->size = size;
		en->comp_size = comp;
		en->data_offset = data;
		en->crc = rd32(c + 16);
		en->method = method;
		at += 46 + (uint64_t)name_len + extra_len + comment_len;
	}
	qsort_r(z->by_name, z->n, sizeof *z->by_name, cmp_names, z);
	for (size_t i = 1; i < z->n; i++)
		if (!strcmp(z->entries[z->by_name[i]].name, z->entries[z->by_name[i - 1]].name)) {
			sb_errorf(err, errlen, "zip entry '%s' appears twice", z->entries[z->by_name[i]].name);
			return SB_ERR_FORMAT;
		}
	return SB_OK;
}

sb_status sbc_zip_open(const char *path, sbc_zip **out, char *err, size_t errlen)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		sb_errorf(err, errlen, "cannot open: %s", strerror(errno));
		return SB_ERR_IO;
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		sb_errorf(err, errlen, "not a regular file");
		close(fd);
		return SB_ERR_IO;
	}
	if (sb.st_size == 0) {
		sb_errorf(err, errlen, "empty file");
		close(fd);
		return SB_ERR_FORMAT;
	}
	if ((uint64_t)sb.st_size > SIZE_MAX) {
		sb_errorf(err, errlen, "file too large");
		close(fd);
		return SB_ERR_IO;
	}
	sbc_zip *z = calloc(1, sizeof *z);
	if (!z) {
		close(fd);
		sb_errorf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	z->len = (size_t)sb.st_size;
	void *m = mmap(NULL, z->len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		sb_errorf(err, errlen, "cannot map: %s", strerror(errno));
		free(z);
		return SB_ERR_IO;
	}
	z->map = m;
	sb_status st = read_directory(z, err, errlen);
	if (st != SB_OK) {
		sbc_zip_close(z);
		return st;
	}
	*out = z;
	return SB_OK;
}

void sbc_zip_close(sbc_zip *z)
{
	if (!z)
		return;
	for (size_t i = 0; z->entries && i < z->n; i++) {
		free((char *)z->entries[i].name);
		if (z->inflated)
			free(z->inflated[i]);
	}
	free(z->entries);
	free(z->by_name);
	free(z->inflated);
	free(z->crc_ok);
	if (z->map)
		munmap((void *)z->map, z->len);
	free(z);
}

size_t sbc_zip_count(const sbc_zip *z)
{
	return z->n;
}

const sbc_zip_entry *sbc_zip_entry_at(const sbc_zip *z, size_t i)
{
	return i < z->n ? &z->entries[i] : NULL;
}

const sbc_zip_entry *sbc_zip_find(const sbc_zip *z, const char *name)
{
	size_t lo = 0, hi = z->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, z->entries[z->by_name[mid]].name);
		if (!c)
			return &z->entries[z->by_name[mid]];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static sb_status inflate_entry(const sbc_zip *z, const sbc_zip_entry *e, uint8_t **out, char *err,
                               size_t errlen)
{
	if (e->size > MAX_INFLATED) {
		sb_errorf(err, errlen, "zip entry '%s' inflates to %llu bytes (more than this reader takes)",
		     e->name, (unsigned long long)e->size);
		return SB_ERR_FORMAT;
	}
	/* deflate cannot expand a byte to more than 1032 (258-byte matches at one bit or so
	 * each): a directory that claims more is damaged or hostile, and its size must not be
	 * trusted with an allocation (found by tests/fuzz/fuzz_zip) */
	if (e->size > e->comp_size * 1032u + 1024u) {
		sb_errorf(err, errlen, "zip entry '%s' claims %llu bytes from %llu compressed, more than "
		     "deflate can give (a damaged archive)", e->name, (unsigned long long)e->size,
		     (unsigned long long)e->comp_size);
		return SB_ERR_FORMAT;
	}
	uint8_t *buf = malloc(e->size ? (size_t)e->size : 1);
	if (!buf) {
		sb_errorf(err, errlen, "out of memory inflating '%s'", e->name);
		return SB_ERR_NOMEM;
	}
	z_stream s;
	memset(&s, 0, sizeof s);
	if (inflateInit2(&s, -MAX_WBITS) != Z_OK) {
		free(buf);
		sb_errorf(err, errlen, "zlib: cannot start inflating");
		return SB_ERR_NOMEM;
	}
	/* zlib counts in uInt: feed and drain in pieces so that entries over 4 GiB would work */
	const uint8_t *in = z->map + e->data_offset;
	uint64_t in_left = e->comp_size, out_done = 0;
	int rc;
	for (;;) {
		if (s.avail_in == 0 && in_left) {
			s.next_in = (Bytef *)in;
			s.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
			in += s.avail_in;
			in_left -= s.avail_in;
		}
		uint64_t room = e->size - out_done;
		s.next_out = buf + out_done;
		s.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
		uInt before = s.avail_out;
		rc = inflate(&s, Z_NO_FLUSH);
		out_done += before - s.avail_out;
		if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR))
			break;
		/* no progress is possible: the input ran out (truncated) or the output is full
		 * while the stream goes on (the directory's size is wrong) */
		if (rc == Z_BUF_ERROR && ((!s.avail_in && !in_left) || out_done == e->size))
			break;
	}
	inflateEnd(&s);
	if (rc != Z_STREAM_END || out_done != e->size) {
		free(buf);
		sb_errorf(err, errlen, "zip entry '%s': corrupt deflate data%s", e->name,
		     rc == Z_STREAM_END ? " (wrong size)" : "");
		return SB_ERR_FORMAT;
	}
	*out = buf;
	return SB_OK;
}

sb_status sbc_zip_data(sbc_zip *z, const sbc_zip_entry *e, const uint8_t **data, char *err,
                       size_t errlen)
{
	size_t i = (size_t)(e - z->entries);
	if (e < z->entries || i >= z->n) {
		sb_errorf(err, errlen, "internal: entry not from this archive");
		return SB_ERR_INVALID;
	}
	const uint8_t *p;
	if (e->method == 8) {
		if (!z->inflated[i]) {
			sb_status st = inflate_entry(z, e, &z->inflated[i], err, errlen);
			if (st != SB_OK)
				return st;
		}
		p = z->inflated[i];
	} else {
		p = z->map + e->data_offset;
	}
	if (!z->crc_ok[i]) {
		uLong crc = crc32(0L, Z_NULL, 0);
		const uint8_t *q = p;
		for (uint64_t left = e->size; left;) {
			uInt piece = left > (1u << 30) ? (1u << 30) : (uInt)left;
			crc = crc32(crc, q, piece);
			q += piece;
			left -= piece;
		}
		if ((uint32_t)crc != e->crc) {
			sb_errorf(err, errlen, "zip entry '%s' is corrupt (CRC-32 %08x, the directory says %08x)",
			     e->name, (unsigned)crc, (unsigned)e->crc);
			return SB_ERR_FORMAT;
		}
		z->crc_ok[i] = 1;
	}
	*data = p;
	return SB_OK;
}
