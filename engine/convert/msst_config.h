/* The YAML configurations ZFTurbo's Music-Source-Separation-Training (MSST) publishes beside
 * each checkpoint, as every family of it shares them: `audio:` (chunk_size, sample_rate,
 * num_channels; MDX23C's STFT too), `model:` (the family's own settings), `training:`
 * (instruments, target_instrument), `inference:` (batch_size, num_overlap, chunk_size,
 * normalize). Read with libyaml's document loader; `!!python/tuple` sequences read as lists.
 * The families' parsers (roformer_config.h, scnet_config.h, mdx23c_config.h) read `model:`
 * through the key tables here and the other sections through sb_msst_read_common().
 *
 * The family is not written in the file (MSST takes it as --model_type): sb_msst_family()
 * tells it from the keys of `model:`.
 * Threads: any; nothing shared. */
#ifndef SBC_MSST_CONFIG_H
#define SBC_MSST_CONFIG_H

#include "sb_common.h"

#include <stddef.h>
#include <stdint.h>

#define SB_MSST_MAX_STEMS 8

typedef enum {
	SB_MSST_NONE = -1,
	SB_MSST_BS_ROFORMER = 0,
	SB_MSST_MEL_ROFORMER,
	SB_MSST_SCNET,
	SB_MSST_MDX23C,
} sb_msst_family;

/* MSST's --model_type of a family: "bs_roformer", "mel_band_roformer", "scnet", "mdx23c" */
const char *sb_msst_family_name(sb_msst_family f);
/* The family a model type names, SB_MSST_NONE for another */
sb_msst_family sb_msst_family_by_name(const char *name);

/* What every family's configuration holds beside its model */
typedef struct {
	int64_t chunk_size;                  /* inference.chunk_size, else audio.chunk_size */
	int audio_rate, num_channels;
	int n_instruments;                   /* training.instruments, in the model's order */
	char instruments[SB_MSST_MAX_STEMS][32];
	char target[32];                     /* "" when the model makes every instrument */
	int batch_size, num_overlap, normalize;
} sb_msst_common;

/* The stems in output order: the target alone when there is one, else the instruments. */
int sb_msst_stems(const sb_msst_common *c, const char *names[SB_MSST_MAX_STEMS]);

/* ---- reading a document ---- */

typedef struct sb_msst_yaml sb_msst_yaml;

/* Loads text (len bytes); on failure err holds one line (SB_ERR_FORMAT: not YAML or no
 * `model:` mapping). */
sb_status sb_msst_yaml_load(const char *text, size_t len, sb_msst_yaml **out, char *err,
                            size_t errlen);
void sb_msst_yaml_free(sb_msst_yaml *y);
/* The family the keys of `model:` show, SB_MSST_NONE (err says why) */
sb_msst_family sb_msst_family_of(sb_msst_yaml *y, char *err, size_t errlen);
/* Whether `model:` (sect "model"), `audio:` ... has key */
int sb_msst_has(sb_msst_yaml *y, const char *sect, const char *key);

/* A key a family reads from a section: where its value goes in the family's config struct
 * (off; lists: their length at n_off, at most cap values). SB_MSST_NO_EFFECT: read, checked,
 * and kept nowhere (training-only settings). must (SB_MSST_INT, SB_MSST_BOOL): the only value
 * this engine computes, -1 for any; another is refused by name with why_not. */
typedef enum {
	SB_MSST_INT, SB_MSST_BOOL, SB_MSST_FLOAT, SB_MSST_INTS, SB_MSST_FLOATS, SB_MSST_STRING,
	SB_MSST_STRINGS, SB_MSST_ANY
} sb_msst_kind;
#define SB_MSST_NO_EFFECT ((size_t)-1)
typedef struct {
	const char *key;
	sb_msst_kind kind;
	double lo, hi;
	size_t off, n_off;
	int cap;
	long must;
	const char *why_not;
} sb_msst_key;

/* Reads every key of section sect into cfg through the table keys[n]: a key not in the table
 * is refused by name ("model.X: not a setting of <label> (MSST's <type> takes no such
 * argument)", SB_ERR_UNSUPPORTED); a value of the wrong kind or range SB_ERR_FORMAT. Ints go
 * to int fields, floats to doubles, strings to char[32] (lists of them: char[cap][32]). */
sb_status sb_msst_read_section(sb_msst_yaml *y, const char *sect, const sb_msst_key *keys,
                               size_t n, void *cfg, const char *label, const char *type);
/* Reads one key of section sect by the table entry k (absent: SB_OK, nothing written) */
sb_status sb_msst_read_key(sb_msst_yaml *y, const char *sect, const sb_msst_key *k, void *cfg);

/* Reads `audio:`, `training:` and `inference:` into c (defaults: chunk_size 0, 44100 Hz, 2
 * channels, batch_size 1, num_overlap 4), then checks them: a chunk of at least min_chunk
 * samples, n_out outputs (0: the target alone, else every instrument) whose names are stems
 * this build writes, each once. */
sb_status sb_msst_read_common(sb_msst_yaml *y, sb_msst_common *c, int64_t min_chunk);
sb_status sb_msst_check_stems(sb_msst_yaml *y, const sb_msst_common *c);

/* The tensors a family's configuration makes, with their shapes (for the converter's check
 * and the loaders): fn(user, name, ndim, shape) for each. */
typedef void (*sb_msst_tensor_fn)(void *user, const char *name, int ndim, const int64_t *shape);

/* Calls fn for one tensor of ndim dimensions (a, b, c, d: the first ndim of them), its name
 * printed from fmt; counts it. */
typedef struct {
	sb_msst_tensor_fn fn;   /* may be NULL: only counted */
	void *user;
	int n;
	char name[160];
} sb_msst_emitter;
void sb_msst_emit(sb_msst_emitter *e, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                  const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* the document's error buffer: what the last failure said */
const char *sb_msst_error(const sb_msst_yaml *y);
/* writes a message into the document's error buffer (for a family's own checks) */
void sb_msst_fail(sb_msst_yaml *y, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
