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
 * The models of MSST's families: "family": "bs_roformer" | "mel_band_roformer" | "scnet" |
 * "mdx23c", their files a checkpoint and one with "role": "config" (the YAML); a file's "url"
 * is where it is published (an absolute http(s) URL; a mirror given at install time serves its
 * "path" instead).
 *
 * "figures": [{"set", "source", "sdr": {stem: dB}}]: the published SDR per stem, each entry on
 * one test set ("multisong": MVSEP's Multisong dataset, "musdb18hq": the MUSDB18-HQ test set,
 * another set by its name) with who published it; a figure is a string as published ("9.80")
 * or a number. Figures of different sets never compare: 'auto' ranks each stem on one set
 * (models/registry.c) and `stembridge models` shows the set beside each figure.
 *
 * "ensembles": [{"models": [names], "combine": "avg_wave" | "max_spec" | "min_spec",
 * "weights": [w], "figures": [...]}]: the published figures of ensembles of its models (the
 * stems every member makes), which 'auto' with quality_best weighs against the single models.
 *
 * Threads: a loaded catalogue is read-only.
 */
#ifndef SB_CATALOG_H
#define SB_CATALOG_H

#include "sb_common.h"

/* sb_catalog_model, sb_catalog_load() and the getters: stembridge.h. */

/* A published ensemble of the catalogue's models */
typedef struct {
	char models[SB_ENSEMBLE_MAX][64];
	int n;
	int mode;                         /* sb_ensemble_mode */
	double weight[SB_ENSEMBLE_MAX];
	unsigned stems;                   /* what every member makes */
	int n_figures;
	sb_catalog_figures figures[SB_CATALOG_MAX_FIGURES];
} sb_catalog_ensemble;

int sb_catalog_ensemble_count(const sb_catalog *c);
const sb_catalog_ensemble *sb_catalog_ensemble_at(const sb_catalog *c, int i);

/* Parse and check a catalogue's text; 'origin' names it in messages. */
sb_status sb_catalog_parse(const char *text, size_t len, const char *origin, const sb_logger *log,
                           sb_catalog **out);

#endif
