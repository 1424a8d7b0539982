/* SCNet behind the model seam (models/model.h): a converted file (stembridge-convert
 * MODEL.ckpt --config MODEL.yaml) opened as an sb_model on MSST's chunk pipeline
 * (models/msst_demix.h), placed only on devices with the LSTM and convolution nets' groups;
 * and its family (models/families.c). */
#include "models/families.h"
#include "models/msst_demix.h"
#include "models/scnet/scnet.h"

#include <stdio.h>

static sb_status sc_place(void *net, const sb_exec *dev, const sb_logger *log, void **on)
{
	sb_scnet_on *r = NULL;
	const sb_status st = sb_scnet_place(net, dev, log, &r);
	*on = r;
	return st;
}
static void sc_unplace(void *on) { sb_scnet_unplace(on); }
static void sc_on_stop(void *on, const atomic_int *a, const atomic_int *b)
{
	sb_scnet_on_stop(on, a, b);
}
static sb_status sc_forward(void *on, int B, const float *in, float *out)
{
	return sb_scnet_forward(on, B, in, out);
}
static void sc_free(void *net) { sb_scnet_free(net); }

static sb_status scnet_open(const char *path, const char *name, const sb_logger *log,
                            sb_model **out)
{
	*out = NULL;
	sb_scnet *net = NULL;
	sb_status st = sb_scnet_load(path, name, log, &net);
	if (st != SB_OK)
		return st;
	const sb_msst_net mn = {"SCNet", net->S, net->n_src, 4.0 * net->pass_floats,
	                        4.0 * net->largest_floats, net, sc_place, sc_unplace, sc_on_stop,
	                        sc_forward, sc_free, net->params, NULL, NULL};
	char what[128];
	snprintf(what, sizeof what, "SCNet (%lld parameters)", (long long)net->params);
	return sb_msst_model_new(&mn, &net->cfg.m, name, path, what,
	                         1u << SB_OPS_LSTM | 1u << SB_OPS_CONVNET, out);
}

static const char *const scnet_catalog[] = {"scnet", NULL};

static int scnet_is_file(const char *path)
{
	return sb_msst_file_is(path, scnet_catalog);
}

const sb_model_family sb_family_scnet = {"scnet", scnet_catalog, scnet_is_file, scnet_open, NULL};
