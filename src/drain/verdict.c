/* The graded verdict (drain.h): the drain planned with the stops never seen at their extremes (at once,
 * their whole grace period) and, when only the quick end fits, the longest stop that still fits, found by
 * bisection. Pure, as the planner. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/drain.h"

#define USEC_PER_SEC UINT64_C(1000000)
/* An instant stop: a shutdown of 0 means "unknown, the grace period" to the planner. */
#define INSTANT_USEC 1
/* How the unseen pods stop in a variant: at once, within their grace period, or within a time. */
#define WITHIN_INSTANT 0
#define WITHIN_GRACE   UINT64_MAX
/* Owners named in a message, at most. */
#define MAX_NAMED 3

const char *drain_grade_to_string(enum drain_grade g)
{
        switch (g) {
        case DRAIN_GRADE_FITS:
                return "fits";
        case DRAIN_GRADE_AT_RISK:
                return "at-risk";
        case DRAIN_GRADE_INFEASIBLE:
                return "infeasible";
        }
        return "?";
}

void drain_grade_result_clear(struct drain_grade_result *g)
{
        if (!g)
                return;
        if (!g->plan_borrowed)
                drain_plan_free(g->plan);
        free(g->reason);
        *g = (struct drain_grade_result){ 0 };
}

struct grade_entry {
        uint64_t within;
        struct drain_plan *plan;
};

struct drain_grade_cache {
        struct grade_entry *entries;
        size_t n;
};

struct drain_grade_cache *drain_grade_cache_free(struct drain_grade_cache *c)
{
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n; i++)
                drain_plan_free(c->entries[i].plan);
        free(c->entries);
        free(c);
        return NULL;
}

/* The plan of in with every unseen pod stopping within `within` (WITHIN_*, or a duration). pods is
 * scratch space for in->n_pods entries. */
static int plan_within(const struct drain_input *in, struct drain_pod_in *pods, uint64_t within,
                       struct drain_plan **ret)
{
        struct drain_input v = *in;
        if (in->n_pods)
                memcpy(pods, in->pods, in->n_pods * sizeof(*pods));
        for (size_t i = 0; i < in->n_pods; i++) {
                struct drain_pod_in *p = &pods[i];
                if (p->shutdown_seen)
                        continue;
                if (within == WITHIN_GRACE)
                        p->shutdown_usec = 0;
                else if (within == WITHIN_INSTANT)
                        p->shutdown_usec = INSTANT_USEC;
                else
                        p->shutdown_usec = p->grace_usec < within ? p->grace_usec : within;
        }
        v.pods = pods;
        return drain_plan_make(&v, ret);
}

int drain_plan_whole_grace(const struct drain_input *in, struct drain_plan **ret)
{
        if (!in || !ret)
                return -EINVAL;
        _cleanup_free_ struct drain_pod_in *pods = calloc(in->n_pods ? in->n_pods : 1, sizeof(*pods));
        if (!pods)
                return -ENOMEM;
        return plan_within(in, pods, WITHIN_GRACE, ret);
}

/* plan_within() from the cache when there is one (*ret borrowed from it), else made into *own (the last
 * one there freed). */
