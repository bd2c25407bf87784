/* Waiting for a node's VolumeAttachments to be gone (volumes.h). VolumeAttachments cannot be selected by
 * spec.nodeName on the server, so the whole list is read and filtered here; it holds one object per
 * attached volume of the cluster, a small list next to its pods. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/volumes.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"

#define VOLUME_WAIT_POLL_USEC (1000 * 1000ULL)
#define VOLUME_LIST_PATH      "/apis/storage.k8s.io/v1/volumeattachments"

struct volume_wait {
        struct kube_client *c;
        struct loop *loop;
        char *node;
        uint64_t until;
        unsigned left;
        struct kube_call *call;
        struct timer *timer;
        volume_wait_fn done;
        void *userdata;
};

unsigned volume_attachments_on(const cJSON *items, const char *node)
{
        const cJSON *va;
        unsigned n = 0;
        cJSON_ArrayForEach (va, items)
                n += streq_ptr(kube_object_str(va, "spec.nodeName"), node);
        return n;
}

static void poll_fire(void *userdata);

static void finish(struct volume_wait *w, bool timed_out)
{
        w->timer = timer_cancel(w->timer);
        if (w->done)
                w->done(w, w->left, timed_out, w->userdata);
}

static void list_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct volume_wait *w = userdata;
        uint64_t now = clk_now();

        w->call = NULL;
        if (r->error >= 0) {
                w->left = volume_attachments_on(kube_list_items(r->object), w->node);
                if (w->left == 0)
                        return finish(w, false);
        } else
                /* The client retried already; what was seen last stands, and the next round asks again. */
                log_debug_errno(r->error, "cannot list the VolumeAttachments of %s", w->node);
        if (now >= w->until)
                return finish(w, true);
        uint64_t at = now + VOLUME_WAIT_POLL_USEC < w->until ? now + VOLUME_WAIT_POLL_USEC : w->until;
        if (timer_start(w->loop, at, poll_fire, w, &w->timer) < 0)
                finish(w, true); /* no timer (ENOMEM): complete rather than hang the action */
}

static void poll_fire(void *userdata)
{
        struct volume_wait *w = userdata;
        w->timer = NULL; /* released by the loop as it fired */
        if (kube_list(w->c, VOLUME_LIST_PATH, &(struct kube_list_options){ .priority = true }, list_done, w,
                      &w->call) < 0)
                finish(w, true);
}

int volume_wait_start(struct kube_client *c, const char *node, uint64_t until_usec, volume_wait_fn done,
                      void *userdata, struct volume_wait **ret)
{
        struct volume_wait *w;
        int r;

        if (!c || !node || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct volume_wait){
                .c = c, .loop = kube_client_loop(c), .until = until_usec, .done = done, .userdata = userdata
        };
        if (!(w->node = strdup(node))) {
                free(w);
                return -ENOMEM;
        }
        /* The first look from the loop, so that done never runs inside this call. */
        r = timer_start_in(w->loop, 0, poll_fire, w, &w->timer);
        if (r < 0) {
                volume_wait_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

struct volume_wait *volume_wait_free(struct volume_wait *w)
{
        if (!w)
                return NULL;
        kube_call_cancel(w->call);
        timer_cancel(w->timer);
        free(w->node);
        free(w);
        return NULL;
}
