/* stembridge devices [--json]: what the engine can run on, by name, with the details a user
 * needs to choose (and the names to type). */
#include "commands.h"

#include "stembridge.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void log_stderr(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "stembridge: %s\n", msg);
}

int sb_cli_devices(int argc, char **argv)
{
	int json = 0;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (strcmp(argv[i], "devices") && strcmp(argv[i], "--list-devices")) {
			fprintf(stderr, "stembridge: devices: unknown option '%s' (try --json)\n", argv[i]);
			return 2;
		}
	}
	sb_logger log = {log_stderr, NULL};
	sb_device_list *l = NULL;
	if (sb_devices_enumerate(&log, &l) != SB_OK) {
		fprintf(stderr, "stembridge: cannot list devices: out of memory\n");
		return 1;
	}
	size_t n = sb_devices_count(l);
	size_t autodev = sb_devices_auto(l);
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++) {
			const sb_device *d = sb_devices_get(l, i);
			json_t *o = json_object();
			json_object_set_new(o, "id", json_string(sb_device_get_id(d)));
			json_object_set_new(o, "key", json_string(sb_device_get_key(d)));
			json_object_set_new(o, "name", json_string(sb_device_get_name(d)));
			json_object_set_new(o, "label", json_string(sb_device_get_label(d)));
			json_object_set_new(o, "platform", json_string(sb_device_get_platform(d)));
			json_object_set_new(o, "vendor", json_string(sb_device_get_vendor(d)));
			json_object_set_new(o, "driver", json_string(sb_device_get_driver(d)));
			const char *type = sb_device_type_str(sb_device_get_type(d));
			json_object_set_new(o, "type", json_string(type));
			json_object_set_new(o, "global_mem",
			                    json_integer((json_int_t)sb_device_get_global_mem(d)));
			json_object_set_new(o, "max_alloc",
			                    json_integer((json_int_t)sb_device_get_max_alloc(d)));
			json_object_set_new(o, "compute_units", json_integer(sb_device_get_compute_units(d)));
			json_object_set_new(o, "backend", json_string(sb_device_backend_name(d)));
			/* the backend's own numbering, where it has one (OpenCL's ICD loader's, which
			 * clinfo and CLBlast's tuners take as -platform and -device) */
			const int platform = sb_device_get_platform_index(d);
			if (platform >= 0) {
				json_object_set_new(o, "platform_index", json_integer(platform));
				json_object_set_new(o, "device_index",
				                    json_integer(sb_device_get_device_index(d)));
			}
			json_object_set_new(o, "auto", json_boolean(i == autodev));
			char det[512];
			sb_device_details(d, det, sizeof det);
			if (det[0])
				json_object_set_new(o, "details", json_string(det));
			json_array_append_new(arr, o);
		}
		char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(arr);
		if (s)
			puts(s);
		free(s);
	} else {
		printf("Available devices (%zu):\n", n);
		for (size_t i = 0; i < n; i++) {
			const sb_device *d = sb_devices_get(l, i);
			printf("  %s: %s%s\n", sb_device_get_id(d), sb_device_get_label(d),
			       i == autodev ? "  [auto]" : "");
			char det[512];
			sb_device_details(d, det, sizeof det);
			if (det[0])
				printf("      %s\n", det);
			if (!sb_device_is_native(d))
				printf("      %s, %u compute units, max allocation %.1f GiB, driver %s\n",
				       sb_device_type_str(sb_device_get_type(d)), sb_device_get_compute_units(d),
				       (double)sb_device_get_max_alloc(d) / (1024.0 * 1024.0 * 1024.0),
				       sb_device_get_driver(d));
		}
	}
	sb_devices_free(l);
	return 0;
}
