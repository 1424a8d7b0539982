/* The plugin's models (non-real-time, the service thread's): what a Model control value runs,
 * the model list the UI shows, and installs of catalogue models on a thread of their own, one
 * at a time, queued in the order asked for (engine/models/install.h does the work).
 *
 * Threads: every function here is for the service thread, except that the install thread
 * reports into this module's own state under its own lock. Nothing here is touched by run().
 */
#ifndef SB_PLUGIN_MODELS_H
#define SB_PLUGIN_MODELS_H

#include "stembridge.h"

#include <stdbool.h>
#include <stddef.h>

/* What a take runs, from the Model control value and the modelFile property. */
typedef struct {
	char run[4096];        /* the model for the engine: a name or a .safetensors path */
	char title[64];        /* for messages: "HTDemucs" */
	char missing[64];      /* a catalogue model that is not installed (run is then unusable) */
	unsigned stems;        /* the stems it makes (bit SB_STEM_*); 0 unknown */
} sb_model_choice;

void sb_models_resolve(int choice, const char *model_file, const sb_logger *log,
                       sb_model_choice *out);

/* "Install it from the plugin's window (Install), or run `stembridge models install NAME`" */
void sb_models_install_hint(const char *name, char *buf, size_t len);

/* Queues an install (a name the catalogue has, not installed, not queued yet); false with the
 * reason in why otherwise. */
bool sb_models_request(const char *name, const sb_logger *log, char *why, size_t len);
/* Whether 'name' is being installed or waits to be. */
bool sb_models_installing(const char *name);
/* Starts the next queued install when none runs, and collects one that ended: returns true
 * then, with its name, its status and its reason in words. */
bool sb_models_poll(const sb_logger *log, char *name, size_t nlen, sb_status *result, char *why,
                    size_t wlen);
/* The install's status in words and its fraction; returns a number that changes whenever
 * either does (0 before the first install). */
unsigned sb_models_status(char *text, size_t len, float *fraction);
/* Changes each time an install ended (the installed models may differ). */
unsigned sb_models_generation(void);
/* The model list for the UI (plugin/uris.h, SB__modelList): one line per Model control value's
 * model and per other catalogue model: name, title, stems, installed, download bytes. */
void sb_models_list_text(char *buf, size_t len);
/* Cancels a running install and waits for its thread (the last instance going away). */
void sb_models_stop(void);

#endif
