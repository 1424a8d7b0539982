#include "core/fftw_lock.h"

#include <pthread.h>

static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

void sb_fftw_plan_lock(void)
{
	pthread_mutex_lock(&planner);
}

void sb_fftw_plan_unlock(void)
{
	pthread_mutex_unlock(&planner);
}
