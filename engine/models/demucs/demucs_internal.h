/* Inside engine/demucs's model layer: the bag and its opening (demucs_bag.c). */
#ifndef SB_DEMUCS_INTERNAL_H
#define SB_DEMUCS_INTERNAL_H

#include "models/demucs/demucs.h"

struct sb_demucs_bag {
	int n;
	sb_htdemucs **nets;
	double *weights; /* [n][n_sources] */
};

sb_status sb_demucs_bag_open(const char *path, const char *name, const sb_logger *log,
                             sb_demucs_bag **out);
void sb_demucs_bag_free(sb_demucs_bag *bag);

#endif
