/* The plugin's models and installs (models.h). */
#include "models.h"

#include "uris.h"

#include "stembridge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE 8

static struct {
	/* service thread only */
	bool running;
	pthread_t thread;
	char name[64];
	char queue[QUEUE][64];
	int n_queue;
	/* the install thread writes, the service thread reads: under 'lock' */
	pthread_mutex_t lock;
	char text[512];
	char last_error[512];
	float fraction;
	unsigned status_gen;
	bool done;
	sb_status result;
	atomic_int cancel;
	unsigned generation;  /* service thread: installs that ended */
} mg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *title_of(const char *name)
{
	return !strcmp(name, "builtin")       ? "Built-in"
	     : !strcmp(name, "htdemucs")      ? "HTDemucs"
	     : !strcmp(name, "htdemucs_ft")   ? "HTDemucs fine-tuned"
	     : !strcmp(name, "htdemucs_6s")   ? "HTDemucs 6 stems"
	                                      : name;
}

void sb_models_install_hint(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "install it from the plugin's window (Install), or run `stembridge "
	         "models install %s`", name);
}

void sb_models_resolve(int choice, const char *model_file, const sb_logger *log,
                       sb_model_choice *out)
{
	memset(out, 0, sizeof *out);
	if (choice < 0 || choice >= SB_N_MODEL_CHOICES)
		choice = SB_MODEL_AUTO;
	if (choice == SB_MODEL_BUILTIN) {
		snprintf(out->run, sizeof out->run, "builtin");
	} else if (model_file && model_file[0]) {
		/* a converted model the user pointed at wins over the Demucs choices and Auto */
		snprintf(out->run, sizeof out->run, "%s", model_file);
	} else if (choice == SB_MODEL_AUTO) {
		/* the engine resolves "auto" itself, so the manifest says what was asked for */
		char name[64];
		sb_model_auto(NULL, log, name, sizeof name);
		snprintf(out->run, sizeof out->run, "auto");
		snprintf(out->title, sizeof out->title, "%s", title_of(name));
		out->stems = sb_model_stems(name, NULL);
		return;
	} else {
		const char *name = sb_model_choice_names[choice];
		snprintf(out->run, sizeof out->run, "%s", name);
		if (!sb_model_stems(name, NULL))
			snprintf(out->missing, sizeof out->missing, "%s", name);
	}
	const char *base = strrchr(out->run, '/');
	snprintf(out->title, sizeof out->title, "%.63s", title_of(base ? base + 1 : out->run));
	out->stems = out->missing[0] ? 0 : sb_model_stems(out->run, NULL);
	if (out->missing[0]) {
		/* the catalogue says what it will make once installed */
		sb_catalog *cat = NULL;
		if (sb_catalog_load(log, &cat) == SB_OK) {
			const sb_catalog_model *m = sb_catalog_find(cat, out->missing);
			out->stems = m ? m->stems : 0;
			sb_catalog_free(cat);
		}
	}
}

bool sb_models_installing(const char *name)
{
	if (mg.running && !strcmp(mg.name, name))
		return true;
	for (int i = 0; i < mg.n_queue; i++)
		if (!strcmp(mg.queue[i], name))
			return true;
	return false;
}

bool sb_models_request(const char *name, const sb_logger *log, char *why, size_t len)
{
	sb_catalog *cat = NULL;
	if (sb_catalog_load(log, &cat) != SB_OK) {
		snprintf(why, len, "the model catalogue cannot be read");
		return false;
	}
	const bool known = sb_catalog_find(cat, name) != NULL;
	sb_catalog_free(cat);
	if (!known) {
		snprintf(why, len, "no model '%s' in the catalogue", name);
		return false;
	}
	if (sb_models_installing(name)) {
		snprintf(why, len, "%s is being installed already", name);
		return false;
	}
	if (sb_model_stems(name, NULL)) {
		snprintf(why, len, "%s is installed already", name);
		return false;
	}
	if (mg.n_queue == QUEUE) {
		snprintf(why, len, "too many installs waiting");
		return false;
	}
	snprintf(mg.queue[mg.n_queue++], 64, "%s", name);
	pthread_mutex_lock(&mg.lock);
	snprintf(mg.text, sizeof mg.text, "%s: waiting to install", name);
	mg.fraction = 0;
	mg.status_gen++;
	pthread_mutex_unlock(&mg.lock);
	return true;
}

/* ---- the install thread ---- */

