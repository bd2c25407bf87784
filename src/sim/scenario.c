/* Scenario files (docs/contracts.md §3): loading and validation. Every error names file, line and the key's
 * path. */
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

static int parse_nodes(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = { "name",          "instance_id", "zone", "capacity_type",
                                            "instance_type", "allocatable", NULL };
        static const char *const akeys[] = { "cpu", "memory", "pods", NULL };
        const struct ynode *seq;
        int r = sim_sc_get_seq(c, root, "nodes", &seq);
        if (r < 0)
                return r;
        if (!seq || seq->n_children == 0)
                return sim_sc_fail(c, seq ? seq : root, "nodes", "at least one node is required");
        if (seq->n_children > SIM_MAX_NODES)
                return sim_sc_fail(c, seq, "nodes", "%zu nodes: the simulator takes at most %d",
                                   seq->n_children, SIM_MAX_NODES);
        sc->nodes = calloc(seq->n_children, sizeof(*sc->nodes));
        if (!sc->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                const struct ynode *m = &seq->children[i];
                struct sim_sc_node *n = &sc->nodes[i];
                sc->n_nodes = i + 1;
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "nodes[%zu]", i);
                r = sim_sc_check_map(c, m, p, keys);
                if (r < 0)
                        return r;
                r = sim_sc_get_str(c, m, "name", p, true, &n->name);
                if (r < 0)
                        return r;
                char pk[PATH_MAX_LEN];
                sim_sc_sub(pk, p, "name");
                if (!sim_sc_valid_name(n->name))
                        return sim_sc_fail(c, ynode_get(m, "name"), pk, "must be a lowercase DNS name");
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->nodes[j].name, n->name))
                                return sim_sc_fail(c, ynode_get(m, "name"), pk, "duplicate node name \"%s\"",
                                                   n->name);
                r = sim_sc_get_str(c, m, "instance_id", p, false, &n->instance_id);
                if (r < 0)
                        return r;
                sim_sc_sub(pk, p, "instance_id");
                if (n->instance_id && !sim_sc_valid_instance_id(n->instance_id))
                        return sim_sc_fail(c, ynode_get(m, "instance_id"), pk,
                                           "must look like i-0123456789abcdef0");
                if (!n->instance_id && !(n->instance_id = sim_sc_derive_instance_id(n->name)))
                        return -ENOMEM;
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->nodes[j].instance_id, n->instance_id))
                                return sim_sc_fail(c, ynode_get(m, "instance_id") ?: m, pk,
                                                   "duplicate instance id %s", n->instance_id);
                if ((r = sim_sc_get_str(c, m, "zone", p, false, &n->zone)) < 0 ||
                    (r = sim_sc_get_str(c, m, "capacity_type", p, false, &n->capacity_type)) < 0 ||
                    (r = sim_sc_get_str(c, m, "instance_type", p, false, &n->instance_type)) < 0)
                        return r;
                if ((!n->zone && !(n->zone = strdup("us-east-1a"))) ||
                    (!n->capacity_type && !(n->capacity_type = strdup("on-demand"))) ||
                    (!n->instance_type && !(n->instance_type = strdup("m5.large"))))
                        return -ENOMEM;
                sim_sc_sub(pk, p, "capacity_type");
                if (!streq(n->capacity_type, "spot") && !streq(n->capacity_type, "on-demand"))
                        return sim_sc_fail(c, ynode_get(m, "capacity_type"), pk,
                                           "must be spot or on-demand");
                n->cpu_millis = 2000;
                n->memory_bytes = 8LL << 30;
                n->pods = 110;
                const struct ynode *a = ynode_get(m, "allocatable");
                sim_sc_sub(pk, p, "allocatable");
                if (a) {
                        r = sim_sc_check_map(c, a, pk, akeys);
                        if (r < 0)
                                return r;
                        if ((r = sim_sc_get_quantity(c, a, "cpu", pk, true, &n->cpu, &n->cpu_millis)) < 0 ||
                            (r = sim_sc_get_quantity(c, a, "memory", pk, false, &n->memory,
                                                     &n->memory_bytes)) < 0 ||
                            (r = sim_sc_get_int(c, a, "pods", pk, 1, 100000, &n->pods)) < 0)
                                return r;
                }
                if ((!n->cpu && !(n->cpu = strprintf("%lldm", (long long)n->cpu_millis))) ||
                    (!n->memory && !(n->memory = strprintf("%lld", (long long)n->memory_bytes))))
                        return -ENOMEM;
        }
        return 0;
}

