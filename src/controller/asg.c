/* controller/asg: which Auto Scaling groups are this cluster's (the kubernetes.io/cluster/NAME tag) and the
 * hooks' own timeouts (DescribeLifecycleHooks), both cached, over the one Auto Scaling client (asg.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"

/* ---- which groups are this cluster's: the kubernetes.io/cluster/NAME tag ---- */

int asg_group_tagged(const char *body, size_t len, const char *group, const char *cluster)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        _cleanup_free_ char *key = strprintf("%s%s", ASG_CLUSTER_TAG_PREFIX, cluster ? cluster : "");
        const struct awsxml_node *groups;

        if (!key)
                return -ENOMEM;
        if (isempty(group) || isempty(cluster))
                return -EINVAL;
        if (awsxml_parse(body ? body : "", body ? len : 0, &x, NULL) < 0)
                return -EBADMSG;
        groups = awsxml_find(awsxml_root(x), "DescribeAutoScalingGroupsResult/AutoScalingGroups");
        if (!groups)
                return -EBADMSG;
        AWSXML_FOREACH(g, groups, "member")
        {
                if (!streq(awsxml_find_text(g, "AutoScalingGroupName"), group))
                        continue;
                /* Any value: "owned" and "shared" both say the group belongs to the cluster. */
                AWSXML_FOREACH(t, awsxml_child(g, "Tags"), "member")
                if (streq(awsxml_find_text(t, "Key"), key))
                        return 1;
                return 0;
        }
        return 0; /* no such group (any more): not this cluster's */
}

struct owner_waiter {
        asg_owned_fn done;
        void *userdata;
};

struct owner_entry {
        char *group;
        int owned;                   /* 1, 0; -1 while unknown */
        uint64_t checked_usec;       /* when the answer came (engine clock) */
        struct owner_lookup *lookup; /* in flight, or waiting to retry */
        struct owner_waiter *waiters;
        size_t n_waiters;
};

/* One DescribeAutoScalingGroups for one group, retried with backoff while the answer is retryable. */
struct owner_lookup {
        struct asg_owners *owners; /* NULL once the cache is freed: the answer is then dropped */
        struct owner_entry *entry;
        struct backoff backoff;
        struct timer *retry;
        bool in_flight;
};

struct asg_owners {
        struct loop *loop;
        struct asg_client *asg;
        char *cluster;
        struct owner_entry **entries;
        size_t n_entries;
        struct asg_owners_stats stats;
};

int asg_owners_new(struct loop *l, struct asg_client *c, const char *cluster, struct asg_owners **ret)
{
        struct asg_owners *o;

        if (!l || !c || isempty(cluster))
                return -EINVAL;
        o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        o->loop = l;
        o->asg = c;
        o->cluster = strdup(cluster);
        if (!o->cluster) {
                free(o);
                return -ENOMEM;
        }
        *ret = o;
        return 0;
}

static void lookup_free(struct owner_lookup *k)
{
        timer_cancel(k->retry);
        free(k);
}

/* Tells every waiter the verdict (1, 0, or an error) and forgets them. */
static void entry_answer(struct owner_entry *e, int verdict)
{
        struct owner_waiter *w = e->waiters;
        size_t n = e->n_waiters;

        e->waiters = NULL;
        e->n_waiters = 0;
        for (size_t i = 0; i < n; i++)
                w[i].done(verdict, w[i].userdata);
        free(w);
}

struct asg_owners *asg_owners_free(struct asg_owners *o)
{
        if (!o)
                return NULL;
        for (size_t i = 0; i < o->n_entries; i++) {
                struct owner_entry *e = o->entries[i];
                if (e->lookup) {
                        if (e->lookup->in_flight)
                                e->lookup->owners = NULL; /* its answer (or cancellation) frees it */
                        else
                                lookup_free(e->lookup);
                }
                entry_answer(e, -ECANCELED);
                free(e->group);
                free(e);
        }
        free(o->entries);
        free(o->cluster);
        free(o);
        return NULL;
}

