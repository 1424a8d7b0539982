/* Reading a converted model's tensors into weight arrays (weights_load.h). */
#include "models/weights_load.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

float *sb_wload_own(sb_wload *l, size_t n)
{
	float *p = l->s == SB_OK ? sb_weights_new(l->w, n) : NULL;
	if (!p && l->s == SB_OK)
		l->s = SB_ERR_NOMEM;
	return p;
}

static sb_status read_into(sb_wload *l, const int64_t *shape, int ndim, float *dst)
{
	return sb_safetensors_read_f32(l->st, l->tn, shape, ndim, dst, l->name, l->log);
}

float *sb_wload_raw(sb_wload *l, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                    const char *fmt, ...)
{
	if (l->s != SB_OK)
		return NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->tn, sizeof l->tn, fmt, ap);
	va_end(ap);
	const int64_t shape[4] = {a, b, c, d};
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	float *p = malloc(sizeof(float) * (size_t)n);
	if (!p) {
		l->s = SB_ERR_NOMEM;
		return NULL;
	}
	l->s = read_into(l, shape, ndim, p);
	if (l->s != SB_OK) {
		free(p);
		return NULL;
	}
	return p;
}

float *sb_wload_vec(sb_wload *l, int64_t n, const char *fmt, ...)
{
	if (l->s != SB_OK)
		return NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->tn, sizeof l->tn, fmt, ap);
	va_end(ap);
	float *p = sb_wload_own(l, (size_t)n);
	const int64_t shape[1] = {n};
	if (p)
		l->s = read_into(l, shape, 1, p);
	return p;
}

sb_status sb_wload_open_config(const char *path, const char *name, const char *family,
                               const sb_logger *log, sb_safetensors **st, const char **yaml)
{
	*st = NULL;
	*yaml = NULL;
	sb_status s = sb_safetensors_open(path, log, st);
	if (s != SB_OK)
		return s;
	*yaml = sb_safetensors_meta(*st, "config");
	if (!*yaml) {
		sb_log(log, SB_LOG_ERROR, "%s: %s holds no %s configuration (metadata 'config'): "
		       "convert the checkpoint with stembridge-convert MODEL.ckpt --config MODEL.yaml",
		       name, path, family);
		sb_safetensors_close(*st);
		*st = NULL;
		return SB_ERR_MODEL;
	}
	return SB_OK;
}
