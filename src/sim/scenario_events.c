/* Scenario files: the events section (notices, launches, rollouts and scales, maintenance). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "sim/scenario_internal.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static const char *const event_types[] = {
        "spot-interruption",
        "rebalance-recommendation",
        "scheduled-change",
        "asg-lifecycle-terminate",
        "rollout", /* {at, type, workload}: a rolling restart, one pod at a time */
        "scale",   /* {at, type, workload, replicas} */
        /* {at, type, node: NEW, instance_id, join_seconds, ready_seconds}: an instance launched into the
         * group under its launch hook, joining as NEW (NotReady) and turning Ready later, or never */
        "asg-launch",
};

/* asg-launch: a node that is not in nodes: yet (it joins later), joining join_seconds after the event and
 * turning Ready ready_seconds after it ("never": stays NotReady; default: as it joins). */
static int parse_launch_event(struct sctx *c, const struct ynode *m, const char *p,
                              const struct sim_scenario *sc, struct sim_sc_event *e)
{
        char pk[PATH_MAX_LEN];
        const struct ynode *ready = ynode_get(m, "ready_seconds");
        int r;

        sim_sc_sub(pk, p, "workload");
        if (ynode_get(m, "workload") || ynode_get(m, "replicas"))
                return sim_sc_fail(c, ynode_get(m, ynode_get(m, "workload") ? "workload" : "replicas"), pk,
                                   "only rollout and scale events name a workload");
        if ((r = sim_sc_get_str(c, m, "node", p, true, &e->launch_name)) < 0 ||
            (r = sim_sc_get_str(c, m, "instance_id", p, false, &e->launch_instance)) < 0)
                return r;
        sim_sc_sub(pk, p, "node");
        if (sim_sc_find_node(sc, e->launch_name) >= 0)
                return sim_sc_fail(c, ynode_get(m, "node"), pk,
                                   "an asg-launch event names a new node; \"%s\" is one of nodes",
                                   e->launch_name);
        sim_sc_sub(pk, p, "instance_id");
        if (e->launch_instance && !sim_sc_valid_instance_id(e->launch_instance))
                return sim_sc_fail(c, ynode_get(m, "instance_id"), pk, "not an EC2 instance id");
        if (!e->launch_instance && !(e->launch_instance = sim_sc_derive_instance_id(e->launch_name)))
                return -ENOMEM;
        e->join_after = 5;
        if ((r = sim_sc_get_double(c, m, "join_seconds", p, 0, 86400, &e->join_after)) < 0)
                return r;
        e->ready_after = e->join_after;
        if (ready && ready->type == YNODE_SCALAR && streq(ready->value, "never"))
                e->ready_after = -1;
        else if ((r = sim_sc_get_double(c, m, "ready_seconds", p, e->join_after, 86400, &e->ready_after)) <
                 0)
                return r;
        return 0;
}

static int event_cmp(const void *a, const void *b)
{
        const struct sim_sc_event *x = a, *y = b;
        if (x->at != y->at)
                return x->at < y->at ? -1 : 1;
        return 0;
}

/* rollout and scale: `workload` is NAME (in any namespace, when only one has it) or NAMESPACE/NAME, of a
 * Deployment or StatefulSet; scale takes `replicas` too. */
static int parse_workload_event(struct sctx *c, const struct ynode *m, const char *p,
                                const struct sim_scenario *sc, struct sim_sc_event *e)
{
        char pk[PATH_MAX_LEN];
        _cleanup_free_ char *name = NULL;
        int64_t replicas = -1;
        int r;
        sim_sc_sub(pk, p, "node");
        if (ynode_get(m, "node"))
                return sim_sc_fail(c, ynode_get(m, "node"), pk, "a %s event names a workload, not a node",
                                   e->type);
        if ((r = sim_sc_get_str(c, m, "workload", p, true, &name)) < 0)
                return r;
        const char *slash = strchr(name, '/');
        size_t found = SIZE_MAX, n_found = 0;
        for (size_t i = 0; i < sc->n_workloads; i++) {
                const struct sim_sc_workload *w = &sc->workloads[i];
                bool match = slash ? strlen(w->ns) == (size_t)(slash - name) &&
                                         strncmp(w->ns, name, (size_t)(slash - name)) == 0 &&
                                         streq(w->name, slash + 1)
                                   : streq(w->name, name);
                if (match) {
                        found = i;
                        n_found++;
                }
        }
        sim_sc_sub(pk, p, "workload");
        if (n_found == 0)
                return sim_sc_fail(c, ynode_get(m, "workload"), pk, "no workload named \"%s\"", name);
        if (n_found > 1)
                return sim_sc_fail(c, ynode_get(m, "workload"), pk,
                                   "\"%s\" is in several namespaces: write NAMESPACE/NAME", name);
        enum sim_wl_kind kind = sc->workloads[found].kind;
        if (kind != SIM_WL_DEPLOYMENT && kind != SIM_WL_STATEFULSET)
                return sim_sc_fail(c, ynode_get(m, "workload"), pk,
                                   "a %s event needs a Deployment or StatefulSet", e->type);
        e->workload = found;
        e->node = SIZE_MAX;
        sim_sc_sub(pk, p, "replicas");
        if (streq(e->type, "rollout")) {
                if (ynode_get(m, "replicas"))
                        return sim_sc_fail(c, ynode_get(m, "replicas"), pk,
                                           "only a scale event takes replicas");
                return 0;
        }
        if (!ynode_get(m, "replicas"))
                return sim_sc_fail(c, m, pk, "required");
        if ((r = sim_sc_get_int(c, m, "replicas", p, 0, 100000, &replicas)) < 0)
                return r;
        e->replicas = (int)replicas;
        return 0;
}

