/* Where models read audio from and write stems to. Both ends are streams so that a model
 * processes long input in bounded memory: it reads windows of the input (random access, zeros
 * outside [0, frames)) and appends each stem's samples in order.
 *
 * Sources: a file (libsndfile, see audio_file.h) or memory (the plugin's recording).
 * Sinks: the stem writer (temporary files renamed on commit) or memory (tests, audition).
 */
#ifndef SB_STREAM_H
#define SB_STREAM_H

#include "sb_common.h"

typedef struct sb_source sb_source;
struct sb_source {
	int channels;          /* 1..8 */
	double rate;           /* Hz */
	int64_t frames;        /* length, > 0 */
	/* Fill out[n * channels] (interleaved) with frames [start, start+n). Frames outside the
	 * input read as zero. SB_ERR_FORMAT for NaN/Inf samples or a read that comes up short. */
	sb_status (*read)(sb_source *self, int64_t start, int64_t n, float *out);
	void (*close)(sb_source *self);
	void *impl;
};

/* A source over caller memory (interleaved). The caller keeps 'data' alive until closed. */
sb_status sb_source_memory(const float *data, int64_t frames, int channels, double rate,
                           sb_source **out);

typedef struct sb_sink sb_sink;
struct sb_sink {
	int n_stems;
	int channels;
	/* Append n frames (interleaved, 'channels' wide) to stem s. A model writes every stem it
	 * has, each in order from frame 0, exactly 'frames' frames in total per stem. */
	sb_status (*write)(sb_sink *self, int stem, const float *data, int64_t n);
	void *impl;
};

/* Stems by canonical index, the same everywhere (files, masks, ports, manifests): the four of
 * every 4-source model first, then the extra sources of larger models (htdemucs_6s). A model
 * declares which of these it makes (sb_model_info.stems); a sink takes any of them by index. */
enum {
	SB_STEM_VOCALS = 0, SB_STEM_DRUMS, SB_STEM_BASS, SB_STEM_OTHER,
	SB_N_STEMS,                       /* the four standard stems */
	SB_STEM_GUITAR = SB_N_STEMS, SB_STEM_PIANO,
	SB_N_KNOWN_STEMS,                 /* every stem name this build knows */
	SB_MAX_STEMS = 8                  /* room in masks and tables */
};
/* "vocals","drums","bass","other","guitar","piano"; NULL past SB_N_KNOWN_STEMS */
extern const char *const sb_stem_names[SB_MAX_STEMS];
/* The canonical index of a stem name, -1 when it is none of them. */
int sb_stem_index(const char *name);
/* The names of a mask of canonical stems, in canonical order, joined by sep ("vocals, drums") */
void sb_stem_mask_text(unsigned mask, const char *sep, char *buf, size_t len);

#endif
