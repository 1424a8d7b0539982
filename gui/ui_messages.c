/* The plugin's messages into the window's model. See ui_messages.h. */
#include "ui_messages.h"

#include "../plugin/uris.h"

#include <lv2/atom/util.h>
#include <lv2/patch/patch.h>

#include <stdio.h>
#include <string.h>

void sbui_uris_map(sbui_uris* u, LV2_URID_Map* map)
{
#define M(f, uri) u->f = map->map(map->handle, uri)
	M(atom_eventTransfer, LV2_ATOM__eventTransfer);
	M(atom_Object, LV2_ATOM__Object);
	M(atom_Tuple, LV2_ATOM__Tuple);
	M(atom_String, LV2_ATOM__String);
	M(atom_Path, LV2_ATOM__Path);
	M(atom_Long, LV2_ATOM__Long);
	M(atom_Int, LV2_ATOM__Int);
	M(atom_Float, LV2_ATOM__Float);
	M(atom_URID, LV2_ATOM__URID);
	M(atom_Vector, LV2_ATOM__Vector);
	M(patch_Set, LV2_PATCH__Set);
	M(patch_Get, LV2_PATCH__Get);
	M(patch_Put, LV2_PATCH__Put);
	M(patch_body, LV2_PATCH__body);
	M(patch_property, LV2_PATCH__property);
	M(patch_value, LV2_PATCH__value);
	M(device_list, SB__deviceList);
	M(device_in_use, SB__deviceInUse);
	M(stems, SB__stems);
	M(last_error, SB__lastError);
	M(manifest, SB__manifest);
	M(recorded_frames, SB__recordedFrames);
	M(timeline_start, SB__timelineStart);
	M(dev_key, SB__deviceKey);
	M(dev_name, SB__deviceName);
	M(dev_platform, SB__devicePlatform);
	M(dev_type, SB__deviceType);
	M(dev_memory, SB__deviceMemory);
	M(dev_units, SB__deviceUnits);
	M(dev_driver, SB__deviceDriver);
	M(model_list, SB__modelList);
	M(install_model, SB__installModel);
	M(install_status, SB__installStatus);
	M(ui_scale, SB__uiScale);
	M(model_notice, SB__modelNotice);
	M(job_take, SB__jobTake);
	M(queue_ahead, SB__queueAhead);
	M(take_wave, SB__takeWave);
	M(take_wave_frames, SB__takeWaveFrames);
	M(take_start, SB__takeStart);
	M(take_frames, SB__takeFrames);
	M(stem_views, SB__stemViews);
	M(stem_index, SB__stemIndex);
	M(stem_peak, SB__stemPeak);
	M(stem_rms, SB__stemRms);
	M(stem_wave, SB__stemWave);
#undef M
}

static bool is_text(const sbui_uris* u, const LV2_Atom* a)
{
	return a && (a->type == u->atom_String || a->type == u->atom_Path);
}

/* atom strings are NUL-terminated inside their size; do not trust it blindly */
static void copy_text_n(char* dst, int cap, const LV2_Atom* a)
{
	const char* s = (const char*)LV2_ATOM_BODY_CONST(a);
	sbui_set_text_n(dst, cap, s, (int)strnlen(s, a->size));
}

static int64_t atom_number(const sbui_uris* u, const LV2_Atom* a, int64_t fallback)
{
	if (!a)
		return fallback;
	if (a->type == u->atom_Long)
		return ((const LV2_Atom_Long*)a)->body;
	if (a->type == u->atom_Int)
		return ((const LV2_Atom_Int*)a)->body;
	if (a->type == u->atom_Float)
		return (int64_t)((const LV2_Atom_Float*)a)->body;
	return fallback;
}

/* The floats of an atom:Vector of atom:Float, at most cap of them; -1 for anything else. */
static int vector_floats(const sbui_uris* u, const LV2_Atom* a, float* out, int cap)
{
	if (!a || a->type != u->atom_Vector || a->size < sizeof(LV2_Atom_Vector_Body))
		return -1;
	const LV2_Atom_Vector* v = (const LV2_Atom_Vector*)a;
	if (v->body.child_type != u->atom_Float || v->body.child_size != sizeof(float))
		return -1;
	int n = (int)((a->size - sizeof v->body) / sizeof(float));
	if (n > cap)
		n = cap;
	memcpy(out, v + 1, (size_t)n * sizeof(float));
	return n;
}

static void read_device(const sbui_uris* u, sbui_model* m, const LV2_Atom_Object* obj)
{
	const LV2_Atom *key = NULL, *name = NULL, *platform = NULL, *type = NULL, *memory = NULL,
	               *units = NULL, *driver = NULL;
	lv2_atom_object_get(obj, u->dev_key, &key, u->dev_name, &name, u->dev_platform, &platform,
	                    u->dev_type, &type, u->dev_memory, &memory, u->dev_units, &units,
	                    u->dev_driver, &driver, 0);
	sbui_device d;
	memset(&d, 0, sizeof d);
	if (is_text(u, key)) copy_text_n(d.key, SBUI_TEXT, key);
	if (is_text(u, name)) copy_text_n(d.name, SBUI_TEXT, name);
	if (is_text(u, platform)) copy_text_n(d.platform, SBUI_TEXT, platform);
	if (is_text(u, type)) copy_text_n(d.type, SBUI_TEXT, type);
	if (is_text(u, driver)) copy_text_n(d.driver, SBUI_TEXT, driver);
	d.memory_bytes = atom_number(u, memory, -1);
	d.compute_units = (int)atom_number(u, units, -1);
	sbui_add_device(m, &d);
}

