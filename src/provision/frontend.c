/* The provisioner as the front ends use it: built from the provision.* configuration keys, and asked once
 * per notice with the node's zone and the pods bound to it, read from the cluster at that moment (the
 * controller has no pod informer, and the agent's node is only one of many it could be asked about). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/awscreds.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/util.h"

#define ZONE_LABEL        "topology.kubernetes.io/zone"
#define ZONE_LABEL_LEGACY "failure-domain.beta.kubernetes.io/zone"
#define MIRROR_ANNOTATION "kubernetes.io/config.mirror"
/* Credentials are fetched again this long before they expire. */
#define CREDS_REFRESH_AHEAD (5ULL * 60ULL * 1000000ULL)

/* A notice on its way to the provisioner: the node (for its zone) and its pods are read at once. */
struct fe_request {
        struct prov_frontend *f;
        char *node;
        char *zone;
        struct notice notice;
        struct kube_call *node_call, *pods_call;
        cJSON *pods; /* the list answer */
        bool node_done, pods_done, waiting_creds;
};

struct prov_frontend {
        struct loop *loop;
        struct kube_client *kube;
        struct prov_catalog *catalog;
        struct prov_subnet *subnets;
        size_t n_subnets;
        char *region, *endpoint;
        struct ec2_client *ec2;
        struct provisioner *prov;

        /* Credentials: the caller's callback, or an own provider whose latest answer is kept here. */
        ec2_credentials_fn credentials;
        void *credentials_userdata;
        struct aws_creds_provider *provider;
        struct aws_credentials copy;
        bool have_creds, asking;

        struct fe_request **reqs;
        size_t n_reqs;
};

/* ---- configuration ---- */

