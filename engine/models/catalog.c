/* The model catalogue (catalog.h): parsed with jansson, every field checked before use. */
#include "models/catalog.h"

#include "io/stream.h"
#include "models/families.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_json.h" /* the shipped catalog.json as a C string (meson custom_target) */

#define MAX_MODELS 64
#define MAX_CATALOG_BYTES (1 << 20)

#define MAX_ENSEMBLES 32

struct sb_catalog {
	char origin[4096];
	char base_url[1024];
	int n;
	sb_catalog_model m[MAX_MODELS];
	int n_ens;
	sb_catalog_ensemble ens[MAX_ENSEMBLES];
};

static int valid_name(const char *s)
{
	if (!*s || strlen(s) >= 64)
		return 0;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_' || *s == '-' ||
		      *s == '.'))
			return 0;
	return 1;
}

/* a relative URL path of plain parts: no "..", no "//", no leading '/', no query */
static int valid_path(const char *s)
{
	const size_t n = strlen(s);
	if (!n || n >= 256 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//") ||
	    !strcmp(s, "..") || !strncmp(s, "../", 3) || strstr(s, "/../") ||
	    (n >= 3 && !strcmp(s + n - 3, "/..")))
		return 0;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '-' || *s == '/'))
			return 0;
	return 1;
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* "<signature>-<hex>.<ext>": the hex, lower-cased, into out; 0 when the name has none */
static int checksum_from_name(const char *name, char *out, size_t len)
{
	const char *dash = strrchr(name, '-'), *dot = strrchr(name, '.');
	if (!dash || !dot || dot < dash)
		return 0;
	const size_t n = (size_t)(dot - dash - 1);
	if (n < 8 || n > 64 || n >= len || !is_hex(dash + 1, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)dash[1 + i]);
	out[n] = '\0';
	return 1;
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A figure as published: a decimal number from -100 to 100 dB, given as a JSON string
 * ("9.80", kept as written) or a number */
static int figure(json_t *v, double *value, char *text, size_t tl)
{
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end = NULL;
		errno = 0;
		const double d = strtod(s, &end);
		if (!*s || *end || errno || strlen(s) >= tl || strspn(s, "-0123456789.") != strlen(s))
			return 0;
		*value = d;
		snprintf(text, tl, "%s", s);
	} else if (json_is_number(v)) {
		*value = json_number_value(v);
		snprintf(text, tl, "%.15g", *value);
	} else {
		return 0;
	}
	return *value > -100 && *value < 100;
}

/* One "figures" entry: {"set", "source", "sdr": {stem: figure}} into figs[*n] of owner
 * (whose stems are the mask stems) */
static int parse_figures(json_t *f, sb_catalog_figures *figs, int *n, unsigned stems,
                         const char *owner, char *why, size_t wl)
{
	sb_catalog_figures *g = &figs[*n];
	memset(g, 0, sizeof *g);
	const char *set = json_is_object(f) ? str(f, "set") : NULL, *src = str(f, "source");
	json_t *sdr = json_is_object(f) ? json_object_get(f, "sdr") : NULL;
	if (!set || !valid_name(set) || strlen(set) >= sizeof g->set || !src || !*src ||
	    !json_is_object(sdr)) {
		snprintf(why, wl, "%s: figures %d need a \"set\" (a name: \"multisong\", "
		         "\"musdb18hq\"), a \"source\" and \"sdr\" {stem: dB}", owner, *n + 1);
		return 0;
	}
	for (int i = 0; i < *n; i++)
		if (!strcmp(figs[i].set, set)) {
			snprintf(why, wl, "%s: two figures of the set \"%s\"", owner, set);
			return 0;
		}
	snprintf(g->set, sizeof g->set, "%s", set);
	snprintf(g->source, sizeof g->source, "%s", src);
	const char *key;
	json_t *val;
	json_object_foreach(sdr, key, val) {
		const int k = sb_stem_index(key);
		if (k < 0 || !(stems & (1u << k)) || strcmp(key, sb_stem_names[k])) {
			snprintf(why, wl, "%s: \"sdr\" of %s names %s, not one of its stems", owner, set,
			         key);
			return 0;
		}
		if (!figure(val, &g->sdr[k], g->text[k], sizeof g->text[k])) {
			snprintf(why, wl, "%s: the %s figure on %s is not a number of dB as published "
			         "(\"11.27\")", owner, key, set);
			return 0;
		}
	}
	(*n)++;
	return 1;
}

