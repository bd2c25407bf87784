/* Builds the planner's input (struct drain_input) from Kubernetes Pod and PodDisruptionBudget objects, and
 * measures startup times from sibling pods. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/drain_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"

#define USEC_PER_SEC UINT64_C(1000000)

/* What a drain reads of a pod (kube_pod_parse(), the delete's grace): a drain of a node's pods beside
 * hundreds of others must not keep whole pods (managedFields, containers, env). */
const char *const drain_pod_fields[] = {
        "metadata.labels",
        "metadata.annotations",
        /* who replaces it (kube_pod_parse): not the references' apiVersion and blockOwnerDeletion */
        "metadata.ownerReferences[]{kind,name,uid,controller}",
        "metadata.creationTimestamp",
        "metadata.deletionGracePeriodSeconds",
        "spec.nodeName",
        "spec.priority",
        "spec.priorityClassName",
        "spec.terminationGracePeriodSeconds",
        "spec.volumes",
        "status.phase",
        "status.conditions[type=Ready]",
        /* gone with its node (kube_pod_killed_with_node()) */
        "status.conditions[type=DisruptionTarget]",
        /* whether its containers stopped, for its post-mortem after the stop (executor.c; the capture reads
         * the pod whole): not the images and IDs, a third of a pruned pod */
        "status.containerStatuses[]{name,state}",
        NULL,
};

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
        /* The PDBs by namespace, then index (made when pods come after PDBs were added): a pod is matched
         * against its namespace's PDBs only, not every PDB of every drain's namespaces. */
        struct pdb_ns *by_ns;
        size_t n_by_ns;

        struct drain_pod_memo **memos; /* a reference each */
        struct drain_pod_in *pods;
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
                .surge = o->surge,
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

