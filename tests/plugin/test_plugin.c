/* The plugin as a host sees it: loaded through lilv from the build dir (LV2_PATH), fed audio
 * and time:Position events. Subcommands, one meson test each:
 *   record MONO|STEREO ardour|carla|none   arm, roll, stop, jump, disarm; stems, manifest, place
 *   freewheel                               offline bounce loses no sample
 *   state                                   save, restore into a new instance, every value
 *   damaged                                 damaged/unknown state values are ignored, logged
 *   modelfile                               a take separated with the model file the property
 *                                           names (the compact golden HTDemucs, SB_FIXTURES_DIR)
 *   modelfile-damaged                       damaged modelFile values, set or restored: ignored
 *   roformerfile FILE [STEMS]               a take separated with an installed RoFormer into
 *                                           exactly STEMS (default vocals,other; run by
 *                                           tests/models/test_roformer_install.py)
 *   fallback                                a saved device missing here: fallback shown
 *   many                                    16 instances at once on 4 threads
 *   presets                                 each preset of the presets bundle loads
 *   close                                   removing the plugin while its job runs
 *   rt                                      no allocation/lock/wait/file I/O inside run()
 *   auto                                    Auto runs the best installed model; a missing
 *                                           model is said before and at the take; six stems,
 *                                           guitar audition; guitar ignored for 4-stem models
 *   modelinstall                            a model installed from the UI (patch:Set
 *                                           installModel) while a take waits for it; a failed
 *                                           install fails its waiting take (run by
 *                                           tests/models/test_models.py, which serves the files)
 *   lazy                                    no thread until first needed (lv2lint's fork)
 *   silent                                  a silent take is said and not separated
 *   lane                                    what the window is fed: the take lane while
 *                                           recording, stem rows, the take the state speaks
 *                                           of, takes ahead, a stale error cleared
 *   naming                                  stable stem names, take numbers that go on, the
 *                                           same state saved twice
 *   paths                                   output folder through generic UIs' file slots;
 *                                           no empty folders, stale temporaries cleaned, a
 *                                           failed take's recording kept
 */
#include "host.h"

#include "uris.h"

#include <lv2/atom/atom.h>
#include <lv2/state/state.h>

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

static const char *const stems[6] = {"vocals", "drums", "bass", "other", "guitar", "piano"};
#define ATOM_PATH "http://lv2plug.in/ns/ext/atom#Path"
#define ATOM_STRING "http://lv2plug.in/ns/ext/atom#String"
#define ATOM_FLOAT "http://lv2plug.in/ns/ext/atom#Float"
static char tmp_root[512];

/* A test signal with a voice-like tone, a bass line and clicks, different per channel. */
static float signal_at(int64_t i, int c, int seed)
{
	double t = (double)i / 48000.0;
	double v = 0.25 * sin(2 * M_PI * (220.0 + 20 * seed) * t) * (0.6 + 0.4 * sin(2 * M_PI * 3 * t));
	v += 0.2 * sin(2 * M_PI * (55.0 + 5 * c) * t);
	if (i % 12000 < 200)
		v += 0.3 * sin(2 * M_PI * 3000 * t) * (1.0 - (i % 12000) / 200.0);
	return (float)v;
}

typedef struct {
	float *data; /* interleaved */
	int64_t frames, cap;
	int channels;
} recording;

static void rec_push(recording *r, host_plugin *h)
{
	if (r->frames + h->block > r->cap) {
		r->cap = (r->frames + h->block) * 2;
		r->data = realloc(r->data, (size_t)r->cap * r->channels * sizeof(float));
	}
	for (uint32_t i = 0; i < h->block; i++)
		for (int c = 0; c < r->channels; c++)
			r->data[(r->frames + i) * r->channels + c] = h->in[c][i];
	r->frames += h->block;
}

/* Rolls n blocks of the test signal, optionally into rec; pace: sleep 1 ms every k blocks. */
static void roll(host_plugin *h, int n, int seed, recording *rec, int pace)
{
	for (int b = 0; b < n; b++) {
		for (int c = 0; c < h->channels; c++)
			for (uint32_t i = 0; i < h->block; i++)
				h->in[c][i] = signal_at(h->pos + i, c, seed);
		if (rec)
			rec_push(rec, h);
		host_run(h);
		if (pace && b % pace == 0)
			host_sleep_ms(1);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = calloc(1, (size_t)n + 1);
	if (fread(s, 1, (size_t)n, f) != (size_t)n)
		s[0] = '\0';
	fclose(f);
	return s;
}

/* Checks the take whose manifest h announced: stem files named after track and stem, the
 * region's start in manifest and stems.txt, and stems that add back to what was fed. */
static void check_take(host_plugin *h, const char *track, const recording *rec, int64_t start)
{
	CHECK(h->manifest[0], "no manifest announced");
	if (!h->manifest[0])
		return;
	char *m = slurp(h->manifest);
	CHECK(m != NULL, "manifest %s unreadable", h->manifest);
	char num[32];
	snprintf(num, sizeof num, "%lld", (long long)start);
	CHECK(m && strstr(m, num), "manifest lacks the region start %s", num);
	free(m);
	if (h->listening)
		CHECK(h->timeline_start == start, "announced start %lld, expected %lld",
		      (long long)h->timeline_start, (long long)start);

	char dir[4096];
	snprintf(dir, sizeof dir, "%s", h->manifest);
	*strrchr(dir, '/') = '\0';
	char txt[4400];
	int found_txt = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	float *sum = calloc((size_t)rec->frames * rec->channels, sizeof(float));
	int n_stems = 0;
	while (d && (e = readdir(d))) {
		if (strstr(e->d_name, "stems.txt")) {
			if (snprintf(txt, sizeof txt, "%s/%s", dir, e->d_name) >= (int)sizeof txt)
				continue;
			char *s = slurp(txt);
			CHECK(s && strstr(s, num), "%s lacks the region start", txt);
			free(s);
			found_txt = 1;
		}
		if (!strstr(e->d_name, ".wav"))
			continue;
		int which = -1;
		for (int k = 0; k < 4; k++)
			if (strstr(e->d_name, stems[k]))
				which = k;
		CHECK(which >= 0 && strstr(e->d_name, track), "stem file %s: no track or stem name", e->d_name);
		char path[4400];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		SF_INFO info;
		memset(&info, 0, sizeof info);
		SNDFILE *f = sf_open(path, SFM_READ, &info);
		CHECK(f != NULL, "cannot open %s", path);
		if (!f)
			continue;
		CHECK(info.frames == rec->frames && info.channels == rec->channels,
		      "%s: %lld frames x %d, expected %lld x %d", path, (long long)info.frames,
		      info.channels, (long long)rec->frames, rec->channels);
		/* a host that places files by their Broadcast-WAV time reference (Ardour's import
		 * at timepos_t::max) puts the stem where the region was */
		SF_BROADCAST_INFO bi;
		memset(&bi, 0, sizeof bi);
		int has_bext = sf_command(f, SFC_GET_BROADCAST_INFO, &bi, sizeof bi) == SF_TRUE;
		int64_t tref = (int64_t)(((uint64_t)bi.time_reference_high << 32) | bi.time_reference_low);
		CHECK(has_bext && tref == start, "%s: time reference %lld, expected %lld", e->d_name,
		      (long long)tref, (long long)start);
		if (info.frames == rec->frames && info.channels == rec->channels) {
			float *buf = malloc((size_t)info.frames * info.channels * sizeof(float));
			sf_readf_float(f, buf, info.frames);
			for (int64_t i = 0; i < info.frames * info.channels; i++)
				sum[i] += buf[i];
			free(buf);
			n_stems++;
		}
		sf_close(f);
	}
	if (d)
		closedir(d);
	CHECK(found_txt, "no stems.txt beside %s", h->manifest);
	CHECK(n_stems == 4, "%d stems in %s", n_stems, dir);
	/* what the UI lists: the same four files, when someone listens */
	if (h->listening) {
		CHECK(h->n_stems == 4, "the stems message listed %d files", h->n_stems);
		for (int k = 0; k < h->n_stems; k++)
			CHECK(strncmp(h->stems[k], dir, strlen(dir)) == 0 && access(h->stems[k], R_OK) == 0,
			      "announced stem %s is not a readable file beside the manifest", h->stems[k]);
	}
	if (n_stems == 4) {
		double worst = 0;
		for (int64_t i = 0; i < rec->frames * rec->channels; i++)
			worst = fmax(worst, fabs(sum[i] - rec->data[i]));
		CHECK(worst < 1e-4, "stems add back to the region within %g, expected < 1e-4", worst);
	}
	free(sum);
}

static void make_tmp(const char *name, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s", tmp_root, name) >= (int)len)
		out[0] = '\0';
	char cmd[2200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot make %s\n", out);
}

static int test_record(int stereo, host_path_mode mode)
{
	char scratch[1200], outdir[1300];
	make_tmp(stereo ? "record-stereo" : "record-mono", scratch, sizeof scratch);
	snprintf(outdir, sizeof outdir, "%s/stems-out", scratch);
	/* Ardour with no UI open sends no patch:Get: the plugin must still announce the manifest,
	 * and nothing else (Ardour 7.3 warns on every readable-only property it receives). */
	const bool quiet = mode == HOST_PATH_ARDOUR;
	host_plugin *h = quiet ? host_new_quiet(stereo, 1024, mode, scratch)
	                       : host_new(stereo, 1024, mode, scratch);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "Lead Vox");
	host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", outdir);
	h->ctl[SB_PORT_RECORD] = 1.0f;
	const int64_t start = 3 * 48000 + 123;
	host_transport(h, start, 0.0f);
	roll(h, 4, 0, NULL, 0);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_RECORDING, "records while stopped");

	/* take 1: roll 3 s, stop */
	recording rec = {0};
	rec.channels = h->channels;
	host_transport(h, start, 1.0f);
	roll(h, 3 * 47, 1, &rec, 8);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING, "not recording while rolling");
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	CHECK(host_wait_jobs(h, 1, 600), "take 1 not separated: %s", h->last_error);
	check_take(h, "Lead Vox", &rec, start);
	if (mode == HOST_PATH_ARDOUR) {
		char want[1300];
		snprintf(want, sizeof want, "%s/plugins/7/scratch/stembridge/", scratch);
		CHECK(strncmp(h->manifest, want, strlen(want)) == 0, "Ardour: stems in %s", h->manifest);
	} else {
		CHECK(strncmp(h->manifest, outdir, strlen(outdir)) == 0,
		      "stems should be in the outputDir, are at %s", h->manifest);
	}

	/* take 2 ends at a jump; take 3 starts there and ends on disarm */
	rec.frames = 0;
	const int64_t start2 = 20 * 48000;
	host_transport(h, start2, 1.0f);
	roll(h, 30, 2, &rec, 8);
	recording rec3 = {0};
	rec3.channels = h->channels;
	const int64_t start3 = 40 * 48000 + 7;
	host_transport(h, start3, 1.0f);
	roll(h, 30, 3, &rec3, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	roll(h, 2, 3, NULL, 0);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_RECORDING, "still recording after disarm");
	CHECK(host_wait_jobs(h, 3, 600), "takes 2 and 3 not separated: %s", h->last_error);
	/* the last announced take is take 3 */
	check_take(h, "Lead Vox", &rec3, start3);
	/* Ardour 7.3 prints a warning for every patch:Set of a property it may not write: the
	 * read-only ones go as patch:Put */
	CHECK(h->sets_not_writable == 0, "%d patch:Set messages of read-only properties",
	      h->sets_not_writable);
	if (quiet)
		CHECK(h->other_sets == 0, "%d UI messages sent with nobody listening", h->other_sets);
	else
		CHECK(h->n_device_list >= 0, "no device list announced after patch:Get");
	free(rec.data);
	free(rec3.data);
	host_free(h);
	return failures;
}

static int test_freewheel(void)
{
	char scratch[1200], outdir[1300];
	make_tmp("freewheel", scratch, sizeof scratch);
	snprintf(outdir, sizeof outdir, "%s/out", scratch);
	host_plugin *h = host_new(true, 8192, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", outdir);
	host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "Bounce");
	h->freewheel = 1.0f;
	h->ctl[SB_PORT_RECORD] = 1.0f;
	recording rec = {0};
	rec.channels = 2;
	const int64_t start = 48000 * 61;
	host_transport(h, start, 1.0f);
	/* 40 s of audio as fast as the host can: no pacing at all. The block pool holds about 5 s
	 * when the bounce starts, so this outruns it unless freewheeling is handled. */
	double t0 = host_now();
	roll(h, 40 * 48000 / 8192, 4, &rec, 0);
	CHECK(host_now() - t0 < 20.0, "the bounce took %.1f s: not faster than real time",
	      host_now() - t0);
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	h->freewheel = 0.0f;
	CHECK(host_wait_jobs(h, 1, 900), "bounce not separated: %s", h->last_error);
	CHECK(!strstr(h->last_error, "lost"), "lost samples: %s", h->last_error);
	check_take(h, "Bounce", &rec, start);
	free(rec.data);
	host_free(h);
	return failures;
}

/* State through the plugin's own interface, to see every stored value. */
typedef struct {
	LV2_URID key[32];
	uint32_t type[32];
	char val[32][4096];
	size_t size[32];
	int n;
} kv;

