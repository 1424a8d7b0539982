/* Inside engine/demucs's model layer: the bag and its opening (demucs_bag.c). */
#ifndef SB_DEMUCS_INTERNAL_H
#define SB_DEMUCS_INTERNAL_H

#include "models/demucs/demucs.h"
#include "models/resident.h"

struct sb_demucs_bag {
	int n;
	sb_htdemucs **nets;
	double *weights; /* [n][n_sources] */
};

sb_status sb_demucs_bag_open(const char *path, const char *name, const sb_logger *log,
                             sb_demucs_bag **out);
void sb_demucs_bag_free(sb_demucs_bag *bag);

/* The whole-file pipeline on a bag (demucs/separate.py and demucs/apply.py): normalise by the
 * mono mix's mean and std, cut into segments with overlap, run every model of the bag (and
 * every shift) on each, blend with triangular weights, weight the models per source,
 * de-normalise, and stream the stems into 'out' in SB_STEM order. Memory: one segment's
 * activations and a window of about two segments per shift grid. The nets stay placed on the
 * devices of ctx->keep in 'kept' for the next call (NULL: placed for this call only). A kept
 * state is an array of 64 placements, one per net of the bag (sb_demucs_kept_free). */
sb_status sb_demucs_separate_kept(const sb_demucs_bag *bag, const sb_demucs_opts *opts,
                                  const sb_run_ctx *ctx, sb_kept *kept, sb_source *in,
                                  sb_sink *out);
void sb_demucs_kept_free(void *state);

#endif
