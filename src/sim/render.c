/* Rendering the model's objects in kube-apiserver's JSON shape, so kubectl can print and drain them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

/* The ReplicaSet a pod belongs to (its hash, name and uid): the current one, or an old one of a rollout. */
void sim_pod_rs(const struct sim_pod *p, const char **ret_hash, const char **ret_name, const char **ret_uid)
{
        const struct sim_workload *w = p->wl;
        bool old = p->rev < w->n_old_rs;
        if (ret_hash)
                *ret_hash = old ? w->old_rs[p->rev].hash : w->hash;
        if (ret_name)
                *ret_name = old ? w->old_rs[p->rev].name : w->rs_name;
        if (ret_uid)
                *ret_uid = old ? w->old_rs[p->rev].uid : w->rs_uid;
}

#define WORLD_BORN  (-7200.0) /* nodes and controllers exist two hours before t=0 */
#define PAUSE_IMAGE "registry.k8s.io/pause:3.9"

/* A builder that remembers whether any allocation failed, so the rendering reads straight through. */
struct jb {
        bool ok;
};

static cJSON *jadd(struct jb *b, cJSON *o, const char *k, cJSON *v)
{
        if (!v || !o || !(k ? cJSON_AddItemToObject(o, k, v) : cJSON_AddItemToArray(o, v))) {
                cJSON_Delete(v);
                b->ok = false;
                return NULL;
        }
        return v;
}

static cJSON *jobj(struct jb *b, cJSON *o, const char *k)
{
        return jadd(b, o, k, cJSON_CreateObject());
}

static cJSON *jarr(struct jb *b, cJSON *o, const char *k)
{
        return jadd(b, o, k, cJSON_CreateArray());
}

