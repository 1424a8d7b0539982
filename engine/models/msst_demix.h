/* The chunk pipeline of every family of ZFTurbo's Music-Source-Separation-Training (MSST: the
 * band-split RoFormers, SCNet, MDX23C), written once: MSST's demix (utils/model_utils.py,
 * generic mode) streamed, the chunks dealt out to every device (models/share.h), behind the
 * sb_model seam. A family loads its network and hands it over as an sb_msst_net; the pipeline
 * places it on each device, runs its forward pass on batches of chunks, and mixes the chunks'
 * outputs back as the reference does (msst_demix.c says how).
 *
 * A model with one target (vocals) makes a second stem, the other instruments, as the mix minus
 * the target (MSST's --extract_instrumental, audio-separator's secondary stem), so its stems add
 * back to the mix exactly.
 */
#ifndef SB_MSST_DEMIX_H
#define SB_MSST_DEMIX_H

#include "convert/msst_config.h"
#include "models/model.h"
#include "models/resident.h"

#include <stdatomic.h>

/* A family's network, as the pipeline drives it. forward: B chunks in [B][channels][chunk]
 * -> out [B][outputs][channels][chunk]; on_stop: the pass ends (SB_ERR_CANCELLED) at its next
 * step once a flag is set. */
typedef struct {
	const char *label;          /* "BS-RoFormer", "SCNet", "MDX23C": in messages */
	int channels;               /* the network's audio channels: 1 or 2 */
	int outputs;                /* its outputs per chunk (the target alone, or every
	                               instrument) */
	/* device bytes one chunk's pass takes and its largest single buffer: a device runs as
	 * many chunks per pass as a quarter of its memory holds */
	double pass_bytes, largest_bytes;
	void *net;
	sb_status (*place)(void *net, const sb_exec *dev, const sb_logger *log, void **on);
	void (*unplace)(void *on);
	void (*on_stop)(void *on, const atomic_int *a, const atomic_int *b);
	sb_status (*forward)(void *on, int B, const float *in, float *out);
	void (*free_net)(void *net);
	int64_t params;             /* its parameters (for messages and benches) */
	/* Optional: forward in two steps, so that a device that pipelines (models/resident.h:
	 * sb_resident_end) has the next pass enqueued before the last one is waited for: submit
	 * enqueues, collect waits (once for each submit, in order, a failed one too) */
	sb_status (*submit)(void *on, int B, const float *in, float *out, sb_resident_pass *pass);
	sb_status (*collect)(void *on, sb_resident_pass *pass);
} sb_msst_net;

/* The sb_model of net (taken over: freed with the model, and on failure) with the audio,
 * training and inference settings m; its description is what ("SCNet (85 498 parameters)")
 * and the stems it makes; it runs on devices with the operation groups ops (bits
 * 1 << SB_OPS_*). */
sb_status sb_msst_model_new(const sb_msst_net *net, const sb_msst_common *m, const char *name,
                            const char *path, const char *what, unsigned ops, sb_model **out);

/* The net of an sb_model of this pipeline (NULL for another model): for tests and benches
 * that run one chunk through it. */
const sb_msst_net *sb_msst_model_net(const sb_model *m);

/* Whether the safetensors file at path is a converted checkpoint of one of families (its
 * metadata's "family": MSST's model type; NULL-terminated). */
int sb_msst_file_is(const char *path, const char *const *families);

#endif
