/* The OpenCL tests' logger: every message kept in log_text ("LEVEL message" lines) for the
 * checks on what the engine said, and echoed to stderr with SB_TEST_VERBOSE set. Each test
 * program includes this once. */
#ifndef SB_TESTS_LOG_CAPTURE_H
#define SB_TESTS_LOG_CAPTURE_H

#include "sb_common.h"

#include <stdio.h>
#include <stdlib.h>

static char log_text[1 << 16];
static size_t log_len;

static void capture(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	const int n = snprintf(log_text + log_len, sizeof log_text - log_len, "%d %s\n", (int)level,
	                       msg);
	if (n > 0 && log_len + (size_t)n < sizeof log_text)
		log_len += (size_t)n;
	if (getenv("SB_TEST_VERBOSE"))
		fprintf(stderr, "[log %d] %s\n", (int)level, msg);
}

static const sb_logger logger = {capture, NULL};

#endif
