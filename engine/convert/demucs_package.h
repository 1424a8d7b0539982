/* A Demucs model package as demucs/states.py `serialize_model` writes it and torch.save stores
 * it: {'klass': the model class, 'args': (), 'kwargs': the constructor settings, 'state': the
 * state dict (F16 in the released files), 'training_args': the training config}. This takes the
 * class name, the settings (as metadata strings) and the tensors; the training config and
 * anything else is skipped unread. Only demucs.htdemucs.HTDemucs (Demucs v4) is accepted.
 *
 * Threads: one sbc_package belongs to one thread at a time. */
#ifndef SBC_DEMUCS_PACKAGE_H
#define SBC_DEMUCS_PACKAGE_H

#include "sb_common.h"
#include "convert/tensor.h"

typedef struct {
	char *key;
	char *value;
} sbc_setting;

typedef struct {
	char *name;  /* the state dict's key */
	sbc_tensor t;
} sbc_named_tensor;

typedef struct sbc_package sbc_package;

/* Read and check a checkpoint: every tensor is resolved and bounds-checked here, so that a
 * caller that gets SB_OK can write without further failures from the input. Settings that are
 * not plain values are left out with a warning through log. err: one line, without the path. */
sb_status sbc_package_open(const char *path, const sb_logger *log, sbc_package **out, char *err,
                           size_t errlen);
void sbc_package_free(sbc_package *p);
/* A checkpoint that is a bare state dict (torch.save(model.state_dict()), as the RoFormers are
 * published), or one under 'state_dict', 'state', 'model_state_dict' or 'model' (as MSST's and
 * audio-separator's loaders unwrap them): its tensors, checked as above, no settings, klass
 * "state_dict". */
sb_status sbc_state_open(const char *path, sbc_package **out, char *err, size_t errlen);

const char *sbc_package_klass(const sbc_package *p);      /* "demucs.htdemucs.HTDemucs" */
size_t sbc_package_n_settings(const sbc_package *p);
const sbc_setting *sbc_package_setting_at(const sbc_package *p, size_t i);
const char *sbc_package_setting(const sbc_package *p, const char *key); /* NULL if absent */
size_t sbc_package_n_tensors(const sbc_package *p);
const sbc_named_tensor *sbc_package_tensor_at(const sbc_package *p, size_t i);

#endif
