/* Writes a safetensors file (https://github.com/huggingface/safetensors, "Format"): an 8-byte
 * little-endian header length, a JSON header ({name: {dtype, shape, data_offsets}} and a
 * `__metadata__` object of strings), padded with spaces to a multiple of 8, then the tensors'
 * bytes back to back. Tensors are laid out by element size, largest first, so that every
 * tensor starts at a multiple of its element size.
 *
 * The file appears whole or not at all: it is written to a temporary name beside the target,
 * synced, and then linked into place (refusing an existing file) or renamed over it. */
#ifndef SBC_SAFETENSORS_WRITER_H
#define SBC_SAFETENSORS_WRITER_H

#include "sb_common.h"
#include "convert/tensor.h"

typedef struct sbc_st_writer sbc_st_writer;

sbc_st_writer *sbc_st_writer_new(void);
void sbc_st_writer_free(sbc_st_writer *w);

/* The tensor's bytes are not copied: they must stay valid until sbc_st_write returns.
 * SB_ERR_INVALID for a duplicate or reserved name (err says which). */
sb_status sbc_st_add(sbc_st_writer *w, const char *name, const sbc_tensor *t, char *err,
                     size_t errlen);
/* A metadata entry; a key set again replaces the value. */
sb_status sbc_st_set_metadata(sbc_st_writer *w, const char *key, const char *value);

size_t sbc_st_count(const sbc_st_writer *w);
uint64_t sbc_st_data_bytes(const sbc_st_writer *w);

/* SB_ERR_EXISTS when path exists and overwrite is 0; SB_ERR_NOSPACE, SB_ERR_IO. */
sb_status sbc_st_write(sbc_st_writer *w, const char *path, int overwrite, char *err,
                       size_t errlen);

#endif
