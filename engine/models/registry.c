/* Model registry: maps a model name to its file and the family that opens it (families.h), and
 * knows where model files live: the caller's folders first (CLI --model-path, plugin state),
 * then $XDG_DATA_HOME/stembridge/models (default ~/.local/share/stembridge/models), then each
 * of $XDG_DATA_DIRS (default /usr/local/share:/usr/share) + /stembridge/models. */
#include "models/catalog.h"
#include "models/demucs/safetensors.h"
#include "models/families.h"
#include "models/model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t sb_model_dirs(const char *const *extra, char (*dirs)[4096], size_t max)
{
	return sb_data_dirs("models", extra, dirs, max);
}

/* The catalogue and which of its models are installed, looked at once for one resolution (each
 * family says whether its own is there). NULL without a catalogue: only "builtin" then. */
typedef struct {
	sb_catalog *cat;
	unsigned char inst[64];
} installed_models;

static void look(const char *const *search_path, const sb_logger *log, installed_models *im)
{
	memset(im, 0, sizeof *im);
	if (sb_catalog_load(log, &im->cat) != SB_OK)
		return;
	for (int i = 0; i < sb_catalog_count(im->cat) && i < 64; i++) {
		const sb_catalog_model *m = sb_catalog_at(im->cat, i);
		const sb_model_family *f = sb_model_family_of_catalog(m->family);
		im->inst[i] = f && sb_model_family_installed(f, m->name, search_path);
	}
}

/* ---- 'auto': figures of one test set per stem ----
 *
 * Published SDRs compare only within a test set. Each stem is ranked on one set: MVSEP's
 * Multisong where a candidate has a figure of it there, else MUSDB18-HQ's test set, else the
 * first other set (by name) any candidate has one on; a candidate without a figure on that set
 * is not ranked for the stem. A candidate is an installed catalogue model, or (quality_best) a
 * published ensemble of installed ones. */

typedef struct {
	const sb_catalog_figures *figs;
	int n_figs;
	unsigned stems;
	int auto_rank;
	int model;                        /* catalogue index, or -1 */
	const sb_catalog_ensemble *ens;   /* or the ensemble */
} option;

static double figure_on(const option *o, const char *set, int s)
{
	for (int i = 0; set && i < o->n_figs; i++)
		if (!strcmp(o->figs[i].set, set))
			return o->figs[i].sdr[s];
	return 0;
}

/* the set stem s is ranked on among the n options; NULL when none has a figure of it */
static const char *rank_set(const option *o, int n, int s)
{
	static const char *const preferred[] = {"multisong", "musdb18hq"};
	for (size_t p = 0; p < sizeof preferred / sizeof preferred[0]; p++)
		for (int i = 0; i < n; i++)
			if (figure_on(&o[i], preferred[p], s) != 0)
				return preferred[p];
	const char *first = NULL;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < o[i].n_figs; k++)
			if (o[i].figs[k].sdr[s] != 0 && (!first || strcmp(o[i].figs[k].set, first) < 0))
				first = o[i].figs[k].set;
	return first;
}

#define MAX_OPTIONS 96

/* the options that make every stem of mask (all of them for 0): installed models, and with
 * ensembles the published ensembles whose members are all installed */
static int options(const sb_catalog *cat, const unsigned char *inst, unsigned mask, int ensembles,
                   option *out)
{
	int n = 0;
	for (int i = 0; i < sb_catalog_count(cat) && i < 64; i++) {
		const sb_catalog_model *m = sb_catalog_at(cat, i);
		if (!(mask & ~m->stems) && inst[i])
			out[n++] = (option){m->figures, m->n_figures, m->stems, m->auto_rank, i, NULL};
	}
	for (int e = 0; ensembles && e < sb_catalog_ensemble_count(cat) && n < MAX_OPTIONS; e++) {
		const sb_catalog_ensemble *x = sb_catalog_ensemble_at(cat, e);
		int all = !(mask & ~x->stems);
		for (int k = 0; all && k < x->n; k++) {
			const sb_catalog_model *m = sb_catalog_find(cat, x->models[k]);
			all = m && inst[m - sb_catalog_at(cat, 0)];
		}
		if (all)
			out[n++] = (option){x->figures, x->n_figures, x->stems, 0, -1, x};
	}
	return n;
}

