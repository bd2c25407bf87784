/* Builds the planner's input (struct drain_input) from Kubernetes Pod and PodDisruptionBudget objects, and
 * measures startup times from sibling pods. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

struct drain_inputs {
        struct drain_input in;
        struct drain_node_in *nodes;
        size_t n_nodes;
        char **node_names;
        uint64_t *node_start; /* when its drain started (engine clock); 0: now */

        struct kube_pdb *kpdbs;
        struct drain_pdb_in *pdbs;
        uint64_t **pdb_lost;
        size_t *pdb_n_lost;
        size_t n_pdbs;

        struct kube_pod *kpods;
        struct drain_pod_in *pods;
        char **owner_keys;
        size_t **pod_pdbs;
        size_t n_pods;

        struct drain_startup *startups;
        size_t n_startups;

        const struct drain_shutdowns *shutdowns;
        enum drain_shutdown_basis shutdown_basis;
        double expected_fraction;
        bool estimated; /* every pod's shutdown estimate is filled in for the pods as they stand */
};

struct sample {
        char *key;
        uint64_t usec;
};

/* Grows *array (of elem bytes, holding n) so that index n fits. Arrays only ever grow one element at a time
 * through here, so the capacity is the power of two above n: doubled when n reaches it. (One realloc per
 * element made every plan quadratic in the pods of all the drains planned together.) */
static int grow(void **array, size_t n, size_t elem)
{
        if (n > 0 && (n & (n - 1)) != 0)
                return 0;
        size_t cap = n ? 2 * n : 1;
        if (cap > SIZE_MAX / elem)
                return -ENOMEM;
        void *p = realloc(*array, cap * elem);
        if (!p)
                return -ENOMEM;
        *array = p;
        return 0;
}

int drain_inputs_new(const struct drain_inputs_options *o, struct drain_inputs **ret)
{
        struct drain_inputs *di = calloc(1, sizeof(*di));
        if (!di)
                return -ENOMEM;
        di->in = (struct drain_input){
                .now_usec = o->now_usec,
                .default_startup_usec = o->default_startup_usec,
                .policy = o->policy,
                .evict_daemonsets = o->evict_daemonsets,
                .critical_classes = o->critical_classes,
                .n_critical_classes = o->n_critical_classes,
        };
        di->shutdowns = o->shutdowns;
        di->shutdown_basis = o->shutdown_basis;
        di->expected_fraction = o->expected_shutdown_fraction;
        *ret = di;
        return 0;
}

struct drain_inputs *drain_inputs_free(struct drain_inputs *di)
{
        if (!di)
                return NULL;
        for (size_t i = 0; i < di->n_nodes; i++)
                free(di->node_names[i]);
        free(di->node_names);
        free(di->node_start);
        free(di->nodes);
        for (size_t i = 0; i < di->n_pdbs; i++) {
                kube_pdb_clear(&di->kpdbs[i]);
                free(di->pdb_lost[i]);
        }
        free(di->kpdbs);
        free(di->pdbs);
        free(di->pdb_lost);
        free(di->pdb_n_lost);
        for (size_t i = 0; i < di->n_pods; i++) {
                kube_pod_clear(&di->kpods[i]);
                free(di->owner_keys[i]);
                free(di->pod_pdbs[i]);
        }
        free(di->kpods);
        free(di->pods);
        free(di->owner_keys);
        free(di->pod_pdbs);
        drain_startups_free(di->startups, di->n_startups);
        free(di);
        return NULL;
}

int drain_inputs_add_node(struct drain_inputs *di, const char *name, uint64_t deadline_usec,
                          uint64_t margin_usec, size_t *ret_index)
{
        _cleanup_free_ char *copy = strdup(name);
        if (!copy || grow((void **)&di->nodes, di->n_nodes, sizeof(*di->nodes)) < 0 ||
            grow((void **)&di->node_names, di->n_nodes, sizeof(*di->node_names)) < 0 ||
            grow((void **)&di->node_start, di->n_nodes, sizeof(*di->node_start)) < 0)
                return -ENOMEM;
        di->node_start[di->n_nodes] = 0;
        di->nodes[di->n_nodes] = (struct drain_node_in){
                .name = copy,
                .deadline_usec = deadline_usec,
                .margin_usec = margin_usec,
        };
        di->node_names[di->n_nodes] = TAKE_PTR(copy);
        if (ret_index)
                *ret_index = di->n_nodes;
        di->n_nodes++;
        return 0;
}

