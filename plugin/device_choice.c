/* The Device control and what stands behind it: the request a port value makes, the device
 * table announced to the UI (deviceList) and kept per instance so that Device k has a stable
 * key, and the saved key that state stores and restores (devices by a stable key, never an
 * index that changes between machines).
 *
 * Threads: the service thread, and the host's state calls (save, restore) through
 * sb_service_device_key and sb_device_key_valid. Never run().
 */
#include "service.h"

#include "stembridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name state saves for a device: its name and platform, and no figure that changes from
 * one save to the next (the label's memory, which some drivers report as what is free). */
void sb_device_saved_name(const sb_device *d, char *name, size_t len)
{
	const char *platform = sb_device_get_platform(d);
	if (platform[0])
		snprintf(name, len, "%.200s (%.120s)", sb_device_get_name(d), platform);
	else
		snprintf(name, len, "%s", sb_device_get_name(d));
}

/* The Device control is only how a generic host UI shows the choice: Auto, CPU, All devices,
 * or Device k, the k-th device of the table the plugin announced (deviceList: every device
 * but the native CPU, in the engine's order). A job asks for the device by its stable key;
 * "device k" of a table the plugin does not know yet (a preset from another machine) is asked
 * for as the k-th, and the engine says when it is not there. */
const char *sb_device_port_request(int port, char *buf, size_t len)
{
	if (port <= SB_DEVICE_AUTO)
		snprintf(buf, len, "auto");
	else if (port == SB_DEVICE_CPU)
		snprintf(buf, len, "cpu");
	else if (port == SB_DEVICE_ALL)
		snprintf(buf, len, "all");
	else
		snprintf(buf, len, "device:%d", port - SB_DEVICE_FIRST_ACCEL);
	return buf;
}

/* A saved device key the engine can resolve: auto, cpu, all, device:N, or a registered
 * backend's "<name>:N" or stable key "<name>|..." (any backend, not only today's). */
bool sb_device_key_valid(const char *k)
{
	if (!strcmp(k, "auto") || !strcmp(k, "cpu") || !strcmp(k, "all"))
		return true;
	const size_t nl = strcspn(k, ":|");
	if (!k[nl] || !k[nl + 1] || nl == 0 || nl >= 32)
		return false;
	char name[32];
	memcpy(name, k, nl);
	name[nl] = '\0';
	if (k[nl] == ':') {
		char *end = NULL;
		const long n = strtol(k + nl + 1, &end, 10);
		if (!end || *end || n < 0)
			return false;
		if (!strcmp(name, "device"))
			return true;
	}
	return sb_backend_is_accelerator(name);
}

/* the Device control value that shows a device key (-1: none), from the announced table */
int sb_device_port_of_key(sb_instance *self, const char *key)
{
	if (!key[0])
		return -1;
	if (strcmp(key, "cpu") == 0)
		return SB_DEVICE_CPU;
	int port = -1;
	pthread_mutex_lock(&self->nrt_lock);
	for (int k = 0; k < SB_DEVICE_N_ACCEL && port < 0; k++)
		if (self->nrt_keys[k][0] && !strcmp(self->nrt_keys[k], key))
			port = SB_DEVICE_FIRST_ACCEL + k;
	pthread_mutex_unlock(&self->nrt_lock);
	return port;
}

void sb_service_device_key(sb_instance *self, int port, char *key, size_t klen, char *name,
                           size_t nlen)
{
	char req[32];
	sb_device_port_request(port, req, sizeof req);
	snprintf(key, klen, "%s", req);
	snprintf(name, nlen, "%s", port <= 0 ? "Auto" : port == 1 ? "CPU"
	                                      : port == SB_DEVICE_ALL ? "All devices" : req);
	if (port < SB_DEVICE_FIRST_ACCEL || port >= SB_DEVICE_FIRST_ACCEL + SB_DEVICE_N_ACCEL)
		return;
	const int k = port - SB_DEVICE_FIRST_ACCEL;
	pthread_mutex_lock(&self->nrt_lock);
	bool have = self->nrt_have_keys;
	if (have && self->nrt_keys[k][0]) {
		snprintf(key, klen, "%s", self->nrt_keys[k]);
		snprintf(name, nlen, "%s", self->nrt_names[k]);
	}
	pthread_mutex_unlock(&self->nrt_lock);
	if (have)
		return;
	/* The service has not listed this instance's devices yet: read the engine's table when
	 * there is one, but never start the engine from save() (a host that saves a plugin it only
	 * looked at starts nothing); the port value's own form ("device:N") stands in. */
	sb_service_accel_key((size_t)k, key, klen, name, nlen);
}

/* patch:Put of the deviceList: the accelerators in port order ("Device k" = device:k-1), each an
 * object with the keys in uris.h. Built once per instance with its own URIDs, published
 * through an atomic pointer, freed at detach. */
void sb_device_list_publish(sb_instance *self, sb_engine *e)
{
	const sb_device_list *l = sb_engine_devices(e);
	if (!l)
		return;
	const size_t cap = 64 * 1024;
	uint8_t *buf = calloc(1, cap);
	if (!buf)
		return;
	const sb_urids *u = &self->u;
	LV2_Atom_Forge *f = &self->nrt_forge;
	lv2_atom_forge_set_buffer(f, buf, cap);
	LV2_Atom_Forge_Frame obj, body, tup, dev;
	LV2_Atom_Forge_Ref ref = lv2_atom_forge_object(f, &obj, 0, u->patch_Put);
	lv2_atom_forge_key(f, u->patch_body);
	lv2_atom_forge_object(f, &body, 0, 0);
	lv2_atom_forge_key(f, u->sb_deviceList);
	lv2_atom_forge_tuple(f, &tup);
	for (int k = 0; k < SB_DEVICE_N_ACCEL; k++) {
		const sb_device *d = sb_devices_accel(l, (size_t)k);
		if (!d)
			break;
		const char *key = sb_device_get_key(d), *name = sb_device_get_name(d),
		           *platform = sb_device_get_platform(d), *driver = sb_device_get_driver(d);
		pthread_mutex_lock(&self->nrt_lock);
		snprintf(self->nrt_keys[k], sizeof self->nrt_keys[k], "%s", key);
		sb_device_saved_name(d, self->nrt_names[k], sizeof self->nrt_names[k]);
		pthread_mutex_unlock(&self->nrt_lock);
		const char *type = sb_device_type_str(sb_device_get_type(d));
		lv2_atom_forge_object(f, &dev, 0, 0);
		lv2_atom_forge_key(f, u->sb_deviceKey);
		lv2_atom_forge_string(f, key, (uint32_t)strlen(key));
		lv2_atom_forge_key(f, u->sb_deviceName);
		lv2_atom_forge_string(f, name, (uint32_t)strlen(name));
		lv2_atom_forge_key(f, u->sb_devicePlatform);
		lv2_atom_forge_string(f, platform, (uint32_t)strlen(platform));
		lv2_atom_forge_key(f, u->sb_deviceType);
		lv2_atom_forge_string(f, type, (uint32_t)strlen(type));
		lv2_atom_forge_key(f, u->sb_deviceMemory);
		lv2_atom_forge_long(f, (int64_t)sb_device_get_global_mem(d));
		lv2_atom_forge_key(f, u->sb_deviceUnits);
		lv2_atom_forge_int(f, (int32_t)sb_device_get_compute_units(d));
		lv2_atom_forge_key(f, u->sb_deviceDriver);
		lv2_atom_forge_string(f, driver, (uint32_t)strlen(driver));
		lv2_atom_forge_pop(f, &dev);
	}
	lv2_atom_forge_pop(f, &tup);
	lv2_atom_forge_pop(f, &body);
	lv2_atom_forge_pop(f, &obj);
	pthread_mutex_lock(&self->nrt_lock);
	self->nrt_have_keys = true;
	pthread_mutex_unlock(&self->nrt_lock);
	if (!ref || f->offset > cap - 64) { /* 8 devices fit many times over; never expected */
		lv2_log_error(&self->logger, "stembridge: device list too large to announce\n");
		free(buf);
		return;
	}
	const LV2_Atom *old = atomic_exchange(&self->device_list, (const LV2_Atom *)buf);
	free((void *)old);
}

void sb_device_resolve_saved(sb_instance *self, sb_engine *e)
{
	char key[640];
	pthread_mutex_lock(&self->nrt_lock);
	self->nrt_resolve = false;
	snprintf(key, sizeof key, "%s", self->nrt_device_key);
	pthread_mutex_unlock(&self->nrt_lock);
	if (!key[0])
		return;
	const sb_device_list *l = sb_engine_devices(e);
	sb_device_resolution res;
	if (!l || sb_devices_resolve(l, key, &res) != SB_OK)
		return;
	const sb_device *d = sb_devices_get(l, res.index);
	self->nrt_dev = sb_device_port_of_key(self, sb_device_get_key(d));
	self->nrt_fallback = res.fell_back;
	char text[SB_TEXT];
	if (res.fell_back) {
		snprintf(text, sizeof text, "%s (fallback: %s)", sb_device_get_label(d), res.reason);
		lv2_log_warning(&self->logger, "stembridge: saved device not here: %s\n", res.reason);
	} else {
		snprintf(text, sizeof text, "%s", sb_device_get_label(d));
	}
	sb_service_post(self, SB_MSG_DEVICE_IN_USE, text);
}