/* a part for option o: the model's name, or the ensemble's members, combination and weights */
static void part_of_option(const sb_catalog *cat, const option *o, sb_model_part *p)
{
	memset(p, 0, sizeof *p);
	if (!o->ens) {
		snprintf(p->name, sizeof p->name, "%s", sb_catalog_at(cat, o->model)->name);
		return;
	}
	for (int k = 0; k < o->ens->n; k++) {
		const size_t at = strlen(p->name);
		snprintf(p->name + at, sizeof p->name - at, "%s%s", k ? "," : "", o->ens->models[k]);
		p->weight[k] = o->ens->weight[k];
	}
	p->members = o->ens->n;
	p->mode = o->ens->mode;
}

/* 'auto' for the stems asked for (bit SB_STEM_*; 0: the four standard ones): the option that
 * makes them all with the best mean published SDR over them, each stem on its set; where none
 * has a figure of each, the 'auto' rank among the models that make them (every installed model
 * when none was asked); 0 when nothing is left ("builtin") */
static int auto_for(const sb_catalog *cat, const unsigned char *inst, unsigned stems,
                    int ensembles, sb_model_part *out)
{
	const unsigned want = stems ? stems : (1u << SB_N_STEMS) - 1;
	option o[MAX_OPTIONS];
	const int n = options(cat, inst, want, ensembles, o);
	const char *set[SB_MAX_STEMS] = {NULL};
	int ranked = 1;
	for (int s = 0; s < SB_MAX_STEMS; s++)
		if (want & (1u << s))
			ranked &= (set[s] = rank_set(o, n, s)) != NULL;
	double best_score = 0;
	int best = -1;
	for (int i = 0; ranked && i < n; i++) {
		double sum = 0;
		int k = 0, all = 1;
		for (int s = 0; s < SB_MAX_STEMS && all; s++) {
			if (!(want & (1u << s)))
				continue;
			const double f = figure_on(&o[i], set[s], s);
			all = f != 0;
			sum += f;
			k++;
		}
		if (all && k && (best < 0 || sum / k > best_score)) {
			best_score = sum / k;
			best = i;
		}
	}
	/* by rank: among the models that make them (stems asked for), else every installed one */
	const int n_any = best >= 0 ? n : stems ? n : options(cat, inst, 0, 0, o);
	int rank = 0;
	for (int i = 0; best < 0 && i < n_any; i++)
		if (o[i].auto_rank > 0 && (!rank || o[i].auto_rank < rank))
			rank = o[i].auto_rank;
	for (int i = 0; best < 0 && rank && i < n_any; i++)
		if (o[i].auto_rank == rank)
			best = i;
	if (best < 0)
		return 0;
	part_of_option(cat, &o[best], out);
	return 1;
}

const char *sb_model_auto(const char *const *search_path, const sb_logger *log, char *buf,
                          size_t len)
{
	installed_models im;
	look(search_path, log, &im);
	snprintf(buf, len, "builtin");
	sb_model_part p;
	if (im.cat && auto_for(im.cat, im.inst, 0, 0, &p) && len) {
		const size_t k = strnlen(p.name, len - 1);
		memcpy(buf, p.name, k);
		buf[k] = '\0';
	}
	sb_catalog_free(im.cat);
	return buf;
}

/* 'auto' per stem (the stems asked for, bit SB_STEM_*): for each stem but "other", the option
 * with the best published SDR for it on the stem's set; when that is more than one option,
 * their parts into parts[] with the stems each is to write ("other" to the last one that makes
 * it, for the job runner to replace by the residual), and their number is returned; 0 when one
 * option serves (auto_for's choice then) or a stem has no published figure. */
