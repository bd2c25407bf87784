/* Scenario files (docs/contracts.md §3): loading and validation. Every error names file, line and the key's
 * path. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define SCENARIO_MAX_BYTES (16u * 1024u * 1024u)
#define PATH_MAX_LEN       256

struct sctx {
        const char *file;
        char **error;
};

static int sc_fail(struct sctx *c, const struct ynode *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int sc_fail(struct sctx *c, const struct ynode *n, const char *path, const char *fmt, ...)
{
        if (c->error) {
                char why[512];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(why, sizeof(why), fmt, ap);
                va_end(ap);
                free(*c->error);
                *c->error = strprintf("%s:%u: %s: %s", c->file, n ? n->line : 1, path, why);
        }
        return -EINVAL;
}

/* Appends a key to a path ("workloads[1].pdb" + "max_unavailable"); over-long paths are cut short. */
static void sub(char out[static PATH_MAX_LEN], const char *path, const char *key)
{
        int n = isempty(path) ? snprintf(out, PATH_MAX_LEN, "%s", key)
                              : snprintf(out, PATH_MAX_LEN, "%s.%s", path, key);
        if (n < 0 || n >= PATH_MAX_LEN)
                out[PATH_MAX_LEN - 1] = 0;
}

static int check_map(struct sctx *c, const struct ynode *n, const char *path, const char *const *allowed)
{
        if (!n || n->type != YNODE_MAP)
                return sc_fail(c, n, isempty(path) ? "scenario" : path, "must be a map");
        YNODE_FOREACH (k, n) {
                bool ok = false;
                for (size_t i = 0; allowed[i]; i++)
                        if (streq(k->key, allowed[i]))
                                ok = true;
                char p[PATH_MAX_LEN];
                sub(p, path, k->key);
                if (!ok)
                        return sc_fail(c, k, p, "unknown key");
                YNODE_FOREACH (k2, n) {
                        if (k2 >= k)
                                break;
                        if (streq(k2->key, k->key))
                                return sc_fail(c, k, p, "duplicate key");
                }
        }
        return 0;
}

/* A scalar string; *ret stays as is when the key is absent. */
static int get_str(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool required,
                   char **ret)
{
        const struct ynode *n = ynode_get(map, key);
        char p[PATH_MAX_LEN];
        sub(p, path, key);
        if (!n || ynode_is_null(n)) {
                if (required)
                        return sc_fail(c, n ? n : map, p, "required");
                return 0;
        }
        if (n->type != YNODE_SCALAR)
                return sc_fail(c, n, p, "must be a string");
        char *v = strdup(n->value);
        if (!v)
                return -ENOMEM;
        free(*ret);
        *ret = v;
        return 0;
}

static int get_int(struct sctx *c, const struct ynode *map, const char *key, const char *path, int64_t min,
                   int64_t max, int64_t *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sub(p, path, key);
        int64_t v;
        if (ynode_int(n, &v) < 0)
                return sc_fail(c, n, p, "must be an integer");
        if (v < min || v > max)
                return sc_fail(c, n, p, "must be between %lld and %lld", (long long)min, (long long)max);
        *ret = v;
        return 0;
}

static int get_double(struct sctx *c, const struct ynode *map, const char *key, const char *path, double min,
                      double max, double *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sub(p, path, key);
        double v;
        if (ynode_double(n, &v) < 0)
                return sc_fail(c, n, p, "must be a number");
        if (v < min || v > max)
                return sc_fail(c, n, p, "must be between %g and %g", min, max);
        *ret = v;
        return 0;
}

static int get_bool(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sub(p, path, key);
        if (ynode_bool(n, ret) < 0)
                return sc_fail(c, n, p, "must be true or false");
        return 0;
}

static int get_quantity(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool cpu,
                        char **ret_text, int64_t *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sub(p, path, key);
        const char *s = ynode_str(n);
        int64_t v;
        if (!s || (cpu ? parse_cpu_millis(s, &v) : parse_bytes(s, &v)) < 0 || v < 0)
                return sc_fail(c, n, p, "must be a %s quantity", cpu ? "CPU" : "memory");
        if (free_and_strdup(ret_text, s) < 0)
                return -ENOMEM;
        *ret = v;
        return 0;
}

