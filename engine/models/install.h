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
 * io/temp_file.h's naming in the model folder, opened as a model (every tensor's shape, finite
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

/* sb_install_opts, sb_install_progress, sb_model_install() and sb_model_remove():
 * stembridge.h. */


#endif
