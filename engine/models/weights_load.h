/* Reading a converted model's tensors into the host arrays of its weights (models/resident.h),
 * each tensor's shape checked, the first failure kept so that a loader reads as straight-line
 * code (SCNet, MDX23C); the file and its configuration opened in one call (the RoFormers too). */
#ifndef SB_WEIGHTS_LOAD_H
#define SB_WEIGHTS_LOAD_H

#include "models/demucs/safetensors.h"
#include "models/resident.h"

typedef struct {
	const sb_safetensors *st;
	sb_weights *w;
	const char *name;       /* the model's, for messages */
	const sb_logger *log;
	sb_status s;            /* the first failure */
	char tn[160];
} sb_wload;

/* a new weight array of n floats, or NULL after the first failure */
float *sb_wload_own(sb_wload *l, size_t n);
/* the tensor named by fmt, of shape (a, b, c, d: its first ndim), as F32 in a new array the
 * caller frees (a tensor to lay out again), or NULL after the first failure */
float *sb_wload_raw(sb_wload *l, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                    const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* the tensor of n values named by fmt in a weight array of its own */
float *sb_wload_vec(sb_wload *l, int64_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The converted model file at path opened, and its configuration (the converter's metadata
 * 'config', a YAML text that lives as long as *st). A file without one is refused with a message
 * naming the family and how to convert it, and closed. name: the model's, for messages. */
sb_status sb_wload_open_config(const char *path, const char *name, const char *family,
                               const sb_logger *log, sb_safetensors **st, const char **yaml);

#endif
