/* Fuzz target: the pickle reader of the checkpoint converter (engine/convert/pickle_reader.c),
 * which interprets a checkpoint's data.pkl and runs nothing; the tree it builds is walked with
 * a depth limit and a budget of visits, as pickle_reader.h asks of every walker (the memo lets
 * a stream share nodes, so a depth limit alone allows 2^depth visits). */
#include "fuzz_common.h"

#include "convert/pickle_reader.h"

static long budget;

static void walk(const sbc_pk *v, int depth)
{
	if (!v || depth > 32 || --budget < 0)
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
		budget = 100000;
		walk(root, 0);
		sbc_pickle_free(p);
	}
	return 0;
}
