/* The dispatcher: providerID index from node events, one drain per node, upgrades, duplicates,
 * unknown instances retried then dropped, lifecycle hooks. Effects are recorded by fake ops. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/notice.h"

#define SEC        UINT64_C(1000000)
#define REAL_BOUND (10 * SEC)
#define MAX_LOG    64

struct fx {
        struct loop *loop;
        struct dispatch *d;
        char log[MAX_LOG][128]; /* "drain spot-a spot-interruption", "ticket 3 0", ... */
        size_t n_log;
        uint64_t last_deadline;
        bool ticket_seen;
        uint64_t interval; /* what op_interval answers */
        uint64_t granted;  /* what op_granted answers */
};

static void record(struct fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record(struct fx *f, const char *fmt, ...)
{
        va_list ap;
        assert_true(f->n_log < MAX_LOG);
        va_start(ap, fmt);
        vsnprintf(f->log[f->n_log++], sizeof(f->log[0]), fmt, ap);
        va_end(ap);
}

static size_t count(const struct fx *f, const char *prefix)
{
        size_t n = 0;
        for (size_t i = 0; i < f->n_log; i++)
                n += startswith(f->log[i], prefix);
        return n;
}

static int op_drain(void *ud, const char *node, const struct notice *n, uint64_t deadline)
{
        struct fx *f = ud;
        f->last_deadline = deadline;
        record(f, "drain %s %s", node, notice_kind_to_string(n->kind));
        return 0;
}

static void op_drain_stop(void *ud, const char *node)
{
        record(ud, "stop %s", node);
}

static int op_soft_taint(void *ud, const char *node, bool add)
{
        record(ud, "%s %s", add ? "taint" : "untaint", node);
        return 0;
}

static int op_uncordon(void *ud, const char *node)
{
        record(ud, "uncordon %s", node);
        return 0;
}

static void op_notice_seen(void *ud, const char *node, const struct notice *n)
{
        record(ud, "seen %s %s", node ? node : "-", notice_kind_to_string(n->kind));
}

static int op_cordon(void *ud, const char *node)
{
        record(ud, "cordon %s", node);
        return 0;
}

static void op_node_refresh(void *ud, const char *node)
{
        record(ud, "refresh %s", node);
}

static int op_replacement(void *ud, const char *node, const struct notice *n)
{
        record(ud, "replace %s", node);
        return 0;
}

/* An action by its token, or (the agent's IMDS state) by its group, hook and instance. */
static int op_heartbeat(void *ud, const struct notice *n)
{
        if (n->lifecycle_action_token[0])
                record(ud, "heartbeat %s", n->lifecycle_action_token);
        else
                record(ud, "heartbeat %s/%s/%s", n->asg_name, n->lifecycle_hook_name, n->instance_id);
        return 0;
}

static int op_complete(void *ud, const struct notice *n)
{
        if (n->lifecycle_action_token[0])
                record(ud, "complete %s", n->lifecycle_action_token);
        else
                record(ud, "complete %s/%s/%s", n->asg_name, n->lifecycle_hook_name, n->instance_id);
        return 0;
}

static void op_ticket_done(void *ud, uint64_t ticket, int error)
{
        struct fx *f = ud;
        f->ticket_seen = true;
        record(f, "ticket %" PRIu64 " %d", ticket, error);
}

static const struct dispatch_ops ops = {
        .drain = op_drain,
        .drain_stop = op_drain_stop,
        .soft_taint = op_soft_taint,
        .replacement_request = op_replacement,
        .uncordon = op_uncordon,
        .cordon = op_cordon,
        .node_refresh = op_node_refresh,
        .notice_seen = op_notice_seen,
        .lifecycle_heartbeat = op_heartbeat,
        .lifecycle_complete = op_complete,
        .ticket_done = op_ticket_done,
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(dispatch_new(f->loop,
                                      &(struct dispatch_options){ .unknown_retry_usec = 50 * 1000,
                                                                  .heartbeat_usec = 20 * 1000,
                                                                  .rebalance_revert_usec = 60 * 1000,
                                                                  .maintenance_lead_usec = SEC },
                                      &ops, f, &f->d),
                         0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        dispatch_free(f->d);
        loop_free(f->loop);
        free(f);
        return 0;
}

static cJSON *node_obj(const char *name, const char *provider_id)
{
        cJSON *o = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(o, "metadata"),
              *spec = cJSON_AddObjectToObject(o, "spec");
        cJSON_AddStringToObject(meta, "name", name);
        if (provider_id)
                cJSON_AddStringToObject(spec, "providerID", provider_id);
        return o;
}

static void add_node(struct fx *f, const char *name, const char *provider_id)
{
        cJSON *o = node_obj(name, provider_id);
        assert_int_equal(dispatch_node_update(f->d, o), 0);
        cJSON_Delete(o);
}

static struct notice mk(enum notice_kind k, const char *instance, const char *event_id, uint64_t deadline)
{
        struct notice n = { .kind = k, .notice_time = clk_now(), .deadline = deadline };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", instance);
        snprintf(n.event_id, sizeof(n.event_id), "%s", event_id);
        snprintf(n.source, sizeof(n.source), "sqs");
        return n;
}

static int submit(struct fx *f, const struct notice *n, uint64_t ticket)
{
        uint64_t defer = 0;
        return dispatch_submit(f->d, n, ticket, &defer);
}

static void test_provider_id_parsing(void **state)
{
        assert_string_equal(dispatch_instance_from_provider_id("aws:///us-east-1a/i-0abcd1234ef567890"),
                            "i-0abcd1234ef567890");
        assert_string_equal(dispatch_instance_from_provider_id("aws:///i-0abcd1234"), "i-0abcd1234");
        assert_null(dispatch_instance_from_provider_id("gce://project/zone/vm-1"));
        assert_null(dispatch_instance_from_provider_id("aws:///us-east-1a/not-an-instance"));
        assert_null(dispatch_instance_from_provider_id(NULL));
}

static void test_index_follows_node_events(void **state)
{
        struct fx *f = *state;
        struct dispatch_stats st;

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        add_node(f, "kind-node", "kind://docker/kind/kind-node");
        assert_string_equal(dispatch_node_for_instance(f->d, "i-0a00000000000000a"), "spot-a");
        assert_string_equal(dispatch_node_for_instance(f->d, "i-0b00000000000000b"), "spot-b");
        dispatch_stats(f->d, &st);
        assert_int_equal(st.nodes_indexed, 2);

        /* A node's providerID changing (modified event) moves the entry; a delete removes it. */
        add_node(f, "spot-a", "aws:///us-east-1a/i-0c00000000000000c");
        assert_null(dispatch_node_for_instance(f->d, "i-0a00000000000000a"));
        assert_string_equal(dispatch_node_for_instance(f->d, "i-0c00000000000000c"), "spot-a");
        cJSON *o = node_obj("spot-b", NULL);
        dispatch_node_delete(f->d, o);
        cJSON_Delete(o);
        assert_null(dispatch_node_for_instance(f->d, "i-0b00000000000000b"));
}

static void test_rebalance_then_interruption_upgrades(void **state)
{
        struct fx *f = *state;
        struct notice reb = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-reb", 0);
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", clk_now() + 120 * SEC);
        struct dispatch_stats st;

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        /* A rebalance is acted on at once: soft taint and a replacement, no drain, message deletable. */
        assert_int_equal(submit(f, &reb, 1), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 1);
        assert_int_equal(count(f, "replace spot-a"), 1);
        assert_int_equal(count(f, "drain"), 0);

        /* The interruption upgrades it to a drain, held until the drain ends. */
        assert_int_equal(submit(f, &spot, 2), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a spot-interruption"), 1);
        assert_true(dispatch_node_draining(f->d, "spot-a"));
        assert_int_equal(dispatch_node_deadline(f->d, "spot-a"), spot.deadline);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.upgrades, 1);
        assert_int_equal(st.draining, 1);

        /* A rebalance arriving now adds nothing. */
        struct notice reb2 = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-reb2", 0);
        assert_int_equal(submit(f, &reb2, 3), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 1);

        dispatch_drain_finished(f->d, "spot-a", true);
        assert_int_equal(count(f, "ticket 2 0"), 1);
        assert_false(dispatch_node_draining(f->d, "spot-a"));

        /* A state change of the finished instance needs nothing. */
        struct notice st_change = mk(NOTICE_STATE_CHANGE, "i-0a00000000000000a", "ev-state", clk_now());
        assert_int_equal(submit(f, &st_change, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "drain"), 1);
}

static void test_one_drain_per_node_earlier_deadline_restarts(void **state)
{
        struct fx *f = *state;
        uint64_t now = clk_now();
        struct notice asg =
            mk(NOTICE_ASG_LIFECYCLE_TERMINATE, "i-0a00000000000000a", "ev-asg", now + 3600 * SEC);
        struct notice spot = mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", now + 120 * SEC);
        struct notice late = mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-late", now + 600 * SEC);

        snprintf(asg.lifecycle_action_token, sizeof(asg.lifecycle_action_token), "tok-1");
        snprintf(asg.asg_name, sizeof(asg.asg_name), "group");
        snprintf(asg.lifecycle_hook_name, sizeof(asg.lifecycle_hook_name), "hook");
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");

        assert_int_equal(submit(f, &asg, 1), DISPATCH_PENDING);
        assert_int_equal(f->last_deadline, asg.deadline);
        /* The spot warning's earlier deadline wins: the drain is restarted against it. */
        assert_int_equal(submit(f, &spot, 2), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a"), 2);
        assert_int_equal(dispatch_node_deadline(f->d, "spot-a"), spot.deadline);
        /* A later deadline joins the drain under way without restarting it. */
        assert_int_equal(submit(f, &late, 3), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a"), 2);
        assert_int_equal(dispatch_node_deadline(f->d, "spot-a"), spot.deadline);

        /* Heartbeats while the drain runs. */
        bool never = false;
        for (int i = 0; i < 200 && count(f, "heartbeat tok-1") < 2; i++)
                loop_run_until(f->loop, &never, 5 * 1000);
        assert_true(count(f, "heartbeat tok-1") >= 2);

        dispatch_drain_finished(f->d, "spot-a", true);
        assert_int_equal(count(f, "complete tok-1"), 1);
        assert_int_equal(count(f, "ticket 1 0"), 1);
        assert_int_equal(count(f, "ticket 2 0"), 1);
        assert_int_equal(count(f, "ticket 3 0"), 1);
        size_t beats = count(f, "heartbeat");
        for (int i = 0; i < 5; i++)
                loop_run_until(f->loop, &never, 5 * 1000);
        assert_int_equal(count(f, "heartbeat"), beats);
}

/* The agent's IMDS target-lifecycle-state names no token: with the hook and group the agent was told, the
 * action is heartbeated and completed by its instance; without them nothing is sent. */
static void test_lifecycle_by_instance(void **state)
{
        struct fx *f = *state;
        struct notice bare =
            mk(NOTICE_ASG_LIFECYCLE_TERMINATE, "i-0a00000000000000a", "imds:lc:a", clk_now() + 3600 * SEC);
        struct notice named = bare;
        bool never = false;

        snprintf(named.asg_name, sizeof(named.asg_name), "group");
        snprintf(named.lifecycle_hook_name, sizeof(named.lifecycle_hook_name), "hook");
        snprintf(named.event_id, sizeof(named.event_id), "imds:lc:b");
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");

        assert_int_equal(submit(f, &bare, 1), DISPATCH_PENDING);
        for (int i = 0; i < 5; i++)
                loop_run_until(f->loop, &never, 5 * 1000);
        assert_int_equal(count(f, "heartbeat"), 0);

        /* The same state seen again by an agent told the hook: it joins the drain. */
        assert_int_equal(submit(f, &named, 2), DISPATCH_PENDING);
        assert_int_equal(submit(f, &named, 3), DISPATCH_DONE); /* a duplicate */
        for (int i = 0; i < 200 && count(f, "heartbeat group/hook/i-0a00000000000000a") < 2; i++)
                loop_run_until(f->loop, &never, 5 * 1000);
        assert_true(count(f, "heartbeat group/hook/i-0a00000000000000a") >= 2);
        assert_int_equal(count(f, "complete"), 0);

        dispatch_drain_finished(f->d, "spot-a", true);
        assert_int_equal(count(f, "complete group/hook/i-0a00000000000000a"), 1);
        assert_int_equal(count(f, "complete"), 1);
        /* Late after the drain (an agent that polls again with a fresh dedupe key): completed at once. */
        snprintf(named.event_id, sizeof(named.event_id), "imds:lc:c");
        assert_int_equal(submit(f, &named, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "complete group/hook/i-0a00000000000000a"), 2);
        snprintf(bare.event_id, sizeof(bare.event_id), "imds:lc:d");
        assert_int_equal(submit(f, &bare, 5), DISPATCH_DONE);
        assert_int_equal(count(f, "complete"), 2);
}

static void test_duplicates_absorbed(void **state)
{
        struct fx *f = *state;
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", clk_now() + 120 * SEC);
        struct notice test = mk(NOTICE_ASG_TEST_NOTIFICATION, "", "ev-test", 0);
        struct dispatch_stats st;

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(submit(f, &spot, 1), DISPATCH_PENDING);
        assert_int_equal(submit(f, &spot, 2), DISPATCH_DONE);
        assert_int_equal(submit(f, &spot, 3), DISPATCH_DONE);
        assert_int_equal(count(f, "drain"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.duplicates, 2);

        /* One event naming two instances: the same event_id, two keys. */
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        struct notice other = spot;
        snprintf(other.instance_id, sizeof(other.instance_id), "i-0b00000000000000b");
        assert_int_equal(submit(f, &other, 4), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-b"), 1);

        /* Scheduled changes key on their state too: canceled after active is not a duplicate. */
        struct notice sch =
            mk(NOTICE_SCHEDULED_CHANGE, "i-0b00000000000000b", "ev-sch", clk_now() + 3 * 3600 * SEC);
        snprintf(sch.state, sizeof(sch.state), "upcoming");
        uint64_t defer = 0;
        assert_int_equal(dispatch_submit(f->d, &sch, 5, &defer), DISPATCH_DEFER);
        assert_true(defer > clk_now() && defer < sch.deadline);
        snprintf(sch.state, sizeof(sch.state), "canceled");
        dispatch_stats(f->d, &st);
        uint64_t dups = st.duplicates;
        assert_int_equal(submit(f, &sch, 6), DISPATCH_DONE);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.duplicates, dups);

        assert_int_equal(submit(f, &test, 7), DISPATCH_DONE);
}

static void test_unknown_retried_then_dropped(void **state)
{
        struct fx *f = *state;
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0d00000000000000d", "ev-d", clk_now() + 120 * SEC);
        struct notice never_node =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0e00000000000000e", "ev-e", clk_now() + 120 * SEC);
        struct notice state_change = mk(NOTICE_STATE_CHANGE, "i-0f00000000000000f", "ev-f", clk_now());
        struct dispatch_stats st;

        /* A state change of an instance that is not a node: nothing to wait for, and not ours. */
        assert_int_equal(submit(f, &state_change, 9), DISPATCH_FOREIGN);

        assert_int_equal(count(f, "seen - state-change"), 1);
        assert_int_equal(submit(f, &spot, 1), DISPATCH_PENDING);
        assert_int_equal(submit(f, &never_node, 2), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain"), 0);
        /* Told once settled: not while the instance may still turn up as a node. */
        assert_int_equal(count(f, "seen - spot-interruption"), 0);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.unknown_pending, 2);

        /* The node registers within the retry window: the notice is told with its node, its drain starts. */
        add_node(f, "late-node", "aws:///us-east-1a/i-0d00000000000000d");
        assert_int_equal(count(f, "seen late-node spot-interruption"), 1);
        assert_int_equal(count(f, "drain late-node spot-interruption"), 1);

        /* The other never turns up: dropped and reported, its message released for deletion. */
        f->ticket_seen = false;
        assert_int_equal(loop_run_until(f->loop, &f->ticket_seen, REAL_BOUND), 0);
        assert_int_equal(count(f, "ticket 2 -6"), 1); /* -ENXIO */
        assert_int_equal(count(f, "seen - spot-interruption"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.unknown_dropped, 1);
        assert_int_equal(st.unknown_pending, 0);
        assert_int_equal(count(f, "ticket 1"), 0);

        /* Dropped, it is not remembered: the same message back (another cluster's, in a shared queue) is
         * waited for again, not taken for a duplicate (which would delete it). */
        assert_int_equal(submit(f, &never_node, 3), DISPATCH_PENDING);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.unknown_pending, 1);
        /* The one that found its node is remembered: a second delivery is a duplicate. */
        assert_int_equal(submit(f, &spot, 4), DISPATCH_DONE);
}

/* An Auto Scaling hook of an instance that never turns up as a node is another cluster's: not completed. */
static void test_unknown_lifecycle_left_alone(void **state)
{
        struct fx *f = *state;
        struct notice asg =
            mk(NOTICE_ASG_LIFECYCLE_TERMINATE, "i-0e00000000000000e", "ev-asg", clk_now() + 3600 * SEC);
        snprintf(asg.asg_name, sizeof(asg.asg_name), "other-cluster-ng");
        snprintf(asg.lifecycle_hook_name, sizeof(asg.lifecycle_hook_name), "hook");
        snprintf(asg.lifecycle_action_token, sizeof(asg.lifecycle_action_token), "token");

        assert_int_equal(submit(f, &asg, 1), DISPATCH_PENDING);
        f->ticket_seen = false;
        assert_int_equal(loop_run_until(f->loop, &f->ticket_seen, REAL_BOUND), 0);
        assert_int_equal(count(f, "ticket 1 -6"), 1); /* -ENXIO */
        assert_int_equal(count(f, "complete"), 0);
}

/* A notice that comes after its deadline (a backlog, a back-dated body) drains with the minimum budget; a
 * spot warning claiming more than two minutes is held to two. */
static void test_late_and_far_deadlines(void **state)
{
        struct fx *f = *state;
        uint64_t now = clk_now();
        struct notice late = mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-late", now - 240 * SEC);
        struct notice far = mk(NOTICE_SPOT_INTERRUPTION, "i-0b00000000000000b", "ev-far", now + 3600 * SEC);
        struct notice asg =
            mk(NOTICE_ASG_LIFECYCLE_TERMINATE, "i-0c00000000000000c", "ev-asg", now + 10 * SEC);

        late.notice_time = now - 360 * SEC; /* sent six minutes ago: its deadline passed four minutes ago */
        far.notice_time = now;
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        add_node(f, "spot-c", "aws:///us-east-1c/i-0c00000000000000c");
        assert_int_equal(dispatch_late_usec(&late, now), 240 * SEC);
        assert_int_equal(dispatch_late_usec(&far, now), 0);
        _cleanup_free_ char *said = NULL, *plain = NULL;
        assert_int_equal(dispatch_notice_summary(&late, now, &said), 0);
        assert_non_null(strstr(said, "; arrived 240 s after its deadline: drained with the minimum budget"));
        assert_int_equal(dispatch_notice_summary(&far, now, &plain), 0);
        assert_null(strstr(plain, "arrived"));

        assert_int_equal(submit(f, &late, 1), DISPATCH_PENDING);
        uint64_t d = dispatch_node_deadline(f->d, "spot-a");
        assert_true(d >= now + 30 * SEC && d < clk_now() + 31 * SEC); /* the default 30 s */
        assert_int_equal(submit(f, &far, 2), DISPATCH_PENDING);
        d = dispatch_node_deadline(f->d, "spot-b");
        assert_true(d >= now + 120 * SEC && d <= clk_now() + 120 * SEC);
        /* A hook that grants less than the minimum is planned against the minimum too. */
        assert_int_equal(submit(f, &asg, 3), DISPATCH_PENDING);
        assert_true(dispatch_node_deadline(f->d, "spot-c") >= now + 30 * SEC);
}

static void test_resume_and_reset(void **state)
{
        struct fx *f = *state;
        struct dispatch_stats st;

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(dispatch_resume(f->d, "spot-a", "spot-interruption", clk_now() + 60 * SEC), 0);
        assert_int_equal(count(f, "drain spot-a spot-interruption"), 1);
        assert_int_equal(dispatch_resume(f->d, "spot-a", "spot-interruption", clk_now() + 60 * SEC),
                         -EALREADY);
        assert_int_equal(dispatch_resume(f->d, "spot-b", "spot-interruption", clk_now() - SEC), -ETIME);
        /* A notice for the resumed node joins the drain. */
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", clk_now() + 120 * SEC);
        assert_int_equal(submit(f, &spot, 1), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.resumed, 1);

        dispatch_reset(f->d);
        assert_int_equal(count(f, "stop spot-a"), 1);
        assert_false(dispatch_node_draining(f->d, "spot-a"));
        assert_int_equal(count(f, "ticket"), 0);
}

/* Runs the loop for usec (timers fire). */
static void run_for(struct fx *f, uint64_t usec)
{
        bool never = false;
        loop_run_until(f->loop, &never, usec);
}

static void test_rebalance_reverted(void **state)
{
        struct fx *f = *state;
        struct notice reb = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-reb", 0);
        struct notice reb_b = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0b00000000000000b", "ev-reb-b", 0);
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0b00000000000000b", "ev-spot", clk_now() + 120 * SEC);
        struct dispatch_stats st;

        /* Every path reverts now (the controller did not before the agent's copy moved here): no
         * interruption within the revert time removes the soft taint, once. */
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        assert_int_equal(submit(f, &reb, 1), DISPATCH_DONE);
        assert_int_equal(submit(f, &reb_b, 2), DISPATCH_DONE);
        /* The interruption of spot-b keeps its taint: the node is going. */
        assert_int_equal(submit(f, &spot, 3), DISPATCH_PENDING);
        assert_int_equal(count(f, "taint"), 2);
        for (int i = 0; i < 100 && count(f, "untaint") == 0; i++)
                run_for(f, 5 * 1000);
        run_for(f, 100 * 1000);
        assert_int_equal(count(f, "untaint spot-a"), 1);
        assert_int_equal(count(f, "untaint spot-b"), 0);
        /* The same recommendation again (still in IMDS, redelivered) is a duplicate: no new taint. */
        assert_int_equal(submit(f, &reb, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 1);
        /* A new one after the revert taints again. */
        struct notice again = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-reb-2", 0);
        assert_int_equal(submit(f, &again, 5), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 2);
        assert_int_equal(count(f, "replace spot-a"), 2);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reverted, 1);
}

/* A recommendation seen only after its revert time (a late delivery, a restart) is reverted at once and
 * never tainted: adding the taint then removing it together let the removal read the node before the add's
 * write landed, and the taint stayed for good (seen on a loaded machine in controller_revert). */
static void test_rebalance_late_not_tainted(void **state)
{
        struct fx *f = *state;
        struct notice late = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-late", 0);
        struct notice fresh = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0b00000000000000b", "ev-fresh", 0);
        struct dispatch_stats st;

        late.notice_time = clk_now() - 2 * 60 * 1000; /* twice the fixture's 60 ms revert time ago */
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        assert_int_equal(submit(f, &late, 1), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 0);
        /* The removal still goes, for a taint left from before a restart; the replacement is asked as ever.
         */
        assert_int_equal(count(f, "untaint spot-a"), 1);
        assert_int_equal(count(f, "replace spot-a"), 1);
        /* One within its time is tainted, and reverted by its timer, once. */
        assert_int_equal(submit(f, &fresh, 2), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-b"), 1);
        assert_int_equal(count(f, "untaint spot-b"), 0);
        for (int i = 0; i < 100 && count(f, "untaint spot-b") == 0; i++)
                run_for(f, 5 * 1000);
        assert_int_equal(count(f, "untaint spot-b"), 1);
        assert_int_equal(count(f, "untaint spot-a"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reverted, 2);
}

static struct notice mk_sched(const char *event_id, uint64_t start, const char *state)
{
        struct notice n = mk(NOTICE_SCHEDULED_CHANGE, "i-0a00000000000000a", event_id, start);
        n.start_time = start;
        snprintf(n.state, sizeof(n.state), "%s", state);
        snprintf(n.action, sizeof(n.action), "system-reboot");
        return n;
}

static void test_scheduled_change_lead_and_cancel(void **state)
{
        struct fx *f = *state;
        uint64_t start = clk_now() + SEC + 50 * 1000; /* due in 50 ms with the 1 s lead */
        struct notice active = mk_sched("ev-m1", start, "active");
        struct notice canceled = mk_sched("ev-m1", start, "canceled");
        struct dispatch_stats st;
        uint64_t defer = 0;

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(dispatch_submit(f->d, &active, 1, &defer), DISPATCH_DEFER);
        assert_int_equal(defer, start - SEC);
        /* Seen again while it waits (every IMDS poll): a duplicate, still deferred, told once. */
        assert_int_equal(dispatch_submit(f->d, &active, 2, &defer), DISPATCH_DEFER);
        assert_int_equal(count(f, "seen spot-a scheduled-change"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.scheduled, 1);
        assert_int_equal(st.duplicates, 1);
        /* Its timer drains it maintenance_lead before the start, by the start. */
        for (int i = 0; i < 100 && count(f, "drain") == 0; i++)
                run_for(f, 5 * 1000);
        assert_int_equal(count(f, "drain spot-a scheduled-change"), 1);
        assert_int_equal(f->last_deadline, start);
        assert_int_equal(dispatch_submit(f->d, &active, 3, &defer), DISPATCH_DONE);
        assert_int_equal(count(f, "drain"), 1);

        /* Canceled after the drain began: stopped, the node schedulable again, free for later notices. */
        assert_int_equal(submit(f, &canceled, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "stop spot-a"), 1);
        assert_int_equal(count(f, "uncordon spot-a"), 1);
        assert_false(dispatch_node_draining(f->d, "spot-a"));
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", clk_now() + 120 * SEC);
        assert_int_equal(submit(f, &spot, 5), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a spot-interruption"), 1);

        /* The interruption drives this drain: a later event that joins it and is canceled undoes nothing. */
        struct notice m2 = mk_sched("ev-m2", clk_now() + SEC / 2, "active");
        assert_int_equal(submit(f, &m2, 6), DISPATCH_PENDING);
        m2 = mk_sched("ev-m2", m2.deadline, "canceled");
        assert_int_equal(submit(f, &m2, 7), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon"), 1);
        assert_true(dispatch_node_draining(f->d, "spot-a"));

        /* Canceled before it is due: dropped, nothing was done. */
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
        struct notice far = mk_sched("ev-m3", clk_now() + 3600 * SEC, "active");
        snprintf(far.instance_id, sizeof(far.instance_id), "i-0b00000000000000b");
        assert_int_equal(dispatch_submit(f->d, &far, 8, &defer), DISPATCH_DEFER);
        far = mk_sched("ev-m3", far.deadline, "canceled");
        snprintf(far.instance_id, sizeof(far.instance_id), "i-0b00000000000000b");
        assert_int_equal(submit(f, &far, 9), DISPATCH_DONE);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.scheduled, 0);
        assert_int_equal(st.canceled, 1);
}

/* The drain of a maintenance ends long before its window: a cancellation after that still makes the node
 * schedulable. AWS Health has no `canceled`: its event closed before the window's start says it; closed
 * after the start is the maintenance done. A notice that joined the finished drain (a spot warning, a state
 * change) makes it that notice's: no cancellation undoes it then. */
static void test_scheduled_change_canceled_after_drain(void **state)
{
        struct fx *f = *state;
        uint64_t start = clk_now() + SEC / 2; /* inside the 1 s lead: drained at once */
        const char *const nodes[] = { "spot-a", "spot-b", "spot-c" };
        struct notice up[3], closed[3];
        struct dispatch_stats st;

        for (size_t i = 0; i < 3; i++) {
                char pid[64], ev[16];
                snprintf(ev, sizeof(ev), "ev-h%zu", i);
                up[i] = mk_sched(ev, start, "upcoming");
                up[i].instance_id[3] = up[i].instance_id[18] = (char)('a' + i); /* i-0a...a, i-0b...b */
                snprintf(pid, sizeof(pid), "aws:///us-east-1a/%s", up[i].instance_id);
                add_node(f, nodes[i], pid);
                snprintf(up[i].action, sizeof(up[i].action), "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED");
                closed[i] = up[i];
                snprintf(closed[i].state, sizeof(closed[i].state), "closed");
                closed[i].notice_time = start - SEC / 4; /* before the window: canceled */
                assert_int_equal(submit(f, &up[i], 1 + i), DISPATCH_PENDING);
                dispatch_drain_finished(f->d, nodes[i], true);
                assert_false(dispatch_node_draining(f->d, nodes[i]));
        }
        assert_int_equal(count(f, "drain spot-"), 3);

        /* spot-a: closed after its window began: the maintenance happened, nothing is undone. */
        closed[0].notice_time = start + 1;
        assert_int_equal(submit(f, &closed[0], 10), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon"), 0);
        /* spot-b: closed before it: canceled, the finished drain undone (nothing left to stop). */
        assert_int_equal(submit(f, &closed[1], 11), DISPATCH_DONE);
        assert_int_equal(count(f, "stop spot-b"), 0);
        assert_int_equal(count(f, "uncordon spot-b"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.canceled, 1);
        /* spot-c: a spot warning joined the finished drain; the cancellation undoes nothing. */
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0c00000000000000c", "ev-spot", clk_now() + 120 * SEC);
        assert_int_equal(submit(f, &spot, 12), DISPATCH_DONE);
        assert_int_equal(submit(f, &closed[2], 13), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon"), 1);
}

/* The dispatcher again, with the per-kind actions of notices.KIND.action (settings.c's names). */
static void with_actions(struct fx *f, const char *const names[_NOTICE_KIND_MAX])
{
        struct notices_settings ns = {};
        struct dispatch_options o = { .unknown_retry_usec = 50 * 1000,
                                      .heartbeat_usec = 20 * 1000,
                                      .rebalance_revert_usec = 60 * 1000,
                                      .maintenance_lead_usec = SEC };

        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                for (int a = DISPATCH_ACTION_DRAIN; names[k] && a < _DISPATCH_ACTION_MAX; a++)
                        if (streq(names[k], dispatch_action_to_string((enum dispatch_action)a)))
                                ns.action[k] = a;
        dispatch_actions_from_settings(&ns, &o);
        f->d = dispatch_free(f->d);
        assert_int_equal(dispatch_new(f->loop, &o, &ops, f, &f->d), 0);
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        add_node(f, "spot-b", "aws:///us-east-1b/i-0b00000000000000b");
}

static struct notice mk_asg(const char *instance, const char *event_id, const char *token)
{
        struct notice n = mk(NOTICE_ASG_LIFECYCLE_TERMINATE, instance, event_id, clk_now() + 3600 * SEC);
        snprintf(n.lifecycle_action_token, sizeof(n.lifecycle_action_token), "%s", token);
        snprintf(n.asg_name, sizeof(n.asg_name), "spot-asg");
        return n;
}

static uint64_t op_interval(void *ud, const struct notice *n)
{
        return ((struct fx *)ud)->interval;
}

static uint64_t op_granted(void *ud, const struct notice *n)
{
        return ((struct fx *)ud)->granted;
}

/* The heartbeat period the controller gives (the hook's HeartbeatTimeout, once read) replaces the default
 * when dispatch_lifecycle_rearm() says so, counted from the action's arrival; heartbeat_until_usec after
 * the action, heartbeats stop though the drain runs on. */
static void test_heartbeat_interval_until(void **state)
{
        struct fx *f = *state;
        struct dispatch_ops o = ops;
        struct notice asg = mk_asg("i-0a00000000000000a", "ev-hb", "tok-hb");

        o.lifecycle_interval = op_interval;
        o.lifecycle_deadline = op_granted;
        f->d = dispatch_free(f->d);
        assert_int_equal(dispatch_new(f->loop,
                                      &(struct dispatch_options){ .heartbeat_usec = 3600 * SEC,
                                                                  .heartbeat_until_usec = 150 * 1000 },
                                      &o, f, &f->d),
                         0);
        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(submit(f, &asg, 1), DISPATCH_PENDING);
        run_for(f, 60 * 1000);
        assert_int_equal(count(f, "heartbeat"), 0); /* an hour's period: none yet */
        assert_int_equal(f->last_deadline, asg.deadline);
        /* The hook is known now: the drain is planned again against what it grants. */
        f->interval = 20 * 1000;
        f->granted = asg.notice_time + 3 * 3600 * SEC;
        dispatch_lifecycle_rearm(f->d);
        assert_int_equal(count(f, "drain spot-a"), 2);
        assert_int_equal(f->last_deadline, f->granted);
        assert_int_equal(dispatch_node_deadline(f->d, "spot-a"), f->granted);
        dispatch_lifecycle_rearm(f->d); /* unchanged: not again */
        assert_int_equal(count(f, "drain spot-a"), 2);
        /* Overdue by the new period: one at once, then every 20 ms until 150 ms after the action. */
        bool never = false;
        for (int i = 0; i < 200 && count(f, "heartbeat tok-hb") < 2; i++)
                loop_run_until(f->loop, &never, 5 * 1000);
        assert_true(count(f, "heartbeat tok-hb") >= 2);
        run_for(f, 300 * 1000);
        size_t beats = count(f, "heartbeat");
        assert_true(beats <= 6); /* 150 ms / 20 ms, and the one at once */
        run_for(f, 100 * 1000);
        assert_int_equal(count(f, "heartbeat"), beats);
        assert_true(dispatch_node_draining(f->d, "spot-a"));
}

static int op_launch(void *ud, const struct notice *n, uint64_t ticket)
{
        record(ud, "launch %s %" PRIu64, n->lifecycle_action_token, ticket);
        return DISPATCH_PENDING;
}

/* A launch lifecycle action drains nothing: it goes to ops->lifecycle_launch (the controller's wait for the
 * node), every delivery of it (a message received again must join the wait, not be deleted as a
 * duplicate); notices.asg_launch.action ignore leaves it alone; without the op (agent) it is done. */
static void test_action_launch(void **state)
{
        struct fx *f = *state;
        struct dispatch_ops lops = ops;
        struct notice n = mk_asg("i-0c00000000000000c", "ev-l", "tok-l");
        struct dispatch_options o = { .unknown_retry_usec = 50 * 1000 };
        const char *const ignore[_NOTICE_KIND_MAX] = { [NOTICE_ASG_LIFECYCLE_LAUNCH] = "ignore" };

        n.kind = NOTICE_ASG_LIFECYCLE_LAUNCH;
        n.deadline = 0;
        lops.lifecycle_launch = op_launch;
        f->d = dispatch_free(f->d);
        assert_int_equal(dispatch_new(f->loop, &o, &lops, f, &f->d), 0);
        assert_int_equal(submit(f, &n, 1), DISPATCH_PENDING);
        assert_int_equal(submit(f, &n, 2), DISPATCH_PENDING);
        assert_int_equal(count(f, "launch tok-l 1"), 1);
        assert_int_equal(count(f, "launch tok-l 2"), 1);
        assert_int_equal(count(f, "seen - asg-lifecycle-launch"), 2);
        run_for(f, 100 * 1000); /* not waited for as an unknown instance either */
        assert_int_equal(count(f, "ticket"), 0);
        assert_int_equal(count(f, "drain"), 0);
        assert_int_equal(count(f, "complete"), 0);

        with_actions(f, ignore); /* the fixture's ops: no lifecycle_launch (the agent's) */
        assert_int_equal(submit(f, &n, 3), DISPATCH_DONE);
        n.lifecycle_action_token[0] = 'T';
        snprintf(n.event_id, sizeof(n.event_id), "ev-l2");
        const char *const none[_NOTICE_KIND_MAX] = { NULL };
        with_actions(f, none);
        assert_int_equal(submit(f, &n, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "launch"), 2);
}

static void test_action_ignore(void **state)
{
        struct fx *f = *state;
        const char *const names[_NOTICE_KIND_MAX] = { "ignore", "ignore", "ignore", "ignore", "ignore" };
        struct notice all[] = {
                mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-1", clk_now() + 120 * SEC),
                mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-2", 0),
                mk_sched("ev-3", clk_now() + 10 * 1000, "active"),
                mk(NOTICE_STATE_CHANGE, "i-0a00000000000000a", "ev-4", clk_now()),
                mk_asg("i-0a00000000000000a", "ev-5", "tok-5"),
                /* not a node here: ignored too, not waited for */
                mk(NOTICE_SPOT_INTERRUPTION, "i-0c00000000000000c", "ev-6", clk_now() + 120 * SEC),
        };
        struct dispatch_stats st;

        with_actions(f, names);
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                assert_int_equal(submit(f, &all[i], i + 1), DISPATCH_DONE);
        /* Heard and told (the metrics count it), acted on by nothing, a duplicate absorbed. */
        assert_int_equal(count(f, "seen spot-a"), 5);
        assert_int_equal(count(f, "seen - spot-interruption"), 1);
        assert_int_equal(submit(f, &all[0], 9), DISPATCH_DONE);
        run_for(f, 100 * 1000);
        assert_int_equal(count(f, "seen"), 6);
        assert_int_equal(count(f, "drain"), 0);
        assert_int_equal(count(f, "taint"), 0);
        assert_int_equal(count(f, "cordon"), 0);
        assert_int_equal(count(f, "replace"), 0);
        assert_int_equal(count(f, "complete"), 0);
        assert_int_equal(count(f, "ticket"), 0);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.ignored, 6);
        assert_int_equal(st.duplicates, 1);
        assert_int_equal(st.unknown_pending, 0);
        assert_int_equal(st.scheduled, 0);
}

static void test_action_cordon(void **state)
{
        struct fx *f = *state;
        const char *const names[_NOTICE_KIND_MAX] = { [NOTICE_SPOT_INTERRUPTION] = "cordon",
                                                      [NOTICE_ASG_LIFECYCLE_TERMINATE] = "cordon",
                                                      [NOTICE_REBALANCE_RECOMMENDATION] = "cordon" };
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-1", clk_now() + 120 * SEC);
        struct notice asg = mk_asg("i-0a00000000000000a", "ev-2", "tok-2");
        struct notice state_change = mk(NOTICE_STATE_CHANGE, "i-0a00000000000000a", "ev-3", clk_now());
        struct notice reb = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0b00000000000000b", "ev-4", 0);
        struct dispatch_stats st;

        with_actions(f, names);
        /* Cordoned, nothing evicted, the message handled. */
        assert_int_equal(submit(f, &spot, 1), DISPATCH_DONE);
        assert_int_equal(count(f, "cordon spot-a"), 1);
        assert_int_equal(count(f, "drain"), 0);
        assert_false(dispatch_node_draining(f->d, "spot-a"));
        /* The lifecycle hook after it: nothing to wait for, completed at once; cordoned once. */
        assert_int_equal(submit(f, &asg, 2), DISPATCH_DONE);
        assert_int_equal(count(f, "complete tok-2"), 1);
        assert_int_equal(count(f, "cordon spot-a"), 1);
        /* A rebalance cordoned is not tainted nor reverted. */
        assert_int_equal(submit(f, &reb, 3), DISPATCH_DONE);
        assert_int_equal(count(f, "cordon spot-b"), 1);
        run_for(f, 100 * 1000);
        assert_int_equal(count(f, "taint"), 0);
        assert_int_equal(count(f, "replace"), 0);
        /* A kind that still drains upgrades the cordoned node. */
        assert_int_equal(submit(f, &state_change, 4), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a state-change"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.cordoned, 2);
        assert_int_equal(st.upgrades, 1);
}

static void test_action_taint_and_cancel(void **state)
{
        struct fx *f = *state;
        const char *const names[_NOTICE_KIND_MAX] = {
                [NOTICE_SCHEDULED_CHANGE] = "taint", [NOTICE_STATE_CHANGE] = "cordon"
        };
        struct notice m1 = mk_sched("ev-m1", clk_now() + SEC / 2, "active");
        struct notice sc = mk(NOTICE_STATE_CHANGE, "i-0b00000000000000b", "ev-s", clk_now());

        with_actions(f, names);
        /* Due now: the soft taint and a replacement instead of a drain, reverted when nothing followed. */
        assert_int_equal(submit(f, &m1, 1), DISPATCH_DONE);
        assert_int_equal(count(f, "taint spot-a"), 1);
        assert_int_equal(count(f, "replace spot-a"), 1);
        assert_int_equal(count(f, "drain"), 0);
        for (int i = 0; i < 100 && count(f, "untaint") == 0; i++)
                run_for(f, 5 * 1000);
        assert_int_equal(count(f, "untaint spot-a"), 1);

        /* A state change cordoned; a scheduled change cordoned and then canceled is uncordoned, the
         * state change's cordon is not undone by another event's cancel. */
        const char *const cordons[_NOTICE_KIND_MAX] = {
                [NOTICE_SCHEDULED_CHANGE] = "cordon", [NOTICE_STATE_CHANGE] = "cordon"
        };
        with_actions(f, cordons);
        f->n_log = 0;
        assert_int_equal(submit(f, &sc, 2), DISPATCH_DONE);
        struct notice m2 = mk_sched("ev-m2", clk_now() + SEC / 2, "active");
        assert_int_equal(submit(f, &m2, 3), DISPATCH_DONE);
        assert_int_equal(count(f, "cordon spot-b"), 1);
        assert_int_equal(count(f, "cordon spot-a"), 1);
        m2 = mk_sched("ev-m2", m2.deadline, "canceled");
        assert_int_equal(submit(f, &m2, 4), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon spot-a"), 1);
        struct notice other = mk_sched("ev-m3", clk_now() + SEC / 2, "canceled");
        snprintf(other.instance_id, sizeof(other.instance_id), "i-0b00000000000000b");
        assert_int_equal(submit(f, &other, 5), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon"), 1);
}

static void test_action_drain_rebalance(void **state)
{
        struct fx *f = *state;
        const char *const names[_NOTICE_KIND_MAX] = { [NOTICE_REBALANCE_RECOMMENDATION] = "drain" };
        struct notice reb = mk(NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-1", 0);
        uint64_t before = clk_now();

        with_actions(f, names);
        /* Drained against the two minutes a spot warning after it would give, no soft taint. */
        assert_int_equal(submit(f, &reb, 1), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a rebalance-recommendation"), 1);
        assert_true(f->last_deadline >= before + 120 * SEC);
        assert_true(f->last_deadline <= clk_now() + 120 * SEC);
        assert_int_equal(count(f, "taint"), 0);
        /* The interruption joins it (its deadline is not earlier), its hook is completed when it ends. */
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-2", clk_now() + 120 * SEC);
        struct notice asg = mk_asg("i-0a00000000000000a", "ev-3", "tok-3");
        assert_int_equal(submit(f, &spot, 2), DISPATCH_PENDING);
        assert_int_equal(submit(f, &asg, 3), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain"), 1);
        dispatch_drain_finished(f->d, "spot-a", true);
        assert_int_equal(count(f, "complete tok-3"), 1);
        assert_int_equal(count(f, "ticket"), 3);
}

/* A Capacity Reservation warning drains as a spot one: held to two minutes from its event, its own switch.
 */
static void test_capacity_reservation(void **state)
{
        struct fx *f = *state;
        const char *const names[_NOTICE_KIND_MAX] = { [NOTICE_CAPACITY_RESERVATION_INTERRUPTION] =
                                                          "cordon" };
        struct notice cr = mk(NOTICE_CAPACITY_RESERVATION_INTERRUPTION, "i-0a00000000000000a", "ev-cr",
                              clk_now() + 600 * SEC);
        struct notice cr_b = mk(NOTICE_CAPACITY_RESERVATION_INTERRUPTION, "i-0b00000000000000b", "ev-cr-b",
                                clk_now() + 120 * SEC);

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(submit(f, &cr, 1), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain spot-a capacity-reservation-interruption"), 1);
        assert_int_equal(f->last_deadline, cr.notice_time + 120 * SEC);
        with_actions(f, names);
        assert_int_equal(submit(f, &cr_b, 2), DISPATCH_DONE);
        assert_int_equal(count(f, "cordon spot-b"), 1);
        assert_int_equal(count(f, "drain"), 1);
}

/* A node as the informer gives it after a reboot: Ready or not, cordoned or not, with the drain record of
 * event_id (NULL: none), which says whether the node was cordoned before the drain. */
static void update_node_rec(struct fx *f, const char *name, const char *provider_id, bool ready,
                            bool cordoned, const char *event_id, bool cordoned_before)
{
        cJSON *o = node_obj(name, provider_id);
        cJSON *conds = cJSON_AddArrayToObject(cJSON_AddObjectToObject(o, "status"), "conditions");
        cJSON *ready_cond = cJSON_CreateObject();

        cJSON_AddStringToObject(ready_cond, "type", "Ready");
        cJSON_AddStringToObject(ready_cond, "status", ready ? "True" : "Unknown");
        cJSON_AddItemToArray(conds, ready_cond);
        cJSON_AddBoolToObject(cJSON_GetObjectItem(o, "spec"), "unschedulable", cordoned);
        if (event_id) {
                _cleanup_free_ char *rec =
                    drain_record_format("scheduled-change", clk_now(), clk_now(), "i-0a00000000000000a",
                                        event_id, cordoned_before);
                cJSON_AddStringToObject(
                    cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "annotations"),
                    SPOTDRAIN_ANNOTATION_DRAIN, rec);
        }
        assert_int_equal(dispatch_node_update(f->d, o), 0);
        cJSON_Delete(o);
}

static void update_node(struct fx *f, const char *name, const char *provider_id, bool ready, bool cordoned,
                        const char *event_id)
{
        update_node_rec(f, name, provider_id, ready, cordoned, event_id, false);
}

/* spot-a drained for the reboot event_id (tickets 1 and 2), which then completed. */
static void drained_then_rebooted(struct fx *f, const char *event_id)
{
        struct notice active = mk_sched(event_id, clk_now() + SEC / 2, "active");
        struct notice done = mk_sched(event_id, active.deadline, "completed");

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(submit(f, &active, 1), DISPATCH_PENDING);
        dispatch_drain_finished(f->d, "spot-a", true);
        assert_int_equal(submit(f, &done, 2), DISPATCH_DONE);
}

/* The drain for the reboot found the node cordoned already (an operator's): its return leaves it so. */
static void test_reboot_keeps_prior_cordon(void **state)
{
        struct fx *f = *state;
        struct dispatch_stats st;

        drained_then_rebooted(f, "ev-p1");
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 1);
        update_node_rec(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-p1", true);
        assert_int_equal(count(f, "uncordon"), 0);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboot_uncordoned, 0);
        assert_int_equal(st.reboots, 0);
}

static void test_reboot_uncordon(void **state)
{
        struct fx *f = *state;
        struct dispatch_stats st;

        /* Drained for a reboot; the reboot completes: the node is asked for, and waited on. */
        drained_then_rebooted(f, "ev-r1");
        for (int i = 0; i < 100 && count(f, "refresh spot-a") == 0; i++)
                run_for(f, 5 * 1000);
        assert_int_equal(count(f, "refresh spot-a"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 1);
        /* Not Ready yet: still cordoned. Ready, cordoned with the record of this reboot: uncordoned, once.
         */
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", false, true, "ev-r1");
        assert_int_equal(count(f, "uncordon"), 0);
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-r1");
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-r1");
        assert_int_equal(count(f, "uncordon spot-a"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboot_uncordoned, 1);
        assert_int_equal(st.reboots, 0);

        /* A cordon that is not spotdrain's for this reboot (no record of it: someone else's) is left. */
        struct notice other = mk_sched("ev-r2", clk_now() + 3600 * SEC, "completed");
        assert_int_equal(submit(f, &other, 3), DISPATCH_DONE);
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-r1");
        assert_int_equal(count(f, "uncordon"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 0);

        /* Not a reboot (a stop): nothing is waited on. An AWS Health reboot that closed after its window
         * began is (closed before it, it was canceled). */
        struct notice stop = mk_sched("ev-s", clk_now() + 3600 * SEC, "completed");
        snprintf(stop.action, sizeof(stop.action), "instance-stop");
        assert_int_equal(submit(f, &stop, 4), DISPATCH_DONE);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 0);
        struct notice health = mk_sched("ev-h", clk_now() - 60 * SEC, "closed");
        snprintf(health.action, sizeof(health.action), "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED");
        assert_int_equal(submit(f, &health, 5), DISPATCH_DONE);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 1);
        /* Already schedulable when it is Ready: nothing to do. */
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, false, "ev-h");
        assert_int_equal(count(f, "uncordon"), 1);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.reboots, 0);
}

/* The reboot came while its drain still ran: the drain is stopped, its tickets done, the node uncordoned;
 * a drain another notice drives is left alone. */
static void test_reboot_during_drain(void **state)
{
        struct fx *f = *state;
        struct notice active = mk_sched("ev-r1", clk_now() + SEC / 2, "active");
        struct notice done = mk_sched("ev-r1", active.deadline, "completed");

        add_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        assert_int_equal(submit(f, &active, 1), DISPATCH_PENDING);
        assert_int_equal(submit(f, &done, 2), DISPATCH_DONE);
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-r1");
        assert_int_equal(count(f, "stop spot-a"), 1);
        assert_int_equal(count(f, "ticket 1 0"), 1);
        assert_int_equal(count(f, "uncordon spot-a"), 1);
        assert_false(dispatch_node_draining(f->d, "spot-a"));

        struct notice again = mk_sched("ev-r3", clk_now() + SEC / 2, "active");
        struct notice spot =
            mk(NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-spot", clk_now() + 120 * SEC);
        assert_int_equal(submit(f, &again, 3), DISPATCH_PENDING);
        assert_int_equal(submit(f, &spot, 4), DISPATCH_PENDING);
        again = mk_sched("ev-r3", again.deadline, "completed");
        assert_int_equal(submit(f, &again, 5), DISPATCH_DONE);
        update_node(f, "spot-a", "aws:///us-east-1a/i-0a00000000000000a", true, true, "ev-r3");
        assert_int_equal(count(f, "uncordon"), 1);
        assert_true(dispatch_node_draining(f->d, "spot-a"));
}

static void test_fixed_node_and_imds_identity(void **state)
{
        struct fx *f = *state;
        /* Two minutes out at most, as a spot warning gives (a later time would be held to two minutes). */
        char t1[32], t2[32], doc[96], later[96];
        assert_int_equal(format_rfc3339(clk_now() + 110 * SEC, t1, sizeof(t1)), 0);
        assert_int_equal(format_rfc3339(clk_now() + 90 * SEC, t2, sizeof(t2)), 0);
        snprintf(doc, sizeof(doc), "{\"action\": \"terminate\", \"time\": \"%s\"}", t1);
        snprintf(later, sizeof(later), "{\"action\": \"terminate\", \"time\": \"%s\"}", t2);
        struct notice_parse_opts po = { .source = "imds",
                                        .instance_id = "i-0abcd1234ef567890",
                                        .imds_path = "spot/instance-action" };
        _cleanup_free_ struct notice *a = NULL, *b = NULL, *c = NULL;
        size_t na = 0, nb = 0, nc = 0;
        char reason[128];
        struct dispatch_stats st;

        /* The agent's node: one fixed entry, no providerID index. */
        assert_int_equal(dispatch_node_set(f->d, "node-1", "i-0abcd1234ef567890"), 0);
        assert_int_equal(dispatch_node_set(f->d, "node-1", "not-an-instance"), -EINVAL);
        assert_string_equal(dispatch_node_for_instance(f->d, "i-0abcd1234ef567890"), "node-1");

        /* The same IMDS document read on two polls parses to the same identity: one drain. A document of
         * another time is another notice (an earlier deadline restarts the drain). */
        po.now_usec = clk_now();
        assert_int_equal(notice_parse(doc, strlen(doc), &po, &a, &na, reason, sizeof(reason)), 0);
        po.now_usec = clk_now() + SEC;
        assert_int_equal(notice_parse(doc, strlen(doc), &po, &b, &nb, reason, sizeof(reason)), 0);
        assert_int_equal(notice_parse(later, strlen(later), &po, &c, &nc, reason, sizeof(reason)), 0);
        assert_int_equal(dispatch_submit(f->d, &a[0], DISPATCH_NO_TICKET, NULL), DISPATCH_PENDING);
        assert_int_equal(dispatch_submit(f->d, &b[0], DISPATCH_NO_TICKET, NULL), DISPATCH_DONE);
        assert_int_equal(count(f, "drain node-1 spot-interruption"), 1);
        assert_int_equal(count(f, "seen node-1"), 1);
        assert_int_equal(dispatch_submit(f->d, &c[0], DISPATCH_NO_TICKET, NULL), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain node-1"), 2);
        assert_int_equal(dispatch_node_deadline(f->d, "node-1"), c[0].deadline);
        dispatch_stats(f->d, &st);
        assert_int_equal(st.duplicates, 1);

        /* Without a ticket nothing is answered when the drain ends. */
        dispatch_drain_finished(f->d, "node-1", true);
        assert_int_equal(count(f, "ticket"), 0);
}

static void test_resume_recorded(void **state)
{
        struct fx *f = *state;
        char t[32], value[256];
        uint64_t start = (clk_now() / SEC + 1) * SEC; /* within the 1 s lead, whole seconds (RFC 3339) */
        cJSON *o = node_obj("spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        cJSON *ann = cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "annotations");

        assert_int_equal(dispatch_node_update(f->d, o), 0);
        assert_int_equal(dispatch_resume_recorded(f->d, o), -ENOENT);
        cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_DRAIN, "{not json");
        assert_int_equal(dispatch_resume_recorded(f->d, o), -EBADMSG);
        cJSON_DeleteItemFromObject(ann, SPOTDRAIN_ANNOTATION_DRAIN);
        assert_int_equal(format_rfc3339(start, t, sizeof(t)), 0);
        /* A record that names no instance, or another one than the node's, or a kind that does not drain,
         * is not trusted: anyone who may patch the node could have written it. */
#define IID_A "i-0a00000000000000a"
        static const char *const untrusted[] = {
                "{\"kind\":\"scheduled-change\",\"deadline\":\"%s\"}",
                "{\"kind\":\"scheduled-change\",\"deadline\":\"%s\",\"instance\":\"i-0b00000000000000b\"}",
                "{\"kind\":\"manual\",\"deadline\":\"%s\",\"instance\":\"i-0a00000000000000a\"}",
                "{\"kind\":\"rebalance-recommendation\",\"deadline\":\"%s\",\"instance\":\"" IID_A "\"}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(untrusted); i++) {
                snprintf(value, sizeof(value), untrusted[i], t);
                cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_DRAIN, value);
                assert_int_equal(dispatch_resume_recorded(f->d, o), -EPERM);
                cJSON_DeleteItemFromObject(ann, SPOTDRAIN_ANNOTATION_DRAIN);
        }
        assert_int_equal(count(f, "drain"), 0);
        snprintf(value, sizeof(value),
                 "{\"kind\":\"scheduled-change\",\"deadline\":\"%s\",\"instance\":\"i-0a00000000000000a\","
                 "\"event_id\":\"ev-m1\"}",
                 t);
        cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_DRAIN, value);
        assert_int_equal(dispatch_resume_recorded(f->d, o), 0);
        assert_int_equal(count(f, "drain spot-a scheduled-change"), 1);
        assert_int_equal(dispatch_node_deadline(f->d, "spot-a"), start);
        cJSON_Delete(o);

        /* After a restart the scheduled change still in IMDS (due: its drain had begun) joins the resumed
         * drain, and its cancel still undoes it. */
        struct notice active = mk_sched("ev-m1", start, "active");
        struct notice canceled = mk_sched("ev-m1", start, "canceled");
        assert_int_equal(dispatch_submit(f->d, &active, DISPATCH_NO_TICKET, NULL), DISPATCH_PENDING);
        assert_int_equal(count(f, "drain"), 1);
        assert_int_equal(submit(f, &canceled, 1), DISPATCH_DONE);
        assert_int_equal(count(f, "uncordon spot-a"), 1);
        assert_false(dispatch_node_draining(f->d, "spot-a"));
}

/* A recorded spot drain with its deadline an hour out (a forged record) is held to the two minutes a spot
 * warning gives. */
static void test_resume_record_clamped(void **state)
{
        struct fx *f = *state;
        char t[32], value[256];
        cJSON *o = node_obj("spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        cJSON *ann = cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "annotations");

        assert_int_equal(dispatch_node_update(f->d, o), 0);
        assert_int_equal(format_rfc3339(clk_now() + 3600 * SEC, t, sizeof(t)), 0);
        snprintf(value, sizeof(value),
                 "{\"kind\":\"spot-interruption\",\"deadline\":\"%s\",\"instance\":\"i-0a00000000000000a\"}",
                 t);
        cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_DRAIN, value);
        uint64_t before = clk_now();
        assert_int_equal(dispatch_resume_recorded(f->d, o), 0);
        uint64_t d = dispatch_node_deadline(f->d, "spot-a");
        assert_true(d >= before + 120 * SEC && d <= clk_now() + 120 * SEC);
        cJSON_Delete(o);
}

/* The record a drain writes reads back to the millisecond: agents elsewhere order their drains by it. */
static void test_record_round_trip(void **state)
{
        uint64_t t = 1796018400ULL * SEC + 456789;
        _cleanup_free_ char *value =
            drain_record_format("spot-interruption", t + 120 * SEC, t, "i-0a00000000000000a", "ev-1", false);
        _cleanup_free_ char *kind = NULL, *instance = NULL;
        uint64_t deadline = 0;

        assert_non_null(value);
        assert_non_null(strstr(value, "\"deadline\":\"2026-11-30T06:02:00.456Z\""));
        cJSON *o = node_obj("spot-a", "aws:///us-east-1a/i-0a00000000000000a");
        cJSON *ann = cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "annotations");
        assert_int_equal(drain_record_read(o, &kind, &deadline, &instance), -ENOENT);
        cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_DRAIN, value);
        assert_int_equal(drain_record_read(o, &kind, &deadline, &instance), 0);
        assert_string_equal(kind, "spot-interruption");
        assert_string_equal(instance, "i-0a00000000000000a");
        assert_non_null(strstr(value, "\"event_id\":\"ev-1\""));
        assert_int_equal(deadline, t + 120 * SEC - 789);
        cJSON_Delete(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_provider_id_parsing),
                cmocka_unit_test(test_record_round_trip),
                cmocka_unit_test_setup_teardown(test_index_follows_node_events, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_then_interruption_upgrades, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_drain_per_node_earlier_deadline_restarts, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_duplicates_absorbed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_lifecycle_left_alone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lifecycle_by_instance, setup, teardown),
                cmocka_unit_test_setup_teardown(test_late_and_far_deadlines, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_retried_then_dropped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resume_and_reset, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_reverted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_late_not_tainted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_scheduled_change_lead_and_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_scheduled_change_canceled_after_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_action_ignore, setup, teardown),
                cmocka_unit_test_setup_teardown(test_action_cordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_action_taint_and_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_action_drain_rebalance, setup, teardown),
                cmocka_unit_test_setup_teardown(test_capacity_reservation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reboot_keeps_prior_cordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reboot_uncordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reboot_during_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fixed_node_and_imds_identity, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resume_recorded, setup, teardown),
                cmocka_unit_test_setup_teardown(test_heartbeat_interval_until, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resume_record_clamped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_action_launch, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