static void jstr(struct jb *b, cJSON *o, const char *k, const char *v)
{
        jadd(b, o, k, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

static void jnum(struct jb *b, cJSON *o, const char *k, double v)
{
        jadd(b, o, k, cJSON_CreateNumber(v));
}

static void jbool(struct jb *b, cJSON *o, const char *k, bool v)
{
        jadd(b, o, k, cJSON_CreateBool(v));
}

static void jdup(struct jb *b, cJSON *o, const char *k, const cJSON *v)
{
        jadd(b, o, k, cJSON_Duplicate(v, true));
}

static cJSON *jdone(struct jb *b, cJSON *o)
{
        if (!b->ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

char *sim_timestamp(const struct sim *s, double t, char buf[static 32])
{
        if (format_rfc3339(sim_wall_usec(s, t), buf, 32) < 0)
                snprintf(buf, 32, "1970-01-01T00:00:00Z");
        return buf;
}

static void jtime(struct jb *b, const struct sim *s, cJSON *o, const char *k, double t)
{
        char buf[32];
        jstr(b, o, k, sim_timestamp(s, t, buf));
}

static void jrv(struct jb *b, cJSON *md, uint64_t rv)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
        jstr(b, md, "resourceVersion", buf);
}

static cJSON *jhead(struct jb *b, const char *api, const char *kind)
{
        cJSON *o = cJSON_CreateObject();
        if (!o) {
                b->ok = false;
                return NULL;
        }
        jstr(b, o, "apiVersion", api);
        jstr(b, o, "kind", kind);
        return o;
}

static cJSON *jmeta(struct jb *b, const struct sim *s, cJSON *o, const char *name, const char *ns,
                    const char *uid, uint64_t rv, double created)
{
        cJSON *md = jobj(b, o, "metadata");
        jstr(b, md, "name", name);
        if (ns)
                jstr(b, md, "namespace", ns);
        jstr(b, md, "uid", uid);
        jrv(b, md, rv);
        jtime(b, s, md, "creationTimestamp", created);
        return md;
}

static void jowner(struct jb *b, cJSON *md, const char *api, const char *kind, const char *name,
                   const char *uid)
{
        cJSON *refs = jarr(b, md, "ownerReferences");
        cJSON *r = jobj(b, refs, NULL);
        jstr(b, r, "apiVersion", api);
        jstr(b, r, "kind", kind);
        jstr(b, r, "name", name);
        jstr(b, r, "uid", uid);
        jbool(b, r, "controller", true);
        jbool(b, r, "blockOwnerDeletion", true);
}

static void jcond(struct jb *b, const struct sim *s, cJSON *conds, const char *type, bool status,
                  double since, const char *reason, const char *message)
{
        cJSON *c = jobj(b, conds, NULL);
        jstr(b, c, "type", type);
        jstr(b, c, "status", status ? "True" : "False");
        jadd(b, c, "lastProbeTime", cJSON_CreateNull());
        jtime(b, s, c, "lastTransitionTime", since);
        if (reason)
                jstr(b, c, "reason", reason);
        if (message)
                jstr(b, c, "message", message);
}

static int32_t workload_priority(const struct sim_sc_workload *w)
{
        if (w->has_priority)
                return w->priority;
        if (streq(w->priority_class, "system-node-critical"))
                return 2000001000;
        if (streq(w->priority_class, "system-cluster-critical"))
                return 2000000000;
        return 0;
}

/* The pod spec every pod of a workload shares (also the controllers' templates). */
static void jpodspec(struct jb *b, cJSON *spec, const struct sim_sc_workload *w)
{
        if (w->emptydir) {
                cJSON *vols = jarr(b, spec, "volumes");
                cJSON *v = jobj(b, vols, NULL);
                jstr(b, v, "name", "scratch");
                jobj(b, v, "emptyDir");
        }
        cJSON *cs = jarr(b, spec, "containers");
        cJSON *c = jobj(b, cs, NULL);
        jstr(b, c, "name", "app");
        jstr(b, c, "image", PAUSE_IMAGE);
        cJSON *res = jobj(b, c, "resources");
        if (w->cpu || w->memory) {
                cJSON *req = jobj(b, res, "requests");
                if (w->cpu)
                        jstr(b, req, "cpu", w->cpu);
                if (w->memory)
                        jstr(b, req, "memory", w->memory);
        }
        if (w->emptydir) {
                cJSON *mounts = jarr(b, c, "volumeMounts");
                cJSON *m = jobj(b, mounts, NULL);
                jstr(b, m, "name", "scratch");
                jstr(b, m, "mountPath", "/scratch");
        }
        jstr(b, c, "terminationMessagePath", "/dev/termination-log");
        jstr(b, c, "terminationMessagePolicy", "File");
        jstr(b, c, "imagePullPolicy", "IfNotPresent");
        jstr(b, spec, "restartPolicy", w->kind == SIM_WL_JOB ? "Never" : "Always");
        jnum(b, spec, "terminationGracePeriodSeconds", (double)w->grace);
        jstr(b, spec, "dnsPolicy", "ClusterFirst");
        jstr(b, spec, "serviceAccountName", "default");
        jstr(b, spec, "serviceAccount", "default");
        jobj(b, spec, "securityContext");
        jstr(b, spec, "schedulerName", "default-scheduler");
        cJSON *tol = jarr(b, spec, "tolerations");
        if (w->kind == SIM_WL_DAEMONSET) {
                cJSON *t = jobj(b, tol, NULL);
                jstr(b, t, "operator", "Exists");
        } else {
                static const char *const keys[] = { "node.kubernetes.io/not-ready",
                                                    "node.kubernetes.io/unreachable" };
                for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                        cJSON *t = jobj(b, tol, NULL);
                        jstr(b, t, "key", keys[i]);
                        jstr(b, t, "operator", "Exists");
                        jstr(b, t, "effect", "NoExecute");
                        jnum(b, t, "tolerationSeconds", 300);
                }
        }
        if (w->priority_class)
                jstr(b, spec, "priorityClassName", w->priority_class);
        jnum(b, spec, "priority", workload_priority(w));
        jbool(b, spec, "enableServiceLinks", true);
        jstr(b, spec, "preemptionPolicy", "PreemptLowerPriority");
}

static size_t live_nodes(const struct sim *s)
{
        size_t c = 0;
        for (size_t i = 0; i < s->n_nodes; i++)
                c += !s->nodes[i]->removed;
        return c;
}

static const char *qos_class(const struct sim_sc_workload *w)
{
        return w->cpu || w->memory ? "Burstable" : "BestEffort";
}

cJSON *sim_render_pod(struct sim *s, const struct sim_pod *p)
{
        struct jb b = { true };
        const struct sim_workload *w = p->wl;
        const struct sim_sc_workload *sc = w->sc;
        const struct sim_node *n = p->node >= 0 ? s->nodes[p->node] : NULL;
        cJSON *o = jhead(&b, "v1", "Pod");
        cJSON *md = jmeta(&b, s, o, p->name, sc->ns, p->uid, p->rv, p->created);
        switch (sc->kind) {
        case SIM_WL_DEPLOYMENT: {
                const char *rs_name;
                sim_pod_rs(p, NULL, &rs_name, NULL);
                _cleanup_free_ char *gen = strprintf("%s-", rs_name);
                jstr(&b, md, "generateName", gen);
                break;
        }
        case SIM_WL_DAEMONSET:
        case SIM_WL_JOB: {
                _cleanup_free_ char *gen = strprintf("%s-", sc->name);
                jstr(&b, md, "generateName", gen);
                break;
        }
        default:
                break;
        }
        if (p->deleting) {
                jtime(&b, s, md, "deletionTimestamp", p->deletion_ts);
                jnum(&b, md, "deletionGracePeriodSeconds", (double)p->grace);
        }
        jdup(&b, md, "labels", p->labels);
        if (cJSON_GetArraySize(sc->annotations) > 0)
                jdup(&b, md, "annotations", sc->annotations);
        switch (sc->kind) {
        case SIM_WL_DEPLOYMENT: {
                const char *rs_name, *rs_uid;
                sim_pod_rs(p, NULL, &rs_name, &rs_uid);
                jowner(&b, md, "apps/v1", "ReplicaSet", rs_name, rs_uid);
                break;
        }
        case SIM_WL_STATEFULSET:
                jowner(&b, md, "apps/v1", "StatefulSet", sc->name, w->uid);
                break;
        case SIM_WL_DAEMONSET:
                jowner(&b, md, "apps/v1", "DaemonSet", sc->name, w->uid);
                break;
        case SIM_WL_JOB:
                jowner(&b, md, "batch/v1", "Job", sc->name, w->uid);
                break;
        case SIM_WL_POD:
                break;
        }

        cJSON *spec = jobj(&b, o, "spec");
        jpodspec(&b, spec, sc);
        if (sc->kind == SIM_WL_STATEFULSET) {
                jstr(&b, spec, "hostname", p->name);
                jstr(&b, spec, "subdomain", sc->name);
        }
        if (n)
                jstr(&b, spec, "nodeName", n->name);

        cJSON *st = jobj(&b, o, "status");
        static const char *const phases[] = { "Pending", "Running", "Succeeded", "Failed" };
        /* The pod garbage collector's mark on a pod whose node is no more (Kubernetes 1.26 on). */
        jstr(&b, st, "phase", p->node_gone ? "Failed" : phases[p->phase]);
        cJSON *conds = jarr(&b, st, "conditions");
        if (p->node_gone)
                jcond(&b, s, conds, "DisruptionTarget", true, s->t, "DeletionByPodGC",
                      "PodGC: node no longer exists");
        if (!n) {
                _cleanup_free_ char *why =
                    strprintf("0/%zu nodes are available: no schedulable node has room "
                              "for the pod's requests.",
                              live_nodes(s));
                jcond(&b, s, conds, "PodScheduled", false, p->created, "Unschedulable", why);
                jstr(&b, st, "qosClass", qos_class(sc));
                return jdone(&b, o);
        }
        bool ready = p->ready && !p->deleting;
        double ready_since = p->ready ? p->ready_at : p->scheduled_at;
        jcond(&b, s, conds, "PodReadyToStartContainers", true, p->scheduled_at, NULL, NULL);
        jcond(&b, s, conds, "Initialized", true, p->scheduled_at, NULL, NULL);
        jcond(&b, s, conds, "Ready", ready, ready_since, ready ? NULL : "ContainersNotReady",
              ready ? NULL : "containers with unready status: [app]");
        jcond(&b, s, conds, "ContainersReady", ready, ready_since, ready ? NULL : "ContainersNotReady",
              ready ? NULL : "containers with unready status: [app]");
        jcond(&b, s, conds, "PodScheduled", true, p->scheduled_at, NULL, NULL);
        jstr(&b, st, "hostIP", n->ip);
        cJSON *hips = jarr(&b, st, "hostIPs");
        jstr(&b, jobj(&b, hips, NULL), "ip", n->ip);
        jstr(&b, st, "podIP", p->ip);
        cJSON *pips = jarr(&b, st, "podIPs");
        jstr(&b, jobj(&b, pips, NULL), "ip", p->ip);
        jtime(&b, s, st, "startTime", p->scheduled_at);
        cJSON *css = jarr(&b, st, "containerStatuses");
        cJSON *cs = jobj(&b, css, NULL);
        jstr(&b, cs, "name", "app");
        cJSON *state = jobj(&b, cs, "state");
        if (p->exited) {
                cJSON *t = jobj(&b, state, "terminated");
                jnum(&b, t, "exitCode", p->exit_code);
                jstr(&b, t, "reason", p->exit_code ? "Error" : "Completed");
                jtime(&b, s, t, "startedAt", p->scheduled_at);
                jtime(&b, s, t, "finishedAt", p->exit_at);
        } else
                jtime(&b, s, jobj(&b, state, "running"), "startedAt", p->scheduled_at);
        jobj(&b, cs, "lastState");
        jbool(&b, cs, "ready", ready);
        jnum(&b, cs, "restartCount", 0);
        jstr(&b, cs, "image", PAUSE_IMAGE);
        jstr(&b, cs, "imageID", PAUSE_IMAGE);
        /* A 64-hex container ID made of the pod UID's digits, twice. */
        char hex[65];
        size_t k = 0;
        for (unsigned pass = 0; pass < 2; pass++)
                for (const char *c = p->uid; *c && k < 64; c++)
                        if (*c != '-')
                                hex[k++] = *c;
        hex[k] = 0;
        _cleanup_free_ char *cid = strprintf("containerd://%s", hex);
        jstr(&b, cs, "containerID", cid);
        jbool(&b, cs, "started", !p->exited);
        jstr(&b, st, "qosClass", qos_class(sc));
        return jdone(&b, o);
}

cJSON *sim_render_node(struct sim *s, const struct sim_node *n)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "v1", "Node");
        cJSON *md = jmeta(&b, s, o, n->name, NULL, n->uid, n->rv, WORLD_BORN);
        jdup(&b, md, "labels", n->labels);
        jdup(&b, md, "annotations", n->annotations);
        cJSON *spec = jobj(&b, o, "spec");
        _cleanup_free_ char *pid = strprintf("aws:///%s/%s", n->zone, n->instance_id);
        jstr(&b, spec, "providerID", pid);
        if (n->unschedulable)
                jbool(&b, spec, "unschedulable", true);
        if (cJSON_GetArraySize(n->taints) > 0)
                jdup(&b, spec, "taints", n->taints);
        cJSON *st = jobj(&b, o, "status");
        _cleanup_free_ char *pods = strprintf("%lld", (long long)n->sc->pods);
        static const char *const res[] = { "capacity", "allocatable" };
        for (size_t i = 0; i < ARRAY_SIZE(res); i++) {
                cJSON *r = jobj(&b, st, res[i]);
                jstr(&b, r, "cpu", n->sc->cpu);
                jstr(&b, r, "memory", n->sc->memory);
                jstr(&b, r, "pods", pods);
        }
        cJSON *conds = jarr(&b, st, "conditions");
        static const struct {
                const char *type, *reason, *message;
        } pressure[] = {
                { "MemoryPressure", "KubeletHasSufficientMemory",
                  "kubelet has sufficient memory available" },
                { "DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure" },
                { "PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available" },
        };
        for (size_t i = 0; i <= ARRAY_SIZE(pressure); i++) {
                cJSON *c = jobj(&b, conds, NULL);
                bool ready = i == ARRAY_SIZE(pressure);
                bool up = ready && !n->not_ready; /* a launched node turns Ready some time after it joins */
                jstr(&b, c, "type", ready ? "Ready" : pressure[i].type);
                /* Rebooting, the kubelet posts nothing: the node lifecycle controller marks every
                 * condition Unknown; back, Ready again since its return. */
                if (n->down) {
                        jstr(&b, c, "status", "Unknown");
                        jtime(&b, s, c, "lastHeartbeatTime", n->rebooted_at);
                        jtime(&b, s, c, "lastTransitionTime", n->rebooted_at);
                        jstr(&b, c, "reason", "NodeStatusUnknown");
                        jstr(&b, c, "message", "Kubelet stopped posting node status.");
                        continue;
                }
                jstr(&b, c, "status", up ? "True" : "False");
                jtime(&b, s, c, "lastHeartbeatTime", s->t > 0 ? s->t : 0);
                jtime(&b, s, c, "lastTransitionTime",
                      ready && n->back_at >= 0      ? n->back_at
                      : ready && n->ready_since > 0 ? n->ready_since
                                                    : WORLD_BORN);
                jstr(&b, c, "reason", up ? "KubeletReady" : ready ? "KubeletNotReady" : pressure[i].reason);
                jstr(&b, c, "message",
                     up      ? "kubelet is posting ready status"
                     : ready ? "container runtime network not ready: NetworkReady=false"
                             : pressure[i].message);
        }
        cJSON *addrs = jarr(&b, st, "addresses");
        _cleanup_free_ char *host = strprintf("ip-%s.ec2.internal", n->ip);
        if (host)
                for (char *c = host; *c; c++)
                        if (*c == '.' && c < host + 3 + strlen(n->ip))
                                *c = '-';
        const char *atypes[] = { "InternalIP", "InternalDNS", "Hostname" };
        const char *avals[] = { n->ip, host, host };
        for (size_t i = 0; i < ARRAY_SIZE(atypes); i++) {
                cJSON *a = jobj(&b, addrs, NULL);
                jstr(&b, a, "type", atypes[i]);
                jstr(&b, a, "address", avals[i]);
        }
        cJSON *de = jobj(&b, st, "daemonEndpoints");
        jnum(&b, jobj(&b, de, "kubeletEndpoint"), "Port", 10250);
        cJSON *ni = jobj(&b, st, "nodeInfo");
        jstr(&b, ni, "machineID", n->uid);
        jstr(&b, ni, "systemUUID", n->uid);
        jstr(&b, ni, "bootID", n->uid);
        jstr(&b, ni, "kernelVersion", "6.1.115-126.197.amzn2023.x86_64");
        jstr(&b, ni, "osImage", "Amazon Linux 2023.6.20241121");
        jstr(&b, ni, "containerRuntimeVersion", "containerd://1.7.23");
        jstr(&b, ni, "kubeletVersion", "v1.31.2-eks-94953ac");
        jstr(&b, ni, "kubeProxyVersion", "v1.31.2-eks-94953ac");
        jstr(&b, ni, "operatingSystem", "linux");
        jstr(&b, ni, "architecture", "amd64");
        return jdone(&b, o);
}