static int lookup_send(struct owner_lookup *k);

static void lookup_retry(void *userdata)
{
        struct owner_lookup *k = userdata;

        k->retry = NULL;
        if (lookup_send(k) < 0) {
                struct owner_entry *e = k->entry;
                e->lookup = NULL;
                lookup_free(k);
                entry_answer(e, -EIO);
        }
}

static void lookup_answer(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct owner_lookup *k = userdata;
        struct asg_owners *o = k->owners;
        struct owner_entry *e = k->entry;
        int verdict;

        k->in_flight = false;
        if (!o) {
                lookup_free(k); /* the cache is gone */
                return;
        }
        if (res->error < 0 && aws_error_class_retryable(res->cls) &&
            k->backoff.attempt < ASG_OWNERS_ATTEMPTS) {
                o->stats.retries++;
                if (timer_start_in(o->loop, backoff_next(&k->backoff), lookup_retry, k, &k->retry) >= 0)
                        return;
        }
        verdict = res->error < 0 ? res->error : asg_group_tagged(body, len, e->group, o->cluster);
        e->lookup = NULL;
        lookup_free(k);
        if (verdict >= 0) {
                e->owned = verdict;
                e->checked_usec = clk_now();
        } else {
                o->stats.failures++;
                log_warning_errno(verdict,
                                  "cannot tell whether Auto Scaling group %s is this cluster's: %s%s%s",
                                  e->group, res->code, res->code[0] ? ": " : "", res->message);
        }
        entry_answer(e, verdict);
}

static int lookup_send(struct owner_lookup *k)
{
        struct buf b = {};
        int r;

        r = aws_form_add(&b, "Action", "DescribeAutoScalingGroups");
        r = r ?: aws_form_add(&b, "Version", ASG_API_VERSION);
        r = r ?: aws_form_add(&b, "AutoScalingGroupNames.member.1", k->entry->group);
        r = r ?: buf_append(&b, "", 1);
        if (r >= 0) {
                r = asg_call(k->owners->asg, b.data, lookup_answer, k);
                if (r >= 0) {
                        k->in_flight = true;
                        k->owners->stats.lookups++;
                }
        }
        buf_free(&b);
        return r;
}

static struct owner_entry *entry_get(struct asg_owners *o, const char *group)
{
        struct owner_entry **v, *e;

        for (size_t i = 0; i < o->n_entries; i++)
                if (streq(o->entries[i]->group, group))
                        return o->entries[i];
        v = realloc(o->entries, (o->n_entries + 1) * sizeof(*v));
        if (!v)
                return NULL;
        o->entries = v;
        e = calloc(1, sizeof(*e));
        if (!e || !(e->group = strdup(group))) {
                free(e);
                return NULL;
        }
        e->owned = -1;
        o->entries[o->n_entries++] = e;
        return e;
}

int asg_owners_check(struct asg_owners *o, const char *group, asg_owned_fn done, void *userdata)
{
        struct owner_entry *e;
        struct owner_waiter *w;
        int r;

        if (!o || isempty(group) || !done)
                return -EINVAL;
        e = entry_get(o, group);
        if (!e)
                return -ENOMEM;
        if (e->owned >= 0 && clk_now() - e->checked_usec < ASG_OWNERS_TTL_USEC) {
                o->stats.cached++;
                return e->owned;
        }
        w = realloc(e->waiters, (e->n_waiters + 1) * sizeof(*w));
        if (!w)
                return -ENOMEM;
        e->waiters = w;
        if (!e->lookup) {
                struct owner_lookup *k = calloc(1, sizeof(*k));
                if (!k)
                        return -ENOMEM;
                *k = (struct owner_lookup){ .owners = o,
                                            .entry = e,
                                            .backoff =
                                                BACKOFF_INIT(ASG_OWNERS_BACKOFF_USEC, 20 * 1000000ULL) };
                r = lookup_send(k);
                if (r < 0) {
                        free(k);
                        return r;
                }
                e->lookup = k;
        }
        w[e->n_waiters++] = (struct owner_waiter){ .done = done, .userdata = userdata };
        return -EINPROGRESS;
}

