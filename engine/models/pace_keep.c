/* Each device's pace on a model, kept between jobs (pace_keep.h). */
#include "models/pace_keep.h"

#include "io/temp_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_LEN 1024

/* The file's path (SB_PACE_FILE, else in the cache folder); 0 when there is none. */
static int keep_path(char *buf, size_t len)
{
	const char *f = getenv("SB_PACE_FILE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int n;
	if (f && *f)
		n = snprintf(buf, len, "%s", f);
	else if (x && x[0] == '/')
		n = snprintf(buf, len, "%s/stembridge/paces.txt", x);
	else if (h && h[0] == '/')
		n = snprintf(buf, len, "%s/.cache/stembridge/paces.txt", h);
	else
		return 0;
	return n > 0 && (size_t)n < len;
}

/* One line read: its pace, batch and "model\tlabel" key; 0 when it does not read so. */
static int parse(const char *line, double *pace, int *batch, const char **key)
{
	char *end = NULL;
	errno = 0;
	const double p = strtod(line, &end);
	if (errno || end == line || *end != ' ' || !(p > 0) || p > 1e6)
		return 0;
	const char *b = end + 1;
	const long bt = strtol(b, &end, 10);
	if (end == b || *end != ' ' || bt < 0 || bt > 1 << 20)
		return 0;
	if (!strchr(end + 1, '\t'))
		return 0;
	*pace = p;
	*batch = (int)bt;
	*key = end + 1;
	return 1;
}

static int same_key(const char *key, const char *model, const char *label)
{
	const size_t m = strlen(model);
	return !strncmp(key, model, m) && key[m] == '\t' && !strcmp(key + m + 1, label);
}

/* Reads the file's lines (newline removed) into a list; n lines. */
static char **read_lines(const char *path, int *n)
{
	*n = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char **lines = calloc(SB_PACE_KEEP_MAX, sizeof *lines);
	char buf[LINE_MAX_LEN];
	while (lines && *n < SB_PACE_KEEP_MAX && fgets(buf, sizeof buf, f)) {
		const size_t l = strlen(buf);
		if (l == 0 || buf[l - 1] != '\n')
			continue; /* too long, or the last line cut short: skipped */
		buf[l - 1] = '\0';
		lines[*n] = strdup(buf);
		if (lines[*n])
			(*n)++;
	}
	fclose(f);
	return lines;
}

static void free_lines(char **lines, int n)
{
	for (int i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

void sb_pace_keep_load(const char *model, int batch, const sb_exec *dev, int n, double *pace)
{
	for (int i = 0; i < n; i++)
		pace[i] = 0;
	char path[4096];
	if (n < 2 || !model || !keep_path(path, sizeof path))
		return;
	int nl = 0;
	char **lines = read_lines(path, &nl);
	for (int k = 0; k < nl; k++) {
		double p;
		int b;
		const char *key;
		if (!parse(lines[k], &p, &b, &key) || b != batch)
			continue;
		for (int i = 0; i < n; i++)
			if (dev[i].props && same_key(key, model, dev[i].props->label))
				pace[i] = p; /* the last line wins: the newest */
	}
	free_lines(lines, nl);
}

void sb_pace_keep_save(const char *model, int batch, const sb_exec *dev, int n,
                       const double *pace, const sb_logger *log)
{
	char path[4096];
	int any = 0;
	for (int i = 0; i < n; i++)
		any |= pace[i] > 0 && dev[i].props;
	if (n < 2 || !any || !model || strchr(model, '\t') || strchr(model, '\n') ||
	    !keep_path(path, sizeof path))
		return;
	int nl = 0;
	char **lines = read_lines(path, &nl);
	/* the lines of other devices, models and batches stay (the oldest go past the limit) */
	char **keep = calloc(SB_PACE_KEEP_MAX, sizeof *keep);
	int nk = 0;
	for (int k = 0; keep && k < nl; k++) {
		double p;
		int b;
		const char *key;
		if (!parse(lines[k], &p, &b, &key))
			continue;
		int ours = 0;
		for (int i = 0; i < n && b == batch && !ours; i++)
			ours = pace[i] > 0 && dev[i].props && same_key(key, model, dev[i].props->label);
		if (!ours)
			keep[nk++] = lines[k];
	}
	const int room = SB_PACE_KEEP_MAX - n, skip = nk > room ? nk - room : 0;
	sb_temp t = {.fd = -1};
	FILE *f = NULL;
	int ok = keep && sb_make_parents(path) == 0 && sb_temp_create(path, &t) == 0 &&
	         (f = fdopen(dup(t.fd), "w")) != NULL;
	for (int k = skip; ok && k < nk; k++)
		ok = fprintf(f, "%s\n", keep[k]) > 0;
	for (int i = 0; ok && i < n; i++)
		if (pace[i] > 0 && dev[i].props && !strchr(dev[i].props->label, '\n'))
			ok = fprintf(f, "%.6g %d %s\t%s\n", pace[i], batch, model, dev[i].props->label) > 0;
	if (f)
		ok = fclose(f) == 0 && ok;
	ok = ok && sb_place_file(t.path, path, 1) == 0;
	const int e = errno;
	if (t.fd >= 0) {
		if (!ok)
			sb_temp_discard(&t);
		else
			sb_temp_close(&t);
	}
	if (!ok)
		sb_log(log, SB_LOG_INFO, "the devices' paces were not kept in %s: %s", path,
		       strerror(e));
	free(keep);
	free_lines(lines, nl);
}