static LV2_State_Status kv_store(LV2_State_Handle hd, uint32_t key, const void *v, size_t size,
                                 uint32_t type, uint32_t flags)
{
	(void)flags;
	kv *s = hd;
	if (s->n >= 32 || size > 4096)
		return LV2_STATE_ERR_UNKNOWN;
	s->key[s->n] = key;
	s->type[s->n] = type;
	memcpy(s->val[s->n], v, size);
	s->size[s->n] = size;
	s->n++;
	return LV2_STATE_SUCCESS;
}

static const void *kv_retrieve(LV2_State_Handle hd, uint32_t key, size_t *size, uint32_t *type,
                               uint32_t *flags)
{
	kv *s = hd;
	for (int i = 0; i < s->n; i++) {
		if (s->key[i] == key) {
			*size = s->size[i];
			*type = s->type[i];
			*flags = LV2_STATE_IS_POD;
			return s->val[i];
		}
	}
	return NULL;
}

static const char *kv_text(kv *s, const char *uri)
{
	for (int i = 0; i < s->n; i++)
		if (s->key[i] == host_map(uri))
			return s->val[i];
	return NULL;
}

static float kv_float(kv *s, const char *uri)
{
	const char *v = kv_text(s, uri);
	float f = NAN;
	if (v)
		memcpy(&f, v, sizeof f);
	return f;
}

static int kv_int(kv *s, const char *uri)
{
	const char *v = kv_text(s, uri);
	int32_t x = -999;
	if (v)
		memcpy(&x, v, sizeof x);
	return x;
}

static void save_direct(host_plugin *h, kv *s)
{
	const LV2_State_Interface *si =
		lilv_instance_get_extension_data(h->inst, LV2_STATE__interface);
	memset(s, 0, sizeof *s);
	si->save(lilv_instance_get_handle(h->inst), kv_store, s, LV2_STATE_IS_POD, NULL);
}

static const void *port_value(const char *sym, void *user, uint32_t *size, uint32_t *type)
{
	host_plugin *h = user;
	const LilvPort *p = lilv_plugin_get_port_by_symbol(h->plugin, lilv_new_string(host_world, sym));
	uint32_t i = lilv_port_get_index(h->plugin, p);
	*size = sizeof(float);
	*type = host_map("http://lv2plug.in/ns/ext/atom#Float");
	return &h->ctl[i];
}

static void set_port(const char *sym, void *user, const void *v, uint32_t size, uint32_t type)
{
	(void)size;
	(void)type;
	host_plugin *h = user;
	const LilvPort *p = lilv_plugin_get_port_by_symbol(h->plugin, lilv_new_string(host_world, sym));
	h->ctl[lilv_port_get_index(h->plugin, p)] = *(const float *)v;
}

/* A build with the toy backend (-Dtoy_backend=true): its device is one more "Device k" in the
 * announced table, chosen, saved by its key ("toy|..."), restored without a warning, and a take
 * runs on it (the built-in model, which the toy lacks, goes to the CPU and says so). */
