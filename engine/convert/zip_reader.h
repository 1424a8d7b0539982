/* A read-only zip reader for the archives torch.save writes: the file is mapped, the central
 * directory (and its zip64 records) is checked against the file's size before any entry is
 * trusted, stored entries are read in place and deflated ones are inflated with zlib. Every
 * entry's CRC-32 is checked when it is first read.
 *
 * Threads: one sbc_zip belongs to one thread at a time. */
#ifndef SBC_ZIP_READER_H
#define SBC_ZIP_READER_H

#include "sb_common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sbc_zip sbc_zip;

typedef struct {
	const char *name;      /* NUL-terminated copy of the entry's name */
	uint64_t size;         /* uncompressed bytes */
	uint64_t comp_size;    /* bytes in the archive */
	uint64_t data_offset;  /* where the (compressed) bytes start in the file */
	uint32_t crc;
	uint16_t method;       /* 0 stored, 8 deflate */
} sbc_zip_entry;

/* Open and check a zip file. On failure err holds one line naming the problem (not the path:
 * the caller adds it). SB_ERR_FORMAT: not a zip, or a malformed one; SB_ERR_IO: unreadable. */
sb_status sbc_zip_open(const char *path, sbc_zip **out, char *err, size_t errlen);
void sbc_zip_close(sbc_zip *z);


size_t sbc_zip_count(const sbc_zip *z);
const sbc_zip_entry *sbc_zip_entry_at(const sbc_zip *z, size_t i);
/* The entry with exactly this name, or NULL. */
const sbc_zip_entry *sbc_zip_find(const sbc_zip *z, const char *name);

/* An entry's bytes, valid until sbc_zip_close: stored entries point into the mapping, deflated
 * ones into a buffer the archive keeps. The CRC is checked on the first read. */
sb_status sbc_zip_data(sbc_zip *z, const sbc_zip_entry *e, const uint8_t **data, char *err,
                       size_t errlen);

#endif