static int plan_at(const struct drain_input *in, struct drain_pod_in *pods, uint64_t within,
                   struct drain_grade_cache *cache, struct drain_plan **own, const struct drain_plan **ret)
{
        if (!cache) {
                *own = drain_plan_free(*own);
                int r = plan_within(in, pods, within, own);
                *ret = *own;
                return r;
        }
        for (size_t i = 0; i < cache->n; i++)
                if (cache->entries[i].within == within) {
                        *ret = cache->entries[i].plan;
                        return 0;
                }
        struct grade_entry *a = realloc(cache->entries, (cache->n + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        cache->entries = a;
        struct drain_plan *p = NULL;
        int r = plan_within(in, pods, within, &p);
        if (r < 0)
                return r;
        cache->entries[cache->n++] = (struct grade_entry){ .within = within, .plan = p };
        *ret = p;
        return 0;
}

static bool fits(const struct drain_plan *p, size_t node)
{
        return p->nodes[node].verdict == DRAIN_FEASIBLE;
}

/* A pod of node that the drain moves and whose stop time is a guess. */
static bool unseen_to_go(const struct drain_input *in, const struct drain_plan *p, size_t i, size_t node)
{
        return in->pods[i].node == node && !in->pods[i].shutdown_seen && in->pods[i].grace_usec > 0 &&
               p->pods[i].action != DRAIN_ACTION_LEAVE && !in->pods[i].gone_usec;
}

/* "shop/db" for the owner shop/StatefulSet/db (a ReplicaSet without its pod-template-hash suffix, the
 * Deployment's name), the pod's own name when it has no owner. */
static char *owner_name(const struct drain_pod_in *p)
{
        if (!p->owner_key)
                return strprintf("%s/%s", p->namespace, p->name);
        const char *kind = strchr(p->owner_key, '/');
        const char *name = kind ? strchr(kind + 1, '/') : NULL;
        if (!name)
                return strdup(p->owner_key);
        size_t len = strlen(name + 1);
        const char *dash = strrchr(name + 1, '-');
        if (p->owner == DRAIN_OWNER_REPLICASET && strncmp(kind + 1, "ReplicaSet/", 11) == 0 && dash &&
            dash > name + 1)
                len = (size_t)(dash - (name + 1));
        return strprintf("%s/%.*s", p->namespace, (int)len, name + 1);
}

/* "fits if shop/db pods stop within 40 s of SIGTERM; their grace is 90 s; none seen stopping yet". */
static int at_risk_reason(const struct drain_input *in, const struct drain_plan *full, size_t node,
                          struct drain_grade_result *g)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        char *named[MAX_NAMED] = { 0 };
        size_t n_named = 0, more = 0;
        uint64_t least_grace = UINT64_MAX;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < in->n_pods; i++) {
                if (!unseen_to_go(in, full, i, node) || in->pods[i].grace_usec <= g->stop_within_usec)
                        continue;
                const struct drain_pod_in *p = &in->pods[i];
                if (p->grace_usec > g->grace_usec)
                        g->grace_usec = p->grace_usec;
                if (p->grace_usec < least_grace)
                        least_grace = p->grace_usec;
                char *name = owner_name(p);
                if (!name) {
                        r = -ENOMEM;
                        break;
                }
                bool dup = false;
                for (size_t k = 0; k < n_named && !dup; k++)
                        dup = streq(named[k], name);
                if (!dup && n_named < MAX_NAMED)
                        named[n_named++] = TAKE_PTR(name);
                else if (!dup)
                        more++;
                free(name);
        }
        if (r >= 0)
                r = buf_printf(&b, "fits if ");
        for (size_t k = 0; r >= 0 && k < n_named; k++)
                r = buf_printf(&b, "%s%s",
                               k == 0                      ? ""
                               : k + 1 == n_named && !more ? " and "
                                                           : ", ",
                               named[k]);
        if (r >= 0 && more)
                r = buf_printf(&b, " and %zu more", more);
        if (r >= 0 && g->stop_within_usec >= USEC_PER_SEC)
                r = buf_printf(&b, " pods stop within %" PRIu64 " s of SIGTERM",
                               g->stop_within_usec / USEC_PER_SEC);
        else if (r >= 0)
                r = buf_printf(&b, " pods stop within a second of SIGTERM");
        if (r >= 0)
                r = buf_printf(&b, "; their grace is %s%" PRIu64 " s; none seen stopping yet",
                               least_grace < g->grace_usec ? "up to " : "", g->grace_usec / USEC_PER_SEC);
        int lb = full->nodes[node].limiting_pdb;
        if (r >= 0 && lb >= 0)
                r = buf_printf(&b, "; PDB %s/%s allows %d disruption%s at a time", full->pdbs[lb].namespace,
                               full->pdbs[lb].name, full->pdbs[lb].k, full->pdbs[lb].k == 1 ? "" : "s");
        for (size_t k = 0; k < n_named; k++)
                free(named[k]);
        if (r < 0)
                return -ENOMEM;
        g->reason = TAKE_PTR(b.data);
        return 0;
}

static uint64_t from_now(uint64_t at, uint64_t now)
{
        if (at == DRAIN_NEVER)
                return DRAIN_NEVER;
        return at > now ? at - now : 0;
}

/* The estimate of node in plan p (made at its now). */
static struct drain_estimate estimate_of(const struct drain_plan *p, size_t node)
{
        const struct drain_plan_node *n = &p->nodes[node];
        struct drain_estimate e = {
                .verdict = n->verdict,
                .finish_usec = from_now(n->finish_usec, p->now_usec),
                .n_to_go = n->n_to_go,
                .n_forced = n->n_forced,
                .n_killed = n->n_killed,
        };
        e.unforced_usec = e.finish_usec;
        if (n->limiting_pdb >= 0) {
                uint64_t u = from_now(p->pdbs[n->limiting_pdb].unforced_finish_usec, p->now_usec);
                if (e.unforced_usec != DRAIN_NEVER && (u == DRAIN_NEVER || u > e.unforced_usec))
                        e.unforced_usec = u;
        }
        return e;
}

