/* The change log that watches read: every change of an object, rendered as it was then, under the
 * resourceVersion it got. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- change log ---- */
static void log_push(struct sim *s, uint64_t rv, enum sim_kind kind, const char *type, char *ns, cJSON *obj,
                     long node)
{
        if (s->log_len == SIM_LOG_MAX) {
                struct sim_logentry *old = &s->log[s->log_start];
                s->log_floor = old->rv;
                free(old->ns);
                cJSON_Delete(old->obj);
                s->log_start = (s->log_start + 1) % SIM_LOG_MAX;
                s->log_len--;
        }
        s->log[(s->log_start + s->log_len) % SIM_LOG_MAX] = (struct sim_logentry){
                .rv = rv, .kind = kind, .type = type, .ns = ns, .obj = obj, .node = node
        };
        s->log_len++;
}

/* Wakes every thread waiting for a change (sim_wait). The watches of one node's pods wait on their node's
 * condition instead, signalled by sim_emit for each change of a pod bound to it. */
void sim_broadcast(struct sim *s)
{
        pthread_cond_broadcast(&s->cond);
}

const char *sim_pod_ns(const struct sim_pod *p)
{
        return p->wl->sc->ns;
}

bool sim_pod_evictable(const struct sim_pod *p)
{
        return p->wl->sc->kind != SIM_WL_DAEMONSET;
}

static cJSON *render_any(struct sim *s, enum sim_kind kind, void *o, const char **ret_ns)
{
        *ret_ns = NULL;
        switch (kind) {
        case SIM_NAMESPACE:
                return sim_render_ns(s, o);
        case SIM_NODE:
                return sim_render_node(s, o);
        case SIM_POD:
                *ret_ns = sim_pod_ns(o);
                return sim_render_pod(s, o);
        case SIM_PDB:
                *ret_ns = ((struct sim_pdb *)o)->ns;
                return sim_render_pdb(s, o);
        case SIM_REPLICASET:
        case SIM_DEPLOYMENT:
        case SIM_STATEFULSET:
        case SIM_DAEMONSET:
                *ret_ns = ((struct sim_workload *)o)->sc->ns;
                return sim_render_workload(s, o, kind);
        case SIM_EVENT:
        case SIM_LEASE:
        case SIM_CONFIGMAP: {
                struct sim_obj *g = o;
                *ret_ns = g->ns;
                return cJSON_Duplicate(g->obj, true);
        }
        case SIM_VOLUMEATTACHMENT:
                *ret_ns = NULL;
                return sim_render_va(s, o);
        default:
                return NULL;
        }
}

/* Gives the object the next resourceVersion and records the change with its rendering. */
int sim_emit(struct sim *s, enum sim_kind kind, const char *type, void *o)
{
        if (s->building)
                return 0;
        uint64_t rv = ++s->rv;
        switch (kind) {
        case SIM_NAMESPACE:
                ((struct sim_ns *)o)->rv = rv;
                break;
        case SIM_NODE:
                ((struct sim_node *)o)->rv = rv;
                break;
        case SIM_POD:
                ((struct sim_pod *)o)->rv = rv;
                if (((struct sim_pod *)o)->node >= 0)
                        pthread_cond_broadcast(&s->nodes[((struct sim_pod *)o)->node]->pods_cond);
                break;
        case SIM_PDB:
                ((struct sim_pdb *)o)->rv = rv;
                break;
        case SIM_REPLICASET:
                ((struct sim_workload *)o)->rs_rv = rv;
                break;
        case SIM_DEPLOYMENT:
        case SIM_STATEFULSET:
        case SIM_DAEMONSET:
                ((struct sim_workload *)o)->rv = rv;
                break;
        case SIM_VOLUMEATTACHMENT:
                ((struct sim_va *)o)->rv = rv;
                break;
        case SIM_EVENT:
        case SIM_LEASE:
        case SIM_CONFIGMAP: {
                struct sim_obj *g = o;
                cJSON *md = cJSON_GetObjectItemCaseSensitive(g->obj, "metadata");
                char buf[32];
                snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
                cJSON *v = cJSON_CreateString(buf);
                if (!v || !md || !cJSON_ReplaceItemInObjectCaseSensitive(md, "resourceVersion", v)) {
                        if (!md || !cJSON_AddItemToObject(md, "resourceVersion", v)) {
                                cJSON_Delete(v);
                                return -ENOMEM;
                        }
                }
                break;
        }
        default:
                return -EINVAL;
        }
        sim_broadcast(s);
        s->dirty = true;
        if (s->log_skip > 0) {
                /* sim_new: this change would be pushed out of the log by the ones after it */
                s->log_skip--;
                s->log_floor = rv;
                return 0;
        }
        const char *ns;
        cJSON *obj = render_any(s, kind, o, &ns);
        if (!obj)
                return -ENOMEM;
        char *nsc = NULL;
        if (ns && !(nsc = strdup(ns))) {
                cJSON_Delete(obj);
                return -ENOMEM;
        }
        log_push(s, rv, kind, type, nsc, obj, kind == SIM_POD ? ((struct sim_pod *)o)->node : -1);
        return 0;
}

int sim_changes_since(struct sim *s, enum sim_kind kind, const char *ns, uint64_t after_rv,
                      void (*fn)(const struct sim_change *c, void *userdata), void *userdata)
{
        if (after_rv < s->log_floor)
                return -ESTALE;
        /* The log is in resourceVersion order: start at the first change after after_rv. */
        size_t lo = 0, hi = s->log_len;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->log[(s->log_start + mid) % SIM_LOG_MAX].rv <= after_rv)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < s->log_len; i++) {
                const struct sim_logentry *e = &s->log[(s->log_start + i) % SIM_LOG_MAX];
                if (e->rv <= after_rv || e->kind != kind)
                        continue;
                if (ns && !streq(ns, e->ns))
                        continue;
                struct sim_change c = {
                        .rv = e->rv, .kind = e->kind, .type = e->type, .object = e->obj, .node = e->node
                };
                fn(&c, userdata);
        }
        return 0;
}

uint64_t sim_resource_version(const struct sim *s)
{
        return s->rv;
}