/* The IMDS Codes of scheduled events (events/maintenance/scheduled); the reboots end with the node back. */
static const char *const maintenance_codes[] = {
        "instance-retirement", "instance-stop", "system-maintenance", "system-reboot", "instance-reboot",
};

bool sim_maintenance_is_reboot(const char *code)
{
        return streq(code, "system-reboot") || streq(code, "instance-reboot");
}

/* scheduled-change: `code` and, for a reboot, `reboot_seconds`; no other event takes them. */
static int parse_maintenance(struct sctx *c, const struct ynode *m, const char *p, struct sim_sc_event *e)
{
        char pk[PATH_MAX_LEN];
        int r;
        bool scheduled = streq(e->type, "scheduled-change");

        sim_sc_sub(pk, p, "code");
        if (!scheduled && (ynode_get(m, "code") || ynode_get(m, "reboot_seconds")))
                return sim_sc_fail(c, ynode_get(m, ynode_get(m, "code") ? "code" : "reboot_seconds"), pk,
                                   "only a scheduled-change event takes a code or reboot_seconds");
        if (!scheduled)
                return 0;
        if ((r = sim_sc_get_str(c, m, "code", p, false, &e->code)) < 0)
                return r;
        if (!e->code && !(e->code = strdup(maintenance_codes[0])))
                return -ENOMEM;
        bool known = false;
        for (size_t k = 0; k < ARRAY_SIZE(maintenance_codes); k++)
                known = known || streq(e->code, maintenance_codes[k]);
        if (!known)
                return sim_sc_fail(c, ynode_get(m, "code"), pk, "unknown maintenance code \"%s\"", e->code);
        e->reboot_seconds = 60;
        sim_sc_sub(pk, p, "reboot_seconds");
        if (ynode_get(m, "reboot_seconds") && !sim_maintenance_is_reboot(e->code))
                return sim_sc_fail(c, ynode_get(m, "reboot_seconds"), pk,
                                   "only a reboot takes reboot_seconds");
        return sim_sc_get_double(c, m, "reboot_seconds", p, 0, 3600, &e->reboot_seconds);
}

int sim_sc_parse_events(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = {
                "at",           "type",          "node", "workload",       "replicas", "instance_id",
                "join_seconds", "ready_seconds", "code", "reboot_seconds", NULL
        };
        const struct ynode *seq;
        int r = sim_sc_get_seq(c, root, "events", &seq);
        if (r < 0 || !seq)
                return r;
        sc->events = calloc(seq->n_children ?: 1, sizeof(*sc->events));
        if (!sc->events)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                const struct ynode *m = &seq->children[i];
                struct sim_sc_event *e = &sc->events[i];
                sc->n_events = i + 1;
                char p[PATH_MAX_LEN], pk[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "events[%zu]", i);
                if ((r = sim_sc_check_map(c, m, p, keys)) < 0)
                        return r;
                sim_sc_sub(pk, p, "at");
                if (!ynode_get(m, "at"))
                        return sim_sc_fail(c, m, pk, "required");
                if ((r = sim_sc_get_double(c, m, "at", p, 0, 1e9, &e->at)) < 0 ||
                    (r = sim_sc_get_str(c, m, "type", p, true, &e->type)) < 0)
                        return r;
                bool known = false;
                for (size_t k = 0; k < ARRAY_SIZE(event_types); k++)
                        known = known || streq(e->type, event_types[k]);
                sim_sc_sub(pk, p, "type");
                if (!known)
                        return sim_sc_fail(c, ynode_get(m, "type"), pk, "unknown event type \"%s\"",
                                           e->type);
                if ((r = parse_maintenance(c, m, p, e)) < 0)
                        return r;
                if (streq(e->type, "rollout") || streq(e->type, "scale")) {
                        r = parse_workload_event(c, m, p, sc, e);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (streq(e->type, "asg-launch")) {
                        if ((r = parse_launch_event(c, m, p, sc, e)) < 0)
                                return r;
                        continue;
                }
                sim_sc_sub(pk, p, "join_seconds");
                if (ynode_get(m, "instance_id") || ynode_get(m, "join_seconds") ||
                    ynode_get(m, "ready_seconds"))
                        return sim_sc_fail(c, m, pk, "only an asg-launch event launches a node");
                sim_sc_sub(pk, p, "workload");
                if (ynode_get(m, "workload") || ynode_get(m, "replicas"))
                        return sim_sc_fail(c,
                                           ynode_get(m, ynode_get(m, "workload") ? "workload" : "replicas"),
                                           pk, "only rollout and scale events name a workload");
                _cleanup_free_ char *node = NULL;
                if ((r = sim_sc_get_str(c, m, "node", p, true, &node)) < 0)
                        return r;
                ssize_t ni = sim_sc_find_node(sc, node);
                sim_sc_sub(pk, p, "node");
                if (ni < 0)
                        return sim_sc_fail(c, ynode_get(m, "node"), pk, "no node named \"%s\"", node);
                e->node = (size_t)ni;
        }
        /* Insertion sort: stable, so events at the same time keep the file's order. */
        for (size_t i = 1; i < sc->n_events; i++)
                for (size_t j = i; j > 0 && event_cmp(&sc->events[j - 1], &sc->events[j]) > 0; j--) {
                        struct sim_sc_event tmp = sc->events[j];
                        sc->events[j] = sc->events[j - 1];
                        sc->events[j - 1] = tmp;
                }
        return 0;
}
