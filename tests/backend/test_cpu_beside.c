/* The CPU device beside GPUs (sb_open_opts.beside, issue #24): what `top -H` shows a user who
 * shares a file between a GPU and the CPU. The CPU's threads run below the GPU's feeding
 * thread (nice +10, or SB_CPU_BESIDE_NICE), one core is left to each GPU when the thread count
 * is the default, a count the user asked for is kept, and alone the CPU is as before: every
 * core, no lower priority. Read from /proc/self/task: the threads a device's opening started.
 */
#include "../check.h"
#include "backend/backend.h"
#include "backend/device.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_TASKS 1024

/* the process's thread ids */
static int tasks(long *out)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d)) && n < MAX_TASKS;)
		if (e->d_name[0] != '.')
			out[n++] = atol(e->d_name);
	closedir(d);
	return n;
}

/* a thread's nice value (field 19 of its stat line), or 99 when unreadable */
static int nice_of(long tid)
{
	char path[64], line[1024];
	snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 99;
	const int got = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	const char *p = got ? strrchr(line, ')') : NULL;
	if (!p)
		return 99;
	/* after ") ": the state is field 3; the nice value is field 19 */
	p += 2;
	for (int field = 3; field < 19 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? atoi(p) : 99;
}

typedef struct {
	int threads;   /* the pool's, the caller's included */
	int nice_min, nice_max; /* over the threads the opening started */
} seen;

/* opens the native CPU with o and reads what started */
static int open_and_look(const sb_device *cpu, const sb_open_opts *o, seen *s)
{
	long before[MAX_TASKS], after[MAX_TASKS];
	const int nb = tasks(before);
	sb_exec x;
	if (nb < 0 || sb_exec_open(cpu, o, NULL, &x) != SB_OK)
		return -1;
	const int na = tasks(after);
	s->threads = 1;
	s->nice_min = 99;
	s->nice_max = -99;
	for (int i = 0; i < na; i++) {
		int old = 0;
		for (int k = 0; k < nb && !old; k++)
			old = after[i] == before[k];
		if (old)
			continue;
		const int v = nice_of(after[i]);
		s->threads++;
		s->nice_min = v < s->nice_min ? v : s->nice_min;
		s->nice_max = v > s->nice_max ? v : s->nice_max;
	}
	sb_exec_close(&x);
	return 0;
}

int main(void)
{
	sb_device_list *list = NULL;
	if (sb_devices_enumerate(NULL, &list) != SB_OK || sb_devices_count(list) < 1) {
		fprintf(stderr, "FAIL: no device list\n");
		return 1;
	}
	const sb_device *cpu = sb_devices_get(list, 0);
	const long nc = sysconf(_SC_NPROCESSORS_ONLN);
	const int mine = getpriority(PRIO_PROCESS, 0);
	const int below = mine + 10 < 19 ? mine + 10 : 19; /* nice ends at 19 */
	printf("%ld cores, this thread at nice %d\n", nc, mine);
	seen s;
	/* a first opening starts what the libraries behind the products keep for the process */
	const sb_open_opts warm = {1, SB_PREC_FP32, 0};
	CHECK(open_and_look(cpu, &warm, &s) == 0, "the CPU does not open");

	/* alone: every core, at the caller's priority */
	const sb_open_opts alone = {0, SB_PREC_FP32, 0};
	CHECK(open_and_look(cpu, &alone, &s) == 0, "the CPU does not open");
	printf("alone: %d threads, nice %d..%d\n", s.threads, s.nice_min, s.nice_max);
	CHECK(s.threads == nc, "the CPU alone computes on %d threads of %ld cores", s.threads, nc);
	CHECK(s.threads == 1 || (s.nice_min == mine && s.nice_max == mine),
	      "the CPU alone runs at nice %d..%d, not its caller's %d", s.nice_min, s.nice_max,
	      mine);

	/* beside one GPU, the default count: a core left to the GPU's feeding thread */
	const sb_open_opts one = {0, SB_PREC_FP32, 1};
	CHECK(open_and_look(cpu, &one, &s) == 0, "the CPU does not open beside a GPU");
	printf("beside 1 GPU: %d threads, nice %d..%d\n", s.threads, s.nice_min, s.nice_max);
	CHECK(s.threads == (nc > 2 ? nc - 1 : 1), "beside a GPU the CPU computes on %d threads of "
	      "%ld cores (a core is left to the GPU)", s.threads, nc);
	CHECK(s.threads == 1 || (s.nice_min == below && s.nice_max == below),
	      "beside a GPU the CPU's threads run at nice %d..%d, not %d", s.nice_min, s.nice_max,
	      below);

	/* beside a GPU with the count the user asked for: kept, below the GPU all the same */
	const sb_open_opts asked = {3, SB_PREC_FP32, 1};
	CHECK(open_and_look(cpu, &asked, &s) == 0, "the CPU does not open with 3 threads");
	printf("beside 1 GPU, 3 threads asked: %d threads, nice %d..%d\n", s.threads, s.nice_min,
	       s.nice_max);
	CHECK(s.threads == 3, "3 threads asked for beside a GPU gave %d", s.threads);
	CHECK(s.nice_min == below && s.nice_max == below,
	      "beside a GPU the CPU's threads run at nice %d..%d, not %d", s.nice_min, s.nice_max,
	      below);

	/* beside as many GPUs as cores: one thread still */
	const sb_open_opts many = {0, SB_PREC_FP32, (int)nc};
	CHECK(open_and_look(cpu, &many, &s) == 0, "the CPU does not open beside %ld GPUs", nc);
	CHECK(s.threads == 1, "beside %ld GPUs the CPU computes on %d threads, not 1", nc, s.threads);

	/* the environment's override (the bench's comparison): 0 is no lower priority */
	setenv("SB_CPU_BESIDE_NICE", "0", 1);
	CHECK(open_and_look(cpu, &asked, &s) == 0, "the CPU does not open with SB_CPU_BESIDE_NICE=0");
	CHECK(s.nice_min == mine && s.nice_max == mine,
	      "SB_CPU_BESIDE_NICE=0: the CPU's threads run at nice %d..%d, not %d", s.nice_min,
	      s.nice_max, mine);
	unsetenv("SB_CPU_BESIDE_NICE");

	sb_devices_free(list);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