/* "figures": a list of at most SB_CATALOG_MAX_FIGURES entries */
static int parse_figure_list(json_t *figs, sb_catalog_figures *out, int *n, unsigned stems,
                             const char *owner, char *why, size_t wl)
{
	if (figs && (!json_is_array(figs) || json_array_size(figs) > SB_CATALOG_MAX_FIGURES)) {
		snprintf(why, wl, "%s: \"figures\" is not a list of at most %d test sets", owner,
		         SB_CATALOG_MAX_FIGURES);
		return 0;
	}
	for (size_t i = 0; i < json_array_size(figs); i++)
		if (!parse_figures(json_array_get(figs, i), out, n, stems, owner, why, wl))
			return 0;
	return 1;
}

/* One published ensemble: {"models": [names], "combine": "avg_wave" | "max_spec" |
 * "min_spec", "weights": [w], "figures": [...]}, its models listed before it; its figures'
 * stems are those every member makes */
static int parse_ensemble(json_t *e, const sb_catalog *c, sb_catalog_ensemble *x, char *why,
                          size_t wl)
{
	memset(x, 0, sizeof *x);
	json_t *models = json_is_object(e) ? json_object_get(e, "models") : NULL;
	const size_t n = json_is_array(models) ? json_array_size(models) : 0;
	if (n < 2 || n > SB_ENSEMBLE_MAX) {
		snprintf(why, wl, "an ensemble without 2 to %d \"models\"", SB_ENSEMBLE_MAX);
		return 0;
	}
	unsigned stems = ~0u;
	char owner[256] = "ensemble ";
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(models, i);
		const sb_catalog_model *m = json_is_string(v) ? sb_catalog_find(c, json_string_value(v))
		                                              : NULL;
		if (!m) {
			snprintf(why, wl, "an ensemble's model %zu is not a model of the catalogue", i + 1);
			return 0;
		}
		snprintf(x->models[i], sizeof x->models[i], "%s", m->name);
		stems &= m->stems;
		const size_t at = strlen(owner);
		snprintf(owner + at, sizeof owner - at, "%s%s", i ? "," : "", m->name);
	}
	x->n = (int)n;
	x->stems = stems;
	const char *comb = str(e, "combine");
	x->mode = !comb || !strcmp(comb, "avg_wave") ? SB_ENSEMBLE_AVG_WAVE
	          : !strcmp(comb, "max_spec")        ? SB_ENSEMBLE_MAX_SPEC
	          : !strcmp(comb, "min_spec")        ? SB_ENSEMBLE_MIN_SPEC : -1;
	if (x->mode < 0) {
		snprintf(why, wl, "%s: \"combine\" is not avg_wave, max_spec or min_spec", owner);
		return 0;
	}
	json_t *w = json_object_get(e, "weights");
	if (w && (!json_is_array(w) || json_array_size(w) != n)) {
		snprintf(why, wl, "%s: \"weights\" is not one number per model", owner);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *v = w ? json_array_get(w, i) : NULL;
		x->weight[i] = v ? (json_is_number(v) ? json_number_value(v) : -1) : 1;
		if (!(x->weight[i] > 0) || x->weight[i] > 1000) {
			snprintf(why, wl, "%s: weight %zu is not a number above 0", owner, i + 1);
			return 0;
		}
	}
	return parse_figure_list(json_object_get(e, "figures"), x->figures, &x->n_figures, stems,
	                         owner, why, wl);
}

