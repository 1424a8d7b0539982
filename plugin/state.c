/* state:interface. save() may run while run() runs on another thread: properties are read
 * through the sequence lock and the rest under nrt_lock, which run() never takes. restore()
 * accepts missing, mistyped or out-of-range values: each is ignored with a log line.
 *
 * The output folder and the model file are paths, stored abstract through mapPath (lilv links a
 * model file outside the session into the state folder rather than copying it).
 * The last manifest is stored as a plain string, not a path: lilv copies every scratch file a
 * state refers to into the session on each save (../shared/HOSTS.md).
 */
#include "instance.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void free_path(const LV2_State_Free_Path *fp, char *p)
{
	if (fp)
		fp->free_path(fp->handle, p);
	else
		free(p);
}

static LV2_State_Status store_text(LV2_State_Store_Function store, LV2_State_Handle h,
                                   LV2_URID key, LV2_URID type, const char *s)
{
	return store(h, key, s, strlen(s) + 1, type, LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE);
}

/* The path features save() and restore() are given (either may be absent). */
static void path_features(const LV2_Feature *const *features, LV2_State_Map_Path **map_path,
                          LV2_State_Free_Path **fp)
{
	for (int i = 0; features && features[i]; i++) {
		if (!strcmp(features[i]->URI, LV2_STATE__mapPath))
			*map_path = features[i]->data;
		else if (!strcmp(features[i]->URI, LV2_STATE__freePath))
			*fp = features[i]->data;
	}
}

static LV2_State_Status save(LV2_Handle instance, LV2_State_Store_Function store,
                             LV2_State_Handle handle, uint32_t flags,
                             const LV2_Feature *const *features)
{
	(void)flags;
	sb_instance *self = instance;
	const sb_urids *u = &self->u;
	LV2_State_Map_Path *map_path = NULL;
	LV2_State_Free_Path *fp = NULL;
	path_features(features, &map_path, &fp);

	sb_props pr;
	sb_props_read(self, &pr);
	const int port = self->ctl[SB_PORT_DEVICE] ? (int)lrintf(*self->ctl[SB_PORT_DEVICE]) : 0;
	const int mode = self->ctl[SB_PORT_MODE] ? (int)lrintf(*self->ctl[SB_PORT_MODE]) : 0;
	const int model = self->ctl[SB_PORT_MODEL] ? (int)lrintf(*self->ctl[SB_PORT_MODEL])
	                                            : SB_MODEL_AUTO;
	int stems = 0;
	for (int s = 0; s < 4; s++)
		if (!self->ctl[SB_PORT_STEM_VOCALS + s] || *self->ctl[SB_PORT_STEM_VOCALS + s] > 0.5f)
			stems |= 1 << s;
	for (int s = 0; s < 2; s++)
		if (!self->ctl_stem_extra[s] || *self->ctl_stem_extra[s] > 0.5f)
			stems |= 1 << (4 + s);

	char key[640], name[256], manifest[SB_TEXT], id[16];
	int saved_port;
	int32_t last_take;
	pthread_mutex_lock(&self->nrt_lock);
	snprintf(key, sizeof key, "%s", self->nrt_device_key);
	snprintf(name, sizeof name, "%s", self->nrt_device_name);
	snprintf(manifest, sizeof manifest, "%s", self->nrt_manifest);
	snprintf(id, sizeof id, "%s", self->nrt_id);
	last_take = (int32_t)self->nrt_last_take;
	saved_port = self->nrt_device_port;
	pthread_mutex_unlock(&self->nrt_lock);
	/* A restored key stands until the user picks another device. */
	if (!key[0] || saved_port != port) {
		sb_service_device_key(self, port, key, sizeof key, name, sizeof name);
		pthread_mutex_lock(&self->nrt_lock);
		snprintf(self->nrt_device_key, sizeof self->nrt_device_key, "%s", key);
		snprintf(self->nrt_device_name, sizeof self->nrt_device_name, "%s", name);
		self->nrt_device_port = port;
		pthread_mutex_unlock(&self->nrt_lock);
	}

	store_text(store, handle, u->sb_deviceKey, u->atom_String, key);
	store_text(store, handle, u->sb_deviceName, u->atom_String, name);
	store_text(store, handle, u->sb_instanceId, u->atom_String, id);
	const int precision = self->ctl_precision && *self->ctl_precision > 0.5f;
	const int keep_take = self->ctl_keep_take && *self->ctl_keep_take > 0.5f;
	const int32_t ints[7] = {port, mode, model, stems, last_take, precision, keep_take};
	const LV2_URID int_keys[7] = {u->sb_devicePort, u->sb_mode, u->sb_model, u->sb_stemMask,
	                              u->sb_lastTake, u->sb_precision, u->sb_keepTake};
	for (int i = 0; i < 7; i++)
		store(handle, int_keys[i], &ints[i], sizeof(int32_t), u->atom_Int,
		      LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE);
	store(handle, u->sb_maxMinutes, &pr.max_minutes, sizeof(float), u->atom_Float,
	      LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE);
	/* the UI's own zoom, once someone chose one */
	if (pr.ui_scale > 0.0f)
		store(handle, u->sb_uiScale, &pr.ui_scale, sizeof(float), u->atom_Float,
		      LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE);
	if (pr.track[0])
		store_text(store, handle, u->sb_trackName, u->atom_String, pr.track);
	if (manifest[0])
		store_text(store, handle, u->sb_manifest, u->atom_String, manifest);
	if (pr.output_dir[0]) {
		char *abs = map_path ? map_path->abstract_path(map_path->handle, pr.output_dir) : NULL;
		store_text(store, handle, u->sb_outputDir, u->atom_Path, abs ? abs : pr.output_dir);
		if (abs)
			free_path(fp, abs);
	}
	if (pr.model_file[0]) {
		char *abs = map_path ? map_path->abstract_path(map_path->handle, pr.model_file) : NULL;
		store_text(store, handle, u->sb_modelFile, u->atom_Path, abs ? abs : pr.model_file);
		if (abs)
			free_path(fp, abs);
	}
	return LV2_STATE_SUCCESS;
}

