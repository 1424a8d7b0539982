/* A job's progress back to run(): its state, fraction and time left, the devices it runs on,
 * and at its end the stems (listed, read back for audition, announced with the region) or the
 * failure in words.
 *
 * Threads: the service thread only.
 */
#include "service.h"

#include "stembridge.h"
#include "take_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stems of a finished job, from its result: each path lands in paths[stem] by its
 * canonical index. */
static int stems_of(const sb_job_result *r, char paths[SB_PLUGIN_STEMS][SB_TEXT])
{
	int found = 0;
	for (int j = 0; j < r->n_stems; j++) {
		const int s = r->stems[j].stem;
		if (s >= 0 && s < SB_PLUGIN_STEMS && !paths[s][0]) {
			snprintf(paths[s], SB_TEXT, "%s", r->stems[j].path);
			found++;
		}
	}
	return found;
}

/* The devices a job runs on, in words: "CPU + Radeon RX 7900"; with shares: "CPU 5 segments +
 * Radeon RX 7900 12 segments". */
static void devices_text(const sb_job_progress *p, bool shares, char *out, size_t len)
{
	out[0] = '\0';
	if (p->n_devices <= 1) {
		snprintf(out, len, "%s", p->device_name);
		return;
	}
	size_t at = 0;
	for (int d = 0; d < p->n_devices && d < SB_JOB_MAX_DEVICES; d++) {
		const sb_job_device *jd = &p->devices[d];
		int w = shares ? snprintf(out + at, len - at, "%s%s %ld segment%s%s", d ? " + " : "",
		                          jd->name, jd->done, jd->done == 1 ? "" : "s",
		                          jd->dropped ? " (dropped)" : "")
		               : snprintf(out + at, len - at, "%s%s", d ? " + " : "", jd->name);
		if (w < 0 || (size_t)w >= len - at)
			break;
		at += (size_t)w;
	}
}

