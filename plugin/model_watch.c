/* The service's side of the models (models.c does the work): install requests run() passes
 * on, the model list and install status run() shows, and a warning as soon as the Model
 * control names a model that is not installed.
 *
 * Threads: the service thread only.
 */
#include "service.h"

#include "models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The installs the UI asked for through run(): queued, or said why not. */
static void take_requests(sb_instance *self)
{
	sb_request req;
	while (sb_ring_pop(&self->requests, &req)) {
		req.install[sizeof req.install - 1] = '\0';
		const sb_logger log = {sb_service_log, NULL};
		char why[256];
		if (sb_models_request(req.install, &log, why, sizeof why)) {
			lv2_log_note(&self->logger, "stembridge: installing %s\n", req.install);
		} else {
			char text[300];
			snprintf(text, sizeof text, "0\t%s", why);
			sb_service_post(self, SB_MSG_INSTALL, text);
		}
	}
}

/* The Model control names a model that is not installed: say so, with how to install it,
 * before a take needs it, as a notice (modelNotice, and the log), not an error: nothing has
 * failed yet, and the state stays what it was. A take recorded meanwhile fails saying so. */
static void watch_models(sb_instance *self)
{
	/* the list again after each install here, and every two seconds for models installed
	 * outside the plugin (the CLI, by hand); run() hears of it only when it changed */
	const unsigned gen = sb_models_generation() + 1;
	const double now = sb_now();
	if (self->nrt_models_gen != gen || now - self->nrt_models_checked > 2.0) {
		char *text = malloc(SB_TEXT);
		if (text) {
			sb_models_list_text(text, SB_TEXT);
			if (strcmp(text, self->nrt_models_text)) {
				snprintf(self->nrt_models_text, sizeof self->nrt_models_text, "%s", text);
				sb_service_post(self, SB_MSG_MODELS, text);
				self->nrt_model_port = -1; /* look at the choice again: installed now? */
			}
			free(text);
		}
		self->nrt_models_gen = gen;
		self->nrt_models_checked = now;
	}
	char status[512];
	float fraction = 0;
	const unsigned ig = sb_models_status(status, sizeof status, &fraction);
	if (ig != self->nrt_install_gen) {
		char text[600];
		snprintf(text, sizeof text, "%.3f\t%s", (double)fraction, status);
		sb_service_post(self, SB_MSG_INSTALL, text);
		self->nrt_install_gen = ig;
		self->nrt_model_port = -1; /* a missing model being installed is no longer an error */
	}
	const int mp = atomic_load(&self->model_port);
	if (mp < 0 || mp == self->nrt_model_port)
		return;
	self->nrt_model_port = mp;
	sb_props pr;
	sb_props_read(self, &pr);
	const sb_logger quiet = {NULL, NULL};
	sb_model_choice mc;
	sb_models_resolve(mp, pr.model_file, &quiet, &mc);
	const bool missing = mc.missing[0] && !sb_models_installing(mc.missing);
	if (missing) {
		char msg[512], hint[256];
		sb_models_install_hint(mc.missing, hint, sizeof hint);
		snprintf(msg, sizeof msg, "%s is not installed: %s", mc.title, hint);
		lv2_log_warning(&self->logger, "stembridge: %s\n", msg);
		sb_service_post(self, SB_MSG_NOTICE, msg);
	} else if (self->nrt_model_missing) {
		sb_service_post(self, SB_MSG_NOTICE, "");
	}
	self->nrt_model_missing = missing;
}

void sb_model_watch(sb_instance *self)
{
	take_requests(self);
	watch_models(self);
}
