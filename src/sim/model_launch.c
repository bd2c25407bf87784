/* Instances launched through the simulated AWS surfaces and the launch hooks they wait on. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

int sim_launch_instance(struct sim *s, const char *instance_type, const char *zone,
                        const char *capacity_type, char **ret_instance_id)
{
        sim_begin(s);
        const struct sim_sc_itype *it = NULL;
        for (size_t i = 0; i < s->sc->n_itypes && !it; i++)
                if (streq(s->sc->itypes[i].name, instance_type))
                        it = &s->sc->itypes[i];
        if (!it || isempty(zone) || (!streq(capacity_type, "spot") && !streq(capacity_type, "on-demand")))
                return -EINVAL;
        struct sim_launch *a = realloc(s->launches, (s->n_launches + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->launches = a;
        struct sim_launch *l = &s->launches[s->n_launches];
        *l = (struct sim_launch){ .itype = it,
                                  .requested_at = s->t,
                                  .ready_at = s->t + s->sc->node_launch_seconds };
        _cleanup_free_ char *id = strprintf("i-0%016llx", (unsigned long long)sim_rng_next(s));
        if (!id || !(l->instance_id = strdup(id)) || !(l->zone = strdup(zone)) ||
            !(l->capacity_type = strdup(capacity_type))) {
                free(l->instance_id);
                free(l->zone);
                return -ENOMEM;
        }
        s->n_launches++;
        /* No object changed, but waiters must see the new due time. */
        sim_broadcast(s);
        if (ret_instance_id)
                *ret_instance_id = TAKE_PTR(id);
        return 0;
}

size_t sim_launch_count(const struct sim *s)
{
        return s->n_launches;
}

size_t sim_launch_hooks_pending(const struct sim *s)
{
        size_t n = 0;
        for (size_t i = 0; i < s->n_launches; i++)
                n += s->launches[i].hooked && !s->launches[i].result[0];
        return n;
}

bool sim_has_launch_hook(const struct sim *s)
{
        for (size_t i = 0; i < s->sc->n_events; i++)
                if (streq(s->sc->events[i].type, "asg-launch"))
                        return true;
        return false;
}

int sim_launch_hook(const struct sim *s, size_t i, const char **ret_instance_id, double *ret_at)
{
        if (i >= s->n_launches || !s->launches[i].hooked)
                return -ENOENT;
        *ret_instance_id = s->launches[i].instance_id;
        *ret_at = s->launches[i].requested_at;
        return 0;
}

static struct sim_launch *hooked_launch(const struct sim *s, const char *instance_id)
{
        for (size_t i = 0; instance_id && i < s->n_launches; i++)
                if (s->launches[i].hooked && streq(s->launches[i].instance_id, instance_id))
                        return &s->launches[i];
        return NULL;
}

int sim_launch_hook_complete(struct sim *s, const char *instance_id, const char *result)
{
        sim_begin(s);
        struct sim_launch *l = hooked_launch(s, instance_id);
        if (!l || l->result[0])
                return -ENOENT;
        if (!result) { /* a heartbeat: alive another HeartbeatTimeout */
                l->last_beat = s->t;
                return 0;
        }
        snprintf(l->result, sizeof(l->result), "%s", result);
        l->completed_at = s->t;
        return 0;
}

const char *sim_launch_hook_state(const struct sim *s, const char *instance_id)
{
        const struct sim_launch *l = hooked_launch(s, instance_id);
        if (!l)
                return NULL;
        if (!l->result[0])
                return "Pending:Wait";
        return streq(l->result, "CONTINUE") ? "InService" : "Terminating";
}
