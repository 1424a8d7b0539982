/* stembridge models: what can separate, installed or not, and how to get the rest.
 *
 *   stembridge models [--model-path DIR] [--json]
 *   stembridge models install NAME... [--base-url URL] [--model-dir DIR] [--force]
 *                     [--keep-downloads] [--timeout S] [-q]
 *   stembridge models remove NAME... [--model-dir DIR]
 *
 * The list joins the catalogue (engine/models/catalog.json: the Demucs models that can be
 * downloaded) with the model folders (sb_model_dirs, searched in order; the first file of a name
 * wins): each model's stems and size, where it is installed or the exact command that installs
 * it, and what 'auto' stands for. A model file's settings are read from its header only.
 *
 * install downloads, checks and converts (models/install.h) with a progress bar on a terminal
 * and plain lines otherwise; SIGINT and SIGTERM stop it (exit 130 / 143), and the download
 * resumes where it stopped next time. Exit status: 0 when every model asked for is installed,
 * 1 when one failed, 2 for a usage error or a name the catalogue does not have.
 */
#include "commands.h"
#include "options.h"

#include "stembridge.h"

#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* safetensors caps its header at 100 MB; ours are a few hundred KB */
#define MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
	char name[256];
	char path[4096 + 256];
} found_model;

static const char *meta(const json_t *m, const char *prefix, const char *key)
{
	char full[256];
	snprintf(full, sizeof full, "%s%s", prefix, key);
	return json_string_value(json_object_get(m, full));
}

static void append(char *out, size_t len, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *out, size_t len, size_t *used, const char *fmt, ...)
{
	if (*used >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out + *used, len - *used, fmt, ap);
	va_end(ap);
	*used = n < 0 ? len : *used + (size_t)n;
}

/* how many names a comma-separated list holds */
static int count_items(const char *list)
{
	int n = 1;
	for (const char *c = list; *c; c++)
		n += *c == ',';
	return n;
}

/* One line of what a model file holds, or why it cannot be read. */
static void describe(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(out, len, "unreadable: cannot open");
		return;
	}
	struct stat sb;
	uint8_t n8[8];
	if (fstat(fileno(f), &sb) != 0 || fread(n8, 1, 8, f) != 8) {
		fclose(f);
		snprintf(out, len, "unreadable: not a safetensors file (too short)");
		return;
	}
	uint64_t n = 0;
	for (int k = 7; k >= 0; k--)
		n = n << 8 | n8[k];
	if (n == 0 || n > MAX_HEADER || n > (uint64_t)sb.st_size - 8) {
		fclose(f);
		snprintf(out, len, "unreadable: not a safetensors file (header length %llu)",
		         (unsigned long long)n);
		return;
	}
	char *buf = malloc((size_t)n);
	size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
	fclose(f);
	json_error_t je;
	json_t *h = got == n ? json_loadb(buf, (size_t)n, 0, &je) : NULL;
	free(buf);
	if (!json_is_object(h)) {
		json_decref(h);
		snprintf(out, len, "unreadable: not a safetensors file (bad header)");
		return;
	}
	const json_t *m = json_object_get(h, "__metadata__");
	size_t tensors = json_object_size(h) - (m ? 1 : 0);
	char dtypes[64] = "";
	const char *key;
	json_t *t;
	json_object_foreach(h, key, t) {
		const char *dt = json_string_value(json_object_get(t, "dtype"));
		char tag[12];
		snprintf(tag, sizeof tag, "%s", dt ? dt : "?");
		if (strcmp(key, "__metadata__") && !strstr(dtypes, tag) &&
		    strlen(dtypes) + strlen(tag) + 2 < sizeof dtypes)
			snprintf(dtypes + strlen(dtypes), sizeof dtypes - strlen(dtypes), "%s%s",
			         dtypes[0] ? "+" : "", tag);
	}
	const char *bag = meta(m, "", "bag");
	const char *p = bag ? "0." : ""; /* a bag's models share these; model 0 stands for all */
	const char *klass = meta(m, p, "klass"), *sources = meta(m, "", "sources");
	const char *rate = meta(m, "", "samplerate"), *segment = meta(m, p, "segment");
	if (!sources)
		sources = meta(m, p, "sources");
	if (!rate)
		rate = meta(m, p, "samplerate");
	/* a RoFormer (stembridge-convert MODEL.ckpt --config MODEL.yaml) names its family */
	const char *family = klass ? NULL : meta(m, "", "family");
	size_t used = 0;
	out[0] = '\0';
	if (family && sources) {
		append(out, len, &used, "%s, %d stems (%s), %s Hz; ", family, count_items(sources),
		       sources, rate ? rate : "?");
	} else if (!klass || !sources) {
		append(out, len, &used, "no model settings in its metadata (not made by "
		       "stembridge-convert?); ");
	} else {
		const int n_src = count_items(sources);
		if (bag)
			append(out, len, &used, "a bag of %s models, ", bag);
		append(out, len, &used, "%s, %d stems (%s), %s Hz, segment %s s", klass, n_src, sources,
		       rate ? rate : "?", segment ? segment : "?");
		static const char *const shape_keys[] = {"channels", "bottom_channels", "t_layers",
		                                         "dconv_mode"};
		for (size_t k = 0; k < 4; k++) {
			const char *v = meta(m, p, shape_keys[k]);
			if (v)
				append(out, len, &used, ", %s %s", shape_keys[k], v);
		}
		append(out, len, &used, "; ");
	}
	append(out, len, &used, "%zu tensors %s, %.1f MB", tensors, dtypes, (double)sb.st_size / 1e6);
	json_decref(h);
}

