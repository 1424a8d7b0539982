/* The YAML configuration of a band-split RoFormer as ZFTurbo's Music-Source-Separation-Training
 * (MSST) publishes it beside each checkpoint (the files of configs/viperx and
 * configs/KimberleyJensen): `model:` holds the constructor's keyword arguments of BSRoformer or
 * MelBandRoformer; the other sections are every MSST family's (msst_config.h).
 *
 * Every key of `model:` is checked: one the reference's constructor does not take is refused
 * by name (the reference would fail on it too), one that changes inference in a way this
 * engine does not compute (linear attention, PoPE) is refused by name and value;
 * training-only keys (dropouts, the multi-resolution STFT loss, gradient checkpointing, flash
 * attention) are read and have no effect at inference.
 *
 * The family is not written in the file (MSST takes it as --model_type): `freqs_per_bands`
 * means BS-RoFormer, `num_bands` Mel-Band RoFormer.
 * Threads: any; nothing shared. */
#ifndef SBC_ROFORMER_CONFIG_H
#define SBC_ROFORMER_CONFIG_H

#include "convert/msst_config.h"
#include "sb_common.h"

#include <stdint.h>

#define SB_RF_MAX_BANDS 256
#define SB_RF_MAX_STEMS SB_MSST_MAX_STEMS

typedef enum { SB_RF_BS = 0, SB_RF_MEL = 1 } sb_rf_family;

typedef struct {
	sb_rf_family family;
	/* model: */
	int dim, depth, stereo, num_stems;
	int time_depth, freq_depth;          /* transformer layers per depth step */
	int n_bands;                         /* BS: len(freqs_per_bands); Mel: num_bands */
	int freqs_per_band[SB_RF_MAX_BANDS]; /* BS only */
	int sample_rate;                     /* Mel: the mel scale's rate */
	int dim_head, heads, dim_freqs_in;
	int n_fft, hop, win, stft_normalized, zero_dc;
	int mask_depth, mlp_mult;
	int skip;                            /* skip_connection: each block's input adds every
	                                        earlier block's output */
	sb_msst_common m;                    /* audio, training, inference */
} sb_rf_config;

/* Parses text (len bytes) into c; on failure err holds one line naming the key at fault:
 * SB_ERR_FORMAT (not YAML, a value of the wrong kind), SB_ERR_UNSUPPORTED (a key or value the
 * engine refuses). */
sb_status sb_rf_config_parse(const char *text, size_t len, sb_rf_config *c, char *err,
                             size_t errlen);

/* The stems in output order: the target alone when there is one (the model's one mask),
 * else the instruments. */
/* The same from a loaded document whose family is known (the converter's path). */
sb_status sb_rf_config_read(sb_msst_yaml *y, sb_rf_family f, sb_rf_config *c);

int sb_rf_config_stems(const sb_rf_config *c, const char *names[SB_RF_MAX_STEMS]);

/* The tensors a config asks for, with their shapes (for the converter's check): calls fn for
 * each (fn may be NULL); returns how many, -1 without memory. flags: SB_RF_GATES, the per-head
 * gates of the versions that have them (to_gates); SB_RF_ROPE_FREQS, the rotary embeddings'
 * frequencies stored with every attention layer (rotary_embed.freqs, a parameter in
 * rotary-embedding-torch, so in the state dict). */
typedef sb_msst_tensor_fn sb_rf_tensor_fn;
enum { SB_RF_GATES = 1, SB_RF_ROPE_FREQS = 2 };
int sb_roformer_tensors(const sb_rf_config *c, int flags, sb_rf_tensor_fn fn, void *user);
/* the linear layers of a mask estimator's MLP: BS-RoFormer's MLP has mask_estimator_depth of
 * them, the Mel-Band RoFormer's one more (its MLP repeats the hidden width depth times) */
static inline int sb_rf_mask_layers(const sb_rf_config *c)
{
	return c->mask_depth + (c->family == SB_RF_MEL);
}

/* The Mel-Band RoFormer's bands (librosa.filters.mel(sr, n_fft, n_mels = n_bands), slaney scale
 * and norm, the first and last weights forced on): in[band][freq] != 0 where the filter is
 * positive. Returns SB_ERR_NOMEM or SB_OK. */
sb_status sb_rf_mel_bands(int sample_rate, int n_fft, int n_bands, unsigned char *in);

/* "bs_roformer" or "mel_band_roformer" (MSST's --model_type) */
const char *sb_rf_family_name(sb_rf_family f);

#endif
