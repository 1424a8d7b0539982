/* Demucs models ("htdemucs", "htdemucs_ft", "htdemucs_6s", or any name whose file is found)
 * behind the sb_model seam, on the devices the job runner opened (ctx->dev: one, or several
 * sharing the file's segments). */
#include "models/demucs/demucs_internal.h"
#include "models/families.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_demucs_bag *bag;
	sb_demucs_opts opts;
	sb_kept kept;  /* the nets placed on the devices the caller keeps open (ctx->keep) */
} demucs_model;

static sb_status dm_separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	demucs_model *dm = m->impl;
	sb_demucs_opts o = dm->opts;
	/* the job's own choices (CLI --shifts/--overlap) win over the model's defaults */
	if (ctx && ctx->shifts > 0)
		o.shifts = ctx->shifts > 32 ? 32 : ctx->shifts;
	if (ctx && ctx->overlap > 0 && ctx->overlap < 1)
		o.overlap = ctx->overlap;
	sb_run_devices rd;
	sb_status st = sb_run_devices_open(ctx, &rd);
	if (st == SB_OK)
		st = sb_demucs_separate_kept(dm->bag, &o, &rd.ctx, &dm->kept, in, out);
	sb_run_devices_close(&rd);
	return st;
}

static void dm_free(sb_model *m)
{
	if (!m)
		return;
	demucs_model *dm = m->impl;
	if (dm) {
		sb_kept_clear(&dm->kept); /* the placements point into the bag's weights */
		sb_demucs_bag_free(dm->bag);
	}
	free(dm);
	free(m);
}

static const sb_model_vtable dm_vt = {dm_separate, dm_free};

const sb_demucs_bag *sb_demucs_model_bag(const sb_model *m)
{
	return m && m->vt == &dm_vt ? ((const demucs_model *)m->impl)->bag : NULL;
}

sb_status sb_demucs_model_set_opts(sb_model *m, const sb_demucs_opts *opts)
{
	if (!m || m->vt != &dm_vt || !opts || opts->shifts < 0 || opts->shifts > 32 ||
	    !(opts->overlap >= 0 && opts->overlap < 1))
		return SB_ERR_INVALID;
	((demucs_model *)m->impl)->opts = *opts;
	return SB_OK;
}

sb_status sb_demucs_model_open(const char *path, const char *name, const sb_demucs_opts *opts,
                               const sb_logger *log, sb_model **out)
{
	*out = NULL;
	sb_model *m = calloc(1, sizeof *m);
	demucs_model *dm = calloc(1, sizeof *dm);
	if (!m || !dm) {
		free(m);
		free(dm);
		sb_log(log, SB_LOG_ERROR, "%s: out of memory", name);
		return SB_ERR_NOMEM;
	}
	m->vt = &dm_vt;
	m->impl = dm;
	sb_kept_init(&dm->kept, sb_demucs_kept_free);
	sb_demucs_opts_default(&dm->opts);
	if (opts)
		dm->opts = *opts;
	sb_status st = sb_demucs_bag_open(path, name, log, &dm->bag);
	if (st != SB_OK) {
		dm_free(m);
		return st;
	}
	const sb_htdemucs_config *c = sb_htdemucs_cfg(dm->bag->nets[0]);
	sb_model_info *info = &m->info;
	snprintf(info->name, sizeof info->name, "%s", name);
	snprintf(info->path, sizeof info->path, "%s", path);
	char list[128] = "";
	for (int s = 0; s < c->n_sources; s++) {
		const size_t at = strlen(list);
		snprintf(list + at, sizeof list - at, "%s%s", s ? ", " : "", c->sources[s]);
	}
	if (dm->bag->n > 1)
		snprintf(info->description, sizeof info->description,
		         "Hybrid Transformer Demucs (v4), a bag of %d models: %s", dm->bag->n, list);
	else
		snprintf(info->description, sizeof info->description,
		         "Hybrid Transformer Demucs (v4): %s", list);
	info->native_rate = c->samplerate;
	/* the canonical stems its sources make (a source of another name folds into "other", as
	 * the pipeline folds it), listed in canonical order */
	unsigned mask = 0;
	for (int s = 0; s < c->n_sources; s++) {
		const int k = sb_stem_index(c->sources[s]);
		mask |= 1u << (k >= 0 ? k : SB_STEM_OTHER);
	}
	int n = 0;
	for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
		if (mask & (1u << k))
			info->stem_names[n++] = sb_stem_names[k];
	info->n_stems = n;
	info->stems = mask;
	info->default_chunk_frames = c->segment_length;
	info->shares_devices = 1; /* the pipeline deals segments out to every device */
	info->ops = 1u << SB_OPS_HTDEMUCS;
	*out = m;
	return SB_OK;
}

/* The Demucs family (models/families.c): the last one, it takes any model file the others do
 * not recognise (a Demucs file's header names no family); the catalogue's entries that name no
 * family are its own. */
static sb_status demucs_open(const char *path, const char *name, const sb_logger *log,
                             sb_model **out)
{
	return sb_demucs_model_open(path, name, NULL, log, out);
}

static const char *const demucs_catalog[] = {"", NULL};

const sb_model_family sb_family_demucs = {"demucs", demucs_catalog, NULL, demucs_open, NULL};