static void secs_text(char *buf, size_t len, uint64_t usec)
{
        if (usec == DRAIN_NEVER)
                snprintf(buf, len, "never");
        else
                snprintf(buf, len, "%.0f", (double)usec / (double)USEC_PER_SEC);
}

char *drain_outlook_format(const struct drain_outlook *e)
{
        char q[32], s[32];
        if (!e || !e->known)
                return strdup("no estimate");
        secs_text(q, sizeof(q), e->quick.unforced_usec);
        secs_text(s, sizeof(s), e->slow.unforced_usec);
        if (!e->unseen)
                return strprintf("every stop known: last pod gone unforced in %s%s, %zu forced, %zu killed",
                                 q, e->quick.unforced_usec == DRAIN_NEVER ? "" : " s", e->quick.n_forced,
                                 e->quick.n_killed);
        return strprintf("stops never seen taken at once / at their whole grace: last pod gone unforced in "
                         "%s / %s%s, %zu / %zu forced, %zu / %zu killed",
                         q, s, e->slow.unforced_usec == DRAIN_NEVER ? "" : " s", e->quick.n_forced,
                         e->slow.n_forced, e->quick.n_killed, e->slow.n_killed);
}

static bool secs_to_json(cJSON *o, const char *key, uint64_t usec)
{
        if (usec == DRAIN_NEVER)
                return cJSON_AddNullToObject(o, key) != NULL;
        return cJSON_AddNumberToObject(o, key, (double)(usec / 100000) / 10.0) != NULL;
}

static bool estimate_to_json(const struct drain_estimate *e, cJSON *parent, const char *key)
{
        cJSON *o = cJSON_AddObjectToObject(parent, key);
        return o && cJSON_AddStringToObject(o, "verdict", drain_verdict_to_string(e->verdict)) &&
               secs_to_json(o, "finish", e->finish_usec) && secs_to_json(o, "unforced", e->unforced_usec) &&
               cJSON_AddNumberToObject(o, "to_go", (double)e->n_to_go) &&
               cJSON_AddNumberToObject(o, "forced", (double)e->n_forced) &&
               cJSON_AddNumberToObject(o, "killed", (double)e->n_killed);
}

bool drain_outlook_to_json(const struct drain_outlook *e, cJSON *parent, const char *key)
{
        if (!e || !e->known)
                return cJSON_AddNullToObject(parent, key) != NULL;
        cJSON *o = cJSON_AddObjectToObject(parent, key);
        return o && cJSON_AddBoolToObject(o, "unseen", e->unseen) &&
               estimate_to_json(&e->quick, o, "stops_at_once") &&
               estimate_to_json(&e->slow, o, "stops_at_whole_grace");
}

size_t drain_outlook_add_fields(const struct drain_outlook *e, struct drain_outlook_fields *f,
                                const char **fields, size_t n)
{
        if (!e->known)
                return n;
        snprintf(f->forced_quick, sizeof(f->forced_quick), "%zu", e->quick.n_forced);
        snprintf(f->forced_slow, sizeof(f->forced_slow), "%zu", e->slow.n_forced);
        snprintf(f->killed_quick, sizeof(f->killed_quick), "%zu", e->quick.n_killed);
        snprintf(f->killed_slow, sizeof(f->killed_slow), "%zu", e->slow.n_killed);
        fields[n++] = "forced_at_once";
        fields[n++] = f->forced_quick;
        fields[n++] = "forced_whole_grace";
        fields[n++] = f->forced_slow;
        fields[n++] = "killed_at_once";
        fields[n++] = f->killed_quick;
        fields[n++] = "killed_whole_grace";
        fields[n++] = f->killed_slow;
        return n;
}

static int grade(const struct drain_input *in, size_t node, struct drain_grade_cache *cache,
                 struct drain_grade_result *ret)
{
        _cleanup_(drain_plan_freep) struct drain_plan *instant_own = NULL, *full_own = NULL, *p_own = NULL;
        const struct drain_plan *instant, *full;
        _cleanup_free_ struct drain_pod_in *pods = NULL;
        struct drain_grade_result g = { 0 };
        int r;

