/* Fuzz target: the plugin's state restore (plugin/state.c), which reads what a session file or
 * a preset hands it (a host may give any type and size for any key). The input is a list of
 * records, each a key, a type and a value; restore() reads them, then save() must store only
 * well-formed values again. The plugin is linked in and driven through its LV2 descriptor, as a
 * host drives it. */
#include "fuzz_common.h"

#include "uris.h"

#include <lv2/atom/atom.h>
#include <lv2/core/lv2.h>
#include <lv2/state/state.h>
#include <lv2/log/log.h>
#include <lv2/urid/urid.h>
#include <lv2/worker/worker.h>

#include <stdarg.h>

#include <stdlib.h>
#include <string.h>

LV2_SYMBOL_EXPORT const LV2_Descriptor *lv2_descriptor(uint32_t index);

static const char *uris[64];
static int n_uris;

static LV2_URID map_uri(LV2_URID_Map_Handle h, const char *uri)
{
	(void)h;
	for (int i = 0; i < n_uris; i++)
		if (!strcmp(uris[i], uri))
			return (LV2_URID)i + 1;
	if (n_uris == 64)
		return 0;
	uris[n_uris] = strdup(uri);
	return (LV2_URID)++n_uris;
}

static const char *const keys[] = {
	SB__deviceKey, SB__deviceName, SB__devicePort, SB__mode, SB__model, SB__stemMask,
	SB__maxMinutes, SB__trackName, SB__manifest, SB__outputDir, SB__modelFile,
	"urn:stembridge:fuzz:unknown", SB__instanceId, SB__lastTake,
};
static const char *const types[] = {
	LV2_ATOM__String, LV2_ATOM__Path, LV2_ATOM__Int, LV2_ATOM__Float, LV2_ATOM__Long,
	LV2_ATOM__Bool, LV2_ATOM__Double, LV2_ATOM__URID, LV2_ATOM__Chunk,
};
#define N_KEYS (sizeof keys / sizeof keys[0])
#define N_TYPES (sizeof types / sizeof types[0])

typedef struct {
	LV2_URID key, type;
	const uint8_t *value;
	size_t size;
} record;

static record recs[64];
static int n_recs;

static const void *retrieve(LV2_State_Handle h, uint32_t key, size_t *size, uint32_t *type,
                            uint32_t *flags)
{
	(void)h;
	for (int i = n_recs - 1; i >= 0; i--)
		if (recs[i].key == key) {
			*size = recs[i].size;
			*type = recs[i].type;
			*flags = LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE;
			return recs[i].value;
		}
	return NULL;
}

static LV2_State_Status store(LV2_State_Handle h, uint32_t key, const void *value, size_t size,
                              uint32_t type, uint32_t flags)
{
	(void)h;
	(void)key;
	(void)flags;
	/* what save() stores must be well-formed: strings and paths NUL-terminated */
	if ((type == map_uri(NULL, LV2_ATOM__String) || type == map_uri(NULL, LV2_ATOM__Path)) &&
	    (size == 0 || ((const char *)value)[size - 1] != '\0'))
		abort();
	return LV2_STATE_SUCCESS;
}

static char *abstract_path(LV2_State_Map_Path_Handle h, const char *p)
{
	(void)h;
	return strdup(p);
}

static char *absolute_path(LV2_State_Map_Path_Handle h, const char *p)
{
	(void)h;
	if (p[0] == '/')
		return strdup(p);
	char *out = malloc(strlen(p) + 16);
	if (out)
		strcat(strcpy(out, "/tmp/sb-state/"), p);
	return out;
}

/* log: the plugin's warnings about damaged values are its expected answer here; kept out of
 * the output, which long runs would fill (gigabytes in ten minutes) */
static int log_vprintf(LV2_Log_Handle h, LV2_URID type, const char *fmt, va_list ap)
{
	(void)h;
	(void)type;
	(void)fmt;
	(void)ap;
	return 0;
}

static int log_printf(LV2_Log_Handle h, LV2_URID type, const char *fmt, ...)
{
	(void)h;
	(void)type;
	(void)fmt;
	return 0;
}

/* work:schedule (required): the target never arms the plugin, so nothing is ever scheduled */
static LV2_Worker_Status schedule(LV2_Worker_Schedule_Handle h, uint32_t size, const void *d)
{
	(void)h;
	(void)size;
	(void)d;
	return LV2_WORKER_ERR_NO_SPACE;
}

static void free_path(LV2_State_Free_Path_Handle h, char *p)
{
	(void)h;
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static LV2_Handle inst;
	static const LV2_State_Interface *state;
	static LV2_URID_Map map = {NULL, map_uri};
	static LV2_State_Map_Path mp = {NULL, abstract_path, absolute_path};
	static LV2_State_Free_Path fp = {NULL, free_path};
	static const LV2_Feature f_map = {LV2_URID__map, &map};
	static const LV2_Feature f_mp = {LV2_STATE__mapPath, &mp};
	static const LV2_Feature f_fp = {LV2_STATE__freePath, &fp};
	static LV2_Worker_Schedule ws = {NULL, schedule};
	static const LV2_Feature f_ws = {LV2_WORKER__schedule, &ws};
	static LV2_Log_Log lg = {NULL, log_printf, log_vprintf};
	static const LV2_Feature f_log = {LV2_LOG__log, &lg};
	static const LV2_Feature *feats[] = {&f_map, &f_ws, &f_log, NULL};
	static const LV2_Feature *state_feats[] = {&f_mp, &f_fp, NULL};
	const LV2_Descriptor *d = lv2_descriptor(1);
	if (!inst) {
		inst = d->instantiate(d, 48000, "/nonexistent/bundle/", feats);
		state = inst ? d->extension_data(LV2_STATE__interface) : NULL;
		if (!state)
			abort();
	}
	n_recs = 0;
	size_t at = 0;
	while (at + 3 <= size && n_recs < 64) {
		record *r = &recs[n_recs++];
		r->key = map_uri(NULL, keys[data[at] % N_KEYS]);
		r->type = map_uri(NULL, types[data[at + 1] % N_TYPES]);
		r->size = data[at + 2];
		at += 3;
		if (r->size > size - at)
			r->size = size - at;
		r->value = data + at;
		at += r->size;
	}
	state->restore(inst, retrieve, NULL, 0, state_feats);
	state->save(inst, store, NULL, 0, state_feats);
	return 0;
}