static void jintorstr(struct jb *b, cJSON *o, const char *k, const struct intorstr *v)
{
        if (!v->set)
                return;
        if (v->percent) {
                char buf[16];
                snprintf(buf, sizeof(buf), "%d%%", v->value);
                jstr(b, o, k, buf);
        } else
                jnum(b, o, k, v->value);
}

cJSON *sim_render_pdb(struct sim *s, const struct sim_pdb *d)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "policy/v1", "PodDisruptionBudget");
        cJSON *md = jmeta(&b, s, o, d->name, d->ns, d->uid, d->rv, d->created < 0 ? WORLD_BORN : d->created);
        jnum(&b, md, "generation", 1);
        cJSON *spec = jobj(&b, o, "spec");
        jintorstr(&b, spec, "minAvailable", &d->spec.min_available);
        jintorstr(&b, spec, "maxUnavailable", &d->spec.max_unavailable);
        cJSON *sel = jobj(&b, spec, "selector");
        jdup(&b, sel, "matchLabels", d->match_labels);
        if (d->always_allow)
                jstr(&b, spec, "unhealthyPodEvictionPolicy", "AlwaysAllow");
        cJSON *st = jobj(&b, o, "status");
        jnum(&b, st, "observedGeneration", 1);
        if (d->n_disrupted > 0) {
                cJSON *dp = jobj(&b, st, "disruptedPods");
                for (size_t i = 0; i < d->n_disrupted; i++)
                        jtime(&b, s, dp, d->disrupted[i].pod, d->disrupted[i].at);
        }
        jnum(&b, st, "disruptionsAllowed", d->allowed);
        jnum(&b, st, "currentHealthy", d->current);
        jnum(&b, st, "desiredHealthy", d->desired);
        jnum(&b, st, "expectedPods", d->expected);
        cJSON *conds = jarr(&b, st, "conditions");
        cJSON *c = jobj(&b, conds, NULL);
        jstr(&b, c, "type", "DisruptionAllowed");
        jstr(&b, c, "status", d->allowed > 0 ? "True" : "False");
        jnum(&b, c, "observedGeneration", 1);
        jtime(&b, s, c, "lastTransitionTime", d->cond_since);
        jstr(&b, c, "reason", d->allowed > 0 ? "SufficientPods" : "InsufficientPods");
        jstr(&b, c, "message", "");
        return jdone(&b, o);
}