static int test_toy(void)
{
	host_plugin *a = host_new(true, 256, HOST_PATH_NONE, NULL);
	CHECK(a != NULL, "instantiate");
	if (!a)
		return 1;
	for (double end = host_now() + 60; host_now() < end && a->n_device_list < 1;) {
		host_run(a);
		host_sleep_ms(2);
	}
	CHECK(a->n_device_list >= 1, "no device list (%d devices)", a->n_device_list);
	/* the toy registers last: the last device of the table */
	const float port = (float)(SB_DEVICE_FIRST_ACCEL + a->n_device_list - 1);
	a->ctl[SB_PORT_DEVICE] = port;
	host_run(a);
	kv s;
	save_direct(a, &s);
	const char *key = kv_text(&s, SB__deviceKey);
	CHECK(key && !strcmp(key, "toy|toy|stembridge|Toy accelerator|0"), "the toy device saved as '%s'", key ? key : "");

	char dir[1200];
	make_tmp("toy-state", dir, sizeof dir);
	LV2_URID_Map *mp = host_map_feature();
	LilvState *st = lilv_state_new_from_instance(a->plugin, a->inst, mp, NULL, dir, dir, dir,
	                                             port_value, a, LV2_STATE_IS_POD, NULL);
	char path[1400];
	snprintf(path, sizeof path, "%s/state.ttl", dir);
	if (st)
		lilv_state_save(host_world, mp, host_unmap_feature(), st, NULL, dir, "state.ttl");
	lilv_state_free(st);
	host_plugin *b = host_new(true, 256, HOST_PATH_NONE, NULL);
	const int before = host_log_warnings();
	LilvState *ld = lilv_state_new_from_file(host_world, mp, NULL, path);
	CHECK(ld != NULL, "cannot load %s", path);
	if (ld) {
		lilv_state_restore(ld, b->inst, set_port, b, 0, NULL);
		lilv_state_free(ld);
	}
	CHECK(host_log_warnings() == before, "restoring the toy device's key logged a warning");
	CHECK(b->ctl[SB_PORT_DEVICE] == port, "restored Device control %g, saved %g",
	      b->ctl[SB_PORT_DEVICE], port);
	kv s2;
	save_direct(b, &s2);
	CHECK(kv_text(&s2, SB__deviceKey) && !strcmp(kv_text(&s2, SB__deviceKey), "toy|toy|stembridge|Toy accelerator|0"),
	      "the restored instance saves '%s'", kv_text(&s2, SB__deviceKey));

	/* a take on the toy: the built-in model is not in its backend, so the CPU runs it */
	char outdir[1300];
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	b->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_set_text(b, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(b, SB__trackName, ATOM_STRING, "Toy");
	recording rec = {0};
	rec.channels = b->channels;
	b->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(b, 48000, 1.0f);
	roll(b, 60, 5, &rec, 1);
	b->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(b, b->pos, 0.0f);
	CHECK(host_wait_jobs(b, 1, 300), "the take on the toy device was not separated: %s",
	      b->last_error);
	char *m = b->manifest[0] ? slurp(b->manifest) : NULL;
	CHECK(m && strstr(m, "toy|toy|stembridge|Toy accelerator|0") &&
	      strstr(m, "has no operations for this model"),
	      "the manifest does not say the toy was asked for and why the CPU ran it");
	free(m);
	free(rec.data);
	host_free(a);
	host_free(b);
	return failures;
}

static int test_state(void)
{
	char dir[1200], outdir[1300];
	make_tmp("state", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/my stems", dir);
	host_plugin *a = host_new(true, 256, HOST_PATH_NONE, NULL);
	CHECK(a != NULL, "instantiate");
	if (!a)
		return 1;
	host_set_text(a, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", outdir);
	host_set_text(a, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "Drum Bus");
	host_set_float(a, SB__maxMinutes, 12.5f);
	host_set_float(a, SB__uiScale, 1.5f); /* the window's own zoom, chosen in the UI */
	/* a model file outside the state folder, as a user converts one anywhere: lilv links it
	 * into the state (mapPath), and what comes back leads to the same file */
	char models[1200], model[1400];
	make_tmp("models-for-state", models, sizeof models);
	snprintf(model, sizeof model, "%s/My Model.safetensors", models);
	FILE *mf = fopen(model, "wb");
	CHECK(mf != NULL, "cannot write %s", model);
	if (mf) {
		fputs("a converted model would be here", mf);
		fclose(mf);
	}
	host_set_text(a, SB__modelFile, ATOM_PATH, model);
	a->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	a->ctl[SB_PORT_MODE] = SB_MODE_CTL_SEQUENTIAL;
	a->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	a->ctl[SB_PORT_STEM_DRUMS] = 0.0f;
	a->ctl[sb_port_precision(a->channels)] = SB_PRECISION_BF16;
	host_run(a);

	/* through lilv, as a host saves and loads a session */
	LV2_URID_Map *mp = host_map_feature();
	LilvState *st = lilv_state_new_from_instance(a->plugin, a->inst, mp, NULL, dir, dir, dir,
	                                             port_value, a, LV2_STATE_IS_POD, NULL);
	CHECK(st != NULL, "lilv saved no state");
	char path[1400];
	snprintf(path, sizeof path, "%s/state.ttl", dir);
	lilv_state_save(host_world, mp, host_unmap_feature(), st, NULL, dir, "state.ttl");
	lilv_state_free(st);

	host_plugin *b = host_new(true, 256, HOST_PATH_NONE, NULL);
	LilvState *ld = lilv_state_new_from_file(host_world, mp, NULL, path);
	CHECK(ld != NULL, "cannot load %s", path);
	if (ld) {
		lilv_state_restore(ld, b->inst, set_port, b, 0, NULL);
		lilv_state_free(ld);
	}
	CHECK(b->ctl[SB_PORT_DEVICE] == SB_DEVICE_CPU, "device %g", b->ctl[SB_PORT_DEVICE]);
	CHECK(b->ctl[SB_PORT_MODE] == SB_MODE_CTL_SEQUENTIAL, "mode %g", b->ctl[SB_PORT_MODE]);
	CHECK(b->ctl[SB_PORT_MODEL] == SB_MODEL_BUILTIN, "model %g", b->ctl[SB_PORT_MODEL]);
	CHECK(b->ctl[sb_port_precision(b->channels)] == SB_PRECISION_BF16, "precision %g",
	      b->ctl[sb_port_precision(b->channels)]);
	CHECK(b->ctl[SB_PORT_STEM_DRUMS] == 0.0f && b->ctl[SB_PORT_STEM_VOCALS] == 1.0f &&
	      b->ctl[SB_PORT_STEM_BASS] == 1.0f && b->ctl[SB_PORT_STEM_OTHER] == 1.0f, "stems");
	kv s;
	save_direct(b, &s);
	CHECK(kv_text(&s, SB__outputDir) && !strcmp(kv_text(&s, SB__outputDir), outdir),
	      "outputDir %s", kv_text(&s, SB__outputDir));
	CHECK(kv_text(&s, SB__trackName) && !strcmp(kv_text(&s, SB__trackName), "Drum Bus"), "track");
	CHECK(kv_float(&s, SB__maxMinutes) == 12.5f, "maxMinutes %g", kv_float(&s, SB__maxMinutes));
	CHECK(kv_float(&s, SB__uiScale) == 1.5f, "uiScale %g", kv_float(&s, SB__uiScale));
	CHECK(kv_text(&s, SB__deviceKey) && !strcmp(kv_text(&s, SB__deviceKey), "cpu"), "device key %s",
	      kv_text(&s, SB__deviceKey));
	CHECK(kv_text(&s, SB__deviceName) && kv_text(&s, SB__deviceName)[0], "device name");
	CHECK(kv_int(&s, SB__devicePort) == SB_DEVICE_CPU, "device port");
	CHECK(kv_int(&s, SB__mode) == SB_MODE_CTL_SEQUENTIAL, "mode");
	CHECK(kv_int(&s, SB__precision) == SB_PRECISION_BF16, "precision %d",
	      kv_int(&s, SB__precision));
	/* vocals, bass, other as set above, and guitar and piano on as their ports default */
	CHECK(kv_int(&s, SB__stemMask) == (1 | 4 | 8 | 16 | 32), "stem mask %d",
	      kv_int(&s, SB__stemMask));
	char want_real[PATH_MAX], got_real[PATH_MAX];
	const char *mv = kv_text(&s, SB__modelFile) ? kv_text(&s, SB__modelFile) : "";
	CHECK(mv[0] == '/' && realpath(mv, got_real) && realpath(model, want_real) &&
	      !strcmp(got_real, want_real), "modelFile came back as '%s', set %s", mv, model);
	/* the restored value is announced, as a patch:Get would show it */
	host_run(b);
	CHECK(mv[0] && !strcmp(b->model_file, mv), "modelFile announced '%s' after restore, saved %s",
	      b->model_file, mv);
	CHECK(b->ui_scale == 1.5f, "uiScale announced %g after restore, saved 1.5", b->ui_scale);

	/* without mapPath (a host that keeps absolute paths) the path comes back as it was */
	kv direct;
	save_direct(a, &direct);
	CHECK(kv_text(&direct, SB__modelFile) && !strcmp(kv_text(&direct, SB__modelFile), model),
	      "modelFile saved as %s, set %s", kv_text(&direct, SB__modelFile), model);
	host_plugin *c = host_new(false, 256, HOST_PATH_NONE, NULL);
	CHECK(c != NULL, "instantiate");
	if (c) {
		const LV2_State_Interface *ci =
			lilv_instance_get_extension_data(c->inst, LV2_STATE__interface);
		ci->restore(lilv_instance_get_handle(c->inst), kv_retrieve, &direct, 0, NULL);
		kv back;
		save_direct(c, &back);
		CHECK(kv_text(&back, SB__modelFile) && !strcmp(kv_text(&back, SB__modelFile), model),
		      "modelFile restored as %s, saved %s", kv_text(&back, SB__modelFile), model);
		host_free(c);
	}

	/* the last manifest survives as a plain string */
	kv m = s;
	snprintf(m.val[m.n], 4096, "/somewhere/Drum Bus-take1-manifest.json");
	m.key[m.n] = host_map(SB__manifest);
	m.type[m.n] = host_map("http://lv2plug.in/ns/ext/atom#String");
	m.size[m.n] = strlen(m.val[m.n]) + 1;
	m.n++;
	const LV2_State_Interface *si = lilv_instance_get_extension_data(b->inst, LV2_STATE__interface);
	si->restore(lilv_instance_get_handle(b->inst), kv_retrieve, &m, 0, NULL);
	kv s2;
	save_direct(b, &s2);
	CHECK(kv_text(&s2, SB__manifest) &&
	      !strcmp(kv_text(&s2, SB__manifest), "/somewhere/Drum Bus-take1-manifest.json"),
	      "manifest not kept");
	host_free(a);
	host_free(b);
	return failures;
}

static void put(kv *s, const char *uri, const char *type, const void *v, size_t size)
{
	s->key[s->n] = host_map(uri);
	s->type[s->n] = host_map(type);
	memcpy(s->val[s->n], v, size);
	s->size[s->n] = size;
	s->n++;
}

static int test_damaged(void)
{
	host_plugin *h = host_new(false, 256, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	kv s = {0};
	const char *STR = "http://lv2plug.in/ns/ext/atom#String";
	const char *INT = "http://lv2plug.in/ns/ext/atom#Int";
	const char *FLT = "http://lv2plug.in/ns/ext/atom#Float";
	put(&s, SB__maxMinutes, STR, "abc", 4);                  /* wrong type */
	int32_t big = 99;
	put(&s, SB__devicePort, INT, &big, sizeof big);          /* out of range */
	put(&s, SB__deviceKey, STR, "quantum:7", 10);            /* unknown device */
	put(&s, SB__trackName, STR, "ab\0cd", 6);                /* NUL inside */
	float neg = -3.0f;
	put(&s, SB__mode, FLT, &neg, sizeof neg);                /* wrong type */
	put(&s, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", "relative/dir", 13);
	put(&s, SB__manifest, INT, &big, sizeof big);            /* wrong type */
	put(&s, SB__modelFile, "http://lv2plug.in/ns/ext/atom#Path", "/models/htdemucs.th", 20);
	float zoom = 40.0f;
	put(&s, SB__uiScale, FLT, &zoom, sizeof zoom);           /* out of range */
	int before = host_log_warnings();
	const LV2_State_Interface *si = lilv_instance_get_extension_data(h->inst, LV2_STATE__interface);
	LV2_State_Status r = si->restore(lilv_instance_get_handle(h->inst), kv_retrieve, &s, 0, NULL);
	CHECK(r == LV2_STATE_SUCCESS, "restore failed on damaged values");
	CHECK(host_log_warnings() - before >= 9, "%d log lines for 9 damaged values",
	      host_log_warnings() - before);
	kv out;
	save_direct(h, &out);
	CHECK(kv_float(&out, SB__maxMinutes) == 30.0f, "maxMinutes %g", kv_float(&out, SB__maxMinutes));
	CHECK(!kv_text(&out, SB__trackName), "damaged track name kept");
	CHECK(!kv_text(&out, SB__outputDir), "relative output dir kept");
	CHECK(!kv_text(&out, SB__manifest), "damaged manifest kept");
	CHECK(!kv_text(&out, SB__modelFile), "a model file that is no .safetensors kept");
	CHECK(!kv_text(&out, SB__uiScale), "a window zoom of 4000 %% kept");
	CHECK(kv_text(&out, SB__deviceKey) && !strcmp(kv_text(&out, SB__deviceKey), "auto"),
	      "device key %s", kv_text(&out, SB__deviceKey));
	/* still works */
	h->ctl[SB_PORT_RECORD] = 1;
	host_transport(h, 0, 1.0f);
	roll(h, 10, 0, NULL, 0);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING, "does not record after restore");
	host_free(h);
	return failures;
}

static int test_fallback(void)
{
	host_plugin *h = host_new(false, 256, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	kv s = {0};
	const char *key = "opencl|Imaginary Platform|Nobody|Phantom GPU 9000|0";
	put(&s, SB__deviceKey, "http://lv2plug.in/ns/ext/atom#String", key, strlen(key) + 1);
	put(&s, SB__deviceName, "http://lv2plug.in/ns/ext/atom#String", "Phantom GPU 9000", 17);
	int32_t port = SB_DEVICE_FIRST_ACCEL + 5;
	put(&s, SB__devicePort, "http://lv2plug.in/ns/ext/atom#Int", &port, sizeof port);
	h->ctl[SB_PORT_DEVICE] = (float)port; /* the host restores the port value */
	const LV2_State_Interface *si = lilv_instance_get_extension_data(h->inst, LV2_STATE__interface);
	si->restore(lilv_instance_get_handle(h->inst), kv_retrieve, &s, 0, NULL);
	double end = host_now() + 60;
	while (host_now() < end && h->ctl[SB_PORT_FALLBACK_OUT] != 1.0f) {
		host_run(h);
		host_sleep_ms(5);
	}
	CHECK(h->ctl[SB_PORT_FALLBACK_OUT] == 1.0f, "fallback not shown");
	CHECK(h->ctl[SB_PORT_DEVICE_OUT] >= SB_DEVICE_CPU, "device in use %g", h->ctl[SB_PORT_DEVICE_OUT]);
	CHECK(strstr(h->device_in_use, "fallback"), "deviceInUse '%s'", h->device_in_use);
	kv out;
	save_direct(h, &out);
	CHECK(kv_text(&out, SB__deviceKey) && !strcmp(kv_text(&out, SB__deviceKey), key),
	      "the saved choice was not kept: %s", kv_text(&out, SB__deviceKey));
	CHECK(kv_int(&out, SB__devicePort) == port, "device port");
	host_free(h);
	return failures;
}

typedef struct {
	host_plugin *h[4];
	int index;
	recording rec[4];
	int64_t start[4];
} worker_arg;

static void *many_worker(void *p)
{
	worker_arg *w = p;
	for (int k = 0; k < 4; k++) {
		host_plugin *h = w->h[k];
		h->ctl[SB_PORT_RECORD] = 1;
		w->start[k] = 48000 * (w->index * 4 + k) + 11;
		w->rec[k].channels = h->channels;
		host_transport(h, w->start[k], 1.0f);
	}
	for (int b = 0; b < 94; b++) {
		for (int k = 0; k < 4; k++) {
			host_plugin *h = w->h[k];
			for (int c = 0; c < h->channels; c++)
				for (uint32_t i = 0; i < h->block; i++)
					h->in[c][i] = signal_at(h->pos + i, c, w->index * 4 + k);
			rec_push(&w->rec[k], h);
			host_run(h);
		}
		if (b % 4 == 0)
			host_sleep_ms(1);
	}
	for (int k = 0; k < 4; k++) {
		host_transport(w->h[k], w->h[k]->pos, 0.0f);
		host_run(w->h[k]);
	}
	return NULL;
}

static int test_many(void)
{
	char dir[1000];
	make_tmp("many", dir, sizeof dir);
	worker_arg w[4];
	memset(w, 0, sizeof w);
	for (int t = 0; t < 4; t++) {
		w[t].index = t;
		for (int k = 0; k < 4; k++) {
			host_plugin *h = host_new((t * 4 + k) % 2, 1024, HOST_PATH_NONE, NULL);
			CHECK(h != NULL, "instance %d", t * 4 + k);
			if (!h)
				return 1;
			char name[32], out[1300];
			snprintf(name, sizeof name, "Track %d", t * 4 + k);
			snprintf(out, sizeof out, "%s/out", dir);
			host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", name);
			host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", out);
			w[t].h[k] = h;
		}
	}
	pthread_t th[4];
	for (int t = 0; t < 4; t++)
		pthread_create(&th[t], NULL, many_worker, &w[t]);
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < 4; t++) {
		for (int k = 0; k < 4; k++) {
			host_plugin *h = w[t].h[k];
			char name[32];
			snprintf(name, sizeof name, "Track %d", t * 4 + k);
			CHECK(host_wait_jobs(h, 1, 900), "%s not separated: %s", name, h->last_error);
			check_take(h, name, &w[t].rec[k], w[t].start[k]);
			free(w[t].rec[k].data);
		}
	}
	for (int t = 0; t < 4; t++)
		for (int k = 0; k < 4; k++)
			host_free(w[t].h[k]);
	return failures;
}

static int test_rt(void)
{
	/* The trap must see what it is meant to see, or a zero below would mean nothing: one call
	 * of each kind it counts, made as run() would make it. */
	static const char *const kinds[] = {"malloc+free", "mutex", "sleep", "file", "print"};
	static const long want[] = {2, 1, 1, 3, 1};
	for (int k = 0; k < 5; k++) {
		long c0 = rt_trap_count();
		pthread_mutex_t mx = PTHREAD_MUTEX_INITIALIZER;
		const struct timespec ts = {0, 1000};
		rt_trap_enter();
		if (k == 0) {
			free(malloc(32));
		} else if (k == 1) {
			pthread_mutex_lock(&mx);
			pthread_mutex_unlock(&mx);
		} else if (k == 2) {
			nanosleep(&ts, NULL);
		} else if (k == 3) {
			FILE *f = fopen("/dev/null", "r");
			char c;
			if (f && fread(&c, 1, 1, f) == 0)
				fclose(f);
			else if (f)
				fclose(f);
		} else {
			fprintf(stderr, "rt: the trap sees this print\n");
		}
		rt_trap_leave();
		long got = rt_trap_count() - c0;
		/* fopen also allocates and fclose frees: count at least what was asked */
		CHECK(got >= want[k], "the trap counted %ld calls for %s", got, kinds[k]);
	}
	long base = rt_trap_count();

	char dir[1000], out[1300];
	make_tmp("rt", dir, sizeof dir);
	snprintf(out, sizeof out, "%s/out", dir);
	host_plugin *h = host_new(true, 256, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", out);
	host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "RT");
	h->ctl[SB_PORT_RECORD] = 1;
	const int64_t start = 48000 * 5;
	recording rec = {0};
	rec.channels = 2;
	host_transport(h, start, 1.0f);
	/* 20 s recorded in small blocks, about ten times faster than real time (the block pool
	 * holds 5 s; a real-time host never gets near it) */
	roll(h, 20 * 48000 / 256, 5, &rec, 2);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING, "not recording");
	/* the window's feed was on: the take lane went out ten times a second */
	CHECK(h->waves_seen >= 150 && h->wave_frames > rec.frames - 48000 / 10,
	      "the take lane was sent %d times, last at %lld of %lld frames", h->waves_seen,
	      (long long)h->wave_frames, (long long)rec.frames);
	h->ctl[SB_PORT_RECORD] = 0;
	host_transport(h, h->pos, 0.0f);
	CHECK(host_wait_jobs(h, 1, 900), "take not separated: %s", h->last_error);

	/* audition: vocals in place of the input inside the region, input outside it */
	float *vox = NULL;
	char dirn[4096];
	snprintf(dirn, sizeof dirn, "%s", h->manifest);
	if (strrchr(dirn, '/'))
		*strrchr(dirn, '/') = '\0';
	DIR *d = opendir(dirn);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, "vocals.wav"))
			continue;
		char p[4400];
		if (snprintf(p, sizeof p, "%s/%s", dirn, e->d_name) >= (int)sizeof p)
			continue;
		SF_INFO info = {0};
		SNDFILE *f = sf_open(p, SFM_READ, &info);
		if (f) {
			vox = calloc((size_t)info.frames * 2, sizeof(float));
			sf_readf_float(f, vox, info.frames);
			sf_close(f);
		}
	}
	if (d)
		closedir(d);
	CHECK(vox != NULL, "no vocals stem");
	h->ctl[SB_PORT_AUDITION] = 1;
	for (int pass = 0; pass < 2 && vox; pass++) {
		/* the stems reach run() a moment after the job: give the pointer swap a block */
		host_transport(h, start - 256 * 4, 0.0f);
		for (int i = 0; i < 50; i++) {
			host_run(h);
			host_sleep_ms(1);
		}
		host_transport(h, start - 256 * 4, 1.0f);
		double worst_in = 0, worst_out = 0;
		for (int b = 0; b < 20 * 48000 / 256 + 8; b++) {
			for (int c = 0; c < 2; c++)
				for (uint32_t i = 0; i < h->block; i++)
					h->in[c][i] = 0.5f;
			int64_t p0 = h->pos;
			host_run(h);
			for (int c = 0; c < 2; c++) {
				for (uint32_t i = 0; i < h->block; i++) {
					int64_t f = p0 + i - start;
					if (f >= 0 && f < rec.frames)
						worst_in = fmax(worst_in, fabs(h->out[c][i] - vox[f * 2 + c]));
					else
						worst_out = fmax(worst_out, fabs(h->out[c][i] - 0.5f));
				}
			}
			if (b % 8 == 0)
				host_sleep_ms(1);
		}
		CHECK(worst_in == 0.0, "audition differs from the vocals stem by %g", worst_in);
		CHECK(worst_out == 0.0, "outside the region the input should pass (%g)", worst_out);
		/* patch:Get and property changes go through run() too, a damaged one as well */
		host_set_float(h, SB__maxMinutes, 20.0f);
		host_set_text(h, SB__modelFile, ATOM_PATH, pass ? "/opt/models/rt.safetensors"
		                                                : "/opt/models/rt.ckpt");
	}
	/* the mix without vocals: what is left of the recorded input once vocals are removed */
	h->ctl[SB_PORT_AUDITION] = 5;
	host_transport(h, start, 1.0f);
	double worst_mix = 0;
	for (int b = 0; vox && b < 20 * 48000 / 256; b++) {
		int64_t p0 = h->pos;
		host_run(h);
		for (int c = 0; c < 2; c++) {
			for (uint32_t i = 0; i < h->block; i++) {
				int64_t f = p0 + i - start;
				if (f >= 0 && f < rec.frames)
					worst_mix = fmax(worst_mix, fabs(h->out[c][i] + vox[f * 2 + c] -
					                                 rec.data[f * 2 + c]));
			}
		}
	}
	CHECK(worst_mix < 1e-4, "mix without vocals + vocals differs from the input by %g", worst_mix);
	h->ctl[SB_PORT_AUDITION] = 0;
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	long n = rt_trap_count() - base;
	CHECK(n == 0, "%ld calls to allocation/lock/wait/I/O inside run(), last: %s", n, rt_trap_last());
	fprintf(stderr, "rt: %ld forbidden calls inside run()\n", n);
	free(vox);
	free(rec.data);
	host_free(h);
	return failures;
}