static int parse_provisioning(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = { "node_launch_seconds", "instance_types", NULL };
        static const char *const tkeys[] = { "name", "cpu", "memory", NULL };
        sc->node_launch_seconds = 60;
        const struct ynode *m = ynode_get(root, "provisioning");
        if (!m || ynode_is_null(m))
                return 0;
        int r = sim_sc_check_map(c, m, "provisioning", keys);
        if (r < 0 || (r = sim_sc_get_double(c, m, "node_launch_seconds", "provisioning", 0, 86400,
                                            &sc->node_launch_seconds)) < 0)
                return r;
        const struct ynode *seq = ynode_get(m, "instance_types");
        if (!seq || ynode_is_null(seq))
                return 0;
        if (seq->type != YNODE_SEQ)
                return sim_sc_fail(c, seq, "provisioning.instance_types", "must be a list");
        sc->itypes = calloc(seq->n_children ?: 1, sizeof(*sc->itypes));
        if (!sc->itypes)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                const struct ynode *t = &seq->children[i];
                struct sim_sc_itype *it = &sc->itypes[i];
                sc->n_itypes = i + 1;
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "provisioning.instance_types[%zu]", i);
                if ((r = sim_sc_check_map(c, t, p, tkeys)) < 0 ||
                    (r = sim_sc_get_str(c, t, "name", p, true, &it->name)) < 0 ||
                    (r = sim_sc_get_quantity(c, t, "cpu", p, true, &it->cpu, &it->cpu_millis)) < 0 ||
                    (r = sim_sc_get_quantity(c, t, "memory", p, false, &it->memory, &it->memory_bytes)) < 0)
                        return r;
                char pk[PATH_MAX_LEN];
                sim_sc_sub(pk, p, !it->cpu ? "cpu" : "memory");
                if (!it->cpu || !it->memory)
                        return sim_sc_fail(c, t, pk, "required");
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->itypes[j].name, it->name)) {
                                sim_sc_sub(pk, p, "name");
                                return sim_sc_fail(c, ynode_get(t, "name"), pk,
                                                   "duplicate instance type \"%s\"", it->name);
                        }
        }
        return 0;
}

/* autoscaling: the group's termination hook as DescribeLifecycleHooks shows it. */
static int parse_autoscaling(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = { "heartbeat_timeout_seconds", "instance_metadata_tags", NULL };
        const struct ynode *m = ynode_get(root, "autoscaling");
        int64_t timeout = 3600; /* Auto Scaling's default */
        bool tags = true;
        int r;

        sc->hook_heartbeat_timeout = 3600;
        if (!m || ynode_is_null(m))
                return 0;
        r = sim_sc_check_map(c, m, "autoscaling", keys);
        /* Auto Scaling's own bounds: 30 s to 7200 s. */
        if (r < 0 ||
            (r = sim_sc_get_int(c, m, "heartbeat_timeout_seconds", "autoscaling", 30, 7200, &timeout)) < 0)
                return r;
        sc->hook_heartbeat_timeout = (int)timeout;
        /* IMDS tags/instance (the group's name tag), as InstanceMetadataTags=enabled serves it. */
        r = sim_sc_get_bool(c, m, "instance_metadata_tags", "autoscaling", &tags);
        if (r < 0)
                return r;
        sc->no_instance_metadata_tags = !tags;
        return 0;
}

static int parse_faults(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        /* Shares of requests (0..1) that the simulator's surfaces answer with a fault; server.c and
         * surfaces.c apply them (sim_server_options_from_scenario), docs/faults.md describes them. */
        static const char *const rates[] = { "watch_drop_rate",    "watch_gone_rate",
                                             "api_throttle_rate",  "sqs_error_rate",
                                             "sqs_duplicate_rate", "imds_error_rate",
                                             "imds_timeout_rate",  "sts_error_rate",
                                             "sqs_throttle_rate",  NULL };
        static const char *const keys[] = { "api_error_rate",
                                            "api_latency_ms",
                                            "watch_drop_rate",
                                            "watch_gone_rate",
                                            "api_throttle_rate",
                                            "sqs_error_rate",
                                            "sqs_duplicate_rate",
                                            "sqs_throttle_rate",
                                            "imds_error_rate",
                                            "imds_timeout_rate",
                                            "sts_error_rate",
                                            "node_label_latency_ms",
                                            NULL };
        const struct ynode *m = ynode_get(root, "faults");
        if (!m || ynode_is_null(m))
                return 0;
        int r = sim_sc_check_map(c, m, "faults", keys);
        if (r < 0 ||
            (r = sim_sc_get_double(c, m, "api_error_rate", "faults", 0, 1, &sc->api_error_rate)) < 0 ||
            (r = sim_sc_get_int(c, m, "api_latency_ms", "faults", 0, 600000, &sc->api_latency_ms)) < 0 ||
            (r = sim_sc_get_int(c, m, "node_label_latency_ms", "faults", 0, 600000, &(int64_t){ 0 })) < 0)
                return r;
        for (size_t i = 0; rates[i]; i++) {
                double rate = 0;
                if ((r = sim_sc_get_double(c, m, rates[i], "faults", 0, 1, &rate)) < 0)
                        return r;
        }
        return 0;
}

/* api_priority_fairness: {qps, burst, retry_after_seconds}; server.c applies it
 * (sim_server_options_from_scenario), docs/contracts.md §3 describes it. */