cJSON *sim_render_ns(struct sim *s, const struct sim_ns *n)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "v1", "Namespace");
        cJSON *md = jmeta(&b, s, o, n->name, NULL, n->uid, n->rv, WORLD_BORN);
        jstr(&b, jobj(&b, md, "labels"), "kubernetes.io/metadata.name", n->name);
        cJSON *fin = jarr(&b, jobj(&b, o, "spec"), "finalizers");
        jadd(&b, fin, NULL, cJSON_CreateString("kubernetes"));
        jstr(&b, jobj(&b, o, "status"), "phase", "Active");
        return jdone(&b, o);
}

static void jtemplate(struct jb *b, cJSON *spec, const struct sim_workload *w, bool with_hash)
{
        cJSON *sel = jobj(b, spec, "selector");
        cJSON *ml = jobj(b, sel, "matchLabels");
        jstr(b, ml, "app", w->sc->name);
        if (with_hash)
                jstr(b, ml, "pod-template-hash", w->hash);
        cJSON *tpl = jobj(b, spec, "template");
        cJSON *tmd = jobj(b, tpl, "metadata");
        cJSON *tl = jobj(b, tmd, "labels");
        jstr(b, tl, "app", w->sc->name);
        if (with_hash)
                jstr(b, tl, "pod-template-hash", w->hash);
        const cJSON *ann = w->tmpl_annotations ? w->tmpl_annotations : w->sc->annotations;
        if (cJSON_GetArraySize(ann) > 0)
                jdup(b, tmd, "annotations", ann);
        jpodspec(b, jobj(b, tpl, "spec"), w->sc);
}

