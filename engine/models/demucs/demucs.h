/* Demucs models behind the sb_model seam: a single HTDemucs or a bag of them (htdemucs_ft),
 * loaded from one safetensors file, run over a whole file as demucs.separate does it.
 *
 * File format. A single model: the checkpoint's state-dict names, and the constructor
 * settings (sources, channels, bottom_channels, t_layers, t_heads, dconv_mode, samplerate,
 * segment, audio_channels) as "__metadata__" strings. A bag of K models: metadata "bag" = K,
 * each model's tensors and settings prefixed "<k>." (k = 0..K-1), and "bag_weights" = K rows
 * separated by ';' of per-source weights separated by ',' (in the "sources" order); no
 * "bag_weights" means all ones. engine/convert (stembridge-convert) writes both.
 *
 * Threads: an opened model is read-only; separate() may run for several jobs at once.
 */
#ifndef SB_DEMUCS_H
#define SB_DEMUCS_H

#include "models/demucs/htdemucs.h"
#include "models/model.h"

typedef struct {
	int shifts;     /* random time shifts averaged (apply_model's "shifts"); 0 = none */
	double overlap; /* overlap between segments, 0.25 as demucs.separate */
} sb_demucs_opts;

/* shifts 0, overlap 0.25 */
void sb_demucs_opts_default(sb_demucs_opts *o);

/* Open the model in 'path' under the name 'name' (for messages and info.name); opts may be
 * NULL for the defaults. SB_ERR_IO / SB_ERR_FORMAT for an unreadable or corrupt file,
 * SB_ERR_MODEL for weights that do not match the architecture (logged, naming the tensor). */
sb_status sb_demucs_model_open(const char *path, const char *name, const sb_demucs_opts *opts,
                               const sb_logger *log, sb_model **out);

/* Change the options of an opened Demucs model (before separate(); not while one runs). */
sb_status sb_demucs_model_set_opts(sb_model *m, const sb_demucs_opts *opts);

/* The bag inside a Demucs model: its networks and per-source weights. For tests and benches;
 * NULL when m is not a Demucs model. */
typedef struct sb_demucs_bag sb_demucs_bag;
const sb_demucs_bag *sb_demucs_model_bag(const sb_model *m);
const sb_htdemucs *sb_demucs_bag_net(const sb_demucs_bag *bag, int k);


#endif
