/* Stopping a simulated surface whose threads wait on a condition variable. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

/* Sets *stopping under lock and wakes every thread waiting on cond, which then sees it and returns. */
static inline void sim_stop_wake(pthread_mutex_t *lock, pthread_cond_t *cond, bool *stopping)
{
        pthread_mutex_lock(lock);
        *stopping = true;
        pthread_cond_broadcast(cond);
        pthread_mutex_unlock(lock);
}
