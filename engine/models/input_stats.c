/* A job's input read once for what it and its models need to know of it all (model.h:
 * sb_input_stats): its peak, and the statistics the references normalise the mix by, each as
 * its reference computes it, so that the stems are the same bytes as when each model read the
 * file for itself. */
#include "models/model.h"

#include <math.h>
#include <stdlib.h>

sb_status sb_input_stats_read(sb_source *in, const atomic_int *cancel, sb_input_stats *out)
{
	enum { BLOCK = 65536 };
	float *buf = malloc(sizeof(float) * BLOCK * (size_t)in->channels);
	if (!buf)
		return SB_ERR_NOMEM;
	const int C = in->channels;
	double peak = 0;
	double bn = 0, bm = 0, bm2 = 0; /* by blocks (Chan et al.'s pairwise update) */
	double fn = 0, fm = 0, fm2 = 0; /* by frames (Welford's update) */
	sb_status st = SB_OK;
	for (int64_t at = 0; at < in->frames && st == SB_OK; at += BLOCK) {
		if (cancel && atomic_load(cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		const int64_t nb = in->frames - at < BLOCK ? in->frames - at : BLOCK;
		st = in->read(in, at, nb, buf);
		if (st != SB_OK)
			break;
		for (int64_t i = 0; i < nb * C; i++) {
			const double v = fabs((double)buf[i]);
			peak = v > peak ? v : peak; /* NaN is no peak: the read refuses it anyway */
		}
		/* demucs.separate's ref: a stereo input's two channels averaged, a mono one kept */
		double s = 0;
		for (int64_t i = 0; i < nb; i++)
			s += C == 2 ? 0.5 * ((double)buf[2 * i] + buf[2 * i + 1]) : buf[i];
		const double m = s / (double)nb;
		double q = 0;
		for (int64_t i = 0; i < nb; i++) {
			const double v = C == 2 ? 0.5 * ((double)buf[2 * i] + buf[2 * i + 1]) : buf[i];
			q += (v - m) * (v - m);
		}
		const double tot = bn + (double)nb, d = m - bm;
		bm += d * (double)nb / tot;
		bm2 += q + d * d * bn * (double)nb / tot;
		bn = tot;
		/* MSST's normalize_audio: every channel averaged, a frame at a time */
		for (int64_t i = 0; i < nb; i++) {
			double v = 0;
			for (int c = 0; c < C; c++)
				v += buf[i * C + c];
			v /= C;
			fn += 1;
			const double dl = v - fm;
			fm += dl / fn;
			fm2 += dl * (v - fm);
		}
	}
	free(buf);
	out->peak = peak;
	out->blocks_mean = bm;
	out->blocks_std = bn > 1 ? sqrt(bm2 / (bn - 1)) : 0;
	out->frames_mean = fm;
	out->frames_std = fn > 0 ? sqrt(fm2 / fn) : 0;
	return st;
}
