/* The YAML configuration of an MDX23C (TFC-TDF v3: Kim et al. 2023, "Sound Demixing Challenge
 * 2023 Music Demixing Track Technical Report: TFC-TDF-UNet v3") as MSST publishes it beside each
 * checkpoint (model type `mdx23c`: configs/config_*_mdx23c.yaml, the drum-separation and
 * instrumental releases): models/mdx23c_tfc_tdf_v3.py reads `model:` (act, norm, num_subbands,
 * num_scales, scale, num_blocks_per_scale, num_channels, growth, bottleneck_factor) and the
 * STFT from `audio:` (n_fft, hop_length, dim_f, num_channels); the other sections are every
 * MSST family's (msst_config.h). A key of `model:` the reference does not read is refused by
 * name; a norm or an activation this engine does not compute is refused by name and value.
 * Threads: any; nothing shared. */
#ifndef SBC_MDX23C_CONFIG_H
#define SBC_MDX23C_CONFIG_H

#include "convert/msst_config.h"

#define SB_MDX_MAX_SCALES 8

typedef enum { SB_MDX_NORM_NONE = 0, SB_MDX_NORM_INSTANCE, SB_MDX_NORM_GROUP } sb_mdx_norm;

typedef struct {
	sb_msst_common m;
	/* audio: */
	int n_fft, hop, dim_f, dim_t;
	/* model: */
	char act[32], norm_name[32];
	sb_mdx_norm norm;
	int norm_groups;                 /* GroupNorm<g>: g */
	int num_subbands, num_scales, n_scale, scale[2];
	int blocks, channels, growth, bottleneck;
	/* derived */
	int stems;                       /* outputs: the target alone, else every instrument */
	int frames;                      /* STFT frames of a chunk: chunk_size / hop + 1 */
} sb_mdx23c_config;

/* Reads a loaded document (msst_config.h) and checks it; on failure sb_msst_error(y) says
 * why. */
sb_status sb_mdx23c_config_read(sb_msst_yaml *y, sb_mdx23c_config *c);
sb_status sb_mdx23c_config_parse(const char *text, size_t len, sb_mdx23c_config *c, char *err,
                                 size_t errlen);

/* The tensors the config makes (MSST's state dict names and shapes); returns how many. */
int sb_mdx23c_tensors(const sb_mdx23c_config *c, sb_msst_tensor_fn fn, void *user);

#endif