static int get_seq(struct sctx *c, const struct ynode *map, const char *key, const struct ynode **ret)
{
        const struct ynode *n = ynode_get(map, key);
        *ret = NULL;
        if (!n || ynode_is_null(n))
                return 0;
        if (n->type != YNODE_SEQ)
                return sc_fail(c, n, key, "must be a list");
        *ret = n;
        return 0;
}

static bool valid_name(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
                        return false;
        }
        return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static bool valid_instance_id(const char *s)
{
        if (!startswith(s, "i-"))
                return false;
        size_t n = strlen(s + 2);
        if (n != 8 && n != 17)
                return false;
        for (size_t i = 2; s[i]; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Deterministic default: "i-0" followed by 16 hex digits of an FNV-1a hash of the node name. */
static char *derive_instance_id(const char *name)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = name; *p; p++) {
                h ^= (unsigned char)*p;
                h *= 1099511628211ULL;
        }
        return strprintf("i-0%016llx", (unsigned long long)h);
}

/* Bounds on a world the simulator builds (sim_new grows with the pods): a small file must not ask for
 * millions of pods, e.g. many DaemonSets on many nodes. */
#define SIM_MAX_NODES 10000
#define SIM_MAX_PODS  200000

static int parse_nodes(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = { "name",          "instance_id", "zone", "capacity_type",
                                            "instance_type", "allocatable", NULL };
        static const char *const akeys[] = { "cpu", "memory", "pods", NULL };
        const struct ynode *seq;
        int r = get_seq(c, root, "nodes", &seq);
        if (r < 0)
                return r;
        if (!seq || seq->n_children == 0)
                return sc_fail(c, seq ? seq : root, "nodes", "at least one node is required");
        if (seq->n_children > SIM_MAX_NODES)
                return sc_fail(c, seq, "nodes", "%zu nodes: the simulator takes at most %d", seq->n_children,
                               SIM_MAX_NODES);
        sc->nodes = calloc(seq->n_children, sizeof(*sc->nodes));
        if (!sc->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                const struct ynode *m = &seq->children[i];
                struct sim_sc_node *n = &sc->nodes[i];
                sc->n_nodes = i + 1;
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "nodes[%zu]", i);
                r = check_map(c, m, p, keys);
                if (r < 0)
                        return r;
                r = get_str(c, m, "name", p, true, &n->name);
                if (r < 0)
                        return r;
                char pk[PATH_MAX_LEN];
                sub(pk, p, "name");
                if (!valid_name(n->name))
                        return sc_fail(c, ynode_get(m, "name"), pk, "must be a lowercase DNS name");
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->nodes[j].name, n->name))
                                return sc_fail(c, ynode_get(m, "name"), pk, "duplicate node name \"%s\"",
                                               n->name);
                r = get_str(c, m, "instance_id", p, false, &n->instance_id);
                if (r < 0)
                        return r;
                sub(pk, p, "instance_id");
                if (n->instance_id && !valid_instance_id(n->instance_id))
                        return sc_fail(c, ynode_get(m, "instance_id"), pk,
                                       "must look like i-0123456789abcdef0");
                if (!n->instance_id && !(n->instance_id = derive_instance_id(n->name)))
                        return -ENOMEM;
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->nodes[j].instance_id, n->instance_id))
                                return sc_fail(c, ynode_get(m, "instance_id") ?: m, pk,
                                               "duplicate instance id %s", n->instance_id);
                if ((r = get_str(c, m, "zone", p, false, &n->zone)) < 0 ||
                    (r = get_str(c, m, "capacity_type", p, false, &n->capacity_type)) < 0 ||
                    (r = get_str(c, m, "instance_type", p, false, &n->instance_type)) < 0)
                        return r;
                if ((!n->zone && !(n->zone = strdup("us-east-1a"))) ||
                    (!n->capacity_type && !(n->capacity_type = strdup("on-demand"))) ||
                    (!n->instance_type && !(n->instance_type = strdup("m5.large"))))
                        return -ENOMEM;
                sub(pk, p, "capacity_type");
                if (!streq(n->capacity_type, "spot") && !streq(n->capacity_type, "on-demand"))
                        return sc_fail(c, ynode_get(m, "capacity_type"), pk, "must be spot or on-demand");
                n->cpu_millis = 2000;
                n->memory_bytes = 8LL << 30;
                n->pods = 110;
                const struct ynode *a = ynode_get(m, "allocatable");
                sub(pk, p, "allocatable");
                if (a) {
                        r = check_map(c, a, pk, akeys);
                        if (r < 0)
                                return r;
                        if ((r = get_quantity(c, a, "cpu", pk, true, &n->cpu, &n->cpu_millis)) < 0 ||
                            (r = get_quantity(c, a, "memory", pk, false, &n->memory, &n->memory_bytes)) <
                                0 ||
                            (r = get_int(c, a, "pods", pk, 1, 100000, &n->pods)) < 0)
                                return r;
                }
                if ((!n->cpu && !(n->cpu = strprintf("%lldm", (long long)n->cpu_millis))) ||
                    (!n->memory && !(n->memory = strprintf("%lld", (long long)n->memory_bytes))))
                        return -ENOMEM;
        }
        return 0;
}

