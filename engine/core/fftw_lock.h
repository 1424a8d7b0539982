/* FFTW's planner (plan creation and destruction) is not thread-safe, and several jobs and
 * models may start at once on different engine threads: every module takes this one lock
 * around fftwf_plan_* and fftwf_destroy_plan. Executing a plan needs no lock. */
#ifndef SB_FFTW_LOCK_H
#define SB_FFTW_LOCK_H

void sb_fftw_plan_lock(void);
void sb_fftw_plan_unlock(void);

#endif