static void read_stem_view(const sbui_uris* u, sbui_model* m, const LV2_Atom_Object* obj)
{
	const LV2_Atom *idx = NULL, *peak = NULL, *rms = NULL, *wave = NULL;
	lv2_atom_object_get(obj, u->stem_index, &idx, u->stem_peak, &peak, u->stem_rms, &rms,
	                    u->stem_wave, &wave, 0);
	const int s = (int)atom_number(u, idx, -1);
	if (s < 0 || s >= SBUI_STEM_KINDS || !peak || peak->type != u->atom_Float || !rms ||
	    rms->type != u->atom_Float)
		return;
	sbui_stem_view* v = &m->views[s];
	const int n = vector_floats(u, wave, v->lohi, 2 * SBUI_VIEW_COLS);
	if (n < 0)
		return;
	v->cols = n / 2;
	v->peak = ((const LV2_Atom_Float*)peak)->body;
	v->rms = ((const LV2_Atom_Float*)rms)->body;
	v->valid = true;
}

/* One property the plugin announced: a patch:Set's (writable properties) or one key of a
 * patch:Put's body (read-only ones). */
static void on_property(const sbui_uris* u, sbui_model* m, LV2_URID key, const LV2_Atom* value)
{
	if (key == u->device_list && value->type == u->atom_Tuple) {
		sbui_clear_devices(m);
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple*)value, it)
			if (it->type == u->atom_Object)
				read_device(u, m, (const LV2_Atom_Object*)it);
	} else if (key == u->stems && value->type == u->atom_Tuple) {
		sbui_clear_stems(m);
		/* new stems: their pictures come with the audition (stemViews) */
		for (int s = 0; s < SBUI_STEM_KINDS; s++)
			m->views[s].valid = false;
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple*)value, it)
			if (is_text(u, it)) {
				char path[SBUI_TEXT];
				copy_text_n(path, SBUI_TEXT, it);
				sbui_add_stem(m, path);
			}
	} else if (key == u->stem_views && value->type == u->atom_Tuple) {
		LV2_ATOM_TUPLE_FOREACH ((const LV2_Atom_Tuple*)value, it)
			if (it->type == u->atom_Object)
				read_stem_view(u, m, (const LV2_Atom_Object*)it);
	} else if (key == u->take_wave) {
		const int n = vector_floats(u, value, m->lane.lohi, 2 * SBUI_LANE_COLS);
		if (n >= 0) {
			m->lane.cols = n / 2;
			m->lane.valid = true;
		}
	} else if (key == u->take_wave_frames) {
		m->lane.per_col = (int)atom_number(u, value, m->lane.per_col);
	} else if (key == u->take_start) {
		m->lane.start = atom_number(u, value, m->lane.start);
	} else if (key == u->take_frames) {
		m->lane.frames = atom_number(u, value, m->lane.frames);
	} else if (key == u->device_in_use && is_text(u, value)) {
		copy_text_n(m->device_in_use, SBUI_TEXT, value);
	} else if (key == u->last_error && is_text(u, value)) {
		copy_text_n(m->last_error, SBUI_LONG_TEXT, value);
	} else if (key == u->model_notice && is_text(u, value)) {
		copy_text_n(m->model_notice, SBUI_LONG_TEXT, value);
	} else if (key == u->manifest && is_text(u, value)) {
		copy_text_n(m->manifest, SBUI_TEXT, value);
	} else if (key == u->recorded_frames) {
		/* with the manifest: the stems' region; while recording: the take's length */
		m->recorded_frames = atom_number(u, value, m->recorded_frames);
		if (sbui_model_stage(m) != SBUI_RECORDING)
			m->stems_frames = m->recorded_frames;
	} else if (key == u->timeline_start) {
		m->stems_start = atom_number(u, value, m->stems_start);
	} else if (key == u->job_take) {
		m->job_take = (int)atom_number(u, value, 0);
	} else if (key == u->queue_ahead) {
		m->queue_ahead = (int)atom_number(u, value, 0);
	} else if (key == u->ui_scale && value->type == u->atom_Float) {
		m->ui_scale = ((const LV2_Atom_Float*)value)->body;
	} else if (key == u->model_list && is_text(u, value)) {
		char text[4096];
		const char* b = (const char*)LV2_ATOM_BODY_CONST(value);
		snprintf(text, sizeof text, "%.*s", (int)strnlen(b, value->size), b);
		sbui_set_model_list(m, text);
	} else if (key == u->install_status && is_text(u, value)) {
		char text[SBUI_TEXT + 16];
		const char* b = (const char*)LV2_ATOM_BODY_CONST(value);
		snprintf(text, sizeof text, "%.*s", (int)strnlen(b, value->size), b);
		sbui_set_install_status(m, text);
	}
}

void sbui_message_read(const sbui_uris* u, sbui_model* m, const LV2_Atom_Object* obj)
{
	if (obj->body.otype == u->patch_Set) {
		const LV2_Atom *prop = NULL, *value = NULL;
		lv2_atom_object_get(obj, u->patch_property, &prop, u->patch_value, &value, 0);
		if (prop && prop->type == u->atom_URID && value)
			on_property(u, m, ((const LV2_Atom_URID*)prop)->body, value);
	} else if (obj->body.otype == u->patch_Put) {
		const LV2_Atom* body = NULL;
		lv2_atom_object_get(obj, u->patch_body, &body, 0);
		if (body && body->type == u->atom_Object)
			LV2_ATOM_OBJECT_FOREACH ((const LV2_Atom_Object*)body, p)
				on_property(u, m, p->key, &p->value);
	}
}
