/* SB_FAULT_INJECT read in one place (fault.h). */
#include "core/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sb_fault_entries(const char *prefix, char (*out)[128], int max)
{
	const char *env = sb_knob_get("SB_FAULT_INJECT");
	const size_t pl = strlen(prefix);
	int n = 0;
	for (const char *p = env; p && *p && n < max;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *end = strchr(p, ',');
		const size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len >= pl && !strncmp(p, prefix, pl))
			snprintf(out[n++], sizeof out[0], "%.*s", (int)(len - pl), p + pl);
		p = end;
	}
	return n;
}

long sb_fault_number(const char *key)
{
	char e[16][128];
	const int n = sb_fault_entries(key, e, 16);
	for (int i = 0; i < n; i++) {
		char *end = NULL;
		const long k = strtol(e[i], &end, 10);
		if (end != e[i] && k > 0)
			return k;
	}
	return 0;
}