static int auto_parts(const sb_catalog *cat, const unsigned char *inst, unsigned stems,
                      int ensembles, sb_model_part *parts, int max)
{
	if (!stems)
		return 0;
	option all[MAX_OPTIONS];
	const int n_all = options(cat, inst, 0, ensembles, all);
	int best[SB_MAX_STEMS], n = 0, ok = 1;
	for (int s = 0; s < SB_MAX_STEMS && ok; s++) {
		best[s] = -1;
		if (!(stems & (1u << s)) || s == SB_STEM_OTHER)
			continue;
		option o[MAX_OPTIONS];
		int idx[MAX_OPTIONS], no = 0;
		for (int i = 0; i < n_all; i++)
			if (all[i].stems & (1u << s)) {
				idx[no] = i;
				o[no++] = all[i];
			}
		const char *set = rank_set(o, no, s);
		double top = 0;
		for (int i = 0; set && i < no; i++) {
			const double f = figure_on(&o[i], set, s);
			if (f != 0 && (best[s] < 0 || f > top)) {
				top = f;
				best[s] = idx[i];
			}
		}
		ok = best[s] >= 0;
	}
	/* the parts in the order of their first stem; "other" to the last that makes it */
	int part_of[SB_MAX_STEMS];
	unsigned take[SB_MAX_STEMS];
	for (int s = 0; s < SB_MAX_STEMS && ok; s++) {
		if (best[s] < 0)
			continue;
		int p = 0;
		while (p < n && part_of[p] != best[s])
			p++;
		if (p == n) {
			if (n == max) {
				ok = 0;
				break;
			}
			part_of[n] = best[s];
			take[n++] = 0;
		}
		take[p] |= 1u << s;
	}
	if (ok && n > 1 && (stems & (1u << SB_STEM_OTHER))) {
		int p = n - 1;
		while (p >= 0 && !(all[part_of[p]].stems & (1u << SB_STEM_OTHER)))
			p--;
		if (p < 0)
			ok = 0;
		else
			take[p] |= 1u << SB_STEM_OTHER;
	}
	/* one option for every stem: a single part, an ensemble's or auto_for's */
	if (ok && n == 1 && all[part_of[0]].ens) {
		part_of_option(cat, &all[part_of[0]], &parts[0]);
		return 1;
	}
	for (int p = 0; ok && n > 1 && p < n; p++) {
		part_of_option(cat, &all[part_of[p]], &parts[p]);
		parts[p].take = take[p];
	}
	return ok && n > 1 ? n : 0;
}

unsigned sb_model_stems(const char *name, const char *const *search_path)
{
	char chosen[64], path[4352];
	if (!name || !*name || !strcmp(name, "auto"))
		name = sb_model_auto(search_path, NULL, chosen, sizeof chosen);
	if (!strcmp(name, "builtin"))
		return (1u << SB_N_STEMS) - 1;
	if (strchr(name, '/')) {
		snprintf(path, sizeof path, "%s", name);
	} else {
		char dirs[16][4096];
		const size_t n = sb_model_dirs(search_path, dirs, 16);
		path[0] = '\0';
		for (size_t i = 0; i < n && !path[0]; i++) {
			snprintf(path, sizeof path, "%s/%s.safetensors", dirs[i], name);
			if (access(path, R_OK) != 0)
				path[0] = '\0';
		}
	}
	sb_safetensors *st = NULL;
	if (!path[0] || sb_safetensors_open(path, NULL, &st) != SB_OK)
		return 0;
	const char *sources = sb_safetensors_meta(st, "sources");
	if (!sources)
		sources = sb_safetensors_meta(st, "0.sources");
	unsigned mask = 0;
	char buf[512];
	snprintf(buf, sizeof buf, "%s", sources ? sources : "");
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const int k = sb_stem_index(t);
		mask |= 1u << (k >= 0 ? k : SB_STEM_OTHER);
	}
	sb_safetensors_close(st);
	return mask;
}

/* Where sb_model_open() finds a model, in its order: "auto" resolved, "builtin" (path ""), a
 * .safetensors path as given (its name: the base name), then name.safetensors in the model
 * folders: the first that a family recognises by its header, else the first readable one (for
 * the catch-all family). */