static ssize_t find_node(const struct sim_scenario *sc, const char *name)
{
        for (size_t i = 0; i < sc->n_nodes; i++)
                if (streq(sc->nodes[i].name, name))
                        return (ssize_t)i;
        return -1;
}

static int parse_pdb(struct sctx *c, const struct ynode *m, const char *path, struct sim_sc_workload *w)
{
        static const char *const keys[] = { "min_available", "max_unavailable",
                                            "unhealthy_pod_eviction_policy", NULL };
        int r = check_map(c, m, path, keys);
        if (r < 0)
                return r;
        const struct ynode *mn = ynode_get(m, "min_available"), *mx = ynode_get(m, "max_unavailable");
        if (!!mn == !!mx)
                return sc_fail(c, m, path, "exactly one of min_available and max_unavailable is required");
        const struct ynode *v = mn ?: mx;
        char p[PATH_MAX_LEN];
        sub(p, path, v->key);
        const char *s = ynode_str(v);
        struct intorstr *dst = mn ? &w->pdb.min_available : &w->pdb.max_unavailable;
        /* A quoted plain number is a string without '%' in Kubernetes' IntOrString: reject it as the API
         * would. */
        if (!s || sim_budget_parse(s, dst) < 0 || (v->quoted && !dst->percent) ||
            (dst->percent && dst->value > 100))
                return sc_fail(c, v, p, "must be an int or a percent");
        w->has_pdb = true;
        const struct ynode *pol = ynode_get(m, "unhealthy_pod_eviction_policy");
        if (pol) {
                sub(p, path, "unhealthy_pod_eviction_policy");
                const char *ps = ynode_str(pol);
                if (streq(ps, "AlwaysAllow"))
                        w->pdb_always_allow = true;
                else if (!streq(ps, "IfHealthyBudget"))
                        return sc_fail(c, pol, p, "must be IfHealthyBudget or AlwaysAllow");
        }
        return 0;
}

/* One IntOrString of a Deployment's rolling update: an int or a percent of at most 100. */
static int parse_rolling_value(struct sctx *c, const struct ynode *m, const char *key, const char *path,
                               struct intorstr *dst)
{
        const struct ynode *v = ynode_get(m, key);
        char p[PATH_MAX_LEN];
        if (!v)
                return 0;
        sub(p, path, key);
        const char *s = ynode_str(v);
        if (!s || sim_budget_parse(s, dst) < 0 || (v->quoted && !dst->percent) ||
            (dst->percent && dst->value > 100))
                return sc_fail(c, v, p, "must be an int or a percent");
        return 0;
}

/* target_group: {type: instance | ip, deregistration_delay_seconds: N (0-3600, ELBv2's default 300),
 * reaction_seconds: how long after a node's exclude label the controller deregisters its instance (0)}. */
static int parse_target_group(struct sctx *c, const struct ynode *m, const char *p,
                              struct sim_sc_workload *w)
{
        static const char *const keys[] = { "type", "deregistration_delay_seconds", "reaction_seconds",
                                            NULL };
        const struct ynode *tg = ynode_get(m, "target_group");
        _cleanup_free_ char *type = NULL;
        char pk[PATH_MAX_LEN];
        int r;

        if (!tg || ynode_is_null(tg))
                return 0;
        sub(pk, p, "target_group");
        w->tg_delay = 300;
        if ((r = check_map(c, tg, pk, keys)) < 0 || (r = get_str(c, tg, "type", pk, false, &type)) < 0 ||
            (r = get_double(c, tg, "deregistration_delay_seconds", pk, 0, 3600, &w->tg_delay)) < 0 ||
            (r = get_double(c, tg, "reaction_seconds", pk, 0, 3600, &w->tg_reaction)) < 0)
                return r;
        if (type && !streq(type, "instance") && !streq(type, "ip"))
                return sc_fail(c, ynode_get(tg, "type"), pk, "type must be instance or ip, not \"%s\"",
                               type);
        w->tg_ip = type && streq(type, "ip");
        w->has_tg = w->has_service = true;
        return 0;
}

