/* HTDemucs (Hybrid Transformer Demucs, "Demucs v4"): one network and its forward pass over
 * segments, on any backend (htdemucs_forward.c, written once against backend/backend.h).
 *
 * Reference: S. Rouard, F. Massa, A. Defossez, "Hybrid Transformers for Music Source
 * Separation", ICASSP 2023; code: facebookresearch/demucs, demucs/htdemucs.py (HTDemucs),
 * hdemucs.py (HEncLayer, HDecLayer, pad1d), demucs.py (DConv), transformer.py
 * (CrossTransformerEncoder), spec.py. This is a re-implementation in C of the inference path
 * (eval mode, complex-as-channels, no Wiener filtering) for the settings the released models
 * use; the golden vectors in shared/golden/htdemucs pin it to the reference.
 *
 * Threads: a net is read-only once opened; it may be placed on several devices and run on
 * them from several threads at once, each placement from one thread.
 */
#ifndef SB_HTDEMUCS_H
#define SB_HTDEMUCS_H

#include "backend/backend.h"

#include <stdatomic.h>
#include "core/thread_pool.h"
#include "models/demucs/safetensors.h"

#define SB_HTDEMUCS_MAX_SOURCES 8

/* The constructor settings read from a file's metadata. Only the ones the released models
 * change are free; the others must keep HTDemucs.__init__'s defaults (checked on open). */
typedef struct {
	int n_sources;
	char sources[SB_HTDEMUCS_MAX_SOURCES][32]; /* the file's order */
	int audio_channels;                        /* 2 */
	int channels;                              /* 48: first layer's width, doubled per layer */
	int bottom_channels;                       /* 0 or the transformer's width (512) */
	int t_layers, t_heads;                     /* 5, 8 */
	int dconv_mode;                            /* 1 encoder, 2 decoder, 3 both */
	int samplerate;                            /* 44100 */
	int segment_num, segment_den;              /* segment in seconds = num/den (39/5) */
	int64_t segment_length;                    /* int(segment * samplerate) = 343980 */
} sb_htdemucs_config;

/* Read the settings of the model whose metadata keys start with 'prefix' ("" or "0.").
 * SB_ERR_MODEL (logged, naming the key) for a missing or unsupported setting. */
sb_status sb_htdemucs_config_read(const sb_safetensors *st, const char *prefix, const char *what,
                                  const sb_logger *log, sb_htdemucs_config *out);

typedef struct sb_htdemucs sb_htdemucs;

/* Build a net from the tensors "<prefix><name>" of st, checking every name and shape against
 * the architecture the settings describe (and that no tensor under the prefix is left over).
 * 'what' names the model in messages. */
sb_status sb_htdemucs_new(const sb_safetensors *st, const char *prefix,
                          const sb_htdemucs_config *cfg, const char *what, const sb_logger *log,
                          sb_htdemucs **out);
void sb_htdemucs_free(sb_htdemucs *net);
const sb_htdemucs_config *sb_htdemucs_cfg(const sb_htdemucs *net);
/* Parameters (floats) the net holds, for logs and benches. */
int64_t sb_htdemucs_params(const sb_htdemucs *net);

/* Intermediate activations, in the reference's layout with the batch dimension dropped
 * (freq-branch tensors as [C][F][T]), named as the golden files' "act.*" tensors without the
 * "act." prefix. For tests; costs a copy per tap, nothing when the tap is NULL. */
typedef void (*sb_htdemucs_tap)(void *user, const char *name, const float *data, int ndim,
                                const int64_t *shape);

/* A net placed on an opened device (backend/backend.h): its weights there (used in place by
 * a backend that shares host memory, uploaded once by another) and the activation buffers
 * kept from one pass to the next. One per (net, device); one pass at a time. Free it before
 * the device. */
typedef struct sb_htdemucs_on sb_htdemucs_on;
sb_status sb_htdemucs_place(const sb_htdemucs *net, const sb_exec *dev, const sb_logger *log,
                            sb_htdemucs_on **out);
void sb_htdemucs_unplace(sb_htdemucs_on *p);

/* One forward pass over 'batch' segments: in is [batch][audio_channels][segment_length], out
 * is [batch][n_sources][audio_channels][segment_length] in the file's source order: the whole
 * pass, STFTs and normalisation included, runs on the device, with one upload and one
 * download; the tap sees the first segment's activations when batch is 1. Device failures come back as SB_ERR_DEVICE_OOM /
 * SB_ERR_DEVICE_LOST / SB_ERR_DEVICE for the job runner. */
sb_status sb_htdemucs_forward(sb_htdemucs_on *p, int batch, const float *in, float *out, sb_htdemucs_tap tap, void *tap_user);

/* Flags (either may be NULL) that a pass checks between layers: once one is set, the pass
 * stops there and returns SB_ERR_CANCELLED (the job's cancel; the pipeline's "another device
 * finished this segment first"). Set before a pass, from the thread that runs it. */
void sb_htdemucs_on_stop(sb_htdemucs_on *p, const atomic_int *a, const atomic_int *b);

#endif
