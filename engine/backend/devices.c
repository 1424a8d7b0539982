/* The device table (device.h): each registered backend's devices in registry order (the CPU
 * backend first, so entry 0 is the native CPU), and the one place that turns what a user or a
 * saved state asked for into a table entry.
 *
 * Threads: sb_devices_enumerate() runs on a non-real-time thread; the list is immutable
 * afterwards and may be read from any thread.
 */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sb_device_list {
	size_t n;
	sb_device *dev;
};

const char *sb_device_type_str(sb_device_type t)
{
	switch (t) {
	case SB_DEV_CPU_NATIVE: return "native CPU";
	case SB_DEV_GPU_DISCRETE: return "discrete GPU";
	case SB_DEV_GPU_INTEGRATED: return "integrated GPU";
	case SB_DEV_ACCELERATOR: return "accelerator";
	case SB_DEV_OPENCL_CPU: return "OpenCL CPU";
	}
	return "unknown";
}

#define MAX_DEVICES 64

sb_status sb_devices_enumerate(const sb_logger *log, sb_device_list **out)
{
	sb_device_list *l = calloc(1, sizeof *l);
	sb_device *dev = calloc(MAX_DEVICES, sizeof *dev);
	if (!l || !dev) {
		free(l);
		free(dev);
		return SB_ERR_NOMEM;
	}
	size_t n = 0;
	for (size_t b = 0; sb_backend_at(b); b++) {
		const sb_backend *be = sb_backend_at(b);
		const size_t before = n;
		sb_status st = be->enumerate(log, dev, MAX_DEVICES, &n);
		for (size_t i = before; i < n; i++)
			dev[i].backend = be;
		if (st == SB_ERR_NOMEM) {
			free(dev);
			free(l);
			return st;
		}
	}
	if (n == 0 || dev[0].type != SB_DEV_CPU_NATIVE) { /* the registry's first is the CPU */
		free(dev);
		free(l);
		sb_log(log, SB_LOG_ERROR, "internal error: the CPU backend listed no device");
		return SB_ERR_INVALID;
	}
	l->n = n;
	l->dev = dev;
	*out = l;
	return SB_OK;
}

void sb_devices_free(sb_device_list *list)
{
	if (!list)
		return;
	free(list->dev);
	free(list);
}

size_t sb_devices_count(const sb_device_list *list)
{
	return list ? list->n : 0;
}

const sb_device *sb_devices_get(const sb_device_list *list, size_t i)
{
	return list && i < list->n ? &list->dev[i] : NULL;
}

int sb_device_is_gpu(const sb_device *d)
{
	return d->type == SB_DEV_GPU_DISCRETE || d->type == SB_DEV_GPU_INTEGRATED ||
	       d->type == SB_DEV_ACCELERATOR;
}

int sb_device_is_native(const sb_device *d)
{
	return d->type == SB_DEV_CPU_NATIVE;
}

/* The getters of stembridge.h: a front end reads a device through these alone. */
const char *sb_device_get_id(const sb_device *d) { return d->id; }
const char *sb_device_get_key(const sb_device *d) { return d->key; }
const char *sb_device_get_name(const sb_device *d) { return d->name; }
const char *sb_device_get_platform(const sb_device *d) { return d->platform; }
const char *sb_device_get_vendor(const sb_device *d) { return d->vendor; }
const char *sb_device_get_driver(const sb_device *d) { return d->driver; }
const char *sb_device_get_label(const sb_device *d) { return d->label; }
sb_device_type sb_device_get_type(const sb_device *d) { return d->type; }
uint64_t sb_device_get_global_mem(const sb_device *d) { return d->global_mem; }
uint64_t sb_device_get_max_alloc(const sb_device *d) { return d->max_alloc; }
unsigned sb_device_get_compute_units(const sb_device *d) { return d->compute_units; }
int sb_device_get_platform_index(const sb_device *d) { return d->platform_index; }
int sb_device_get_device_index(const sb_device *d) { return d->device_index; }

