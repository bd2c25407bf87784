/* controller.managed_tag at the controller's door: see managed.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/managed.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"

#define PARKED_MAX 256

struct entry {
        char id[NOTICE_INSTANCE_ID_SIZE];
        int state;         /* 1 carries the tag, 0 does not, -1 being looked up */
        uint64_t answered; /* engine clock */
};

struct lookup {
        struct managed_gate *g; /* NULL once the gate is freed: the answer is then dropped */
        char id[NOTICE_INSTANCE_ID_SIZE];
        struct backoff backoff;
        struct timer *retry;
        bool in_flight;
};

struct parked {
        struct sqs_message msg;
        char (*ids)[NOTICE_INSTANCE_ID_SIZE]; /* the instances it waits for */
        size_t n_ids;
        managed_resume_fn resume;
        void *userdata;
};

struct managed_gate {
        struct loop *loop;
        struct ec2_client *ec2;
        char *tag, *filter;
        struct entry *entries;
        size_t n_entries;
        struct lookup **lookups;
        size_t n_lookups;
        struct parked *parked;
        size_t n_parked;
        struct managed_stats stats;
};

int managed_tag_filter(const char *tag, char **ret)
{
        const char *eq = tag ? strchr(tag, '=') : NULL;
        char *f;

        if (isempty(tag) || eq == tag)
                return -EINVAL;
        f = eq ? strprintf("tag:%s", tag) : strprintf("tag-key=%s", tag);
        if (!f)
                return -ENOMEM;
        *ret = f;
        return 0;
}

int managed_gate_new(struct loop *l, struct ec2_client *ec2, const char *tag, struct managed_gate **ret)
{
        struct managed_gate *g;
        int r;

        if (!l || !ec2)
                return -EINVAL;
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->loop = l;
        g->ec2 = ec2;
        r = managed_tag_filter(tag, &g->filter);
        if (r < 0 || !(g->tag = strdup(tag))) {
                free(g->filter);
                free(g);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = g;
        return 0;
}

static void lookup_free(struct lookup *k)
{
        timer_cancel(k->retry);
        free(k);
}

static void parked_clear(struct parked *p)
{
        sqs_message_clear(&p->msg);
        free(p->ids);
}

struct managed_gate *managed_gate_free(struct managed_gate *g)
{
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n_lookups; i++) {
                if (g->lookups[i]->in_flight)
                        g->lookups[i]->g = NULL; /* its answer (or cancellation) frees it */
                else
                        lookup_free(g->lookups[i]);
        }
        for (size_t i = 0; i < g->n_parked; i++)
                parked_clear(&g->parked[i]);
        free(g->lookups);
        free(g->parked);
        free(g->entries);
        free(g->tag);
        free(g->filter);
        free(g);
        return NULL;
}

static struct entry *entry_find(struct managed_gate *g, const char *id)
{
        for (size_t i = 0; i < g->n_entries; i++)
                if (streq(g->entries[i].id, id))
                        return &g->entries[i];
        return NULL;
}

/* A new entry, in a free slot or in place of the oldest answer (never of one being looked up). */
static struct entry *entry_add(struct managed_gate *g, const char *id)
{
        struct entry *e = NULL;

        if (g->n_entries < MANAGED_SLOTS) {
                struct entry *v = realloc(g->entries, (g->n_entries + 1) * sizeof(*v));
                if (!v)
                        return NULL;
                g->entries = v;
                e = &v[g->n_entries++];
        } else
                for (size_t i = 0; i < g->n_entries; i++)
                        if (g->entries[i].state >= 0 && (!e || g->entries[i].answered < e->answered))
                                e = &g->entries[i];
        if (!e)
                return NULL;
        *e = (struct entry){ .state = -1 };
        snprintf(e->id, sizeof(e->id), "%s", id);
        return e;
}

static void lookup_remove(struct managed_gate *g, struct lookup *k)
{
        for (size_t i = 0; i < g->n_lookups; i++)
                if (g->lookups[i] == k) {
                        g->lookups[i] = g->lookups[--g->n_lookups];
                        break;
                }
        lookup_free(k);
}

/* Hands back every parked message that waited for id: error < 0 for a failed lookup, else once all its
 * instances are known. */
static void unpark(struct managed_gate *g, const char *id, int error)
{
        for (size_t i = 0; i < g->n_parked;) {
                struct parked *p = &g->parked[i];
                bool waits = false, ready = true;
                for (size_t k = 0; k < p->n_ids; k++) {
                        const struct entry *e = entry_find(g, p->ids[k]);
                        waits = waits || streq(p->ids[k], id);
                        ready = ready && e && e->state >= 0;
                }
                if (!waits || (error >= 0 && !ready)) {
                        i++;
                        continue;
                }
                struct parked done = *p;
                g->parked[i] = g->parked[--g->n_parked];
                free(done.ids);
                done.resume(done.userdata, &done.msg, error);
        }
}

static int lookup_send(struct lookup *k);

static void lookup_retry(void *userdata)
{
        struct lookup *k = userdata;
        struct managed_gate *g = k->g;
        char id[NOTICE_INSTANCE_ID_SIZE];
        struct entry *e;

        k->retry = NULL;
        if (lookup_send(k) >= 0)
                return;
        snprintf(id, sizeof(id), "%s", k->id);
        if ((e = entry_find(g, id)))
                *e = g->entries[--g->n_entries];
        lookup_remove(g, k);
        g->stats.failures++;
        unpark(g, id, -EIO);
}

