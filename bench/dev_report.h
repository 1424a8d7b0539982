/* What the first device of a song did, from the model's device reports (sb_run_ctx's
 * device_report; the last report of a device holds its totals): the seconds it ran its units
 * and the seconds it sat between them, waiting for the file's reading and writing; and the
 * units each device finished. */
#ifndef SB_BENCH_DEV_REPORT_H
#define SB_BENCH_DEV_REPORT_H

#include "models/model.h"

typedef struct {
	long done;
	double busy_s, wait_s;
	long units[8];        /* what each device finished (index: sb_run_ctx.dev) */
} dev_report;

static inline void dev_report_take(void *user, const sb_device_report *r)
{
	dev_report *d = user;
	if (r->dev >= 0 && r->dev < 8)
		d->units[r->dev] = r->done;
	if (r->dev == 0) {
		d->done = r->done;
		d->busy_s = r->busy_s;
		d->wait_s = r->wait_s;
	}
}

#endif