/* strategy: {max_surge, max_unavailable} and hpa: {min_replicas, max_replicas}, both for Deployments. */
static int parse_deploy_extras(struct sctx *c, const struct ynode *m, const char *p,
                               struct sim_sc_workload *w)
{
        static const char *const skeys[] = { "max_surge", "max_unavailable", NULL };
        static const char *const hkeys[] = { "min_replicas", "max_replicas", NULL };
        const struct ynode *st = ynode_get(m, "strategy"), *hpa = ynode_get(m, "hpa");
        char pk[PATH_MAX_LEN];
        int r;

        /* As the API server defaults a RollingUpdate Deployment. */
        w->max_surge = (struct intorstr){ .set = true, .percent = true, .value = 25 };
        w->max_unavailable = w->max_surge;
        if (st && !ynode_is_null(st)) {
                sub(pk, p, "strategy");
                if (w->kind != SIM_WL_DEPLOYMENT)
                        return sc_fail(c, st, pk, "only a Deployment has a rolling update strategy");
                if ((r = check_map(c, st, pk, skeys)) < 0 ||
                    (r = parse_rolling_value(c, st, "max_surge", pk, &w->max_surge)) < 0 ||
                    (r = parse_rolling_value(c, st, "max_unavailable", pk, &w->max_unavailable)) < 0)
                        return r;
                if (w->max_surge.value == 0 && w->max_unavailable.value == 0)
                        return sc_fail(c, st, pk, "max_unavailable may not be 0 when max_surge is 0");
        }
        if (hpa && !ynode_is_null(hpa)) {
                int64_t lo = 1, hi = 0;
                sub(pk, p, "hpa");
                if (w->kind != SIM_WL_DEPLOYMENT)
                        return sc_fail(c, hpa, pk, "the simulator's autoscalers target Deployments only");
                if ((r = check_map(c, hpa, pk, hkeys)) < 0 ||
                    (r = get_int(c, hpa, "min_replicas", pk, 1, 100000, &lo)) < 0 ||
                    (r = get_int(c, hpa, "max_replicas", pk, 1, 100000, &hi)) < 0)
                        return r;
                if (!ynode_get(hpa, "max_replicas") || hi < lo)
                        return sc_fail(c, hpa, pk, "max_replicas is required, at least min_replicas");
                w->has_hpa = true;
                w->hpa_min = (int)lo;
                w->hpa_max = (int)hi;
        }
        return parse_target_group(c, m, p, w);
}

