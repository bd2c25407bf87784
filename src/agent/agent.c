/* The agent: identity from IMDS, the poll loop over the four notice paths, and the actions. The notices go
 * to the one dispatcher (dispatch.h), told this node's instance; its effects come back as the actions.
 *
 * This is the top of agent mode (the caller of the IMDS and Kubernetes clients), so it logs what an
 * operator must see at info/warning: notices, actions that failed, IMDS going away and coming back. The
 * actions (agent_kube_actions, agent_engine_actions) are actions.c's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/hook.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/imds.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/surge.h"

#define ID_BACKOFF_BASE (200ULL * 1000ULL)

enum {
        PATH_INSTANCE_ACTION,
        PATH_LIFECYCLE,
        PATH_SCHEDULED,
        PATH_REBALANCE,
        /* Completed and canceled maintenance: a reboot drained for is undone once the node is back. */
        PATH_HISTORY,
        _PATH_MAX,
};

/* In the order the answers are acted on: an interruption first, so that a rebalance recommendation seen in
 * the same tick does not start a soft taint that the drain makes pointless. */
static const char *const poll_paths[_PATH_MAX] = {
        [PATH_INSTANCE_ACTION] = "spot/instance-action",
        [PATH_LIFECYCLE] = "autoscaling/target-lifecycle-state",
        [PATH_SCHEDULED] = "events/maintenance/scheduled",
        [PATH_REBALANCE] = "events/recommendations/rebalance",
        [PATH_HISTORY] = "events/maintenance/history",
};

enum {
        ID_INSTANCE,
        ID_HOSTNAME,
        ID_REGION,
        ID_GROUP, /* asked for only when a lifecycle hook is to be completed and agent.asg_name is unset */
        _ID_MAX,
};

static const char *const id_paths[_ID_MAX] = {
        [ID_INSTANCE] = "meta-data/instance-id",
        [ID_HOSTNAME] = "meta-data/local-hostname",
        [ID_REGION] = "meta-data/placement/region",
        [ID_GROUP] = "meta-data/tags/instance/aws:autoscaling:groupName",
};

struct slot {
        struct agent *agent;
        unsigned index;
        struct imds_get *get;
        int error;
        char *body;
        size_t len;
};

struct agent {
        struct loop *loop;
        struct imds_client *imds;
        struct kube_client *kube;
        struct agent_actions actions;
        void *actions_userdata;

        char *node, *instance_id, *region, *self_ns, *self_name;
        uint64_t interval, asg_deadline;
        /* agent.lifecycle_hook_name: NULL (nothing of the hook is made), or the hook, its group (from
         * agent.asg_name or IMDS at start) and the client of its calls, made at the first call. */
        char *hook_name, *asg_name, *asg_endpoint;
        struct agent_hook *hook;
        struct dispatch *dispatch; /* made once the node and instance are known */
        void (*on_ready)(struct agent *a, void *userdata);
        void (*on_tick)(struct agent *a, void *userdata);
        void *userdata;

        /* identity */
        struct slot id_slots[_ID_MAX];
        unsigned id_pending;
        struct timer *id_timer;
        struct backoff id_backoff;
        bool identified;
        struct kube_call *node_call;
        struct kube_call *refresh_call; /* the node, for the dispatcher (a reboot waited on) */
        struct drain_surge_sweep
            *surge_sweep; /* Deployments left raised for this node by a process before */

        /* polling */
        struct slot slots[_PATH_MAX];
        unsigned pending;
        struct timer *tick_timer;
        uint64_t tick_started;
        struct backoff backoff;
        bool started, ready, failing, hop_hint;
        int parse_failed[_PATH_MAX]; /* last notice_parse error per path, to warn once */

        struct agent_stats stats;
};

static void slot_clear(struct slot *s)
{
        s->get = imds_get_cancel(s->get);
        free(s->body);
        s->body = NULL;
        s->len = 0;
        s->error = 0;
}

