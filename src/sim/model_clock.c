/* The simulator's clock: scenario time, started with the run and scaled against the wall clock. */
#include <math.h>
#include <time.h>

#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

void sim_start(struct sim *s)
{
        s->started = true;
        s->start_mono = now_monotonic_usec();
        /* The engine clock's now: the wall clock unless a simulation in this process scaled it, in which
         * case it may run ahead of the wall clock (by what earlier scaled runs gained), and timestamps read
         * by the engine must be on its clock. */
        s->epoch_usec = clk_now();
}

double sim_now(const struct sim *s)
{
        if (s->manual_clock)
                return s->manual_now;
        if (!s->started)
                return 0;
        return (double)(now_monotonic_usec() - s->start_mono) / 1e6 * s->time_scale;
}

void sim_set_now(struct sim *s, double t)
{
        if (s->manual_clock && t > s->manual_now)
                s->manual_now = t;
}

/* Scenario seconds map one to one onto wall-clock seconds from the epoch: a client running on the engine
 * clock (core.h, scaled by the same time_scale from sim_start on) sees every timestamp and duration with its
 * scenario meaning (a 30 s grace period is 30 s on that clock). */
uint64_t sim_wall_usec(const struct sim *s, double t)
{
        return (uint64_t)((int64_t)s->epoch_usec + (int64_t)llround(t * 1e6));
}

double sim_time_scale(const struct sim *s)
{
        return s->time_scale;
}
