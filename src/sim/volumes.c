/* VolumeAttachments (storage.k8s.io/v1): what the attach/detach controller and a CSI driver keep of a
 * pod's volume on its node. A pod of a workload with volume_detach_seconds gets one when it is bound; when
 * the pod is gone the driver detaches, which takes that long, and the object is deleted then. A drain
 * that completes an ASG lifecycle action before its node's attachments are gone would let the instance
 * terminate with the volume still attached, and the pod's replacement wait for it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/core.h"

static struct sim_va *va_free(struct sim_va *va)
{
        if (!va)
                return NULL;
        free(va->name);
        free(va->uid);
        free(va->node);
        free(va->pv);
        free(va);
        return NULL;
}

static char *va_name(const struct sim_pod *p)
{
        /* As the attach/detach controller names them: csi- and a hash of (volume, driver, node); the
         * pod's UID stands in for the hash. */
        return strprintf("csi-%s", p->uid);
}

struct sim_va *sim_va_find(struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_vas; i++)
                if (streq(s->vas[i]->name, name))
                        return s->vas[i];
        return NULL;
}

int sim_va_attach(struct sim *s, const struct sim_pod *p)
{
        if (p->wl->sc->volume_detach < 0 || p->node < 0)
                return 0;
        struct sim_va **a = realloc(s->vas, (s->n_vas + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->vas = a;
        struct sim_va *va = calloc(1, sizeof(*va));
        if (!va)
                return -ENOMEM;
        *va = (struct sim_va){ .created = s->t, .detach_at = -1 };
        if (!(va->name = va_name(p)) || !(va->uid = sim_new_uid(s)) ||
            !(va->node = strdup(s->nodes[p->node]->name)) || !(va->pv = strprintf("pvc-%s", p->uid))) {
                va_free(va);
                return -ENOMEM;
        }
        s->vas[s->n_vas++] = va;
        return sim_emit(s, SIM_VOLUMEATTACHMENT, "ADDED", va);
}

void sim_va_detach(struct sim *s, const struct sim_pod *p)
{
        _cleanup_free_ char *name = NULL;
        struct sim_va *va;
        if (p->wl->sc->volume_detach < 0 || !(name = va_name(p)) || !(va = sim_va_find(s, name)) ||
            va->detach_at >= 0)
                return;
        va->detach_at = s->t + p->wl->sc->volume_detach;
}

void sim_va_run(struct sim *s, double t)
{
        for (size_t i = 0; i < s->n_vas;) {
                struct sim_va *va = s->vas[i];
                if (va->detach_at < 0 || va->detach_at > t) {
                        i++;
                        continue;
                }
                (void)sim_emit(s, SIM_VOLUMEATTACHMENT, "DELETED", va);
                memmove(&s->vas[i], &s->vas[i + 1], (s->n_vas - i - 1) * sizeof(*s->vas));
                s->n_vas--;
                va_free(va);
        }
}

double sim_va_next(const struct sim *s)
{
        double m = -1;
        for (size_t i = 0; i < s->n_vas; i++)
                if (s->vas[i]->detach_at >= 0 && (m < 0 || s->vas[i]->detach_at < m))
                        m = s->vas[i]->detach_at;
        return m;
}

void sim_va_free_all(struct sim *s)
{
        for (size_t i = 0; i < s->n_vas; i++)
                va_free(s->vas[i]);
        free(s->vas);
        s->vas = NULL;
        s->n_vas = 0;
}
