/* agent/hook: lifecycle actions completed from IMDS mode (hook.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/hook.h"
#include "spotdrain/asg.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"

#define HOOK_COMPLETE_ATTEMPTS  10u /* about 4 minutes of backoff: the drain's end is what it waited for */
#define HOOK_HEARTBEAT_ATTEMPTS 4u  /* the next heartbeat comes anyway */
#define HOOK_BACKOFF_BASE_USEC  (1000ULL * 1000ULL)
#define HOOK_BACKOFF_MAX_USEC   (60ULL * 1000ULL * 1000ULL)

/* The instance role's credentials, whatever the pod's environment says: the provider sees an empty
 * environment, so its source is IMDS iam/security-credentials/ROLE. */
static const char *const no_env[] = { NULL };

struct hook_call {
        struct agent_hook *hook;
        struct hook_call *next;
        struct notice n;
        bool complete, checked;
        struct backoff backoff;
        struct timer *retry;
        struct kube_call *read;
};

struct agent_hook {
        struct loop *loop;
        char *region, *imds_endpoint, *asg_endpoint, *node;
        struct kube_client *kube;
        /* made at the first call */
        struct aws_creds_provider *creds;
        struct aws_credentials copy; /* the provider's latest, for the Auto Scaling client to sign with */
        struct asg_client *asg;
        struct hook_call *calls;
        char **done; /* completion records sent by this process */
        size_t n_done;
        struct agent_hook_stats stats;
};

int agent_hook_record(const struct notice *n, char **ret)
{
        if (!n || isempty(n->asg_name) || isempty(n->lifecycle_hook_name) || isempty(n->instance_id))
                return -EINVAL;
        *ret = strprintf("%s/%s/%s", n->asg_name, n->lifecycle_hook_name, n->instance_id);
        return *ret ? 0 : -ENOMEM;
}

static const char *call_action(const struct hook_call *c)
{
        return c->complete ? "CompleteLifecycleAction" : "RecordLifecycleActionHeartbeat";
}

