/* What torch.save writes (torch >= 1.6, the zip format): `<dir>/data.pkl`, a pickle whose
 * tensors are calls of torch._utils._rebuild_tensor_v2 on persistent ids
 * ('storage', torch.<Type>Storage, key, location, numel), and each storage's raw bytes in
 * `<dir>/data/<key>`. This reads the pickle into a value tree (nothing in it is run) and turns
 * the tensor nodes the caller points at into sbc_tensor views of the storage bytes.
 *
 * Threads: one sbc_torch belongs to one thread at a time. */
#ifndef SBC_TORCH_LOAD_H
#define SBC_TORCH_LOAD_H

#include "convert/pickle_reader.h"
#include "sb_common.h"
#include "convert/tensor.h"

typedef struct sbc_torch sbc_torch;

/* Open a checkpoint and read its pickle. On failure err holds one line (without the path):
 * "not a PyTorch checkpoint (...)", the zip's or the pickle's complaint. */
sb_status sbc_torch_open(const char *path, sbc_torch **out, const sbc_pk **root, char *err,
                         size_t errlen);
void sbc_torch_close(sbc_torch *t);

/* Whether v is a tensor as torch pickles one (_rebuild_tensor_v2, _rebuild_parameter...). */
int sbc_torch_is_tensor(const sbc_pk *v);

/* The tensor that node v rebuilds: dtype from the storage class, the view's offset, size and
 * stride checked against the storage's bytes. A contiguous view points into the archive; a
 * strided one is copied (free it with sbc_tensor_clear). */
sb_status sbc_torch_tensor(sbc_torch *t, const sbc_pk *v, sbc_tensor *out, char *err,
                           size_t errlen);

#endif