static sb_status sb_model_locate(const char *name, const char *const *search_path, const sb_logger *log,
                          char *real, size_t rlen, char *path, size_t plen)
{
	char chosen[64];
	if (!name || !*name || !strcmp(name, "auto"))
		name = sb_model_auto(search_path, log, chosen, sizeof chosen);
	if (!strcmp(name, "builtin")) {
		snprintf(real, rlen, "builtin");
		snprintf(path, plen, "%s", "");
		return SB_OK;
	}
	const size_t len = strlen(name);
	if (strchr(name, '/') && len > 12 && !strcmp(name + len - 12, ".safetensors")) {
		const char *base = strrchr(name, '/') + 1;
		snprintf(real, rlen, "%.*s", (int)(strlen(base) - 12), base);
		snprintf(path, plen, "%s", name);
		return SB_OK;
	}
	if (strchr(name, '/') || strstr(name, "..") || strlen(name) > 200)
		return SB_ERR_MODEL;
	char dirs[16][4096];
	const size_t n = sb_model_dirs(search_path, dirs, 16);
	char first[4352] = "";
	for (size_t i = 0; i < n; i++) {
		char p[4352];
		snprintf(p, sizeof p, "%s/%s.safetensors", dirs[i], name);
		if (access(p, R_OK) != 0)
			continue;
		if (sb_model_family_of_file(p)->recognise) {
			snprintf(first, sizeof first, "%s", p);
			break;
		}
		if (!first[0])
			snprintf(first, sizeof first, "%s", p);
	}
	if (!first[0])
		return SB_ERR_MODEL;
	snprintf(real, rlen, "%s", name);
	snprintf(path, plen, "%s", first);
	return SB_OK;
}