static int slot_take(struct slot *s, const struct imds_reply *r)
{
        s->get = NULL;
        s->error = r->error;
        if (r->error == 0) {
                s->body = strndup(r->body, r->body_len);
                if (!s->body) {
                        s->error = -ENOMEM;
                        return -ENOMEM;
                }
                s->len = r->body_len;
        }
        return 0;
}

/* ---- actions ---- */

static void action_failed(struct agent *a, const char *what, int r)
{
        a->stats.action_errors++;
        log_full(LOG_ERR, r, (const char *[]){ "node", a->node, NULL }, "agent: %s of node %s failed", what,
                 a->node);
}

/* The dispatcher's effects on this node, through the actions. */
static int op_drain(void *userdata, const char *node, const struct notice *n, uint64_t deadline)
{
        struct agent *a = userdata;
        struct agent_drain_request req = {
                .node = a->node,
                .notice = n,
                .deadline_usec = deadline,
                .self_namespace = a->self_ns,
                .self_name = a->self_name,
                .imds_endpoint = imds_client_endpoint(a->imds),
        };
        char when[32] = "now";
        int r;

        if (!a->actions.drain)
                return 0;
        (void)format_rfc3339(req.deadline_usec, when, sizeof(when));
        log_full(LOG_NOTICE, 0,
                 (const char *[]){ "node", a->node, "kind", notice_kind_to_string(n->kind), NULL },
                 "agent: draining node %s by %s (%s)", a->node, when, notice_kind_to_string(n->kind));
        a->stats.drains++;
        r = a->actions.drain(a->actions_userdata, &req);
        if (r < 0)
                action_failed(a, "drain", r);
        return r;
}

static int op_soft_taint(void *userdata, const char *node, bool add)
{
        struct agent *a = userdata;
        int r;

        if (!add)
                log_info("agent: no interruption followed the rebalance recommendation; removing the soft "
                         "taint");
        if (a->actions.soft_taint && (r = a->actions.soft_taint(a->actions_userdata, a->node, add)) < 0) {
                action_failed(a, add ? "soft taint" : "removing the soft taint", r);
                return r;
        }
        return 0;
}

static int op_replacement(void *userdata, const char *node, const struct notice *n)
{
        struct agent *a = userdata;
        int r;

        if (a->actions.replacement_request &&
            (r = a->actions.replacement_request(a->actions_userdata, a->node, n)) < 0) {
                action_failed(a, "replacement request", r);
                return r;
        }
        return 0;
}

static int op_uncordon(void *userdata, const char *node)
{
        struct agent *a = userdata;
        int r;

        if (a->actions.uncordon && (r = a->actions.uncordon(a->actions_userdata, a->node)) < 0) {
                action_failed(a, "uncordon", r);
                return r;
        }
        return 0;
}

static void op_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        struct agent *a = userdata;
        _cleanup_free_ char *human = NULL;

        a->stats.notices++;
        if (n->kind < _NOTICE_KIND_MAX)
                a->stats.notice_counts[n->kind]++;
        (void)notice_format_human(n, &human);
        /* Said once: by the notice_seen action (an alert) when there is one, else here. */
        log_full(a->actions.notice_seen ? LOG_DEBUG : LOG_NOTICE, 0,
                 (const char *[]){ "node", a->node, "kind", notice_kind_to_string(n->kind), "event_id",
                                   n->event_id, NULL },
                 "agent: notice %s", human ? human : notice_kind_to_string(n->kind));
        if (a->actions.notice_seen)
                a->actions.notice_seen(a->actions_userdata, a->node, n);
}

static int op_cordon(void *userdata, const char *node)
{
        struct agent *a = userdata;
        int r;

        if (a->actions.cordon && (r = a->actions.cordon(a->actions_userdata, a->node)) < 0) {
                action_failed(a, "cordon", r);
                return r;
        }
        return 0;
}

static void on_refreshed(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct agent *a = userdata;

        a->refresh_call = NULL;
        if (r->error < 0)
                log_debug_errno(r->error, "agent: cannot read node %s: %s", a->node,
                                r->message ? r->message : "no message");
        else if (dispatch_node_seen(a->dispatch, r->object) < 0)
                log_debug("agent: the dispatcher cannot take node %s", a->node);
}

