/* The engine clock: the real wall clock, optionally running N times faster for simulations. */
#include <pthread.h>

#include "spotdrain/core.h"

/* The clock is anchored at the moment of the last scale change: engine time = anchor_clk + (monotonic now -
 * anchor_mono) * scale. Until the first change the real wall clock is used directly, so that NTP steps keep
 * being followed in production. A mutex guards the anchor because simulator threads read the clock too. */
static pthread_mutex_t clk_lock = PTHREAD_MUTEX_INITIALIZER;
static bool clk_anchored;
static double clk_factor = 1.0;
static uint64_t clk_anchor_clk;
static uint64_t clk_anchor_mono;

static uint64_t clk_now_locked(uint64_t mono)
{
        if (!clk_anchored)
                return now_realtime_usec();
        return clk_anchor_clk + (uint64_t)((double)(mono - clk_anchor_mono) * clk_factor);
}

void clk_set_scale(double scale)
{
        if (!(scale > 0))
                scale = 1.0;

        pthread_mutex_lock(&clk_lock);
        uint64_t mono = now_monotonic_usec();
        /* Re-anchor at the current engine time so the clock stays continuous across the switch. */
        clk_anchor_clk = clk_now_locked(mono);
        clk_anchor_mono = mono;
        clk_factor = scale;
        clk_anchored = true;
        pthread_mutex_unlock(&clk_lock);
}

double clk_scale(void)
{
        pthread_mutex_lock(&clk_lock);
        double s = clk_factor;
        pthread_mutex_unlock(&clk_lock);
        return s;
}

uint64_t clk_now(void)
{
        pthread_mutex_lock(&clk_lock);
        uint64_t now = clk_now_locked(now_monotonic_usec());
        pthread_mutex_unlock(&clk_lock);
        return now;
}

uint64_t clk_to_monotonic(uint64_t clk_usec)
{
        pthread_mutex_lock(&clk_lock);
        uint64_t mono = now_monotonic_usec();
        uint64_t now = clk_now_locked(mono);
        double factor = clk_factor;
        pthread_mutex_unlock(&clk_lock);

        /* Instants already passed are due now. */
        if (clk_usec <= now)
                return mono;
        double delta = (double)(clk_usec - now) / factor;
        if (delta >= (double)(UINT64_MAX - mono))
                return UINT64_MAX;
        return mono + (uint64_t)delta;
}