static int parse_kind(const char *s, enum sim_wl_kind *ret)
{
        static const char *const names[] = {
                [SIM_WL_DEPLOYMENT] = "Deployment",
                [SIM_WL_STATEFULSET] = "StatefulSet",
                [SIM_WL_DAEMONSET] = "DaemonSet",
                [SIM_WL_JOB] = "Job",
                [SIM_WL_POD] = "Pod",
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (streq(s, names[i])) {
                        *ret = (enum sim_wl_kind)i;
                        return 0;
                }
        return -EINVAL;
}

static int parse_workload(struct sctx *c, const struct ynode *m, const char *p, struct sim_scenario *sc,
                          struct sim_sc_workload *w)
{
        static const char *const keys[] = {
                "name",
                "namespace",
                "kind",
                "replicas",
                "placement",
                "requests",
                "termination_grace_seconds",
                "shutdown_seconds",
                "startup_seconds",
                "priority_class",
                "priority",
                "annotations",
                "emptydir",
                "pdb",
                "strategy",
                "hpa",
                "volume_detach_seconds",
                "service",
                "target_group",
                NULL,
        };
        static const char *const rkeys[] = { "cpu", "memory", NULL };
        char pk[PATH_MAX_LEN];
        int r = check_map(c, m, p, keys);
        if (r < 0)
                return r;
        if ((r = get_str(c, m, "name", p, true, &w->name)) < 0 ||
            (r = get_str(c, m, "namespace", p, false, &w->ns)) < 0)
                return r;
        sub(pk, p, "name");
        if (!valid_name(w->name) || strchr(w->name, '.') || strlen(w->name) > 50)
                return sc_fail(c, ynode_get(m, "name"), pk,
                               "must be a lowercase DNS label of at most 50 characters");
        if (!w->ns && !(w->ns = strdup("default")))
                return -ENOMEM;
        sub(pk, p, "namespace");
        if (!valid_name(w->ns) || strchr(w->ns, '.'))
                return sc_fail(c, ynode_get(m, "namespace"), pk, "must be a lowercase DNS label");
        _cleanup_free_ char *kind = NULL;
        if ((r = get_str(c, m, "kind", p, false, &kind)) < 0)
                return r;
        sub(pk, p, "kind");
        w->kind = SIM_WL_DEPLOYMENT;
        if (kind && parse_kind(kind, &w->kind) < 0)
                return sc_fail(c, ynode_get(m, "kind"), pk,
                               "must be Deployment, StatefulSet, DaemonSet, Job or Pod, not \"%s\"", kind);
        int64_t replicas = 1, grace = 30, prio = 0;
        if ((r = get_int(c, m, "replicas", p, 0, 100000, &replicas)) < 0 ||
            (r = get_int(c, m, "termination_grace_seconds", p, 0, 86400 * 7, &grace)) < 0 ||
            (r = get_double(c, m, "shutdown_seconds", p, 0, 86400, &w->shutdown)) < 0 ||
            (r = get_double(c, m, "startup_seconds", p, 0, 86400, &w->startup)) < 0 ||
            (r = get_str(c, m, "priority_class", p, false, &w->priority_class)) < 0 ||
            (r = get_int(c, m, "priority", p, -2147483648LL, 1000000000, &prio)) < 0 ||
            (r = get_bool(c, m, "emptydir", p, &w->emptydir)) < 0)
                return r;
        if ((r = get_bool(c, m, "service", p, &w->has_service)) < 0)
                return r;
        w->volume_detach = -1;
        if (ynode_get(m, "volume_detach_seconds") &&
            (r = get_double(c, m, "volume_detach_seconds", p, 0, 3600, &w->volume_detach)) < 0)
                return r;
        w->replicas = (int)replicas;
        w->grace = grace;
        w->has_priority = ynode_get(m, "priority") != NULL;
        w->priority = (int32_t)prio;
        if (w->priority_class && !*w->priority_class) {
                free(w->priority_class);
                w->priority_class = NULL;
        }

        const struct ynode *req = ynode_get(m, "requests");
        if (req) {
                sub(pk, p, "requests");
                if ((r = check_map(c, req, pk, rkeys)) < 0 ||
                    (r = get_quantity(c, req, "cpu", pk, true, &w->cpu, &w->cpu_millis)) < 0 ||
                    (r = get_quantity(c, req, "memory", pk, false, &w->memory, &w->memory_bytes)) < 0)
                        return r;
        }

        w->annotations = cJSON_CreateObject();
        if (!w->annotations)
                return -ENOMEM;
        const struct ynode *ann = ynode_get(m, "annotations");
        if (ann && !ynode_is_null(ann)) {
                sub(pk, p, "annotations");
                if (ann->type != YNODE_MAP)
                        return sc_fail(c, ann, pk, "must be a map");
                YNODE_FOREACH (a, ann) {
                        char pa[PATH_MAX_LEN];
                        sub(pa, pk, a->key);
                        if (a->type != YNODE_SCALAR)
                                return sc_fail(c, a, pa, "must be a string");
                        if (!cJSON_AddStringToObject(w->annotations, a->key, a->value ? a->value : ""))
                                return -ENOMEM;
                }
        }

        const struct ynode *pl = ynode_get(m, "placement");
        if (pl && !ynode_is_null(pl)) {
                sub(pk, p, "placement");
                if (pl->type != YNODE_MAP)
                        return sc_fail(c, pl, pk, "must be a map of node name to pod count");
                if (w->kind == SIM_WL_DAEMONSET)
                        return sc_fail(c, pl, pk, "a DaemonSet runs one pod on every node");
                w->placement = calloc(pl->n_children ?: 1, sizeof(*w->placement));
                if (!w->placement)
                        return -ENOMEM;
                int64_t total = 0;
                YNODE_FOREACH (e, pl) {
                        char pe[PATH_MAX_LEN];
                        sub(pe, pk, e->key);
                        ssize_t ni = find_node(sc, e->key);
                        if (ni < 0)
                                return sc_fail(c, e, pe, "no node named \"%s\"", e->key);
                        int64_t cnt;
                        if (ynode_int(e, &cnt) < 0 || cnt < 0)
                                return sc_fail(c, e, pe, "must be a non-negative integer");
                        total += cnt;
                        if (total > replicas)
                                return sc_fail(c, e, pk, "places %lld pods but replicas is %lld",
                                               (long long)total, (long long)replicas);
                        w->placement[w->n_placement++] = (struct sim_sc_placement){ (size_t)ni, (int)cnt };
                }
        }

        const struct ynode *pdb = ynode_get(m, "pdb");
        if (pdb && !ynode_is_null(pdb)) {
                sub(pk, p, "pdb");
                r = parse_pdb(c, pdb, pk, w);
                if (r < 0)
                        return r;
        }
        return parse_deploy_extras(c, m, p, w);
}

static int parse_workloads(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        int64_t pods = 0;
        const struct ynode *seq;
        int r = get_seq(c, root, "workloads", &seq);
        if (r < 0 || !seq)
                return r;
        sc->workloads = calloc(seq->n_children ?: 1, sizeof(*sc->workloads));
        if (!sc->workloads)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "workloads[%zu]", i);
                sc->n_workloads = i + 1;
                struct sim_sc_workload *w = &sc->workloads[i];
                r = parse_workload(c, &seq->children[i], p, sc, w);
                if (r < 0)
                        return r;
                pods += w->kind == SIM_WL_DAEMONSET ? (int64_t)sc->n_nodes : w->replicas;
                if (pods > SIM_MAX_PODS)
                        return sc_fail(
                            c, &seq->children[i], p,
                            "the workloads up to here make %lld pods: the simulator takes at most %d",
                            (long long)pods, SIM_MAX_PODS);
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->workloads[j].name, w->name) && streq(sc->workloads[j].ns, w->ns)) {
                                char pk[PATH_MAX_LEN];
                                sub(pk, p, "name");
                                return sc_fail(c, ynode_get(&seq->children[i], "name"), pk,
                                               "duplicate workload %s/%s", w->ns, w->name);
                        }
        }
        return 0;
}

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

        sub(pk, p, "workload");
        if (ynode_get(m, "workload") || ynode_get(m, "replicas"))
                return sc_fail(c, ynode_get(m, ynode_get(m, "workload") ? "workload" : "replicas"), pk,
                               "only rollout and scale events name a workload");
        if ((r = get_str(c, m, "node", p, true, &e->launch_name)) < 0 ||
            (r = get_str(c, m, "instance_id", p, false, &e->launch_instance)) < 0)
                return r;
        sub(pk, p, "node");
        if (find_node(sc, e->launch_name) >= 0)
                return sc_fail(c, ynode_get(m, "node"), pk,
                               "an asg-launch event names a new node; \"%s\" is one of nodes",
                               e->launch_name);
        sub(pk, p, "instance_id");
        if (e->launch_instance && !valid_instance_id(e->launch_instance))
                return sc_fail(c, ynode_get(m, "instance_id"), pk, "not an EC2 instance id");
        if (!e->launch_instance && !(e->launch_instance = derive_instance_id(e->launch_name)))
                return -ENOMEM;
        e->join_after = 5;
        if ((r = get_double(c, m, "join_seconds", p, 0, 86400, &e->join_after)) < 0)
                return r;
        e->ready_after = e->join_after;
        if (ready && ready->type == YNODE_SCALAR && streq(ready->value, "never"))
                e->ready_after = -1;
        else if ((r = get_double(c, m, "ready_seconds", p, e->join_after, 86400, &e->ready_after)) < 0)
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
        sub(pk, p, "node");
        if (ynode_get(m, "node"))
                return sc_fail(c, ynode_get(m, "node"), pk, "a %s event names a workload, not a node",
                               e->type);
        if ((r = get_str(c, m, "workload", p, true, &name)) < 0)
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
        sub(pk, p, "workload");
        if (n_found == 0)
                return sc_fail(c, ynode_get(m, "workload"), pk, "no workload named \"%s\"", name);
        if (n_found > 1)
                return sc_fail(c, ynode_get(m, "workload"), pk,
                               "\"%s\" is in several namespaces: write NAMESPACE/NAME", name);
        enum sim_wl_kind kind = sc->workloads[found].kind;
        if (kind != SIM_WL_DEPLOYMENT && kind != SIM_WL_STATEFULSET)
                return sc_fail(c, ynode_get(m, "workload"), pk,
                               "a %s event needs a Deployment or StatefulSet", e->type);
        e->workload = found;
        e->node = SIZE_MAX;
        sub(pk, p, "replicas");
        if (streq(e->type, "rollout")) {
                if (ynode_get(m, "replicas"))
                        return sc_fail(c, ynode_get(m, "replicas"), pk, "only a scale event takes replicas");
                return 0;
        }
        if (!ynode_get(m, "replicas"))
                return sc_fail(c, m, pk, "required");
        if ((r = get_int(c, m, "replicas", p, 0, 100000, &replicas)) < 0)
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

        sub(pk, p, "code");
        if (!scheduled && (ynode_get(m, "code") || ynode_get(m, "reboot_seconds")))
                return sc_fail(c, ynode_get(m, ynode_get(m, "code") ? "code" : "reboot_seconds"), pk,
                               "only a scheduled-change event takes a code or reboot_seconds");
        if (!scheduled)
                return 0;
        if ((r = get_str(c, m, "code", p, false, &e->code)) < 0)
                return r;
        if (!e->code && !(e->code = strdup(maintenance_codes[0])))
                return -ENOMEM;
        bool known = false;
        for (size_t k = 0; k < ARRAY_SIZE(maintenance_codes); k++)
                known = known || streq(e->code, maintenance_codes[k]);
        if (!known)
                return sc_fail(c, ynode_get(m, "code"), pk, "unknown maintenance code \"%s\"", e->code);
        e->reboot_seconds = 60;
        sub(pk, p, "reboot_seconds");
        if (ynode_get(m, "reboot_seconds") && !sim_maintenance_is_reboot(e->code))
                return sc_fail(c, ynode_get(m, "reboot_seconds"), pk, "only a reboot takes reboot_seconds");
        return get_double(c, m, "reboot_seconds", p, 0, 3600, &e->reboot_seconds);
}