/* One model entry; 0 with 'why' filled on the first thing wrong. */
static int parse_model(json_t *e, sb_catalog_model *m, char *why, size_t wl)
{
	memset(m, 0, sizeof *m);
	const char *name = json_is_object(e) ? str(e, "name") : NULL;
	if (!name || !valid_name(name)) {
		snprintf(why, wl, "a model without a valid \"name\" (lower-case letters, digits, '_', "
		         "'-', '.'; at most 63)");
		return 0;
	}
	snprintf(m->name, sizeof m->name, "%s", name);
	const char *t = str(e, "title"), *d = str(e, "description");
	snprintf(m->title, sizeof m->title, "%s", t ? t : name);
	snprintf(m->description, sizeof m->description, "%s", d ? d : "");
	json_t *stems = json_object_get(e, "stems");
	if (!json_is_array(stems) || json_array_size(stems) == 0) {
		snprintf(why, wl, "model \"%s\": \"stems\" is not a list of stem names", name);
		return 0;
	}
	for (size_t i = 0; i < json_array_size(stems); i++) {
		json_t *s = json_array_get(stems, i);
		const int k = json_is_string(s) ? sb_stem_index(json_string_value(s)) : -1;
		if (k < 0) {
			char known[256];
			sb_stem_mask_text((1u << SB_N_KNOWN_STEMS) - 1, ", ", known, sizeof known);
			snprintf(why, wl, "model \"%s\": stem %zu is not one of %s", name, i + 1, known);
			return 0;
		}
		m->stems |= 1u << k;
	}
	json_t *rank = json_object_get(e, "auto");
	if (rank && (!json_is_integer(rank) || json_integer_value(rank) < 0 ||
	             json_integer_value(rank) > 1000)) {
		snprintf(why, wl, "model \"%s\": \"auto\" is not a rank from 0 to 1000", name);
		return 0;
	}
	m->auto_rank = rank ? (int)json_integer_value(rank) : 0;
	const char *bw = str(e, "bag_weights");
	if (bw && (strlen(bw) >= sizeof m->bag_weights || strspn(bw, "0123456789.,;eE+- ") !=
	                                                      strlen(bw))) {
		snprintf(why, wl, "model \"%s\": \"bag_weights\" is not rows of numbers", name);
		return 0;
	}
	snprintf(m->bag_weights, sizeof m->bag_weights, "%s", bw ? bw : "");
	json_t *files = json_object_get(e, "files");
	const size_t nf = json_is_array(files) ? json_array_size(files) : 0;
	if (nf == 0 || nf > SB_CATALOG_MAX_FILES) {
		snprintf(why, wl, "model \"%s\": \"files\" must list 1 to %d files", name,
		         SB_CATALOG_MAX_FILES);
		return 0;
	}
	for (size_t i = 0; i < nf; i++) {
		json_t *f = json_array_get(files, i);
		sb_catalog_file *cf = &m->files[m->n_files];
		const char *path = json_is_object(f) ? str(f, "path") : NULL;
		if (!path || !valid_path(path)) {
			snprintf(why, wl, "model \"%s\", file %zu: \"path\" is not a relative path of "
			         "letters, digits, '.', '_', '-' and '/'", name, i + 1);
			return 0;
		}
		snprintf(cf->path, sizeof cf->path, "%s", path);
		const char *slash = strrchr(path, '/');
		snprintf(cf->name, sizeof cf->name, "%s", slash ? slash + 1 : path);
		for (int k = 0; k < m->n_files; k++)
			if (!strcmp(m->files[k].name, cf->name)) {
				snprintf(why, wl, "model \"%s\": two files named %s", name, cf->name);
				return 0;
			}
		cf->unverified = json_is_true(json_object_get(f, "unverified"));
		const char *role = str(f, "role");
		cf->config = role && !strcmp(role, "config");
		const char *url = str(f, "url");
		if (url && (strlen(url) >= sizeof cf->url ||
		            (strncmp(url, "https://", 8) && strncmp(url, "http://", 7)))) {
			snprintf(why, wl, "model \"%s\", %s: \"url\" is not an http or https URL", name,
			         cf->name);
			return 0;
		}
		snprintf(cf->url, sizeof cf->url, "%s", url ? url : "");
		const char *sha = str(f, "sha256");
		if (!sha && cf->unverified) {
			cf->sha256[0] = '\0';
		} else if (sha) {
			if (strlen(sha) != 64 || !is_hex(sha, 64)) {
				snprintf(why, wl, "model \"%s\", %s: \"sha256\" is not 64 hex digits", name,
				         cf->name);
				return 0;
			}
			for (int k = 0; k < 64; k++)
				cf->sha256[k] = (char)tolower((unsigned char)sha[k]);
			cf->sha256[64] = '\0';
			char from_name[65];
			if (checksum_from_name(cf->name, from_name, sizeof from_name) &&
			    strncmp(cf->sha256, from_name, strlen(from_name))) {
				snprintf(why, wl, "model \"%s\", %s: \"sha256\" does not start with the hex in "
				         "the file name", name, cf->name);
				return 0;
			}
		} else if (!checksum_from_name(cf->name, cf->sha256, sizeof cf->sha256)) {
			snprintf(why, wl, "model \"%s\", %s: no checksum (give \"sha256\", or a file name "
			         "<signature>-<hex>.<ext>)", name, cf->name);
			return 0;
		}
		json_t *b = json_object_get(f, "bytes");
		if (b && (!json_is_integer(b) || json_integer_value(b) < 0)) {
			snprintf(why, wl, "model \"%s\", %s: \"bytes\" is not a size", name, cf->name);
			return 0;
		}
		cf->bytes = b ? (uint64_t)json_integer_value(b) : 0;
		cf->approximate = json_is_true(json_object_get(f, "approximate"));
		if (cf->unverified && !cf->config && !cf->bytes) {
			snprintf(why, wl, "model \"%s\", %s: an unverified checkpoint needs its "
			         "\"bytes\"", name, cf->name);
			return 0;
		}
		m->bytes += cf->bytes;
		m->n_files++;
	}
	const char *fam = str(e, "family");
	if (fam && (!*fam || !sb_model_family_of_catalog(fam))) {
		snprintf(why, wl, "model \"%s\": no model family installs \"family\": \"%s\"", name,
		         fam);
		return 0;
	}
	snprintf(m->family, sizeof m->family, "%s", fam ? fam : "");
	int n_cfg = 0;
	for (int i = 0; i < m->n_files; i++)
		n_cfg += m->files[i].config;
	if (fam && (n_cfg != 1 || m->n_files != 2)) {
		snprintf(why, wl, "model \"%s\": a model of MSST's is a checkpoint and one \"role\": "
		         "\"config\" file", name);
		return 0;
	}
	if (json_object_get(e, "sdr")) {
		snprintf(why, wl, "model \"%s\": \"sdr\" names no test set: give \"figures\": "
		         "[{\"set\", \"source\", \"sdr\"}]", name);
		return 0;
	}
	char owner[96];
	snprintf(owner, sizeof owner, "model \"%s\"", name);
	if (!parse_figure_list(json_object_get(e, "figures"), m->figures, &m->n_figures, m->stems,
	                       owner, why, wl))
		return 0;
	if (m->bag_weights[0] && m->n_files < 2) {
		snprintf(why, wl, "model \"%s\": \"bag_weights\" with a single file", name);
		return 0;
	}
	return 1;
}

