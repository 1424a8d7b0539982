/* A RoFormer behind the sb_model seam (models/model.h): a converted file (stembridge-convert
 * MODEL.ckpt --config MODEL.yaml) opened as an sb_model on MSST's chunk pipeline
 * (models/msst_demix.h). */
#include "models/families.h"
#include "models/msst_demix.h"
#include "models/roformer/roformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the net as the pipeline drives it */
static sb_status rf_place(void *net, const sb_exec *dev, const sb_logger *log, void **on)
{
	sb_roformer_on *r = NULL;
	const sb_status st = sb_roformer_place(net, dev, log, &r);
	*on = r;
	return st;
}
static void rf_unplace(void *on) { sb_roformer_unplace(on); }
static void rf_on_stop(void *on, const atomic_int *a, const atomic_int *b)
{
	sb_roformer_on_stop(on, a, b);
}
static sb_status rf_forward(void *on, int B, const float *in, float *out)
{
	return sb_roformer_forward(on, B, in, out);
}
static void rf_free(void *net) { sb_roformer_free(net); }
static sb_status rf_submit(void *on, int B, const float *in, float *out, sb_resident_pass *pass)
{
	return sb_roformer_submit(on, B, in, out, pass);
}
static sb_status rf_collect(void *on, sb_resident_pass *pass)
{
	return sb_roformer_collect(on, pass);
}

static sb_status sb_roformer_model_open(const char *path, const char *name, const sb_logger *log,
                                        sb_model **out)
{
	*out = NULL;
	sb_roformer *net = NULL;
	sb_status st = sb_roformer_load(path, name, log, &net);
	if (st != SB_OK)
		return st;
	const sb_rf_config *c = &net->cfg;
	/* a chunk's tokens, q k v and gates, attention output and feed-forward; the feed-forward's
	 * hidden layer the largest buffer */
	const double tokens = (double)net->frames * net->nb;
	const sb_msst_net mn = {
		c->family == SB_RF_MEL ? "Mel-Band RoFormer" : "BS-RoFormer", net->ch, net->n_stems,
		4.0 * tokens * (3.0 * c->dim + 3.0 * net->inner + c->heads + net->inner + net->hidden),
		4.0 * tokens * net->hidden, net, rf_place, rf_unplace, rf_on_stop, rf_forward, rf_free,
		net->params, rf_submit, rf_collect};
	char what[128];
	snprintf(what, sizeof what, "%s (%lld parameters)", mn.label, (long long)net->params);
	return sb_msst_model_new(&mn, &c->m, name, path, what, 0, out);
}

/* The RoFormers' family (models/families.c): a file whose header names one, and the
 * catalogue's entries of either. */
static const char *const roformer_catalog[] = {"bs_roformer", "mel_band_roformer", NULL};

static int sb_roformer_is_file(const char *path)
{
	return sb_msst_file_is(path, roformer_catalog);
}

const sb_model_family sb_family_roformer = {"roformer", roformer_catalog, sb_roformer_is_file,
                                            sb_roformer_model_open, NULL};
