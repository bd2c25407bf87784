/* The resources served and the discovery documents that list them. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- the resources served ---- */

static const struct resource resources[] = {
        { "", "v1", "namespaces", "namespace", "Namespace", false, SIM_NAMESPACE, "ns", false },
        { "", "v1", "nodes", "node", "Node", false, SIM_NODE, "no", false },
        { "", "v1", "pods", "pod", "Pod", true, SIM_POD, "po", true },
        { "", "v1", "events", "event", "Event", true, SIM_EVENT, "ev", false },
        { "", "v1", "configmaps", "configmap", "ConfigMap", true, SIM_CONFIGMAP, "cm", false },
        { "", "v1", "services", "service", "Service", true, SIM_SERVICE, "svc", true },
        { "apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, SIM_DAEMONSET, "ds", true },
        { "apps", "v1", "deployments", "deployment", "Deployment", true, SIM_DEPLOYMENT, "deploy", true },
        { "apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, SIM_REPLICASET, "rs", true },
        { "apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, SIM_STATEFULSET, "sts", true },
        { "policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
          SIM_PDB, "pdb", false },
        { "coordination.k8s.io", "v1", "leases", "lease", "Lease", true, SIM_LEASE, NULL, false },
        { "autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler",
          "HorizontalPodAutoscaler", true, SIM_HPA, "hpa", true },
        { "events.k8s.io", "v1", "events", "event", "Event", true, SIM_EVENT, "ev", false },
        { "storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", false,
          SIM_VOLUMEATTACHMENT, NULL, false },
        { "elbv2.k8s.aws", "v1beta1", "targetgroupbindings", "targetgroupbinding", "TargetGroupBinding",
          true, SIM_TARGETGROUPBINDING, NULL, false },
};

/* Subresources listed in discovery: drain looks for pods/eviction to decide between evicting and deleting.
 */
struct subresource {
        const char *group;
        const char *name;
        const char *kind;
        bool namespaced;
        const char *sub_group, *sub_version;
        bool create_only;
};

static const struct subresource subresources[] = {
        { "", "pods/eviction", "Eviction", true, "policy", "v1", true },
        { "", "pods/status", "Pod", true, NULL, NULL, false },
        { "", "nodes/status", "Node", false, NULL, NULL, false },
        { "apps", "deployments/status", "Deployment", true, NULL, NULL, false },
        { "apps", "deployments/scale", "Scale", true, "autoscaling", "v1", false },
        { "policy", "poddisruptionbudgets/status", "PodDisruptionBudget", true, NULL, NULL, false },
};

static const char *const groups[] = { "apps",          "policy",      "coordination.k8s.io",
                                      "events.k8s.io", "autoscaling", "storage.k8s.io",
                                      "elbv2.k8s.aws" };

const struct resource *sim_resource_find(const char *group, const char *version, const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(resources); i++)
                if (streq(resources[i].group, group) && streq(resources[i].version, version) &&
                    streq(resources[i].name, name))
                        return &resources[i];
        return NULL;
}

char *sim_resource_api_version(const struct resource *r)
{
        return isempty(r->group) ? strdup(r->version) : strprintf("%s/%s", r->group, r->version);
}

bool sim_resource_is_events_v1(const struct resource *r)
{
        return streq(r->group, "events.k8s.io");
}

/* ---- discovery ---- */

cJSON *sim_discovery_versions(const struct sim_server *srv)
{
        cJSON *o = cJSON_CreateObject(), *vs, *cidrs, *cidr;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "kind", "APIVersions");
        vs = cJSON_AddArrayToObject(o, "versions");
        cJSON_AddItemToArray(vs, cJSON_CreateString("v1"));
        cidrs = cJSON_AddArrayToObject(o, "serverAddressByClientCIDRs");
        cidr = cJSON_CreateObject();
        cJSON_AddStringToObject(cidr, "clientCIDR", "0.0.0.0/0");
        cJSON_AddStringToObject(cidr, "serverAddress", srv->http->address);
        cJSON_AddItemToArray(cidrs, cidr);
        return o;
}

cJSON *sim_discovery_group(const char *name)
{
        cJSON *g = cJSON_CreateObject(), *versions, *v, *pref;
        const char *version = "v1";
        /* Each group is served at one version: that of its resources (autoscaling is at v2). */
        for (size_t i = 0; i < ARRAY_SIZE(resources); i++)
                if (streq(resources[i].group, name))
                        version = resources[i].version;
        _cleanup_free_ char *gv = strprintf("%s/%s", name, version);

        if (!g || !gv) {
                cJSON_Delete(g);
                return NULL;
        }
        cJSON_AddStringToObject(g, "name", name);
        versions = cJSON_AddArrayToObject(g, "versions");
        v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "groupVersion", gv);
        cJSON_AddStringToObject(v, "version", version);
        cJSON_AddItemToArray(versions, v);
        pref = cJSON_AddObjectToObject(g, "preferredVersion");
        cJSON_AddStringToObject(pref, "groupVersion", gv);
        cJSON_AddStringToObject(pref, "version", version);
        return g;
}

