/* Each device's pace on a model, kept between jobs (pace_cache.h). */
#include "models/pace_cache.h"

#include "io/cache_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX ((long)1 << 18)
#define LINE_LEN 1024

typedef struct {
	char *line[SB_PACE_KEEP_MAX]; /* the file's lines, newline removed */
	int n;
} lines;

/* The file's path (SB_PACE_FILE, else in the cache folder); 0 when there is none. */
static int keep_path(char *buf, size_t len)
{
	const char *f = sb_knob_get("SB_PACE_FILE");
	if (f && *f)
		return snprintf(buf, len, "%s", f) < (int)len;
	char dir[4000];
	return sb_cache_dir(dir, sizeof dir) && snprintf(buf, len, "%s/paces.txt", dir) < (int)len;
}

void sb_pace_cache_job(char *buf, size_t len, const char *model, int bf16, int threads, int batch)
{
	snprintf(buf, len, "%s %s threads %d batch %d", model, bf16 ? "bf16" : "fp32", threads,
	         batch);
	for (char *p = buf; *p; p++)
		if (*p == '\t' || *p == '\n')
			*p = ' ';
}

/* One line read: its pace, skips, and "job\tdevice key"; 0 when it does not read so. */
static int parse(const char *line, double *pace, int *skips, const char **key)
{
	char *end = NULL;
	errno = 0;
	const double p = strtod(line, &end);
	if (errno || end == line || *end != ' ' || !(p > 0) || p > 1e6)
		return 0;
	const char *b = end + 1;
	const long k = strtol(b, &end, 10);
	if (end == b || *end != ' ' || k < 0 || k >= SB_PACE_KEEP_SKIPS)
		return 0;
	const char *tab = strchr(end + 1, '\t');
	if (!tab || tab == end + 1 || !tab[1] || strchr(tab + 1, '\t'))
		return 0;
	*pace = p;
	*skips = (int)k;
	*key = end + 1;
	return 1;
}

static int same_key(const char *key, const char *job, const char *dev)
{
	const size_t m = strlen(job);
	return !strncmp(key, job, m) && key[m] == '\t' && !strcmp(key + m + 1, dev);
}

static void free_lines(lines *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->line[i]);
	l->n = 0;
}

/* The file's lines into l: 1 when it was whole or absent; 0 (l empty) when it is damaged or
 * not a file of ours (a folder, a FIFO, too large), with *why; -1 (l empty, errno) when it
 * could not be read now (permissions, no memory): nothing to go by, nothing to overwrite. */
static int read_lines(const char *path, lines *l, char *why, size_t why_len)
{
	l->n = 0;
	FILE *f = sb_cache_file_open(path, FILE_MAX);
	if (!f) {
		const int err = errno;
		snprintf(why, why_len, "%s", strerror(err));
		errno = err;
		return err == ENOENT ? 1 : err == EINVAL || err == EFBIG || err == EISDIR ? 0 : -1;
	}
	char buf[LINE_LEN];
	int bad = 0;
	while (!bad && fgets(buf, sizeof buf, f)) {
		const size_t len = strlen(buf);
		double p;
		int k;
		const char *key;
		bad = len == 0 || buf[len - 1] != '\n'; /* too long, cut short, or not text */
		if (!bad)
			buf[len - 1] = '\0';
		bad = bad || !parse(buf, &p, &k, &key);
		if (!bad && l->n == SB_PACE_KEEP_MAX) { /* the oldest goes */
			free(l->line[0]);
			memmove(l->line, l->line + 1, sizeof l->line[0] * (SB_PACE_KEEP_MAX - 1));
			l->n--;
		}
		if (!bad && !(l->line[l->n] = strdup(buf))) {
			fclose(f);
			free_lines(l);
			snprintf(why, why_len, "%s", strerror(ENOMEM));
			errno = ENOMEM;
			return -1;
		}
		l->n += !bad;
	}
	const int unreadable = ferror(f);
	fclose(f);
	if (unreadable) {
		free_lines(l);
		snprintf(why, why_len, "it cannot be read");
		errno = EIO;
		return -1;
	}
	if (bad) {
		free_lines(l);
		snprintf(why, why_len, "not a file of paces");
	}
	return !bad;
}