/* The presets bundle: each preset loads through lilv and sets device and mode. */
static int test_presets(void)
{
	static const struct { const char *label; float device, mode; } want[] = {
		{"Auto", SB_DEVICE_AUTO, SB_MODE_CTL_SEQUENTIAL},
		{"CPU only", SB_DEVICE_CPU, SB_MODE_CTL_SEQUENTIAL},
		{"First GPU", SB_DEVICE_FIRST_ACCEL, SB_MODE_CTL_PARALLEL},
		{"All GPUs in parallel", SB_DEVICE_AUTO, SB_MODE_CTL_PARALLEL},
		{"One GPU in sequence", SB_DEVICE_FIRST_ACCEL, SB_MODE_CTL_SEQUENTIAL},
	};
	for (int stereo = 0; stereo < 2; stereo++) {
		host_plugin *h = host_new(stereo, 256, HOST_PATH_NONE, NULL);
		CHECK(h != NULL, "instantiate");
		if (!h)
			return 1;
		LilvNode *pset = lilv_new_uri(host_world, "http://lv2plug.in/ns/ext/presets#Preset");
		LilvNode *label = lilv_new_uri(host_world, "http://www.w3.org/2000/01/rdf-schema#label");
		LilvNodes *presets = lilv_plugin_get_related(h->plugin, pset);
		int seen = 0;
		LILV_FOREACH (nodes, i, presets) {
			const LilvNode *preset = lilv_nodes_get(presets, i);
			lilv_world_load_resource(host_world, preset);
			LilvNodes *labels = lilv_world_find_nodes(host_world, preset, label, NULL);
			const char *name = labels ? lilv_node_as_string(lilv_nodes_get_first(labels)) : "";
			LilvState *st = lilv_state_new_from_world(host_world, host_map_feature(), preset);
			CHECK(st != NULL, "preset %s does not load", name);
			h->ctl[SB_PORT_DEVICE] = -5;
			h->ctl[SB_PORT_MODE] = -5;
			if (st) {
				lilv_state_restore(st, h->inst, set_port, h, 0, NULL);
				lilv_state_free(st);
			}
			for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
				if (strcmp(name, want[k].label) != 0)
					continue;
				seen++;
				CHECK(h->ctl[SB_PORT_DEVICE] == want[k].device && h->ctl[SB_PORT_MODE] == want[k].mode,
				      "preset %s: device %g mode %g", name, h->ctl[SB_PORT_DEVICE], h->ctl[SB_PORT_MODE]);
			}
			lilv_nodes_free(labels);
		}
		CHECK(seen == 5, "%d of the 5 presets found for the %s plugin", seen, stereo ? "stereo" : "mono");
		lilv_nodes_free(presets);
		lilv_node_free(pset);
		lilv_node_free(label);
		host_free(h);
	}

	/* A preset the user saves from the host (lilv writes it as Ardour and jalv do: a bundle
	 * with a manifest) carries the device choice: the port value and the plugin's stable key. */
	char dir[1000], bundle[1100];
	make_tmp("user-presets", dir, sizeof dir);
	snprintf(bundle, sizeof bundle, "%s/stembridge-mine.lv2", dir);
	host_plugin *a = host_new(true, 256, HOST_PATH_NONE, NULL);
	CHECK(a != NULL, "instantiate");
	if (!a)
		return 1;
	a->ctl[SB_PORT_DEVICE] = SB_DEVICE_FIRST_ACCEL;
	a->ctl[SB_PORT_MODE] = SB_MODE_CTL_SEQUENTIAL;
	host_run(a);
	kv before;
	save_direct(a, &before);
	const char *key_before = kv_text(&before, SB__deviceKey);
	LilvState *st = lilv_state_new_from_instance(a->plugin, a->inst, host_map_feature(), NULL, NULL,
	                                             NULL, bundle, port_value, a, LV2_STATE_IS_POD, NULL);
	CHECK(st != NULL, "no state for the user preset");
	if (!st)
		return failures;
	lilv_state_set_label(st, "My first GPU");
	const char *uri = "https://stembridge.org/lv2/user-presets#my-first-gpu";
	CHECK(lilv_state_save(host_world, host_map_feature(), host_unmap_feature(), st, uri, bundle,
	                      "my-first-gpu.ttl") == 0, "lilv_state_save");
	lilv_state_free(st);

	char bundle_uri[1200];
	snprintf(bundle_uri, sizeof bundle_uri, "file://%s/", bundle);
	LilvNode *bnode = lilv_new_uri(host_world, bundle_uri);
	lilv_world_load_bundle(host_world, bnode);
	lilv_node_free(bnode);
	host_plugin *b = host_new(true, 256, HOST_PATH_NONE, NULL);
	LilvNode *pset = lilv_new_uri(host_world, "http://lv2plug.in/ns/ext/presets#Preset");
	LilvNodes *presets = lilv_plugin_get_related(b->plugin, pset);
	LilvNode *mine = lilv_new_uri(host_world, uri);
	CHECK(lilv_nodes_contains(presets, mine), "the saved preset is not listed for the plugin");
	lilv_world_load_resource(host_world, mine);
	LilvState *ld = lilv_state_new_from_world(host_world, host_map_feature(), mine);
	CHECK(ld != NULL, "the saved preset does not load");
	if (ld) {
		lilv_state_restore(ld, b->inst, set_port, b, 0, NULL);
		lilv_state_free(ld);
	}
	kv after;
	save_direct(b, &after);
	CHECK(b->ctl[SB_PORT_DEVICE] == SB_DEVICE_FIRST_ACCEL && b->ctl[SB_PORT_MODE] == SB_MODE_CTL_SEQUENTIAL,
	      "preset gave device %g mode %g", b->ctl[SB_PORT_DEVICE], b->ctl[SB_PORT_MODE]);
	CHECK(key_before && kv_text(&after, SB__deviceKey) &&
	      !strcmp(kv_text(&after, SB__deviceKey), key_before),
	      "device key after the preset %s, saved %s", kv_text(&after, SB__deviceKey), key_before);
	fprintf(stderr, "presets: a user preset kept device key '%s'\n", key_before);
	lilv_node_free(mine);
	lilv_node_free(pset);
	lilv_nodes_free(presets);
	host_free(a);
	host_free(b);
	return failures;
}

/* Counts what a folder tree holds: complete stems of the expected length, stems of another
 * length, and the engine's temporary files (".<name>.part-XXXXXX"). A take's own recording
 * ("<take>-recording.wav", written before its job) is no stem. */
static void scan_stems(const char *dir, int64_t frames, int *complete, int *partial, int *temps)
{
	char cmd[1500];
	snprintf(cmd, sizeof cmd, "find '%s' -type f 2>/dev/null", dir);
	FILE *p = popen(cmd, "r");
	char line[4096];
	*complete = *partial = *temps = 0;
	while (p && fgets(line, sizeof line, p)) {
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line, ".part-")) {
			fprintf(stderr, "temporary file left: %s\n", line);
			(*temps)++;
			continue;
		}
		if (!strstr(line, ".wav") || strstr(line, "-recording.wav"))
			continue;
		SF_INFO info = {0};
		SNDFILE *f = sf_open(line, SFM_READ, &info);
		if (f && info.frames == frames) {
			(*complete)++;
		} else {
			fprintf(stderr, "half-written stem %s (%lld frames of %lld)\n", line,
			        (long long)info.frames, (long long)frames);
			(*partial)++;
		}
		if (f)
			sf_close(f);
	}
	if (p)
		pclose(p);
}

/* Removing the plugin while its job runs: no crash, no half-written stem or temporary file
 * left behind; the take's recording and journal stay (a host closing its session removes its
 * plugins too: the take resumes when the session is opened again); the next instance (a new
 * engine) works. */
static int test_close_running(void)
{
	char dir[1000], out[1300];
	make_tmp("close", dir, sizeof dir);
	snprintf(out, sizeof out, "%s/out", dir);
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", out);
	host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "Gone");
	h->ctl[SB_PORT_RECORD] = 1;
	/* long enough that its separation is still running when the plugin goes; recorded as an
	 * offline bounce (freewheeling), the way to feed two minutes faster than real time */
	const int64_t frames = (int64_t)(120 * 48000 / 1024) * 1024;
	h->freewheel = 1.0f;
	host_transport(h, 0, 1.0f);
	roll(h, (int)(frames / 1024), 6, NULL, 0);
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	h->freewheel = 0.0f;
	int state = -1;
	for (double end = host_now() + 60; host_now() < end;) {
		host_run(h);
		state = (int)h->ctl[SB_PORT_STATE_OUT];
		if (state == SB_STATE_SEPARATING || state == SB_STATE_DONE || state == SB_STATE_ERROR)
			break;
		host_sleep_ms(1);
	}
	const float progress = h->ctl[SB_PORT_PROGRESS_OUT];
	CHECK(state == SB_STATE_SEPARATING,
	      "the job was not running when the plugin was removed (state %d)", state);
	double t0 = host_now();
	host_free(h);
	fprintf(stderr, "close: removed at %.0f %% in %.2f s\n", progress * 100.0, host_now() - t0);
	int complete, partial, temps;
	scan_stems(out, frames, &complete, &partial, &temps);
	CHECK(partial == 0 && temps == 0, "%d half-written stems, %d temporary files left", partial,
	      temps);
	CHECK(complete == 0 || complete == 4, "%d complete stems: a job leaves all or none", complete);
	fprintf(stderr, "close: %d complete stems left, none partial\n", complete);
	char kept[1600];
	snprintf(kept, sizeof kept, "%s/Gone-take1/Gone-take1-journal.json", out);
	CHECK(complete == 4 || access(kept, F_OK) == 0, "the stopped take's journal %s is gone", kept);
	snprintf(kept, sizeof kept, "%s/Gone-take1/Gone-take1-recording.wav", out);
	CHECK(complete == 4 || access(kept, F_OK) == 0, "the stopped take's recording %s is gone",
	      kept);

	/* the engine went with the last instance; a new one starts another and works */
	h = host_new(false, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate after close");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, "http://lv2plug.in/ns/ext/atom#Path", out);
	host_set_text(h, SB__trackName, "http://lv2plug.in/ns/ext/atom#String", "Next");
	h->ctl[SB_PORT_RECORD] = 1;
	recording rec = {0};
	rec.channels = 1;
	host_transport(h, 4800, 1.0f);
	roll(h, 47, 7, &rec, 8);
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	CHECK(host_wait_jobs(h, 1, 600), "no separation after close: %s", h->last_error);
	check_take(h, "Next", &rec, 4800);
	free(rec.data);
	host_free(h);
	return failures;
}

/* The "name" of the manifest's "model" object, or "" (the manifest is jansson's output: keys
 * quoted, a colon, the value). */
static void manifest_model_name(const char *manifest, char *out, size_t len)
{
	out[0] = '\0';
	char *m = slurp(manifest);
	const char *p = m ? strstr(m, "\"model\"") : NULL;
	p = p ? p + strspn(p + 7, " \t\r\n:") + 7 : NULL;
	const char *n = p && *p == '{' ? strstr(p, "\"name\"") : NULL;
	if (n) {
		n += 6 + strspn(n + 6, " \t\r\n:");
		if (*n == '"')
			snprintf(out, len, "%.*s", (int)strcspn(n + 1, "\""), n + 1);
	}
	free(m);
}

/* The stems beside h's manifest (bit k: stems[k]) that are readable WAV files of the take's
 * exact length and channel count, named after their stem. */
static unsigned exact_stems(host_plugin *h, const recording *rec)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", h->manifest);
	if (!strrchr(dir, '/'))
		return 0;
	*strrchr(dir, '/') = '\0';
	unsigned found = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, ".wav"))
			continue;
		char path[4400];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		SF_INFO info;
		memset(&info, 0, sizeof info);
		SNDFILE *f = sf_open(path, SFM_READ, &info);
		CHECK(f && info.frames == rec->frames && info.channels == rec->channels,
		      "%s: %lld frames x %d, the take is %lld x %d", path, (long long)info.frames,
		      info.channels, (long long)rec->frames, rec->channels);
		for (int k = 0; k < 6 && f; k++)
			if (strstr(e->d_name, stems[k]) && info.frames == rec->frames &&
			    info.channels == rec->channels)
				found |= 1u << k;
		if (f)
			sf_close(f);
	}
	if (d)
		closedir(d);
	return found;
}

/* how many of them */
static int count_exact_stems(host_plugin *h, const recording *rec)
{
	return __builtin_popcount(exact_stems(h, rec));
}