/* A Deployment's metadata.annotations: its revision and what clients wrote. */
static void jdeploy_annotations(struct jb *b, cJSON *md, const struct sim_workload *w)
{
        char rev[24];
        cJSON *ann = jobj(b, md, "annotations");
        snprintf(rev, sizeof(rev), "%zu", w->n_old_rs + 1);
        jstr(b, ann, "deployment.kubernetes.io/revision", rev);
        const cJSON *kv;
        cJSON_ArrayForEach (kv, w->annotations)
                if (cJSON_IsString(kv) && !streq(kv->string, "deployment.kubernetes.io/revision"))
                        jstr(b, ann, kv->string, kv->valuestring);
}

cJSON *sim_render_workload(struct sim *s, const struct sim_workload *w, enum sim_kind kind)
{
        struct jb b = { true };
        const struct sim_sc_workload *sc = w->sc;
        const char *kname = kind == SIM_DEPLOYMENT    ? "Deployment"
                            : kind == SIM_REPLICASET  ? "ReplicaSet"
                            : kind == SIM_STATEFULSET ? "StatefulSet"
                                                      : "DaemonSet";
        cJSON *o = jhead(&b, "apps/v1", kname);
        bool rs = kind == SIM_REPLICASET;
        cJSON *md = jmeta(&b, s, o, rs ? w->rs_name : sc->name, sc->ns, rs ? w->rs_uid : w->uid,
                          rs ? w->rs_rv : w->rv, WORLD_BORN);
        bool deploy = kind == SIM_DEPLOYMENT;
        int64_t generation = deploy && w->generation > 0 ? w->generation : 1;
        jnum(&b, md, "generation", (double)generation);
        cJSON *labels = jobj(&b, md, "labels");
        jstr(&b, labels, "app", sc->name);
        if (rs) {
                char revision[24];
                snprintf(revision, sizeof(revision), "%zu", w->n_old_rs + 1);
                jstr(&b, labels, "pod-template-hash", w->hash);
                jstr(&b, jobj(&b, md, "annotations"), "deployment.kubernetes.io/revision", revision);
                jowner(&b, md, "apps/v1", "Deployment", sc->name, w->uid);
        } else if (deploy)
                jdeploy_annotations(&b, md, w);
        cJSON *spec = jobj(&b, o, "spec");
        if (kind != SIM_DAEMONSET)
                jnum(&b, spec, "replicas", w->replicas);
        if (deploy) {
                cJSON *strat = jobj(&b, spec, "strategy");
                jstr(&b, strat, "type", "RollingUpdate");
                cJSON *ru = jobj(&b, strat, "rollingUpdate");
                jintorstr(&b, ru, "maxSurge", &sc->max_surge);
                jintorstr(&b, ru, "maxUnavailable", &sc->max_unavailable);
        }
        if (kind == SIM_STATEFULSET) {
                jstr(&b, spec, "serviceName", sc->name);
                jstr(&b, spec, "podManagementPolicy", "OrderedReady");
        }
        jtemplate(&b, spec, w, rs);
        cJSON *st = jobj(&b, o, "status");
        jnum(&b, st, "observedGeneration", (double)generation);
        if (kind == SIM_DAEMONSET) {
                jnum(&b, st, "currentNumberScheduled", w->st_replicas);
                jnum(&b, st, "desiredNumberScheduled", (double)live_nodes(s));
                jnum(&b, st, "numberMisscheduled", 0);
                jnum(&b, st, "numberReady", w->st_ready);
                jnum(&b, st, "numberAvailable", w->st_ready);
                jnum(&b, st, "updatedNumberScheduled", w->st_replicas);
                return jdone(&b, o);
        }
        /* A ReplicaSet is the current template's; a Deployment counts every pod and the updated ones. */
        int replicas = rs ? w->st_updated : w->st_replicas, ready = rs ? w->st_updated_ready : w->st_ready;
        if (kind == SIM_STATEFULSET) {
                replicas = w->st_replicas;
                ready = w->st_ready;
        }
        jnum(&b, st, "replicas", replicas);
        if (rs)
                jnum(&b, st, "fullyLabeledReplicas", replicas);
        else
                jnum(&b, st, "updatedReplicas", kind == SIM_STATEFULSET ? w->st_replicas : w->st_updated);
        jnum(&b, st, "readyReplicas", ready);
        jnum(&b, st, "availableReplicas", ready);
        if (kind == SIM_STATEFULSET) {
                _cleanup_free_ char *rev = strprintf("%s-%s", sc->name, w->hash);
                jnum(&b, st, "currentReplicas", w->st_replicas);
                jstr(&b, st, "currentRevision", rev);
                jstr(&b, st, "updateRevision", rev);
        }
        if (deploy && w->replicas > w->st_ready)
                jnum(&b, st, "unavailableReplicas", w->replicas - w->st_ready);
        return jdone(&b, o);
}