void drain_inputs_plans_borrow_names(struct drain_inputs *di)
{
        di->in.plans_borrow_names = true;
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
        free(di->by_ns);
        for (size_t i = 0; i < di->n_pods; i++) {
                drain_pod_memo_unref(di->memos[i]);
                free(di->pod_pdbs[i]);
        }
        free(di->memos);
        free(di->pods);
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

struct pdb_ns {
        const char *namespace;
        size_t i;
};

static int pdb_ns_cmp(const void *a, const void *b)
{
        const struct pdb_ns *x = a, *y = b;
        int c = strcmp(x->namespace, y->namespace);
        return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int index_pdbs(struct drain_inputs *di)
{
        if (di->n_by_ns == di->n_pdbs && (di->by_ns || di->n_pdbs == 0))
                return 0;
        struct pdb_ns *a = realloc(di->by_ns, (di->n_pdbs ? di->n_pdbs : 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        di->by_ns = a;
        for (size_t i = 0; i < di->n_pdbs; i++)
                a[i] = (struct pdb_ns){ .namespace = di->kpdbs[i].namespace ? di->kpdbs[i].namespace : "",
                                        .i = i };
        qsort(a, di->n_pdbs, sizeof(*a), pdb_ns_cmp);
        di->n_by_ns = di->n_pdbs;
        return 0;
}

static const char *pdb_ns_at(const void *userdata, size_t i)
{
        const struct pdb_ns *a = userdata;
        return a[i].namespace;
}

/* The first entry of by_ns in namespace ns, or where it would be. */
static size_t pdbs_of_namespace(const struct drain_inputs *di, const char *ns)
{
        bool found;
        size_t at = drain_bisect(di->n_by_ns, ns, pdb_ns_at, di->by_ns, &found);
        while (found && at > 0 && streq(di->by_ns[at - 1].namespace, ns))
                at--;
        return at;
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
        /* A Deployment's ReplicaSet is named after it and its pod template's hash: a rollout makes a new
         * one, whose pods stop and start as the old ones did. The Deployment is the owner that lasts. */
        const char *hash = kube_kv_get(p->labels, p->n_labels, "pod-template-hash");
        size_t n = strlen(p->owner_name), h = hash ? strlen(hash) : 0;
        if (streq(p->owner_kind, "ReplicaSet") && h > 0 && n > h + 1 && p->owner_name[n - h - 1] == '-' &&
            streq(p->owner_name + n - h, hash))
                return strprintf("%s/Deployment/%.*s", p->namespace ? p->namespace : "", (int)(n - h - 1),
                                 p->owner_name);
        return strprintf("%s/%s/%s", p->namespace ? p->namespace : "", p->owner_kind, p->owner_name);
}

/* A pod parsed once (kube_pod_parse, its owner key) for every plan made while it stays as it is: a joint
 * plan of hundreds of drains used to parse each of their pods anew, most of the loop's time. */
struct drain_pod_memo {
        unsigned refs;
        struct kube_pod pod;
        char *owner_key; /* drain_owner_key(), NULL: none */
        char *rv;        /* the resourceVersion parsed, NULL: none (never reused) */
};

struct drain_pod_memo *drain_pod_memo_unref(struct drain_pod_memo *m)
{
        if (!m || --m->refs > 0)
                return NULL;
        kube_pod_clear(&m->pod);
        free(m->owner_key);
        free(m->rv);
        free(m);
        return NULL;
}

static int memo_parse(const cJSON *obj, struct drain_pod_memo **ret)
{
        struct drain_pod_memo *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->refs = 1;
        const char *rv = kube_object_rv(obj);
        int r = kube_pod_parse(obj, &m->pod);
        if (r >= 0 && ((m->pod.owner_kind && !(m->owner_key = drain_owner_key(&m->pod))) ||
                       (rv && !(m->rv = strdup(rv)))))
                r = -ENOMEM;
        if (r < 0) {
                drain_pod_memo_unref(m);
                return r;
        }
        *ret = m;
        return 0;
}

int drain_pod_memo_update(struct drain_pod_memo **memo, const cJSON *obj)
{
        const char *rv = kube_object_rv(obj);
        if (*memo && rv && streq_ptr((*memo)->rv, rv))
                return 0;
        struct drain_pod_memo *m;
        int r = memo_parse(obj, &m);
        if (r < 0)
                return r;
        drain_pod_memo_unref(*memo);
        *memo = m;
        return 0;
}

int drain_inputs_add_pod_memo(struct drain_inputs *di, size_t node, struct drain_pod_memo *m,
                              size_t *ret_index)
{
        _cleanup_free_ size_t *pdbs = NULL;
        size_t n_pdbs = 0;
        int r;

        if (node >= di->n_nodes || !m)
                return -EINVAL;
        const struct kube_pod *kp = &m->pod;
        r = index_pdbs(di);
        if (r < 0)
                return r;
        /* In index order within the namespace, as a walk over every PDB would find them. */
        const char *ns = kp->namespace ? kp->namespace : "";
        for (size_t k = pdbs_of_namespace(di, ns); k < di->n_by_ns && streq(di->by_ns[k].namespace, ns);
             k++) {
                size_t i = di->by_ns[k].i;
                if (!kube_pdb_matches_pod(&di->kpdbs[i], kp))
                        continue;
                r = grow((void **)&pdbs, n_pdbs, sizeof(*pdbs));
                if (r < 0)
                        return r;
                pdbs[n_pdbs++] = i;
        }
        if (grow((void **)&di->memos, di->n_pods, sizeof(*di->memos)) < 0 ||
            grow((void **)&di->pods, di->n_pods, sizeof(*di->pods)) < 0 ||
            grow((void **)&di->pod_pdbs, di->n_pods, sizeof(*di->pod_pdbs)) < 0)
                return -ENOMEM;

        const char *dnd = kube_pod_annotation(kp, SPOTDRAIN_ANNOTATION_DO_NOT_DISRUPT);
        bool keep = streq_ptr(dnd, "true") || kube_pod_annotation(kp, SPOTDRAIN_ANNOTATION_KEEP);
        m->refs++;
        di->memos[di->n_pods] = m;
        di->pods[di->n_pods] = (struct drain_pod_in){
                .uid = kp->uid,
                .namespace = kp->namespace,
                .name = kp->name,
                .node = node,
                .owner = owner_of(kp),
                .owner_key = m->owner_key,
                .priority = kp->has_priority ? kp->priority : 0,
                .priority_class = kp->priority_class,
                .grace_usec = kp->grace_seconds > 0 ? (uint64_t)kp->grace_seconds * 1000000 : 0,
                .do_not_disrupt = keep,
                .mirror = kp->mirror,
                .emptydir = kp->has_emptydir,
                .ready = kp->ready,
                .pending = streq_ptr(kp->phase, "Pending"),
                .deleting = kp->deletion_usec != 0,
                .deleted_at_usec = kp->deleted_usec,
                .pdbs = pdbs,
                .n_pdbs = n_pdbs,
        };
        di->pod_pdbs[di->n_pods] = TAKE_PTR(pdbs);
        if (ret_index)
                *ret_index = di->n_pods;
        di->n_pods++;
        di->estimated = false;
        return 0;
}

int drain_inputs_add_pod(struct drain_inputs *di, size_t node, const cJSON *obj, size_t *ret_index)
{
        struct drain_pod_memo *m;
        if (node >= di->n_nodes)
                return -EINVAL;
        int r = memo_parse(obj, &m);
        if (r < 0)
                return r;
        r = drain_inputs_add_pod_memo(di, node, m, ret_index);
        drain_pod_memo_unref(m);
        return r;
}

/* A Service selects a pod when it is in the Service's namespace and its labels hold every pair of the
 * Service's spec.selector; a Service without a selector (endpoints managed by hand) selects none. */
bool drain_service_selects(const cJSON *svc, const struct kube_pod *kp)
{
        const cJSON *sel =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(svc, "spec"), "selector");
        const cJSON *kv;
        if (!streq_ptr(kube_object_str(svc, "metadata.namespace"), kp->namespace) || !cJSON_IsObject(sel) ||
            !sel->child)
                return false;
        cJSON_ArrayForEach (kv, sel)
                if (!cJSON_IsString(kv) ||
                    !streq_ptr(kube_kv_get(kp->labels, kp->n_labels, kv->string), kv->valuestring))
                        return false;
        return true;
}

void drain_inputs_mark_services(struct drain_inputs *di, size_t first_pod, const cJSON *services)
{
        for (size_t i = first_pod; i < di->n_pods; i++) {
                const cJSON *svc;
                bool behind = false;
                cJSON_ArrayForEach (svc, services)
                        if ((behind = drain_service_selects(svc, &di->memos[i]->pod)))
                                break;
                di->pods[i].behind_service = behind;
        }
        di->estimated = false;
}

int drain_inputs_set_lb_target(struct drain_inputs *di, size_t i, uint64_t until_usec)
{
        if (i >= di->n_pods)
                return -EINVAL;
        di->pods[i].behind_service = false;
        di->pods[i].lb_target = true;
        di->pods[i].lb_hold_usec = until_usec;
        return 0;
}

int drain_inputs_set_node_lb_hold(struct drain_inputs *di, size_t node, uint64_t until_usec)
{
        if (node >= di->n_nodes)
                return -EINVAL;
        di->nodes[node].lb_hold_usec = until_usec;
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

int drain_inputs_set_deleting(struct drain_inputs *di, size_t i, uint64_t deleted_usec)
{
        if (i >= di->n_pods || !deleted_usec)
                return -EINVAL;
        if (di->pods[i].deleting)
                return 0;
        di->pods[i].deleting = true;
        di->pods[i].deleted_at_usec = deleted_usec;
        di->estimated = false;
        return 0;
}

int drain_inputs_set_surge(struct drain_inputs *di, size_t i, bool can_surge, uint64_t surged_usec)
{
        if (i >= di->n_pods)
                return -EINVAL;
        di->pods[i].can_surge = can_surge;
        di->pods[i].surged_usec = surged_usec;
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
        return i < di->n_pods ? &di->memos[i]->pod : NULL;
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

/* Pods whose stop or start was counted, the latest of them: a pod seen by the learner and by a drain (or
 * twice by one) counts once. */
#define SEEN_PODS 256

/* One kind of sample of one owner: the latest SHUTDOWN_SAMPLES, a ring once full. A sample is known by its
 * value, when it was seen (whole seconds of the engine clock) and its pod (a hash of the UID; 0 unknown):
 * what two processes merge is the union of their samples, each counted once however often it goes back
 * and forth through the ConfigMap, and two pods that stopped alike in one second count twice. */
struct kept_samples {
        uint64_t usec[SHUTDOWN_SAMPLES];
        uint32_t at[SHUTDOWN_SAMPLES];
        uint32_t pod[SHUTDOWN_SAMPLES];
        size_t n, next; /* samples held; where the next one goes */
        unsigned seen;  /* ever, also beyond the samples held */
};

struct shutdown_owner {
        char *owner_key;
        struct kept_samples stops, startups;
        uint64_t updated_usec; /* the latest sample's time (engine clock); 0 unknown */
        bool local;            /* a sample was seen by this process, not only read */
};

struct drain_shutdowns {
        struct shutdown_owner *owners;
        size_t n_owners;
        /* Indexes of owners in the order of their keys: every pod of every plan looks its owner up, and a
         * cluster has hundreds of owners with long common prefixes. */
        size_t *by_key;
        unsigned generation;
        unsigned changes;
        char *seen[SEEN_PODS];
        size_t next_seen;
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
        free(s->by_key);
        for (size_t i = 0; i < SEEN_PODS; i++)
                free(s->seen[i]);
        free(s);
        return NULL;
}

size_t drain_bisect(size_t n, const char *key, const char *(*key_at)(const void *userdata, size_t i),
                    const void *userdata, bool *found)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(key_at(userdata, mid), key);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static const char *owner_key_at(const void *userdata, size_t i)
{
        const struct drain_shutdowns *s = userdata;
        return s->owners[s->by_key[i]].owner_key;
}

/* Where key is in by_key (*found), or would go. */
static size_t shutdown_owner_position(const struct drain_shutdowns *s, const char *key, bool *found)
{
        return drain_bisect(s->n_owners, key, owner_key_at, s, found);
}

static const struct shutdown_owner *shutdown_owner_find(const struct drain_shutdowns *s, const char *key)
{
        bool found;
        if (!s || !key)
                return NULL;
        size_t at = shutdown_owner_position(s, key, &found);
        return found ? &s->owners[s->by_key[at]] : NULL;
}

static struct shutdown_owner *shutdown_owner_get(struct drain_shutdowns *s, const char *owner_key)
{
        bool found;
        size_t at = shutdown_owner_position(s, owner_key, &found);
        if (found)
                return &s->owners[s->by_key[at]];
        _cleanup_free_ char *key = strdup(owner_key);
        if (!key || grow((void **)&s->owners, s->n_owners, sizeof(*s->owners)) < 0 ||
            grow((void **)&s->by_key, s->n_owners, sizeof(*s->by_key)) < 0)
                return NULL;
        memmove(&s->by_key[at + 1], &s->by_key[at], (s->n_owners - at) * sizeof(*s->by_key));
        s->by_key[at] = s->n_owners;
        struct shutdown_owner *o = &s->owners[s->n_owners++];
        *o = (struct shutdown_owner){ .owner_key = TAKE_PTR(key) };
        return o;
}

static void ring_put(struct kept_samples *r, uint64_t usec, uint32_t at, uint32_t pod)
{
        r->usec[r->next] = usec;
        r->at[r->next] = at;
        r->pod[r->next] = pod;
        r->next = (r->next + 1) % SHUTDOWN_SAMPLES;
        if (r->n < SHUTDOWN_SAMPLES)
                r->n++;
}

/* FNV-1a of the pod's UID, never 0 (0: no UID). */
static uint32_t pod_hash(const char *uid)
{
        uint32_t h = 2166136261u;
        if (!uid)
                return 0;
        for (const unsigned char *c = (const unsigned char *)uid; *c; c++)
                h = (h ^ *c) * 16777619u;
        return h ? h : 1;
}

/* One sample seen here into one of the owner's rings. */
static void sample_push(struct drain_shutdowns *s, struct shutdown_owner *o, struct kept_samples *r,
                        uint64_t usec, const char *uid)
{
        s->changes++;
        o->updated_usec = clk_now();
        o->local = true;
        /* Milliseconds, as kept: a sample read back is the same sample. */
        ring_put(r, usec / 1000 * 1000, (uint32_t)(o->updated_usec / USEC_PER_SEC), pod_hash(uid));
        r->seen++;
}

static int observe_stop(struct drain_shutdowns *s, const char *owner_key, const char *uid, uint64_t usec,
                        uint64_t unseen_usec)
{
        uint64_t before = unseen_usec, after = 0;
        if (!s || !owner_key)
                return -EINVAL;
        (void)drain_shutdowns_get(s, owner_key, &before, NULL);
        struct shutdown_owner *o = shutdown_owner_get(s, owner_key);
        if (!o)
                return -ENOMEM;
        sample_push(s, o, &o->stops, usec, uid);
        if (drain_shutdowns_get(s, owner_key, &after, NULL) && after > before)
                s->generation++;
        return 0;
}

int drain_shutdowns_observe(struct drain_shutdowns *s, const char *owner_key, uint64_t usec,
                            uint64_t unseen_usec)
{
        return observe_stop(s, owner_key, NULL, usec, unseen_usec);
}

static int usec_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static uint64_t median_of(const struct kept_samples *r)
{
        uint64_t v[SHUTDOWN_SAMPLES];
        memcpy(v, r->usec, r->n * sizeof(*v));
        qsort(v, r->n, sizeof(*v), usec_cmp);
        /* The lower middle for an even count: a value that was observed. */
        return v[(r->n - 1) / 2];
}

bool drain_shutdowns_get(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median,
                         uint64_t *ret_max)
{
        const struct shutdown_owner *o = shutdown_owner_find(s, owner_key);
        if (!o || o->stops.n == 0)
                return false;
        if (ret_median)
                *ret_median = median_of(&o->stops);
        if (ret_max) {
                uint64_t m = 0;
                for (size_t k = 0; k < o->stops.n; k++)
                        m = o->stops.usec[k] > m ? o->stops.usec[k] : m;
                *ret_max = m;
        }
        return true;
}

unsigned drain_shutdowns_generation(const struct drain_shutdowns *s)
{
        return s ? s->generation : 0;
}

int drain_shutdowns_observe_stop(struct drain_shutdowns *s, const struct kube_pod *kp, const char *owner_key,
                                 uint64_t start, int64_t forced_grace, uint64_t deadline_usec,
                                 double expected_fraction)
{
        uint64_t now = clk_now();
        int64_t grace = kube_pod_stop_grace(kp);
        if (!start)
                start = kp->deleted_usec; /* deleted by someone else */
        /* Not a graceful stop's length: a pod gone with its instance, forced out, or cut short by a
         * shortened grace. */
        if (!start || now <= start || now + USEC_PER_SEC >= deadline_usec ||
            kube_pod_force_deleted(kp, now) || (kp->stopped_usec && kp->stopped_usec < start))
                return 0;
        uint64_t took = now - start;
        if (grace < kp->grace_seconds && took + USEC_PER_SEC >= (uint64_t)grace * USEC_PER_SEC)
                return 0;
        if (forced_grace > 0 && forced_grace < kp->grace_seconds &&
            took + USEC_PER_SEC >= (uint64_t)forced_grace * USEC_PER_SEC)
                return 0;
        uint64_t unseen = (uint64_t)((double)kp->grace_seconds * 1e6 * expected_fraction);
        return drain_shutdowns_observe_pod(s, owner_key, kp->uid, took, unseen);
}

/* Whether the pod (by UID) was counted before; counts it now. NULL: never counted. */
static bool seen_before(struct drain_shutdowns *s, const char *uid, const char *what)
{
        if (!uid)
                return false;
        _cleanup_free_ char *key = strprintf("%s:%s", what, uid);
        for (size_t i = 0; key && i < SEEN_PODS; i++)
                if (s->seen[i] && streq(s->seen[i], key))
                        return true;
        if (key) {
                free(s->seen[s->next_seen]);
                s->seen[s->next_seen] = TAKE_PTR(key);
                s->next_seen = (s->next_seen + 1) % SEEN_PODS;
        }
        return false;
}

int drain_shutdowns_observe_pod(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                uint64_t usec, uint64_t unseen_usec)
{
        if (!s || !owner_key)
                return -EINVAL;
        if (seen_before(s, uid, "stop"))
                return 0;
        return observe_stop(s, owner_key, uid, usec, unseen_usec);
}

int drain_shutdowns_observe_startup(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                    uint64_t usec)
{
        if (!s || !owner_key)
                return -EINVAL;
        if (seen_before(s, uid, "start"))
                return 0;
        struct shutdown_owner *o = shutdown_owner_get(s, owner_key);
        if (!o)
                return -ENOMEM;
        sample_push(s, o, &o->startups, usec, uid);
        return 0;
}

bool drain_shutdowns_startup(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median)
{
        const struct shutdown_owner *o = shutdown_owner_find(s, owner_key);
        if (!o || o->startups.n == 0)
                return false;
        *ret_median = median_of(&o->startups);
        return true;
}

int drain_shutdowns_startups(const struct drain_shutdowns *s, struct drain_startup **ret, size_t *ret_n)
{
        _cleanup_(startups_done) struct startups out = { 0 };
        for (size_t i = 0; s && i < s->n_owners; i++) {
                const struct shutdown_owner *o = &s->owners[i];
                if (o->startups.n == 0)
                        continue;
                char *key = strdup(o->owner_key);
                if (!key || grow((void **)&out.s, out.n, sizeof(*out.s)) < 0) {
                        free(key);
                        return -ENOMEM;
                }
                out.s[out.n++] =
                    (struct drain_startup){ .owner_key = key, .startup_usec = median_of(&o->startups) };
        }
        *ret = TAKE_PTR(out.s);
        *ret_n = out.n;
        out.n = 0;
        return 0;
}

unsigned drain_shutdowns_changes(const struct drain_shutdowns *s)
{
        return s ? s->changes : 0;
}

void drain_shutdowns_forget_foreign(struct drain_shutdowns *s)
{
        if (!s || s->n_owners == 0)
                return;
        /* by_key indexes owners: it keeps its order, renumbered for the owners kept. Without memory for
         * that, nothing is forgotten (the foreign owners only cost their room). */
        _cleanup_free_ size_t *to = malloc(s->n_owners * sizeof(*to));
        size_t kept = 0, n_index = 0;
        if (!to)
                return;
        for (size_t i = 0; i < s->n_owners; i++) {
                if (s->owners[i].local) {
                        to[i] = kept;
                        s->owners[kept++] = s->owners[i];
                } else {
                        to[i] = SIZE_MAX;
                        free(s->owners[i].owner_key);
                }
        }
        for (size_t j = 0; j < s->n_owners; j++)
                if (to[s->by_key[j]] != SIZE_MAX)
                        s->by_key[n_index++] = to[s->by_key[j]];
        s->n_owners = kept;
}

size_t drain_shutdowns_owners(const struct drain_shutdowns *s)
{
        return s ? s->n_owners : 0;
}

/* ---- the estimates as JSON (what is kept across restarts and shared) ---- */

static void json_freep(cJSON **j)
{
        cJSON_Delete(*j);
}

enum ring_field {
        RING_MS,  /* the values, whole milliseconds */
        RING_AT,  /* when each was seen, whole seconds */
        RING_POD, /* the pod's hash */
};

/* One field of a ring's samples, oldest first, so that a reload keeps the ring's order. */
static cJSON *ring_array(const struct kept_samples *r, enum ring_field f)
{
        cJSON *a = cJSON_CreateArray();
        size_t first = r->n < SHUTDOWN_SAMPLES ? 0 : r->next;
        for (size_t k = 0; a && k < r->n; k++) {
                size_t i = (first + k) % SHUTDOWN_SAMPLES;
                cJSON *v = cJSON_CreateNumber(f == RING_AT    ? (double)r->at[i]
                                              : f == RING_POD ? (double)r->pod[i]
                                                              : (double)(r->usec[i] / 1000));
                if (!v || !cJSON_AddItemToArray(a, v)) {
                        cJSON_Delete(v);
                        cJSON_Delete(a);
                        return NULL;
                }
        }
        return a;
}

int drain_shutdowns_to_json(const struct drain_shutdowns *s, cJSON **ret)
{
        _cleanup_(json_freep) cJSON *root = cJSON_CreateObject();
        cJSON *owners = root ? cJSON_AddObjectToObject(root, "owners") : NULL;
        if (!owners || !cJSON_AddNumberToObject(root, "version", 1))
                return -ENOMEM;
        for (size_t i = 0; s && i < s->n_owners; i++) {
                const struct shutdown_owner *o = &s->owners[i];
                char updated[64] = "";
                cJSON *e = cJSON_AddObjectToObject(owners, o->owner_key);
                if (!e || !cJSON_AddItemToObject(e, "stops_ms", ring_array(&o->stops, RING_MS)) ||
                    !cJSON_AddItemToObject(e, "stops_at", ring_array(&o->stops, RING_AT)) ||
                    !cJSON_AddItemToObject(e, "stops_pod", ring_array(&o->stops, RING_POD)) ||
                    !cJSON_AddItemToObject(e, "startups_ms", ring_array(&o->startups, RING_MS)) ||
                    !cJSON_AddItemToObject(e, "startups_at", ring_array(&o->startups, RING_AT)) ||
                    !cJSON_AddItemToObject(e, "startups_pod", ring_array(&o->startups, RING_POD)) ||
                    !cJSON_AddNumberToObject(e, "stops_seen", o->stops.seen) ||
                    !cJSON_AddNumberToObject(e, "startups_seen", o->startups.seen))
                        return -ENOMEM;
                if (o->updated_usec && format_rfc3339(o->updated_usec, updated, sizeof(updated)) >= 0 &&
                    !cJSON_AddStringToObject(e, "updated", updated))
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(root);
        return 0;
}

/* Item k of a parallel array of whole numbers in [0, 2^32): true with it (absent array: fallback). */
static bool parallel_u32(const cJSON *a, size_t k, uint32_t fallback, uint32_t *ret)
{
        const cJSON *t = a ? cJSON_GetArrayItem(a, (int)k) : NULL;
        if (!a) {
                *ret = fallback;
                return true;
        }
        if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 4294967295.0)
                return false;
        *ret = (uint32_t)t->valuedouble;
        return true;
}

/* Up to SHUTDOWN_SAMPLES whole non-negative milliseconds (KIND_ms) with the seconds they were seen (KIND_at;
 * absent, as a document of an earlier spotdrain has them: the entry's updated time) and their pods
 * (KIND_pod; absent: 0) into a ring, the latest kept; -EINVAL for anything else. */
static int load_ring(const cJSON *e, const char *kind, uint32_t updated, struct kept_samples *r)
{
        char key[32];
        const cJSON *v, *times, *pods, *values;
        size_t k = 0;
        snprintf(key, sizeof(key), "%s_ms", kind);
        if (!(values = cJSON_GetObjectItemCaseSensitive(e, key)))
                return 0;
        snprintf(key, sizeof(key), "%s_at", kind);
        times = cJSON_GetObjectItemCaseSensitive(e, key);
        snprintf(key, sizeof(key), "%s_pod", kind);
        pods = cJSON_GetObjectItemCaseSensitive(e, key);
        if (!cJSON_IsArray(values) || (times && !cJSON_IsArray(times)) || (pods && !cJSON_IsArray(pods)))
                return -EINVAL;
        cJSON_ArrayForEach (v, values) {
                uint32_t at, pod;
                if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 ||
                    !parallel_u32(times, k, updated, &at) || !parallel_u32(pods, k, 0, &pod))
                        return -EINVAL;
                ring_put(r, (uint64_t)v->valuedouble * 1000, at, pod);
                k++;
        }
        return 0;
}

static unsigned seen_count(const cJSON *o, const char *key, size_t at_least)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        double d = cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 4e9 ? v->valuedouble : 0;
        return d > (double)at_least ? (unsigned)d : (unsigned)at_least;
}

static bool ring_has(const struct kept_samples *r, uint64_t usec, uint32_t at, uint32_t pod)
{
        for (size_t k = 0; k < r->n; k++)
                if (r->usec[k] == usec && r->at[k] == at && r->pod[k] == pod)
                        return true;
        return false;
}

struct timed {
        uint64_t usec;
        uint32_t at, pod;
};

static int timed_cmp(const void *a, const void *b)
{
        const struct timed *x = a, *y = b;
        return x->at < y->at ? -1 : x->at > y->at;
}

/* The union of the samples held here and those read (in), the latest SHUTDOWN_SAMPLES of it, in the order
 * they were seen. Seen counts: what was read, and the samples only this side had on top (never less than
 * either side's). How many samples came in that were not held here. */
static size_t samples_union(struct kept_samples *have, const struct kept_samples *in, unsigned in_seen)
{
        struct timed all[2 * SHUTDOWN_SAMPLES];
        size_t n = 0, added = 0, only_here = 0;
        for (size_t k = 0; k < have->n; k++) {
                all[n++] = (struct timed){ have->usec[k], have->at[k], have->pod[k] };
                only_here += !ring_has(in, have->usec[k], have->at[k], have->pod[k]);
        }
        for (size_t k = 0; k < in->n; k++)
                if (!ring_has(have, in->usec[k], in->at[k], in->pod[k])) {
                        all[n++] = (struct timed){ in->usec[k], in->at[k], in->pod[k] };
                        added++;
                }
        if (added == 0)
                return 0;
        qsort(all, n, sizeof(*all), timed_cmp);
        unsigned seen = in_seen + (unsigned)only_here;
        if (seen < have->seen)
                seen = have->seen;
        *have = (struct kept_samples){ .seen = seen };
        for (size_t k = n > SHUTDOWN_SAMPLES ? n - SHUTDOWN_SAMPLES : 0; k < n; k++)
                ring_put(have, all[k].usec, all[k].at, all[k].pod);
        return added;
}

int drain_shutdowns_merge_json(struct drain_shutdowns *s, const cJSON *root, size_t *ret_taken)
{
        const cJSON *owners = cJSON_GetObjectItemCaseSensitive(root, "owners"), *e;
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        size_t taken = 0;
        if (!s || !cJSON_IsObject(owners) || !cJSON_IsNumber(version) || version->valuedouble != 1)
                return -EINVAL;
        cJSON_ArrayForEach (e, owners) {
                struct kept_samples stops = { 0 }, startups = { 0 };
                uint64_t updated = 0;
                const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "updated"));
                if (!e->string || !cJSON_IsObject(e) || (u && parse_rfc3339(u, &updated) < 0))
                        continue;
                uint32_t at = (uint32_t)(updated / USEC_PER_SEC);
                if (load_ring(e, "stops", at, &stops) < 0 || load_ring(e, "startups", at, &startups) < 0)
                        continue; /* one bad entry spoils no other */
                if (stops.n == 0 && startups.n == 0)
                        continue;
                uint64_t before = 0, after = 0;
                bool had = drain_shutdowns_get(s, e->string, &before, NULL);
                struct shutdown_owner *o = shutdown_owner_get(s, e->string);
                if (!o)
                        return -ENOMEM;
                size_t added =
                    samples_union(&o->stops, &stops, seen_count(e, "stops_seen", stops.n)) +
                    samples_union(&o->startups, &startups, seen_count(e, "startups_seen", startups.n));
                if (added == 0)
                        continue;
                if (updated > o->updated_usec)
                        o->updated_usec = updated;
                if (drain_shutdowns_get(s, e->string, &after, NULL) && (!had || after > before))
                        s->generation++;
                taken++;
        }
        if (ret_taken)
                *ret_taken = taken;
        return 0;
}