sb_status sb_model_resolve(const char *name, unsigned stems, int quality_best,
                           const char *const *search_path, const sb_logger *log,
                           sb_model_choice *out)
{
	memset(out, 0, sizeof *out);
	if (!name || !*name)
		name = "auto";
	sb_model_part *p = out->part;
	int n = 0;
	if (!strcmp(name, "auto")) {
		installed_models im;
		look(search_path, log, &im);
		snprintf(p[0].name, sizeof p[0].name, "builtin");
		if (im.cat) {
			n = auto_parts(im.cat, im.inst, stems, quality_best, p, SB_MAX_STEMS);
			if (n < 1 && !auto_for(im.cat, im.inst, stems, quality_best, &p[0]))
				snprintf(p[0].name, sizeof p[0].name, "builtin");
		}
		sb_catalog_free(im.cat);
	} else {
		snprintf(p[0].name, sizeof p[0].name, "%s", name);
		/* "a,b": an ensemble of those models */
		for (const char *c = name; *c; c++)
			p[0].members += *c == ',';
		p[0].members = p[0].members ? p[0].members + 1 : 0;
		if (p[0].members > SB_ENSEMBLE_MAX) {
			sb_log(log, SB_LOG_ERROR, "an ensemble of %d models: at most %d", p[0].members,
			       SB_ENSEMBLE_MAX);
			memset(out, 0, sizeof *out);
			return SB_ERR_INVALID;
		}
	}
	out->n = n > 1 ? n : 1;
	for (int i = 0; i < out->n; i++) {
		if (p[i].members > 1) {
			/* an ensemble: each member there (found again when the part opens) */
			char names[192], *save = NULL, real[256], path[4352];
			memcpy(names, p[i].name, sizeof names);
			for (char *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (sb_model_locate(t, search_path, log, real, sizeof real, path,
				                    sizeof path) != SB_OK) {
					memset(out, 0, sizeof *out);
					return SB_ERR_MODEL;
				}
			continue;
		}
		char want[192];
		memcpy(want, p[i].name, sizeof want);
		if (sb_model_locate(want, search_path, log, p[i].name, sizeof p[i].name, p[i].path,
		                    sizeof p[i].path) != SB_OK) {
			memset(out, 0, sizeof *out);
			return SB_ERR_MODEL;
		}
	}
	return SB_OK;
}

sb_status sb_model_open_part(const sb_model_part *p, const char *const *search_path,
                             const sb_logger *log, sb_model **out)
{
	*out = NULL;
	if (p->members < 2)
		return sb_model_open_file(p->name, p->path, log, out);
	sb_model *m[SB_ENSEMBLE_MAX] = {NULL};
	char names[192], *save = NULL;
	memcpy(names, p->name, sizeof names);
	sb_status st = SB_OK;
	int n = 0;
	for (char *t = strtok_r(names, ",", &save); t && st == SB_OK && n < SB_ENSEMBLE_MAX;
	     t = strtok_r(NULL, ",", &save))
		st = sb_model_open(t, search_path, log, &m[n++]);
	if (st == SB_OK)
		st = sb_model_ensemble(m, p->weight, n, p->mode, log, out);
	if (st != SB_OK)
		for (int i = 0; i < n; i++)
			sb_model_free(m[i]);
	return st;
}

sb_status sb_model_open_file(const char *name, const char *path, const sb_logger *log,
                             sb_model **out)
{
	return sb_model_family_of_file(path)->open(path, name, log, out);
}

sb_status sb_model_open(const char *name, const char *const *search_path, const sb_logger *log,
                        sb_model **out)
{
	char real[256], path[4352];
	if (sb_model_locate(name, search_path, log, real, sizeof real, path, sizeof path) == SB_OK)
		return sb_model_open_file(real, path, log, out);
	*out = NULL;
	char chosen[64];
	if (!name || !*name || !strcmp(name, "auto"))
		name = sb_model_auto(search_path, log, chosen, sizeof chosen);
	char dirs[16][4096];
	size_t n = sb_model_dirs(search_path, dirs, 16);
	char where[1024] = "";
	for (size_t i = 0; i < n && i < 4; i++) {
		size_t at = strlen(where);
		snprintf(where + at, sizeof where - at, "%s%s", i ? ", " : "", dirs[i]);
	}
	/* not found: a catalogue model says where to get it */
	sb_catalog *cat = NULL;
	const sb_logger quiet = {NULL, NULL};
	const int listed = !strchr(name, '/') && sb_catalog_load(&quiet, &cat) == SB_OK &&
	                   sb_catalog_find(cat, name);
	sb_catalog_free(cat);
	if (listed)
		sb_log(log, SB_LOG_ERROR,
		       "model '%s' is not installed (no %s.safetensors in %s): install it with "
		       "`stembridge models install %s`, or convert a checkpoint with stembridge-convert "
		       "into one of those folders", name, name, where, name);
	else
		sb_log(log, SB_LOG_ERROR, "unknown model '%s' (installed: builtin; searched %s)", name,
		       where);
	return SB_ERR_MODEL;
}

static void member_progress(void *user, double fraction, const char *stage)
{
	const sb_member_share *s = user;
	if (s->ctx->progress)
		s->ctx->progress(s->ctx->progress_user, (s->i + fraction) / s->n, stage);
}

/* a device's share, to the job's report (the progress callbacks' user is the share here) */
static void member_device_report(void *user, const sb_device_report *r)
{
	const sb_member_share *s = user;
	if (s->ctx->device_report)
		s->ctx->device_report(s->ctx->progress_user, r);
}

sb_run_ctx sb_run_ctx_member(const sb_run_ctx *ctx, sb_member_share *sh, int i, int n)
{
	*sh = (sb_member_share){ctx, i, n};
	sb_run_ctx pc = *ctx;
	pc.keep = 0;
	pc.pace = NULL;
	pc.progress = member_progress;
	pc.progress_user = sh;
	pc.device_report = ctx->device_report ? member_device_report : NULL;
	return pc;
}

sb_status sb_run_devices_open(const sb_run_ctx *ctx, sb_run_devices *out)
{
	memset(out, 0, sizeof *out);
	out->ctx = ctx ? *ctx : out->empty;
	if (out->ctx.n_dev > 0 && out->ctx.dev)
		return SB_OK;
	const sb_backend *cpu = sb_backend_cpu();
	size_t n = 0;
	sb_status st = cpu->enumerate(out->ctx.log, &out->props, 1, &n);
	if (st != SB_OK || n != 1)
		return st != SB_OK ? st : SB_ERR_DEVICE;
	out->props.backend = cpu;
	const sb_open_opts o = {out->ctx.threads, out->ctx.bf16 ? SB_PREC_BF16 : SB_PREC_FP32, 0};
	st = sb_exec_open(&out->props, &o, out->ctx.log, &out->own);
	if (st != SB_OK)
		return st;
	out->own.props = &out->props;
	out->ctx.dev = &out->own;
	out->ctx.n_dev = 1;
	out->ctx.keep = 0; /* closed at the end of the call */
	return SB_OK;
}

void sb_run_devices_close(sb_run_devices *r)
{
	sb_exec_close(&r->own);
}
