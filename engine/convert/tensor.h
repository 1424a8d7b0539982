/* A tensor as the converter carries it from a checkpoint to a safetensors file: a dtype that
 * both formats know, a shape, and the raw little-endian bytes (row-major, contiguous). */
#ifndef SBC_TENSOR_H
#define SBC_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef enum {
	SBC_DT_F64,
	SBC_DT_F32,
	SBC_DT_F16,
	SBC_DT_BF16,
	SBC_DT_I64,
	SBC_DT_I32,
	SBC_DT_I16,
	SBC_DT_I8,
	SBC_DT_U8,
	SBC_DT_BOOL
} sbc_dtype;

#define SBC_MAX_DIMS 8

typedef struct {
	sbc_dtype dtype;
	int ndim;
	int64_t shape[SBC_MAX_DIMS];
	const uint8_t *data; /* nbytes, valid while the checkpoint is open (or owned) */
	size_t nbytes;
	uint8_t *owned;      /* non-NULL when the bytes were copied (a strided view) */
} sbc_tensor;

/* The safetensors name of a dtype ("F16"). */
static inline const char *sbc_dtype_name(sbc_dtype d)
{
	static const char *const names[] = {"F64", "F32", "F16", "BF16", "I64",
	                                    "I32", "I16", "I8",  "U8",   "BOOL"};
	return names[d];
}

static inline size_t sbc_dtype_size(sbc_dtype d)
{
	static const unsigned char sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
	return sizes[d];
}

static inline void sbc_tensor_clear(sbc_tensor *t)
{
	free(t->owned);
	t->owned = NULL;
	t->data = NULL;
	t->nbytes = 0;
}

#endif