/* Records n blocks from start with the current controls, stops, and waits for the job. */
static int record_take(host_plugin *h, int64_t start, int blocks, int seed, recording *rec)
{
	rec->frames = 0;
	rec->channels = h->channels;
	const uint32_t jobs = (uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT];
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, start, 1.0f);
	roll(h, blocks, seed, rec, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	/* the state port shows the job before until the service has taken this one */
	for (double end = host_now() + 10; host_now() < end &&
	     (int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR;) {
		host_sleep_ms(2);
		host_run(h);
	}
	return host_wait_jobs(h, (int)jobs + 1, 600);
}

/* A RoFormer installed by `stembridge models install` (its path given by
 * tests/models/test_roformer_install.py) separates a take in the plugin: the stems it makes
 * (vocals and other, or the six of a 6-stem model) of the take's length and no others, the
 * manifest naming the model. */
static int test_roformer_file(const char *model, const char *want)
{
	unsigned want_mask = 0;
	char list[128];
	snprintf(list, sizeof list, "%s", want);
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
		for (int k = 0; k < 6; k++)
			want_mask |= strcmp(t, stems[k]) ? 0 : 1u << k;
	char dir[1200], outdir[1300], name[256];
	make_tmp("roformer-file", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(h, SB__trackName, ATOM_STRING, "Rof");
	host_set_text(h, SB__modelFile, ATOM_PATH, model);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	host_run(h);
	recording rec = {0};
	CHECK(record_take(h, 48000, 47, 8, &rec), "take not separated with %s: %s", model,
	      h->last_error);
	const unsigned got = exact_stems(h, &rec);
	CHECK(got == want_mask, "stems of the take's length beside %s: mask %#x, want %s (%#x)",
	      h->manifest, got, want, want_mask);
	manifest_model_name(h->manifest, name, sizeof name);
	const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
	CHECK(!strncmp(name, base, strlen(name)) && name[0], "the manifest names model '%s'", name);
	host_free(h);
	return failures ? 1 : 0;
}

/* A user who converted a Demucs checkpoint points the plugin at the file: with the Model
 * control on a Demucs choice the take runs that file, and the manifest names the model after
 * it; Built-in ignores the property; a file that is not there fails the job, not the plugin.
 * The file is the compact golden HTDemucs of the repository (SB_FIXTURES_DIR). */
static int test_model_file(void)
{
	const char *golden = getenv("SB_FIXTURES_DIR");
	char model[1200];
	if (!golden || !golden[0] ||
	    snprintf(model, sizeof model, "%s/htdemucs-mini.safetensors", golden) >= (int)sizeof model ||
	    access(model, R_OK) != 0) {
		fprintf(stderr, "modelfile: no htdemucs-mini.safetensors in SB_FIXTURES_DIR (%s)\n",
		        golden ? golden : "unset");
		return 1;
	}
	char dir[1200], outdir[1300], missing[1300];
	make_tmp("model-file", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	snprintf(missing, sizeof missing, "%s/not-here/htdemucs-gone.safetensors", dir);
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(h, SB__trackName, ATOM_STRING, "Tiny");
	host_set_text(h, SB__modelFile, ATOM_PATH, model);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	host_run(h);
	CHECK(!strcmp(h->model_file, model), "modelFile announced as '%s', set %s", h->model_file,
	      model);

	/* 3 s of stereo at 48 kHz: the model runs at 44.1 kHz, the stems come back at the take's
	 * rate and length */
	recording rec = {0};
	char name[256];
	const int64_t start = 2 * 48000 + 5;
	double t0 = host_now();
	CHECK(record_take(h, start, 3 * 47, 8, &rec), "take not separated with %s: %s", model,
	      h->last_error);
	fprintf(stderr, "modelfile: htdemucs-mini separated %lld frames in %.1f s\n",
	        (long long)rec.frames, host_now() - t0);
	int n = count_exact_stems(h, &rec);
	CHECK(n == 4, "%d of 4 stems of the take's length beside %s", n, h->manifest);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "htdemucs-mini"), "the manifest names model '%s'", name);

	/* Built-in runs the built-in model whatever the property says */
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	const int64_t start2 = 30 * 48000;
	CHECK(record_take(h, start2, 47, 9, &rec), "Built-in take not separated: %s", h->last_error);
	check_take(h, "Tiny", &rec, start2);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "builtin"), "Built-in: the manifest names model '%s'", name);

	/* a model file gone since it was chosen: that job fails and says so; the next one works */
	host_set_text(h, SB__modelFile, ATOM_PATH, missing);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	h->last_error[0] = '\0';
	CHECK(!record_take(h, 40 * 48000, 20, 10, &rec), "a job with a missing model file succeeded");
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR && h->last_error[0],
	      "missing model file: state %g, error '%s'", h->ctl[SB_PORT_STATE_OUT], h->last_error);
	fprintf(stderr, "modelfile: a missing file gives: %s\n", h->last_error);
	host_set_text(h, SB__modelFile, ATOM_PATH, model);
	CHECK(record_take(h, 50 * 48000, 47, 11, &rec), "no separation after a failed job: %s",
	      h->last_error);
	n = count_exact_stems(h, &rec);
	CHECK(n == 4, "%d of 4 stems after the failed job", n);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "htdemucs-mini"), "after the failed job the manifest names '%s'", name);
	free(rec.data);
	host_free(h);
	return failures;
}

/* All devices, the Device control's last choice: every GPU and the CPU share the take's
 * segments (on a machine without a GPU, as in CI, that is the CPU alone). The choice is saved
 * as "all" and comes back; while the take is separated the Time left output counts down, and it
 * reads 0 once the stems are there. */
static int test_all_devices(void)
{
	const char *golden = getenv("SB_FIXTURES_DIR");
	char model[1200];
	if (!golden || !golden[0] ||
	    snprintf(model, sizeof model, "%s/htdemucs-mini.safetensors", golden) >= (int)sizeof model ||
	    access(model, R_OK) != 0) {
		fprintf(stderr, "alldevices: no htdemucs-mini.safetensors in SB_FIXTURES_DIR\n");
		return 1;
	}
	char dir[1200], outdir[1300];
	make_tmp("all-devices", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	const unsigned tl = sb_port_time_left(h->channels);
	CHECK(h->ctl[tl] == -1.0f, "Time left before any take: %g", h->ctl[tl]);
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(h, SB__trackName, ATOM_STRING, "Everyone");
	host_set_text(h, SB__modelFile, ATOM_PATH, model);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_ALL;
	host_run(h);

	/* a 40 s take: long enough to have a rate to go by */
	recording rec = {0};
	rec.channels = h->channels;
	const uint32_t jobs = (uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT];
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 48000, 1.0f);
	roll(h, 47 * 40, 12, &rec, 1);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	float most = -1.0f;
	int counted_down = 0, done = 0;
	float last = -1.0f;
	for (double end = host_now() + 600; host_now() < end;) {
		host_run(h);
		const int state = (int)h->ctl[SB_PORT_STATE_OUT];
		if ((uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT] > jobs) {
			done = 1;
			break;
		}
		if (state == SB_STATE_ERROR)
			break;
		if (state == SB_STATE_SEPARATING && h->ctl[tl] > 0) {
			most = h->ctl[tl] > most ? h->ctl[tl] : most;
			counted_down |= last > 0 && h->ctl[tl] < last;
			last = h->ctl[tl];
		}
		host_sleep_ms(2);
	}
	CHECK(done, "the take was not separated on All devices: %s", h->last_error);
	CHECK(most > 0, "Time left never showed while separating");
	CHECK(counted_down, "Time left never went down (most %g)", most);
	CHECK(h->ctl[tl] == 0.0f, "Time left once done: %g", h->ctl[tl]);
	CHECK(h->device_in_use[0], "deviceInUse not announced");
	char *m = h->manifest[0] ? slurp(h->manifest) : NULL;
	CHECK(m && strstr(m, "\"requested\": \"all\""), "the manifest does not say 'all' was asked "
	      "for: %.300s", m ? strstr(m, "\"device\"") : "(none)");
	CHECK(m && strstr(m, "\"devices\": ["), "the manifest lists no devices");
	free(m);
	int n = count_exact_stems(h, &rec);
	CHECK(n == 4, "%d of 4 stems", n);

	/* saved as "all", restored into another instance, saved again the same */
	kv s;
	save_direct(h, &s);
	CHECK(kv_int(&s, SB__devicePort) == SB_DEVICE_ALL, "saved port %d", kv_int(&s, SB__devicePort));
	CHECK(kv_text(&s, SB__deviceKey) && !strcmp(kv_text(&s, SB__deviceKey), "all"),
	      "saved key '%s'", kv_text(&s, SB__deviceKey));
	host_plugin *b = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(b != NULL, "second instance");
	if (b) {
		b->ctl[SB_PORT_DEVICE] = SB_DEVICE_ALL;
		const LV2_State_Interface *si =
			lilv_instance_get_extension_data(b->inst, LV2_STATE__interface);
		si->restore(lilv_instance_get_handle(b->inst), kv_retrieve, &s, 0, NULL);
		host_run(b);
		kv s2;
		save_direct(b, &s2);
		CHECK(kv_int(&s2, SB__devicePort) == SB_DEVICE_ALL && kv_text(&s2, SB__deviceKey) &&
		      !strcmp(kv_text(&s2, SB__deviceKey), "all"), "restored and saved again: %d '%s'",
		      kv_int(&s2, SB__devicePort), kv_text(&s2, SB__deviceKey));
		host_free(b);
	}
	free(rec.data);
	host_free(h);
	return failures;
}

/* Waits for the service to log the warning a damaged patch:Set leaves for it. */
static int wait_warning(host_plugin *h, int before)
{
	for (double end = host_now() + 5; host_now() < end;) {
		host_run(h);
		if (host_log_warnings() > before)
			return 1;
		host_sleep_ms(2);
	}
	return 0;
}

/* Damaged modelFile values, by patch:Set (in run(), logged by the service) and in state: each
 * is ignored with a log line and the model file set before stays. */
static int test_model_file_damaged(void)
{
	host_plugin *h = host_new(false, 256, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	const char *good = "/opt/models/htdemucs-custom.safetensors";
	host_set_text(h, SB__modelFile, ATOM_PATH, good);
	host_run(h);
	CHECK(!strcmp(h->model_file, good), "modelFile announced as '%s'", h->model_file);

	static char long_path[6000];
	memset(long_path, 'a', sizeof long_path);
	long_path[0] = '/';
	memcpy(long_path + 5000 - 12, ".safetensors", 13);
	const float f = 1.0f;
	/* in_state: damage in a saved state too (there a value without its NUL is how Carla 2.5
	 * stores any string, and the state's own slots hold at most 4096 bytes) */
	const struct {
		const char *what, *type;
		const void *body;
		uint32_t size;
		bool in_state;
		bool set_is_folder; /* by patch:Set a folder is the output folder (set_path()) */
	} bad[] = {
		{"a string, not a path", ATOM_STRING, "/opt/models/x.safetensors", 26, true, false},
		{"a float", ATOM_FLOAT, &f, sizeof f, true, false},
		{"a relative path", ATOM_PATH, "models/x.safetensors", 21, true, false},
		{"another kind of file", ATOM_PATH, "/opt/models/htdemucs.th", 24, true, false},
		{"a folder", ATOM_PATH, "/opt/models/", 13, true, true},
		{"no name before the ending", ATOM_PATH, "/opt/models/.safetensors", 25, true, false},
		{"a NUL inside", ATOM_PATH, "/opt/a\0b.safetensors", 21, true, false},
		{"no terminating NUL", ATOM_PATH, "/opt/x.safetensors", 18, false, false},
		{"an empty atom", ATOM_PATH, "", 0, true, false},
		{"longer than any path", ATOM_PATH, long_path, 5001, false, false},
	};
	const size_t n_bad = sizeof bad / sizeof bad[0];
	for (size_t i = 0; i < n_bad; i++) {
		if (bad[i].set_is_folder)
			continue;
		int before = host_log_warnings();
		h->model_file[0] = '\0';
		host_set_atom(h, SB__modelFile, bad[i].type, bad[i].body, bad[i].size);
		CHECK(wait_warning(h, before), "patch:Set %s: no log line", bad[i].what);
		/* the property is announced back as it stands, so a host's file button reverts */
		CHECK(!strcmp(h->model_file, good), "patch:Set %s: announced '%s'", bad[i].what,
		      h->model_file);
		kv out;
		save_direct(h, &out);
		CHECK(kv_text(&out, SB__modelFile) && !strcmp(kv_text(&out, SB__modelFile), good),
		      "patch:Set %s: saved '%s'", bad[i].what, kv_text(&out, SB__modelFile));
	}

	/* the same damage in a saved state */
	const LV2_State_Interface *si = lilv_instance_get_extension_data(h->inst, LV2_STATE__interface);
	for (size_t i = 0; i < n_bad; i++) {
		if (!bad[i].in_state)
			continue;
		kv s = {0};
		put(&s, SB__modelFile, bad[i].type, bad[i].body, bad[i].size);
		int before = host_log_warnings();
		LV2_State_Status r = si->restore(lilv_instance_get_handle(h->inst), kv_retrieve, &s, 0,
		                                 NULL);
		CHECK(r == LV2_STATE_SUCCESS, "restore failed on %s", bad[i].what);
		CHECK(host_log_warnings() > before, "restore %s: no log line", bad[i].what);
		kv out;
		save_direct(h, &out);
		CHECK(kv_text(&out, SB__modelFile) && !strcmp(kv_text(&out, SB__modelFile), good),
		      "restore %s: saved '%s'", bad[i].what, kv_text(&out, SB__modelFile));
	}

	/* a folder or a file that is not a model, set through modelFile (Carla's one file slot),
	 * is the output folder; the model file stays */
	host_set_text(h, SB__modelFile, ATOM_PATH, "/opt/models/");
	host_run(h);
	CHECK(!strcmp(h->output_dir, "/opt/models") && !strcmp(h->model_file, good),
	      "modelFile set to a folder: outputDir '%s', modelFile '%s'", h->output_dir,
	      h->model_file);
	host_set_text(h, SB__modelFile, ATOM_PATH, "/home/me/Music/mix/song.wav");
	host_run(h);
	CHECK(!strcmp(h->output_dir, "/home/me/Music/mix") && !strcmp(h->model_file, good),
	      "modelFile set to a song: outputDir '%s', modelFile '%s'", h->output_dir,
	      h->model_file);

	/* an empty path clears the property: the Model control alone names the model again */
	host_set_text(h, SB__modelFile, ATOM_PATH, "");
	strcpy(h->model_file, "unchanged");
	host_run(h);
	CHECK(!h->model_file[0], "cleared modelFile announced as '%s'", h->model_file);
	kv out;
	save_direct(h, &out);
	CHECK(!kv_text(&out, SB__modelFile), "a cleared modelFile is saved as '%s'",
	      kv_text(&out, SB__modelFile));

	/* still records */
	h->ctl[SB_PORT_RECORD] = 1;
	host_transport(h, 0, 1.0f);
	roll(h, 10, 0, NULL, 0);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING, "does not record after damage");
	host_free(h);
	return failures;
}