/* The dispatcher asks again every few seconds; one read at a time is enough for one node. */
static void op_node_refresh(void *userdata, const char *node)
{
        struct agent *a = userdata;
        _cleanup_free_ char *path = NULL;

        if (!a->kube || a->refresh_call)
                return;
        path = kube_path(NULL, "v1", NULL, "nodes", a->node, NULL);
        if (!path || kube_get(a->kube, path, on_refreshed, a, &a->refresh_call) < 0)
                log_debug("agent: cannot read node %s", a->node);
}

/* ---- the lifecycle hook (agent.lifecycle_hook_name) ---- */

static struct agent_hook *hook_get(struct agent *a)
{
        int r;

        if (!a->hook &&
            (r = agent_hook_new(a->loop,
                                &(struct agent_hook_options){ .region = a->region,
                                                              .imds_endpoint = imds_client_endpoint(a->imds),
                                                              .asg_endpoint = a->asg_endpoint,
                                                              .kube = a->kube,
                                                              .node = a->node },
                                &a->hook)) < 0)
                log_error_errno(r, "agent: cannot set up the lifecycle hook's calls");
        return a->hook;
}

static int lifecycle_call(struct agent *a, const struct notice *n, bool complete)
{
        struct agent_hook *h = hook_get(a);
        int r = complete ? agent_hook_complete(h, n) : agent_hook_heartbeat(h, n);

        if (r < 0)
                action_failed(a, complete ? "completing the lifecycle action" : "lifecycle heartbeat", r);
        return r;
}

static int op_lifecycle_heartbeat(void *userdata, const struct notice *n)
{
        return lifecycle_call(userdata, n, false);
}

static int op_lifecycle_complete(void *userdata, const struct notice *n)
{
        return lifecycle_call(userdata, n, true);
}

void agent_drain_ended(struct agent *a, bool drained)
{
        /* Only a hook to complete needs the dispatcher to know the drain is over; without one the node
         * stays draining to it, as it always has (a canceled maintenance still undoes the drain). */
        if (a && a->hook_name && a->identified)
                dispatch_drain_finished(a->dispatch, a->node, drained);
}

/* The IMDS state names no hook: it is the configured one, of this instance's group. */
static void lifecycle_name(const struct agent *a, struct notice *n)
{
        if (!a->hook_name || !a->asg_name || n->kind != NOTICE_ASG_LIFECYCLE_TERMINATE)
                return;
        snprintf(n->lifecycle_hook_name, sizeof(n->lifecycle_hook_name), "%s", a->hook_name);
        snprintf(n->asg_name, sizeof(n->asg_name), "%s", a->asg_name);
}

/* No drain_stop: the actions' uncordon stops a drain under way itself. */
static const struct dispatch_ops agent_dispatch_ops = {
        .drain = op_drain,
        .soft_taint = op_soft_taint,
        .replacement_request = op_replacement,
        .uncordon = op_uncordon,
        .cordon = op_cordon,
        .node_refresh = op_node_refresh,
        .notice_seen = op_notice_seen,
        .lifecycle_heartbeat = op_lifecycle_heartbeat,
        .lifecycle_complete = op_lifecycle_complete,
};

static void deliver(struct agent *a, const struct notice *n)
{
        int r = dispatch_submit(a->dispatch, n, DISPATCH_NO_TICKET, NULL);

        /* Acting twice is harmless (the actions are idempotent); the notice comes again on the next poll. */
        if (r < 0)
                log_warning_errno(r, "agent: cannot act on the %s notice, trying again on the next poll",
                                  notice_kind_to_string(n->kind));
}