static void clock_str(double s, char *buf, size_t len)
{
	if (s < 0 || s > 359999)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void on_progress(void *user, const sb_install_progress *p)
{
	(void)user;
	char text[512], eta[16];
	clock_str(p->eta_s, eta, sizeof eta);
	float f = 0;
	if (p->stage == SB_INSTALL_DOWNLOADING && p->total) {
		f = (float)((double)p->done / (double)p->total);
		snprintf(text, sizeof text, "%s: downloading %d%% (%.1f of %.1f MB, %.1f MB/s, %s left)",
		         p->model, (int)(f * 100), (double)p->done / 1e6, (double)p->total / 1e6,
		         p->rate / 1e6, eta);
	} else {
		f = p->stage == SB_INSTALL_DONE ? 1.f : 0.99f;
		snprintf(text, sizeof text, "%s: %s", p->model,
		         p->stage == SB_INSTALL_VERIFYING    ? "checking the download"
		         : p->stage == SB_INSTALL_CONVERTING ? "converting"
		         : p->stage == SB_INSTALL_DONE       ? "installed"
		                                             : "downloading");
	}
	pthread_mutex_lock(&mg.lock);
	if (strcmp(text, mg.text) || f != mg.fraction) {
		snprintf(mg.text, sizeof mg.text, "%s", text);
		mg.fraction = f;
		mg.status_gen++;
	}
	pthread_mutex_unlock(&mg.lock);
}

typedef struct {
	const sb_logger *inner;
} keep_log;

/* the engine's messages go on to the plugin's log; the last error is kept for the status */
static void install_log(void *user, sb_log_level level, const char *msg)
{
	const keep_log *k = user;
	if (level == SB_LOG_ERROR) {
		pthread_mutex_lock(&mg.lock);
		snprintf(mg.last_error, sizeof mg.last_error, "%s", msg);
		pthread_mutex_unlock(&mg.lock);
	}
	if (k->inner && k->inner->fn && level <= SB_LOG_INFO)
		k->inner->fn(k->inner->user, level, msg);
}

typedef struct {
	char name[64];
	sb_logger log;
} install_arg;

static void *install_main(void *arg)
{
	install_arg *a = arg;
	keep_log k = {&a->log};
	const sb_logger log = {install_log, &k};
	sb_catalog *cat = NULL;
	sb_status st = sb_catalog_load(&log, &cat);
	if (st == SB_OK) {
		sb_install_opts o = {.cancel = &mg.cancel, .progress = on_progress, .log = &log};
		st = sb_model_install(cat, a->name, &o, NULL, 0);
		sb_catalog_free(cat);
	}
	pthread_mutex_lock(&mg.lock);
	mg.done = true;
	mg.result = st;
	if (st == SB_OK)
		snprintf(mg.text, sizeof mg.text, "%s installed", a->name);
	else
		snprintf(mg.text, sizeof mg.text, "%s not installed: %.400s", a->name,
		         mg.last_error[0] ? mg.last_error : sb_status_str(st));
	mg.fraction = st == SB_OK ? 1.f : 0.f;
	mg.status_gen++;
	pthread_mutex_unlock(&mg.lock);
	free(a);
	return NULL;
}

bool sb_models_poll(const sb_logger *log, char *name, size_t nlen, sb_status *result, char *why,
                    size_t wlen)
{
	bool ended = false;
	if (mg.running) {
		pthread_mutex_lock(&mg.lock);
		const bool done = mg.done;
		if (done) {
			*result = mg.result;
			snprintf(why, wlen, "%s", mg.result == SB_OK ? "" : mg.text);
		}
		pthread_mutex_unlock(&mg.lock);
		if (done) {
			pthread_join(mg.thread, NULL);
			mg.running = false;
			mg.generation++;
			snprintf(name, nlen, "%s", mg.name);
			ended = true;
		}
	}
	if (!mg.running && mg.n_queue) {
		install_arg *a = calloc(1, sizeof *a);
		if (a) {
			snprintf(a->name, sizeof a->name, "%s", mg.queue[0]);
			if (log)
				a->log = *log;
			pthread_mutex_lock(&mg.lock);
			mg.done = false;
			mg.last_error[0] = '\0';
			pthread_mutex_unlock(&mg.lock);
			atomic_store(&mg.cancel, 0);
			if (pthread_create(&mg.thread, NULL, install_main, a) == 0) {
				mg.running = true;
				snprintf(mg.name, sizeof mg.name, "%s", a->name);
			} else {
				free(a);
			}
		}
		if (mg.running || !a) {
			memmove(mg.queue[0], mg.queue[1], sizeof mg.queue[0] * (size_t)(QUEUE - 1));
			mg.n_queue--;
		}
	}
	return ended;
}

unsigned sb_models_status(char *text, size_t len, float *fraction)
{
	pthread_mutex_lock(&mg.lock);
	snprintf(text, len, "%s", mg.text);
	*fraction = mg.fraction;
	const unsigned g = mg.status_gen;
	pthread_mutex_unlock(&mg.lock);
	return g;
}

unsigned sb_models_generation(void)
{
	return mg.generation;
}

void sb_models_list_text(char *buf, size_t len)
{
	size_t at = 0;
	char stems[128], auto_name[64];
	buf[0] = '\0';
	sb_model_auto(NULL, NULL, auto_name, sizeof auto_name);
	sb_stem_mask_text(sb_model_stems(auto_name, NULL), ",", stems, sizeof stems);
	at += (size_t)snprintf(buf + at, len - at, "auto\tAuto: %s\t%s\t1\t0\n", title_of(auto_name),
	                       stems);
	sb_stem_mask_text((1u << SB_N_STEMS) - 1, ",", stems, sizeof stems);
	at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "builtin\tBuilt-in\t%s\t1\t0\n",
	                       stems);
	sb_catalog *cat = NULL;
	if (sb_catalog_load(NULL, &cat) != SB_OK)
		return;
	for (int i = 0; i < sb_catalog_count(cat) && at < len; i++) {
		const sb_catalog_model *m = sb_catalog_at(cat, i);
		sb_stem_mask_text(m->stems, ",", stems, sizeof stems);
		at += (size_t)snprintf(buf + at, len - at, "%s\t%s\t%s\t%d\t%llu\n", m->name,
		                       title_of(m->name), stems, sb_model_stems(m->name, NULL) != 0,
		                       (unsigned long long)m->bytes);
	}
	sb_catalog_free(cat);
}

void sb_models_stop(void)
{
	mg.n_queue = 0;
	if (!mg.running)
		return;
	atomic_store(&mg.cancel, 1);
	pthread_join(mg.thread, NULL);
	mg.running = false;
}
