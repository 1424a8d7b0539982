/* The sharing rule (core/pace.h) that the engine's pool and a file's shared segments both use,
 * on the cases a user meets: a GPU at 0.08 s a segment beside a CPU at 1.9 s (the H100
 * machine's figures), a first piece that measures a device, a device stuck on its piece. */
#include "../check.h"
#include "core/pace.h"

#include <stdio.h>

int main(void)
{
	const double gpu = 0.08, cpu = 1.9;
	const sb_pace_other busy_gpu = {gpu, sb_pace_left(gpu, 1, 0.03)};
	/* unknown paces: every device works, so that each is measured */
	CHECK(sb_pace_take(0, 1, &busy_gpu, 1, 1), "a device of unknown pace waited");
	const sb_pace_other unknown = {0, 0};
	CHECK(sb_pace_take(cpu, 1, &unknown, 1, 1), "a device waited for one of unknown pace");
	CHECK(sb_pace_take(cpu, 1, NULL, 0, 1), "a device alone waited");
	/* the CPU beside a busy GPU: it helps while the GPU alone would need longer than a CPU
	 * segment to drain the queue (31 segments: 2.5 s), not for the last few */
	CHECK(sb_pace_take(cpu, 1, &busy_gpu, 1, 31), "the CPU left 31 segments to the GPU");
	CHECK(!sb_pace_take(cpu, 1, &busy_gpu, 1, 20), "the CPU took one of the last 20 segments "
	      "(the GPU drains them in 1.6 s, sooner than the CPU's 1.9 s)");
	CHECK(!sb_pace_take(cpu, 1, &busy_gpu, 1, 1), "the CPU took the last segment");
	/* the fast device always takes */
	const sb_pace_other busy_cpu = {cpu, sb_pace_left(cpu, 1, 0.5)};
	CHECK(sb_pace_take(gpu, 1, &busy_cpu, 1, 1), "the GPU left the last segment to the CPU");
	/* a GPU stuck 10 s on a 0.08 s segment is taken to need 10 s more: the CPU takes work */
	const sb_pace_other stuck = {gpu, sb_pace_left(gpu, 1, 10.0)};
	CHECK(stuck.left >= 10.0, "a stuck device's time left: %g s", stuck.left);
	CHECK(sb_pace_take(cpu, 1, &stuck, 1, 1), "the CPU waited for a stuck GPU");
	/* two GPUs and the CPU, pieces of 4 units: the rate of all the others counts */
	const sb_pace_other two[2] = {{gpu, 0}, {gpu, 0}};
	CHECK(!sb_pace_take(cpu, 4, two, 2, 40), "the CPU took 4 of 40 units beside two GPUs "
	      "(they drain them in 1.6 s, the CPU needs 7.6 s)");
	printf("pace: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
