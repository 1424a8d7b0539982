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

#define SBC_MAX_INPUTS 16

typedef struct {
	const char *const *inputs;  /* checkpoint files */
	int n_inputs;               /* 1 .. SBC_MAX_INPUTS */
	const char *output;         /* the safetensors file; may be NULL with dry_run */
	const char *name;           /* the model's name in the file; NULL: output's base name */
	const char *weights;        /* a bag's weights "1,0;0,1"; NULL: htdemucs_ft's or all 1 */
	const char *shapes;         /* released-shapes.json to check names and shapes, or NULL */
	const char *config;         /* a RoFormer's YAML configuration: inputs[0] is its state
	                               dict (roformer_convert.c), or NULL for Demucs */
	int overwrite, dry_run;
	/* errors: one line each naming the file; warnings; info: what was done (for a person) */
	const sb_logger *log;
} sbc_convert_opts;

/* SB_OK when written (or checked, with dry_run); else the reason is logged: SB_ERR_EXISTS,
 * SB_ERR_FORMAT / SB_ERR_MODEL / SB_ERR_UNSUPPORTED (a checkpoint refused), SB_ERR_NOSPACE,
 * SB_ERR_IO, SB_ERR_INVALID (options), SB_ERR_NOMEM. */
sb_status sbc_convert(const sbc_convert_opts *o);
/* The RoFormer path of sbc_convert (o->config set). */
sb_status sbc_convert_roformer(const sbc_convert_opts *o);

#endif
