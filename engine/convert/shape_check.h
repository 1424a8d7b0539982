/* Checks a converted model against ../shared/golden/htdemucs/released-shapes.json: for each
 * released model it lists the constructor settings that differ from HTDemucs's defaults and
 * the name and shape of every tensor. When a checkpoint's settings are one of those models'
 * (its listed settings equal, and every other setting that changes a tensor's shape at its
 * default), every tensor must be there with that shape and no other tensor may be. */
#ifndef SBC_SHAPE_CHECK_H
#define SBC_SHAPE_CHECK_H

#include "convert/demucs_package.h"

/* SB_OK: checked (*matched names the model) or not applicable (*matched is "", and note says
 * why). SB_ERR_MODEL: a tensor differs (err names it and what was expected). SB_ERR_IO /
 * SB_ERR_FORMAT: the json file could not be read. */
sb_status sbc_shapes_check(const char *json_path, const sbc_package *p, char *matched,
                           size_t matchedlen, char *note, size_t notelen, char *err,
                           size_t errlen);

#endif
