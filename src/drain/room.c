/* Room on other nodes for a drain's surged pods, before anything is raised (include/spotdrain/surge.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/kube.h"
#include "spotdrain/provision.h"
#include "spotdrain/surge.h"
#include "spotdrain/util.h"

struct room_node {
        const cJSON *obj;
        int64_t cpu, memory, pods; /* left */
};

static const cJSON *item(const cJSON *o, const char *key)
{
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

static bool node_ready(const cJSON *n)
{
        const cJSON *c;
        cJSON_ArrayForEach (c, item(item(n, "status"), "conditions"))
                if (streq_ptr(kube_object_str(c, "type"), "Ready"))
                        return streq_ptr(kube_object_str(c, "status"), "True");
        return false;
}

/* A toleration matches a taint as the scheduler matches them (core/v1 Toleration.ToleratesTaint). */
static bool tolerates(const cJSON *tol, const cJSON *taint)
{
        const char *teff = kube_object_str(tol, "effect"), *key = kube_object_str(tol, "key");
        const char *op = kube_object_str(tol, "operator");
        if (!isempty(teff) && !streq_ptr(teff, kube_object_str(taint, "effect")))
                return false;
        if (isempty(key))
                return streq_ptr(op, "Exists");
        if (!streq_ptr(key, kube_object_str(taint, "key")))
                return false;
        if (streq_ptr(op, "Exists"))
                return true;
        if (!isempty(op) && !streq(op, "Equal"))
                return false;
        const char *a = kube_object_str(tol, "value"), *b = kube_object_str(taint, "value");
        return streq(a ? a : "", b ? b : "");
}

static bool schedulable_for(const cJSON *n, const cJSON *pod)
{
        const cJSON *t, *sel;
        const cJSON *spec = item(pod, "spec");
        cJSON_ArrayForEach (t, item(item(n, "spec"), "taints")) {
                const char *eff = kube_object_str(t, "effect");
                if (!streq_ptr(eff, "NoSchedule") && !streq_ptr(eff, "NoExecute"))
                        continue;
                bool ok = false;
                const cJSON *tol;
                cJSON_ArrayForEach (tol, item(spec, "tolerations"))
                        ok = ok || tolerates(tol, t);
                if (!ok)
                        return false;
        }
        const cJSON *labels = item(item(n, "metadata"), "labels");
        cJSON_ArrayForEach (sel, item(spec, "nodeSelector")) {
                const cJSON *l = item(labels, sel->string);
                if (!cJSON_IsString(l) || !cJSON_IsString(sel) || !streq(l->valuestring, sel->valuestring))
                        return false;
        }
        return true;
}

static bool pod_holds_room(const cJSON *p)
{
        const char *phase = kube_object_str(p, "status.phase");
        return !streq_ptr(phase, "Succeeded") && !streq_ptr(phase, "Failed");
}

static int allocatable(const cJSON *n, struct room_node *ret)
{
        const char *cpu = kube_object_str(n, "status.allocatable.cpu");
        const char *mem = kube_object_str(n, "status.allocatable.memory");
        const char *pods = kube_object_str(n, "status.allocatable.pods");
        int64_t np = 0;
        if (!cpu || !mem || parse_cpu_millis(cpu, &ret->cpu) < 0 || parse_bytes(mem, &ret->memory) < 0)
                return -EINVAL;
        /* A node that states no pod count is not limited by one here (kubelet's default is 110). */
        ret->pods = pods && parse_cpu_millis(pods, &np) >= 0 ? np / 1000 : INT64_MAX;
        ret->obj = n;
        return 0;
}

static int by_cpu_desc(const void *a, const void *b)
{
        const struct provisioner_pod *x = a, *y = b;
        if (x->req.cpu_millis != y->req.cpu_millis)
                return x->req.cpu_millis > y->req.cpu_millis ? -1 : 1;
        return x->req.memory_bytes > y->req.memory_bytes ? -1 : x->req.memory_bytes < y->req.memory_bytes;
}

struct want {
        struct provisioner_pod pp;
        const cJSON *obj;
};

int drain_room_fit(const cJSON *nodes, const cJSON *pods, const char *node, const cJSON *const *want,
                   size_t n_want, struct drain_room *ret)
{
        _cleanup_free_ struct room_node *rn = NULL;
        _cleanup_free_ struct want *w = NULL;
        size_t n = 0, cap = (size_t)cJSON_GetArraySize(nodes);
        const cJSON *o;

        *ret = (struct drain_room){ .n_want = (unsigned)n_want };
        if (n_want == 0)
                return 0;
        rn = calloc(cap ? cap : 1, sizeof(*rn));
        w = calloc(n_want, sizeof(*w));
        if (!rn || !w)
                return -ENOMEM;
        cJSON_ArrayForEach (o, nodes) {
                const char *name = kube_object_str(o, "metadata.name");
                /* A node the scheduler would pass over, or one that says nothing of its room. */
                if (!name || streq_ptr(name, node) || cJSON_IsTrue(item(item(o, "spec"), "unschedulable")) ||
                    !node_ready(o) || allocatable(o, &rn[n]) < 0)
                        continue;
                n++;
        }
        cJSON_ArrayForEach (o, pods) {
                const char *on = kube_object_str(o, "spec.nodeName");
                struct provisioner_pod pp;
                if (!on || !pod_holds_room(o) || provisioner_pod_from_json(o, &pp) < 0)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (streq_ptr(on, kube_object_str(rn[i].obj, "metadata.name"))) {
                                rn[i].cpu -= pp.req.cpu_millis;
                                rn[i].memory -= pp.req.memory_bytes;
                                rn[i].pods--;
                                break;
                        }
        }
        for (size_t k = 0; k < n_want; k++) {
                if (provisioner_pod_from_json(want[k], &w[k].pp) < 0)
                        return -EINVAL;
                w[k].obj = want[k];
        }
        qsort(w, n_want, sizeof(*w), by_cpu_desc);
        for (size_t k = 0; k < n_want; k++) {
                bool placed = false;
                for (size_t i = 0; i < n && !placed; i++) {
                        struct room_node *r = &rn[i];
                        if (r->cpu < w[k].pp.req.cpu_millis || r->memory < w[k].pp.req.memory_bytes ||
                            r->pods < 1 || !schedulable_for(r->obj, w[k].obj))
                                continue;
                        r->cpu -= w[k].pp.req.cpu_millis;
                        r->memory -= w[k].pp.req.memory_bytes;
                        r->pods--;
                        placed = true;
                }
                if (!placed) {
                        ret->n_missing++;
                        ret->missing_cpu_millis += w[k].pp.req.cpu_millis;
                        ret->missing_memory_bytes += w[k].pp.req.memory_bytes;
                }
        }
        return 0;
}
