/* Fuzz target: the model catalogue (engine/models/catalog.c), which STEMBRIDGE_CATALOG or a
 * data folder can replace: every field checked, every model and file looked at. */
#include "fuzz_common.h"

#include "models/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sb_catalog *c = NULL;
	if (sb_catalog_parse((const char *)data, size, "fuzz", NULL, &c) != SB_OK)
		return 0;
	for (int i = 0; i < sb_catalog_count(c); i++) {
		const sb_catalog_model *m = sb_catalog_at(c, i);
		(void)sb_catalog_find(c, m->name);
		for (int k = 0; k < m->n_files; k++)
			(void)m->files[k].sha256[0];
	}
	(void)sb_catalog_base_url(c);
	sb_catalog_free(c);
	return 0;
}
