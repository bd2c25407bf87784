/* The start-up sweep of surge records (include/spotdrain/surge.h): Deployments left raised by a process
 * that died before it could put them back. A record is restored unless a drain of its node is still under
 * way with pods of that Deployment on the node: that drain adopts the record and restores it itself. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/surge.h"
#include "spotdrain/util.h"

#define USEC_PER_SEC    UINT64_C(1000000)
#define RETRY_BASE_USEC (200 * 1000ULL)
#define RETRY_MAX_USEC  (10 * USEC_PER_SEC)

enum snode_state {
        SNODE_NODE,    /* reading the node */
        SNODE_PODS,    /* its drain is under way: listing its pods */
        SNODE_DECIDED, /* every record restored or left to the drain */
};

/* The records naming one node. */
struct snode {
        struct drain_surge_sweep *sw;
        char *name;
        enum snode_state state;
        char **ns, **dep; /* the Deployments carrying a record of this node */
        size_t n;
        struct drain_surge *sg; /* the restores */
        struct kube_call *call;
        struct timer *retry;
        struct backoff backoff;
};

struct drain_surge_sweep {
        struct kube_client *c;
        char *only; /* NULL: every node's records */
        bool listed;
        struct kube_call *call;
        struct timer *retry;
        struct backoff backoff;
        struct snode **nodes;
        size_t n_nodes;
        unsigned found, left;
};

static struct snode *snode_free(struct snode *sn)
{
        if (!sn)
                return NULL;
        kube_call_cancel(sn->call);
        timer_cancel(sn->retry);
        drain_surge_free(sn->sg);
        for (size_t i = 0; i < sn->n; i++) {
                free(sn->ns[i]);
                free(sn->dep[i]);
        }
        free(sn->ns);
        free(sn->dep);
        free(sn->name);
        free(sn);
        return NULL;
}

struct drain_surge_sweep *drain_surge_sweep_free(struct drain_surge_sweep *sw)
{
        if (!sw)
                return NULL;
        kube_call_cancel(sw->call);
        timer_cancel(sw->retry);
        for (size_t i = 0; i < sw->n_nodes; i++)
                snode_free(sw->nodes[i]);
        free(sw->nodes);
        free(sw->only);
        free(sw);
        return NULL;
}

static struct snode *snode_get(struct drain_surge_sweep *sw, const char *name)
{
        for (size_t i = 0; i < sw->n_nodes; i++)
                if (streq(sw->nodes[i]->name, name))
                        return sw->nodes[i];
        struct snode **a = realloc(sw->nodes, (sw->n_nodes + 1) * sizeof(*a));
        if (!a)
                return NULL;
        sw->nodes = a;
        struct snode *sn = calloc(1, sizeof(*sn));
        if (!sn || !(sn->name = strdup(name)) ||
            drain_surge_new(sw->c, name, DRAIN_SURGE_BLOCKED, NULL, NULL, NULL, &sn->sg) < 0)
                return snode_free(sn);
        sn->sw = sw;
        sn->backoff = BACKOFF_INIT(RETRY_BASE_USEC, RETRY_MAX_USEC);
        sw->nodes[sw->n_nodes++] = sn;
        return sn;
}

