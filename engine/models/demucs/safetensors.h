/* A checked reader for safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
 * little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
 * an optional "__metadata__" object of strings, then the raw little-endian data.
 *
 * Every number in the header is checked against the file before a byte of data is trusted:
 * header length within the file, each tensor's range inside the data area, its size equal to
 * the element count times the dtype's width, ranges that do not overlap. A bad file gets one
 * error through the caller's logger naming the file and the tensor.
 *
 * Threads: an opened file is read-only; several threads may read tensors from it at once.
 */
#ifndef SB_SAFETENSORS_H
#define SB_SAFETENSORS_H

#include "sb_common.h"

#include <stdint.h>

#define SB_ST_MAX_DIMS 8

typedef struct sb_safetensors sb_safetensors;

typedef enum {
	SB_ST_F32 = 0,
	SB_ST_F16,
	SB_ST_BF16,
	SB_ST_OTHER /* a dtype the file may hold but this engine does not read as float */
} sb_st_dtype;

typedef struct {
	const char *name;
	sb_st_dtype dtype;
	const char *dtype_name; /* as written in the file: "F32", "I64", ... */
	int ndim;
	int64_t shape[SB_ST_MAX_DIMS];
	int64_t numel;
} sb_st_tensor;

/* Open and check 'path'. SB_ERR_IO when it cannot be read, SB_ERR_FORMAT when it is not a
 * well-formed safetensors file (logged, naming the file and the offending tensor). */
sb_status sb_safetensors_open(const char *path, const sb_logger *log, sb_safetensors **out);
void sb_safetensors_close(sb_safetensors *st);

const char *sb_safetensors_path(const sb_safetensors *st);
/* A "__metadata__" string, or NULL when the key is absent. */
const char *sb_safetensors_meta(const sb_safetensors *st, const char *key);
int sb_safetensors_count(const sb_safetensors *st);
/* Tensor i in file order (0 <= i < count); NULL when out of range. */
const sb_st_tensor *sb_safetensors_at(const sb_safetensors *st, int i);
/* The tensor called 'name', or NULL. */
const sb_st_tensor *sb_safetensors_find(const sb_safetensors *st, const char *name);

/* Convert tensor 'name' to F32 into dst (numel floats). When 'shape' is not NULL the tensor
 * must have exactly that shape (ndim dims): SB_ERR_MODEL otherwise, logged with the expected
 * and the found shape. SB_ERR_MODEL when it is missing, SB_ERR_FORMAT when its dtype is not
 * F32, F16 or BF16. 'what' prefixes the log message (the model's name), may be NULL. */
sb_status sb_safetensors_read_f32(const sb_safetensors *st, const char *name,
                                  const int64_t *shape, int ndim, float *dst,
                                  const char *what, const sb_logger *log);

/* IEEE half and bfloat16 to float, exact (subnormals, infinities and NaN included). */
float sb_half_to_float(uint16_t h);
float sb_bf16_to_float(uint16_t h);
/* Float to IEEE half, round to nearest even (for writing test files). */
uint16_t sb_float_to_half(float f);

/* Write a safetensors file of F32 tensors (tests and benches build model files with it).
 * meta: NULL-terminated key, value, key, value... list, may be NULL. */
typedef struct {
	const char *name;
	int ndim;
	int64_t shape[SB_ST_MAX_DIMS];
	const float *data;
} sb_st_write_tensor;
sb_status sb_safetensors_write(const char *path, const sb_st_write_tensor *tensors, int n,
                               const char *const *meta, const sb_logger *log);

#endif