static int cmp_found(const void *a, const void *b)
{
	return strcmp(((const found_model *)a)->name, ((const found_model *)b)->name);
}

static void log_plain(void *user, sb_log_level level, const char *msg)
{
	const int quiet = user ? *(const int *)user : 0;
	if (level == SB_LOG_ERROR)
		fprintf(stderr, "stembridge: error: %s\n", msg);
	else if (level == SB_LOG_WARNING && !quiet)
		fprintf(stderr, "stembridge: warning: %s\n", msg);
}

/* a test set as people name it */
static const char *set_title(const char *set)
{
	return !strcmp(set, "multisong")   ? "MVSEP Multisong"
	       : !strcmp(set, "musdb18hq") ? "MUSDB18-HQ test"
	                                   : set;
}

static void size_str(const sb_catalog_model *m, char *buf, size_t len)
{
	int approx = 0;
	for (int i = 0; i < m->n_files; i++)
		approx |= m->files[i].approximate || !m->files[i].bytes;
	snprintf(buf, len, "%s%.0f MB download", approx ? "about " : "", (double)m->bytes / 1e6);
}

/* The installed model files in the folders, the first of each name. */
static size_t scan(char (*dirs)[4096], size_t nd, found_model **out)
{
	found_model *found = NULL;
	size_t n_found = 0;
	for (size_t i = 0; i < nd; i++) {
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			const char *dot = strrchr(e->d_name, '.');
			if (e->d_name[0] == '.' || !dot || strcmp(dot, ".safetensors") || dot == e->d_name)
				continue;
			found_model *grown = realloc(found, (n_found + 1) * sizeof *found);
			if (!grown)
				break;
			found = grown;
			snprintf(found[n_found].name, sizeof found[n_found].name, "%.*s",
			         (int)(dot - e->d_name), e->d_name);
			snprintf(found[n_found].path, sizeof found[n_found].path, "%s/%s", dirs[i],
			         e->d_name);
			int shadowed = 0;
			for (size_t k = 0; k < n_found; k++)
				shadowed |= !strcmp(found[k].name, found[n_found].name);
			if (!shadowed)
				n_found++;
		}
		closedir(d);
	}
	qsort(found, n_found, sizeof *found, cmp_found);
	*out = found;
	return n_found;
}

static const found_model *find(const found_model *f, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(f[i].name, name))
			return &f[i];
	return NULL;
}

