/* HTDemucs (Hybrid Transformer Demucs, "Demucs v4"): one network and its forward pass over
 * one segment, on the native CPU path.
 *
 * Reference: S. Rouard, F. Massa, A. Defossez, "Hybrid Transformers for Music Source
 * Separation", ICASSP 2023; code: facebookresearch/demucs, demucs/htdemucs.py (HTDemucs),
 * hdemucs.py (HEncLayer, HDecLayer, pad1d), demucs.py (DConv), transformer.py
 * (CrossTransformerEncoder), spec.py. This is a re-implementation in C of the inference path
 * (eval mode, complex-as-channels, no Wiener filtering) for the settings the released models
 * use; the golden vectors in shared/golden/htdemucs pin it to the reference.
 *
 * Threads: a net is read-only once opened; sb_htdemucs_forward may run on several threads at
 * once, each with its own workspace.
 */
#ifndef SB_HTDEMUCS_H
#define SB_HTDEMUCS_H

#include "models/demucs/safetensors.h"
#include "core/thread_pool.h"

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
/* A cache of activation buffers kept from one segment to the next (htdemucs_ws.c): with it,
 * every segment after the first runs without mapping new memory. One per job; NULL works. */
typedef struct sb_htdemucs_ws sb_htdemucs_ws;
sb_htdemucs_ws *sb_htdemucs_ws_new(void);
void sb_htdemucs_ws_free(sb_htdemucs_ws *ws);

typedef void (*sb_htdemucs_tap)(void *user, const char *name, const float *data, int ndim,
                                const int64_t *shape);

/* One segment: in is [audio_channels][segment_length], out is
 * [n_sources][audio_channels][segment_length] in the file's source order. pool and ws may be
 * NULL. */
sb_status sb_htdemucs_forward(const sb_htdemucs *net, sb_pool *pool, sb_htdemucs_ws *ws,
                              const float *in, float *out,
                              sb_htdemucs_tap tap, void *tap_user, const sb_logger *log);

/* The OpenCL path: the net's weights on one opened device (uploaded once) and its kernels.
 * Free it before the device. Same results as the CPU path within 1e-4. */
typedef struct sb_cl_device sb_cl_device;
typedef struct sb_htdemucs_cl sb_htdemucs_cl;
sb_status sb_htdemucs_cl_new(const sb_htdemucs *net, sb_cl_device *dev, const sb_logger *log,
                             sb_htdemucs_cl **out);
void sb_htdemucs_cl_free(sb_htdemucs_cl *c);
/* sb_htdemucs_forward on the device (the STFTs on the host with pool and ws). Device failures
 * come back as SB_ERR_DEVICE_OOM / SB_ERR_DEVICE_LOST / SB_ERR_DEVICE for the job runner. */
sb_status sb_htdemucs_forward_cl(sb_htdemucs_cl *c, sb_pool *pool, sb_htdemucs_ws *ws,
                                 const float *in, float *out, sb_htdemucs_tap tap,
                                 void *tap_user, const sb_logger *log);
/* How its matrix products run: "CLBlast 1.5.3" or "own kernel" (see opencl/cl_blas.h). */
const char *sb_htdemucs_cl_gemm(const sb_htdemucs_cl *c);

/* Where the device's time goes, for benches. With profiling on, every launch and transfer
 * waits for the queue before and after it (so a forward runs slower) and its wall time is
 * added to its kernel's entry; matrix products also count their floating-point operations.
 * Turning it on clears the totals. sb_htdemucs_cl_profile copies up to max non-empty entries,
 * the slowest first, and returns how many. */
typedef struct {
	const char *name;
	int calls;
	double seconds, flops;
} sb_htdemucs_cl_prof;
void sb_htdemucs_cl_set_profiling(sb_htdemucs_cl *c, int on);
int sb_htdemucs_cl_profile(const sb_htdemucs_cl *c, sb_htdemucs_cl_prof *out, int max);

#endif