int drain_inputs_set_node_start(struct drain_inputs *di, size_t node, uint64_t start_usec)
{
        if (node >= di->n_nodes)
                return -EINVAL;
        di->node_start[node] = start_usec;
        di->estimated = false;
        return 0;
}

int drain_inputs_add_pdb(struct drain_inputs *di, const cJSON *obj)
{
        _cleanup_(kube_pdb_clear) struct kube_pdb p = { 0 };
        int r = kube_pdb_parse(obj, &p);
        if (r < 0)
                return r;
        if (grow((void **)&di->kpdbs, di->n_pdbs, sizeof(*di->kpdbs)) < 0 ||
            grow((void **)&di->pdbs, di->n_pdbs, sizeof(*di->pdbs)) < 0 ||
            grow((void **)&di->pdb_lost, di->n_pdbs, sizeof(*di->pdb_lost)) < 0 ||
            grow((void **)&di->pdb_n_lost, di->n_pdbs, sizeof(*di->pdb_n_lost)) < 0)
                return -ENOMEM;
        di->kpdbs[di->n_pdbs] = p;
        di->pdb_lost[di->n_pdbs] = NULL;
        di->pdb_n_lost[di->n_pdbs] = 0;
        p = (struct kube_pdb){ 0 };
        di->n_pdbs++;
        return 0;
}

int drain_inputs_set_pdb_lost(struct drain_inputs *di, const uint64_t *lost_usec, size_t n)
{
        if (di->n_pdbs == 0 || (n && !lost_usec))
                return -EINVAL;
        size_t b = di->n_pdbs - 1;
        uint64_t *a = NULL;
        if (n && !(a = malloc(n * sizeof(*a))))
                return -ENOMEM;
        if (n)
                memcpy(a, lost_usec, n * sizeof(*a));
        free(di->pdb_lost[b]);
        di->pdb_lost[b] = a;
        di->pdb_n_lost[b] = n;
        return 0;
}

static enum drain_owner owner_of(const struct kube_pod *p)
{
        if (!p->owner_kind)
                return DRAIN_OWNER_NONE;
        if (streq(p->owner_kind, "ReplicaSet"))
                return DRAIN_OWNER_REPLICASET;
        if (streq(p->owner_kind, "StatefulSet"))
                return DRAIN_OWNER_STATEFULSET;
        if (streq(p->owner_kind, "DaemonSet"))
                return DRAIN_OWNER_DAEMONSET;
        if (streq(p->owner_kind, "Job"))
                return DRAIN_OWNER_JOB;
        /* Another controller (an operator's custom resource) recreates its pods as a ReplicaSet would; a
         * mirror pod's owner is its Node, which recreates nothing. */
        if (p->owner_controller && !streq(p->owner_kind, "Node"))
                return DRAIN_OWNER_REPLICASET;
        return DRAIN_OWNER_NONE;
}

char *drain_owner_key(const struct kube_pod *p)
{
        if (!p->owner_kind || !p->owner_name)
                return NULL;
        return strprintf("%s/%s/%s", p->namespace ? p->namespace : "", p->owner_kind, p->owner_name);
}