static void process(struct agent *a, unsigned i)
{
        struct slot *s = &a->slots[i];
        _cleanup_free_ struct notice *ns = NULL;
        size_t n = 0;
        char reason[256] = "";
        int r;

        if (s->error == -ENOENT)
                return; /* nothing there: the normal answer */
        if (s->error < 0) {
                a->stats.path_errors++;
                log_debug_errno(s->error, "agent: GET %s failed", poll_paths[i]);
                return;
        }
        if ((i == PATH_SCHEDULED || i == PATH_HISTORY) && strspn(s->body, " \t\r\n") == s->len)
                return; /* an empty body: no events */

        r = notice_parse(s->body, s->len,
                         &(struct notice_parse_opts){
                             .source = "imds",
                             .instance_id = a->instance_id,
                             .region = a->region,
                             .imds_path = poll_paths[i],
                             .now_usec = clk_now(),
                             .asg_deadline_usec = a->asg_deadline,
                         },
                         &ns, &n, reason, sizeof(reason));
        if (r < 0) {
                a->stats.parse_errors++;
                if (a->parse_failed[i] != r)
                        log_warning_reason(r, reason,
                                           "agent: IMDS %s answered a document that cannot be read, "
                                           "ignoring it until the next poll",
                                           poll_paths[i]);
                a->parse_failed[i] = r;
                return;
        }
        a->parse_failed[i] = 0;
        for (size_t k = 0; k < n; k++)
                /* History holds every event of the last while: only a completed reboot still asks for
                 * something (its uncordon); the others would be told again at every start. */
                if (i != PATH_HISTORY || dispatch_notice_reboot_done(&ns[k])) {
                        lifecycle_name(a, &ns[k]);
                        deliver(a, &ns[k]);
                }
}

/* ---- poll loop ---- */

static void tick(void *userdata);

static void schedule_tick(struct agent *a, uint64_t at)
{
        int r = timer_start(a->loop, at, tick, a, &a->tick_timer);
        if (r < 0) {
                /* Without a timer the agent would go deaf: end the loop so that the pod restarts. */
                log_error_errno(r, "agent: cannot arm the poll timer");
                loop_exit(a->loop, 1);
        }
}

static void tick_finish(struct agent *a)
{
        unsigned answered = 0;
        uint64_t next;

        a->stats.ticks++;
        for (unsigned i = 0; i < _PATH_MAX; i++)
                if (a->slots[i].error == 0 || a->slots[i].error == -ENOENT)
                        answered++;
        for (unsigned i = 0; i < _PATH_MAX; i++)
                process(a, i);

        if (answered > 0) {
                if (a->failing)
                        log_info("agent: IMDS answers again");
                a->failing = false;
                a->stats.last_ok_usec = clk_now();
                backoff_reset(&a->backoff);
                next = a->tick_started + a->interval;
        } else {
                struct imds_stats st;
                imds_client_stats(a->imds, &st);
                a->stats.tick_errors++;
                if (!a->failing)
                        log_full(LOG_WARNING, a->slots[0].error, NULL,
                                 "agent: IMDS does not answer at %s, retrying with backoff",
                                 imds_client_endpoint(a->imds));
                if (st.last_token_error == -ETIMEDOUT && !a->hop_hint) {
                        log_warning("agent: IMDSv2 token requests time out: if this pod is not on the host "
                                    "network, the instance's metadata hop limit must be at least 2");
                        a->hop_hint = true;
                }
                a->failing = true;
                next = clk_now() + backoff_next(&a->backoff);
        }
        if (answered == _PATH_MAX && !a->ready) {
                a->ready = true;
                log_info("agent: polling IMDS every %.3g s for node %s (instance %s)",
                         (double)a->interval / 1e6, a->node, a->instance_id);
                if (a->on_ready)
                        a->on_ready(a, a->userdata);
        }
        for (unsigned i = 0; i < _PATH_MAX; i++)
                slot_clear(&a->slots[i]);
        schedule_tick(a, next);
        if (a->on_tick)
                a->on_tick(a, a->userdata);
}

static void on_poll_done(struct imds_client *c, const struct imds_reply *r, void *userdata)
{
        struct slot *s = userdata;
        struct agent *a = s->agent;

        (void)slot_take(s, r);
        if (--a->pending == 0)
                tick_finish(a);
}

