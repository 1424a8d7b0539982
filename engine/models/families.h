/* Model families, registered as backends are (backend/registry.c): each is a folder of models/
 * that defines one sb_model_family, and registering it is one line in families.c. A family says
 * whether a file is one of its own, opens it as an sb_model (written once against the backend
 * interface, on the chunk pipelines of share.h and resident.h), and whether a catalogue model of
 * its own is installed; the operation groups it needs beyond the core (backend.h) are in the
 * models it opens (sb_model_info.ops).
 *
 * Threads: the table is constant; any thread may read it.
 */
#ifndef SB_FAMILIES_H
#define SB_FAMILIES_H

#include "models/model.h"

typedef struct {
	const char *name;          /* "builtin", "roformer", "demucs" */
	/* the catalogue's "family" values it installs (catalog.json; "" where an entry names
	 * none), NULL-terminated */
	const char *const *catalog;
	/* whether the file at path is one of its own (its header says so); NULL: any file no
	 * family before it took, for the last one alone. The built-in's "file" is "". */
	int (*recognise)(const char *path);
	/* opens the file at path as the model 'name' (for messages and info.name) */
	sb_status (*open)(const char *path, const char *name, const sb_logger *log, sb_model **out);
	/* whether catalogue model 'name' is installed; NULL: a "<name>.safetensors" of its own
	 * (recognise) in one of the model folders */
	int (*installed)(const char *name, const char *const *search_path);
} sb_model_family;

/* The family that opens the file at path ("": the built-in). */
const sb_model_family *sb_model_family_of_file(const char *path);
/* The family that installs a catalogue entry of 'family' ("" : none named); NULL: none. */
const sb_model_family *sb_model_family_of_catalog(const char *family);
/* Whether catalogue model 'name' of family f is installed in the model folders. */
int sb_model_family_installed(const sb_model_family *f, const char *name,
                              const char *const *search_path);

#endif
