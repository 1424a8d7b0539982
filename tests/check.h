/* The C tests' soft assertion: a check that fails is printed with its place and counted, and
 * the test goes on to the next, so one run shows every failure; main() returns failures != 0.
 * Each test program includes this once. */
#ifndef SB_TESTS_CHECK_H
#define SB_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(c, ...)                                                                         \
	do {                                                                                      \
		if (!(c)) {                                                                           \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
			fprintf(stderr, __VA_ARGS__);                                                     \
			fputc('\n', stderr);                                                              \
			failures++;                                                                       \
		}                                                                                     \
	} while (0)

#endif
