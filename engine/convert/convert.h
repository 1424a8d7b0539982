/* Released Demucs v4 checkpoints (PyTorch .th files) to the safetensors files the engine
 * loads, in C, running none of the pickle (convert/demucs_package.h reads it into plain
 * values): one checkpoint becomes one model; several (the four htdemucs_ft models) become one
 * bag-of-models file.
 *
 * One model: the tensors keep the state dict's names and dtypes, and `__metadata__` holds every
 * constructor setting (convert/settings_format.h says how values are written), `klass`, `name`
 * and `checkpoint` (the input's file name). A bag of K: `bag` = K, model k's tensors and
 * settings under "<k>.", the shared `sources`, `samplerate` and `audio_channels`, and
 * `bag_weights`: K rows separated by ';' of one weight per source separated by ','.
 *
 * The output appears whole or not at all (a locked temporary file, synced, renamed). Used by
 * tools/convert (stembridge-convert) and the model installer (models/install.h).
 * Threads: any; nothing shared.
 */
#ifndef SBC_CONVERT_H
#define SBC_CONVERT_H

#include "sb_common.h"

/* sbc_convert_opts and sbc_convert(): stembridge.h. */

/* The path of sbc_convert for MSST's families (o->config set: the RoFormers, SCNet, MDX23C). */
sb_status sbc_convert_msst(const sbc_convert_opts *o);

#endif