cJSON *sim_render_scale(struct sim *s, const struct sim_workload *w)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "autoscaling/v1", "Scale");
        jmeta(&b, s, o, w->sc->name, w->sc->ns, w->uid, w->rv, WORLD_BORN);
        jnum(&b, jobj(&b, o, "spec"), "replicas", w->replicas);
        cJSON *st = jobj(&b, o, "status");
        jnum(&b, st, "replicas", w->st_replicas);
        _cleanup_free_ char *selector = strprintf("app=%s", w->sc->name);
        jstr(&b, st, "selector", selector);
        return jdone(&b, o);
}

/* A LoadBalancer Service in front of the workload's pods (selector app: NAME): what the service
 * controller and the AWS Load Balancer Controller put into target groups. */
cJSON *sim_render_service(struct sim *s, const struct sim_workload *w)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "v1", "Service");
        jmeta(&b, s, o, w->sc->name, w->sc->ns, w->svc_uid, w->rv, WORLD_BORN);
        cJSON *spec = jobj(&b, o, "spec");
        jstr(&b, spec, "type", "LoadBalancer");
        jstr(&b, jobj(&b, spec, "selector"), "app", w->sc->name);
        cJSON *port = jobj(&b, jarr(&b, spec, "ports"), NULL);
        jstr(&b, port, "protocol", "TCP");
        jnum(&b, port, "port", 80);
        jnum(&b, port, "targetPort", 8080);
        return jdone(&b, o);
}

