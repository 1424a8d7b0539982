/* Band-split RoFormers (BS-RoFormer, Lu et al. 2023; Mel-Band RoFormer, Wang et al. 2023) as
 * ZFTurbo's Music-Source-Separation-Training computes them at inference
 * (models/bs_roformer/bs_roformer.py, mel_band_roformer.py; utils/model_utils.py demix),
 * written once against the backend interface: every device runs them.
 *
 * One chunk (roformer_forward.c): STFT of each channel, the spectrum's complex values
 * gathered into bands (BS: consecutive frequencies; Mel: the frequencies under each mel
 * filter, overlapping), per band RMSNorm + Linear to dim features, depth x (a time transformer
 * along each band's frames, a frequency transformer across each frame's bands; pre-norm
 * attention with rotary positions and per-head sigmoid gates, a GELU feed-forward), a final
 * RMSNorm (BS only), per stem and band an MLP (Tanh) ending in a GLU: a complex mask for the
 * band's values; the masks (averaged where Mel bands overlap) multiply the spectrum, the DC
 * bin zeroed (zero_dc), inverse STFT: all of it on the device.
 *
 * The whole file (roformer_model.c): MSST's demix, streamed (see there).
 * Only models/roformer includes this.
 */
#ifndef SB_ROFORMER_H
#define SB_ROFORMER_H

#include "backend/backend.h"
#include "convert/roformer_config.h"
#include "core/thread_pool.h"
#include "models/resident.h"
#include "sb_common.h"

#include <stdatomic.h>

typedef struct {
	float *norm;          /* attention's RMSNorm [dim] */
	float *qkvg;          /* [3 inner + heads][dim]: to_qkv's rows, then to_gates' */
	float *qkvg_b;        /* [3 inner + heads]: zeros, then to_gates' bias */
	float *out;           /* to_out [dim][inner] */
	float *ff_norm;       /* [dim] */
	float *ff1, *ff1_b;   /* [hidden][dim], [hidden] */
	float *ff2, *ff2_b;   /* [dim][hidden], [dim] */
} rf_layer;

typedef struct {
	float *w[16], *b[16]; /* the MLP's linear layers, first to last */
} rf_mlp;

/* consecutive bands of one width: their band split's products and their mask MLPs run as one
 * batched product per layer */
#define RF_GROUP_MAX 8
typedef struct {
	int k0, n;
} rf_group;

typedef struct sb_roformer {
	sb_rf_config cfg;
	int ch;                       /* audio channels: 2 stereo, 1 mono */
	int bins;                     /* n_fft / 2 + 1 */
	int nb;                       /* bands */
	int inner, hidden, mlp_hidden, n_stems;
	int gates;                    /* per-head gates (to_gates) in the checkpoint */
	int *din, *off;               /* [nb]: each band's input width (2 ch freqs) and offset */
	int total;                    /* sum of din: the gathered features of a frame */
	int *src;                     /* [total / 2]: each gathered complex value's index in the
	                                 (frequency, channel) order, f ch + s */
	float *inv_count;             /* [bins ch]: 1 / the bands covering each value (Mel), 1 (BS) */
	/* the gathers (backend.h) as tables: the band split's columns of a frame's spectrum
	 * [bins][ch][re, im] (ptr [total + 1], idx [total], ones [total]), and the masks' way
	 * back from [total] to that spectrum, averaged where bands overlap, DC zeroed where the
	 * config says (ptr [2 bins ch + 1], idx [total], w [2 bins ch]) */
	float *band_ptr, *band_idx, *ones, *mask_ptr, *mask_idx, *mask_w;
	float *split_norm;            /* [total]: the band split's RMSNorm gammas, band after band */
	float *band_seg;              /* [nb + 1]: each band's first column of [total], then total */
	float **split_w;              /* [nb] -> [dim][din]; a group's lie back to back */
	float *split_b;               /* [nb][dim] */
	rf_layer *layers;             /* depth x (time_depth + freq_depth), in the order they run */
	float *final_norm;            /* [dim], BS only (NULL for Mel) */
	float **tnorm;                /* Mel only: [depth][2] each transformer's output RMSNorm */
	rf_mlp *mask;                 /* [n_stems][nb]; a group's weights lie back to back */
	rf_group *group;
	int n_groups;
	float *rope_t, *rope_f;       /* cos, sin pairs [frames][dim_head], [nb][dim_head] */
	int frames;                   /* STFT frames of a chunk */
	float *window;                /* Hann (periodic) of win_length, centred in n_fft */
	int64_t params;
	sb_weights w;                 /* every weight array, for placing on a device */
} sb_roformer;

/* Opens a converted model (stembridge-convert: the tensors of the checkpoint, the YAML in the
 * metadata key "config"): the config parsed, every tensor's shape checked against it. */
sb_status sb_roformer_load(const char *path, const char *name, const sb_logger *log,
                           sb_roformer **out);
void sb_roformer_free(sb_roformer *net);

/* A model on a device, and one forward pass of B chunks: in [B][ch][chunk] -> out
 * [B][n_stems][ch][chunk]. */
typedef struct sb_roformer_on sb_roformer_on;
sb_status sb_roformer_place(const sb_roformer *net, const sb_exec *dev, const sb_logger *log,
                            sb_roformer_on **out);
void sb_roformer_unplace(sb_roformer_on *r);
/* the pass ends (SB_ERR_CANCELLED) at its next block once a flag is set */
void sb_roformer_on_stop(sb_roformer_on *r, const atomic_int *a, const atomic_int *b);
sb_status sb_roformer_forward(sb_roformer_on *r, int B, const float *in, float *out);
/* The same in two steps (resident.h: sb_resident_end): submit enqueues the pass whole and returns
 * without waiting where the device pipelines, so the next pass can be enqueued first; collect
 * waits for it (once for each submit, in order; the stems are in out once it returns SB_OK). A
 * failed submit's pass is collected too (it returns the failure). */
sb_status sb_roformer_submit(sb_roformer_on *r, int B, const float *in, float *out,
                            sb_resident_pass *pass);
sb_status sb_roformer_collect(sb_roformer_on *r, sb_resident_pass *pass);

#endif
