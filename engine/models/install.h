/* Installing a model of the catalogue (models/catalog.h): download its checkpoints, check each
 * against its checksum, convert them in-process (convert/convert.h) and give the model file its
 * name in the user's model folder, all or nothing.
 *
 * Downloads go to a cache folder as "<file>.partial" and are renamed "<file>" only when
 * complete; a broken connection is resumed where it stopped (HTTP Range), up to three tries in
 * one run, and a later run resumes a partial file it finds (a kill, a power cut, Ctrl-C). A
 * server that ignores the range starts the file again. Each complete file is checked against
 * the catalogue's SHA-256 (its start, from the file name, as the reference demucs checks it); a
 * file that fails is removed, downloaded once more from scratch if it had been resumed, and
 * otherwise refused. The converted model is written to a locked temporary file of
 * core/temp_file.h's naming in the model folder, opened as a model (every tensor's shape, finite
 * weights, the stems the catalogue promises) and only then renamed to "<name>.safetensors": an
 * interrupted, corrupt or failed install leaves no file that `stembridge models` would list.
 *
 * libcurl does the transfers: http and https only, redirects followed, the usual proxy variables
 * (http_proxy, https_proxy, no_proxy, ALL_PROXY), a 30 s connect timeout and a stall timeout.
 *
 * Threads: any non-real-time thread; one install per model at a time (a second one for the same
 * files is refused while the first holds the download's lock).
 */
#ifndef SB_INSTALL_H
#define SB_INSTALL_H

#include "models/catalog.h"

#include <stdatomic.h>

typedef enum {
	SB_INSTALL_DOWNLOADING = 0,
	SB_INSTALL_VERIFYING,
	SB_INSTALL_CONVERTING,
	SB_INSTALL_DONE
} sb_install_stage;

typedef struct {
	const char *model;
	sb_install_stage stage;
	const char *stage_name;        /* "downloading", "verifying", "converting", "done" */
	const char *file;              /* the checkpoint in hand */
	int file_index, n_files;       /* 1-based */
	uint64_t file_done, file_total;/* bytes of this file; total 0 while unknown */
	uint64_t done, total;          /* bytes of the whole model (total from the catalogue until
	                                  the server says) */
	double rate;                   /* bytes per second lately, 0 unknown */
	double eta_s;                  /* seconds left for the whole model, < 0 unknown */
	int resumed;                   /* this file continues a partial download */
} sb_install_progress;

typedef struct {
	const char *base_url;   /* NULL: $STEMBRIDGE_MODEL_URL, else the catalogue's base_url */
	const char *model_dir;  /* NULL: the user's model folder ($XDG_DATA_HOME/stembridge/models) */
	const char *cache_dir;  /* NULL: $XDG_CACHE_HOME/stembridge/downloads */
	double stall_s;         /* give up a transfer below 1 KB/s for this long; 0: 60 s */
	int force;              /* install again over an installed model */
	int keep_downloads;     /* keep the checkpoints in the cache once converted */
	const atomic_int *cancel; /* non-zero: stop (a partial download stays for a resume) */
	void (*progress)(void *user, const sb_install_progress *p); /* may be NULL */
	void *progress_user;
	const sb_logger *log;   /* errors: one line each, naming what failed; info: each step */
} sb_install_opts;

/* The model folder installs go to (o->model_dir or the user's), into buf. */
void sb_install_model_dir(const sb_install_opts *o, char *buf, size_t len);

/* Installs catalogue model 'name'; on success path_out (may be NULL) holds the model file.
 * An installed model without force is SB_OK with nothing done. Errors (logged): SB_ERR_MODEL
 * (not in the catalogue), SB_ERR_NETWORK (offline, HTTP error, stalled, connection broken
 * three times), SB_ERR_FORMAT (a checksum that does not match, a checkpoint the converter
 * refuses), SB_ERR_NOSPACE, SB_ERR_IO (a folder that cannot be written), SB_ERR_EXISTS
 * (another install holds the download), SB_ERR_CANCELLED. */
sb_status sb_model_install(const sb_catalog *cat, const char *name, const sb_install_opts *o,
                           char *path_out, size_t len);

/* Removes "<name>.safetensors" from the user's model folder (model_dir, NULL: the default).
 * SB_ERR_MODEL when it is not there (a model installed system-wide is named with its path). */
sb_status sb_model_remove(const char *name, const char *model_dir, const sb_logger *log);

#endif