static int parse_apf(struct sctx *c, const struct ynode *root)
{
        static const char *const keys[] = { "qps", "burst", "retry_after_seconds", NULL };
        const struct ynode *m = ynode_get(root, "api_priority_fairness");
        double qps = 0, burst = 0;
        int64_t retry = 1;
        if (!m || ynode_is_null(m))
                return 0;
        int r = sim_sc_check_map(c, m, "api_priority_fairness", keys);
        if (r < 0 || (r = sim_sc_get_double(c, m, "qps", "api_priority_fairness", 0.1, 1e6, &qps)) < 0 ||
            (r = sim_sc_get_double(c, m, "burst", "api_priority_fairness", 1, 1e6, &burst)) < 0 ||
            (r = sim_sc_get_int(c, m, "retry_after_seconds", "api_priority_fairness", 1, 60, &retry)) < 0)
                return r;
        if (!ynode_get(m, "qps"))
                return sim_sc_fail(c, m, "api_priority_fairness.qps", "required");
        return 0;
}

void sim_sc_node_clear(struct sim_sc_node *n)
{
        free(n->name);
        free(n->instance_id);
        free(n->zone);
        free(n->capacity_type);
        free(n->instance_type);
        free(n->cpu);
        free(n->memory);
        *n = (struct sim_sc_node){ 0 };
}

struct sim_scenario *sim_scenario_free(struct sim_scenario *sc)
{
        if (!sc)
                return NULL;
        free(sc->name);
        free(sc->mode);
        for (size_t i = 0; i < sc->n_nodes; i++)
                sim_sc_node_clear(&sc->nodes[i]);
        free(sc->nodes);
        for (size_t i = 0; i < sc->n_workloads; i++) {
                struct sim_sc_workload *w = &sc->workloads[i];
                free(w->name);
                free(w->ns);
                free(w->placement);
                free(w->cpu);
                free(w->memory);
                free(w->priority_class);
                cJSON_Delete(w->annotations);
        }
        free(sc->workloads);
        for (size_t i = 0; i < sc->n_events; i++) {
                free(sc->events[i].type);
                free(sc->events[i].code);
                free(sc->events[i].launch_name);
                free(sc->events[i].launch_instance);
        }
        free(sc->events);
        for (size_t i = 0; i < sc->n_itypes; i++) {
                free(sc->itypes[i].name);
                free(sc->itypes[i].cpu);
                free(sc->itypes[i].memory);
        }
        free(sc->itypes);
        free(sc);
        return NULL;
}

static void sim_scenario_freep(struct sim_scenario **sc)
{
        sim_scenario_free(*sc);
}

int sim_scenario_parse(const struct ynode *root, const char *file, struct sim_scenario **ret,
                       char **ret_error)
{
        static const char *const keys[] = { "name",
                                            "mode",
                                            "budget_seconds",
                                            "seed",
                                            "nodes",
                                            "workloads",
                                            "events",
                                            "provisioning",
                                            "faults",
                                            "autoscaling",
                                            "api_priority_fairness",
                                            "pod_removal_seconds",
                                            NULL };
        struct sctx c = { .file = file ?: "scenario", .error = ret_error };
        _cleanup_(sim_scenario_freep) struct sim_scenario *sc = calloc(1, sizeof(*sc));
        if (!sc)
                return -ENOMEM;
        int r = sim_sc_check_map(&c, root, "", keys);
        if (r < 0)
                return r;
        if ((r = sim_sc_get_str(&c, root, "name", "", true, &sc->name)) < 0 ||
            (r = sim_sc_get_str(&c, root, "mode", "", false, &sc->mode)) < 0)
                return r;
        if (!sc->mode && !(sc->mode = strdup("agent")))
                return -ENOMEM;
        if (!streq(sc->mode, "agent") && !streq(sc->mode, "controller"))
                return sim_sc_fail(&c, ynode_get(root, "mode"), "mode", "must be agent or controller");
        sc->budget = 120;
        int64_t seed = 1;
        if ((r = sim_sc_get_double(&c, root, "budget_seconds", "", 1, 86400 * 30, &sc->budget)) < 0 ||
            (r = sim_sc_get_int(&c, root, "seed", "", 0, INT64_MAX, &seed)) < 0 ||
            (r = sim_sc_get_double(&c, root, "pod_removal_seconds", "", 0, 600, &sc->pod_removal)) < 0)
                return r;
        sc->seed = (uint64_t)seed;
        if ((r = parse_nodes(&c, root, sc)) < 0 || (r = sim_sc_parse_workloads(&c, root, sc)) < 0 ||
            (r = sim_sc_parse_events(&c, root, sc)) < 0 || (r = parse_provisioning(&c, root, sc)) < 0 ||
            (r = parse_faults(&c, root, sc)) < 0 || (r = parse_autoscaling(&c, root, sc)) < 0 ||
            (r = parse_apf(&c, root)) < 0)
                return r;
        *ret = TAKE_PTR(sc);
        return 0;
}

int sim_scenario_load(const char *path, struct ynode **ret_tree, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        int r = yaml_load_file(path, SCENARIO_MAX_BYTES, &tree, ret_error);
        if (r < 0)
                return r;
        _cleanup_(sim_scenario_freep) struct sim_scenario *sc = NULL;
        r = sim_scenario_parse(tree, path, &sc, ret_error);
        if (r < 0)
                return r;
        *ret_tree = TAKE_PTR(tree);
        return 0;
}