int drain_inputs_add_pod(struct drain_inputs *di, size_t node, const cJSON *obj, size_t *ret_index)
{
        _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
        _cleanup_free_ size_t *pdbs = NULL;
        _cleanup_free_ char *owner_key = NULL;
        size_t n_pdbs = 0;
        int r;

        if (node >= di->n_nodes)
                return -EINVAL;
        r = kube_pod_parse(obj, &p);
        if (r < 0)
                return r;
        if (p.owner_kind && !(owner_key = drain_owner_key(&p)))
                return -ENOMEM;
        for (size_t i = 0; i < di->n_pdbs; i++) {
                if (!kube_pdb_matches_pod(&di->kpdbs[i], &p))
                        continue;
                r = grow((void **)&pdbs, n_pdbs, sizeof(*pdbs));
                if (r < 0)
                        return r;
                pdbs[n_pdbs++] = i;
        }
        if (grow((void **)&di->kpods, di->n_pods, sizeof(*di->kpods)) < 0 ||
            grow((void **)&di->pods, di->n_pods, sizeof(*di->pods)) < 0 ||
            grow((void **)&di->owner_keys, di->n_pods, sizeof(*di->owner_keys)) < 0 ||
            grow((void **)&di->pod_pdbs, di->n_pods, sizeof(*di->pod_pdbs)) < 0)
                return -ENOMEM;

        const char *dnd = kube_pod_annotation(&p, "karpenter.sh/do-not-disrupt");
        di->kpods[di->n_pods] = p;
        p = (struct kube_pod){ 0 };
        const struct kube_pod *kp = &di->kpods[di->n_pods];
        di->pods[di->n_pods] = (struct drain_pod_in){
                .uid = kp->uid,
                .namespace = kp->namespace,
                .name = kp->name,
                .node = node,
                .owner = owner_of(kp),
                .owner_key = owner_key,
                .priority = kp->has_priority ? kp->priority : 0,
                .priority_class = kp->priority_class,
                .grace_usec = kp->grace_seconds > 0 ? (uint64_t)kp->grace_seconds * 1000000 : 0,
                .do_not_disrupt = streq_ptr(dnd, "true"),
                .mirror = kp->mirror,
                .emptydir = kp->has_emptydir,
                .ready = kp->ready,
                .pending = streq_ptr(kp->phase, "Pending"),
                .deleting = kp->deletion_usec != 0,
                .deleted_at_usec = kp->deleted_usec,
                .pdbs = pdbs,
                .n_pdbs = n_pdbs,
        };
        di->owner_keys[di->n_pods] = TAKE_PTR(owner_key);
        di->pod_pdbs[di->n_pods] = TAKE_PTR(pdbs);
        if (ret_index)
                *ret_index = di->n_pods;
        di->n_pods++;
        di->estimated = false;
        return 0;
}

int drain_inputs_set_gone(struct drain_inputs *di, size_t i, uint64_t gone_usec)
{
        if (i >= di->n_pods || !di->pods[i].deleting)
                return -EINVAL;
        di->pods[i].gone_usec = gone_usec;
        di->estimated = false;
        return 0;
}