sb_status sb_catalog_parse(const char *text, size_t len, const char *origin, const sb_logger *log,
                           sb_catalog **out)
{
	*out = NULL;
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	char why[512] = "";
	sb_catalog *c = calloc(1, sizeof *c);
	if (!c) {
		json_decref(root);
		return SB_ERR_NOMEM;
	}
	snprintf(c->origin, sizeof c->origin, "%s", origin ? origin : "catalog");
	json_t *models = root ? json_object_get(root, "models") : NULL;
	json_t *version = root ? json_object_get(root, "catalog_version") : NULL;
	const char *base = root ? str(root, "base_url") : NULL;
	if (!root)
		snprintf(why, sizeof why, "not JSON (%s, line %d)", jerr.text, jerr.line);
	else if (!json_is_integer(version) || json_integer_value(version) != 1)
		snprintf(why, sizeof why, "\"catalog_version\" is not 1");
	else if (!base || strlen(base) >= sizeof c->base_url ||
	         (strncmp(base, "https://", 8) && strncmp(base, "http://", 7)))
		snprintf(why, sizeof why, "\"base_url\" is not an http or https URL");
	else if (!json_is_array(models) || json_array_size(models) > MAX_MODELS)
		snprintf(why, sizeof why, "\"models\" is not a list of at most %d models", MAX_MODELS);
	else
		snprintf(c->base_url, sizeof c->base_url, "%s", base);
	for (size_t i = 0; !why[0] && i < json_array_size(models); i++) {
		if (!parse_model(json_array_get(models, i), &c->m[c->n], why, sizeof why))
			break;
		for (int k = 0; k < c->n; k++)
			if (!strcmp(c->m[k].name, c->m[c->n].name))
				snprintf(why, sizeof why, "two models named \"%s\"", c->m[k].name);
		c->n++;
	}
	json_t *ens = root && !why[0] ? json_object_get(root, "ensembles") : NULL;
	if (ens && (!json_is_array(ens) || json_array_size(ens) > MAX_ENSEMBLES))
		snprintf(why, sizeof why, "\"ensembles\" is not a list of at most %d ensembles",
		         MAX_ENSEMBLES);
	for (size_t i = 0; !why[0] && i < json_array_size(ens); i++)
		if (parse_ensemble(json_array_get(ens, i), c, &c->ens[c->n_ens], why, sizeof why))
			c->n_ens++;
	json_decref(root);
	if (why[0]) {
		sb_log(log, SB_LOG_ERROR, "model catalogue %s: %s", c->origin, why);
		free(c);
		return SB_ERR_FORMAT;
	}
	*out = c;
	return SB_OK;
}

