/* The stem writer: the sink that turns a model's output into files, all or nothing.
 *
 * Each stem goes to a hidden temporary file in its final folder (".<name>.part-XXXXXX", so the
 * rename cannot cross file systems). Nothing gets its final name until commit(), which renames
 * every stem only once all of them are complete and flushed to disk; without overwrite it
 * never replaces a file the user has (renameat2 RENAME_NOREPLACE, or link+unlink). Abort, a
 * failed commit or free without commit removes every temporary file.
 *
 * Names come from a template: {track} {take} {stem} {model} {ext}; a '/' makes folders.
 * WAV stems carry the region's timeline start as the Broadcast-WAV time reference, so a DAW
 * can place them where the region was.
 */
#ifndef SB_STEM_WRITER_H
#define SB_STEM_WRITER_H

#include "core/stream.h"
#include "jobs/engine.h"

#include <stdatomic.h>

typedef struct sb_stem_writer sb_stem_writer;

typedef struct {
	const char *out_dir;
	const char *name_template; /* NULL: "{track}/{stem}.{ext}" */
	const char *track, *take, *model;
	unsigned stems;            /* mask of SB_STEM_*, 0 = all */
	int channels;
	double rate;
	sb_format format;
	int overwrite;
	int64_t timeline_start;    /* -1: unknown */
	const sb_logger *log;
} sb_stem_writer_opts;

/* Expands a template into out (no folder creation). SB_ERR_INVALID for an unknown field or a
 * name that would leave out_dir ("..", an absolute part). */
sb_status sb_expand_template(const char *tmpl, const char *track, const char *take,
                             const char *stem, const char *model, const char *ext,
                             char *out, size_t len);
const char *sb_format_ext(sb_format f);
/* Gives a finished temporary file its final name; without overwrite never replaces an existing
 * file (RENAME_NOREPLACE, or link+unlink where the file system lacks it). 0 or -1 with errno
 * (EEXIST when the name is taken). */
int sb_place_file(const char *from, const char *to, int overwrite);
/* mkdir -p of every folder above the file 'path' (path is restored). 0 or -1 with errno. */
int sb_make_parents(char *path);

/* Works out the final names and checks them: SB_ERR_EXISTS (naming the file) when one is
 * there and overwrite is off; creates the folders; opens the temporary files. */
sb_status sb_stem_writer_new(const sb_stem_writer_opts *o, sb_stem_writer **out);
/* The sink a model writes all its stems to; stems outside the mask are dropped. */
sb_sink *sb_stem_writer_sink(sb_stem_writer *w);
/* Throws away what was written and starts every stem again (a retry on another device). */
sb_status sb_stem_writer_reset(sb_stem_writer *w);
/* Makes stem 'target' the input minus every other stem, so the stems add back to the input
 * (for models whose stems do not by construction). Needs all four stems; streams in blocks.
 * *changed_db: how much the model's own stem changed, in dB relative to the input. */
sb_status sb_stem_writer_residual(sb_stem_writer *w, sb_source *in, int target,
                                  const atomic_int *cancel, double *changed_db);
/* Flushes, syncs and renames every stem. On failure nothing of this job keeps a final name. */
sb_status sb_stem_writer_commit(sb_stem_writer *w);
void sb_stem_writer_free(sb_stem_writer *w); /* removes temporary files if not committed */

int sb_stem_writer_count(const sb_stem_writer *w);
/* For the manifest: the i-th written stem (0 <= i < count). */
typedef struct {
	int stem;           /* SB_STEM_* */
	const char *path;   /* final path */
	double peak, rms;
	int64_t frames;
} sb_stem_info;
void sb_stem_writer_info(const sb_stem_writer *w, int i, sb_stem_info *info);

#endif