int drain_inputs_add_startups(struct drain_inputs *di, const struct drain_startup *s, size_t n)
{
        if (n == 0)
                return 0;
        struct drain_startup *a = realloc(di->startups, (di->n_startups + n) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        di->startups = a;
        for (size_t i = 0; i < n; i++) {
                char *key = strdup(s[i].owner_key);
                if (!key)
                        return -ENOMEM;
                di->startups[di->n_startups++] =
                    (struct drain_startup){ .owner_key = key, .startup_usec = s[i].startup_usec };
        }
        return 0;
}

static int stopping_cmp(const void *a, const void *b)
{
        const struct sample *x = a, *y = b;
        return strcmp(x->key, y->key);
}

/* The longest any pod of the owner has been stopping so far; stopping is sorted by key. */
static uint64_t stopping_longest(const struct sample *stopping, size_t n, const char *key)
{
        uint64_t longest = 0;
        if (!key)
                return 0;
        const struct sample probe = { .key = (char *)key };
        const struct sample *hit = bsearch(&probe, stopping, n, sizeof(*stopping), stopping_cmp);
        if (!hit)
                return 0;
        while (hit > stopping && streq(hit[-1].key, key))
                hit--;
        for (; hit < stopping + n && streq(hit->key, key); hit++)
                longest = hit->usec > longest ? hit->usec : longest;
        return longest;
}

/* What an unseen pod is given for acting: its whole grace period when that fits in its node's drain (from
 * the drain's start to deadline - margin), and it is forced at deadline - margin - grace as it always was.
 * When it does not fit, waiting for a whole graceful stop would force every such pod at the notice, around
 * its PDB (a StatefulSet's quorum lost for nothing when the pods stop in a fraction of their grace): it is
 * given the stop expected of it instead, capped at the time left, until its siblings are seen stopping. */
static uint64_t unseen_safe(const struct drain_inputs *di, size_t node, uint64_t grace, uint64_t stopping)
{
        const struct drain_node_in *n = &di->nodes[node];
        uint64_t now = di->in.now_usec;
        uint64_t start = di->node_start[node] ? di->node_start[node] : now;
        uint64_t end = n->deadline_usec > n->margin_usec ? n->deadline_usec - n->margin_usec : 0;
        if (grace == 0 || start + grace <= end)
                return 0; /* the planner assumes the grace period */
        uint64_t est = (uint64_t)((double)grace * di->expected_fraction);
        uint64_t left = end > now ? end - now : 0;
        if (left < 1000000)
                left = 1000000;
        est = est < left ? est : left;
        return est > stopping ? est : stopping;
}

static uint64_t shutdown_estimate(const struct drain_inputs *di, size_t node, const char *key,
                                  uint64_t grace, uint64_t stopping, bool *ret_seen)
{
        uint64_t median, longest, est;
        bool seen = drain_shutdowns_get(di->shutdowns, key, &median, &longest);
        *ret_seen = seen;
        if (di->shutdown_basis == DRAIN_SHUTDOWN_SAFE) {
                if (!seen)
                        return unseen_safe(di, node, grace, stopping);
                est = longest > stopping ? longest : stopping;
                uint64_t slack = est / 4 > 1000000 ? est / 4 : 1000000;
                est += slack;
        } else {
                est = seen ? median : (uint64_t)((double)grace * di->expected_fraction);
                est = est > stopping ? est : stopping;
        }
        /* 0 would mean "unknown"; a pod that stops at once still takes a moment. */
        return est > 0 ? est : 1;
}

/* Fills every pod's shutdown estimate from the observed stops and from the pods stopping right now. */
static void estimate_shutdowns(struct drain_inputs *di)
{
        _cleanup_free_ struct sample *stopping = NULL;
        size_t n = 0;

        stopping = calloc(di->n_pods + 1, sizeof(*stopping));
        for (size_t i = 0; stopping && i < di->n_pods; i++) {
                const struct drain_pod_in *p = &di->pods[i];
                if (p->deleting && !p->gone_usec && p->deleted_at_usec && p->owner_key &&
                    di->in.now_usec > p->deleted_at_usec)
                        stopping[n++] = (struct sample){ .key = (char *)p->owner_key,
                                                         .usec = di->in.now_usec - p->deleted_at_usec };
        }
        if (n > 1)
                qsort(stopping, n, sizeof(*stopping), stopping_cmp);
        for (size_t i = 0; i < di->n_pods; i++) {
                struct drain_pod_in *p = &di->pods[i];
                p->shutdown_usec =
                    shutdown_estimate(di, p->node, p->owner_key, p->grace_usec,
                                      stopping_longest(stopping, n, p->owner_key), &p->shutdown_seen);
        }
}

uint64_t drain_inputs_now(const struct drain_inputs *di)
{
        return di->in.now_usec;
}

bool drain_inputs_find_node(const struct drain_inputs *di, const char *name, size_t *ret_index)
{
        for (size_t i = 0; i < di->n_nodes; i++)
                if (streq(di->node_names[i], name)) {
                        *ret_index = i;
                        return true;
                }
        return false;
}

size_t drain_inputs_n_pods(const struct drain_inputs *di)
{
        return di->n_pods;
}

size_t drain_inputs_n_nodes(const struct drain_inputs *di)
{
        return di->n_nodes;
}

const struct drain_input *drain_inputs_get(struct drain_inputs *di)
{
        if (!di->estimated) {
                estimate_shutdowns(di);
                di->estimated = true;
        }
        /* The PDB entries borrow from the parsed PDBs, whose array is final only now. */
        for (size_t i = 0; i < di->n_pdbs; i++) {
                const struct kube_pdb *k = &di->kpdbs[i];
                di->pdbs[i] = (struct drain_pdb_in){
                        .namespace = k->namespace,
                        .name = k->name,
                        .spec = { .min_available = k->min_available, .max_unavailable = k->max_unavailable },
                        .always_allow_unhealthy = streq_ptr(k->unhealthy_pod_eviction_policy, "AlwaysAllow"),
                        .current_healthy = k->current_healthy,
                        .desired_healthy = k->desired_healthy,
                        .expected_pods = k->expected_pods,
                        .disruptions_allowed = k->disruptions_allowed,
                        .covered_pods = k->expected_pods,
                        .lost_usec = di->pdb_lost[i],
                        .n_lost = di->pdb_n_lost[i],
                };
        }
        di->in.nodes = di->nodes;
        di->in.n_nodes = di->n_nodes;
        di->in.pods = di->pods;
        di->in.n_pods = di->n_pods;
        di->in.pdbs = di->pdbs;
        di->in.n_pdbs = di->n_pdbs;
        di->in.startups = di->startups;
        di->in.n_startups = di->n_startups;
        return &di->in;
}

const struct kube_pod *drain_inputs_pod(const struct drain_inputs *di, size_t i)
{
        return i < di->n_pods ? &di->kpods[i] : NULL;
}

/* Labels that differ between siblings, so a selector on them would find only the pod itself. */
static bool label_is_per_pod(const char *key)
{
        static const char *const keys[] = {
                "statefulset.kubernetes.io/pod-name",
                "apps.kubernetes.io/pod-index",
                "batch.kubernetes.io/job-completion-index",
        };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (streq(key, keys[i]))
                        return true;
        return false;
}

char *drain_sibling_selector(const struct kube_pod *p)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        for (size_t i = 0; i < p->n_labels; i++) {
                if (label_is_per_pod(p->labels[i].key))
                        continue;
                if (buf_printf(&b, "%s%s=%s", b.len ? "," : "", p->labels[i].key,
                               p->labels[i].value ? p->labels[i].value : "") < 0)
                        return NULL;
        }
        if (b.len == 0)
                return NULL;
        return TAKE_PTR(b.data);
}

