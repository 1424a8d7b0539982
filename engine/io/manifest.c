/* The job manifest (manifest.h). */
#include "io/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


void sb_manifest_stems_txt_path(const char *manifest_path, char *out, size_t len)
{
	const char *suffix = "manifest.json";
	size_t n = strlen(manifest_path), k = strlen(suffix);
	if (n >= k && !strcmp(manifest_path + n - k, suffix))
		snprintf(out, len, "%.*sstems.txt", (int)(n - k), manifest_path);
	else
		snprintf(out, len, "%s.stems.txt", manifest_path);
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

void sb_manifest_input_path(const char *p, char *out, size_t len)
{
	char *r = realpath(p, NULL);
	char cwd[PATH_MAX];
	if (r)
		snprintf(out, len, "%s", r);
	else if (p[0] != '/' && getcwd(cwd, sizeof cwd) && strlen(cwd) + 1 < len) {
		const size_t cl = strlen(cwd);
		memcpy(out, cwd, cl);
		out[cl] = '/';
		snprintf(out + cl + 1, len - cl - 1, "%s", p);
	} else
		snprintf(out, len, "%s", p);
	free(r);
}

sb_status sb_manifest_render(const sb_manifest *m, char **json, char **stems_txt)
{
	*json = NULL;
	if (stems_txt)
		*stems_txt = NULL;
	json_t *root = json_object();
	if (!root)
		return SB_ERR_NOMEM;
	json_object_set_new(root, "stembridge", json_string("0.1.0"));
	json_object_set_new(root, "manifest_version", json_integer(1));
	json_object_set_new(root, "status", json_string(m->status ? m->status : "ok"));
	json_object_set_new(root, "error", str_or_null(m->error));

	char ap[PATH_MAX];
	json_t *in = json_object();
	if (m->input_path) {
		sb_manifest_input_path(m->input_path, ap, sizeof ap);
		json_object_set_new(in, "path", json_string(ap));
	} else {
		json_object_set_new(in, "path", json_null());
	}
	json_object_set_new(in, "size", m->input_size >= 0 ? json_integer(m->input_size) : json_null());
	json_object_set_new(in, "mtime_ns",
	                    m->input_mtime_ns >= 0 ? json_integer(m->input_mtime_ns) : json_null());
	json_object_set_new(in, "frames", json_integer(m->frames));
	json_object_set_new(in, "channels", json_integer(m->channels));
	json_object_set_new(in, "rate", json_real(m->rate));
	json_object_set_new(in, "seconds", json_real(m->rate > 0 ? m->frames / m->rate : 0));
	json_object_set_new(in, "format", str_or_null(m->input_format));
	json_object_set_new(in, "peak_dbfs",
	                    m->input_peak > 0 ? json_real(20 * log10(m->input_peak)) : json_null());
	json_object_set_new(in, "silent", json_boolean(m->input_silent));
	json_object_set_new(root, "input", in);
	json_object_set_new(root, "timeline_start",
	                    m->timeline_start >= 0 ? json_integer(m->timeline_start) : json_null());
	json_object_set_new(root, "track", str_or_null(m->track));
	json_object_set_new(root, "take", str_or_null(m->take));

	json_t *model = json_object();
	json_object_set_new(model, "name", str_or_null(m->model));
	json_object_set_new(model, "requested", str_or_null(m->model_requested));
	json_object_set_new(model, "description", str_or_null(m->model_description));
	json_object_set_new(model, "shifts", json_integer(m->shifts));
	json_object_set_new(model, "overlap", m->overlap > 0 ? json_real(m->overlap) : json_null());
	json_object_set_new(root, "model", model);

	json_t *dev = json_object();
	json_object_set_new(dev, "requested", str_or_null(m->device_requested));
	json_object_set_new(dev, "used", str_or_null(m->device_used_key));
	json_object_set_new(dev, "used_id", str_or_null(m->device_used_id));
	json_object_set_new(dev, "used_name", str_or_null(m->device_used_name));
	json_object_set_new(dev, "fell_back", json_boolean(m->fell_back));
	json_object_set_new(dev, "reason",
	                    m->fallback_reason && *m->fallback_reason ? json_string(m->fallback_reason)
	                                                              : json_null());
	if (m->n_devices > 0) {
		json_t *per = json_array();
		for (int i = 0; i < m->n_devices; i++) {
			const sb_manifest_device *d = &m->devices[i];
			json_t *o = json_object();
			json_object_set_new(o, "id", str_or_null(d->id));
			json_object_set_new(o, "key", str_or_null(d->key));
			json_object_set_new(o, "name", str_or_null(d->name));
			json_object_set_new(o, "segments", json_integer(d->segments));
			json_object_set_new(o, "seconds", json_real(d->seconds));
			json_object_set_new(o, "dropped", json_boolean(d->dropped));
			json_array_append_new(per, o);
		}
		json_object_set_new(dev, "devices", per);
	}
	json_object_set_new(root, "device", dev);

	json_t *prec = json_object();
	json_object_set_new(prec, "requested", str_or_null(m->precision_requested));
	json_object_set_new(prec, "used", str_or_null(m->precision));
	json_object_set_new(prec, "products", str_or_null(m->products));
	json_object_set_new(root, "precision", prec);

	json_t *ev = json_array();
	for (int i = 0; i < m->n_events; i++)
		json_array_append_new(ev, json_string(m->events[i]));
	json_object_set_new(root, "events", ev);

	json_t *stems = json_array();
	size_t txt_cap = 256;
	int n_stems = m->stems ? sb_stem_writer_count(m->stems) : 0;
	for (int i = 0; i < n_stems; i++) {
		sb_stem_info si;
		sb_stem_writer_info(m->stems, i, &si);
		sb_stem_writer_abs_path(si.path, ap, sizeof ap);
		txt_cap += strlen(ap) + 2;
		json_t *s = json_object();
		json_object_set_new(s, "stem", json_string(si.name));
		json_object_set_new(s, "model", json_string(m->stem_model && si.stem >= 0 &&
		                                            si.stem < SB_MAX_STEMS && m->stem_model[si.stem]
		                                            ? m->stem_model[si.stem] : m->model));
		json_object_set_new(s, "path", json_string(ap));
		json_object_set_new(s, "frames", json_integer(si.frames));
		json_object_set_new(s, "peak", json_real(si.peak));
		json_object_set_new(s, "rms", json_real(si.rms));
		json_object_set_new(s, "peak_dbfs",
		                    si.peak > 0 ? json_real(20 * log10(si.peak)) : json_null());
		json_array_append_new(stems, s);
	}
	json_object_set_new(root, "stems", stems);

	json_t *t = json_object();
	json_object_set_new(t, "load_s", json_real(m->load_s));
	json_object_set_new(t, "separate_s", json_real(m->separate_s));
	json_object_set_new(t, "write_s", json_real(m->write_s));
	json_object_set_new(t, "total_s", json_real(m->total_s));
	double secs = m->rate > 0 ? m->frames / m->rate : 0;
	json_object_set_new(t, "realtime_factor",
	                    m->total_s > 0 ? json_real(secs / m->total_s) : json_null());
	json_object_set_new(root, "timings", t);

	char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return SB_ERR_NOMEM;
	size_t tl = strlen(text);
	char *nl = realloc(text, tl + 2);
	if (!nl) {
		free(text);
		return SB_ERR_NOMEM;
	}
	text = nl;
	memcpy(text + tl, "\n", 2);
	if (!m->stems || !stems_txt) {
		*json = text;
		return SB_OK;
	}
	char *txt = malloc(txt_cap);
	if (!txt) {
		free(text);
		return SB_ERR_NOMEM;
	}
	size_t at = 0;
	txt[0] = '\0';
	if (m->timeline_start >= 0) /* unknown: no line, the importer places at the playhead */
		at = (size_t)snprintf(txt, txt_cap, "timeline_start %lld\n",
		                      (long long)m->timeline_start);
	for (int i = 0; i < n_stems; i++) {
		sb_stem_info si;
		sb_stem_writer_info(m->stems, i, &si);
		sb_stem_writer_abs_path(si.path, ap, sizeof ap);
		at += (size_t)snprintf(txt + at, txt_cap - at, "%s\n", ap);
	}
	*json = text;
	*stems_txt = txt;
	return SB_OK;
}
