/* The job manifest: one JSON file per job (jansson) that says what went in, what came out and
 * where it ran, plus a plain "stems.txt" beside it for readers without a JSON parser (Ardour
 * 7's Lua): a line "timeline_start N" then one absolute stem path per line.
 *
 * Both are part of the job's commit (stem_writer.h): written to temporary names with the stems
 * and renamed only when every file is complete, so a manifest is never without its stems nor
 * stems without their manifest. The JSON keys (version 1):
 *   stembridge, manifest_version, status ("ok" | "failed"), error,
 *   input {path, size, mtime_ns (the file as it was read: a batch re-run skips an input whose
 *         manifest is ok and whose file still has this size and time), frames, channels, rate,
 *         seconds, format, peak_dbfs (null: digital silence), silent (below -90 dBFS
 *         throughout: the stems are silent too)},
 *   timeline_start (samples or null), take, track,
 *   model {name, requested, description, shifts, overlap}: name is the model that ran, never
 *   "auto"; requested is what the job asked for,
 *   device {requested, used, used_id, used_name, fell_back, reason, devices: [{id, key, name,
 *           segments, seconds, dropped}] when one file was shared among devices},
 *   events [ {t, what} ... ]  every step down the device ladder, in order,
 *   stems [ {stem, path, frames, peak, rms, peak_dbfs} ... ],
 *   timings {load_s, separate_s, write_s, total_s, realtime_factor}
 */
#ifndef SB_MANIFEST_H
#define SB_MANIFEST_H

#include "io/stem_writer.h"

/* one device's share of a job that several devices shared */
typedef struct {
	const char *id, *key, *name;
	long segments;              /* units of work it finished */
	double seconds;             /* its busy time */
	int dropped;                /* it failed and left the rest to the others */
} sb_manifest_device;

typedef struct {
	const char *status;         /* "ok", "failed" */
	const char *error;          /* NULL when ok */
	const char *input_path;     /* NULL for memory input */
	int64_t input_size;         /* bytes, -1 unknown (memory input) */
	int64_t input_mtime_ns;     /* modification time, ns since the epoch, -1 unknown */
	int64_t frames;
	int channels;
	double rate;
	const char *input_format;
	double input_peak;          /* the largest |sample| of the input */
	int input_silent;           /* below -90 dBFS throughout: the stems are silent too */
	int64_t timeline_start;
	const char *track, *take;
	const char *model, *model_description;
	const char *model_requested;  /* what the job asked for ("auto", a name, a path) */
	int shifts;                 /* as the job asked; 0 = none */
	double overlap;             /* 0 = the model's default */
	const char *device_requested, *device_used_key, *device_used_id, *device_used_name;
	const sb_manifest_device *devices; /* every device's share, n_devices of them (0: none
	                                      to tell: one device, no segments) */
	int n_devices;
	int fell_back;
	const char *fallback_reason;
	/* the matrix products: what the job asked for ("fp32", "bf16"), what the first device ran
	 * them in and how (its backend's words) */
	const char *precision_requested, *precision, *products;
	const char *const *events;  /* n_events strings */
	int n_events;
	const sb_stem_writer *stems;/* NULL on failure */
	const char *const *stem_model; /* by canonical stem: the model that made it (NULL: all
	                                  by 'model') */
	double load_s, separate_s, write_s, total_s;
} sb_manifest;

/* SB_MANIFEST_NAME and sb_manifest_input_path(): stembridge.h. */

/* stems.txt's path for a manifest path: "...manifest.json" -> "...stems.txt", otherwise the
 * manifest path with ".stems.txt" appended. */
void sb_manifest_stems_txt_path(const char *manifest_path, char *out, size_t len);

/* The JSON text (newline-terminated) and, when m->stems is set, stems.txt's text; stem paths
 * are the absolute paths the stems will have once committed. The caller frees both.
 * SB_ERR_NOMEM only. */
sb_status sb_manifest_render(const sb_manifest *m, char **json, char **stems_txt);

#endif
