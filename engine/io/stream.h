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

/* sb_source (stembridge.h: sb_source_read, sb_source_close call these) */
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

#endif