static int sample_cmp(const void *a, const void *b)
{
        const struct sample *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c != 0)
                return c;
        return x->usec < y->usec ? -1 : x->usec > y->usec;
}

void drain_startups_free(struct drain_startup *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free((char *)s[i].owner_key);
        free(s);
}

struct samples {
        struct sample *s;
        size_t n;
};

static void samples_done(struct samples *ss)
{
        for (size_t i = 0; i < ss->n; i++)
                free(ss->s[i].key);
        free(ss->s);
}

struct startups {
        struct drain_startup *s;
        size_t n;
};

static void startups_done(struct startups *st)
{
        drain_startups_free(st->s, st->n);
}

int drain_startups_measure(const cJSON *items, struct drain_startup **ret, size_t *ret_n)
{
        _cleanup_(samples_done) struct samples ss = { 0 };
        _cleanup_(startups_done) struct startups out = { 0 };
        const cJSON *obj;

        cJSON_ArrayForEach (obj, items) {
                _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
                if (kube_pod_parse(obj, &p) < 0)
                        continue;
                if (!p.ready || !p.creation_usec || p.ready_transition_usec <= p.creation_usec)
                        continue;
                _cleanup_free_ char *key = drain_owner_key(&p);
                if (!key && p.owner_kind)
                        return -ENOMEM;
                if (!key) /* a bare pod: nothing else starts like it */
                        continue;
                if (grow((void **)&ss.s, ss.n, sizeof(*ss.s)) < 0)
                        return -ENOMEM;
                ss.s[ss.n++] = (struct sample){ .key = TAKE_PTR(key),
                                                .usec = p.ready_transition_usec - p.creation_usec };
        }
        if (ss.n > 0)
                qsort(ss.s, ss.n, sizeof(*ss.s), sample_cmp);
        for (size_t i = 0, j; i < ss.n; i = j) {
                for (j = i; j < ss.n && streq(ss.s[j].key, ss.s[i].key); j++)
                        ;
                if (grow((void **)&out.s, out.n, sizeof(*out.s)) < 0)
                        return -ENOMEM;
                /* Median of [i, j): the lower middle for an even count, an observed value. */
                out.s[out.n++] = (struct drain_startup){ .owner_key = TAKE_PTR(ss.s[i].key),
                                                         .startup_usec = ss.s[i + (j - i - 1) / 2].usec };
        }
        *ret = TAKE_PTR(out.s);
        *ret_n = out.n;
        out.n = 0;
        return 0;
}