bool sim_group_known(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                if (streq(groups[i], name))
                        return true;
        return false;
}

cJSON *sim_discovery_group_list(void)
{
        cJSON *o = cJSON_CreateObject(), *arr;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "kind", "APIGroupList");
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        arr = cJSON_AddArrayToObject(o, "groups");
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                cJSON_AddItemToArray(arr, sim_discovery_group(groups[i]));
        return o;
}

static void add_verbs(cJSON *r, bool create_only, bool sub)
{
        static const char *const all[] = { "create", "delete", "deletecollection", "get",
                                           "list",   "patch",  "update",           "watch" };
        static const char *const subverbs[] = { "get", "patch", "update" };
        cJSON *verbs = cJSON_AddArrayToObject(r, "verbs");

        if (create_only)
                cJSON_AddItemToArray(verbs, cJSON_CreateString("create"));
        else if (sub)
                for (size_t i = 0; i < ARRAY_SIZE(subverbs); i++)
                        cJSON_AddItemToArray(verbs, cJSON_CreateString(subverbs[i]));
        else
                for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                        cJSON_AddItemToArray(verbs, cJSON_CreateString(all[i]));
}

cJSON *sim_discovery_resource_list(const char *group, const char *version)
{
        cJSON *o = cJSON_CreateObject(), *arr;
        _cleanup_free_ char *gv = isempty(group) ? strdup(version) : strprintf("%s/%s", group, version);
        bool any = false;

        if (!o || !gv) {
                cJSON_Delete(o);
                return NULL;
        }
        cJSON_AddStringToObject(o, "kind", "APIResourceList");
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "groupVersion", gv);
        arr = cJSON_AddArrayToObject(o, "resources");
        for (size_t i = 0; i < ARRAY_SIZE(resources); i++) {
                const struct resource *res = &resources[i];
                cJSON *r;
                if (!streq(res->group, group) || !streq(res->version, version))
                        continue;
                any = true;
                r = cJSON_CreateObject();
                cJSON_AddStringToObject(r, "name", res->name);
                cJSON_AddStringToObject(r, "singularName", res->singular);
                cJSON_AddBoolToObject(r, "namespaced", res->namespaced);
                cJSON_AddStringToObject(r, "kind", res->kind);
                add_verbs(r, false, false);
                if (res->short_name) {
                        cJSON *sn = cJSON_AddArrayToObject(r, "shortNames");
                        cJSON_AddItemToArray(sn, cJSON_CreateString(res->short_name));
                }
                if (res->in_all) {
                        cJSON *cat = cJSON_AddArrayToObject(r, "categories");
                        cJSON_AddItemToArray(cat, cJSON_CreateString("all"));
                }
                cJSON_AddItemToArray(arr, r);
                for (size_t j = 0; j < ARRAY_SIZE(subresources); j++) {
                        const struct subresource *sub = &subresources[j];
                        size_t n = strlen(res->name);
                        if (!streq(sub->group, group) || strncmp(sub->name, res->name, n) != 0 ||
                            sub->name[n] != '/')
                                continue;
                        r = cJSON_CreateObject();
                        cJSON_AddStringToObject(r, "name", sub->name);
                        cJSON_AddStringToObject(r, "singularName", "");
                        cJSON_AddBoolToObject(r, "namespaced", sub->namespaced);
                        if (sub->sub_group) {
                                cJSON_AddStringToObject(r, "group", sub->sub_group);
                                cJSON_AddStringToObject(r, "version", sub->sub_version);
                        }
                        cJSON_AddStringToObject(r, "kind", sub->kind);
                        add_verbs(r, sub->create_only, true);
                        cJSON_AddItemToArray(arr, r);
                }
        }
        if (!any) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}
