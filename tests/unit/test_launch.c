/* controller/launch: a launch lifecycle action is completed with CONTINUE only once its node is Ready, with
 * ABANDON at its timeout, never for another cluster's group (nor, unverified, for an instance that never
 * joined); a throttled completion is sent again and the message finished only after it succeeded; a second
 * delivery joins the wait under way. Fake ops; the real loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/launch.h"
#include "spotdrain/core.h"

#define MS    UINT64_C(1000)
#define BOUND (5 * 1000 * MS)
#define IID   "i-0a00000000000000a"

struct fake {
        struct loop *loop;
        struct launch *la;
        int owned;           /* what ops->owned answers */
        uint64_t owner_id;   /* the id it was asked with */
        char results[8][16]; /* completions asked, in order ("" for a heartbeat is not kept) */
        uint64_t ids[8];
        unsigned n_calls, beats;
        uint64_t tickets[8];
        int errors[8];
        unsigned n_done;
        enum launch_result last;
        bool done;
};

static int op_owned(void *userdata, const struct notice *n, uint64_t id)
{
        struct fake *f = userdata;
        f->owner_id = id;
        return f->owned;
}

static int op_call(void *userdata, const struct notice *n, const char *result, uint64_t id)
{
        struct fake *f = userdata;
        if (!result) {
                f->beats++;
                return 0;
        }
        snprintf(f->results[f->n_calls], sizeof(f->results[0]), "%s", result);
        f->ids[f->n_calls++] = id;
        f->done = true;
        return 0;
}

static void op_finished(void *userdata, const struct notice *n, const char *node, enum launch_result r,
                        const char *why)
{
        ((struct fake *)userdata)->last = r;
}

static void op_ticket(void *userdata, uint64_t ticket, int error)
{
        struct fake *f = userdata;
        f->tickets[f->n_done] = ticket;
        f->errors[f->n_done++] = error;
        f->done = true;
}

static const struct launch_ops ops = {
        .owned = op_owned, .call = op_call, .finished = op_finished, .ticket_done = op_ticket
};

static void setup(struct fake *f, int owned, uint64_t timeout)
{
        *f = (struct fake){ .owned = owned };
        assert_int_equal(loop_new(&f->loop), 0);
        struct launch_options o = { .ready_timeout_usec = timeout,
                                    .backoff_base_usec = MS,
                                    .backoff_max_usec = MS };
        assert_int_equal(launch_new(f->loop, &o, &ops, f, &f->la), 0);
        launch_nodes_synced(f->la);
}

static void teardown(struct fake *f)
{
        launch_free(f->la);
        loop_free(f->loop);
}

static struct notice launch_notice(const char *token)
{
        struct notice n = { .kind = NOTICE_ASG_LIFECYCLE_LAUNCH,
                            .instance_id = IID,
                            .notice_time = clk_now(),
                            .asg_name = "ng-1",
                            .lifecycle_hook_name = "launch" };
        snprintf(n.lifecycle_action_token, sizeof(n.lifecycle_action_token), "%s", token);
        return n;
}

static cJSON *node(bool ready)
{
        char text[512];
        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"name\":\"new-a\"},\"spec\":{\"providerID\":\"aws:///us-east-1a/" IID
                 "\"},"
                 "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                 ready ? "True" : "False");
        return cJSON_Parse(text);
}

static void run(struct fake *f)
{
        f->done = false;
        assert_int_equal(loop_run_until(f->loop, &f->done, BOUND), 0);
}

static void test_continue_after_ready(void **state)
{
        struct fake f;
        struct notice n = launch_notice("tok-1");
        setup(&f, -EINPROGRESS, 600 * 1000 * MS);
        assert_int_equal(launch_submit(f.la, &n, 7), 0);
        assert_int_equal(f.n_done, 0);            /* nothing finished inside submit */
        launch_owned_answer(f.la, f.owner_id, 1); /* the group's tag, looked up */
        cJSON *joined = node(false), *ready = node(true);
        launch_node_update(f.la, joined);
        assert_int_equal(f.n_calls, 0); /* joined, not Ready: nothing sent */
        /* The message delivered again joins the wait. */
        assert_int_equal(launch_submit(f.la, &n, 8), 0);
        launch_node_update(f.la, ready);
        assert_int_equal(f.n_calls, 1);
        assert_string_equal(f.results[0], "CONTINUE");
        assert_int_equal(f.n_done, 0); /* the messages stay until the completion succeeded */
        /* Throttled: sent again after the backoff; then it succeeds and both messages are finished. */
        launch_call_answer(f.la, f.ids[0], -EAGAIN, true, false, "Throttling: Rate exceeded");
        run(&f);
        assert_int_equal(f.n_calls, 2);
        assert_string_equal(f.results[1], "CONTINUE");
        launch_call_answer(f.la, f.ids[1], 0, false, false, NULL);
        assert_int_equal(f.n_done, 2);
        assert_int_equal(f.tickets[0], 7);
        assert_int_equal(f.tickets[1], 8);
        assert_int_equal(f.errors[0], 0);
        assert_int_equal(f.last, LAUNCH_CONTINUED);
        cJSON_Delete(joined);
        cJSON_Delete(ready);
        teardown(&f);
}

static void test_abandon_at_timeout(void **state)
{
        struct fake f;
        struct notice n = launch_notice("tok-2");
        setup(&f, 1, 30 * MS);
        cJSON *joined = node(false);
        assert_int_equal(launch_submit(f.la, &n, 3), 0);
        launch_node_update(f.la, joined);
        run(&f);
        assert_int_equal(f.n_calls, 1);
        assert_string_equal(f.results[0], "ABANDON");
        /* Auto Scaling holds it no more (timed out meanwhile): the message is done with all the same. */
        launch_call_answer(f.la, f.ids[0], -EINVAL, false, true,
                           "ValidationError: No active Lifecycle Action");
        assert_int_equal(f.n_done, 1);
        assert_int_equal(f.errors[0], 0);
        assert_int_equal(f.last, LAUNCH_GONE);
        cJSON_Delete(joined);
        teardown(&f);
}

static void test_foreign(void **state)
{
        struct fake f;
        struct notice n = launch_notice("tok-3");

        /* Another cluster's group: left alone, its message left for that cluster. */
        setup(&f, 0, 600 * 1000 * MS);
        assert_int_equal(launch_submit(f.la, &n, 4), 0);
        run(&f);
        assert_int_equal(f.n_calls, 0);
        assert_int_equal(f.errors[0], -ENXIO);
        assert_int_equal(f.last, LAUNCH_FOREIGN);
        teardown(&f);

        /* Nothing says whose the group is and the instance never joined here: no ABANDON at the timeout. */
        setup(&f, -ENODATA, 20 * MS);
        assert_int_equal(launch_submit(f.la, &n, 5), 0);
        run(&f);
        assert_int_equal(f.n_calls, 0);
        assert_int_equal(f.errors[0], -ENXIO);
        teardown(&f);

        /* Unverified, but its node joined here and is Ready: that proves it ours. */
        setup(&f, -ENODATA, 600 * 1000 * MS);
        cJSON *ready = node(true);
        assert_int_equal(launch_submit(f.la, &n, 6), 0);
        launch_node_update(f.la, ready);
        assert_int_equal(f.n_calls, 0); /* the owner's answer is taken from the loop first */
        run(&f);
        assert_string_equal(f.results[0], "CONTINUE");
        cJSON_Delete(ready);
        teardown(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_continue_after_ready),
                cmocka_unit_test(test_abandon_at_timeout),
                cmocka_unit_test(test_foreign),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
