/* The RoFormers behind the model seam (models/model.h): a converted file (stembridge-convert
 * MODEL.ckpt --config MODEL.yaml) opened as an sb_model. */
#ifndef SB_ROFORMER_MODEL_H
#define SB_ROFORMER_MODEL_H

#include "models/model.h"

/* Whether a safetensors file holds a RoFormer (its metadata names the family). */
int sb_roformer_is_file(const char *path);

sb_status sb_roformer_model_open(const char *path, const char *name, const sb_logger *log,
                                 sb_model **out);

#endif
