/* Restart: what an earlier run left for an input. Its manifest says whether its stems are
 * complete for the file as it is now (skip it without reading it) or are its own from an older
 * file (replace them); the logs say whether it failed with the file as it is now
 * (--skip-failed).
 */
#include "batch.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the manifest at mpath says of this input: complete (skip it), stale (its own stems from
 * an older file: replace them), other (not its manifest, or broken: leave it to the engine,
 * which refuses to overwrite), none. */
sb_batch_prior sb_batch_prior_of(const char *mpath, const char *abs_input,
                                 const struct stat *in_st)
{
	json_error_t je;
	json_t *m = json_load_file(mpath, 0, &je);
	if (!m)
		return access(mpath, F_OK) == 0 ? SB_PRIOR_OTHER : SB_PRIOR_NONE;
	sb_batch_prior r = SB_PRIOR_OTHER;
	const json_t *in = json_object_get(m, "input");
	const char *path = json_string_value(json_object_get(in, "path"));
	const char *status = json_string_value(json_object_get(m, "status"));
	const json_t *stems = json_object_get(m, "stems");
	if (path && !strcmp(path, abs_input) && status && !strcmp(status, "ok") &&
	    json_is_array(stems) && json_array_size(stems) > 0) {
		const json_t *size = json_object_get(in, "size"), *mt = json_object_get(in, "mtime_ns");
		int same = json_is_integer(size) && json_is_integer(mt) &&
		           json_integer_value(size) == (long long)in_st->st_size &&
		           json_integer_value(mt) == sb_batch_mtime_ns(in_st);
		int all_there = 1;
		size_t k;
		const json_t *s;
		json_array_foreach(stems, k, s) {
			const char *p = json_string_value(json_object_get(s, "path"));
			struct stat sst;
			if (!p || stat(p, &sst) != 0 || !S_ISREG(sst.st_mode))
				all_there = 0;
		}
		r = same && all_there ? SB_PRIOR_COMPLETE : SB_PRIOR_STALE;
	}
	json_decref(m);
	return r;
}

static void collect_failure(void *user, json_t *o)
{
	sb_strvec *failed = user;
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *status = json_string_value(json_object_get(o, "status"));
	struct stat st;
	if (path && status && !strcmp(status, "failed") && stat(path, &st) == 0 &&
	    json_integer_value(json_object_get(o, "size")) == (long long)st.st_size &&
	    json_integer_value(json_object_get(o, "mtime_ns")) == sb_batch_mtime_ns(&st))
		sb_strvec_push(failed, path);
}

/* The paths that failed in an earlier run with the file as it is now (--skip-failed). */
void sb_batch_earlier_failures(const char *out_dir, sb_strvec *failed)
{
	sb_batch_each_log_line(out_dir, collect_failure, failed);
	qsort(failed->v, failed->n, sizeof *failed->v, sb_strvec_cmp);
}
