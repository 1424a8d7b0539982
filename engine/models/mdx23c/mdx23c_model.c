/* MDX23C behind the model seam (models/model.h): a converted file (stembridge-convert
 * MODEL.ckpt --config MODEL.yaml) opened as an sb_model on MSST's chunk pipeline
 * (models/msst_demix.h), placed only on devices with the convolution nets' group; and its
 * family (models/families.c). */
#include "models/families.h"
#include "models/mdx23c/mdx23c.h"
#include "models/msst_demix.h"

#include <stdio.h>

static sb_status mx_place(void *net, const sb_exec *dev, const sb_logger *log, void **on)
{
	sb_mdx23c_on *r = NULL;
	const sb_status st = sb_mdx23c_place(net, dev, log, &r);
	*on = r;
	return st;
}
static void mx_unplace(void *on) { sb_mdx23c_unplace(on); }
static void mx_on_stop(void *on, const atomic_int *a, const atomic_int *b)
{
	sb_mdx23c_on_stop(on, a, b);
}
static sb_status mx_forward(void *on, int B, const float *in, float *out)
{
	return sb_mdx23c_forward(on, B, in, out);
}
static void mx_free(void *net) { sb_mdx23c_free(net); }

static sb_status mdx23c_open(const char *path, const char *name, const sb_logger *log,
                             sb_model **out)
{
	*out = NULL;
	sb_mdx23c *net = NULL;
	sb_status st = sb_mdx23c_load(path, name, log, &net);
	if (st != SB_OK)
		return st;
	const sb_msst_net mn = {"MDX23C", net->S, net->stems, 4.0 * net->pass_floats,
	                        4.0 * net->largest_floats, net, mx_place, mx_unplace, mx_on_stop,
	                        mx_forward, mx_free, net->params, NULL, NULL};
	char what[128];
	snprintf(what, sizeof what, "MDX23C (%lld parameters)", (long long)net->params);
	return sb_msst_model_new(&mn, &net->cfg.m, name, path, what, 1u << SB_OPS_CONVNET, out);
}

static const char *const mdx23c_catalog[] = {"mdx23c", NULL};

static int mdx23c_is_file(const char *path)
{
	return sb_msst_file_is(path, mdx23c_catalog);
}

const sb_model_family sb_family_mdx23c = {"mdx23c", mdx23c_catalog, mdx23c_is_file, mdx23c_open,
                                          NULL};