/* The "requested" field of a manifest's "model" object, as manifest_model_name reads "name". */
static void manifest_model_requested(const char *manifest, char *out, size_t len)
{
	out[0] = '\0';
	char *m = slurp(manifest);
	const char *p = m ? strstr(m, "\"requested\"") : NULL;
	if (p) {
		p += 11 + strspn(p + 11, " \t\r\n:");
		if (*p == '"')
			snprintf(out, len, "%.*s", (int)strcspn(p + 1, "\""), p + 1);
	}
	free(m);
}

static int copy_file(const char *from, const char *to)
{
	char cmd[9000];
	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", to, from, to);
	return system(cmd) == 0;
}

/* Runs idle blocks until the plugin has announced what 'done' looks for, or the time is up. */
static int wait_for(host_plugin *h, double seconds, int (*done)(host_plugin *h, const void *arg),
                    const void *arg)
{
	for (double end = host_now() + seconds; host_now() < end;) {
		host_run(h);
		if (done(h, arg))
			return 1;
		host_sleep_ms(2);
	}
	return done(h, arg);
}

static int error_has(host_plugin *h, const void *arg)
{
	return strstr(h->last_error, arg) != NULL;
}

static int notice_has(host_plugin *h, const void *arg)
{
	return strstr(h->model_notice, arg) != NULL;
}

static int list_has(host_plugin *h, const void *arg)
{
	return strstr(h->model_list, arg) != NULL;
}

static int status_has(host_plugin *h, const void *arg)
{
	return strstr(h->install_status, arg) != NULL;
}

/* Auto, the default, runs the best installed model (the built-in one when none is); a Demucs
 * choice that is not installed is said (log, modelNotice: a notice, the state is no Error) when
 * it is chosen and fails its take with the command that installs it; htdemucs_6s gives six stems, which audition plays;
 * the guitar and piano toggles are ignored for a four-stem model. The models are the compact
 * golden ones of the repository, installed under the names of the released models. */
static int test_auto(void)
{
	const char *fix = getenv("SB_FIXTURES_DIR");
	char dir[1200], data[1300], models[1400], outdir[1300], src[1400], dst[1500], name[256];
	make_tmp("auto", dir, sizeof dir);
	snprintf(data, sizeof data, "%s/data", dir);
	snprintf(models, sizeof models, "%s/stembridge/models", data);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	setenv("XDG_DATA_HOME", data, 1); /* this process's own model folder, empty for now */
	if (!fix) {
		fprintf(stderr, "auto: SB_FIXTURES_DIR is not set\n");
		return 1;
	}
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	CHECK((int)h->ctl[SB_PORT_MODEL] == SB_MODEL_AUTO, "the Model control's default is %g, not Auto",
	      h->ctl[SB_PORT_MODEL]);
	CHECK(wait_for(h, 10, list_has, "auto\tAuto: Built-in"), "model list: %s", h->model_list);
	CHECK(strstr(h->model_list, "htdemucs\tHTDemucs\tvocals,drums,bass,other\t0") &&
	      strstr(h->model_list, "htdemucs_6s\tHTDemucs 6 stems\tvocals,drums,bass,other,guitar,"
	                            "piano\t0"), "model list: %s", h->model_list);
	/* a model's stems beyond the six toggles are listed as it makes them (#49) */
	CHECK(strstr(h->model_list, "mdx23c_drumsep_5\tmdx23c_drumsep_5\tkick,snare,toms,hihat,"
	                            "cymbals\t0"), "model list: %s", h->model_list);
	recording rec = {0};
	CHECK(record_take(h, 48000, 47, 1, &rec), "Auto with nothing installed: %s", h->last_error);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "builtin"), "Auto with nothing installed ran '%s'", name);
	manifest_model_requested(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "auto"), "the manifest's requested model is '%s'", name);

	/* a model the control names but that is not installed: said at once as a notice (nothing
	 * failed yet: the state stays Done, lastError stays empty), and at the take as an error */
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS_6S;
	CHECK(wait_for(h, 10, notice_has, "stembridge models install htdemucs_6s"),
	      "choosing a missing model: modelNotice '%s'", h->model_notice);
	CHECK(strstr(h->model_notice, "HTDemucs 6 stems is not installed") &&
	      (int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_DONE && !h->last_error[0],
	      "state %g, lastError '%s'", h->ctl[SB_PORT_STATE_OUT], h->last_error);
	const uint32_t jobs = (uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT];
	h->last_error[0] = '\0';
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 20 * 48000, 1.0f);
	roll(h, 20, 2, NULL, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	CHECK(wait_for(h, 10, error_has, "was not separated"), "a take with a missing model: '%s'",
	      h->last_error);
	CHECK((uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT] == jobs, "a take ran without its model");

	/* installed: Auto takes htdemucs, the 6-stem choice gives six stems */
	snprintf(src, sizeof src, "%s/htdemucs-mini.safetensors", fix);
	snprintf(dst, sizeof dst, "%s/htdemucs.safetensors", models);
	CHECK(copy_file(src, dst), "cannot install %s", dst);
	snprintf(src, sizeof src, "%s/htdemucs_6s-mini.safetensors", fix);
	snprintf(dst, sizeof dst, "%s/htdemucs_6s.safetensors", models);
	CHECK(copy_file(src, dst), "cannot install %s", dst);
	h->ctl[SB_PORT_MODEL] = SB_MODEL_AUTO;
	host_get(h); /* a UI opening again: the list is asked for */
	CHECK(wait_for(h, 10, list_has, "auto\tAuto: HTDemucs\t"), "model list: %s", h->model_list);
	CHECK(!h->model_notice[0], "the notice stays with an installed model: '%s'", h->model_notice);
	CHECK(record_take(h, 30 * 48000, 47, 3, &rec), "Auto with htdemucs installed: %s",
	      h->last_error);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "htdemucs"), "Auto with htdemucs installed ran '%s'", name);
	/* guitar and piano on, a four-stem model: four stems, no failure */
	CHECK(count_exact_stems(h, &rec) == 4, "four stems from htdemucs with guitar on");

	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS_6S;
	const int64_t start6 = 40 * 48000;
	CHECK(record_take(h, start6, 47, 4, &rec), "htdemucs_6s: %s", h->last_error);
	CHECK(count_exact_stems(h, &rec) == 6, "six stems of the take's length beside %s", h->manifest);
	CHECK(h->n_stems == 6, "the stems message listed %d files", h->n_stems);
	/* audition plays the guitar stem in place of the input inside the take */
	char guitar[4096] = "";
	for (int k = 0; k < h->n_stems; k++)
		if (strstr(h->stems[k], "guitar"))
			snprintf(guitar, sizeof guitar, "%s", h->stems[k]);
	SF_INFO info;
	memset(&info, 0, sizeof info);
	SNDFILE *f = guitar[0] ? sf_open(guitar, SFM_READ, &info) : NULL;
	CHECK(f != NULL, "no guitar stem to audition");
	if (f) {
		const int64_t at = 10 * 1024;
		float want[2 * 1024];
		sf_seek(f, at, SEEK_SET);
		sf_readf_float(f, want, 1024);
		sf_close(f);
		h->ctl[SB_PORT_AUDITION] = 9; /* Guitar */
		host_transport(h, start6 + at, 1.0f);
		roll(h, 1, 5, NULL, 0);
		double worst = 0;
		for (int i = 0; i < 1024; i++)
			for (int c = 0; c < 2; c++)
				worst = fmax(worst, fabs(h->out[c][i] - want[i * 2 + c]));
		CHECK(worst < 1e-6, "audition of the guitar stem is off by %g", worst);
		host_transport(h, h->pos, 0.0f);
		h->ctl[SB_PORT_AUDITION] = 0;
	}
	free(rec.data);
	host_free(h);
	return failures;
}

/* From the plugin's UI: a model chosen that is not installed is installed with patch:Set
 * installModel; a take recorded meanwhile waits for it and then runs with it; an install that
 * fails fails the take that waited, with the reason. The catalogue and the files come from
 * tests/models/test_models.py (STEMBRIDGE_CATALOG, a loopback server). */
static int test_model_install(void)
{
	char dir[1200], data[1300], cache[1300], outdir[1300], name[256];
	if (!getenv("STEMBRIDGE_CATALOG")) {
		fprintf(stderr, "modelinstall: run by tests/models/test_models.py (no STEMBRIDGE_CATALOG)\n");
		return 1;
	}
	make_tmp("model-install", dir, sizeof dir);
	snprintf(data, sizeof data, "%s/data", dir);
	snprintf(cache, sizeof cache, "%s/cache", dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	setenv("XDG_DATA_HOME", data, 1);
	setenv("XDG_CACHE_HOME", cache, 1);
	host_plugin *h = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	CHECK(wait_for(h, 10, notice_has, "HTDemucs is not installed"), "modelNotice '%s'",
	      h->model_notice);

	host_set_text(h, SB__installModel, ATOM_STRING, "htdemucs");
	CHECK(wait_for(h, 30, status_has, "htdemucs: downloading"), "install status '%s'",
	      h->install_status);
	/* the model being installed, its notice goes (the install status speaks), never an error */
	for (double end = host_now() + 10; host_now() < end && h->model_notice[0];) {
		host_sleep_ms(2);
		host_run(h);
	}
	CHECK(!h->model_notice[0], "modelNotice '%s' while installing", h->model_notice);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_ERROR, "state Error while installing");
	/* a take recorded while the model installs waits for it */
	const uint32_t jobs = (uint32_t)h->ctl[SB_PORT_JOBS_DONE_OUT];
	recording rec = {0};
	rec.channels = 2;
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 48000, 1.0f);
	roll(h, 47, 6, &rec, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	CHECK(host_wait_jobs(h, (int)jobs + 1, 120), "the take that waited did not run: status '%s', "
	      "error '%s'", h->install_status, h->last_error);
	CHECK(strstr(h->install_status, "htdemucs installed"), "install status '%s'", h->install_status);
	manifest_model_name(h->manifest, name, sizeof name);
	CHECK(!strcmp(name, "htdemucs"), "the waiting take ran '%s'", name);
	CHECK(count_exact_stems(h, &rec) == 4, "four stems of the take's length");
	CHECK(wait_for(h, 10, list_has, "htdemucs\tHTDemucs\tvocals,drums,bass,other\t1"),
	      "model list after the install: %s", h->model_list);

	/* an install that fails (its connection always breaks: three tries): the take that waited
	 * for it fails with the reason */
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS_6S;
	host_set_text(h, SB__installModel, ATOM_STRING, "htdemucs_6s");
	CHECK(wait_for(h, 10, status_has, "htdemucs_6s: downloading"), "install status '%s'",
	      h->install_status);
	h->last_error[0] = '\0';
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 20 * 48000, 1.0f);
	roll(h, 20, 7, NULL, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	CHECK(wait_for(h, 60, error_has, "was not separated"), "the failed install's take: '%s'",
	      h->last_error);
	CHECK(wait_for(h, 10, status_has, "htdemucs_6s not installed"), "install status '%s'",
	      h->install_status);
	CHECK(strstr(h->last_error, "connection broke") && strstr(h->install_status, "not installed"),
	      "the reason: error '%s', status '%s'", h->last_error, h->install_status);
	free(rec.data);
	host_free(h);
	return failures;
}


/* ---- issue 18: what hosts and lv2lint meet ---- */

static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static bool tree_has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	struct dirent *e;
	bool any = false;
	while ((e = readdir(d)))
		any = any || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
	closedir(d);
	return any;
}

/* A host or checker that instantiates the plugin only to look at it (lv2lint forks for each
 * call and waits for the child to exit) must find no thread started: not by loading the
 * library, not by instantiate(), activate(), run() with nothing to do, save(), deactivate().
 * The service starts when first needed (armed), through the worker; without work:schedule the
 * plugin refuses to instantiate with a clear line. */