static sb_status load_file(const char *path, const sb_logger *log, sb_catalog **out)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		sb_log(log, SB_LOG_ERROR, "model catalogue %s: %s", path, strerror(errno));
		return SB_ERR_IO;
	}
	char *buf = malloc(MAX_CATALOG_BYTES);
	const size_t n = buf ? fread(buf, 1, MAX_CATALOG_BYTES, f) : 0;
	const int too_big = buf && n == MAX_CATALOG_BYTES;
	fclose(f);
	if (!buf)
		return SB_ERR_NOMEM;
	sb_status st = SB_ERR_FORMAT;
	if (too_big)
		sb_log(log, SB_LOG_ERROR, "model catalogue %s: larger than %d bytes", path,
		       MAX_CATALOG_BYTES);
	else
		st = sb_catalog_parse(buf, n, path, log, out);
	free(buf);
	return st;
}

sb_status sb_catalog_load(const sb_logger *log, sb_catalog **out)
{
	const char *env = sb_knob_get("STEMBRIDGE_CATALOG");
	if (env && *env)
		return load_file(env, log, out);
	char dirs[16][4096];
	const size_t n = sb_data_dirs("", NULL, dirs, 16);
	for (size_t i = 0; i < n; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/catalog.json", dirs[i]);
		FILE *f = fopen(path, "rb");
		if (f) {
			fclose(f);
			return load_file(path, log, out);
		}
	}
	return sb_catalog_parse(catalog_json, strlen(catalog_json), "(built in)", log, out);
}

void sb_catalog_free(sb_catalog *c)
{
	free(c);
}

const char *sb_catalog_origin(const sb_catalog *c)
{
	return c->origin;
}

const char *sb_catalog_base_url(const sb_catalog *c)
{
	return c->base_url;
}

int sb_catalog_count(const sb_catalog *c)
{
	return c->n;
}

const sb_catalog_model *sb_catalog_at(const sb_catalog *c, int i)
{
	return i >= 0 && i < c->n ? &c->m[i] : NULL;
}

const sb_catalog_model *sb_catalog_find(const sb_catalog *c, const char *name)
{
	for (int i = 0; name && i < c->n; i++)
		if (!strcmp(c->m[i].name, name))
			return &c->m[i];
	return NULL;
}

int sb_catalog_ensemble_count(const sb_catalog *c)
{
	return c->n_ens;
}

const sb_catalog_ensemble *sb_catalog_ensemble_at(const sb_catalog *c, int i)
{
	return i >= 0 && i < c->n_ens ? &c->ens[i] : NULL;
}