        pods = calloc(in->n_pods ? in->n_pods : 1, sizeof(*pods));
        if (!pods)
                return -ENOMEM;
        r = plan_at(in, pods, WITHIN_INSTANT, cache, &instant_own, &instant);
        if (r < 0)
                return r;
        for (size_t i = 0; i < in->n_pods && !g.unseen; i++)
                g.unseen = unseen_to_go(in, instant, i, node);
        /* The pair every surface prints, from these very plans. */
        r = plan_at(in, pods, WITHIN_GRACE, cache, &full_own, &full);
        if (r < 0)
                return r;
        g.outlook = (struct drain_outlook){ .known = true,
                                            .unseen = g.unseen,
                                            .quick = estimate_of(instant, node),
                                            .slow = estimate_of(full, node) };
        if (!fits(instant, node)) {
                /* Certain: no stop could be quick enough, or the stops seen are too slow. */
                g.grade = DRAIN_GRADE_INFEASIBLE;
                g.reason = strprintf(
                    "%s%s", g.unseen ? "even if the pods never seen stopping stopped at once: " : "",
                    instant->nodes[node].reason ? instant->nodes[node].reason : "");
                if (!g.reason)
                        return -ENOMEM;
                g.plan_borrowed = cache != NULL;
                g.plan = cache ? (struct drain_plan *)instant : TAKE_PTR(instant_own);
                *ret = g;
                return 0;
        }
        if (!g.unseen) {
                *ret = g; /* every stop time here is known, and it fits */
                return 0;
        }
        if (fits(full, node)) {
                *ret = g;
                return 0;
        }
        /* Between at once (fits) and the longest grace period (does not), in whole seconds. */
        uint64_t lo = 0, hi = 0;
        for (size_t i = 0; i < in->n_pods; i++)
                if (!in->pods[i].shutdown_seen && in->pods[i].grace_usec > hi)
                        hi = in->pods[i].grace_usec;
        while (hi - lo > USEC_PER_SEC) {
                const struct drain_plan *p;
                uint64_t mid = (lo + (hi - lo) / 2) / USEC_PER_SEC * USEC_PER_SEC;
                if (mid <= lo)
                        mid = lo + USEC_PER_SEC;
                r = plan_at(in, pods, mid, cache, &p_own, &p);
                if (r < 0)
                        return r;
                if (fits(p, node))
                        lo = mid;
                else
                        hi = mid;
        }
        g.grade = DRAIN_GRADE_AT_RISK;
        g.stop_within_usec = lo;
        r = at_risk_reason(in, full, node, &g);
        if (r < 0) {
                drain_grade_result_clear(&g);
                return r;
        }
        *ret = g;
        return 0;
}

int drain_grade_node(const struct drain_input *in, size_t node, struct drain_grade_result *ret)
{
        if (!in || !ret || node >= in->n_nodes)
                return -EINVAL;
        return grade(in, node, NULL, ret);
}

int drain_grade_node_cached(const struct drain_input *in, size_t node, struct drain_grade_cache **cache,
                            struct drain_grade_result *ret)
{
        if (!in || !ret || !cache || node >= in->n_nodes)
                return -EINVAL;
        if (!*cache && !(*cache = calloc(1, sizeof(**cache))))
                return -ENOMEM;
        return grade(in, node, *cache, ret);
}

bool drain_input_guesses(const struct drain_input *in)
{
        for (size_t i = 0; in && i < in->n_pods; i++) {
                const struct drain_pod_in *p = &in->pods[i];
                if (!p->shutdown_seen && p->shutdown_usec != 0 && p->shutdown_usec < p->grace_usec)
                        return true;
        }
        return false;
}

int drain_api_budget_short(const struct drain_input *in, const struct drain_plan *p, size_t node, double qps,
                           unsigned burst, struct drain_api_budget *ret)
{
        *ret = (struct drain_api_budget){ .qps = qps };
        if (!in || !p || node >= in->n_nodes || qps <= 0)
                return 0;
        const struct drain_node_in *own = &in->nodes[node];
        uint64_t end = own->deadline_usec > own->margin_usec ? own->deadline_usec - own->margin_usec : 0;
        uint64_t needed = 0;
        for (size_t n = 0; n < in->n_nodes; n++)
                if (in->nodes[n].deadline_usec <= own->deadline_usec)
                        needed += DRAIN_API_PER_NODE;
        for (size_t i = 0; i < in->n_pods && i < p->n_pods; i++) {
                const struct drain_pod_in *pin = &in->pods[i];
                if (in->nodes[pin->node].deadline_usec > own->deadline_usec || pin->deleting ||
                    pin->gone_usec)
                        continue;
                if (drain_plan_pod_to_evict(&p->pods[i]))
                        needed++;
        }
        double window = end > in->now_usec ? (double)(end - in->now_usec) / 1e6 : 0;
        uint64_t allowed = (uint64_t)(qps * window) + burst;
        *ret = (struct drain_api_budget){ .needed = needed, .allowed = allowed, .qps = qps };
        return needed > allowed;
}
