/* engine/io on its own, file by file, the way the job runner uses it: the temporary files
 * (naming, locks, what "stale" means, placing without replacing), the float WAV writer (its
 * bytes), the stem writer's commit and rollback (all or nothing), the manifest. Each case runs
 * in a process of its own (meson gives the name), so the fault injector's counters start at 0.
 *
 *   test_io temp|wav|commit|exists|rollback|nonfinite|abandon|manifest
 */
#include "../check.h"
#include "io/manifest.h"
#include "io/stem_writer.h"
#include "io/temp_file.h"
#include "sb_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[4096];

static void make_root(const char *name)
{
	const char *base = getenv("SB_TEST_TMP") ? getenv("SB_TEST_TMP") : "/tmp";
	snprintf(root, sizeof root, "%s/io-%s-XXXXXX", base, name);
	mkdir(base, 0755);
	if (!mkdtemp(root)) {
		perror(root);
		exit(1);
	}
}

/* entries of a folder (recursively), temporaries ("*.part-*") counted apart */
static int count_files(const char *dir, int *temps)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct stat st;
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			n += count_files(p, temps);
			continue;
		}
		if (strstr(e->d_name, ".part-"))
			(*temps)++;
		else
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static char *read_file(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)*len + 1);
	if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
		free(b);
		b = NULL;
	}
	if (b)
		b[*len] = 0;
	fclose(f);
	return b;
}

/* ---- temp_file ---- */

