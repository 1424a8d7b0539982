/* The sharing rule, one for whole files (jobs/engine.c: the engine's pool) and for a file's
 * segments or chunks (models/share.c) alike.
 *
 * A free device asks whether to take the next piece of work. Pace is seconds a unit (a second
 * of audio for whole files, a segment or chunk for a file's pieces) from what the device has
 * finished alone; 0 while unknown. The device takes the piece when
 *   - its own pace is unknown (the piece measures it), or another's is (no estimate to go by:
 *     every device works), or
 *   - it would finish the piece no later than the soonest other device could (that device's
 *     time left on what it runs, plus the piece), or
 *   - no later than the other devices, at their pace, would drain all the work waiting, and
 *     its rate is at least SB_PACE_MIN_SHARE of theirs together.
 * Else it leaves the piece to the others: a slow device beside a fast one works only while
 * that makes the whole sooner, so adding a device never makes a job slower.
 *
 * The floor: a device working beside others slows them (the same memory, the host thread that
 * feeds them, the cores). On the H100 machine the CPU's threads beside the GPU made the GPU's
 * segments 8-14 % slower while the CPU, at a 25th of its rate, gave it 4-6 %: a device whose
 * rate is under a sixth of the others' gives less than it costs them, so it only takes a piece
 * it would finish before any of them could (a stuck device, the others all busy).
 *
 * A device past its own pace on what it runs is taken to need as long again as it has run
 * (sb_pace_left), so a device stuck on a piece (a hung driver) stops holding the others back.
 */
#ifndef SB_PACE_H
#define SB_PACE_H

#define SB_PACE_MIN_SHARE (1.0 / 6)

typedef struct {
	double pace;       /* its seconds a unit, 0 unknown */
	double left;       /* seconds left on what it runs now, 0 when idle (sb_pace_left) */
} sb_pace_other;

/* Time left for a device of pace (seconds a unit) that has run ran seconds on a piece of
 * units; 0 when idle (ran < 0). */
double sb_pace_left(double pace, double units, double ran);

/* 1: the device of pace mine takes a piece of units now, with n others and waiting units of
 * work not yet taken (the piece included). */
int sb_pace_take(double mine, double units, const sb_pace_other *others, int n,
                 double waiting);

#endif
