/* Fuzz target: the pickle reader of the checkpoint converter (engine/convert/pickle_reader.c),
 * which interprets a checkpoint's data.pkl and runs nothing; the tree it builds is walked with
 * a depth limit, as its callers do. */
#include "fuzz_common.h"

#include "convert/pickle_reader.h"

static void walk(const sbc_pk *v, int depth)
{
	if (!v || depth > 32)
		return;
	char buf[128];
	sbc_pk_describe(v, buf, sizeof buf);
	for (size_t i = 0; i < v->n; i++)
		walk(v->items[i], depth + 1);
	walk(v->a, depth + 1);
	walk(v->b, depth + 1);
	walk(v->state, depth + 1);
	(void)sbc_pk_get(v, "state");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbc_pickle *p = NULL;
	const sbc_pk *root = NULL;
	char err[256];
	if (sbc_pickle_load(data, size, &p, &root, err, sizeof err) == SB_OK) {
		walk(root, 0);
		sbc_pickle_free(p);
	}
	return 0;
}