static void case_temp(void)
{
	make_root("temp");
	char final[4200];
	snprintf(final, sizeof final, "%s/take.wav", root);
	sb_temp t;
	CHECK(sb_temp_create(final, &t) == 0, "create: %s", strerror(errno));
	const char *base = strrchr(t.path, '/') + 1;
	long pid = 0;
	CHECK(!strncmp(base, ".take.wav.part-", 15) && sb_temp_is_ours(base, &pid) &&
	      pid == (long)getpid(), "temporary name %s (pid %ld)", base, pid);
	struct stat st;
	CHECK(stat(t.path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o", st.st_mode & 0777);
	/* held by this live writer: never stale */
	CHECK(sb_temp_clean_stale(root, NULL) == 0 && access(t.path, F_OK) == 0,
	      "a live writer's file was removed");
	/* a dead writer's file (its process gone, its lock with it) is stale */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	char dead[4300];
	snprintf(dead, sizeof dead, "%s/.other.wav.part-%ld-abcdef", root, (long)child);
	write_file(dead, "half a stem");
	/* another live process holding its lock: not stale, whatever its pid says */
	char held[4300];
	snprintf(held, sizeof held, "%s/.held.wav.part-%ld-ghijkl", root, (long)child);
	write_file(held, "being written");
	int pipefd[2];
	CHECK(pipe(pipefd) == 0, "pipe");
	pid_t holder = fork();
	if (holder == 0) {
		int fd = open(held, O_RDWR);
		flock(fd, LOCK_EX);
		char c = 1;
		if (write(pipefd[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	CHECK(read(pipefd[0], &c, 1) == 1, "the holder did not start");
	char mine[4300];
	snprintf(mine, sizeof mine, "%s/notes.part-1.txt", root); /* a user's file */
	write_file(mine, "mine");
	const int removed = sb_temp_clean_stale(root, NULL);
	CHECK(removed == 1 && access(dead, F_OK) != 0, "stale files removed: %d (dead writer's "
	      "still there: %d)", removed, access(dead, F_OK) == 0);
	CHECK(access(held, F_OK) == 0, "a file another live process holds was removed");
	CHECK(access(mine, F_OK) == 0, "a user's file was removed");
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);

	/* placing: never over a user's file unless asked */
	if (write(t.fd, "new", 3) != 3)
		failures++;
	write_file(final, "the user's take");
	errno = 0;
	CHECK(sb_place_file(t.path, final, 0) == -1 && errno == EEXIST, "placed over a user's file");
	long len = 0;
	char *b = read_file(final, &len);
	CHECK(b && !strcmp(b, "the user's take"), "the user's file changed: %s", b ? b : "(gone)");
	free(b);
	CHECK(sb_place_file(t.path, final, 1) == 0, "overwrite: %s", strerror(errno));
	b = read_file(final, &len);
	CHECK(b && !strcmp(b, "new"), "overwrite left %s", b ? b : "(nothing)");
	free(b);
	sb_temp_close(&t);
	CHECK(sb_sync_dir(root) == 0, "sync_dir");

	/* folders made for a job go again when it writes nothing */
	char deep[4400];
	snprintf(deep, sizeof deep, "%s/a/b/c/stem.wav", root);
	char made[8][4096];
	int n_made = 0;
	CHECK(sb_make_parents_tracked(deep, made, &n_made, 8) == 0 && n_made == 3,
	      "made %d folders", n_made);
	sb_remove_made_dirs(made, n_made);
	char a[4300];
	snprintf(a, sizeof a, "%s/a", root);
	CHECK(access(a, F_OK) != 0, "the job's folders stayed");
}

/* ---- wav_writer ---- */

static uint32_t u32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* the chunk 'id' in a RIFF file: its size and where its body starts, or -1 */
static long chunk(const unsigned char *b, long len, const char *id, uint32_t *size)
{
	for (long at = 12; at + 8 <= len;) {
		const uint32_t sz = u32(b + at + 4);
		if (!memcmp(b + at, id, 4)) {
			*size = sz;
			return at + 8;
		}
		at += 8 + sz + (sz & 1);
	}
	return -1;
}

static char *wav(const char *name, int channels, int64_t start, const float *x, int64_t frames,
                 long *len)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/%s", root, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	sb_wav_writer *w = NULL;
	CHECK(sb_wav_writer_new(fd, channels, 44100, start, "test", &w) == SB_OK, "wav_writer_new");
	if (!w)
		return NULL;
	CHECK(sb_wav_writer_write(w, x, frames) == SB_OK, "write");
	CHECK(sb_wav_writer_finish(w) == SB_OK, "finish");
	sb_wav_writer_free(w);
	close(fd);
	return read_file(path, len);
}

static void case_wav(void)
{
	make_root("wav");
	enum { F = 1001 };
	float x[2 * F];
	for (int i = 0; i < 2 * F; i++)
		x[i] = (float)sin(i * 0.01) * 0.5f;
	long len = 0, len2 = 0;
	unsigned char *b = (unsigned char *)wav("a.wav", 2, 123456, x, F, &len);
	unsigned char *b2 = (unsigned char *)wav("b.wav", 2, 123456, x, F, &len2);
	CHECK(b && b2 && len == len2 && !memcmp(b, b2, (size_t)len),
	      "two runs wrote different bytes");
	if (!b)
		return;
	CHECK(!memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WAVE", 4) && u32(b + 4) == (uint32_t)len - 8,
	      "RIFF header (size %u of %ld)", u32(b + 4), len);
	uint32_t sz = 0;
	long at = chunk(b, len, "JUNK", &sz);
	CHECK(at == 20 && sz == 28, "JUNK first, 28 bytes (room for ds64): at %ld, %u", at, sz);
	at = chunk(b, len, "fmt ", &sz);
	CHECK(at > 0 && sz == 18 && u16(b + at) == 3 && u16(b + at + 2) == 2 &&
	      u32(b + at + 4) == 44100 && u32(b + at + 8) == 44100 * 8 && u16(b + at + 12) == 8 &&
	      u16(b + at + 14) == 32 && u16(b + at + 16) == 0,
	      "fmt: IEEE float, 2 channels, 44100 Hz, 32 bits, cbSize 0");
	at = chunk(b, len, "fact", &sz);
	CHECK(at > 0 && sz == 4 && u32(b + at) == F, "fact: %u frames", at > 0 ? u32(b + at) : 0);
	at = chunk(b, len, "bext", &sz);
	CHECK(at > 0 && sz == 602 && u32(b + at + 338) == 123456 && u32(b + at + 342) == 0,
	      "bext: time reference %u", at > 0 ? u32(b + at + 338) : 0);
	at = chunk(b, len, "data", &sz);
	CHECK(at > 0 && sz == 2 * F * 4 && !memcmp(b + at, x, sizeof x), "data: the samples as given");
	free(b);
	free(b2);
	/* no timeline position: no bext chunk */
	b = (unsigned char *)wav("c.wav", 1, -1, x, F, &len);
	CHECK(b && chunk(b, len, "bext", &sz) < 0 && chunk(b, len, "data", &sz) > 0 && sz == F * 4,
	      "mono without a position");
	free(b);
}

/* ---- stem_writer ---- */

static sb_stem_writer *writer(const char *dir, int overwrite, sb_status *st)
{
	sb_stem_writer_opts o = {.out_dir = dir, .track = "song", .channels = 2, .rate = 44100,
	                         .frames = 4410, .format = SB_FORMAT_WAVF32, .overwrite = overwrite,
	                         .timeline_start = -1};
	sb_stem_writer *w = NULL;
	*st = sb_stem_writer_new(&o, &w);
	return w;
}

static sb_status fill(sb_stem_writer *w, float bad)
{
	float x[2 * 4410];
	for (int i = 0; i < 2 * 4410; i++)
		x[i] = 0.1f * (float)sin(i * 0.003);
	x[777] = bad == 0.f ? x[777] : bad;
	sb_sink *s = sb_stem_writer_sink(w);
	sb_status st = SB_OK;
	for (int k = 0; k < SB_N_STEMS && st == SB_OK; k++)
		st = s->write(s, k, x, 4410);
	return st;
}

static void commit_case(const char *name, int pre_existing, int expect_ok)
{
	make_root(name);
	char pre[4300];
	snprintf(pre, sizeof pre, "%s/song", root);
	mkdir(pre, 0755);
	snprintf(pre, sizeof pre, "%s/song/drums.wav", root);
	if (pre_existing)
		write_file(pre, "the user's drums");
	sb_status st;
	sb_stem_writer *w = writer(root, 0, &st);
	if (pre_existing) {
		/* refused before anything is written */
		CHECK(st == SB_ERR_EXISTS && !w, "an existing stem: %s", sb_status_str(st));
	} else {
		CHECK(st == SB_OK && w, "new: %s", sb_status_str(st));
		CHECK(w && fill(w, 0.f) == SB_OK, "write");
		char man[4300];
		snprintf(man, sizeof man, "%s/song/manifest.json", root);
		CHECK(w && sb_stem_writer_add_file(w, man, "{}", 2) == SB_OK, "add_file");
		st = w ? sb_stem_writer_commit(w) : SB_ERR_INVALID;
		CHECK((st == SB_OK) == expect_ok, "commit: %s", sb_status_str(st));
		sb_stem_writer_free(w);
	}
	int temps = 0;
	const int files = count_files(root, &temps);
	CHECK(temps == 0, "%d temporary files left", temps);
	const int want = pre_existing ? 1 : expect_ok ? 5 : 0;
	CHECK(files == want, "%d files after the commit, want %d (all or nothing)", files, want);
	if (pre_existing) {
		long len;
		char *b = read_file(pre, &len);
		CHECK(b && !strcmp(b, "the user's drums"), "the user's stem changed");
		free(b);
	}
}

static void case_nonfinite(void)
{
	make_root("nonfinite");
	sb_status st;
	sb_stem_writer *w = writer(root, 0, &st);
	CHECK(w && fill(w, NAN) == SB_ERR_NONFINITE, "a NaN sample must fail the write");
	int stem = -1;
	int64_t frame = -1;
	CHECK(w && sb_stem_writer_nonfinite(w, &stem, &frame) && stem == 0 && frame == 777 / 2,
	      "where: stem %d frame %lld", stem, (long long)frame);
	sb_stem_writer_free(w);
	int temps = 0;
	CHECK(count_files(root, &temps) == 0 && temps == 0, "a failed job left files");
}

static void case_abandon(void)
{
	make_root("abandon");
	sb_status st;
	sb_stem_writer *w = writer(root, 0, &st);
	CHECK(w && fill(w, 0.f) == SB_OK, "write");
	int temps = 0;
	count_files(root, &temps);
	CHECK(temps == 4, "%d temporary files while writing, want 4", temps);
	sb_stem_writer_free(w); /* a cancelled job */
	temps = 0;
	CHECK(count_files(root, &temps) == 0 && temps == 0, "free without commit left files");
}

/* ---- manifest ---- */

static void case_manifest(void)
{
	make_root("manifest");
	sb_status wst;
	sb_stem_writer *w = writer(root, 0, &wst);
	CHECK(w && fill(w, 0.f) == SB_OK, "write");
	const char *events[] = {"one event"};
	sb_manifest m = {.status = "ok", .input_path = "/music/song.wav", .input_size = 10,
	                 .input_mtime_ns = 5, .frames = 44100, .channels = 2, .rate = 44100,
	                 .input_format = "WAV", .input_peak = 0.5, .timeline_start = 96000,
	                 .track = "song", .take = "1", .model = "htdemucs", .model_requested = "auto",
	                 .device_requested = "auto", .device_used_key = "cpu",
	                 .device_used_id = "cpu", .device_used_name = "CPU",
	                 .precision_requested = "bf16", .precision = "fp32",
	                 .products = "oneDNN sgemm", .events = events, .n_events = 1,
	                 .stems = w};
	char *json = NULL, *txt = NULL;
	CHECK(sb_manifest_render(&m, &json, &txt) == SB_OK && json && txt, "render");
	json_error_t err;
	json_t *j = json ? json_loads(json, 0, &err) : NULL;
	CHECK(j != NULL, "the manifest is not JSON: %s", j ? "" : err.text);
	if (j) {
		json_t *p = json_object_get(j, "precision");
		CHECK(!strcmp(json_string_value(json_object_get(p, "requested")), "bf16") &&
		      !strcmp(json_string_value(json_object_get(p, "used")), "fp32"),
		      "precision fields");
		CHECK(json_integer_value(json_object_get(j, "timeline_start")) == 96000,
		      "timeline_start");
		CHECK(!strcmp(json_string_value(json_object_get(json_object_get(j, "model"), "name")),
		              "htdemucs"), "model name");
		json_t *stems = json_object_get(j, "stems");
		CHECK(json_array_size(stems) == 4, "%zu stems in the manifest", json_array_size(stems));
		for (size_t i = 0; i < json_array_size(stems); i++) {
			json_t *s = json_array_get(stems, i);
			const char *path = json_string_value(json_object_get(s, "path"));
			CHECK(path && path[0] == '/' && strstr(path, "/song/") &&
			      json_integer_value(json_object_get(s, "frames")) == 4410 &&
			      json_real_value(json_object_get(s, "peak")) > 0.09,
			      "stem %zu: %s", i, path ? path : "(no path)");
		}
		json_decref(j);
	}
	/* stems.txt: the region's start, then one absolute path a line, for hosts without JSON */
	int lines = 0;
	for (const char *p = txt; p && *p; p++)
		lines += *p == '\n';
	CHECK(txt && !strncmp(txt, "timeline_start 96000\n/", 22) && lines == 5,
	      "stems.txt: '%.60s' (%d lines)", txt ? txt : "", lines);
	free(json);
	free(txt);
	sb_stem_writer_free(w);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "temp"))
		case_temp();
	else if (!strcmp(c, "wav"))
		case_wav();
	else if (!strcmp(c, "commit"))
		commit_case("commit", 0, 1);
	else if (!strcmp(c, "exists"))
		commit_case("exists", 1, 0);
	else if (!strcmp(c, "rollback")) /* SB_FAULT_INJECT=io:rename:3: the third rename fails */
		commit_case("rollback", 0, 0);
	else if (!strcmp(c, "nonfinite"))
		case_nonfinite();
	else if (!strcmp(c, "abandon"))
		case_abandon();
	else if (!strcmp(c, "manifest"))
		case_manifest();
	else {
		fprintf(stderr, "usage: test_io temp|wav|commit|exists|rollback|nonfinite|abandon|"
		                "manifest\n");
		return 2;
	}
	printf("%s: %d failure(s)\n", c, failures);
	return failures ? 1 : 0;
}