void sb_jobs_poll(sb_instance *self, sb_engine *e)
{
	for (int i = 0; i < SB_MAX_JOBS; i++) {
		if (!self->jobs[i].active)
			continue;
		sb_job_progress p;
		if (sb_engine_progress(e, self->jobs[i].id, &p) != SB_OK)
			continue;
		int state = p.state == SB_JOB_QUEUED ? SB_STATE_QUEUED
		          : p.state <= SB_JOB_WRITING ? SB_STATE_SEPARATING
		          : p.state == SB_JOB_DONE ? SB_STATE_DONE : SB_STATE_ERROR;
		/* a take run again after the host stopped says so while it runs */
		if (self->jobs[i].resumed && (state == SB_STATE_QUEUED || state == SB_STATE_SEPARATING))
			state = SB_STATE_RESUMED;
		self->nrt_take = self->jobs[i].take_no;
		self->nrt_ahead = 0;
		/* one device: its port value and name; several sharing the take: All devices, and
		 * their names */
		const int dev = p.n_devices > 1 ? SB_DEVICE_ALL : sb_device_port_of_key(self, p.device_key);
		if (p.device_id[0] && (state != self->jobs[i].last_state ||
		                       p.n_devices != self->jobs[i].last_n_devices)) {
			self->nrt_dev = dev;
			self->nrt_fallback = p.fell_back;
			char names[SB_TEXT];
			devices_text(&p, false, names, sizeof names);
			char text[SB_TEXT + 16];
			snprintf(text, sizeof text, "%s%s", names, p.fell_back ? " (fallback)" : "");
			snprintf(self->nrt_dev_label, sizeof self->nrt_dev_label, "%s", names);
			self->jobs[i].last_n_devices = p.n_devices;
			sb_service_post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		if (state == SB_STATE_QUEUED || state == SB_STATE_SEPARATING ||
		    state == SB_STATE_RESUMED) {
			/* the state speaks of this instance's first take still running: a take queued
			 * behind it is said once that one ends */
			bool behind = false;
			for (int k = 0; k < SB_MAX_JOBS; k++)
				behind = behind || (k != i && self->jobs[k].active &&
				                    self->jobs[k].id < self->jobs[i].id);
			if (behind && p.state == SB_JOB_QUEUED)
				continue;
			const float eta = p.eta_s >= 0 ? (float)p.eta_s : -1.0f;
			const int ahead = p.state == SB_JOB_QUEUED ? sb_service_jobs_before(self->jobs[i].id)
			                                           : 0;
			if (state != self->jobs[i].last_state || ahead != self->jobs[i].last_ahead ||
			    p.fraction - self->jobs[i].last_progress >= 0.01 ||
			    fabsf(eta - self->jobs[i].last_eta) >= 1.0f) {
				self->nrt_ahead = ahead;
				self->jobs[i].last_ahead = ahead;
				self->nrt_state = state;
				self->nrt_progress = (float)p.fraction;
				self->nrt_time_left = eta;
				self->jobs[i].last_state = state;
				self->jobs[i].last_progress = (float)p.fraction;
				self->jobs[i].last_eta = eta;
				sb_service_post(self, SB_MSG_STATUS, NULL);
			}
			continue;
		}
		/* Finished only when its result can be read: the runner reports "done" in its
		 * progress a moment before the engine has closed the job. */
		sb_job_result *r = calloc(1, sizeof *r);
		if (!r)
			continue;
		if (sb_engine_result(e, self->jobs[i].id, r) != SB_OK) {
			free(r);
			continue;
		}
		self->jobs[i].active = false;
		/* the device the job ended on, with the reason in words when it was a fallback */
		if (r->fallback_reason[0]) {
			char text[SB_TEXT + 528];
			snprintf(text, sizeof text, "%s (fallback: %s)", self->nrt_dev_label,
			         r->fallback_reason);
			self->nrt_fallback = 1;
			sb_service_post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		/* a take several devices shared: each one's part, in words */
		if (r->status == SB_OK && p.n_devices > 1 && !r->fallback_reason[0]) {
			char text[SB_TEXT];
			devices_text(&p, true, text, sizeof text);
			sb_service_post(self, SB_MSG_DEVICE_IN_USE, text);
		}
		if (r->status == SB_OK) {
			/* the stems are committed: the take's journal goes, and its recording unless the
			 * user keeps it, before anyone hears that the stems are ready */
			const bool keep = self->jobs[i].keep_audio || atomic_load(&self->keep_take) == 1;
			sb_take_done(&self->jobs[i].files, keep);
			if (self->jobs[i].resumed)
				lv2_log_note(&self->logger, "stembridge: resumed take %s: stems complete\n",
				             strrchr(self->jobs[i].dir, '/') + 1);
			self->jobs_done++;
			self->nrt_state = SB_STATE_DONE;
			self->nrt_progress = 1.0f;
			self->nrt_time_left = 0.0f;
			pthread_mutex_lock(&self->nrt_lock);
			snprintf(self->nrt_manifest, sizeof self->nrt_manifest, "%s", r->manifest_path);
			pthread_mutex_unlock(&self->nrt_lock);
			char paths[SB_PLUGIN_STEMS][SB_TEXT];
			memset(paths, 0, sizeof paths);
			if (stems_of(r, paths) == 0)
				lv2_log_warning(&self->logger, "stembridge: no stems in the result of %s\n",
				                r->manifest_path);
			sb_audition_load(self, self->jobs[i].start, self->jobs[i].frames, paths, r);
			char list[SB_TEXT] = "";
			for (int s = 0, at = 0; s < SB_PLUGIN_STEMS; s++) {
				if (!paths[s][0])
					continue;
				int w = snprintf(list + at, sizeof list - (size_t)at, "%s\n", paths[s]);
				if (w < 0 || (size_t)w >= sizeof list - (size_t)at) {
					list[at] = '\0';
					break;
				}
				at += w;
			}
			sb_service_post(self, SB_MSG_STEMS, list);
			/* The manifest message carries the region so the UI can place it. */
			sb_msg mm;
			memset(&mm, 0, offsetof(sb_msg, text));
			mm.kind = SB_MSG_MANIFEST;
			mm.state = self->nrt_state;
			mm.progress = 1.0f;
			mm.device = self->nrt_dev;
			mm.fallback = self->nrt_fallback;
			mm.jobs_done = self->jobs_done;
			mm.take = self->nrt_take;
			mm.start = self->jobs[i].start;
			mm.frames = self->jobs[i].frames;
			snprintf(mm.text, sizeof mm.text, "%s", r->manifest_path);
			sb_ring_push(&self->status, &mm);
			lv2_log_note(&self->logger, "stembridge: stems ready: %s\n", r->manifest_path);
		} else {
			self->nrt_state = SB_STATE_ERROR;
			/* the engine removed its temporary files; the take's recording stays, its
			 * journal marked failed, and the message says where; a take that never reached
			 * the disk leaves no folder */
			char text[SB_TEXT];
			sb_take_failed_text(self, &self->jobs[i].files, self->jobs[i].dir,
			                    self->jobs[i].made_root, r->message, text, sizeof text);
			lv2_log_error(&self->logger, "stembridge: job failed: %s\n", text);
			sb_service_post(self, SB_MSG_ERROR, text);
		}
		sb_engine_release(e, self->jobs[i].id); /* and the result's strings with it */
		free(r);
	}
}