/* A string of the expected type that fits, copied NUL-terminated into buf, or NULL (logged).
 * The spec counts the terminating NUL in size; Carla 2.5 does not (it returns strlen), so a
 * value without one is taken as exactly size bytes. A NUL inside the value is damage. */
static const char *get_text(sb_instance *self, LV2_State_Retrieve_Function retrieve,
                            LV2_State_Handle h, LV2_URID key, LV2_URID type, char *buf,
                            size_t cap, const char *what)
{
	size_t size = 0;
	uint32_t t = 0, fl = 0;
	const char *v = retrieve(h, key, &size, &t, &fl);
	if (!v)
		return NULL;
	const char *nul = (t == type && size > 0) ? memchr(v, '\0', size) : NULL;
	if (t != type || size == 0 || size >= cap || (nul && nul != v + size - 1)) {
		lv2_log_warning(&self->logger, "stembridge: ignoring a damaged saved %s\n", what);
		return NULL;
	}
	memcpy(buf, v, size);
	buf[size] = '\0';
	return buf;
}

static bool get_int(sb_instance *self, LV2_State_Retrieve_Function retrieve, LV2_State_Handle h,
                    LV2_URID key, int lo, int hi, int *out, const char *what)
{
	size_t size = 0;
	uint32_t t = 0, fl = 0;
	const void *v = retrieve(h, key, &size, &t, &fl);
	if (!v)
		return false;
	int32_t x;
	if (t != self->u.atom_Int || size != sizeof x) {
		lv2_log_warning(&self->logger, "stembridge: ignoring a damaged saved %s\n", what);
		return false;
	}
	memcpy(&x, v, sizeof x);
	if (x < lo || x > hi) {
		lv2_log_warning(&self->logger, "stembridge: ignoring saved %s %d (out of range)\n",
		                what, (int)x);
		return false;
	}
	*out = x;
	return true;
}