static int test_lazy(void)
{
	char dir[1200];
	make_tmp("lazy", dir, sizeof dir);
	const int before = thread_count();
	host_plugin *h = host_new_quiet(true, 512, HOST_PATH_CARLA, dir);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	for (int i = 0; i < 50; i++)
		host_run(h);
	kv st;
	save_direct(h, &st);
	CHECK(thread_count() == before, "%d threads after load, instantiate, activate, run and save; "
	      "%d before", thread_count(), before);
	CHECK(h->works_done == 0, "work scheduled with nothing to do");
	char carla_tmp[1300];
	snprintf(carla_tmp, sizeof carla_tmp, "%s/client.tmp", dir);
	CHECK(!tree_has_entries(carla_tmp), "folders made in the host's makePath folder");
	/* armed: the service starts, through the worker, off the audio thread */
	h->ctl[SB_PORT_RECORD] = 1.0f;
	for (int i = 0; i < 5; i++)
		host_run(h);
	CHECK(h->works_done == 1, "%d work calls after arming, expected 1", h->works_done);
	CHECK(thread_count() > before, "no service thread once armed");
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_free(h);

	host_no_worker = 1;
	const int warnings = host_log_warnings();
	host_plugin *n = host_new_quiet(true, 512, HOST_PATH_NONE, NULL);
	CHECK(n == NULL, "instantiated without work:schedule");
	CHECK(host_log_warnings() > warnings, "no log line naming the missing feature");
	host_free(n);
	host_no_worker = 0;
	return failures;
}

/* Rolls n blocks of a constant-amplitude tone (amp 0: digital silence). */
static void roll_level(host_plugin *h, int n, float amp)
{
	for (int b = 0; b < n; b++) {
		for (int c = 0; c < h->channels; c++)
			for (uint32_t i = 0; i < h->block; i++)
				h->in[c][i] = amp * (float)sin(2 * M_PI * 440.0 * (double)(h->pos + i) / 48000.0);
		host_run(h);
	}
}

static int count_dirs_with(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, part) != NULL;
	if (d)
		closedir(d);
	return n;
}

/* Ardour's default monitoring feeds a recording track's plugins silence: a take below -90 dBFS
 * throughout is said to be silent (state, lastError, log) and not separated; no folder, no job.
 * A quiet take above the threshold is separated as usual, and numbered take 1. */
static int test_silent(void)
{
	char dir[1200], outdir[1300];
	make_tmp("silent", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	host_plugin *h = host_new(false, 1024, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(h, SB__trackName, ATOM_STRING, "Vox");
	const float amps[2] = {0.0f, 2e-5f}; /* digital silence; -94 dBFS */
	for (int k = 0; k < 2; k++) {
		h->last_error[0] = '\0';
		h->ctl[SB_PORT_RECORD] = 1.0f;
		host_transport(h, 48000 * (10 * k + 1), 1.0f);
		roll_level(h, 60, amps[k]);
		h->ctl[SB_PORT_RECORD] = 0.0f;
		host_transport(h, h->pos, 0.0f);
		for (double end = host_now() + 10; host_now() < end && !h->last_error[0];) {
			host_run(h);
			host_sleep_ms(2);
		}
		CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_SILENT, "take %d: state %g, not Silent",
		      k, (double)h->ctl[SB_PORT_STATE_OUT]);
		CHECK(strstr(h->last_error, "silent") && strstr(h->last_error, "Monitoring"),
		      "take %d: lastError '%s'", k, h->last_error);
		CHECK((int)h->ctl[SB_PORT_JOBS_DONE_OUT] == 0, "take %d made a job", k);
	}
	CHECK(!tree_has_entries(outdir), "a silent take left files or folders in %s", outdir);
	/* -80 dBFS is quiet, not silent: separated, and the first take with a number; with the
	 * Precision control on BF16, which the take's job is asked for (the manifest says) */
	h->ctl[sb_port_precision(h->channels)] = SB_PRECISION_BF16;
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 48000 * 30, 1.0f);
	roll_level(h, 60, 1e-4f);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	CHECK(host_wait_jobs(h, 1, 300), "a quiet take was not separated: %s", h->last_error);
	CHECK(strstr(h->manifest, "/Vox-take1/Vox-take1-manifest.json") != NULL,
	      "quiet take's manifest %s", h->manifest);
	char *man = h->manifest[0] ? slurp(h->manifest) : NULL;
	const char *prec = man ? strstr(man, "\"precision\"") : NULL;
	CHECK(prec && strstr(prec, "\"requested\": \"bf16\"") &&
	      strstr(prec, "\"requested\": \"bf16\"") - prec < 40,
	      "the take's manifest does not say bf16 was asked for: %s", prec ? prec : "(none)");
	free(man);
	host_free(h);
	return failures;
}

/* A stem's "peak" or "rms" in the manifest's stems array (-1 when missing). */
static double manifest_stem_figure(const char *man, const char *stem, const char *key)
{
	char want[64];
	snprintf(want, sizeof want, "\"stem\": \"%s\"", stem);
	const char *at = man ? strstr(man, want) : NULL;
	char k[32];
	snprintf(k, sizeof k, "\"%s\": ", key);
	const char *v = at ? strstr(at, k) : NULL;
	const char *end = at ? strchr(at, '}') : NULL;
	return v && end && v < end ? strtod(v + strlen(k), NULL) : -1.0;
}

/* Records blocks of the test signal from start, checking the take lane as it goes; returns how
 * many times the announced length grew. */
static int record_watching_lane(host_plugin *h, int64_t start, int blocks, recording *rec)
{
	rec->frames = 0;
	rec->channels = h->channels;
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, start, 1.0f);
	int grew = 0;
	int64_t last = 0;
	for (int b = 0; b < blocks; b++) {
		roll(h, 1, 3, rec, 0);
		if (h->wave_frames > last) {
			grew++;
			last = h->wave_frames;
		}
		if (b % 16 == 0)
			host_sleep_ms(1);
	}
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	host_run(h);
	return grew;
}

/* What the plugin's window is fed: the take lane while recording (each column's min and max
 * exactly as recorded, the whole take in at most 512 columns, its start and length), the stem
 * rows once the stems exist (the engine's peak and RMS as the manifest has them, a waveform
 * that reaches that peak), the take the state speaks of, the takes ahead of a queued one, and
 * a new take clearing the last take's error. */