static void call_free(struct hook_call *c)
{
        struct agent_hook *h = c->hook;

        for (struct hook_call **p = &h->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        timer_cancel(c->retry);
        kube_call_cancel(c->read);
        free(c);
}

static bool recorded_here(const struct agent_hook *h, const char *record)
{
        for (size_t i = 0; i < h->n_done; i++)
                if (streq(h->done[i], record))
                        return true;
        return false;
}

static void on_recorded(struct kube_client *k, struct kube_result *r, void *userdata)
{
        if (r->error < 0)
                log_full_reason(
                    LOG_WARNING, r->error, r->message, NULL,
                    "agent: cannot record the lifecycle action's completion on node %s; a restarted "
                    "agent would send it again (Auto Scaling refuses a second one)",
                    (const char *)userdata);
}

/* Remembered in this process and on the node, so that an agent restarted after it does not send it again. */
static void completion_record(struct agent_hook *h, const struct notice *n)
{
        _cleanup_free_ char *record = NULL;
        char **v;

        if (agent_hook_record(n, &record) < 0)
                return;
        if (!recorded_here(h, record) && (v = realloc(h->done, (h->n_done + 1) * sizeof(*v)))) {
                h->done = v;
                h->done[h->n_done++] = strdup(record);
                if (!h->done[h->n_done - 1])
                        h->n_done--;
        }
        if (h->kube && h->node) {
                const char *keys[] = { SPOTDRAIN_ANNOTATION_LIFECYCLE }, *values[] = { record };
                if (kube_node_set_meta(h->kube, h->node, true, keys, values, 1, on_recorded, h->node, NULL) <
                    0)
                        log_warning("agent: cannot record the lifecycle action's completion on node %s",
                                    h->node);
        }
}

static const struct aws_credentials *creds_current(void *userdata)
{
        struct agent_hook *h = userdata;
        return h->copy.access_key_id ? &h->copy : NULL;
}

/* The provider and the client, at the first call only. */
static int hook_setup(struct agent_hook *h)
{
        int r;

        if (!h->creds) {
                r = aws_creds_provider_new(
                    h->loop, &(struct aws_creds_options){ .env = no_env, .imds_endpoint = h->imds_endpoint },
                    &h->creds);
                if (r < 0)
                        return r;
        }
        if (!h->asg) {
                if (isempty(h->region))
                        return -EDESTADDRREQ;
                r = asg_client_new(h->loop, h->asg_endpoint, h->region, creds_current, h, &h->asg);
                if (r < 0)
                        return r;
                log_info(
                    "agent: lifecycle actions go to Auto Scaling at %s, signed with the instance role's "
                    "credentials",
                    asg_client_endpoint(h->asg));
        }
        return 0;
}

static void call_step(struct hook_call *c);

static void on_retry(void *userdata)
{
        struct hook_call *c = userdata;
        c->retry = NULL;
        call_step(c);
}

static void call_failed(struct hook_call *c, int error, const char *message)
{
        struct agent_hook *h = c->hook;
        unsigned attempts = c->complete ? HOOK_COMPLETE_ATTEMPTS : HOOK_HEARTBEAT_ATTEMPTS;

        if (c->backoff.attempt + 1 < attempts &&
            timer_start_in(h->loop, backoff_next(&c->backoff), on_retry, c, &c->retry) >= 0) {
                h->stats.retries++;
                log_full_reason(LOG_WARNING, error, message, (const char *[]){ "node", h->node, NULL },
                                "agent: Auto Scaling %s for %s failed, retrying with backoff",
                                call_action(c), c->n.instance_id);
                return;
        }
        h->stats.failures++;
        log_full_reason(LOG_ERR, error, message, (const char *[]){ "node", h->node, NULL },
                        "agent: Auto Scaling %s for %s failed, giving up (group %s, hook %s)",
                        call_action(c), c->n.instance_id, c->n.asg_name, c->n.lifecycle_hook_name);
        call_free(c);
}

static void on_answer(int error, const char *message, void *userdata)
{
        struct hook_call *c = userdata;
        struct agent_hook *h = c->hook;

        if (error < 0 && !asg_no_such_action(message)) {
                call_failed(c, error, message);
                return;
        }
        if (error < 0)
                /* Auto Scaling knows no such action (any more): completed already, or its hook timed out. */
                log_warning("agent: Auto Scaling has no lifecycle action for %s (group %s, hook %s): %s",
                            c->n.instance_id, c->n.asg_name, c->n.lifecycle_hook_name, message);
        else if (c->complete) {
                h->stats.completions++;
                log_full(LOG_NOTICE, 0, (const char *[]){ "node", h->node, NULL },
                         "agent: completed the lifecycle action of %s (group %s, hook %s) with CONTINUE",
                         c->n.instance_id, c->n.asg_name, c->n.lifecycle_hook_name);
        } else {
                h->stats.heartbeats++;
                log_info("agent: lifecycle heartbeat for %s (group %s, hook %s)", c->n.instance_id,
                         c->n.asg_name, c->n.lifecycle_hook_name);
        }
        if (c->complete)
                completion_record(h, &c->n);
        call_free(c);
}

static void on_creds(int error, const struct aws_credentials *creds, const char *message, void *userdata)
{
        struct hook_call *c = userdata;
        struct agent_hook *h = c->hook;
        int r;

        if (error < 0) {
                call_failed(c, error, message ? message : "no instance role credentials from IMDS");
                return;
        }
        aws_credentials_clear(&h->copy);
        r = aws_credentials_copy(&h->copy, creds);
        if (r >= 0)
                r = c->complete ? asg_complete_lifecycle(h->asg, &c->n, "CONTINUE", on_answer, c)
                                : asg_heartbeat(h->asg, &c->n, on_answer, c);
        if (r < 0)
                call_failed(c, r, "the call could not start");
}

static void on_node_read(struct kube_client *k, struct kube_result *r, void *userdata)
{
        struct hook_call *c = userdata;
        _cleanup_free_ char *record = NULL;
        const char *seen;

        c->read = NULL;
        c->checked = true;
        if (r->error < 0)
                /* Not known: sent (a second completion is refused by Auto Scaling, not acted on). */
                log_debug_errno(r->error, "agent: cannot read node %s for its lifecycle record",
                                c->hook->node);
        else if (agent_hook_record(&c->n, &record) >= 0 &&
                 (seen = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                      cJSON_GetObjectItemCaseSensitive(
                          cJSON_GetObjectItemCaseSensitive(r->object, "metadata"), "annotations"),
                      SPOTDRAIN_ANNOTATION_LIFECYCLE))) &&
                 streq(seen, record)) {
                log_info("agent: the lifecycle action of %s (group %s, hook %s) was completed before a "
                         "restart (%s on node %s): not sent again",
                         c->n.instance_id, c->n.asg_name, c->n.lifecycle_hook_name,
                         SPOTDRAIN_ANNOTATION_LIFECYCLE, c->hook->node);
                call_free(c);
                return;
        }
        call_step(c);
}