static int snode_add(struct snode *sn, const char *ns, const char *dep)
{
        char **a = realloc(sn->ns, (sn->n + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        sn->ns = a;
        char **b = realloc(sn->dep, (sn->n + 1) * sizeof(*b));
        if (!b)
                return -ENOMEM;
        sn->dep = b;
        if (!(sn->ns[sn->n] = strdup(ns)))
                return -ENOMEM;
        if (!(sn->dep[sn->n] = strdup(dep))) {
                free(sn->ns[sn->n]);
                return -ENOMEM;
        }
        sn->n++;
        return 0;
}

static void snode_restore(struct snode *sn, size_t i, const char *why)
{
        log_notice("deployment %s/%s was left surged for node %s, which %s: restoring it", sn->ns[i],
                   sn->dep[i], sn->name, why);
        int r = drain_surge_restore_record(sn->sg, sn->ns[i], sn->dep[i]);
        if (r < 0 && r != -EALREADY)
                log_warning_errno(r, "cannot restore deployment %s/%s, ignoring", sn->ns[i], sn->dep[i]);
}

static void snode_decided(struct snode *sn)
{
        sn->state = SNODE_DECIDED;
        sn->sw->left--;
}

/* ---- one node: gone, not draining, or draining with pods of the Deployment left ---- */

static void snode_step(struct snode *sn);

static void snode_retry_fire(void *userdata)
{
        struct snode *sn = userdata;
        sn->retry = NULL;
        snode_step(sn);
}

static void snode_retry(struct snode *sn, int error, const char *what)
{
        uint64_t delay = backoff_next(&sn->backoff);
        log_debug_errno(error, "surge sweep: cannot read %s of %s, trying again in %.1f s", what, sn->name,
                        (double)delay / (double)USEC_PER_SEC);
        (void)timer_start_in(kube_client_loop(sn->sw->c), delay, snode_retry_fire, sn, &sn->retry);
}

/* A drain is under way on the node: it is recorded there and its deadline has not passed. */
static bool draining(const cJSON *node)
{
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(node, "metadata"), "annotations");
        const char *value =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_DRAIN));
        cJSON *rec = value ? cJSON_Parse(value) : NULL;
        uint64_t deadline = 0;
        bool r = parse_rfc3339(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "deadline")),
                               &deadline) >= 0 &&
                 deadline > clk_now();
        cJSON_Delete(rec);
        return r;
}

static void node_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct snode *sn = userdata;
        sn->call = NULL;
        if (r->error < 0 && r->error != -ENOENT) {
                snode_retry(sn, r->error, "the node");
                return;
        }
        backoff_reset(&sn->backoff);
        if (r->error == -ENOENT || !draining(r->object)) {
                for (size_t i = 0; i < sn->n; i++)
                        snode_restore(sn, i, r->error == -ENOENT ? "is gone" : "is not draining");
                snode_decided(sn);
                return;
        }
        sn->state = SNODE_PODS;
        snode_step(sn);
}

static bool has_pod_of(const cJSON *pods, const char *ns, const char *dep)
{
        const cJSON *o;
        cJSON_ArrayForEach (o, kube_list_items(pods)) {
                struct kube_pod p = { 0 };
                if (kube_pod_parse(o, &p) < 0)
                        continue;
                _cleanup_free_ char *of = drain_surge_deployment_of(&p);
                bool match = !p.deletion_usec && streq_ptr(p.namespace, ns) && streq_ptr(of, dep);
                kube_pod_clear(&p);
                if (match)
                        return true;
        }
        return false;
}

static void pods_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct snode *sn = userdata;
        sn->call = NULL;
        if (r->error < 0) {
                snode_retry(sn, r->error, "the pods");
                return;
        }
        for (size_t i = 0; i < sn->n; i++) {
                if (!has_pod_of(r->object, sn->ns[i], sn->dep[i]))
                        snode_restore(sn, i, "has no pod of it left");
                else
                        log_info("deployment %s/%s stays surged: the drain of %s under way restores it",
                                 sn->ns[i], sn->dep[i], sn->name);
        }
        snode_decided(sn);
}

static void snode_step(struct snode *sn)
{
        struct kube_client *c = sn->sw->c;
        int r = -ENOMEM;
        if (sn->state == SNODE_NODE) {
                _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", sn->name, NULL);
                if (path)
                        r = kube_get(c, path, node_done, sn, &sn->call);
        } else if (sn->state == SNODE_PODS) {
                _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "pods", NULL, NULL);
                _cleanup_free_ char *field = strprintf("spec.nodeName=%s", sn->name);
                struct kube_list_options lo = { .field_selector = field };
                if (path && field)
                        r = kube_list(c, path, &lo, pods_done, sn, &sn->call);
        } else
                return;
        if (r < 0)
                snode_retry(sn, r, "the node");
}

/* ---- the Deployments carrying a record ---- */

static void sweep_list(struct drain_surge_sweep *sw);

static void sweep_retry_fire(void *userdata)
{
        struct drain_surge_sweep *sw = userdata;
        sw->retry = NULL;
        sweep_list(sw);
}