size_t sb_devices_auto(const sb_device_list *list)
{
	static const sb_device_type order[] = {SB_DEV_GPU_DISCRETE, SB_DEV_GPU_INTEGRATED,
	                                       SB_DEV_ACCELERATOR};
	for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
		for (size_t i = 0; i < list->n; i++)
			if (list->dev[i].type == order[o])
				return i;
	return 0;
}

size_t sb_devices_count_accel(const sb_device_list *list)
{
	size_t n = 0;
	for (size_t i = 0; list && i < list->n; i++)
		n += !sb_device_is_native(&list->dev[i]);
	return n;
}

const sb_device *sb_devices_accel(const sb_device_list *list, size_t k)
{
	for (size_t i = 0; list && i < list->n; i++)
		if (!sb_device_is_native(&list->dev[i]) && k-- == 0)
			return &list->dev[i];
	return NULL;
}

size_t sb_devices_find(const sb_device_list *list, const char *s)
{
	for (size_t i = 0; list && s && i < list->n; i++)
		if (!strcmp(list->dev[i].id, s) || !strcmp(list->dev[i].key, s))
			return i;
	return (size_t)-1;
}

static size_t count_backend(const sb_device_list *l, const char *backend)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		n += !sb_device_is_native(&l->dev[i]) && !strcmp(l->dev[i].backend->name, backend);
	return n;
}

/* A key names a device of another machine as well as this one: match it field by field, and
 * when the exact ordinal is gone, take another card of the same name (a reordered PCI bus). */
static int resolve_key(const sb_device_list *l, const char *key, sb_device_resolution *res)
{
	char buf[640];
	snprintf(buf, sizeof buf, "%s", key);
	char *f[5] = {0}; /* backend, platform, vendor, name, ordinal */
	char *p = buf;
	for (int i = 0; i < 5 && p; i++) {
		f[i] = p;
		p = i < 4 ? strchr(p, '|') : NULL;
		if (p)
			*p++ = '\0';
	}
	if (!f[4] || !sb_backend_by_name(f[0]))
		return 0;
	char *end = NULL;
	long ord = strtol(f[4], &end, 10);
	if (!end || *end || ord < 0)
		return 0;
	long seen = 0;
	size_t same_name = (size_t)-1;
	for (size_t i = 0; i < l->n; i++) {
		const sb_device *d = &l->dev[i];
		if (sb_device_is_native(d) || strcmp(d->backend->name, f[0]) ||
		    strcmp(d->platform, f[1]) || strcmp(d->vendor, f[2]) || strcmp(d->name, f[3]))
			continue;
		if (same_name == (size_t)-1)
			same_name = i;
		if (seen++ == ord) {
			res->index = i;
			return 1;
		}
	}
	if (same_name != (size_t)-1) {
		res->index = same_name;
		return 1;
	}
	const size_t have = count_backend(l, f[0]);
	res->index = 0;
	res->fell_back = 1;
	snprintf(res->reason, sizeof res->reason,
	         "saved device '%.200s' (%.200s) not found on this machine: %zu %.20s device%s "
	         "present", f[3], f[1], have, f[0], have == 1 ? "" : "s");
	return 1;
}

