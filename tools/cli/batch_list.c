/* The list of a batch: the inputs LIST names (a text file of paths, '-' for standard input, or
 * a folder walked for audio files), each once in its first place, so that the same list and
 * the same N give every task the same inputs on every run; the root their folders under OUT
 * are relative to; and the task's shard.
 */
#include "batch.h"

#include "stembridge.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

int sb_strvec_push(sb_strvec *s, const char *p)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		char **v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return 0;
		s->v = v;
		s->cap = cap;
	}
	if (!(s->v[s->n] = strdup(p)))
		return 0;
	s->n++;
	return 1;
}

void sb_strvec_free(sb_strvec *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

int sb_strvec_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_audio_name(const char *name)
{
	static const char *const ext[] = {"wav", "flac", "ogg", "oga", "opus", "mp3", "aif", "aiff",
	                                  "aifc", "w64", "caf", "rf64"};
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		return 0;
	for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
		if (!strcasecmp(dot + 1, ext[i]))
			return 1;
	return 0;
}

/* Audio files under dir, depth first; hidden entries and the folder 'skip' (OUT) left out. */
static int walk(const char *dir, const char *skip_real, sb_strvec *out, int depth)
{
	if (depth > 64)
		return 1;
	char real[PATH_MAX];
	if (skip_real[0] && realpath(dir, real) && !strcmp(real, skip_real))
		return 1;
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "stembridge: error: %s: %s\n", dir, strerror(errno));
		return 0;
	}
	int ok = 1;
	struct dirent *de;
	while (ok && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[PATH_MAX];
		if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
			continue;
		struct stat st;
		if (stat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			ok = walk(p, skip_real, out, depth + 1);
		else if (S_ISREG(st.st_mode) && is_audio_name(de->d_name))
			ok = sb_strvec_push(out, p);
	}
	closedir(d);
	return ok;
}

static int read_list(FILE *f, sb_strvec *out)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ok = 1;
	while (ok && (n = getline(&line, &cap, f)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		ok = sb_strvec_push(out, line);
	}
	free(line);
	return ok;
}

/* Removes repeats, keeping each path's first place (so the order, and the shards, stay). */
static void drop_repeats(sb_strvec *s)
{
	char **sorted = malloc(s->n * sizeof *sorted);
	if (!sorted || !s->n) {
		free(sorted);
		return;
	}
	memcpy(sorted, s->v, s->n * sizeof *sorted);
	qsort(sorted, s->n, sizeof *sorted, sb_strvec_cmp);
	char *seen = calloc(s->n, 1); /* seen[k]: sorted[k]'s path kept once already */
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		char **hit = bsearch(&s->v[i], sorted, s->n, sizeof *sorted, sb_strvec_cmp);
		/* the first of equal strings in sorted order */
		while (hit > sorted && !strcmp(hit[-1], s->v[i]))
			hit--;
		const size_t k = (size_t)(hit - sorted);
		if (seen && seen[k]) {
			free(s->v[i]);
			continue;
		}
		if (seen)
			seen[k] = 1;
		s->v[w++] = s->v[i];
	}
	s->n = w;
	free(seen);
	free(sorted);
}

/* The folder every path of the list has in common (absolute, no trailing '/'). */
static void common_folder(const sb_strvec *s, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		char a[PATH_MAX];
		sb_manifest_input_path(s->v[i], a, sizeof a);
		char *slash = strrchr(a, '/');
		if (slash)
			*slash = '\0';
		if (i == 0) {
			snprintf(out, len, "%s", a);
			continue;
		}
		size_t k = 0;
		while (out[k] && out[k] == a[k])
			k++;
		/* back to a whole folder name */
		if (!(out[k] == '\0' && (a[k] == '/' || a[k] == '\0')))
			while (k > 0 && out[k] != '/')
				k--;
		out[k] = '\0';
	}
}

int sb_batch_list_load(const char *list, const char *root_arg, const char *out_real,
                       sb_strvec *all, char *root, size_t rlen)
{
	root[0] = '\0';
	struct stat lst;
	int ok;
	if (!strcmp(list, "-")) {
		ok = read_list(stdin, all);
	} else if (stat(list, &lst) == 0 && S_ISDIR(lst.st_mode)) {
		ok = walk(list, out_real, all, 0);
		qsort(all->v, all->n, sizeof *all->v, sb_strvec_cmp);
		sb_manifest_input_path(list, root, rlen);
	} else {
		FILE *f = fopen(list, "r");
		if (!f) {
			fprintf(stderr, "stembridge: error: %s: %s\n", list, strerror(errno));
			return 2;
		}
		ok = read_list(f, all);
		fclose(f);
	}
	if (!ok) {
		sb_strvec_free(all);
		return 1;
	}
	drop_repeats(all);
	if (all->n == 0) {
		fprintf(stderr, "stembridge: error: %s names no input%s\n", list,
		        strcmp(list, "-") && stat(list, &lst) == 0 && S_ISDIR(lst.st_mode)
		            ? " (no audio file: .wav .flac .ogg .opus .mp3 .aiff .w64 .caf)" : "");
		sb_strvec_free(all);
		return 2;
	}
	if (root_arg)
		sb_manifest_input_path(root_arg, root, rlen);
	else if (!root[0])
		common_folder(all, root, rlen);
	for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--)
		root[l - 1] = '\0';
	return 0;
}

/* OUT's sub-folder for an input: its folder relative to root ("" for root itself); a path
 * outside root keeps its whole folder, without the leading '/'. ".." never appears. */
void sb_batch_relative_folder(const char *input, const char *root, char *out, size_t len)
{
	char a[PATH_MAX];
	sb_manifest_input_path(input, a, sizeof a);
	char *slash = strrchr(a, '/');
	if (slash)
		*slash = '\0';
	const size_t rl = strlen(root);
	const char *rel = a;
	if (rl && !strncmp(a, root, rl) && (a[rl] == '/' || a[rl] == '\0'))
		rel = a + rl;
	while (*rel == '/')
		rel++;
	snprintf(out, len, "%s", rel);
	/* "a/../b" and "./" parts of a written path must not climb out of OUT */
	for (char *p = out; (p = strstr(p, "..")); p += 2)
		if ((p == out || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			p[0] = p[1] = '_';
}

/* Shard from --shard, else the Slurm array task, else 0/1. 0 when it makes no sense. */
int sb_batch_shard(const char *arg, long *idx, long *count)
{
	if (arg) {
		char *e1 = NULL, *e2 = NULL;
		*idx = strtol(arg, &e1, 10);
		if (!e1 || *e1 != '/')
			return 0;
		*count = strtol(e1 + 1, &e2, 10);
		return e2 && !*e2 && *count >= 1 && *idx >= 0 && *idx < *count;
	}
	const char *id = sb_knob_get("SLURM_ARRAY_TASK_ID"), *mn = sb_knob_get("SLURM_ARRAY_TASK_MIN"),
	           *cnt = sb_knob_get("SLURM_ARRAY_TASK_COUNT"), *step = sb_knob_get("SLURM_ARRAY_TASK_STEP");
	if (id && mn && cnt) {
		const long s = step && atol(step) > 0 ? atol(step) : 1;
		*idx = (atol(id) - atol(mn)) / s;
		*count = atol(cnt);
		return *count >= 1 && *idx >= 0 && *idx < *count;
	}
	*idx = 0;
	*count = 1;
	return 1;
}
