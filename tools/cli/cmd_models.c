/* stembridge models [--model-path DIR]: the installed models and where the others come from.
 *
 * A model is a `<name>.safetensors` file in one of the model folders (sb_model_dirs, searched in
 * order; the first file of a name wins). Its settings are read from the file's `__metadata__`
 * as stembridge-convert writes it (tools/convert/convert_main.c); only the header is read. For
 * each released Demucs v4 model that is missing, the user is told which checkpoint files to get
 * from the Demucs release and the exact command that converts them. */
#include "commands.h"

#include "models/model.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* safetensors caps its header at 100 MB; ours are a few hundred KB */
#define MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
	const char *name;
	const char *what;
	const char *files[4];
} released_model;

/* The checkpoints of facebookresearch/demucs's remote/files.txt ("Hybrid Transformer models"
 * and the experimental 6-source one); the bag's models in the order of htdemucs_ft.yaml. */
static const released_model released[] = {
	{"htdemucs", "Hybrid Transformer Demucs v4, 4 stems", {"955717e8-8726e21a.th"}},
	{"htdemucs_ft", "htdemucs fine-tuned per stem: a bag of 4 models, 4x slower, a little better",
	 {"f7e0c4bc-ba3fe64a.th", "d12395a8-e57c48e6.th", "92cfc3b6-ef3bcb9c.th",
	  "04573f0d-f3cf25b2.th"}},
	{"htdemucs_6s", "6 stems (adds guitar and piano)", {"5c90dfd2-34c22ccb.th"}},
};

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
	size_t used = 0;
	out[0] = '\0';
	if (!klass || !sources) {
		append(out, len, &used, "no model settings in its metadata (not made by "
		       "stembridge-convert?); ");
	} else {
		int n_src = 1;
		for (const char *c = sources; *c; c++)
			n_src += *c == ',';
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

int sb_cli_models(int argc, char **argv)
{
	const char *extra[8] = {0};
	int n_extra = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model-path") && i + 1 < argc && n_extra < 7) {
			extra[n_extra++] = argv[++i];
		} else {
			fprintf(stderr, "stembridge: models: unknown option '%s' (--model-path DIR)\n",
			        argv[i]);
			return 2;
		}
	}
	char dirs[16][4096];
	size_t nd = sb_model_dirs(extra, dirs, 16);
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
			/* the first folder in search order wins; later files of that name are shadowed */
			int shadowed = 0;
			for (size_t k = 0; k < n_found; k++)
				shadowed |= !strcmp(found[k].name, found[n_found].name);
			if (!shadowed)
				n_found++;
		}
		closedir(d);
	}
	qsort(found, n_found, sizeof *found, cmp_found);

	printf("Installed models:\n");
	printf("  builtin: classic signal processing (median-filter HPSS, centre panning, low band);\n"
	       "      4 stems, any rate, CPU and OpenCL; no download\n");
	for (size_t i = 0; i < n_found; i++) {
		char what[1024];
		describe(found[i].path, what, sizeof what);
		printf("  %s: %s\n      %s\n", found[i].name, found[i].path, what);
	}
	printf("\nModel folders searched, in order:\n");
	for (size_t i = 0; i < nd; i++)
		printf("  %s\n", dirs[i]);

	/* where a converted model should go: the user's folder (the first after --model-path) */
	const char *target = nd > (size_t)n_extra ? dirs[n_extra] : nd ? dirs[0] : ".";
	struct stat sb;
	int missing_dir = stat(target, &sb) != 0;
	int header = 0;
	for (size_t r = 0; r < sizeof released / sizeof released[0]; r++) {
		const released_model *m = &released[r];
		int have = 0;
		for (size_t i = 0; i < n_found; i++)
			have |= !strcmp(found[i].name, m->name);
		if (have)
			continue;
		if (!header++)
			printf("\nNot installed (Demucs v4 models, converted from the released PyTorch "
			       "checkpoints):\n");
		int n_files = 0;
		while (n_files < 4 && m->files[n_files])
			n_files++;
		printf("  %s: %s\n", m->name, m->what);
		printf("    1. download ");
		for (int f = 0; f < n_files; f++)
			printf("%s%s", f == 0 ? "" : f + 1 == n_files ? " and " : ", ", m->files[f]);
		printf(" from the Demucs release page (facebookresearch/demucs, remote/files.txt)\n");
		int step = 2;
		if (missing_dir)
			printf("    %d. mkdir -p '%s'\n", step++, target);
		printf("    %d. stembridge-convert", step);
		for (int f = 0; f < n_files; f++)
			printf(" %s", m->files[f]);
		printf(" -o '%s/%s.safetensors'\n", target, m->name);
	}
	free(found);
	return 0;
}