/* The AWS Load Balancer Controller's binding of the workload's target group to its Service (port 80). */
cJSON *sim_render_tgb(struct sim *s, const struct sim_workload *w)
{
        struct jb b = { true };
        _cleanup_free_ char *arn = sim_tg_arn(s, w);
        if (!arn)
                return NULL;
        cJSON *o = jhead(&b, "elbv2.k8s.aws/v1beta1", "TargetGroupBinding");
        jmeta(&b, s, o, w->sc->name, w->sc->ns, w->tgb_uid, w->rv, WORLD_BORN);
        cJSON *spec = jobj(&b, o, "spec");
        jstr(&b, spec, "targetGroupARN", arn);
        jstr(&b, spec, "targetType", w->sc->tg_ip ? "ip" : "instance");
        cJSON *ref = jobj(&b, spec, "serviceRef");
        jstr(&b, ref, "name", w->sc->name);
        jnum(&b, ref, "port", 80);
        jnum(&b, jobj(&b, o, "status"), "observedGeneration", 1);
        return jdone(&b, o);
}

/* storage.k8s.io/v1, as the attach/detach controller writes it for a CSI volume (the EBS driver's). */
cJSON *sim_render_va(struct sim *s, const struct sim_va *va)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "storage.k8s.io/v1", "VolumeAttachment");
        jmeta(&b, s, o, va->name, NULL, va->uid, va->rv, va->created);
        cJSON *spec = jobj(&b, o, "spec");
        jstr(&b, spec, "attacher", "ebs.csi.aws.com");
        jstr(&b, spec, "nodeName", va->node);
        jstr(&b, jobj(&b, spec, "source"), "persistentVolumeName", va->pv);
        jbool(&b, jobj(&b, o, "status"), "attached", true);
        return jdone(&b, o);
}

