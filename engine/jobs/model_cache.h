/* The model cache: a model kept open from one job to the next (#24, "The model stays loaded"):
 * the second song of a batch, or the next take in a plugin session, reads nothing from the model
 * file and, on a device other than the native CPU, uploads no weights: they are still resident
 * there from the song before.
 *
 * One per engine worker (jobs/engine.c), which runs one job at a time: a keep is used by one
 * thread at a time (its worker's, or a worker about to run a job on one of its devices, which
 * frees it holding the locks of all its devices, so that a device holds one kept model at
 * most). It holds at most one model. A job whose model is another one (its real
 * name or the file it resolves to), or the same file changed on disk (size, modification time,
 * inode), or that runs on other devices or at another precision, frees the kept model before it
 * opens its own, so two models are never held at once. The job runner gives a model back only
 * when its separation succeeded with no device failing on the way, or its job failed before the
 * model ran; after a device failure, an out-of-memory retry, NaN output, a cancel or any other
 * failure of the separation, the model is freed with everything it placed. It goes back at the
 * separation's end, before the stems are mixed back and committed (job_run.h: the next job may
 * separate meanwhile), so a failure of the writing alone (a full disk) keeps it.
 *
 * Devices: a kept model keeps its weights on the devices the engine keeps open (every one but
 * the native CPU, which each job opens for itself: job_run.h), through sb_run_ctx.keep; the
 * engine frees its keeps before it closes its devices.
 */
#ifndef SB_MODEL_CACHE_H
#define SB_MODEL_CACHE_H

#include "backend/device.h"
#include "models/model.h"

typedef struct sb_model_cache sb_model_cache;

sb_model_cache *sb_model_cache_new(void);
/* Frees the kept model (before the devices it ran on are closed). */
void sb_model_cache_free(sb_model_cache *k);

/* The model of a job's resolved part (models/model.h: sb_model_choice) on the devices of set
 * (may be NULL) at bf16 or not: the kept one when it is the same model, its file unchanged on
 * disk, on the same devices at the same precision (*kept = 1); else the kept one is freed and
 * the model opened (*kept = 0). k NULL: opened for the job alone. The job gives the model back
 * with sb_model_cache_done(), whatever happened. */
sb_status sb_model_cache_open(sb_model_cache *k, const sb_model_part *part,
                             const sb_device_set *set, int bf16, const sb_logger *log,
                             sb_model **out, int *kept);
/* 1: a model is kept (not lent to a job). k may be NULL. */
int sb_model_cache_holds(const sb_model_cache *k);
/* Frees the kept model now (a job about to open models of its own). k may be NULL. */
void sb_model_cache_drop(sb_model_cache *k);
/* The job is done with m (from sb_model_cache_open): kept for the next job when keep is 1,
 * else freed. */
void sb_model_cache_done(sb_model_cache *k, sb_model *m, int keep);
#endif
