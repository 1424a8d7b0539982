/* The stem writer: the sink that turns a model's output into files, all or nothing.
 *
 * Each stem goes to a temporary file of our naming in its final folder (io/temp_file.h:
 * ".<name>.part-<pid>-XXXXXX", locked while this writer lives), and so do the job's other files
 * (the manifest and stems.txt, added with sb_stem_writer_add_file). Nothing gets its final name
 * until commit(), which syncs every file, renames them all (never replacing a file the user has
 * unless overwrite is set) and syncs their folders; if any rename or sync fails, what was
 * renamed is removed again. Abort, a failed commit or free without commit removes every
 * temporary file. Before creating its own, the writer removes stale temporary files that an
 * interrupted run left in the folders it writes to (one warning line per folder).
 *
 * Every sample is checked: a NaN or an infinity fails the write with SB_ERR_NONFINITE, and
 * sb_stem_writer_nonfinite() says in which stem and where. Nothing is committed after that.
 *
 * Formats: 32-bit float WAV through io/wav_writer.c (a header every reader takes without a
 * warning, nothing that changes from run to run); 16/24-bit WAV and 24-bit FLAC through
 * libsndfile. WAV stems carry the region's timeline start as the Broadcast-WAV time reference,
 * so a DAW can place them where the region was.
 *
 * Names come from a template: {track} {take} {stem} {model} {ext}; a '/' makes folders.
 * Threads: one writer, one thread (the job's).
 */
#ifndef SB_STEM_WRITER_H
#define SB_STEM_WRITER_H

#include "io/stream.h"
#include "io/temp_file.h"

#include <stdatomic.h>

typedef struct sb_stem_writer sb_stem_writer;

typedef struct {
	const char *out_dir;
	const char *name_template; /* NULL: "{track}/{stem}.{ext}" */
	const char *track, *take, *model;
	unsigned stems;            /* mask of canonical stems to write (bit SB_STEM_*); 0: the four
	                              standard ones */
	int channels;
	double rate;
	int64_t frames;            /* the length every stem must have; 0: not checked */
	sb_format format;
	int overwrite;
	int64_t timeline_start;    /* -1: unknown */
	const sb_logger *log;
} sb_stem_writer_opts;

/* sb_expand_template() and sb_track_name(): stembridge.h. */


/* Works out the final names and checks them: SB_ERR_EXISTS (naming the file) when one is
 * there and overwrite is off; creates the folders; cleans stale temporary files there; opens
 * the temporary files. */
sb_status sb_stem_writer_new(const sb_stem_writer_opts *o, sb_stem_writer **out);
/* The sink a model writes its stems to (any canonical index below SB_MAX_STEMS); stems
 * outside the mask are dropped. */
sb_sink *sb_stem_writer_sink(sb_stem_writer *w);
/* Throws away what was written and starts every stem again (a retry on another device). */
sb_status sb_stem_writer_reset(sb_stem_writer *w);
/* After SB_ERR_NONFINITE: the stem and the first frame that was not finite. 0 when none. */
int sb_stem_writer_nonfinite(const sb_stem_writer *w, int *stem, int64_t *frame);
/* Makes stem 'target' the input minus every other stem written, so that the written stems add
 * back to the input exactly (stems left out fold into the target). Streams in blocks.
 * *changed_db: how much the model's own stem changed, in dB relative to the input. */
sb_status sb_stem_writer_residual(sb_stem_writer *w, sb_source *in, int target,
                                  const atomic_int *cancel, double *changed_db);
/* Adds a non-audio file (the manifest, stems.txt) to the commit: checked like a stem
 * (SB_ERR_EXISTS without overwrite), written to a temporary file and synced now, renamed by
 * commit() with the stems. */
sb_status sb_stem_writer_add_file(sb_stem_writer *w, const char *final, const void *data,
                                  size_t len);
/* The absolute path a stem or file will have once committed (its folder exists already). */
void sb_stem_writer_abs_path(const char *final, char *out, size_t len);
/* Syncs and renames every stem and added file, then syncs their folders. On failure nothing
 * of this job keeps a final name. */
sb_status sb_stem_writer_commit(sb_stem_writer *w);
void sb_stem_writer_free(sb_stem_writer *w); /* removes temporary files if not committed */

int sb_stem_writer_count(const sb_stem_writer *w);
/* For the manifest: the i-th written stem (0 <= i < count), in canonical order. */
typedef struct {
	int stem;           /* SB_STEM_* */
	const char *name;   /* its name */
	const char *path;   /* final path */
	double peak, rms;
	int64_t frames;
} sb_stem_info;
void sb_stem_writer_info(const sb_stem_writer *w, int i, sb_stem_info *info);

#endif
