/* One job's stems from several models (models/model.h: sb_model_composite): each stem asked
 * for comes from the installed model with the best published SDR for it, as UVR's users pick
 * a RoFormer for the vocals and htdemucs_ft or a 4-stem RoFormer for the drums and bass.
 *
 * The parts run one after another over the whole input, on the job's devices, each writing
 * only the stems it was chosen for into the job's sink (a sink takes each stem in order from
 * frame 0, independently of the others, so stems of different parts never mix). "other" is
 * taken from the last part that makes one and, as the composite's stems do not add back by
 * construction, the job runner replaces it by the input minus the other stems written.
 * Progress is the parts' progress, each over its share of the job.
 */
#include "models/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_model *part[SB_MAX_STEMS];
	unsigned take[SB_MAX_STEMS]; /* the stems each part writes */
	int n;
} composite;

/* a sink that forwards the stems in 'take' and drops the others */
typedef struct {
	sb_sink *to;
	unsigned take;
} filter;

static sb_status filter_write(sb_sink *self, int stem, const float *data, int64_t n)
{
	const filter *f = self->impl;
	if (stem < 0 || stem >= SB_MAX_STEMS || !(f->take & (1u << stem)))
		return SB_OK;
	return f->to->write(f->to, stem, data, n);
}

static sb_status separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	composite *c = m->impl;
	sb_status st = SB_OK;
	for (int i = 0; i < c->n && st == SB_OK; i++) {
		filter f = {out, c->take[i]};
		sb_sink fs = {out->n_stems, out->channels, filter_write, &f};
		sb_member_share sh;
		const sb_run_ctx pc = sb_run_ctx_member(ctx, &sh, i, c->n);
		char which[128];
		sb_stem_mask_text(c->take[i], ", ", which, sizeof which);
		sb_log(ctx->log, SB_LOG_INFO, "%s from %s", which, c->part[i]->info.name);
		st = sb_model_separate(c->part[i], &pc, in, &fs);
	}
	return st;
}

static void composite_free(sb_model *m)
{
	if (!m)
		return;
	composite *c = m->impl;
	for (int i = 0; c && i < c->n; i++)
		sb_model_free(c->part[i]);
	free(c);
	free(m);
}

static const sb_model_vtable composite_vt = {separate, composite_free};

sb_status sb_model_composite(sb_model *const *parts, const unsigned *take, int n,
                             const sb_logger *log, sb_model **out)
{
	*out = NULL;
	if (n < 1 || n > SB_MAX_STEMS)
		return SB_ERR_INVALID;
	for (int i = 1; i < n; i++)
		if (parts[i]->info.native_rate != parts[0]->info.native_rate) {
			sb_log(log, SB_LOG_ERROR, "%s and %s run at different rates: not combined",
			       parts[0]->info.name, parts[i]->info.name);
			return SB_ERR_INVALID;
		}
	sb_model *m = calloc(1, sizeof *m);
	composite *c = calloc(1, sizeof *c);
	if (!m || !c) {
		free(m);
		free(c);
		return SB_ERR_NOMEM;
	}
	m->vt = &composite_vt;
	m->impl = c;
	sb_model_info *info = &m->info;
	info->native_rate = parts[0]->info.native_rate;
	info->shares_devices = 1;
	info->stems_sum = 0;
	for (int i = 0; i < n; i++) {
		const sb_model_info *pi = &parts[i]->info;
		c->part[i] = parts[i];
		c->take[i] = take[i];
		info->stems |= take[i];
		info->shares_devices &= pi->shares_devices;
		info->ops |= pi->ops; /* a device runs the composite if it runs every part */
		if (!info->default_chunk_frames || (pi->default_chunk_frames &&
		                                    pi->default_chunk_frames < info->default_chunk_frames))
			info->default_chunk_frames = pi->default_chunk_frames;
		const size_t used = strlen(info->name);
		snprintf(info->name + used, sizeof info->name - used, "%s%s", i ? "+" : "", pi->name);
		for (int s = 0; s < SB_MAX_STEMS; s++)
			if (take[i] & (1u << s))
				info->stem_model[s] = pi->name;
	}
	c->n = n;
	snprintf(info->description, sizeof info->description, "each stem from its best model: %s",
	         info->name);
	info->n_stems = 0;
	for (int s = 0; s < SB_MAX_STEMS; s++)
		if (info->stems & (1u << s))
			info->stem_names[info->n_stems++] = sb_stem_names[s];
	*out = m;
	return SB_OK;
}