/* autoscaling/v2, targeting the Deployment by CPU; it is served and never acts (the simulator has no
 * metrics), so its desired count follows the Deployment's. */
cJSON *sim_render_hpa(struct sim *s, const struct sim_workload *w)
{
        struct jb b = { true };
        cJSON *o = jhead(&b, "autoscaling/v2", "HorizontalPodAutoscaler");
        jmeta(&b, s, o, w->sc->name, w->sc->ns, w->hpa_uid, w->rv, WORLD_BORN);
        cJSON *spec = jobj(&b, o, "spec");
        cJSON *ref = jobj(&b, spec, "scaleTargetRef");
        jstr(&b, ref, "apiVersion", "apps/v1");
        jstr(&b, ref, "kind", "Deployment");
        jstr(&b, ref, "name", w->sc->name);
        jnum(&b, spec, "minReplicas", w->sc->hpa_min);
        jnum(&b, spec, "maxReplicas", w->sc->hpa_max);
        cJSON *m = jobj(&b, jarr(&b, spec, "metrics"), NULL);
        jstr(&b, m, "type", "Resource");
        cJSON *res = jobj(&b, m, "resource");
        jstr(&b, res, "name", "cpu");
        cJSON *target = jobj(&b, res, "target");
        jstr(&b, target, "type", "Utilization");
        jnum(&b, target, "averageUtilization", 80);
        cJSON *st = jobj(&b, o, "status");
        jnum(&b, st, "currentReplicas", w->st_replicas);
        jnum(&b, st, "desiredReplicas", w->replicas);
        return jdone(&b, o);
}

cJSON *sim_render_status(int code, const char *status, const char *reason, const char *message)
{
        struct jb b = { true };
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        jstr(&b, o, "kind", "Status");
        jstr(&b, o, "apiVersion", "v1");
        jobj(&b, o, "metadata");
        jstr(&b, o, "status", status);
        if (message)
                jstr(&b, o, "message", message);
        if (reason)
                jstr(&b, o, "reason", reason);
        jnum(&b, o, "code", code);
        return jdone(&b, o);
}