static void call_step(struct hook_call *c)
{
        struct agent_hook *h = c->hook;
        int r;

        if (c->complete && !c->checked && h->kube && h->node) {
                _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", h->node, NULL);
                r = path ? kube_get(h->kube, path, on_node_read, c, &c->read) : -ENOMEM;
                if (r >= 0)
                        return;
                c->checked = true;
        }
        r = hook_setup(h);
        if (r >= 0)
                r = aws_creds_get(h->creds, on_creds, c);
        if (r < 0)
                call_failed(c, r,
                            r == -EDESTADDRREQ ? "no region (IMDS placement/region)"
                                               : "cannot set up the call");
}

static int call_start(struct agent_hook *h, const struct notice *n, bool complete)
{
        _cleanup_free_ char *record = NULL;
        struct hook_call *c;
        int r;

        r = agent_hook_record(n, &record);
        if (r < 0)
                return r;
        if (complete && recorded_here(h, record))
                return 0; /* at most once */
        if (dry_run_enabled()) {
                dry_run_would(complete ? "autoscaling:CompleteLifecycleAction"
                                       : "autoscaling:RecordLifecycleActionHeartbeat",
                              complete
                                  ? "complete the lifecycle action of %s (group %s, hook %s) with CONTINUE"
                                  : "send a lifecycle heartbeat for %s (group %s, hook %s)",
                              n->instance_id, n->asg_name, n->lifecycle_hook_name);
                if (complete)
                        completion_record(h, n);
                return 0;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (struct hook_call){ .hook = h,
                                 .next = h->calls,
                                 .n = *n,
                                 .complete = complete,
                                 .backoff = BACKOFF_INIT(HOOK_BACKOFF_BASE_USEC, HOOK_BACKOFF_MAX_USEC) };
        h->calls = c;
        log_info("agent: %s the lifecycle action of %s (group %s, hook %s)",
                 complete ? "completing" : "heartbeat for", n->instance_id, n->asg_name,
                 n->lifecycle_hook_name);
        call_step(c);
        return 0;
}

int agent_hook_heartbeat(struct agent_hook *h, const struct notice *n)
{
        return h ? call_start(h, n, false) : -EINVAL;
}

int agent_hook_complete(struct agent_hook *h, const struct notice *n)
{
        return h ? call_start(h, n, true) : -EINVAL;
}

static int dup_opt(const char *v, char **ret)
{
        *ret = isempty(v) ? NULL : strdup(v);
        return isempty(v) || *ret ? 0 : -ENOMEM;
}

int agent_hook_new(struct loop *l, const struct agent_hook_options *o, struct agent_hook **ret)
{
        _cleanup_(agent_hook_freep) struct agent_hook *h = NULL;

        if (!l || !o || !ret)
                return -EINVAL;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->loop = l;
        h->kube = o->kube;
        if (dup_opt(o->region, &h->region) < 0 || dup_opt(o->imds_endpoint, &h->imds_endpoint) < 0 ||
            dup_opt(o->asg_endpoint, &h->asg_endpoint) < 0 || dup_opt(o->node, &h->node) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(h);
        return 0;
}

struct agent_hook *agent_hook_free(struct agent_hook *h)
{
        if (!h)
                return NULL;
        /* The client first: the calls in flight end silently (no callback reaches a freed call). */
        asg_client_free(h->asg);
        aws_creds_provider_free(h->creds);
        while (h->calls)
                call_free(h->calls);
        aws_credentials_clear(&h->copy);
        for (size_t i = 0; i < h->n_done; i++)
                free(h->done[i]);
        free(h->done);
        free(h->region);
        free(h->imds_endpoint);
        free(h->asg_endpoint);
        free(h->node);
        free(h);
        return NULL;
}

void agent_hook_stats(const struct agent_hook *h, struct agent_hook_stats *ret)
{
        *ret = h ? h->stats : (struct agent_hook_stats){};
}
