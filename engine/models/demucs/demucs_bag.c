/* A bag of HTDemucs models from one safetensors file (format in demucs.h); a single model is a
 * bag of one with weights all ones. Mirrors demucs/apply.py BagOfModels: every member must
 * have the same sources, sample rate and audio channels. */
#include "models/demucs/demucs_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_demucs_bag_free(sb_demucs_bag *bag)
{
	if (!bag)
		return;
	for (int k = 0; k < bag->n; k++)
		sb_htdemucs_free(bag->nets[k]);
	free(bag->nets);
	free(bag->weights);
	free(bag);
}

const sb_htdemucs *sb_demucs_bag_net(const sb_demucs_bag *bag, int k)
{
	return bag && k >= 0 && k < bag->n ? bag->nets[k] : NULL;
}

/* "1,0,0,0;0,1,0,0;..." into weights[K][S] */
static sb_status parse_weights(const char *s, int K, int S, double *w, const char *what,
                               const char *path, const sb_logger *log)
{
	const char *p = s;
	for (int k = 0; k < K; k++) {
		for (int i = 0; i < S; i++) {
			char *end;
			while (*p == ' ')
				p++;
			const double v = strtod(p, &end);
			if (end == p || !isfinite(v) || v < 0)
				goto bad;
			w[k * S + i] = v;
			p = end;
			while (*p == ' ')
				p++;
			const char want = i + 1 < S ? ',' : k + 1 < K ? ';' : 0;
			if (*p != want)
				goto bad;
			if (want)
				p++;
		}
	}
	return SB_OK;
bad:
	sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"bag_weights\" = \"%s\": expected %d rows "
	       "separated by ';' of %d non-negative numbers separated by ','", what, path, s, K, S);
	return SB_ERR_MODEL;
}

sb_status sb_demucs_bag_open(const char *path, const char *name, const sb_logger *log,
                             sb_demucs_bag **out)
{
	*out = NULL;
	sb_safetensors *st;
	sb_status status = sb_safetensors_open(path, log, &st);
	if (status != SB_OK)
		return status;
	sb_demucs_bag *bag = calloc(1, sizeof *bag);
	if (!bag) {
		sb_safetensors_close(st);
		return SB_ERR_NOMEM;
	}
	const char *bs = sb_safetensors_meta(st, "bag");
	int K = 1;
	if (bs) {
		char *end;
		const long v = strtol(bs, &end, 10);
		if (end == bs || *end || v < 1 || v > 64) {
			sb_log(log, SB_LOG_ERROR, "%s: %s: metadata \"bag\" = \"%s\": expected the number of "
			       "models, 1 to 64", name, path, bs);
			status = SB_ERR_MODEL;
			goto fail;
		}
		K = (int)v;
	}
	bag->nets = calloc((size_t)K, sizeof *bag->nets);
	if (!bag->nets) {
		status = SB_ERR_NOMEM;
		goto fail;
	}
	for (int k = 0; k < K; k++) {
		char prefix[16] = "";
		char what[128];
		if (bs)
			snprintf(prefix, sizeof prefix, "%d.", k);
		if (bs)
			snprintf(what, sizeof what, "%s (model %d of %d)", name, k + 1, K);
		else
			snprintf(what, sizeof what, "%s", name);
		sb_htdemucs_config cfg;
		status = sb_htdemucs_config_read(st, prefix, what, log, &cfg);
		if (status == SB_OK)
			status = sb_htdemucs_new(st, prefix, &cfg, what, log, &bag->nets[k]);
		if (status != SB_OK)
			goto fail;
		bag->n++;
		if (k > 0) {
			const sb_htdemucs_config *a = sb_htdemucs_cfg(bag->nets[0]);
			int same = a->n_sources == cfg.n_sources && a->samplerate == cfg.samplerate &&
			           a->audio_channels == cfg.audio_channels;
			for (int i = 0; same && i < cfg.n_sources; i++)
				same = !strcmp(a->sources[i], cfg.sources[i]);
			if (!same) {
				sb_log(log, SB_LOG_ERROR, "%s: %s: model %d of the bag differs from model 1 in its "
				       "sources, sample rate or audio channels", name, path, k + 1);
				status = SB_ERR_MODEL;
				goto fail;
			}
		}
	}
	const sb_htdemucs_config *c0 = sb_htdemucs_cfg(bag->nets[0]);
	const int S = c0->n_sources;
	bag->weights = malloc(sizeof(double) * (size_t)K * S);
	if (!bag->weights) {
		status = SB_ERR_NOMEM;
		goto fail;
	}
	for (int i = 0; i < K * S; i++)
		bag->weights[i] = 1.0;
	const char *ws = sb_safetensors_meta(st, "bag_weights");
	if (ws && (status = parse_weights(ws, K, S, bag->weights, name, path, log)) != SB_OK)
		goto fail;
	for (int i = 0; i < S; i++) {
		double tot = 0;
		for (int k = 0; k < K; k++)
			tot += bag->weights[k * S + i];
		if (tot <= 0) {
			sb_log(log, SB_LOG_ERROR, "%s: %s: \"bag_weights\" give source \"%s\" no weight in "
			       "any model", name, path, c0->sources[i]);
			status = SB_ERR_MODEL;
			goto fail;
		}
	}
	sb_safetensors_close(st);
	*out = bag;
	return SB_OK;
fail:
	if (status == SB_ERR_NOMEM)
		sb_log(log, SB_LOG_ERROR, "%s: out of memory", name);
	sb_safetensors_close(st);
	sb_demucs_bag_free(bag);
	return status;
}