static int parse_events(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = {
                "at",           "type",          "node", "workload",       "replicas", "instance_id",
                "join_seconds", "ready_seconds", "code", "reboot_seconds", NULL
        };
        const struct ynode *seq;
        int r = get_seq(c, root, "events", &seq);
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
                if ((r = check_map(c, m, p, keys)) < 0)
                        return r;
                sub(pk, p, "at");
                if (!ynode_get(m, "at"))
                        return sc_fail(c, m, pk, "required");
                if ((r = get_double(c, m, "at", p, 0, 1e9, &e->at)) < 0 ||
                    (r = get_str(c, m, "type", p, true, &e->type)) < 0)
                        return r;
                bool known = false;
                for (size_t k = 0; k < ARRAY_SIZE(event_types); k++)
                        known = known || streq(e->type, event_types[k]);
                sub(pk, p, "type");
                if (!known)
                        return sc_fail(c, ynode_get(m, "type"), pk, "unknown event type \"%s\"", e->type);
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
                sub(pk, p, "join_seconds");
                if (ynode_get(m, "instance_id") || ynode_get(m, "join_seconds") ||
                    ynode_get(m, "ready_seconds"))
                        return sc_fail(c, m, pk, "only an asg-launch event launches a node");
                sub(pk, p, "workload");
                if (ynode_get(m, "workload") || ynode_get(m, "replicas"))
                        return sc_fail(c, ynode_get(m, ynode_get(m, "workload") ? "workload" : "replicas"),
                                       pk, "only rollout and scale events name a workload");
                _cleanup_free_ char *node = NULL;
                if ((r = get_str(c, m, "node", p, true, &node)) < 0)
                        return r;
                ssize_t ni = find_node(sc, node);
                sub(pk, p, "node");
                if (ni < 0)
                        return sc_fail(c, ynode_get(m, "node"), pk, "no node named \"%s\"", node);
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

static int parse_provisioning(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        static const char *const keys[] = { "node_launch_seconds", "instance_types", NULL };
        static const char *const tkeys[] = { "name", "cpu", "memory", NULL };
        sc->node_launch_seconds = 60;
        const struct ynode *m = ynode_get(root, "provisioning");
        if (!m || ynode_is_null(m))
                return 0;
        int r = check_map(c, m, "provisioning", keys);
        if (r < 0 || (r = get_double(c, m, "node_launch_seconds", "provisioning", 0, 86400,
                                     &sc->node_launch_seconds)) < 0)
                return r;
        const struct ynode *seq = ynode_get(m, "instance_types");
        if (!seq || ynode_is_null(seq))
                return 0;
        if (seq->type != YNODE_SEQ)
                return sc_fail(c, seq, "provisioning.instance_types", "must be a list");
        sc->itypes = calloc(seq->n_children ?: 1, sizeof(*sc->itypes));
        if (!sc->itypes)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                const struct ynode *t = &seq->children[i];
                struct sim_sc_itype *it = &sc->itypes[i];
                sc->n_itypes = i + 1;
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "provisioning.instance_types[%zu]", i);
                if ((r = check_map(c, t, p, tkeys)) < 0 ||
                    (r = get_str(c, t, "name", p, true, &it->name)) < 0 ||
                    (r = get_quantity(c, t, "cpu", p, true, &it->cpu, &it->cpu_millis)) < 0 ||
                    (r = get_quantity(c, t, "memory", p, false, &it->memory, &it->memory_bytes)) < 0)
                        return r;
                char pk[PATH_MAX_LEN];
                sub(pk, p, !it->cpu ? "cpu" : "memory");
                if (!it->cpu || !it->memory)
                        return sc_fail(c, t, pk, "required");
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->itypes[j].name, it->name)) {
                                sub(pk, p, "name");
                                return sc_fail(c, ynode_get(t, "name"), pk, "duplicate instance type \"%s\"",
                                               it->name);
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
        r = check_map(c, m, "autoscaling", keys);
        /* Auto Scaling's own bounds: 30 s to 7200 s. */
        if (r < 0 || (r = get_int(c, m, "heartbeat_timeout_seconds", "autoscaling", 30, 7200, &timeout)) < 0)
                return r;
        sc->hook_heartbeat_timeout = (int)timeout;
        /* IMDS tags/instance (the group's name tag), as InstanceMetadataTags=enabled serves it. */
        r = get_bool(c, m, "instance_metadata_tags", "autoscaling", &tags);
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
        int r = check_map(c, m, "faults", keys);
        if (r < 0 || (r = get_double(c, m, "api_error_rate", "faults", 0, 1, &sc->api_error_rate)) < 0 ||
            (r = get_int(c, m, "api_latency_ms", "faults", 0, 600000, &sc->api_latency_ms)) < 0 ||
            (r = get_int(c, m, "node_label_latency_ms", "faults", 0, 600000, &(int64_t){ 0 })) < 0)
                return r;
        for (size_t i = 0; rates[i]; i++) {
                double rate = 0;
                if ((r = get_double(c, m, rates[i], "faults", 0, 1, &rate)) < 0)
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
        int r = check_map(c, m, "api_priority_fairness", keys);
        if (r < 0 || (r = get_double(c, m, "qps", "api_priority_fairness", 0.1, 1e6, &qps)) < 0 ||
            (r = get_double(c, m, "burst", "api_priority_fairness", 1, 1e6, &burst)) < 0 ||
            (r = get_int(c, m, "retry_after_seconds", "api_priority_fairness", 1, 60, &retry)) < 0)
                return r;
        if (!ynode_get(m, "qps"))
                return sc_fail(c, m, "api_priority_fairness.qps", "required");
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
        int r = check_map(&c, root, "", keys);
        if (r < 0)
                return r;
        if ((r = get_str(&c, root, "name", "", true, &sc->name)) < 0 ||
            (r = get_str(&c, root, "mode", "", false, &sc->mode)) < 0)
                return r;
        if (!sc->mode && !(sc->mode = strdup("agent")))
                return -ENOMEM;
        if (!streq(sc->mode, "agent") && !streq(sc->mode, "controller"))
                return sc_fail(&c, ynode_get(root, "mode"), "mode", "must be agent or controller");
        sc->budget = 120;
        int64_t seed = 1;
        if ((r = get_double(&c, root, "budget_seconds", "", 1, 86400 * 30, &sc->budget)) < 0 ||
            (r = get_int(&c, root, "seed", "", 0, INT64_MAX, &seed)) < 0 ||
            (r = get_double(&c, root, "pod_removal_seconds", "", 0, 600, &sc->pod_removal)) < 0)
                return r;
        sc->seed = (uint64_t)seed;
        if ((r = parse_nodes(&c, root, sc)) < 0 || (r = parse_workloads(&c, root, sc)) < 0 ||
            (r = parse_events(&c, root, sc)) < 0 || (r = parse_provisioning(&c, root, sc)) < 0 ||
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