int prov_subnets_from_config(const char *const *spec, struct prov_subnet **ret, size_t *ret_n,
                             char **ret_error)
{
        size_t n = 0;
        struct prov_subnet *v;

        while (spec && spec[n])
                n++;
        v = calloc(n + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *eq = strrchr(spec[i], '=');
                if (!eq || isempty(eq + 1)) {
                        prov_subnets_free(v, i);
                        if (ret_error)
                                *ret_error = strprintf(
                                    "provision.subnets: '%s' is not SUBNET-ID=ZONE (or =ZONE)", spec[i]);
                        return -EINVAL;
                }
                /* "=zone": no subnet id, the override names the zone. */
                v[i].zone = strdup(eq + 1);
                v[i].id = eq > spec[i] ? strndup(spec[i], (size_t)(eq - spec[i])) : NULL;
                if (!v[i].zone || (eq > spec[i] && !v[i].id)) {
                        prov_subnets_free(v, i + 1);
                        return -ENOMEM;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

void prov_subnets_free(struct prov_subnet *v, size_t n)
{
        if (!v)
                return;
        for (size_t i = 0; i < n; i++) {
                free((char *)v[i].id);
                free((char *)v[i].zone);
        }
        free(v);
}

int prov_triggers_from_config(const char *const *kinds, unsigned *ret, char **ret_error)
{
        unsigned bits = 0;

        for (size_t i = 0; kinds && kinds[i]; i++) {
                int k = notice_kind_from_string(kinds[i]);
                if (k != NOTICE_REBALANCE_RECOMMENDATION && k != NOTICE_SPOT_INTERRUPTION &&
                    k != NOTICE_SCHEDULED_CHANGE && k != NOTICE_ASG_LIFECYCLE_TERMINATE &&
                    k != NOTICE_STATE_CHANGE) {
                        if (ret_error)
                                *ret_error = strprintf("provision.triggers: '%s' is not a notice kind that "
                                                       "can start a replacement",
                                                       kinds[i]);
                        return -EINVAL;
                }
                bits |= 1u << k;
        }
        if (bits == 0) {
                if (ret_error)
                        *ret_error = strdup("provision.triggers: empty (nothing would ever be launched)");
                return -EINVAL;
        }
        *ret = bits;
        return 0;
}

static const char *const *strv_or_null(char **v)
{
        return v && v[0] ? (const char *const *)v : NULL;
}

int prov_requirements_from_config(const struct spotdrain_config *cfg, struct prov_requirements *ret,
                                  char **ret_error)
{
        struct prov_requirements req = { .families = strv_or_null(cfg->provision.families),
                                         .sizes = strv_or_null(cfg->provision.sizes),
                                         .architectures = strv_or_null(cfg->provision.architectures),
                                         .max_vcpu = (int)cfg->provision.max_vcpus };

        if (!isempty(cfg->provision.max_memory)) {
                int64_t bytes;
                if (parse_bytes(cfg->provision.max_memory, &bytes) < 0 || bytes < 1024 * 1024) {
                        if (ret_error)
                                *ret_error = strprintf("provision.max_memory: '%s' is not a memory quantity "
                                                       "of at least 1Mi",
                                                       cfg->provision.max_memory);
                        return -EINVAL;
                }
                req.max_memory_mib = bytes / (1024 * 1024);
        }
        for (char **c = cfg->provision.capacity_types; c && *c; c++) {
                if (streq(*c, PROV_CAPACITY_SPOT))
                        req.spot = true;
                else if (streq(*c, PROV_CAPACITY_ON_DEMAND))
                        req.on_demand = true;
                else {
                        if (ret_error)
                                *ret_error = strprintf(
                                    "provision.capacity_types: '%s' is neither spot nor on-demand", *c);
                        return -EINVAL;
                }
        }
        *ret = req;
        return 0;
}

/* ---- credentials ---- */

static void creds_store(struct prov_frontend *f, const struct aws_credentials *src)
{
        struct aws_credentials n = {};

        if (aws_credentials_copy(&n, src) < 0)
                return;
        aws_credentials_clear(&f->copy);
        f->copy = n;
        f->have_creds = true;
}

static void on_refresh(const struct aws_credentials *src, void *userdata)
{
        creds_store(userdata, src);
}

static void request_finish(struct fe_request *q);

static void on_creds(int error, const struct aws_credentials *src, const char *message, void *userdata)
{
        struct prov_frontend *f = userdata;

        f->asking = false;
        if (error < 0)
                log_debug_reason(error, message, "provision: no AWS credentials");
        else
                creds_store(f, src);
        /* Requests that waited for them go on either way: without credentials the launch fails and says
         * so through replacement-failed. */
        for (size_t i = 0; i < f->n_reqs; i++)
                if (f->reqs[i]->waiting_creds) {
                        request_finish(f->reqs[i]);
                        i = (size_t)-1; /* request_finish() removed it: start over */
                }
}

static bool creds_stale(const struct prov_frontend *f)
{
        return !f->have_creds || (f->copy.expiration_usec &&
                                  f->copy.expiration_usec < now_realtime_usec() + CREDS_REFRESH_AHEAD);
}

static void creds_ask(struct prov_frontend *f)
{
        if (f->provider && !f->asking && aws_creds_get(f->provider, on_creds, f) >= 0)
                f->asking = true;
}

static const struct aws_credentials *creds_current(void *userdata)
{
        struct prov_frontend *f = userdata;

        if (f->credentials)
                return f->credentials(f->credentials_userdata);
        if (creds_stale(f))
                creds_ask(f);
        return f->have_creds ? &f->copy : NULL;
}

/* ---- construction ---- */

int prov_frontend_new(struct loop *l, struct kube_client *kube, struct alert_bus *alerts,
                      const struct spotdrain_config *cfg, const struct prov_frontend_options *o,
                      struct prov_frontend **ret, char **ret_error)
{
        struct prov_frontend *f;
        struct provisioner_options po = {};
        _cleanup_free_ char *error = NULL;
        bool asg;
        int r;

        if (!l || !cfg || !ret)
                return -EINVAL;
        if (!cfg->provision.enabled) {
                *ret = NULL;
                return 0;
        }
        asg = cfg->provision.mode == CONFIG_PROVISION_ASG;
        if (asg && isempty(cfg->provision.asg_name)) {
                if (ret_error)
                        *ret_error = strdup("provision.mode asg needs provision.asg_name");
                return -EINVAL;
        }
        if (!asg && isempty(cfg->provision.launch_template)) {
                if (ret_error)
                        *ret_error = strdup("provision.mode fleet needs provision.launch_template");
                return -EINVAL;
        }
        r = prov_requirements_from_config(cfg, &po.req, &error);
        if (r >= 0)
                r = prov_triggers_from_config((const char *const *)cfg->provision.triggers, &po.triggers,
                                              &error);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(error);
                return r;
        }
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->loop = l;
        f->kube = kube;
        r = prov_subnets_from_config((const char *const *)cfg->provision.subnets, &f->subnets, &f->n_subnets,
                                     &error);
        if (r >= 0 && !asg && f->n_subnets == 0) {
                error = strdup("provision.mode fleet needs provision.subnets (SUBNET-ID=ZONE, ...)");
                r = -EINVAL;
        }
        if (r >= 0)
                r = prov_catalog_load(cfg->provision.catalog, &f->catalog, &error);
        if (r < 0)
                goto fail;
        if ((o && o->region && (f->region = strdup(o->region)) == NULL) ||
            (!f->region && cfg->aws.region && (f->region = strdup(cfg->aws.region)) == NULL) ||
            (cfg->provision.endpoint && (f->endpoint = strdup(cfg->provision.endpoint)) == NULL)) {
                r = -ENOMEM;
                goto fail;
        }
        if (o && o->credentials) {
                f->credentials = o->credentials;
                f->credentials_userdata = o->credentials_userdata;
        } else {
                r = aws_creds_provider_new(
                    l, &(struct aws_creds_options){ .on_refresh = on_refresh, .userdata = f }, &f->provider);
                if (r < 0) {
                        error = strdup("incomplete AWS credentials configuration");
                        goto fail;
                }
                /* Fetched now, so that the first notice does not wait for them. */
                creds_ask(f);
        }
        struct ec2_config ec = { .endpoint = f->endpoint,
                                 .autoscaling_endpoint = f->endpoint,
                                 .region = f->region,
                                 .credentials = creds_current,
                                 .userdata = f };
        r = ec2_client_new(l, &ec, &f->ec2);
        if (r < 0) {
                error = strdup("cannot set up the EC2 client (no region?)");
                goto fail;
        }
        po.catalog = f->catalog;
        po.subnets = f->subnets;
        po.n_subnets = f->n_subnets;
        if (asg)
                po.asg_name = cfg->provision.asg_name;
        else if (startswith(cfg->provision.launch_template, "lt-"))
                po.launch_template_id = cfg->provision.launch_template;
        else
                po.launch_template_name = cfg->provision.launch_template;
        po.launch_template_version = cfg->provision.launch_template_version;
        po.vcpu_limit = (int)cfg->provision.vcpu_limit_per_window;
        po.vcpu_window_usec = cfg->provision.vcpu_window_usec;
        po.ready_timeout_usec = cfg->provision.ready_timeout_usec;
        po.cluster_tag_key = cfg->provision.cluster_tag_key;
        r = provisioner_new(l, kube, f->ec2, &po, alerts, &f->prov);
        if (r < 0) {
                error = strdup("cannot set up the provisioner");
                goto fail;
        }
        log_debug("provision: %s mode, %zu subnets, %zu instance types in the catalog",
                  asg ? "asg" : "fleet", f->n_subnets, f->catalog->n);
        *ret = f;
        return 0;
fail:
        if (ret_error)
                *ret_error = TAKE_PTR(error);
        prov_frontend_free(f);
        return r;
}

static void request_free(struct fe_request *q)
{
        if (!q)
                return;
        kube_call_cancel(q->node_call);
        kube_call_cancel(q->pods_call);
        cJSON_Delete(q->pods);
        free(q->node);
        free(q->zone);
        free(q);
}

static void request_remove(struct fe_request *q)
{
        struct prov_frontend *f = q->f;

        for (size_t i = 0; i < f->n_reqs; i++)
                if (f->reqs[i] == q) {
                        f->reqs[i] = f->reqs[--f->n_reqs];
                        break;
                }
        request_free(q);
}

struct prov_frontend *prov_frontend_free(struct prov_frontend *f)
{
        if (!f)
                return NULL;
        for (size_t i = 0; i < f->n_reqs; i++)
                request_free(f->reqs[i]);
        free(f->reqs);
        /* The provisioner borrows the EC2 client and the catalog. */
        provisioner_free(f->prov);
        ec2_client_free(f->ec2);
        aws_creds_provider_free(f->provider);
        aws_credentials_clear(&f->copy);
        prov_catalog_free(f->catalog);
        prov_subnets_free(f->subnets, f->n_subnets);
        free(f->region);
        free(f->endpoint);
        free(f);
        return NULL;
}

struct provisioner *prov_frontend_provisioner(const struct prov_frontend *f)
{
        return f ? f->prov : NULL;
}

size_t prov_frontend_pending(const struct prov_frontend *f)
{
        return f ? f->n_reqs : 0;
}

/* ---- requests ---- */

int prov_frontend_request_pods(struct prov_frontend *f, const char *node, const char *zone,
                               const struct notice *n, const cJSON *pods)
{
        _cleanup_free_ struct provisioner_pod *v = NULL;
        size_t k = 0;
        const cJSON *pod;
        int r;

        if (!f)
                return 0;
        if (!n)
                return -EINVAL;
        v = calloc((size_t)cJSON_GetArraySize(pods) + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        cJSON_ArrayForEach (pod, pods) {
                const char *phase = kube_object_str(pod, "status.phase");
                const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
                /* Finished pods need no room, and static pods stay with their node. */
                if ((phase && (streq(phase, "Succeeded") || streq(phase, "Failed"))) ||
                    cJSON_GetObjectItemCaseSensitive(ann, MIRROR_ANNOTATION))
                        continue;
                r = provisioner_pod_from_json(pod, &v[k]);
                if (r < 0) {
                        log_debug_errno(r, "provision: pod %s left out: unreadable requests",
                                        kube_object_str(pod, "metadata.name"));
                        continue;
                }
                k++;
        }
        r = provisioner_on_notice(f->prov, n, node, zone, v, k);
        if (r < 0)
                return r;
        log_debug("provision: %s notice for %s (%zu pods): %s", notice_kind_to_string(n->kind), node, k,
                  r > 0 ? "replacement launching" : "nothing to launch");
        return 0;
}

/* Hands the request to the provisioner and forgets it. */
static void request_finish(struct fe_request *q)
{
        int r = prov_frontend_request_pods(q->f, q->node, q->zone, &q->notice, kube_list_items(q->pods));
        if (r < 0)
                log_debug_errno(r, "provision: replacement for %s not started", q->node);
        request_remove(q);
}

/* Both answers are in: on to the provisioner, once credentials are at hand (an own provider still
 * fetching is waited for; without any, the launch fails and says so through replacement-failed). */
static void request_maybe_finish(struct fe_request *q)
{
        struct prov_frontend *f = q->f;

        if (!q->node_done || !q->pods_done)
                return;
        if (f->provider && creds_stale(f))
                creds_ask(f);
        if (f->provider && !f->have_creds && f->asking) {
                q->waiting_creds = true;
                return;
        }
        request_finish(q);
}

static void on_pods(struct kube_client *c, struct kube_result *res, void *userdata)
{
        struct fe_request *q = userdata;

        q->pods_call = NULL;
        if (res->error < 0) {
                log_debug_reason(res->error, res->message, "provision: cannot list the pods of %s", q->node);
                request_remove(q);
                return;
        }
        q->pods = TAKE_PTR(res->object);
        q->pods_done = true;
        request_maybe_finish(q);
}

static void on_node(struct kube_client *c, struct kube_result *res, void *userdata)
{
        struct fe_request *q = userdata;
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(res->object, "metadata"), "labels");
        const char *zone = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, ZONE_LABEL));

        q->node_call = NULL;
        if (!zone)
                zone = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, ZONE_LABEL_LEGACY));
        /* Without the node (gone already) the replacement is still wanted: only the zone to avoid is lost.
         */
        if (res->error < 0)
                log_debug_reason(res->error, res->message, "provision: cannot read node %s", q->node);
        if (zone && !(q->zone = strdup(zone))) {
                request_remove(q);
                return;
        }
        q->node_done = true;
        request_maybe_finish(q);
}

