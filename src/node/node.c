/* The node actions (node.h): each one PATCH of the Node through kube.h, with spotdrain's keys (keys.h). */
#include <cjson/cJSON.h>

#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/node.h"

/* done NULL: the error is logged, userdata saying what failed. */
static void logged(struct kube_client *c, struct kube_result *r, void *userdata)
{
        if (r->error < 0)
                log_warning_reason(r->error, r->message, "%s failed", (const char *)userdata);
}

#define DONE(done) ((done) ? (done) : logged)

int node_cordon(struct kube_client *c, const char *node, bool cordon, kube_done_fn done, void *userdata,
                struct kube_call **ret_call)
{
        return kube_node_cordon(c, node, cordon, DONE(done), userdata, ret_call);
}

int node_drain_taint(struct kube_client *c, const char *node, const char *taint_key, const char *kind,
                     bool no_execute, bool add, kube_done_fn done, void *userdata,
                     struct kube_call **ret_call)
{
        struct kube_taint t = { .key = (char *)(taint_key ? taint_key : SPOTDRAIN_TAINT_INTERRUPTION),
                                .value = (char *)kind,
                                .effect = add ? (char *)(no_execute ? "NoExecute" : "NoSchedule") : NULL };
        return kube_node_taint(c, node, &t, add, DONE(done), userdata, ret_call);
}

int node_soft_taint(struct kube_client *c, const char *node, bool add, kube_done_fn done, void *userdata,
                    struct kube_call **ret_call)
{
        struct kube_taint t = { .key = (char *)SPOTDRAIN_TAINT_REBALANCE,
                                .value = (char *)"rebalance-recommendation",
                                .effect = (char *)"PreferNoSchedule" };
        return kube_node_taint(c, node, &t, add, DONE(done), userdata, ret_call);
}

int node_lb_exclude(struct kube_client *c, const char *node, bool exclude, kube_done_fn done, void *userdata,
                    struct kube_call **ret_call)
{
        return kube_node_label_owned(c, node, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE,
                                     exclude, DONE(done), userdata, ret_call);
}

int node_record(struct kube_client *c, const char *node, const char *value, kube_done_fn done,
                void *userdata, struct kube_call **ret_call)
{
        const char *keys[] = { SPOTDRAIN_ANNOTATION_DRAIN }, *values[] = { value };
        return kube_node_set_meta(c, node, true, keys, values, 1, DONE(done), userdata, ret_call);
}

int node_out_of_service(struct kube_client *c, const char *node, kube_done_fn done, void *userdata,
                        struct kube_call **ret_call)
{
        struct kube_taint t = { .key = (char *)SPOTDRAIN_TAINT_OUT_OF_SERVICE,
                                .value = (char *)SPOTDRAIN_OUT_OF_SERVICE_VALUE,
                                .effect = (char *)"NoExecute" };
        return kube_node_taint(c, node, &t, true, DONE(done), userdata, ret_call);
}

int node_drain_marks(struct kube_client *c, const cJSON *node, const struct node_marks *m, kube_done_fn done,
                     void *userdata, struct kube_call **ret_call)
{
        const char *name = kube_object_str(node, "metadata.name"), *rv = kube_object_rv(node);
        if (!m || isempty(name) || isempty(rv))
                return -EINVAL; /* without a resourceVersion, no precondition: one change at a time */
        struct kube_taint t = { .key = (char *)(m->taint_key ? m->taint_key : SPOTDRAIN_TAINT_INTERRUPTION),
                                .value = (char *)m->kind,
                                .effect = (char *)(m->no_execute ? "NoExecute" : "NoSchedule") };
        const cJSON *labels =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"), "labels");
        const cJSON *taints =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "spec"), "taints");
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *spec = patch ? cJSON_AddObjectToObject(patch, "spec") : NULL;
        bool ok = spec && kube_taints_put(spec, taints, &t, true, NULL) >= 0 && meta &&
                  cJSON_AddStringToObject(meta, "resourceVersion", rv);
        if (ok && m->record) {
                cJSON *a = cJSON_AddObjectToObject(meta, "annotations");
                ok = a && cJSON_AddStringToObject(a, SPOTDRAIN_ANNOTATION_DRAIN, m->record);
        }
        /* As node_lb_exclude() sets it: only where the key is absent, someone else's is theirs. */
        if (ok && m->lb && !cJSON_GetObjectItemCaseSensitive(labels, SPOTDRAIN_LABEL_EXCLUDE_LB)) {
                cJSON *l = cJSON_AddObjectToObject(meta, "labels");
                ok = l && cJSON_AddStringToObject(l, SPOTDRAIN_LABEL_EXCLUDE_LB,
                                                  SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE);
        }
        _cleanup_free_ char *body = ok ? cJSON_PrintUnformatted(patch) : NULL;
        cJSON_Delete(patch);
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", name, NULL);
        if (!body || !path)
                return -ENOMEM;
        /* Urgent as the label it carries (the first eviction waits for it); safe to send again, as its
         * resourceVersion makes a second landing a 409. */
        return kube_request(c, "PATCH", path, "application/strategic-merge-patch+json", body,
                            KUBE_REQ_URGENT | KUBE_REQ_IDEMPOTENT, DONE(done), userdata, ret_call);
}

/* The soft taint's answer: said when it landed, so that every mode's log shows the node it took. */
static void soft_taint_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        const cJSON *meta = r->object ? cJSON_GetObjectItemCaseSensitive(r->object, "metadata") : NULL;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));

        if (r->error < 0)
                logged(c, r, userdata);
        else
                log_info("node %s tainted %s:PreferNoSchedule (rebalance recommendation)", name ? name : "?",
                         SPOTDRAIN_TAINT_REBALANCE);
}

int node_rebalance(struct kube_client *c, const char *node, bool add)
{
        int r =
            add ? 0
                : node_lb_exclude(c, node, false, NULL, (void *)"removing the load balancers' label", NULL);
        if (r < 0)
                return r;
        return add ? node_soft_taint(c, node, true, soft_taint_done, (void *)"rebalance soft taint", NULL)
                   : node_soft_taint(c, node, false, NULL, (void *)"removing the soft taint", NULL);
}

int node_undrain(struct kube_client *c, const char *node, const char *taint_key)
{
        int r = node_drain_taint(c, node, taint_key, NULL, false, false, NULL,
                                 (void *)"removing the drain taint", NULL);
        /* The drain is over: its record goes too, so that it never speaks for a later cordon. */
        if (r >= 0)
                r = node_record(c, node, NULL, NULL, (void *)"removing the drain record", NULL);
        if (r >= 0)
                r = node_lb_exclude(c, node, false, NULL, (void *)"removing the load balancers' label",
                                    NULL);
        if (r < 0)
                return r;
        return node_cordon(c, node, false, NULL, (void *)"uncordon", NULL);
}