static int test_lane(void)
{
	char dir[1200], outdir[1300];
	make_tmp("lane", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	host_plugin *h = host_new(true, 256, HOST_PATH_NONE, NULL);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	host_set_text(h, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(h, SB__trackName, ATOM_STRING, "Lane");
	h->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	recording rec = {0};
	const int64_t start = 48000 * 2 + 77;
	const int grew = record_watching_lane(h, start, 48000 * 3 / 256, &rec);
	CHECK(grew >= 20, "the lane grew %d times in 3 s of recording (ten a second expected)", grew);
	CHECK(h->wave_start == start && h->wave_frames == rec.frames,
	      "the lane says start %lld, %lld frames; recorded %lld from %lld",
	      (long long)h->wave_start, (long long)h->wave_frames, (long long)rec.frames,
	      (long long)start);
	const int64_t per = h->wave_per_col;
	CHECK(per >= 64 && h->wave_cols >= 256 && h->wave_cols <= 512 &&
	      (int64_t)(h->wave_cols - 1) * per < rec.frames && rec.frames <= h->wave_cols * per,
	      "%d columns of %lld frames for %lld frames", h->wave_cols, (long long)per,
	      (long long)rec.frames);
	double worst = 0;
	for (int c = 0; c < h->wave_cols && per > 0; c++) {
		float lo = INFINITY, hi = -INFINITY;
		for (int64_t f = c * per; f < (c + 1) * per && f < rec.frames; f++)
			for (int ch = 0; ch < 2; ch++) {
				lo = fminf(lo, rec.data[f * 2 + ch]);
				hi = fmaxf(hi, rec.data[f * 2 + ch]);
			}
		worst = fmax(worst, fabs(lo - h->wave[2 * c]) + fabs(hi - h->wave[2 * c + 1]));
	}
	CHECK(worst == 0.0, "the lane's columns differ from the recording's min and max by %g", worst);

	CHECK(host_wait_jobs(h, 1, 600), "take 1 was not separated: %s", h->last_error);
	for (double end = host_now() + 10; host_now() < end && h->n_views < 4;) {
		host_run(h);
		host_sleep_ms(2);
	}
	CHECK(h->n_views == 4, "%d stem rows announced, 4 stems written", h->n_views);
	char *man = h->manifest[0] ? slurp(h->manifest) : NULL;
	for (int k = 0; k < h->n_views; k++) {
		const int s = h->views[k].stem;
		const char *name = s >= 0 && s < 6 ? stems[s] : "?";
		const double peak = manifest_stem_figure(man, name, "peak");
		const double rms = manifest_stem_figure(man, name, "rms");
		CHECK(peak > 0 && fabs(h->views[k].peak - peak) <= 1e-6 * peak &&
		      fabs(h->views[k].rms - rms) <= 1e-6 * rms,
		      "%s: row peak %g rms %g, manifest %g %g", name, h->views[k].peak, h->views[k].rms,
		      peak, rms);
		float top = 0;
		for (int c = 0; c < h->views[k].cols; c++)
			top = fmaxf(top, fmaxf(-h->views[k].wave[2 * c], h->views[k].wave[2 * c + 1]));
		CHECK(h->views[k].cols == 256 && fabs(top - peak) <= 1e-6 * peak,
		      "%s: %d columns reaching %g, peak %g", name, h->views[k].cols, top, peak);
	}
	free(man);
	CHECK(h->job_take == 1, "the state speaks of take %d, not 1", h->job_take);

	/* a missing model is a notice; the take recorded with it fails (an error, take 2) */
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	CHECK(wait_for(h, 10, notice_has, "HTDemucs is not installed"), "modelNotice '%s'",
	      h->model_notice);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_DONE && !h->last_error[0],
	      "a missing model made state %g, lastError '%s'", h->ctl[SB_PORT_STATE_OUT],
	      h->last_error);
	record_watching_lane(h, 48000 * 10, 40, &rec);
	CHECK(wait_for(h, 10, error_has, "was not separated"), "take 2: lastError '%s'",
	      h->last_error);
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR && h->job_take == 2,
	      "take 2 failed: state %g, take %d", h->ctl[SB_PORT_STATE_OUT], h->job_take);
	/* a new take: the last one's error is no longer news */
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	for (double end = host_now() + 10; host_now() < end && h->model_notice[0];) {
		host_run(h);
		host_sleep_ms(2);
	}
	CHECK(!h->model_notice[0], "the notice stays with the built-in model: '%s'", h->model_notice);
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 48000 * 20, 1.0f);
	roll(h, 8, 5, NULL, 0);
	CHECK(!h->last_error[0] && (int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_RECORDING &&
	      h->wave_start == 48000 * 20 && h->wave_frames <= 8 * 256,
	      "a new take kept lastError '%s' (state %g) or the old lane (start %lld, %lld frames)",
	      h->last_error, h->ctl[SB_PORT_STATE_OUT], (long long)h->wave_start,
	      (long long)h->wave_frames);
	roll(h, 100, 5, NULL, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	CHECK(host_wait_jobs(h, 2, 600), "take 3 was not separated: %s", h->last_error);
	CHECK(h->job_take == 3 && !h->last_error[0], "take %d done, lastError '%s'", h->job_take,
	      h->last_error);

	/* two tracks on the CPU, the first one's job slowed: the second waits, one take ahead */
	host_plugin *g = host_new(true, 256, HOST_PATH_NONE, NULL);
	host_set_text(g, SB__outputDir, ATOM_PATH, outdir);
	host_set_text(g, SB__trackName, ATOM_STRING, "Queue");
	g->ctl[SB_PORT_DEVICE] = SB_DEVICE_CPU;
	g->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	setenv("SB_FAULT_INJECT", "job:slow:300", 1);
	record_watching_lane(h, 48000 * 30, 100, &rec);
	for (double end = host_now() + 30;
	     host_now() < end && (int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_SEPARATING;) {
		host_run(h);
		host_sleep_ms(2);
	}
	record_watching_lane(g, 48000 * 30, 100, &rec);
	int ahead = -1;
	for (double end = host_now() + 30; host_now() < end && ahead < 1;) {
		host_run(g);
		host_run(h);
		if ((int)g->ctl[SB_PORT_STATE_OUT] == SB_STATE_QUEUED)
			ahead = g->queue_ahead;
		host_sleep_ms(2);
	}
	CHECK(ahead == 1, "the second track's take was queued with %d takes ahead, not 1", ahead);
	unsetenv("SB_FAULT_INJECT");
	CHECK(host_wait_jobs(g, 1, 600), "the queued take was not separated: %s", g->last_error);
	CHECK(g->job_take == 1 && g->queue_ahead == 0, "queued take %d, %d ahead once done",
	      g->job_take, g->queue_ahead);
	host_wait_jobs(h, 3, 600);
	free(rec.data);
	host_free(g);
	host_free(h);
	return failures;
}

static bool stem_file_exists(const char *dir, const char *name)
{
	char p[2600];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return access(p, R_OK) == 0;
}

/* Stems are named after the track when the host says it (trackName), else after the
 * instance's id, which the session keeps; a reopened session goes on counting takes; a take
 * number in use (a folder there, a file Ardour imported) is never taken again; saving twice
 * with nothing changed saves the same state, the device by its name without figures. */
static int test_naming(void)
{
	char dir[1200], outdir[1300];
	make_tmp("naming", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/out", dir);
	host_plugin *a = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(a != NULL, "instantiate");
	if (!a)
		return 1;
	a->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	a->ctl[SB_PORT_DEVICE] = SB_DEVICE_FIRST_ACCEL; /* Device 1: PoCL here */
	host_set_text(a, SB__outputDir, ATOM_PATH, outdir);
	recording rec = {0};
	CHECK(record_take(a, 48000, 40, 1, &rec), "take 1: %s", a->last_error);
	kv s1, s2;
	save_direct(a, &s1);
	const char *id = kv_text(&s1, SB__instanceId);
	CHECK(id && strlen(id) == 6, "instance id saved as '%s'", id ? id : "(none)");
	char track[64], want[2600];
	snprintf(track, sizeof track, "track-%s", id ? id : "?");
	snprintf(want, sizeof want, "%s/%s-take1", outdir, track);
	CHECK(strncmp(a->manifest, want, strlen(want)) == 0, "take 1 at %s, expected in %s",
	      a->manifest, want);
	char name[300];
	snprintf(name, sizeof name, "%s-take1-vocals.wav", track);
	CHECK(stem_file_exists(want, name), "%s/%s missing", want, name);
	CHECK(kv_int(&s1, SB__lastTake) == 1, "lastTake saved as %d", kv_int(&s1, SB__lastTake));
	/* the same state when saved again with nothing changed */
	host_sleep_ms(300);
	for (int i = 0; i < 20; i++)
		host_run(a);
	save_direct(a, &s2);
	CHECK(s1.n == s2.n, "second save has %d values, first %d", s2.n, s1.n);
	for (int i = 0; i < s1.n && i < s2.n; i++)
		CHECK(s1.key[i] == s2.key[i] && s1.size[i] == s2.size[i] &&
		      !memcmp(s1.val[i], s2.val[i], s1.size[i]),
		      "saved %s differs between two saves", host_unmap(s1.key[i]));
	const char *dname = kv_text(&s1, SB__deviceName);
	CHECK(dname && !strstr(dname, "GiB") && !strstr(dname, "MiB") && !strstr(dname, "threads)"),
	      "device saved as '%s': figures in its name", dname ? dname : "(none)");

	/* the session reopened: a new instance restores the state and goes on from take 2 */
	host_plugin *b = host_new(true, 1024, HOST_PATH_NONE, NULL);
	CHECK(b != NULL, "instantiate");
	if (!b)
		return 1;
	const LV2_State_Interface *si = lilv_instance_get_extension_data(b->inst, LV2_STATE__interface);
	si->restore(lilv_instance_get_handle(b->inst), kv_retrieve, &s1, 0, NULL);
	b->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	b->ctl[SB_PORT_DEVICE] = SB_DEVICE_FIRST_ACCEL;
	/* someone else's folder already holds take 2 of this name: it is skipped, not shared */
	char taken[2600], cmd0[5400];
	snprintf(taken, sizeof taken, "%s/%s-take2", outdir, track);
	snprintf(cmd0, sizeof cmd0, "mkdir '%s' && echo mine > '%s/notes.txt'", taken, taken);
	CHECK(system(cmd0) == 0, "%s", cmd0);
	CHECK(record_take(b, 48000, 40, 2, &rec), "take after reopening: %s", b->last_error);
	snprintf(want, sizeof want, "%s/%s-take3/", outdir, track);
	CHECK(strncmp(b->manifest, want, strlen(want)) == 0, "reopened take at %s, expected in %s",
	      b->manifest, want);
	/* the host names the track: its name from now on */
	host_set_text(b, SB__trackName, ATOM_STRING, "Bass Gtr");
	CHECK(record_take(b, 48000, 40, 3, &rec), "named take: %s", b->last_error);
	snprintf(want, sizeof want, "%s/Bass Gtr-take4/Bass Gtr-take4-manifest.json", outdir);
	CHECK(!strcmp(b->manifest, want), "named take at %s, expected %s", b->manifest, want);
	free(rec.data);
	host_free(a);
	host_free(b);

	/* Ardour: a take number whose stems the session imported is used */
	char scratch[1300], imported[2600];
	snprintf(scratch, sizeof scratch, "%s/ardour", dir);
	snprintf(imported, sizeof imported, "%s/interchange/song/audiofiles", scratch);
	char cmd[6000];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && touch '%s/Keys-take5-vocals.wav'", imported,
	         imported);
	CHECK(system(cmd) == 0, "%s", cmd);
	host_plugin *c = host_new_quiet(false, 1024, HOST_PATH_ARDOUR, scratch);
	CHECK(c != NULL, "instantiate");
	if (!c)
		return 1;
	c->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_set_text(c, SB__trackName, ATOM_STRING, "Keys");
	recording r2 = {0};
	CHECK(record_take(c, 0, 30, 4, &r2), "Ardour take: %s", c->last_error);
	CHECK(strstr(c->manifest, "/scratch/stembridge/Keys-take6/Keys-take6-manifest.json") != NULL,
	      "Ardour take at %s, expected take 6", c->manifest);
	free(r2.data);
	host_free(c);
	return failures;
}

/* Where stems go, as generic host UIs reach it: Carla's one file slot lands on modelFile, and
 * file dialogs pick files, not folders; a failed job and an untrusted makePath leave no empty
 * folder behind; what a killed host left in a take folder is cleaned up. */
static int test_paths(void)
{
	char dir[1200], outdir[1300], song[1400], cmd[4000];
	make_tmp("paths", dir, sizeof dir);
	snprintf(outdir, sizeof outdir, "%s/chosen folder", dir);
	snprintf(song, sizeof song, "%s/song.wav", outdir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && touch '%s'", outdir, song);
	CHECK(system(cmd) == 0, "%s", cmd);
	host_plugin *h = host_new(false, 1024, HOST_PATH_CARLA, dir);
	CHECK(h != NULL, "instantiate");
	if (!h)
		return 1;
	h->ctl[SB_PORT_MODEL] = SB_MODEL_BUILTIN;
	host_set_text(h, SB__trackName, ATOM_STRING, "Gtr");
	/* a user picks a file in the folder they want, through the one slot Carla offers; Carla 2.5
	 * forges the path with strlen + 1 as its length, so the atom ends in two NULs */
	char carla_body[1500];
	memset(carla_body, 0, sizeof carla_body);
	snprintf(carla_body, sizeof carla_body, "%s", song);
	host_set_atom(h, SB__modelFile, ATOM_PATH, carla_body, (uint32_t)strlen(song) + 2);
	host_run(h);
	CHECK(!strcmp(h->output_dir, outdir), "outputDir announced as '%s', expected '%s'",
	      h->output_dir, outdir);
	/* what a host killed mid-take left in an old take folder: its temporary file goes */
	char stale_dir[1500], stale[1700];
	snprintf(stale_dir, sizeof stale_dir, "%s/Gtr-take7", outdir);
	snprintf(stale, sizeof stale, "%s/.Gtr-take7-vocals.wav.part-999999-AbC123", stale_dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo half > '%s'", stale_dir, stale);
	CHECK(system(cmd) == 0, "%s", cmd);
	recording rec = {0};
	CHECK(record_take(h, 0, 30, 1, &rec), "take: %s", h->last_error);
	/* the killed take wrote nothing: its folder goes, and its number is free */
	char want[1500];
	snprintf(want, sizeof want, "%s/Gtr-take1/", outdir);
	CHECK(strncmp(h->manifest, want, strlen(want)) == 0, "stems at %s, expected in %s",
	      h->manifest, want);
	CHECK(access(stale, F_OK) != 0, "stale temporary file %s still there", stale);
	CHECK(access(stale_dir, F_OK) != 0, "the emptied take folder %s still there", stale_dir);
	char carla_tmp[1300];
	snprintf(carla_tmp, sizeof carla_tmp, "%s/client.tmp", dir);
	CHECK(access(carla_tmp, F_OK) != 0, "the host's makePath folder %s left behind", carla_tmp);

	/* a file without an extension set as the output folder stands for its folder */
	char noext[1500];
	snprintf(noext, sizeof noext, "%s/README", outdir);
	snprintf(cmd, sizeof cmd, "touch '%s'", noext);
	CHECK(system(cmd) == 0, "%s", cmd);
	host_set_text(h, SB__outputDir, ATOM_PATH, noext);
	CHECK(record_take(h, 0, 30, 2, &rec), "take: %s", h->last_error);
	snprintf(want, sizeof want, "%s/Gtr-take2/", outdir);
	CHECK(strncmp(h->manifest, want, strlen(want)) == 0, "stems at %s, expected in %s",
	      h->manifest, want);

	/* a job that fails (its model file is not there) leaves no stem and no temporary file: its
	 * folder holds the take's recording, which lastError points at, and its journal */
	char fresh[1400];
	snprintf(fresh, sizeof fresh, "%s/never made", dir);
	host_set_text(h, SB__outputDir, ATOM_PATH, fresh);
	host_set_text(h, SB__modelFile, ATOM_PATH, "/nonexistent/model.safetensors");
	h->ctl[SB_PORT_MODEL] = SB_MODEL_HTDEMUCS;
	h->ctl[SB_PORT_RECORD] = 1.0f;
	host_transport(h, 0, 1.0f);
	roll(h, 30, 3, NULL, 8);
	h->ctl[SB_PORT_RECORD] = 0.0f;
	host_transport(h, h->pos, 0.0f);
	for (double end = host_now() + 60;
	     host_now() < end && (int)h->ctl[SB_PORT_STATE_OUT] != SB_STATE_ERROR;) {
		host_run(h);
		host_sleep_ms(5);
	}
	CHECK((int)h->ctl[SB_PORT_STATE_OUT] == SB_STATE_ERROR, "a missing model file did not fail");
	host_sleep_ms(200);
	for (int i = 0; i < 10; i++)
		host_run(h);
	char kept[1600];
	snprintf(kept, sizeof kept, "%s/Gtr-take3/Gtr-take3-recording.wav", fresh);
	CHECK(access(kept, F_OK) == 0 && strstr(h->last_error, kept),
	      "the failed take's recording %s is not kept and said: '%s'", kept, h->last_error);
	snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s/Gtr-take3' | sort | tr '\\n' ' ')\" = "
	         "'Gtr-take3-journal.json Gtr-take3-recording.wav '", fresh);
	CHECK(system(cmd) == 0, "the failed take's folder holds more than its recording and journal");
	CHECK(count_dirs_with(outdir, "-take3") == 0, "a failed take's folder in %s", outdir);
	free(rec.data);
	host_free(h);
	return failures;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_plugin record|freewheel|state|damaged|modelfile|"
		        "modelfile-damaged|fallback|presets|many|close|rt\n");
		return 2;
	}
	const char *t = getenv("SB_TEST_TMP");
	snprintf(tmp_root, sizeof tmp_root, "%s", t ? t : "/tmp/sb-plugin-test");
	mkdir(tmp_root, 0777);
	host_init();
	int r;
	if (!strcmp(argv[1], "record") && argc >= 4) {
		host_path_mode m = !strcmp(argv[3], "ardour") ? HOST_PATH_ARDOUR
		                 : !strcmp(argv[3], "carla") ? HOST_PATH_CARLA : HOST_PATH_NONE;
		r = test_record(!strcmp(argv[2], "stereo"), m);
	} else if (!strcmp(argv[1], "freewheel")) {
		r = test_freewheel();
	} else if (!strcmp(argv[1], "state")) {
		r = test_state();
	} else if (!strcmp(argv[1], "damaged")) {
		r = test_damaged();
	} else if (!strcmp(argv[1], "roformerfile") && argc >= 3) {
		r = test_roformer_file(argv[2], argc >= 4 ? argv[3] : "vocals,other");
	} else if (!strcmp(argv[1], "modelfile")) {
		r = test_model_file();
	} else if (!strcmp(argv[1], "modelfile-damaged")) {
		r = test_model_file_damaged();
	} else if (!strcmp(argv[1], "fallback")) {
		r = test_fallback();
	} else if (!strcmp(argv[1], "many")) {
		r = test_many();
	} else if (!strcmp(argv[1], "presets")) {
		r = test_presets();
	} else if (!strcmp(argv[1], "close")) {
		r = test_close_running();
	} else if (!strcmp(argv[1], "rt")) {
		r = test_rt();
	} else if (!strcmp(argv[1], "auto")) {
		r = test_auto();
	} else if (!strcmp(argv[1], "modelinstall")) {
		r = test_model_install();
	} else if (!strcmp(argv[1], "toy")) {
		r = test_toy();
	} else if (!strcmp(argv[1], "lazy")) {
		r = test_lazy();
	} else if (!strcmp(argv[1], "silent")) {
		r = test_silent();
	} else if (!strcmp(argv[1], "lane")) {
		r = test_lane();
	} else if (!strcmp(argv[1], "naming")) {
		r = test_naming();
	} else if (!strcmp(argv[1], "paths")) {
		r = test_paths();
	} else if (!strcmp(argv[1], "alldevices")) {
		r = test_all_devices();
	} else {
		fprintf(stderr, "unknown test %s\n", argv[1]);
		r = 2;
	}
	host_fini();
	if (r == 77)
		return 77;
	if (r == 0)
		fprintf(stderr, "%s: ok\n", argv[1]);
	return r ? 1 : 0;
}