static int cmd_list(int argc, char **argv)
{
	const char *extra[8] = {0};
	int n_extra = 0, as_json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model-path") && i + 1 < argc && n_extra < 7) {
			extra[n_extra++] = argv[++i];
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
		} else {
			fprintf(stderr, "stembridge: error: models: unknown option '%s' (--model-path DIR, "
			        "--json; or: models install NAME, models remove NAME)\n", argv[i]);
			return 2;
		}
	}
	sb_logger log = {log_plain, NULL};
	sb_catalog *cat = NULL;
	if (sb_catalog_load(&log, &cat) != SB_OK)
		return 1;
	char dirs[16][4096];
	const size_t nd = sb_model_dirs(extra, dirs, 16);
	found_model *found = NULL;
	const size_t n_found = scan(dirs, nd, &found);
	char auto_name[64], stems[128], size[64];
	sb_model_auto(extra, &log, auto_name, sizeof auto_name);
	if (as_json) {
		json_t *root = json_object(), *list = json_array();
		json_object_set_new(root, "auto", json_string(auto_name));
		json_t *b = json_pack("{s:s, s:b, s:s, s:[s,s,s,s]}", "name", "builtin", "installed", 1,
		                      "path", "", "stems", "vocals", "drums", "bass", "other");
		json_array_append_new(list, b);
		for (int i = 0; i < sb_catalog_count(cat); i++) {
			const sb_catalog_model *m = sb_catalog_at(cat, i);
			const found_model *f = find(found, n_found, m->name);
			json_t *st = json_array();
			for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
				if (m->stems & (1u << k))
					json_array_append_new(st, json_string(sb_stem_names[k]));
			json_t *o = json_pack("{s:s, s:s, s:b, s:s, s:o, s:I, s:s}", "name", m->name, "title",
			                      m->title, "installed", f != NULL, "path", f ? f->path : "",
			                      "stems", st, "download_bytes", (json_int_t)m->bytes,
			                      "install", "");
			char cmd[128];
			snprintf(cmd, sizeof cmd, "stembridge models install %s", m->name);
			json_object_set_new(o, "install", json_string(f ? "" : cmd));
			/* each set's figures, the numbers as published (15 significant digits: 11.77,
			 * not its float's 11.770000457763672) */
			json_t *figs = json_array();
			for (int g = 0; g < m->n_figures; g++) {
				const sb_catalog_figures *fg = &m->figures[g];
				json_t *sdr = json_object();
				for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
					if (fg->text[k][0])
						json_object_set_new(sdr, sb_stem_names[k], json_real(fg->sdr[k]));
				json_array_append_new(figs, json_pack("{s:s, s:s, s:o}", "set", fg->set,
				                                      "source", fg->source, "sdr", sdr));
			}
			json_object_set_new(o, "figures", figs);
			if (m->family[0])
				json_object_set_new(o, "family", json_string(m->family));
			json_array_append_new(list, o);
		}
		for (size_t i = 0; i < n_found; i++)
			if (!sb_catalog_find(cat, found[i].name))
				json_array_append_new(list, json_pack("{s:s, s:b, s:s}", "name", found[i].name,
				                                      "installed", 1, "path", found[i].path));
		json_object_set_new(root, "models", list);
		char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
		                              JSON_REAL_PRECISION(15));
		printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(root);
		free(found);
		sb_catalog_free(cat);
		return 0;
	}
	printf("auto: %s (the installed model with the best published SDR for the four stems, each "
	       "stem ranked on one test set (%s where there are figures on it, else %s), else the "
	       "first by the catalogue's rank, else the built-in one; with --stems, the best for "
	       "each stem asked for)\n\n", auto_name, set_title("multisong"),
	       set_title("musdb18hq"));
	printf("builtin: built in, no download\n"
	       "    classic signal processing (median-filter HPSS, centre panning, low band): any "
	       "rate, CPU and OpenCL\n    stems: vocals, drums, bass, other\n");
	for (int i = 0; i < sb_catalog_count(cat); i++) {
		const sb_catalog_model *m = sb_catalog_at(cat, i);
		const found_model *f = find(found, n_found, m->name);
		sb_stem_mask_text(m->stems, ", ", stems, sizeof stems);
		size_str(m, size, sizeof size);
		printf("%s: %s\n    %s\n    stems: %s; %s\n", m->name,
		       f ? "installed" : "not installed", m->description, stems, size);
		for (int g = 0; g < m->n_figures; g++) {
			const sb_catalog_figures *fg = &m->figures[g];
			char sdr[512] = "";
			for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
				if (fg->text[k][0]) {
					const size_t at = strlen(sdr);
					snprintf(sdr + at, sizeof sdr - at, "%s%s %s", at ? ", " : "",
					         sb_stem_names[k], fg->text[k]);
				}
			printf("    SDR on %s: %s dB (%s)\n", set_title(fg->set), sdr, fg->source);
		}
		if (f) {
			char what[1024];
			describe(f->path, what, sizeof what);
			printf("    file: %s\n          %s\n", f->path, what);
		} else {
			printf("    install: stembridge models install %s\n", m->name);
		}
	}
	for (size_t i = 0; i < n_found; i++) {
		if (sb_catalog_find(cat, found[i].name))
			continue;
		char what[1024];
		describe(found[i].path, what, sizeof what);
		printf("%s: installed (not in the catalogue)\n    file: %s\n          %s\n",
		       found[i].name, found[i].path, what);
	}
	printf("\nModel folders searched, in order:\n");
	for (size_t i = 0; i < nd; i++)
		printf("  %s\n", dirs[i]);
	printf("\nCatalogue: %s; downloads from %s\n", sb_catalog_origin(cat),
	       sb_catalog_base_url(cat));
	printf("Without a network: fetch a model's files from there by hand and convert them with "
	       "stembridge-convert FILE... -o DIR/NAME.safetensors\n");
	free(found);
	sb_catalog_free(cat);
	return 0;
}