static void tick(void *userdata)
{
        struct agent *a = userdata;
        unsigned failed = 0;

        a->tick_timer = NULL;
        a->tick_started = clk_now();
        a->pending = _PATH_MAX;
        /* All four at once: one slow path must not delay the others. */
        for (unsigned i = 0; i < _PATH_MAX; i++) {
                _cleanup_free_ char *path = strprintf("meta-data/%s", poll_paths[i]);
                struct slot *s = &a->slots[i];
                int r = path ? imds_get(a->imds, path, on_poll_done, s, &s->get) : -ENOMEM;
                if (r < 0) {
                        s->error = r;
                        failed++;
                }
        }
        a->pending -= failed;
        if (a->pending == 0)
                tick_finish(a);
}

/* ---- identity ---- */

static void identify(struct agent *a);

static void on_id_retry(void *userdata)
{
        struct agent *a = userdata;
        a->id_timer = NULL;
        identify(a);
}

static void on_node(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct agent *a = userdata;
        struct kube_node node = {};
        int res;

        a->node_call = NULL;
        if (r->error < 0) {
                log_full_reason(LOG_WARNING, r->error, r->message, (const char *[]){ "node", a->node, NULL },
                                "agent: cannot read node %s (is the node name right?)", a->node);
                return;
        }
        /* A drain recorded on the node before a restart carries on (the notice, still in IMDS, joins it). */
        res = dispatch_resume_recorded(a->dispatch, r->object);
        if (res >= 0)
                log_notice("agent: resuming the drain of node %s recorded before a restart", a->node);
        else if (res == -EBADMSG)
                log_warning("agent: node %s has an unreadable %s annotation, ignoring", a->node,
                            SPOTDRAIN_ANNOTATION_DRAIN);
        if (kube_node_parse(r->object, &node) < 0)
                return;
        if (node.instance_id && !streq(node.instance_id, a->instance_id))
                log_full(
                    LOG_WARNING, 0, (const char *[]){ "node", a->node, NULL },
                    "agent: node %s has providerID %s, which names instance %s, but IMDS says this is %s; "
                    "the agent may be reading another instance's metadata",
                    a->node, node.provider_id, node.instance_id, a->instance_id);
        kube_node_clear(&node);
}

static void identified(struct agent *a)
{
        _cleanup_free_ char *path = NULL;
        int r;

        a->identified = true;
        log_info("agent: node %s, instance %s, region %s", a->node, a->instance_id,
                 a->region ? a->region : "unknown");
        /* The dispatcher's one node: this instance is this node (the providerID check below only warns). */
        r = dispatch_node_set(a->dispatch, a->node, a->instance_id);
        if (r < 0) {
                log_error_errno(r, "agent: cannot hand node %s to the dispatcher", a->node);
                loop_exit(a->loop, 1);
                return;
        }
        if (a->kube) {
                path = kube_path(NULL, "v1", NULL, "nodes", a->node, NULL);
                r = path ? kube_get(a->kube, path, on_node, a, &a->node_call) : -ENOMEM;
                if (r < 0)
                        log_warning_errno(r, "agent: cannot check node %s's providerID, ignoring", a->node);
                r = a->surge_sweep ? 0 : drain_surge_sweep_new(a->kube, a->node, &a->surge_sweep);
                if (r < 0)
                        log_warning_errno(r, "agent: cannot look for deployments left surged, ignoring");
        }
        tick(a);
}

static void id_retry(struct agent *a)
{
        int err = a->id_slots[ID_INSTANCE].error   ? a->id_slots[ID_INSTANCE].error
                  : a->id_slots[ID_HOSTNAME].error ? a->id_slots[ID_HOSTNAME].error
                                                   : a->id_slots[ID_GROUP].error;
        int r;

        log_warning_errno(err ? err : -EBADMSG, "agent: cannot learn %s from IMDS at %s yet, retrying",
                          !a->instance_id ? "the instance ID"
                          : !a->node      ? "the node name"
                                          : "the Auto Scaling group",
                          imds_client_endpoint(a->imds));
        r = timer_start_in(a->loop, backoff_next(&a->id_backoff), on_id_retry, a, &a->id_timer);
        if (r < 0) {
                log_error_errno(r, "agent: cannot arm the identity retry");
                loop_exit(a->loop, 1);
        }
}