/* ---- observed shutdowns ---- */

/* The latest stops kept per owner: enough for a median, bounded however long the process runs. */
#define SHUTDOWN_SAMPLES 16

struct shutdown_owner {
        char *owner_key;
        uint64_t usec[SHUTDOWN_SAMPLES];
        size_t n, next; /* samples held; where the next one goes (a ring once full) */
};

struct drain_shutdowns {
        struct shutdown_owner *owners;
        size_t n_owners;
        unsigned generation;
};

int drain_shutdowns_new(struct drain_shutdowns **ret)
{
        struct drain_shutdowns *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

struct drain_shutdowns *drain_shutdowns_free(struct drain_shutdowns *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_owners; i++)
                free(s->owners[i].owner_key);
        free(s->owners);
        free(s);
        return NULL;
}

static const struct shutdown_owner *shutdown_owner_find(const struct drain_shutdowns *s, const char *key)
{
        for (size_t i = 0; s && key && i < s->n_owners; i++)
                if (streq(s->owners[i].owner_key, key))
                        return &s->owners[i];
        return NULL;
}

int drain_shutdowns_observe(struct drain_shutdowns *s, const char *owner_key, uint64_t usec,
                            uint64_t unseen_usec)
{
        uint64_t before = unseen_usec, after = 0;
        if (!s || !owner_key)
                return -EINVAL;
        (void)drain_shutdowns_get(s, owner_key, &before, NULL);
        struct shutdown_owner *o = (struct shutdown_owner *)shutdown_owner_find(s, owner_key);
        if (!o) {
                _cleanup_free_ char *key = strdup(owner_key);
                if (!key || grow((void **)&s->owners, s->n_owners, sizeof(*s->owners)) < 0)
                        return -ENOMEM;
                o = &s->owners[s->n_owners++];
                *o = (struct shutdown_owner){ .owner_key = TAKE_PTR(key) };
        }
        o->usec[o->next] = usec;
        o->next = (o->next + 1) % SHUTDOWN_SAMPLES;
        if (o->n < SHUTDOWN_SAMPLES)
                o->n++;
        if (drain_shutdowns_get(s, owner_key, &after, NULL) && after > before)
                s->generation++;
        return 0;
}

static int usec_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

bool drain_shutdowns_get(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median,
                         uint64_t *ret_max)
{
        const struct shutdown_owner *o = shutdown_owner_find(s, owner_key);
        if (!o || o->n == 0)
                return false;
        uint64_t v[SHUTDOWN_SAMPLES];
        memcpy(v, o->usec, o->n * sizeof(*v));
        qsort(v, o->n, sizeof(*v), usec_cmp);
        /* The lower middle for an even count: a value that was observed. */
        if (ret_median)
                *ret_median = v[(o->n - 1) / 2];
        if (ret_max)
                *ret_max = v[o->n - 1];
        return true;
}

unsigned drain_shutdowns_generation(const struct drain_shutdowns *s)
{
        return s ? s->generation : 0;
}