static void sweep_retry(struct drain_surge_sweep *sw, int error)
{
        uint64_t delay = backoff_next(&sw->backoff);
        log_debug_errno(error, "surge sweep: cannot list the deployments, trying again in %.1f s",
                        (double)delay / (double)USEC_PER_SEC);
        (void)timer_start_in(kube_client_loop(sw->c), delay, sweep_retry_fire, sw, &sw->retry);
}

static int sweep_record(struct drain_surge_sweep *sw, const cJSON *obj)
{
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");
        const char *record =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_SURGE));
        const char *ns = kube_object_str(obj, "metadata.namespace");
        const char *name = kube_object_str(obj, "metadata.name");
        if (!record || !ns || !name)
                return 0;
        cJSON *rec = cJSON_Parse(record);
        const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "node"));
        int r = 0;
        if (!node)
                log_warning("deployment %s/%s carries a malformed %s record, ignoring", ns, name,
                            SPOTDRAIN_ANNOTATION_SURGE);
        else if (!sw->only || streq(sw->only, node)) {
                struct snode *sn = snode_get(sw, node);
                r = sn ? snode_add(sn, ns, name) : -ENOMEM;
                if (r >= 0)
                        sw->found++;
        }
        cJSON_Delete(rec);
        return r;
}

static void list_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_surge_sweep *sw = userdata;
        const cJSON *o;
        sw->call = NULL;
        /* Not served (404): no Deployment can carry a record. */
        if (r->error < 0 && r->error != -ENOENT) {
                sweep_retry(sw, r->error);
                return;
        }
        cJSON_ArrayForEach (o, kube_list_items(r->error >= 0 ? r->object : NULL))
                if (sweep_record(sw, o) < 0)
                        log_warning("surge sweep: out of memory, the record of %s/%s is left",
                                    kube_object_str(o, "metadata.namespace"),
                                    kube_object_str(o, "metadata.name"));
        sw->listed = true;
        sw->left = (unsigned)sw->n_nodes;
        if (sw->found > 0)
                log_info("surge sweep: %u deployment(s) carry a %s record", sw->found,
                         SPOTDRAIN_ANNOTATION_SURGE);
        for (size_t i = 0; i < sw->n_nodes; i++)
                snode_step(sw->nodes[i]);
}

static void sweep_list(struct drain_surge_sweep *sw)
{
        /* The annotations are all it reads of each Deployment. */
        static const char *const keep[] = { "metadata.annotations", NULL };
        _cleanup_free_ char *path = kube_path("apps", "v1", NULL, "deployments", NULL, NULL);
        struct kube_list_options lo = { .keep_fields = keep };
        int r = path ? kube_list(sw->c, path, &lo, list_done, sw, &sw->call) : -ENOMEM;
        if (r < 0)
                sweep_retry(sw, r);
}

int drain_surge_sweep_new(struct kube_client *c, const char *node, struct drain_surge_sweep **ret)
{
        struct drain_surge_sweep *sw = calloc(1, sizeof(*sw));
        if (!sw || (node && !(sw->only = strdup(node)))) {
                free(sw);
                return -ENOMEM;
        }
        sw->c = c;
        sw->backoff = BACKOFF_INIT(RETRY_BASE_USEC, RETRY_MAX_USEC);
        sweep_list(sw);
        *ret = sw;
        return 0;
}

bool drain_surge_sweep_done(const struct drain_surge_sweep *sw)
{
        if (!sw)
                return true;
        if (!sw->listed || sw->left > 0)
                return false;
        for (size_t i = 0; i < sw->n_nodes; i++)
                if (drain_surge_restoring(sw->nodes[i]->sg))
                        return false;
        return true;
}

void drain_surge_sweep_counts(const struct drain_surge_sweep *sw, unsigned *ret_found,
                              unsigned *ret_restored)
{
        unsigned restored = 0;
        for (size_t i = 0; sw && i < sw->n_nodes; i++) {
                unsigned s, r;
                drain_surge_counts(sw->nodes[i]->sg, &s, &r);
                restored += r;
        }
        *ret_found = sw ? sw->found : 0;
        *ret_restored = restored;
}