static LV2_State_Status restore(LV2_Handle instance, LV2_State_Retrieve_Function retrieve,
                                LV2_State_Handle handle, uint32_t flags,
                                const LV2_Feature *const *features)
{
	(void)flags;
	sb_instance *self = instance;
	const sb_urids *u = &self->u;
	LV2_State_Map_Path *map_path = NULL;
	LV2_State_Free_Path *fp = NULL;
	path_features(features, &map_path, &fp);

	/* restore() is never concurrent with run(), but the service reads props. */
	sb_props pr;
	sb_props_read(self, &pr);

	size_t size = 0;
	uint32_t t = 0, fl = 0;
	const void *v = retrieve(handle, u->sb_maxMinutes, &size, &t, &fl);
	if (v) {
		float m;
		if (t == u->atom_Float && size == sizeof m) {
			memcpy(&m, v, sizeof m);
			if (m >= 0.1f && m <= 240.0f)
				pr.max_minutes = m;
			else
				lv2_log_warning(&self->logger, "stembridge: ignoring saved maxMinutes %g\n", m);
		} else {
			lv2_log_warning(&self->logger, "stembridge: ignoring a damaged saved maxMinutes\n");
		}
	}
	pr.ui_scale = 0.0f;
	v = retrieve(handle, u->sb_uiScale, &size, &t, &fl);
	if (v) {
		float z;
		if (t == u->atom_Float && size == sizeof z)
			memcpy(&z, v, sizeof z);
		if (t == u->atom_Float && size == sizeof z && z >= SB_UI_SCALE_MIN && z <= SB_UI_SCALE_MAX)
			pr.ui_scale = z;
		else
			lv2_log_warning(&self->logger, "stembridge: ignoring a damaged saved uiScale\n");
	}
	static_assert(sizeof pr.output_dir >= sizeof pr.track, "text buffer");
	char text[sizeof pr.output_dir];
	const char *s = get_text(self, retrieve, handle, u->sb_trackName, u->atom_String, text,
	                         sizeof pr.track, "track name");
	if (s)
		snprintf(pr.track, sizeof pr.track, "%s", s);
	s = get_text(self, retrieve, handle, u->sb_outputDir, u->atom_Path, text, sizeof text,
	             "output folder");
	if (s) {
		char *abs = map_path ? map_path->absolute_path(map_path->handle, s) : NULL;
		const char *p = abs ? abs : s;
		if (p[0] == '/' && strlen(p) < sizeof pr.output_dir)
			snprintf(pr.output_dir, sizeof pr.output_dir, "%s", p);
		else
			lv2_log_warning(&self->logger, "stembridge: ignoring saved output folder '%s'\n", p);
		if (abs)
			free_path(fp, abs);
	}
	/* The model file is kept when it is missing here (a drive not mounted yet): the job that
	 * needs it says so. A value the engine could not open by its path is damage. */
	s = get_text(self, retrieve, handle, u->sb_modelFile, u->atom_Path, text, sizeof text,
	             "model file");
	if (s) {
		char *abs = map_path ? map_path->absolute_path(map_path->handle, s) : NULL;
		const char *p = abs ? abs : s;
		if (sb_model_file_valid(p, strlen(p))) {
			snprintf(pr.model_file, sizeof pr.model_file, "%s", p);
			if (p[0] && access(p, R_OK) != 0)
				lv2_log_warning(&self->logger, "stembridge: saved model file %s: %s (kept)\n",
				                p, strerror(errno));
		} else {
			lv2_log_warning(&self->logger, "stembridge: ignoring saved model file '%s' (not an "
			                "absolute path to a .safetensors file)\n", p);
		}
		if (abs)
			free_path(fp, abs);
	}
	sb_props_write_begin(self);
	self->props = pr;
	sb_props_write_end(self);

	char key_buf[640], name_buf[256], manifest_buf[SB_TEXT];
	const char *key = get_text(self, retrieve, handle, u->sb_deviceKey, u->atom_String, key_buf,
	                           sizeof key_buf, "device key");
	const char *name = get_text(self, retrieve, handle, u->sb_deviceName, u->atom_String,
	                            name_buf, sizeof name_buf, "device name");
	const char *manifest = get_text(self, retrieve, handle, u->sb_manifest, u->atom_String,
	                                manifest_buf, sizeof manifest_buf, "manifest");
	int port = -1, dummy;
	get_int(self, retrieve, handle, u->sb_devicePort, 0, SB_DEVICE_MAX,
	        &port, "device port");
	/* Mode, model, stems, precision and keeping takes live in the host's port values; these are
	 * checked for damage only, so a bad one is reported rather than silently carried. */
	get_int(self, retrieve, handle, u->sb_mode, 0, 1, &dummy, "mode");
	get_int(self, retrieve, handle, u->sb_model, 0, SB_N_MODEL_CHOICES - 1, &dummy, "model");
	get_int(self, retrieve, handle, u->sb_stemMask, 0, (1 << SB_PLUGIN_STEMS) - 1, &dummy,
	        "stem mask");
	get_int(self, retrieve, handle, u->sb_precision, SB_PRECISION_FP32, SB_PRECISION_BF16,
	        &dummy, "precision");
	get_int(self, retrieve, handle, u->sb_keepTake, 0, 1, &dummy, "keep take audio");
	int last_take = -1;
	get_int(self, retrieve, handle, u->sb_lastTake, 0, 9999999, &last_take, "take number");
	char id_buf[64];
	const char *id = get_text(self, retrieve, handle, u->sb_instanceId, u->atom_String, id_buf,
	                          sizeof id_buf, "instance id");
	if (id && (strlen(id) != 6 || strspn(id, "0123456789abcdef") != 6)) {
		lv2_log_warning(&self->logger, "stembridge: ignoring saved instance id '%s'\n", id);
		id = NULL;
	}
	if (key && !sb_device_key_valid(key)) {
		lv2_log_warning(&self->logger, "stembridge: ignoring unknown saved device '%s'\n", key);
		key = NULL;
	}

	/* A state replaces the one before: without a usable key (a preset of port values only, or
	 * damage) the device port alone says which device, as it does for a new instance. */
	pthread_mutex_lock(&self->nrt_lock);
	if (key && port >= 0) {
		snprintf(self->nrt_device_key, sizeof self->nrt_device_key, "%s", key);
		snprintf(self->nrt_device_name, sizeof self->nrt_device_name, "%s", name ? name : key);
		self->nrt_device_port = port;
		self->nrt_resolve = true;
	} else {
		if (key)
			lv2_log_warning(&self->logger, "stembridge: ignoring saved device '%s' without "
			                "its port value\n", key);
		self->nrt_device_key[0] = self->nrt_device_name[0] = '\0';
		self->nrt_device_port = -1;
	}
	if (manifest)
		snprintf(self->nrt_manifest, sizeof self->nrt_manifest, "%s", manifest);
	/* the stems of a reopened session are named as before and its takes go on counting */
	if (id)
		snprintf(self->nrt_id, sizeof self->nrt_id, "%s", id);
	if (last_take >= 0)
		self->nrt_last_take = (uint32_t)last_take;
	pthread_mutex_unlock(&self->nrt_lock);
	/* run() tells the UI about the restored properties, and has the service look for takes
	 * this state's track left unfinished (a host killed or closed while their jobs ran) */
	atomic_store_explicit(&self->props_changed, 1, memory_order_release);
	atomic_store_explicit(&self->resume_scan, 1, memory_order_release);
	return LV2_STATE_SUCCESS;
}

const LV2_State_Interface sb_state_interface = {save, restore};
