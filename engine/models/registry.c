/* Model registry: maps a model name to the family that opens it. */
#include "classic/classic.h"
#include "models/model.h"

#include <string.h>

sb_status sb_model_open(const char *name, const char *const *search_path, const sb_logger *log,
                        sb_model **out)
{
	(void)search_path;
	if (!name || !*name || strcmp(name, "builtin") == 0)
		return sb_classic_model_new(log, out);
	sb_log(log, SB_LOG_ERROR, "unknown model '%s' (installed: builtin)", name);
	return SB_ERR_MODEL;
}
