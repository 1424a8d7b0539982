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
	/* a device at a quarter of the GPU's rate beside it: it helps while the GPU alone would
	 * need longer than its segment to drain the queue, not for the last few */
	const double slow = 4 * gpu;
	CHECK(sb_pace_take(slow, 1, &busy_gpu, 1, 31), "a device at a quarter of the GPU's rate "
	      "left 31 segments to it");
	CHECK(!sb_pace_take(slow, 1, &busy_gpu, 1, 3), "a device at a quarter of the GPU's rate "
	      "took one of the last 3 segments (the GPU drains them in 0.24 s, sooner than its "
	      "0.32 s)");
	/* the CPU at a 24th of the GPU's rate: beside the GPU it costs more than it gives (the
	 * H100's GPU 8-14 % slower with the CPU working), so it takes nothing, however long the
	 * queue; at a sixth it still works */
	CHECK(!sb_pace_take(cpu, 1, &busy_gpu, 1, 31), "the CPU at a 24th of the GPU's rate took "
	      "one of 31 segments");
	CHECK(!sb_pace_take(cpu, 1, &busy_gpu, 1, 1000), "the CPU at a 24th of the GPU's rate "
	      "took one of 1000 segments");
	CHECK(sb_pace_take(6 * gpu * 0.99, 1, &busy_gpu, 1, 31), "a device at a sixth of the GPU's "
	      "rate left 31 segments to it");
	CHECK(!sb_pace_take(6 * gpu * 1.01, 1, &busy_gpu, 1, 31), "a device just under a sixth of "
	      "the GPU's rate took one of 31 segments");
	CHECK(!sb_pace_take(cpu, 1, &busy_gpu, 1, 1), "the CPU took the last segment");
	/* the fast device always takes */
	const sb_pace_other busy_cpu = {cpu, sb_pace_left(cpu, 1, 0.5)};
	CHECK(sb_pace_take(gpu, 1, &busy_cpu, 1, 1), "the GPU left the last segment to the CPU");
	/* a GPU stuck 10 s on a 0.08 s segment is taken to need 10 s more: the CPU takes work */
	const sb_pace_other stuck = {gpu, sb_pace_left(gpu, 1, 10.0)};
	CHECK(stuck.left >= 10.0, "a stuck device's time left: %g s", stuck.left);
	CHECK(sb_pace_take(cpu, 1, &stuck, 1, 1), "the CPU waited for a stuck GPU");
	/* two GPUs and a device at a third of one's rate, pieces of 4 units: the rate of all the
	 * others counts (a sixth of theirs together: it still works on a long queue) */
	const sb_pace_other two[2] = {{gpu, 0}, {gpu, 0}};
	CHECK(sb_pace_take(2.9 * gpu, 4, two, 2, 40), "a device at a 2.9th of a GPU's rate left 4 "
	      "of 40 units to two GPUs (they need 1.6 s to drain them, it 0.93 s for its 4)");
	CHECK(!sb_pace_take(2.9 * gpu, 4, two, 2, 8), "a device at a 2.9th of a GPU's rate took 4 "
	      "of the last 8 units beside two GPUs (they drain them in 0.32 s, it needs 0.93 s)");
	CHECK(!sb_pace_take(3.1 * gpu, 4, two, 2, 40), "a device just under a sixth of two GPUs' "
	      "rate took 4 of 40 units beside them");
	CHECK(!sb_pace_take(cpu, 4, two, 2, 400), "the CPU took 4 of 400 units beside two GPUs");
	printf("pace: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
