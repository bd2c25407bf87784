/* The executor's trigger: something changed, act soon (exec_kick), once for a burst of changes, through the
 * act() that executor.c puts in the drain (x->act), so that the parts below the act loop call none of its
 * functions. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/executor_internal.h"

static void kick_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        x->kick = NULL; /* released by the loop as it fired */
        x->act(x);
}

void exec_estimates_wait_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        x->estimates_wait = NULL; /* released by the loop as it fired */
        exec_kick(x);
}

void exec_startups_wait_fire(void *userdata)
{
        struct drain_exec *x = userdata;
        x->startups_wait = NULL; /* released by the loop as it fired */
        exec_kick(x);
}

void exec_estimates_read(void *userdata)
{
        exec_kick(userdata);
}

void exec_kick(struct drain_exec *x)
{
        if (x->finished || x->kick)
                return;
        if (timer_start_in(x->loop, 0, kick_fire, x, &x->kick) < 0)
                x->act(x); /* no timer (ENOMEM): act now rather than never */
}
