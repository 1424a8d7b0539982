/* The YAML configuration of an SCNet (Tong et al. 2024, "SCNet: Sparse Compression Network
 * for Music Source Separation") as MSST publishes it beside each checkpoint (model type
 * `scnet`: configs/config_musdb18_scnet*.yaml, the XL releases): `model:` holds the keyword
 * arguments of models/scnet/scnet.py's SCNet; the other sections are every MSST family's
 * (msst_config.h). A key SCNet does not take is refused by name, as the reference would; a
 * setting this engine does not compute (a window shorter than the FFT, a down-sampling kernel
 * that is not its stride, an odd number of dual-path layers) is refused by name and value.
 * Threads: any; nothing shared. */
#ifndef SBC_SCNET_CONFIG_H
#define SBC_SCNET_CONFIG_H

#include "convert/msst_config.h"

#define SB_SCNET_MAX_LEVELS 8

typedef struct {
	sb_msst_common m;
	int n_sources;
	char sources[SB_MSST_MAX_STEMS][32];
	int audio_channels;
	int n_dims, dims[SB_SCNET_MAX_LEVELS + 1]; /* dims[0] = 2 audio_channels: re, im */
	int nfft, hop, win, normalized;
	int n_sr, n_stride, n_kernel, n_depths;
	double band_sr[3];                        /* proportion of the bins: low, mid, high */
	int band_stride[3], band_kernel[3];
	int conv_depths[3];                       /* ConvolutionModule depth per band */
	int compress, conv_kernel;
	int num_dplayer, expand;
} sb_scnet_config;

/* Reads `model:` and the common sections of a loaded document (msst_config.h), then checks
 * them; on failure sb_msst_error(y) says why. */
sb_status sb_scnet_config_read(sb_msst_yaml *y, sb_scnet_config *c);
/* The same from text; err holds one line on failure. */
sb_status sb_scnet_config_parse(const char *text, size_t len, sb_scnet_config *c, char *err,
                                size_t errlen);

/* The bands of an SD layer over Fr rows, as SDlayer.forward splits them: band b covers rows
 * [start[b], end[b]) (math.ceil of Fr times the cumulative proportions, in double); each is
 * zero-padded by pad_lo / pad_hi rows and convolved to out[b] rows. */
typedef struct {
	int start[3], end[3], pad_lo[3], pad_hi[3], out[3];
	int total;                                /* sum of out: the next level's rows */
} sb_scnet_bands;
void sb_scnet_split(const sb_scnet_config *c, int rows, sb_scnet_bands *b);

/* The tensors the config makes (MSST's state dict names and shapes); returns how many. */
int sb_scnet_tensors(const sb_scnet_config *c, sb_msst_tensor_fn fn, void *user);

#endif