static char *first_word(const char *s, size_t len)
{
        size_t skip = strspn(s, " \t\r\n");
        size_t n = strcspn(s + skip, " \t\r\n");
        return n > 0 && skip + n <= len ? strndup(s + skip, n) : NULL;
}

/* The whole value without the blanks around it: a group's name may hold spaces. */
static char *trimmed(const char *s, size_t len)
{
        size_t skip = strspn(s, " \t\r\n");

        while (len > skip && strchr(" \t\r\n", s[len - 1]))
                len--;
        return len > skip ? strndup(s + skip, len - skip) : NULL;
}

static void on_id_done(struct imds_client *c, const struct imds_reply *r, void *userdata)
{
        struct slot *s = userdata;
        struct agent *a = s->agent;
        char **dst = s->index == ID_INSTANCE   ? &a->instance_id
                     : s->index == ID_HOSTNAME ? &a->node
                     : s->index == ID_GROUP    ? &a->asg_name
                                               : &a->region;

        s->get = NULL;
        if (r->error == 0) {
                char *w =
                    s->index == ID_GROUP ? trimmed(r->body, r->body_len) : first_word(r->body, r->body_len);
                if (w && (s->index != ID_INSTANCE || notice_instance_id_valid(w))) {
                        free(*dst);
                        *dst = w;
                } else {
                        free(w);
                        log_warning("agent: IMDS %s answered an unusable value", id_paths[s->index]);
                }
        } else if (s->index == ID_REGION && r->error == -ENOENT) {
                /* No region in IMDS: notices go without one. */
        } else if (s->index == ID_GROUP && r->error == -ENOENT) {
                /* Said now, not at the notice: the hook could never be completed. */
                log_error(
                    "agent: agent.lifecycle_hook_name is %s, but this instance's Auto Scaling group is "
                    "unknown: IMDS has no %s (instance metadata tags are off, or the instance is in no "
                    "group); set agent.asg_name or turn on instance metadata tags",
                    a->hook_name, id_paths[ID_GROUP]);
                loop_exit(a->loop, 1);
                return;
        } else
                s->error = r->error;
        if (--a->id_pending > 0)
                return;

        if (a->instance_id && a->node && (!a->hook_name || a->asg_name))
                identified(a);
        else
                id_retry(a);
}

static void identify(struct agent *a)
{
        bool want[_ID_MAX] = {
                [ID_INSTANCE] = !a->instance_id,
                [ID_HOSTNAME] = !a->node,
                [ID_REGION] = !a->region,
                [ID_GROUP] = a->hook_name && !a->asg_name,
        };
        unsigned n = 0, failed = 0;

        for (unsigned i = 0; i < _ID_MAX; i++)
                if (want[i])
                        n++;
        a->id_pending = n;
        for (unsigned i = 0; i < _ID_MAX; i++) {
                struct slot *s = &a->id_slots[i];
                int r;
                if (!want[i])
                        continue;
                s->error = 0;
                r = imds_get(a->imds, id_paths[i], on_id_done, s, &s->get);
                if (r < 0) {
                        s->error = r;
                        failed++;
                }
        }
        a->id_pending -= failed;
        if (n == 0)
                identified(a);
        else if (a->id_pending == 0)
                id_retry(a);
}

/* ---- life cycle ---- */

