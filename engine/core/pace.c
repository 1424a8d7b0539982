/* The sharing rule (pace.h). */
#include "core/pace.h"

double sb_pace_left(double pace, double units, double ran)
{
	if (ran < 0)
		return 0;
	const double need = pace * units;
	return ran < need ? need - ran : ran;
}

int sb_pace_take(double mine, double units, const sb_pace_other *others, int n,
                 double waiting)
{
	if (!(mine > 0))
		return 1;
	double soonest = -1, rate = 0;
	for (int i = 0; i < n; i++) {
		if (!(others[i].pace > 0))
			return 1;
		const double t = others[i].left + others[i].pace * units;
		soonest = soonest < 0 || t < soonest ? t : soonest;
		rate += 1.0 / others[i].pace;
	}
	if (soonest < 0)
		return 1; /* alone */
	const double t = mine * units;
	return t <= soonest || (t <= waiting / rate && 1.0 / mine >= SB_PACE_MIN_SHARE * rate);
}
