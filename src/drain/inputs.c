/* Builds the planner's input (struct drain_input) from Kubernetes Pod and PodDisruptionBudget objects; the
 * startup and shutdown times it goes by are shutdowns.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/drain_internal.h"
#include "drain/inputs_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"

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
        /* whether it has an emptyDir (data lost with the node): not each volume's source, which for the
         * service account token every pod has (projected) is a tree of a dozen fields */
        "spec.volumes[]{name,emptyDir}",
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
        if (!copy || drain_grow((void **)&di->nodes, di->n_nodes, sizeof(*di->nodes)) < 0 ||
            drain_grow((void **)&di->node_names, di->n_nodes, sizeof(*di->node_names)) < 0 ||
            drain_grow((void **)&di->node_start, di->n_nodes, sizeof(*di->node_start)) < 0)
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
        if (drain_grow((void **)&di->kpdbs, di->n_pdbs, sizeof(*di->kpdbs)) < 0 ||
            drain_grow((void **)&di->pdbs, di->n_pdbs, sizeof(*di->pdbs)) < 0 ||
            drain_grow((void **)&di->pdb_lost, di->n_pdbs, sizeof(*di->pdb_lost)) < 0 ||
            drain_grow((void **)&di->pdb_n_lost, di->n_pdbs, sizeof(*di->pdb_n_lost)) < 0)
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

bool drain_pod_memo_is(const struct drain_pod_memo *m, const char *rv)
{
        return m && rv && streq_ptr(m->rv, rv);
}

const struct kube_pod *drain_pod_memo_pod(const struct drain_pod_memo *m)
{
        return &m->pod;
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
                r = drain_grow((void **)&pdbs, n_pdbs, sizeof(*pdbs));
                if (r < 0)
                        return r;
                pdbs[n_pdbs++] = i;
        }
        if (drain_grow((void **)&di->memos, di->n_pods, sizeof(*di->memos)) < 0 ||
            drain_grow((void **)&di->pods, di->n_pods, sizeof(*di->pods)) < 0 ||
            drain_grow((void **)&di->pod_pdbs, di->n_pods, sizeof(*di->pod_pdbs)) < 0)
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