static int dup_or_env(const char *v, const char *env, char **ret)
{
        if (isempty(v))
                v = getenv(env);
        if (isempty(v))
                return 0;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

int agent_new(struct loop *l, struct imds_client *imds, struct kube_client *kube,
              const struct agent_options *o, const struct agent_actions *actions, void *actions_userdata,
              struct agent **ret)
{
        static const struct agent_options defaults = {};
        _cleanup_(agent_freep) struct agent *a = NULL;
        int r;

        if (!l || !imds || !ret)
                return -EINVAL;
        if (!o)
                o = &defaults;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->loop = l;
        a->imds = imds;
        a->kube = kube;
        if (actions)
                a->actions = *actions;
        a->actions_userdata = actions_userdata;
        a->interval = o->poll_interval_usec ? o->poll_interval_usec : AGENT_DEFAULT_POLL_USEC;
        a->backoff = BACKOFF_INIT(a->interval, o->backoff_max_usec ? o->backoff_max_usec
                                                                   : AGENT_DEFAULT_BACKOFF_MAX_USEC);
        a->id_backoff = BACKOFF_INIT(ID_BACKOFF_BASE, o->backoff_max_usec ? o->backoff_max_usec
                                                                          : AGENT_DEFAULT_BACKOFF_MAX_USEC);
        a->asg_deadline = o->asg_deadline_usec;
        if (!isempty(o->lifecycle_hook_name) &&
            (!(a->hook_name = strdup(o->lifecycle_hook_name)) ||
             (!isempty(o->asg_name) && !(a->asg_name = strdup(o->asg_name))) ||
             (o->asg_endpoint && !(a->asg_endpoint = strdup(o->asg_endpoint)))))
                return -ENOMEM;
        a->on_ready = o->on_ready;
        a->on_tick = o->on_tick;
        a->userdata = o->userdata;
        for (unsigned i = 0; i < _PATH_MAX; i++)
                a->slots[i] = (struct slot){ .agent = a, .index = i };
        for (unsigned i = 0; i < _ID_MAX; i++)
                a->id_slots[i] = (struct slot){ .agent = a, .index = i };
        if (dup_or_env(o->node_name, "NODE_NAME", &a->node) < 0 ||
            dup_or_env(o->self_namespace, "POD_NAMESPACE", &a->self_ns) < 0 ||
            dup_or_env(o->self_name, "POD_NAME", &a->self_name) < 0 ||
            (o->region && !(a->region = strdup(o->region))))
                return -ENOMEM;
        /* Deadlines the agent documents: the IMDS document's (an interruption without one is drained
         * at once). */
        struct dispatch_options dopt = o->dispatch;
        /* Before the hook's HeartbeatTimeout (agent.asg_deadline_seconds says what it is) runs out. */
        if (a->hook_name)
                dopt.heartbeat_usec =
                    o->heartbeat_interval_usec
                        ? o->heartbeat_interval_usec
                        : (a->asg_deadline ? a->asg_deadline : NOTICE_ASG_DEFAULT_DEADLINE_USEC) / 2;
        r = dispatch_new(l, &dopt, &agent_dispatch_ops, a, &a->dispatch);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

int agent_start(struct agent *a)
{
        if (!a)
                return -EINVAL;
        if (a->started)
                return -EALREADY;
        a->started = true;
        identify(a);
        return 0;
}

struct agent *agent_free(struct agent *a)
{
        if (!a)
                return NULL;
        for (unsigned i = 0; i < _PATH_MAX; i++)
                slot_clear(&a->slots[i]);
        for (unsigned i = 0; i < _ID_MAX; i++)
                slot_clear(&a->id_slots[i]);
        timer_cancel(a->tick_timer);
        timer_cancel(a->id_timer);
        kube_call_cancel(a->node_call);
        kube_call_cancel(a->refresh_call);
        drain_surge_sweep_free(a->surge_sweep);
        dispatch_free(a->dispatch);
        agent_hook_free(a->hook);
        free(a->hook_name);
        free(a->asg_name);
        free(a->asg_endpoint);
        free(a->node);
        free(a->instance_id);
        free(a->region);
        free(a->self_ns);
        free(a->self_name);
        free(a);
        return NULL;
}

const char *agent_node_name(const struct agent *a)
{
        return a->identified ? a->node : NULL;
}

const char *agent_instance_id(const struct agent *a)
{
        return a->instance_id;
}

bool agent_ready(const struct agent *a)
{
        return a->ready;
}

bool agent_settled(const struct agent *a)
{
        return a->ready && a->identified && !a->node_call &&
               (!a->surge_sweep || drain_surge_sweep_done(a->surge_sweep));
}

void agent_stats(const struct agent *a, struct agent_stats *ret)
{
        struct dispatch_stats st;

        dispatch_stats(a->dispatch, &st);
        *ret = a->stats;
        ret->duplicates = st.duplicates;
}