sb_status sb_devices_resolve(const sb_device_list *list, const char *request,
                             sb_device_resolution *res)
{
	memset(res, 0, sizeof *res);
	if (!list || !request)
		return SB_ERR_INVALID;
	if (!*request || !strcmp(request, "auto")) {
		res->index = sb_devices_auto(list);
		return SB_OK;
	}
	if (!strcmp(request, "cpu")) {
		res->index = 0;
		return SB_OK;
	}
	const char *colon = strchr(request, ':'), *bar = strchr(request, '|');
	if (colon && !bar && !strncmp(request, "device:", 7)) {
		/* the N-th accelerator of any backend (the plugin's "Device N+1") */
		char *end = NULL;
		long n = strtol(colon + 1, &end, 10);
		if (colon[1] == '\0' || !end || *end || n < 0)
			return SB_ERR_INVALID;
		const size_t have = sb_devices_count_accel(list);
		const sb_device *d = sb_devices_accel(list, (size_t)n);
		for (size_t i = 0; d && i < list->n; i++)
			if (&list->dev[i] == d) {
				res->index = i;
				return SB_OK;
			}
		res->index = 0;
		res->fell_back = 1;
		snprintf(res->reason, sizeof res->reason, "%.100s not found: %zu accelerator%s present",
		         request, have, have == 1 ? "" : "s");
		return SB_OK;
	}
	if (colon && !bar) {
		char name[32];
		const size_t nl = (size_t)(colon - request);
		if (nl == 0 || nl >= sizeof name)
			return SB_ERR_INVALID;
		memcpy(name, request, nl);
		name[nl] = '\0';
		const sb_backend *be = sb_backend_by_name(name);
		char *end = NULL;
		long n = strtol(colon + 1, &end, 10);
		if (!be || be == sb_backend_cpu() || colon[1] == '\0' || !end || *end || n < 0)
			return SB_ERR_INVALID;
		for (size_t i = 0; i < list->n; i++)
			if (list->dev[i].backend == be && list->dev[i].index == n) {
				res->index = i;
				return SB_OK;
			}
		const size_t have = count_backend(list, name);
		res->index = 0;
		res->fell_back = 1;
		snprintf(res->reason, sizeof res->reason, "%.100s not found: %zu %.20s device%s present",
		         request, have, name, have == 1 ? "" : "s");
		return SB_OK;
	}
	if (bar && resolve_key(list, request, res))
		return SB_OK;
	return SB_ERR_INVALID;
}

static void set_add(sb_device_set *s, const sb_device_resolution *r)
{
	for (size_t k = 0; k < s->n; k++)
		if (s->index[k] == r->index)
			return;
	if (s->n == SB_MAX_SET)
		return;
	s->index[s->n] = r->index;
	snprintf(s->reason[s->n], sizeof s->reason[s->n], "%s", r->reason);
	s->fell_back |= r->fell_back;
	s->n++;
}

void sb_devices_request_forms(char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "auto, all, cpu, device:N");
	for (size_t i = 0; sb_backend_at(i) && at < len; i++)
		if (sb_backend_at(i) != sb_backend_cpu())
			at += (size_t)snprintf(buf + at, len - at, ", %s:N", sb_backend_at(i)->name);
}

sb_status sb_devices_resolve_set(const sb_device_list *list, const char *request,
                                 sb_device_set *out)
{
	memset(out, 0, sizeof *out);
	if (!list || !request)
		return SB_ERR_INVALID;
	if (!strcmp(request, "all") || !strcmp(request, "auto") || !*request) {
		const int all = !strcmp(request, "all");
		size_t gpus = 0;
		for (size_t i = 0; i < list->n; i++)
			gpus += sb_device_is_gpu(&list->dev[i]);
		if (all || gpus > 1) {
			for (size_t i = 0; i < list->n; i++)
				if (sb_device_is_gpu(&list->dev[i])) {
					sb_device_resolution r = {i, 0, ""};
					set_add(out, &r);
				}
			if (all) {
				sb_device_resolution r = {0, 0, ""};
				set_add(out, &r);
			}
			return SB_OK;
		}
		sb_device_resolution r = {sb_devices_auto(list), 0, ""};
		set_add(out, &r);
		return SB_OK;
	}
	char buf[2048];
	if (snprintf(buf, sizeof buf, "%s", request) >= (int)sizeof buf)
		return SB_ERR_INVALID;
	char *save = NULL;
	for (char *part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
		while (*part == ' ')
			part++;
		sb_device_resolution r;
		if (sb_devices_resolve(list, part, &r) != SB_OK)
			return SB_ERR_INVALID;
		set_add(out, &r);
	}
	return out->n ? SB_OK : SB_ERR_INVALID;
}

const char *sb_device_backend_name(const sb_device *d)
{
	return d && d->backend ? d->backend->name : "";
}

void sb_device_details(const sb_device *d, char *buf, size_t len)
{
	if (!len)
		return;
	buf[0] = '\0';
	if (d && d->backend && d->backend->details)
		d->backend->details(d, buf, len);
}

int sb_backend_is_accelerator(const char *name)
{
	const sb_backend *be = sb_backend_by_name(name);
	return be && be != sb_backend_cpu();
}