void asg_owners_stats(const struct asg_owners *o, struct asg_owners_stats *ret)
{
        *ret = o ? o->stats : (struct asg_owners_stats){};
}

/* ---- the hooks' own timeouts: DescribeLifecycleHooks, one per group and hook ---- */

int asg_hook_timeouts(const char *body, size_t len, const char *hook, uint64_t *ret_heartbeat_usec,
                      uint64_t *ret_global_usec)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        const struct awsxml_node *hooks;

        if (isempty(hook))
                return -EINVAL;
        if (awsxml_parse(body ? body : "", body ? len : 0, &x, NULL) < 0)
                return -EBADMSG;
        hooks = awsxml_find(awsxml_root(x), "DescribeLifecycleHooksResult/LifecycleHooks");
        if (!hooks)
                return -EBADMSG;
        AWSXML_FOREACH(h, hooks, "member")
        {
                const char *hb, *global;
                char *end = NULL;
                unsigned long long s, g = 0;

                if (!streq(awsxml_find_text(h, "LifecycleHookName"), hook))
                        continue;
                hb = awsxml_find_text(h, "HeartbeatTimeout");
                global = awsxml_find_text(h, "GlobalTimeout");
                if (isempty(hb))
                        return -EBADMSG;
                errno = 0;
                s = strtoull(hb, &end, 10);
                if (errno || *end || s == 0 || s > 7200)
                        return -EBADMSG;
                if (!isempty(global)) {
                        g = strtoull(global, &end, 10);
                        if (errno || *end)
                                return -EBADMSG;
                }
                *ret_heartbeat_usec = s * 1000000ULL;
                /* Absent: Auto Scaling's rule, min(100 x HeartbeatTimeout, 48 h). */
                *ret_global_usec = (g ? g : (s * 100 < 172800 ? s * 100 : 172800)) * 1000000ULL;
                return 0;
        }
        return -ENOENT;
}

struct hook_entry {
        struct asg_hooks *hooks; /* NULL once the cache is freed: the answer is then dropped */
        char *group, *hook;
        uint64_t heartbeat_usec, global_usec; /* 0 while unknown */
        struct backoff backoff;
        struct timer *retry;
        bool in_flight, failed;
};

struct asg_hooks {
        struct loop *loop;
        struct asg_client *asg;
        asg_hooks_fn changed;
        void *userdata;
        struct hook_entry **entries;
        size_t n_entries;
};

int asg_hooks_new(struct loop *l, struct asg_client *c, asg_hooks_fn changed, void *userdata,
                  struct asg_hooks **ret)
{
        struct asg_hooks *h;

        if (!l || !c || !ret)
                return -EINVAL;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        *h = (struct asg_hooks){ .loop = l, .asg = c, .changed = changed, .userdata = userdata };
        *ret = h;
        return 0;
}

static void hook_entry_free(struct hook_entry *e)
{
        timer_cancel(e->retry);
        free(e->group);
        free(e->hook);
        free(e);
}

struct asg_hooks *asg_hooks_free(struct asg_hooks *h)
{
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->n_entries; i++) {
                struct hook_entry *e = h->entries[i];
                if (e->in_flight) {
                        e->hooks = NULL; /* its answer (or cancellation) frees it */
                        e->retry = timer_cancel(e->retry);
                } else
                        hook_entry_free(e);
        }
        free(h->entries);
        free(h);
        return NULL;
}

static int hook_send(struct hook_entry *e);

