/* How a model's constructor settings become safetensors metadata strings, the forms the golden
 * files use: ints in decimal ("48"), floats as Python's repr ("0.2", "4.0", "1e-05"), bools
 * "true"/"false", None "none", strings as they are, lists joined by commas
 * ("drums,bass,other,vocals"), and a fractions.Fraction as str(Fraction) does ("39/5"). */
#ifndef SBC_SETTINGS_FORMAT_H
#define SBC_SETTINGS_FORMAT_H

#include "convert/pickle_reader.h"

#include <stddef.h>

/* Python's repr of a float: the shortest string that reads back to the same double. */
void sbc_format_double(double v, char *buf, size_t len);

/* A setting's value as a metadata string; NULL (and why in `why`) when it is not a plain
 * value: an object, a nested container, a list item with a comma in it. malloc'd. */
char *sbc_format_setting(const sbc_pk *v, char *why, size_t whylen);

#endif