int prov_frontend_request(struct prov_frontend *f, const char *node, const struct notice *n)
{
        _cleanup_free_ char *path = NULL, *selector = NULL;
        struct fe_request *q, **v;
        int r;

        if (!f)
                return 0;
        if (isempty(node) || !n || !f->kube)
                return -EINVAL;
        /* The cheap answer first: the cluster is not read again for an instance being replaced. */
        if (provisioner_under_way(f->prov, n->instance_id)) {
                log_debug("provision: %s notice for %s: a replacement is under way already",
                          notice_kind_to_string(n->kind), node);
                return 0;
        }
        q = calloc(1, sizeof(*q));
        v = realloc(f->reqs, (f->n_reqs + 1) * sizeof(*v));
        if (v)
                f->reqs = v;
        path = strprintf("/api/v1/nodes/%s", node);
        selector = strprintf("spec.nodeName=%s", node);
        if (!q || !v || !path || !selector || !(q->node = strdup(node))) {
                request_free(q);
                return -ENOMEM;
        }
        q->f = f;
        q->notice = *n;
        struct kube_list_options lo = { .field_selector = selector };
        r = kube_get(f->kube, path, on_node, q, &q->node_call);
        if (r >= 0)
                r = kube_list(f->kube, "/api/v1/pods", &lo, on_pods, q, &q->pods_call);
        if (r < 0) {
                request_free(q);
                return r;
        }
        f->reqs[f->n_reqs++] = q;
        return 0;
}