static bool retryable(const struct ec2_result *res)
{
        return res->status == 0 ||
               aws_error_class_retryable(aws_error_classify(res->code, res->status, NULL));
}

static void lookup_answer(const struct ec2_result *res, const struct ec2_instance *v, size_t n,
                          void *userdata)
{
        struct lookup *k = userdata;
        struct managed_gate *g = k->g;
        char id[NOTICE_INSTANCE_ID_SIZE];
        struct entry *e;
        int state;

        k->in_flight = false;
        if (!g) {
                lookup_free(k); /* the gate is gone */
                return;
        }
        if (res->error < 0 && res->error != -ECANCELED && retryable(res) &&
            k->backoff.attempt < MANAGED_ATTEMPTS) {
                g->stats.retries++;
                if (timer_start_in(g->loop, backoff_next(&k->backoff), lookup_retry, k, &k->retry) >= 0)
                        return;
        }
        snprintf(id, sizeof(id), "%s", k->id);
        lookup_remove(g, k);
        e = entry_find(g, id);
        /* Listed under the tag's filter: it carries it. No such instance carries nothing. */
        if (res->error >= 0)
                state = n > 0 && streq(v[0].instance_id, id);
        else if (streq(res->code, "InvalidInstanceID.NotFound"))
                state = 0;
        else
                state = res->error;
        if (state < 0) {
                if (e)
                        *e = g->entries[--g->n_entries];
                g->stats.failures++;
                log_warning("cannot tell whether instance %s carries the tag %s: %s%s%s", id, g->tag,
                            res->code, res->code[0] ? ": " : "", res->message);
                unpark(g, id, state);
                return;
        }
        if (e) {
                e->state = state;
                e->answered = clk_now();
        }
        if (state)
                g->stats.managed++;
        else
                g->stats.unmanaged++;
        unpark(g, id, 0);
}

static int lookup_send(struct lookup *k)
{
        const char *ids[] = { k->id, NULL }, *filters[] = { k->g->filter, NULL };
        int r = ec2_describe_instances(k->g->ec2, ids, filters, lookup_answer, k);

        if (r >= 0) {
                k->in_flight = true;
                k->g->stats.lookups++;
        }
        return r;
}

static int lookup_start(struct managed_gate *g, const char *id)
{
        struct lookup **v, *k;
        struct entry *e;
        int r;

        v = realloc(g->lookups, (g->n_lookups + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        g->lookups = v;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        *k = (struct lookup){ .g = g, .backoff = BACKOFF_INIT(MANAGED_BACKOFF_USEC, 20 * 1000000ULL) };
        snprintf(k->id, sizeof(k->id), "%s", id);
        e = entry_add(g, id);
        if (!e) {
                free(k);
                return -ENOMEM;
        }
        r = lookup_send(k);
        if (r < 0) {
                *e = g->entries[--g->n_entries];
                free(k);
                return r;
        }
        g->lookups[g->n_lookups++] = k;
        return 0;
}

enum managed_verdict managed_gate_check(struct managed_gate *g, struct sqs_message *msg,
                                        const struct notice *v, size_t n, managed_resume_fn resume,
                                        void *userdata, char *why, size_t why_size)
{
        _cleanup_free_ char(*wait)[NOTICE_INSTANCE_ID_SIZE] = NULL;
        size_t n_wait = 0;
        uint64_t now = clk_now();

        for (size_t i = 0; i < n; i++) {
                const char *id = v[i].instance_id;
                struct entry *e;
                if (isempty(id))
                        continue; /* an Auto Scaling test notification names no instance */
                e = entry_find(g, id);
                if (e && e->state >= 0 && now - e->answered >= MANAGED_KEEP_USEC)
                        e->state = -2; /* stale: asked again below */
                if (e && e->state == 0) {
                        snprintf(why, why_size,
                                 "instance %s does not carry the tag %s (controller.managed_tag)", id,
                                 g->tag);
                        return MANAGED_REFUSE;
                }
                if (e && e->state == 1)
                        continue;
                if (!e || e->state == -2) {
                        if (e)
                                *e = g->entries[--g->n_entries];
                        if (lookup_start(g, id) < 0) {
                                snprintf(why, why_size, "cannot look instance %s up", id);
                                return MANAGED_RETRY;
                        }
                }
                char(*w)[NOTICE_INSTANCE_ID_SIZE] = realloc(wait, (n_wait + 1) * sizeof(*w));
                if (!w) {
                        snprintf(why, why_size, "out of memory");
                        return MANAGED_RETRY;
                }
                wait = w;
                snprintf(wait[n_wait++], sizeof(*wait), "%s", id);
        }
        if (n_wait == 0)
                return MANAGED_PASS;
        if (g->n_parked >= PARKED_MAX) {
                snprintf(why, why_size, "too many messages wait for their instances' tags");
                return MANAGED_RETRY;
        }
        struct parked *p = realloc(g->parked, (g->n_parked + 1) * sizeof(*p));
        if (!p) {
                snprintf(why, why_size, "out of memory");
                return MANAGED_RETRY;
        }
        g->parked = p;
        g->parked[g->n_parked++] = (struct parked){
                .msg = *msg, .ids = TAKE_PTR(wait), .n_ids = n_wait, .resume = resume, .userdata = userdata
        };
        *msg = (struct sqs_message){ 0 };
        return MANAGED_PARKED;
}

void managed_gate_stats(const struct managed_gate *g, struct managed_stats *ret)
{
        *ret = g ? g->stats : (struct managed_stats){};
}