void sb_pace_cache_load(const char *job, const sb_exec *dev, int n, sb_pace_entry *pace,
                       const sb_logger *log)
{
	memset(pace, 0, sizeof *pace * (size_t)(n > 0 ? n : 0));
	char path[4096], why[128];
	if (n < 2 || !keep_path(path, sizeof path))
		return;
	lines l;
	if (read_lines(path, &l, why, sizeof why) != 1)
		sb_log(log, SB_LOG_INFO, "ignoring %s (%s): every device's pace measured again", path,
		       why);
	for (int k = 0; k < l.n; k++) {
		double p;
		int sk;
		const char *key;
		parse(l.line[k], &p, &sk, &key);
		for (int i = 0; i < n; i++)
			if (dev[i].props && same_key(key, job, dev[i].props->key)) {
				pace[i].kept = p; /* the last line wins: the newest */
				pace[i].skips = sk;
			}
	}
	free_lines(&l);
}

typedef struct {
	const char *path, *job;
	const sb_exec *dev;
	int n;
	const sb_pace_entry *pace;
	lines l;
} saving;

/* a device's line after this job: its pace and skips; 0 when it has none */
static int outcome(const sb_pace_entry *e, double *p, int *skips)
{
	if (e->measured > 0) {
		*p = e->measured;
		*skips = 0;
	} else if (e->kept > 0 && e->runs == 0 && e->declined) {
		*p = e->kept;
		*skips = e->skips + 1; /* left out by the rule: a skip older */
	} else {
		*p = e->kept;
		*skips = e->skips;
	}
	return *p > 0 && *skips < SB_PACE_KEEP_SKIPS;
}

static int ours(const saving *sv, const char *key)
{
	for (int i = 0; i < sv->n; i++)
		if (sv->dev[i].props && same_key(key, sv->job, sv->dev[i].props->key))
			return 1;
	return 0;
}

/* what another process kept since; a damaged file has nothing to keep, one that cannot be
 * read now must not be overwritten */
static int reread(void *user)
{
	saving *sv = user;
	char why[128];
	return read_lines(sv->path, &sv->l, why, sizeof why) < 0 ? -1 : 0;
}

static int write_paces(FILE *f, void *user)
{
	saving *sv = user;
	int room = SB_PACE_KEEP_MAX - sv->n, others = 0;
	for (int k = 0; k < sv->l.n; k++) {
		double p;
		int sk;
		const char *key;
		others += parse(sv->l.line[k], &p, &sk, &key) && !ours(sv, key);
	}
	for (int k = 0; k < sv->l.n; k++) {
		double p;
		int sk;
		const char *key;
		if (!parse(sv->l.line[k], &p, &sk, &key) || ours(sv, key))
			continue;
		if (others-- > room) /* the oldest go */
			continue;
		fprintf(f, "%s\n", sv->l.line[k]);
	}
	for (int i = 0; i < sv->n; i++) {
		double p;
		int sk;
		const char *key = sv->dev[i].props ? sv->dev[i].props->key : "";
		if (*key && !strpbrk(key, "\t\n") && outcome(&sv->pace[i], &p, &sk))
			fprintf(f, "%.6g %d %s\t%s\n", p, sk, sv->job, key);
	}
	return 0;
}

void sb_pace_cache_save(const char *job, const sb_exec *dev, int n, const sb_pace_entry *pace,
                       const sb_logger *log)
{
	char path[4096];
	int ran = 0;
	for (int i = 0; i < n; i++)
		ran |= pace[i].runs > 0;
	if (n < 2 || !ran || !keep_path(path, sizeof path))
		return; /* nothing was shared (a silent file): nothing learnt */
	saving sv = {path, job, dev, n, pace, {{0}, 0}};
	if (sb_cache_file_save(path, reread, write_paces, &sv, log) != 0)
		sb_log(log, SB_LOG_INFO, "the devices' paces were not kept in %s: %s", path,
		       strerror(errno));
	free_lines(&sv.l);
}
