/* The "builtin" model: the classic separator of classic.h behind the sb_model seam. It runs
 * on any rate and channel count, so the job runner never resamples for it. */
#include "models/classic/classic_ops.h"
#include "models/families.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	sb_classic_params params;
} classic_model;

static sb_status classic_separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	classic_model *cm = m->impl;
	sb_run_devices rd;
	sb_status st = sb_run_devices_open(ctx, &rd);
	/* one device: a chunk is milliseconds of work, not worth sharing across devices */
	if (st == SB_OK)
		st = sb_classic_run(&rd.ctx.dev[0], &cm->params, &rd.ctx, in, out);
	sb_run_devices_close(&rd);
	return st;
}

static void classic_free(sb_model *m)
{
	free(m->impl);
	free(m);
}

static const sb_model_vtable classic_vt = {classic_separate, classic_free};

static sb_status sb_classic_model_new(const sb_logger *log, sb_model **out)
{
	sb_model *m = calloc(1, sizeof *m);
	classic_model *cm = calloc(1, sizeof *cm);
	if (!m || !cm) {
		free(m);
		free(cm);
		sb_log(log, SB_LOG_ERROR, "builtin: out of memory");
		return SB_ERR_NOMEM;
	}
	sb_classic_params_default(&cm->params);
	m->vt = &classic_vt;
	m->impl = cm;
	snprintf(m->info.name, sizeof m->info.name, "builtin");
	snprintf(m->info.description, sizeof m->info.description,
	         "Built-in classic separator: median-filter HPSS, centre panning, low band; no download");
	m->info.native_rate = 0;
	m->info.n_stems = SB_N_STEMS;
	for (int s = 0; s < SB_N_STEMS; s++)
		m->info.stem_names[s] = sb_stem_names[s];
	m->info.stems = (1u << SB_N_STEMS) - 1;
	m->info.stems_sum = 1; /* "other" is the input minus the three masked stems */
	m->info.default_chunk_frames = 128 * 1024; /* classic_driver.c's 128 hops at 44.1 kHz */
	m->info.ops = 1u << SB_OPS_CLASSIC; /* its chunk is a group of its own (backend.h) */
	*out = m;
	return SB_OK;
}

/* The built-in model's family (models/families.c): no file (its path is ""), nothing to
 * install. */
static int builtin_recognise(const char *path)
{
	return !path[0];
}

static sb_status builtin_open(const char *path, const char *name, const sb_logger *log,
                              sb_model **out)
{
	(void)path;
	(void)name;
	return sb_classic_model_new(log, out);
}

static int builtin_installed(const char *name, const char *const *search_path)
{
	(void)search_path;
	return !strcmp(name, "builtin");
}

const sb_model_family sb_family_builtin = {"builtin", NULL, builtin_recognise, builtin_open,
                                           builtin_installed};