static void hook_retry(void *userdata)
{
        struct hook_entry *e = userdata;

        e->retry = NULL;
        if (hook_send(e) < 0) {
                e->failed = true;
                if (e->hooks->changed)
                        e->hooks->changed(e->hooks->userdata);
        }
}

static void hook_answer(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct hook_entry *e = userdata;
        struct asg_hooks *h = e->hooks;
        int r;

        e->in_flight = false;
        if (!h) {
                hook_entry_free(e);
                return;
        }
        if (res->error < 0 && aws_error_class_retryable(res->cls) &&
            e->backoff.attempt < ASG_OWNERS_ATTEMPTS &&
            timer_start_in(h->loop, backoff_next(&e->backoff), hook_retry, e, &e->retry) >= 0)
                return;
        r = res->error < 0 ? res->error
                           : asg_hook_timeouts(body, len, e->hook, &e->heartbeat_usec, &e->global_usec);
        if (r < 0) {
                e->failed = true;
                log_warning_errno(
                    r, "cannot read the HeartbeatTimeout of lifecycle hook %s of group %s: %s%s%s", e->hook,
                    e->group, res->code, res->code[0] ? ": " : "", res->message);
        } else
                log_info("lifecycle hook %s of group %s: HeartbeatTimeout %llu s, GlobalTimeout %llu s",
                         e->hook, e->group, (unsigned long long)(e->heartbeat_usec / 1000000ULL),
                         (unsigned long long)(e->global_usec / 1000000ULL));
        if (h->changed)
                h->changed(h->userdata);
}

static int hook_send(struct hook_entry *e)
{
        struct buf b = {};
        int r;

        r = aws_form_add(&b, "Action", "DescribeLifecycleHooks");
        r = r ?: aws_form_add(&b, "Version", ASG_API_VERSION);
        r = r ?: aws_form_add(&b, "AutoScalingGroupName", e->group);
        r = r ?: aws_form_add(&b, "LifecycleHookNames.member.1", e->hook);
        r = r ?: buf_append(&b, "", 1);
        if (r >= 0) {
                r = asg_call(e->hooks->asg, b.data, hook_answer, e);
                if (r >= 0)
                        e->in_flight = true;
        }
        buf_free(&b);
        return r;
}

int asg_hooks_get(struct asg_hooks *h, const char *group, const char *hook, uint64_t *ret_heartbeat_usec,
                  uint64_t *ret_global_usec)
{
        struct hook_entry **v, *e = NULL;
        int r;

        if (!h || isempty(group) || isempty(hook))
                return -EINVAL;
        for (size_t i = 0; i < h->n_entries && !e; i++)
                if (streq(h->entries[i]->group, group) && streq(h->entries[i]->hook, hook))
                        e = h->entries[i];
        if (e) {
                if (e->heartbeat_usec) {
                        *ret_heartbeat_usec = e->heartbeat_usec;
                        if (ret_global_usec)
                                *ret_global_usec = e->global_usec;
                        return 0;
                }
                if (!e->failed || e->in_flight || e->retry)
                        return -EINPROGRESS;
                /* Failed before: asked again (a permission may have been granted since). */
                e->failed = false;
                backoff_reset(&e->backoff);
                r = hook_send(e);
                if (r < 0) {
                        e->failed = true;
                        return r;
                }
                return -EINPROGRESS;
        }
        v = realloc(h->entries, (h->n_entries + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        h->entries = v;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        *e = (struct hook_entry){ .hooks = h,
                                  .group = strdup(group),
                                  .hook = strdup(hook),
                                  .backoff = BACKOFF_INIT(ASG_OWNERS_BACKOFF_USEC, 20 * 1000000ULL) };
        if (!e->group || !e->hook) {
                hook_entry_free(e);
                return -ENOMEM;
        }
        h->entries[h->n_entries++] = e;
        r = hook_send(e);
        if (r < 0) {
                e->failed = true;
                return r;
        }
        return -EINPROGRESS;
}
