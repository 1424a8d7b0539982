/* A model family for the tests of the family and operation tables (-Dtoy_family=true): what a
 * new family touches (this folder, its line in models/families.c and in models/meson.build) and
 * what an optional operation group looks like to the models (SB_OPS_TOY: the CPU backend has
 * it, the others leave it out, so the job runner places a toy model on the CPU alone).
 *
 * A toy model file is a safetensors file whose header names "family": "toy" and no tensor. Its
 * model writes vocals = half the input and other = the input minus that, on the device, a
 * block at a time through toy_mix.
 */
#include "models/demucs/safetensors.h"
#include "models/families.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 65536 /* frames a pass */

static sb_status toy_separate(sb_model *m, const sb_run_ctx *ctx, sb_source *in, sb_sink *out)
{
	(void)m;
	sb_run_devices rd;
	sb_status st = sb_run_devices_open(ctx, &rd);
	if (st != SB_OK)
		return st;
	const sb_exec *x = &rd.ctx.dev[0];
	const size_t n = (size_t)BLOCK * (size_t)in->channels;
	float *host = malloc(sizeof(float) * n * 2);
	sb_bbuf *buf = NULL;
	if (!host)
		st = SB_ERR_NOMEM;
	if (st == SB_OK)
		st = x->be->alloc(x->d, n * 3, &buf);
	const sb_dv mix = {buf, 0}, vocals = {buf, n}, other = {buf, 2 * n};
	for (int64_t at = 0; st == SB_OK && at < in->frames; at += BLOCK) {
		if (ctx && ctx->cancel && atomic_load(ctx->cancel)) {
			st = SB_ERR_CANCELLED;
			break;
		}
		const int64_t f = in->frames - at < BLOCK ? in->frames - at : BLOCK;
		const size_t k = (size_t)f * (size_t)in->channels;
		st = in->read(in, at, f, host);
		if (st != SB_OK)
			break;
		x->be->upload(x->d, mix, host, k);
		x->be->ops->toy_mix(x->d, mix, mix, vocals, k, 0.5f, 0.0f);
		x->be->ops->toy_mix(x->d, mix, vocals, other, k, 1.0f, -1.0f);
		x->be->download(x->d, host, vocals, k);
		x->be->download(x->d, host + n, other, k);
		st = x->be->finish(x->d);
		if (st == SB_OK)
			st = out->write(out, SB_STEM_VOCALS, host, f);
		if (st == SB_OK)
			st = out->write(out, SB_STEM_OTHER, host + n, f);
		if (st == SB_OK && ctx && ctx->progress)
			ctx->progress(ctx->progress_user, (double)(at + f) / (double)in->frames,
			              "separating");
	}
	if (buf)
		x->be->release(x->d, buf);
	free(host);
	sb_run_devices_close(&rd);
	return st;
}

static void toy_free(sb_model *m)
{
	free(m);
}

static const sb_model_vtable toy_vt = {toy_separate, toy_free};

static int toy_recognise(const char *path)
{
	sb_safetensors *st = NULL;
	if (sb_safetensors_open(path, NULL, &st) != SB_OK)
		return 0;
	const char *f = sb_safetensors_meta(st, "family");
	const int yes = f && !strcmp(f, "toy");
	sb_safetensors_close(st);
	return yes;
}

static sb_status toy_open(const char *path, const char *name, const sb_logger *log,
                          sb_model **out)
{
	*out = NULL;
	if (!toy_recognise(path)) {
		sb_log(log, SB_LOG_ERROR, "%s: not a toy model file", path);
		return SB_ERR_MODEL;
	}
	sb_model *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR_NOMEM;
	m->vt = &toy_vt;
	sb_model_info *info = &m->info;
	snprintf(info->name, sizeof info->name, "%s", name);
	snprintf(info->path, sizeof info->path, "%s", path);
	snprintf(info->description, sizeof info->description,
	         "Toy (tests): vocals = half the input, other = the rest");
	info->n_stems = 2;
	info->stem_names[0] = sb_stem_names[SB_STEM_VOCALS];
	info->stem_names[1] = sb_stem_names[SB_STEM_OTHER];
	info->stems = 1u << SB_STEM_VOCALS | 1u << SB_STEM_OTHER;
	info->stems_sum = 1;
	info->default_chunk_frames = BLOCK;
	info->ops = 1u << SB_OPS_TOY; /* placed only where toy_mix is */
	*out = m;
	return SB_OK;
}

static const char *const toy_catalog[] = {"toy", NULL};

const sb_model_family sb_family_toy = {"toy", toy_catalog, toy_recognise, toy_open, NULL};
