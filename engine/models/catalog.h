/* The model catalogue: which models `stembridge models install` (and the plugin's UI) can
 * download, from where, with which checksums, and which stems each one makes. It is one data
 * file shipped with the project (engine/models/catalog.json, installed as
 * share/stembridge/catalog.json and compiled in as a fallback), not code; STEMBRIDGE_CATALOG
 * names another file (tests, mirrors with other models).
 *
 * Format (catalog_version 1): {"catalog_version": 1, "base_url": URL, "models": [{"name",
 * "title", "description", "stems": [canonical stem names], "auto": rank or absent,
 * "bag_weights": "r;r;..." (several files), "files": [{"path": relative URL path, "bytes",
 * "approximate", "sha256": hex}]}]}. Every file needs a checksum: its full "sha256", or a file
 * name "<signature>-<hex>.<ext>" whose hex (8 digits or more) is the start of its SHA-256, as
 * the reference demucs package checks its checkpoints; or, where the publisher gives none
 * (the RoFormers on GitHub releases), "unverified": true with its exact "bytes" (checked), the
 * SHA-256 computed and printed at install, and the conversion's full load against the config
 * as the check. Anything else is refused with one line naming the file and the entry.
 *
 * The RoFormers: "family": "bs_roformer" | "mel_band_roformer", their files a checkpoint and
 * one with "role": "config" (the YAML); a file's "url" is where it is published (an absolute
 * http(s) URL; a mirror given at install time serves its "path" instead); "sdr": {stem: dB}
 * the published SDR per stem (what 'auto' ranks by and `stembridge models` shows) and
 * "sdr_source" where the figures come from.
 *
 * Threads: a loaded catalogue is read-only.
 */
#ifndef SB_CATALOG_H
#define SB_CATALOG_H

#include "sb_common.h"

#include <stdint.h>

#define SB_CATALOG_MAX_FILES 16

typedef struct {
	char path[256];      /* relative to the base URL: "hybrid_transformer/955717e8-8726e21a.th" */
	char name[128];      /* its last part, the name it is saved under */
	char sha256[65];     /* lower-case hex: the whole digest or its start */
	uint64_t bytes;      /* size, 0 unknown */
	int approximate;     /* bytes is a rough figure */
	int unverified;      /* no published digest: size and a full load are the check */
	int config;          /* a RoFormer's YAML configuration */
	char url[512];       /* where it is published ("" : base_url + path) */
} sb_catalog_file;

typedef struct {
	char name[64];       /* [a-z0-9_-]: what a user types */
	char title[64];      /* what a UI shows */
	char description[256];
	unsigned stems;      /* canonical stems (bit SB_STEM_*) */
	int auto_rank;       /* 1 = the 'auto' choice's first preference; 0 = never auto */
	char bag_weights[256];
	int n_files;
	sb_catalog_file files[SB_CATALOG_MAX_FILES];
	uint64_t bytes;      /* download size of every file together */
	char family[32];     /* "" (Demucs), "bs_roformer", "mel_band_roformer" */
	float sdr[8];        /* published SDR per canonical stem (dB), 0 = none */
	char sdr_source[128];
} sb_catalog_model;

typedef struct sb_catalog sb_catalog;

/* The catalogue from $STEMBRIDGE_CATALOG, else the first share/stembridge/catalog.json of the
 * data folders (sb_data_dirs), else the copy compiled in. SB_ERR_FORMAT (logged, naming the
 * file) for a damaged one, SB_ERR_IO for one that cannot be read. */
sb_status sb_catalog_load(const sb_logger *log, sb_catalog **out);
/* Parse and check a catalogue's text; 'origin' names it in messages. */
sb_status sb_catalog_parse(const char *text, size_t len, const char *origin, const sb_logger *log,
                           sb_catalog **out);
void sb_catalog_free(sb_catalog *c);

const char *sb_catalog_origin(const sb_catalog *c);
const char *sb_catalog_base_url(const sb_catalog *c);
int sb_catalog_count(const sb_catalog *c);
const sb_catalog_model *sb_catalog_at(const sb_catalog *c, int i);
const sb_catalog_model *sb_catalog_find(const sb_catalog *c, const char *name);

#endif