/* ---- install ---- */

typedef struct {
	int quiet, tty;
	int last_stage, last_file;
	double last_quarter;
	char line[160];
} install_view;

static atomic_int stop_asked;
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
	atomic_store(&stop_asked, 1);
}

static void clock_str(double s, char *buf, size_t len)
{
	if (s < 0 || s > 359999)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void on_progress(void *user, const sb_install_progress *p)
{
	install_view *v = user;
	if (v->quiet)
		return;
	const int new_step = (int)p->stage != v->last_stage || p->file_index != v->last_file;
	if (new_step && v->tty && v->line[0])
		fputc('\n', stderr);
	if (new_step) {
		v->line[0] = '\0';
		v->last_quarter = 0; /* the first plain line at 25 %, never a bare 0 % */
		if (p->stage == SB_INSTALL_DOWNLOADING)
			fprintf(stderr, "%s: downloading %s (%d of %d)%s\n", p->model, p->file,
			        p->file_index, p->n_files, p->resumed ? ", resuming" : "");
		else if (p->stage == SB_INSTALL_VERIFYING)
			fprintf(stderr, "%s: checking %s\n", p->model, p->file);
		else if (p->stage == SB_INSTALL_CONVERTING)
			fprintf(stderr, "%s: converting\n", p->model);
	}
	v->last_stage = (int)p->stage;
	v->last_file = p->file_index;
	if (p->stage != SB_INSTALL_DOWNLOADING)
		return;
	const double total = (double)(p->file_total ? p->file_total : 0);
	const double f = total > 0 ? (double)p->file_done / total : 0;
	char eta[16];
	clock_str(p->eta_s, eta, sizeof eta);
	if (v->tty) {
		char bar[31];
		const int fill = (int)(f * 30 + 0.5);
		for (int i = 0; i < 30; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[30] = '\0';
		snprintf(v->line, sizeof v->line, "\r  [%s] %6.1f / %.1f MB  %5.1f MB/s  %s left ", bar,
		         (double)p->file_done / 1e6, total / 1e6, p->rate / 1e6, eta);
		fputs(v->line, stderr);
		fflush(stderr);
	} else if (total > 0 && f - v->last_quarter >= 0.25) {
		v->last_quarter = (double)(int)(f * 4) / 4;
		fprintf(stderr, "%s: %s %d%% (%.1f of %.1f MB, %.1f MB/s, %s left)\n", p->model, p->file,
		        (int)(f * 100), (double)p->file_done / 1e6, total / 1e6, p->rate / 1e6, eta);
	}
}

static void log_install(void *user, sb_log_level level, const char *msg)
{
	install_view *v = user;
	if (v->tty && v->line[0] && level <= SB_LOG_WARNING) {
		fputc('\n', stderr);
		v->line[0] = '\0';
	}
	if (level == SB_LOG_ERROR)
		fprintf(stderr, "stembridge: error: %s\n", msg);
	else if (level == SB_LOG_WARNING && !v->quiet)
		fprintf(stderr, "stembridge: warning: %s\n", msg);
	else if (level == SB_LOG_INFO && !v->quiet && strstr(msg, "installed"))
		printf("%s\n", msg);
}

static int cmd_install(int argc, char **argv)
{
	sb_install_opts o;
	memset(&o, 0, sizeof o);
	const char *names[32];
	int n = 0;
	install_view v = {0};
	v.last_stage = v.last_file = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if ((!strcmp(a, "--base-url") || !strcmp(a, "--model-dir") || !strcmp(a, "--timeout") ||
		     !strcmp(a, "--cache-dir")) && !val) {
			fprintf(stderr, "stembridge: error: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--base-url")) {
			o.base_url = argv[++i];
		} else if (!strcmp(a, "--model-dir")) {
			o.model_dir = argv[++i];
		} else if (!strcmp(a, "--cache-dir")) {
			o.cache_dir = argv[++i];
		} else if (!strcmp(a, "--timeout")) {
			char *end = NULL;
			o.stall_s = strtod(argv[++i], &end);
			if (!end || *end || !(o.stall_s >= 1 && o.stall_s <= 3600)) {
				fprintf(stderr, "stembridge: error: --timeout takes 1 to 3600 seconds\n");
				return 2;
			}
		} else if (!strcmp(a, "--force")) {
			o.force = 1;
		} else if (!strcmp(a, "--keep-downloads")) {
			o.keep_downloads = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			v.quiet = 1;
		} else if (a[0] == '-') {
			fprintf(stderr, "stembridge: error: models install: unknown option '%s'\n", a);
			return 2;
		} else if (n < 32) {
			names[n++] = a;
		}
	}
	if (!n) {
		fprintf(stderr, "usage: stembridge models install NAME... [--base-url URL] "
		        "[--model-dir DIR] [--force] [--keep-downloads] [--timeout S] [-q]\n");
		return 2;
	}
	sb_logger log = {log_install, &v};
	sb_catalog *cat = NULL;
	if (sb_catalog_load(&log, &cat) != SB_OK)
		return 1;
	for (int i = 0; i < n; i++)
		if (!sb_catalog_find(cat, names[i])) {
			char list[512] = "";
			for (int k = 0, at = 0; k < sb_catalog_count(cat); k++)
				at += snprintf(list + at, sizeof list - (size_t)at, "%s%s", k ? ", " : "",
				               sb_catalog_at(cat, k)->name);
			fprintf(stderr, "stembridge: error: no model '%s' to install (the catalogue has: "
			        "%s)\n", names[i], list);
			sb_catalog_free(cat);
			return 2;
		}
	v.tty = !v.quiet && isatty(2);
	o.cancel = &stop_asked;
	o.progress = on_progress;
	o.progress_user = &v;
	o.log = &log;
	sb_cli_catch_stop(on_stop);
	int failed = 0;
	for (int i = 0; i < n && !stop_signal; i++) {
		v.last_stage = v.last_file = -1;
		v.line[0] = '\0';
		const sb_status st = sb_model_install(cat, names[i], &o, NULL, 0);
		if (v.tty && v.line[0])
			fputc('\n', stderr);
		if (st == SB_ERR_CANCELLED && stop_signal) {
			fprintf(stderr, "stembridge: %s: %s was not installed; its download resumes where it "
			        "stopped next time\n", stop_signal == SIGINT ? "interrupted (SIGINT)"
			                                                       : "terminated (SIGTERM)",
			        names[i]);
			break;
		}
		failed += st != SB_OK;
	}
	sb_catalog_free(cat);
	if (stop_signal)
		return 128 + stop_signal;
	return failed ? 1 : 0;
}

static int cmd_remove(int argc, char **argv)
{
	const char *dir = NULL;
	int n = 0, failed = 0;
	sb_logger log = {log_plain, NULL};
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--model-dir") && i + 1 < argc)
			dir = argv[++i];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model-dir")) {
			i++;
			continue;
		}
		n++;
		if (sb_model_remove(argv[i], dir, &log) == SB_OK)
			printf("%s removed\n", argv[i]);
		else
			failed++;
	}
	if (!n) {
		fprintf(stderr, "usage: stembridge models remove NAME... [--model-dir DIR]\n");
		return 2;
	}
	return failed ? 1 : 0;
}

int sb_cli_models(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "install"))
		return cmd_install(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "remove"))
		return cmd_remove(argc - 1, argv + 1);
	return cmd_list(argc, argv);
}
