/* The SQS client against the simulator's SQS surface in-process (manual scenario clock), and against a
 * scripted fake for the answer forms the surface never sends; the surface's query-protocol answers compared
 * with the shapes of ../shared/fixtures/sqs/query-protocol (or $SPOTDRAIN_FIXTURES); SigV4 rejection. */
#include <ctype.h>
#include <expat.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "sim_fixture.h"
#include "spotdrain/core.h"
#include "spotdrain/notice.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/sqs.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"
#include "sqs_sync.h"

static const char scenario[] =
    "name: sqs-test\nmode: controller\nbudget_seconds: 120\nnodes:\n"
    "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot}\n"
    "  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b, capacity_type: spot}\n"
    "  - {name: asg-c, instance_id: i-0c00000000000000c, zone: us-east-1c, capacity_type: on-demand}\n"
    "  - {name: od-1, zone: us-east-1a, capacity_type: on-demand}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 2, requests: {cpu: 100m, memory: 128Mi}}\n"
    "events:\n"
    "  - {at: 5, type: rebalance-recommendation, node: spot-a}\n"
    "  - {at: 10, type: spot-interruption, node: spot-a}\n"
    "  - {at: 100, type: scheduled-change, node: spot-b}\n"
    "  - {at: 100, type: asg-lifecycle-terminate, node: asg-c}\n";

struct fx {
        struct sim_fixture sf;
        struct sim *sim; /* sf's */
        struct sim_sqs *q;
        struct loop *loop;
        struct sqs_client *c;
        struct aws_credentials creds;
};

static const struct aws_credentials *creds_of(void *userdata)
{
        struct fx *f = userdata;
        return &f->creds;
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        sim_fixture_start(&f->sf, scenario,
                          &(struct sim_fixture_options){ .manual_clock = true, .no_server = true });
        f->sim = f->sf.sim;
        assert_int_equal(sim_sqs_start(f->sim, NULL, &f->q), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        f->creds = (struct aws_credentials){ .access_key_id = (char *)SIM_SQS_ACCESS_KEY_ID,
                                             .secret_access_key = (char *)SIM_SQS_SECRET_ACCESS_KEY };
        struct sqs_config cfg = { .queue_url = sim_sqs_queue_url(f->q),
                                  .region = "us-east-1",
                                  .credentials = creds_of,
                                  .credentials_userdata = f };
        assert_int_equal(sqs_client_new(f->loop, &cfg, &f->c), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        sqs_client_free(f->c);
        loop_free(f->loop);
        sim_sqs_stop(f->q);
        sim_fixture_stop(&f->sf);
        free(f);
        return 0;
}

static void set_time(struct fx *f, double t)
{
        sim_lock(f->sim);
        sim_set_now(f->sim, t);
        (void)sim_advance(f->sim);
        sim_unlock(f->sim);
        sim_sqs_kick(f->q);
}

static struct sqs_receive_opts short_poll(int visibility)
{
        struct sqs_receive_opts o = SQS_RECEIVE_OPTS_DEFAULT;
        o.wait_seconds = 0;
        o.visibility_timeout = visibility;
        return o;
}

static size_t receive(struct fx *f, int visibility, struct sqs_message **ret)
{
        struct sqs_receive_opts o = short_poll(visibility);
        struct sqs_result res;
        size_t n = 0;
        int r = sqs_receive_sync(f->c, &o, &res, ret, &n);
        if (r < 0)
                fail_msg("receive: %s %s %s", sqs_error_to_string(res.kind), res.code, res.message);
        return n;
}

static struct notice parse_one(const struct sqs_message *m)
{
        _cleanup_free_ struct notice *list = NULL;
        char reason[256] = "";
        size_t n = 0;
        struct notice out;

        if (notice_parse(m->body, m->body_len, NULL, &list, &n, reason, sizeof(reason)) < 0)
                fail_msg("notice_parse: %s", reason);
        assert_int_equal(n, 1);
        out = list[0];
        return out;
}

/* ---- against the surface ---- */

static void test_receive_events(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL;
        size_t n;
        struct notice a, b;
        uint64_t t10;

        set_time(f, 4);
        assert_int_equal(receive(f, -1, &m), 0);
        assert_null(m);

        set_time(f, 10);
        n = receive(f, -1, &m);
        assert_int_equal(n, 2);
        /* Oldest first: the rebalance recommendation (t=5), then the interruption warning (t=10). */
        a = parse_one(&m[0]);
        b = parse_one(&m[1]);
        assert_int_equal(a.kind, NOTICE_REBALANCE_RECOMMENDATION);
        assert_int_equal(b.kind, NOTICE_SPOT_INTERRUPTION);
        assert_string_equal(b.instance_id, "i-0a00000000000000a");
        assert_string_equal(b.action, "terminate");
        assert_string_equal(b.region, "us-east-1");
        sim_lock(f->sim);
        t10 = sim_wall_usec(f->sim, 10);
        sim_unlock(f->sim);
        assert_int_equal(b.notice_time, t10 / 1000000 * 1000000);
        assert_int_equal(b.deadline, b.notice_time + 120 * 1000000ULL);
        assert_int_equal(m[1].sent_usec, t10 / 1000 * 1000);
        assert_int_equal(m[1].receive_count, 1);
        assert_true(m[1].first_receive_usec > 0);
        assert_non_null(
            strstr(m[1].body, "\"resources\":[\"arn:aws:ec2:us-east-1a:instance/i-0a00000000000000a\"]"));
        assert_string_not_equal(m[0].receipt_handle, m[1].receipt_handle);
        sqs_messages_free(m, n);

        /* Both are in flight now (30 s default visibility). */
        assert_int_equal(receive(f, -1, &m), 0);

        /* Scheduled change and ASG lifecycle at t=100, in their own forms. */
        set_time(f, 100);
        n = receive(f, 0, &m);
        assert_int_equal(n, 4);
        bool health = false, asg = false;
        for (size_t i = 0; i < n; i++) {
                struct notice x = parse_one(&m[i]);
                if (x.kind == NOTICE_SCHEDULED_CHANGE) {
                        health = true;
                        assert_string_equal(x.instance_id, "i-0b00000000000000b");
                        sim_lock(f->sim);
                        assert_int_equal(x.deadline, sim_wall_usec(f->sim, 220) / 1000000 * 1000000);
                        sim_unlock(f->sim);
                } else if (x.kind == NOTICE_ASG_LIFECYCLE_TERMINATE) {
                        asg = true;
                        assert_string_equal(x.instance_id, "i-0c00000000000000c");
                        assert_string_equal(x.lifecycle_hook_name, SIM_SQS_LIFECYCLE_HOOK);
                        assert_string_equal(x.asg_name, sim_sqs_queue_name(f->q));
                } else if (x.kind == NOTICE_SPOT_INTERRUPTION)
                        assert_int_equal(m[i].receive_count, 2);
        }
        assert_true(health && asg);
        sqs_messages_free(m, n);
}

static void test_delete_batch_stale_handle(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL, *m2 = NULL;
        struct sqs_entry_result *er = NULL;
        struct sqs_result res;
        struct sim_sqs_stats st;

        set_time(f, 10);
        assert_int_equal(receive(f, 0, &m), 2);
        /* Received again: the first handles are stale now. */
        assert_int_equal(receive(f, 60, &m2), 2);
        assert_string_equal(m[0].message_id, m2[0].message_id);
        assert_int_equal(m2[0].receive_count, 2);

        struct sqs_delete_entry entries[] = {
                { "stale", m[0].receipt_handle },
                { "fresh", m2[0].receipt_handle },
        };
        assert_int_equal(sqs_delete_batch_sync(f->c, entries, 2, &res, &er), 0);
        assert_int_equal(res.status, 200);
        assert_string_equal(er[0].id, "stale");
        assert_int_equal(er[0].kind, SQS_ERR_RECEIPT_HANDLE);
        assert_int_equal(er[0].error, -ESTALE);
        assert_true(er[0].sender_fault);
        assert_string_equal(er[0].code, "ReceiptHandleIsInvalid");
        assert_string_equal(er[1].id, "fresh");
        assert_int_equal(er[1].error, 0);
        free(er);

        assert_int_equal(sim_sqs_stats(f->q, &st), 0);
        assert_int_equal(st.messages, 1);
        assert_int_equal(st.deleted, 1);

        /* A single delete with the deleted message's handle: ReceiptHandleIsInvalid, as SQS answers. */
        assert_int_equal(sqs_delete_sync(f->c, m2[0].receipt_handle, &res), -ESTALE);
        assert_int_equal(res.status, 404);
        assert_int_equal(res.kind, SQS_ERR_RECEIPT_HANDLE);
        assert_int_equal(sqs_delete_sync(f->c, m2[1].receipt_handle, &res), 0);
        sqs_messages_free(m, 2);
        sqs_messages_free(m2, 2);

        /* Invalid batches are refused before sending. */
        struct sqs_delete_entry dup[] = { { "a", "h1" }, { "a", "h2" } };
        assert_int_equal(sqs_delete_batch_sync(f->c, dup, 2, &res, &er), -EINVAL);
        struct sqs_delete_entry bad[] = { { "no spaces", "h1" } };
        assert_int_equal(sqs_delete_batch_sync(f->c, bad, 1, &res, &er), -EINVAL);
}

static void test_change_visibility(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL, *m2 = NULL;
        struct sqs_result res;
        size_t n;

        set_time(f, 10);
        assert_int_equal(receive(f, 30, &m), 2);
        /* Keep the interruption hidden while its drain runs, past its first visibility timeout. */
        assert_int_equal(sqs_change_visibility_sync(f->c, m[1].receipt_handle, 120, &res), 0);
        set_time(f, 50);
        n = receive(f, 200, &m2);
        assert_int_equal(n, 1);
        assert_string_equal(m2[0].message_id, m[0].message_id); /* only the rebalance came back */
        sqs_messages_free(m2, n);

        set_time(f, 131);
        n = receive(f, 30, &m2);
        /* The interruption again (oldest first), and the t=100 events; the rebalance is still hidden. */
        assert_int_equal(n, 3);
        assert_string_equal(m2[0].message_id, m[1].message_id);
        assert_int_equal(m2[0].receive_count, 2);
        for (size_t i = 0; i < n; i++)
                assert_string_not_equal(m2[i].message_id, m[0].message_id);

        /* The old handle is stale; a message that is visible again is not in flight. */
        assert_int_equal(sqs_change_visibility_sync(f->c, m[1].receipt_handle, 60, &res), -ESTALE);
        assert_int_equal(res.kind, SQS_ERR_RECEIPT_HANDLE);
        assert_int_equal(sqs_change_visibility_sync(f->c, m2[0].receipt_handle, 0, &res), 0);
        assert_int_equal(sqs_change_visibility_sync(f->c, m2[0].receipt_handle, 60, &res), -ESTALE);
        assert_int_equal(res.kind, SQS_ERR_NOT_INFLIGHT);
        assert_int_equal(res.status, 400);
        sqs_messages_free(m, 2);
        sqs_messages_free(m2, n);
}

/* Receivers at once, as the controller's parallel long polls are: a message handed to one is invisible to
 * the others until its visibility timeout ends (then it comes back, its receive count up), and a
 * ChangeMessageVisibilityBatch makes some visible again at once, each entry answered on its own. */
struct par_receive {
        bool done;
        struct sqs_message *msgs;
        size_t n;
};

static void on_par_received(struct sqs_client *c, const struct sqs_result *res, struct sqs_message *msgs,
                            size_t n, void *userdata)
{
        struct par_receive *p = userdata;
        assert_int_equal(res->error, 0);
        p->done = true;
        p->n = n;
        p->msgs = calloc(n ? n : 1, sizeof(*p->msgs));
        assert_non_null(p->msgs);
        for (size_t i = 0; i < n; i++) {
                p->msgs[i] = msgs[i];
                msgs[i] = (struct sqs_message){};
        }
}

static void test_concurrent_receives(void **state)
{
        struct fx *f = *state;
        const char *bodies[25];
        struct par_receive p[3] = {};
        struct sqs_receive_opts o = short_poll(30);
        struct sqs_delete_entry entries[3];
        struct sqs_entry_result *results = NULL;
        struct sqs_message *again = NULL;
        struct sqs_result res;
        char text[25][32];
        size_t total = 0, n;

        set_time(f, 1);
        for (size_t i = 0; i < 25; i++) {
                snprintf(text[i], sizeof(text[i]), "{\"poison\": %zu}", i);
                bodies[i] = text[i];
        }
        assert_int_equal(sqs_send_sync(f->loop, sim_sqs_queue_url(f->q), &f->creds, bodies, 25, 0), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(sqs_receive(f->c, &o, on_par_received, &p[i], NULL), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(loop_run_until(f->loop, &p[i].done, 10 * 1000000ULL), 0);
        /* Every message went to exactly one receiver. */
        for (size_t i = 0; i < 3; i++) {
                total += p[i].n;
                for (size_t k = 0; k < p[i].n; k++)
                        for (size_t j = 0; j <= i; j++)
                                for (size_t l = 0; l < (j == i ? k : p[j].n); l++)
                                        assert_string_not_equal(p[i].msgs[k].message_id,
                                                                p[j].msgs[l].message_id);
        }
        assert_int_equal(total, 25);
        assert_int_equal(receive(f, 30, &again), 0);

        /* Three made visible again at once; one entry's handle is stale, and only it fails. */
        for (size_t i = 0; i < 3; i++)
                entries[i] = (struct sqs_delete_entry){ .id = i == 0   ? "a"
                                                              : i == 1 ? "b"
                                                                       : "c",
                                                        .receipt_handle = p[0].msgs[i].receipt_handle };
        entries[2].receipt_handle = "stale-handle";
        assert_int_equal(sqs_change_visibility_batch_sync(f->c, entries, 3, 0, &res, &results), 0);
        assert_int_equal(results[0].error, 0);
        assert_int_equal(results[1].error, 0);
        assert_int_equal(results[2].kind, SQS_ERR_RECEIPT_HANDLE);
        free(results);
        n = receive(f, 30, &again);
        assert_int_equal(n, 2);
        assert_int_equal(again[0].receive_count, 2);
        sqs_messages_free(again, n);

        /* The rest come back once their visibility ends. */
        set_time(f, 32);
        n = receive(f, 30, &again);
        assert_int_equal(n, 10);
        sqs_messages_free(again, n);
        for (size_t i = 0; i < 3; i++)
                sqs_messages_free(p[i].msgs, p[i].n);
}

static void test_get_attributes(void **state)
{
        struct fx *f = *state;
        struct sqs_attribute *a = NULL;
        struct sqs_message *m = NULL;
        struct sqs_result res;
        size_t n = 0;

        set_time(f, 10);
        assert_int_equal(sqs_get_attributes_sync(f->c, NULL, &res, &a, &n), 0);
        assert_string_equal(sqs_attribute_get(a, n, "QueueArn"),
                            "arn:aws:sqs:us-east-1:123456789012:spotdrain-sqs-test");
        assert_string_equal(sqs_attribute_get(a, n, "ApproximateNumberOfMessages"), "2");
        assert_string_equal(sqs_attribute_get(a, n, "ApproximateNumberOfMessagesNotVisible"), "0");
        assert_string_equal(sqs_attribute_get(a, n, "VisibilityTimeout"), "30");
        sqs_attributes_free(a, n);

        assert_int_equal(receive(f, 30, &m), 2);
        sqs_messages_free(m, 2);
        const char *const names[] = { "ApproximateNumberOfMessagesNotVisible", NULL };
        assert_int_equal(sqs_get_attributes_sync(f->c, names, &res, &a, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(sqs_attribute_get(a, n, "ApproximateNumberOfMessagesNotVisible"), "2");
        sqs_attributes_free(a, n);

        const char *const unknown[] = { "NoSuchAttribute", NULL };
        assert_int_equal(sqs_get_attributes_sync(f->c, unknown, &res, &a, &n), -EINVAL);
        assert_int_equal(res.kind, SQS_ERR_INVALID_REQUEST);
        assert_string_equal(res.code, "InvalidAttributeName");
}

static void test_faults_mapped(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL;
        struct sqs_attribute *a = NULL;
        struct sqs_result res;
        size_t n = 0;
        struct sim_sqs_fault fault = { .access_denied = true };
        struct sqs_receive_opts o = short_poll(-1);

        assert_int_equal(sim_sqs_set_fault(f->q, &fault), 0);
        assert_int_equal(sqs_get_attributes_sync(f->c, NULL, &res, &a, &n), -EACCES);
        assert_int_equal(res.kind, SQS_ERR_ACCESS_DENIED);
        assert_int_equal(res.status, 403);
        assert_string_equal(res.code, "AccessDeniedException");
        assert_true(sqs_error_queue_unreadable(res.kind));
        assert_false(sqs_error_retryable(res.kind));
        assert_non_null(strstr(res.message, "sqs:getqueueattributes"));
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EACCES);

        fault = (struct sim_sqs_fault){ .nonexistent_queue = true };
        assert_int_equal(sim_sqs_set_fault(f->q, &fault), 0);
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -ENOENT);
        assert_int_equal(res.kind, SQS_ERR_NONEXISTENT_QUEUE);
        assert_string_equal(res.code, "QueueDoesNotExist");
        assert_true(sqs_error_queue_unreadable(res.kind));

        fault = (struct sim_sqs_fault){ .error_500 = 1 };
        assert_int_equal(sim_sqs_set_fault(f->q, &fault), 0);
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EIO);
        assert_int_equal(res.kind, SQS_ERR_SERVER);
        assert_true(sqs_error_retryable(res.kind));
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), 0);

        /* A queue URL naming another queue. */
        _cleanup_free_ char *other = strprintf("%s/123456789012/renamed", sim_sqs_url(f->q));
        struct sqs_client *c2 = NULL;
        struct sqs_config cfg = {
                .queue_url = other, .region = "us-east-1", .credentials = creds_of, .credentials_userdata = f
        };
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c2), 0);
        assert_int_equal(sqs_receive_sync(c2, &o, &res, &m, &n), -ENOENT);
        assert_int_equal(res.kind, SQS_ERR_NONEXISTENT_QUEUE);
        sqs_client_free(c2);
}

static void test_duplicates(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL;
        struct sim_sqs_fault fault = { .duplicate_rate = 1 };
        size_t n;

        assert_int_equal(sim_sqs_set_fault(f->q, &fault), 0);
        set_time(f, 10);
        n = receive(f, -1, &m);
        assert_int_equal(n, 4);
        assert_string_equal(m[0].message_id, m[1].message_id);
        assert_string_equal(m[0].body, m[1].body);
        assert_string_not_equal(m[0].receipt_handle, m[1].receipt_handle);
        /* The notice (and so the dispatcher's dedupe key) is the same. */
        assert_string_equal(parse_one(&m[2]).event_id, parse_one(&m[3]).event_id);
        sqs_messages_free(m, n);
}

struct later {
        struct fx *f;
        int waited;
};

static void *move_clock_when_polled(void *userdata)
{
        struct later *l = userdata;
        l->waited = sim_sqs_wait_polls(l->f->q, 1, 10 * 1000000ULL);
        set_time(l->f, 10);
        return NULL;
}

struct recv_state {
        bool done;
        struct sqs_result res;
        size_t n;
        char kind_body[64];
};

static void on_received(struct sqs_client *c, const struct sqs_result *res, struct sqs_message *msgs,
                        size_t n, void *userdata)
{
        struct recv_state *st = userdata;
        st->res = *res;
        st->n = n;
        st->done = true;
}

static void test_long_poll_returns_when_due(void **state)
{
        struct fx *f = *state;
        struct recv_state st = {};
        struct later l = { .f = f };
        pthread_t t;

        set_time(f, 1);
        /* A 20 s long poll at t=1; the clock only moves to t=10 once the poll is waiting. The answer must
         * come then, not when the poll's 20 s would have run out (t=21, which never comes). */
        assert_int_equal(sqs_receive(f->c, NULL, on_received, &st, NULL), 0);
        assert_int_equal(pthread_create(&t, NULL, move_clock_when_polled, &l), 0);
        assert_int_equal(loop_run_until(f->loop, &st.done, 15 * 1000000ULL), 0);
        pthread_join(t, NULL);
        assert_int_equal(l.waited, 0);
        assert_int_equal(st.res.error, 0);
        assert_int_equal(st.n, 2);
}

/* On a running clock (100 scenario seconds per real second) a long poll started before any event wakes
 * by itself when the model's first event falls due, and hands it over then. */
static void test_long_poll_scaled_clock(void **state)
{
        struct fx *f = *state;
        struct sim_fixture sf;
        struct sim *s;
        struct sim_sqs *q = NULL;
        struct sqs_client *c = NULL;
        struct sqs_message *m = NULL;
        struct sqs_result res;
        size_t n = 0;
        double now;

        sim_fixture_start(&sf, scenario, &(struct sim_fixture_options){ .scale = 100, .no_server = true });
        s = sf.sim;
        assert_int_equal(sim_sqs_start(s, NULL, &q), 0);
        struct sqs_config cfg = { .queue_url = sim_sqs_queue_url(q),
                                  .region = "us-east-1",
                                  .credentials = creds_of,
                                  .credentials_userdata = f };
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_int_equal(sqs_receive_sync(c, NULL, &res, &m, &n), 0);
        sim_lock(s);
        now = sim_now(s);
        sim_unlock(s);
        assert_true(n >= 1);
        assert_int_equal(parse_one(&m[0]).kind, NOTICE_REBALANCE_RECOMMENDATION);
        assert_true(now >= 5);
        sqs_messages_free(m, n);
        sqs_client_free(c);
        sim_sqs_stop(q);
        sim_fixture_stop(&sf);
}

static void test_bad_signature(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL;
        struct sqs_result res;
        size_t n = 0;
        struct sqs_receive_opts o = short_poll(-1);
        struct sim_sqs_stats st;

        f->creds.secret_access_key = (char *)"not-the-secret";
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EKEYREJECTED);
        assert_int_equal(res.status, 403);
        assert_int_equal(res.kind, SQS_ERR_AUTH);
        assert_true(sqs_error_queue_unreadable(res.kind));

        f->creds.access_key_id = (char *)"AKIDUNKNOWN";
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EKEYREJECTED);
        assert_string_equal(res.code, "UnrecognizedClientException");

        f->creds.access_key_id = NULL;
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -ENOKEY);
        assert_int_equal(res.kind, SQS_ERR_NO_CREDENTIALS);

        assert_int_equal(sim_sqs_stats(f->q, &st), 0);
        assert_int_equal(st.auth_failures, 2);
        assert_int_equal(st.delivered, 0);
}

static void test_sts_session_tokens(void **state)
{
        struct fx *f = *state;
        struct sim_sts *t = NULL;
        struct sqs_message *m = NULL;
        struct sqs_result res;
        size_t n = 0;
        struct sqs_receive_opts o = short_poll(-1);

        assert_int_equal(sim_sts_start(f->sim, NULL, &t), 0);
        sim_sqs_use_sts(f->q, t);
        set_time(f, 10);
        /* The scenario's long-term key, without a session token. */
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), 0);
        assert_int_equal(n, 2);
        sqs_messages_free(m, n);
        /* The same key with a session token it was never issued with. */
        f->creds.session_token = (char *)"not-a-token";
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EKEYREJECTED);
        assert_int_equal(res.status, 403);
        assert_string_equal(res.code, "UnrecognizedClientException");
        /* A key STS never issued. */
        f->creds.session_token = NULL;
        f->creds.access_key_id = (char *)"ASIANEVERISSUED00000";
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EKEYREJECTED);
        sim_sqs_use_sts(f->q, NULL);
        sim_sts_stop(t);
}

/* ---- the query protocol, as botocore 1.29 speaks it ---- */

static char *fixture(const char *name)
{
        const char *dir = getenv("SPOTDRAIN_FIXTURES") ?: "../shared/fixtures";
        _cleanup_free_ char *path = strprintf("%s/sqs/%s", dir, name);
        char *text = NULL;
        int r = read_file_full(path, 1 << 20, &text, NULL);
        if (r < 0)
                fail_msg("cannot read fixture %s: %s (set SPOTDRAIN_FIXTURES)", path, strerror(-r));
        return text;
}

/* The element structure of an XML document: "/A/B/C" per start tag, and the text of Body elements. */
struct shape {
        struct buf tags;
        struct buf body;
        char path[512];
        bool in_body;
};

static void XMLCALL on_start(void *userdata, const XML_Char *name, const XML_Char **attrs)
{
        struct shape *s = userdata;
        size_t len = strlen(s->path);
        snprintf(s->path + len, sizeof(s->path) - len, "/%s", name);
        assert_int_equal(buf_printf(&s->tags, "%s\n", s->path), 0);
        s->in_body = streq(name, "Body");
}

static void XMLCALL on_end(void *userdata, const XML_Char *name)
{
        struct shape *s = userdata;
        char *slash = strrchr(s->path, '/');
        if (slash)
                *slash = 0;
        s->in_body = false;
}

static void XMLCALL on_text(void *userdata, const XML_Char *text, int len)
{
        struct shape *s = userdata;
        if (s->in_body)
                assert_int_equal(buf_append(&s->body, text, (size_t)len), 0);
}

static void shape_of(const char *xml, struct shape *s)
{
        XML_Parser p = XML_ParserCreate(NULL);

        *s = (struct shape){};
        XML_SetUserData(p, s);
        XML_SetElementHandler(p, on_start, on_end);
        XML_SetCharacterDataHandler(p, on_text);
        if (XML_Parse(p, xml, (int)strlen(xml), 1) != XML_STATUS_OK)
                fail_msg("not well-formed XML (%s): %s", XML_ErrorString(XML_GetErrorCode(p)), xml);
        XML_ParserFree(p);
        assert_int_equal(buf_append(&s->tags, "", 1), 0);
        assert_int_equal(buf_append(&s->body, "", 1), 0);
}

static void shape_free(struct shape *s)
{
        buf_free(&s->tags);
        buf_free(&s->body);
}

static void assert_same_shape(const char *got, const char *fixture_name)
{
        _cleanup_free_ char *want = fixture(fixture_name);
        struct shape a, b;
        shape_of(got, &a);
        shape_of(want, &b);
        if (!streq(a.tags.data, b.tags.data))
                fail_msg("%s: shape differs:\n%s\nwant:\n%s", fixture_name, a.tags.data, b.tags.data);
        assert_true(startswith(got, "<?xml version=\"1.0\"?><"));
        shape_free(&a);
        shape_free(&b);
}

/* POSTs a form signed with the simulator's key (or secret), as botocore does. */
static int query_post(struct fx *f, const char *form, const char *secret, struct http_response *resp)
{
        _cleanup_free_ char *url = strprintf("%s/", sim_sqs_url(f->q));
        const char *headers[8] = { "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL };
        char **signed_headers = NULL;
        struct aws_credentials creds = { .access_key_id = (char *)SIM_SQS_ACCESS_KEY_ID,
                                         .secret_access_key = (char *)secret };
        struct sigv4_request sr = { .method = "POST",
                                    .url = url,
                                    .headers = headers,
                                    .body = form,
                                    .body_len = strlen(form),
                                    .region = "us-east-1",
                                    .service = "sqs",
                                    .time_usec = now_realtime_usec() };
        size_t n = 1;
        int r;

        assert_int_equal(sigv4_sign_headers(&sr, &creds, &signed_headers), 0);
        for (size_t i = 0; signed_headers[i] && n < 7; i++)
                headers[n++] = signed_headers[i];
        struct http_request req = { .method = "POST", .url = url, .headers = headers, .body = form };
        r = http_send_sync(f->loop, &req, resp);
        sigv4_strv_free(signed_headers);
        return r;
}

static char *xml_text_of(const char *xml, const char *tag)
{
        _cleanup_free_ char *open = strprintf("<%s>", tag), *close = strprintf("</%s>", tag);
        const char *a = strstr(xml, open), *b;
        if (!a)
                return NULL;
        a += strlen(open);
        b = strstr(a, close);
        return b ? strndup(a, (size_t)(b - a)) : NULL;
}

static char *form_escape(const char *s)
{
        struct buf b = {};
        for (; *s; s++) {
                if (isalnum((unsigned char)*s) || strchr("-_.~", *s))
                        assert_int_equal(buf_append(&b, s, 1), 0);
                else
                        assert_int_equal(buf_printf(&b, "%%%02X", (unsigned char)*s), 0);
        }
        assert_int_equal(buf_append(&b, "", 1), 0);
        return b.data;
}

static void test_query_protocol(void **state)
{
        struct fx *f = *state;
        struct http_response resp = {};
        _cleanup_free_ char *qurl = form_escape(sim_sqs_queue_url(f->q)), *form = NULL, *handle = NULL,
                            *ehandle = NULL;
        struct shape s;
        struct sqs_message *m = NULL;

        set_time(f, 4);
        form = strprintf("Action=ReceiveMessage&Version=2012-11-05&QueueUrl=%s&AttributeName.1=All"
                         "&MaxNumberOfMessages=1&WaitTimeSeconds=0",
                         qurl);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_true(startswith(resp.content_type, "text/xml"));
        assert_same_shape(resp.body, "query-protocol/receive-message.response-empty.xml");
        http_response_clear(&resp);

        set_time(f, 10);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_same_shape(resp.body, "query-protocol/receive-message.response.xml");
        /* The Body decodes to the exact EventBridge JSON, and MD5OfBody is its digest. */
        shape_of(resp.body, &s);
        assert_non_null(strstr(s.body.data, "\"detail-type\":\"EC2 Instance Rebalance Recommendation\""));
        shape_free(&s);
        handle = xml_text_of(resp.body, "ReceiptHandle");
        assert_non_null(handle);
        http_response_clear(&resp);

        /* DeleteMessage with that handle (it holds '+', '/' and '=', which the form must carry). */
        ehandle = form_escape(handle);
        free(form);
        form =
            strprintf("Action=DeleteMessage&Version=2012-11-05&QueueUrl=%s&ReceiptHandle=%s", qurl, ehandle);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_same_shape(resp.body, "query-protocol/delete-message.response.xml");
        http_response_clear(&resp);
        /* Gone: the JSON client now only finds the interruption. */
        assert_int_equal(receive(f, -1, &m), 1);
        assert_int_equal(parse_one(&m[0]).kind, NOTICE_SPOT_INTERRUPTION);
        sqs_messages_free(m, 1);

        /* A queue that does not exist. */
        free(qurl);
        qurl = form_escape(sim_sqs_url(f->q));
        free(form);
        form =
            strprintf("Action=ReceiveMessage&Version=2012-11-05&QueueUrl=%s%%2F123456789012%%2Fnope", qurl);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 400);
        assert_same_shape(resp.body, "query-protocol/error-nonexistent-queue.response.xml");
        assert_non_null(strstr(resp.body, "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>"));
        http_response_clear(&resp);

        /* A wrong secret: SignatureDoesNotMatch in the query error form. */
        assert_int_equal(query_post(f, form, "wrong", &resp), 0);
        assert_int_equal(resp.status, 403);
        assert_non_null(strstr(resp.body, "<Code>SignatureDoesNotMatch</Code>"));
        http_response_clear(&resp);

        /* GetQueueUrl. */
        free(form);
        form = strprintf("Action=GetQueueUrl&Version=2012-11-05&QueueName=%s", sim_sqs_queue_name(f->q));
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 200);
        _cleanup_free_ char *got = xml_text_of(resp.body, "QueueUrl");
        assert_string_equal(got, sim_sqs_queue_url(f->q));
        http_response_clear(&resp);
}

/* sqs_throttle_rate: the surface answers as SQS throttles, in both forms and both protocols, and the client
 * classifies each as a retryable throttle (not an unreadable queue). */
static void test_throttle(void **state)
{
        struct fx *f = *state;
        struct sqs_message *m = NULL;
        struct sqs_attribute *a = NULL;
        struct sqs_result res;
        struct sim_sqs_stats st;
        struct http_response resp = {};
        size_t n = 0;
        unsigned throttled = 0;
        struct sqs_receive_opts o = short_poll(-1);
        _cleanup_free_ char *qurl = form_escape(sim_sqs_queue_url(f->q)), *form = NULL;

        assert_int_equal(sim_sqs_set_fault(f->q, &(struct sim_sqs_fault){ .throttle_rate = 1.5 }), -EINVAL);
        assert_int_equal(sim_sqs_set_fault(f->q, &(struct sim_sqs_fault){ .throttle_rate = 1 }), 0);
        /* The modeled RequestThrottled, 403: not AccessDenied for all its status. */
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), -EBUSY);
        assert_int_equal(res.kind, SQS_ERR_THROTTLED);
        assert_int_equal(res.status, 403);
        assert_string_equal(res.code, "RequestThrottled");
        assert_true(sqs_error_retryable(res.kind));
        assert_false(sqs_error_queue_unreadable(res.kind));
        /* Then the common ThrottlingException, 400. */
        assert_int_equal(sqs_get_attributes_sync(f->c, NULL, &res, &a, &n), -EBUSY);
        assert_int_equal(res.kind, SQS_ERR_THROTTLED);
        assert_int_equal(res.status, 400);
        assert_string_equal(res.code, "ThrottlingException");

        /* The query protocol (the aws CLI of Debian 12): the same codes in the XML error form. */
        form = strprintf("Action=ReceiveMessage&Version=2012-11-05&QueueUrl=%s&WaitTimeSeconds=0", qurl);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 403);
        assert_non_null(strstr(resp.body, "<Type>Sender</Type><Code>RequestThrottled</Code>"));
        http_response_clear(&resp);
        assert_int_equal(query_post(f, form, SIM_SQS_SECRET_ACCESS_KEY, &resp), 0);
        assert_int_equal(resp.status, 400);
        assert_non_null(strstr(resp.body, "<Code>ThrottlingException</Code>"));
        http_response_clear(&resp);

        /* A share: about half of 200 calls with rate 0.5, the same ones for the same seed. */
        assert_int_equal(sim_sqs_set_fault(f->q, &(struct sim_sqs_fault){ .throttle_rate = 0.5, .seed = 9 }),
                         0);
        for (int i = 0; i < 200; i++) {
                int r = sqs_receive_sync(f->c, &o, &res, &m, &n);
                if (r == -EBUSY)
                        throttled++;
                else
                        assert_int_equal(r, 0);
        }
        assert_in_range(throttled, 60, 140);
        assert_int_equal(sim_sqs_stats(f->q, &st), 0);
        assert_int_equal(st.throttled, 4 + throttled);

        /* No rate, no throttle. */
        assert_int_equal(sim_sqs_set_fault(f->q, &(struct sim_sqs_fault){}), 0);
        assert_int_equal(sqs_receive_sync(f->c, &o, &res, &m, &n), 0);
}

/* ---- against a scripted fake: the answer forms the surface does not produce ---- */

struct fake {
        unsigned status;
        const char *body;
        unsigned requests;
        char target[128];
};

static int fake_handler(void *userdata, const struct sim_http_request *rq)
{
        struct fake *fk = userdata;
        const char *t = MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "X-Amz-Target");
        fk->requests++;
        snprintf(fk->target, sizeof(fk->target), "%s", t ? t : "");
        return sim_http_reply(rq->connection, fk->status, "application/x-amz-json-1.0", strdup(fk->body));
}

static void test_fake_answers(void **state)
{
        struct fx *f = *state;
        struct fake fk = { .status = 200, .body = "{}" };
        struct sim_http *h = NULL;
        struct sqs_client *c = NULL;
        struct sqs_message *m = NULL;
        struct sqs_result res;
        size_t n = 99;
        struct sqs_receive_opts o = SQS_RECEIVE_OPTS_DEFAULT;
        static const char *const empties[] = { "{}", "", "  \n", "{\"Messages\":null}",
                                               "{\"Messages\":[]}" };

        assert_int_equal(sim_http_start(NULL, fake_handler, &fk, &h), 0);
        _cleanup_free_ char *qurl = strprintf("%s/123456789012/spotguard-interruptions", sim_http_url(h));
        struct sqs_config cfg = {
                .queue_url = qurl, .region = "us-east-1", .credentials = creds_of, .credentials_userdata = f
        };
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);

        for (size_t i = 0; i < ARRAY_SIZE(empties); i++) {
                fk.body = empties[i];
                n = 99;
                assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), 0);
                assert_int_equal(n, 0);
                assert_null(m);
        }
        assert_string_equal(fk.target, "AmazonSQS.ReceiveMessage");

        /* The fixture's answer: two messages, MD5s checked, attributes read. */
        _cleanup_free_ char *full = fixture("receive-message.response.json");
        fk.body = full;
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(m[0].message_id, "5fea7756-0ea4-451a-a703-a558b933e274");
        assert_int_equal(m[0].sent_usec, 1715682113512ULL * 1000);
        assert_int_equal(m[0].first_receive_usec, 1715682114070ULL * 1000);
        assert_int_equal(m[0].receive_count, 1);
        assert_int_equal(parse_one(&m[1]).kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        sqs_messages_free(m, n);

        /* A body that does not match its MD5 fails the call. */
        _cleanup_free_ char *tampered = strdup(full);
        char *p = strstr(tampered, "terminate\\\"}}");
        assert_non_null(p);
        p[0] = 'T';
        fk.body = tampered;
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), -EBADMSG);
        assert_int_equal(res.kind, SQS_ERR_PROTOCOL);
        fk.body = "[1,2]";
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), -EBADMSG);
        fk.body = "{\"Messages\":{}}";
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), -EBADMSG);

        /* The error fixtures, with their statuses. */
        static const struct {
                const char *file;
                unsigned status;
                enum sqs_error kind;
                int error;
                const char *code;
        } errors[] = {
                { "error-access-denied.response.json", 403, SQS_ERR_ACCESS_DENIED, -EACCES,
                  "AccessDeniedException" },
                { "error-queue-does-not-exist.response.json", 400, SQS_ERR_NONEXISTENT_QUEUE, -ENOENT,
                  "QueueDoesNotExist" },
                { "error-receipt-handle-invalid.response.json", 404, SQS_ERR_RECEIPT_HANDLE, -ESTALE,
                  "ReceiptHandleIsInvalid" },
                { "error-invalid-parameter-value.response.json", 400, SQS_ERR_INVALID_REQUEST, -EINVAL,
                  "InvalidParameterValueException" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(errors); i++) {
                _cleanup_free_ char *body = fixture(errors[i].file);
                fk.body = body;
                fk.status = errors[i].status;
                assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), errors[i].error);
                assert_int_equal(res.kind, errors[i].kind);
                assert_int_equal(res.status, errors[i].status);
                assert_string_equal(res.code, errors[i].code);
                assert_true(strlen(res.message) > 0);
        }
        /* No error body: the status decides. */
        fk.body = "<html>oops</html>";
        fk.status = 503;
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), -EIO);
        assert_int_equal(res.kind, SQS_ERR_SERVER);
        fk.status = 403;
        assert_int_equal(sqs_receive_sync(c, &o, &res, &m, &n), -EACCES);

        /* DeleteMessageBatch: the fixture's partial failure, and an entry the answer forgets. */
        _cleanup_free_ char *batch = fixture("delete-message-batch.response.json");
        struct sqs_entry_result *er = NULL;
        struct sqs_delete_entry entries[] = { { "m0", "h0" }, { "m1", "h1" }, { "m2", "h2" } };
        fk.body = batch;
        fk.status = 200;
        assert_int_equal(sqs_delete_batch_sync(c, entries, 3, &res, &er), 0);
        assert_int_equal(er[0].error, 0);
        assert_int_equal(er[1].kind, SQS_ERR_RECEIPT_HANDLE);
        assert_true(er[1].sender_fault);
        assert_int_equal(er[2].kind, SQS_ERR_PROTOCOL);
        free(er);
        assert_string_equal(fk.target, "AmazonSQS.DeleteMessageBatch");

        /* Actions without output: an empty body or "{}". */
        fk.body = "";
        assert_int_equal(sqs_change_visibility_sync(c, "h", 60, &res), 0);
        assert_string_equal(fk.target, "AmazonSQS.ChangeMessageVisibility");
        fk.body = "{}";
        assert_int_equal(sqs_delete_sync(c, "h", &res), 0);

        sqs_client_free(c);
        sim_http_stop(h);
}

/* ---- configuration ---- */

static void test_endpoint_and_region(void **state)
{
        struct fx *f = *state;
        struct sqs_client *c = NULL;
        struct sqs_config cfg = { .queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/q",
                                  .credentials = creds_of,
                                  .credentials_userdata = f };

        unsetenv("AWS_ENDPOINT_URL_SQS");
        unsetenv("AWS_ENDPOINT_URL");
        unsetenv("AWS_REGION");
        unsetenv("AWS_DEFAULT_REGION");
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_endpoint(c), "https://sqs.eu-west-1.amazonaws.com");
        assert_string_equal(sqs_client_region(c), "eu-west-1");
        c = sqs_client_free(c);

        cfg.queue_url = "https://ap-south-1.queue.amazonaws.com/123456789012/q";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_region(c), "ap-south-1");
        c = sqs_client_free(c);

        /* The environment's endpoint beats the queue URL's host; a flag beats the environment. */
        setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/", 1);
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_endpoint(c), "http://127.0.0.1:9");
        c = sqs_client_free(c);
        setenv("AWS_ENDPOINT_URL_SQS", "http://localhost:4566", 1);
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_endpoint(c), "http://localhost:4566");
        c = sqs_client_free(c);
        cfg.endpoint = "https://vpce-1.sqs.us-east-1.vpce.amazonaws.com";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_endpoint(c), "https://vpce-1.sqs.us-east-1.vpce.amazonaws.com");
        c = sqs_client_free(c);
        unsetenv("AWS_ENDPOINT_URL_SQS");
        unsetenv("AWS_ENDPOINT_URL");

        /* No region anywhere. */
        cfg.endpoint = NULL;
        cfg.queue_url = "http://127.0.0.1:1/123456789012/q";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), -EDESTADDRREQ);
        setenv("AWS_DEFAULT_REGION", "us-west-2", 1);
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        assert_string_equal(sqs_client_region(c), "us-west-2");
        c = sqs_client_free(c);
        unsetenv("AWS_DEFAULT_REGION");

        cfg.queue_url = "sqs.us-east-1.amazonaws.com/1/q";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), -EINVAL);
        cfg.queue_url = "https://sqs.us-east-1.amazonaws.com";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), -EINVAL);

        /* Plain http to a host that is not loopback is refused by core when sending. */
        cfg.queue_url = "http://sqs.us-east-1.amazonaws.com/123456789012/q";
        assert_int_equal(sqs_client_new(f->loop, &cfg, &c), 0);
        struct sqs_result res;
        struct sqs_message *m = NULL;
        size_t n;
        assert_int_equal(sqs_receive_sync(c, NULL, &res, &m, &n), -EPROTONOSUPPORT);
        c = sqs_client_free(c);

        /* Option ranges. */
        struct sqs_receive_opts o = SQS_RECEIVE_OPTS_DEFAULT;
        o.wait_seconds = 21;
        assert_int_equal(sqs_receive(f->c, &o, on_received, NULL, NULL), -EINVAL);
        o = SQS_RECEIVE_OPTS_DEFAULT;
        o.max_messages = 11;
        assert_int_equal(sqs_receive(f->c, &o, on_received, NULL, NULL), -EINVAL);
        assert_int_equal(sqs_change_visibility(f->c, "h", 43201, NULL, NULL, NULL), -EINVAL);
}

static void test_error_codes(void **state)
{
        assert_int_equal(sqs_error_from_code("com.amazon.coral.access#AccessDeniedException", 403),
                         SQS_ERR_ACCESS_DENIED);
        assert_int_equal(sqs_error_from_code("AWS.SimpleQueueService.NonExistentQueue", 400),
                         SQS_ERR_NONEXISTENT_QUEUE);
        assert_int_equal(sqs_error_from_code("com.amazonaws.sqs#QueueDoesNotExist", 400),
                         SQS_ERR_NONEXISTENT_QUEUE);
        assert_int_equal(sqs_error_from_code("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
                         SQS_ERR_INVALID_REQUEST);
        assert_int_equal(sqs_error_from_code("ExpiredToken", 400), SQS_ERR_EXPIRED_TOKEN);
        assert_int_equal(sqs_error_from_code("com.amazon.coral.availability#ThrottlingException", 400),
                         SQS_ERR_THROTTLED);
        /* Every throttle SQS sends (its modeled RequestThrottled and OverLimit at 403, KMS throttling the
         * queue's encryption in both protocols' spellings) is retried and never makes the queue unreadable.
         */
        static const char *const throttles[] = {
                "com.amazonaws.sqs#RequestThrottled", "RequestThrottled",        "OverLimit",
                "com.amazonaws.sqs#KmsThrottled",     "KMS.ThrottlingException", "Throttling"
        };
        for (size_t i = 0; i < ARRAY_SIZE(throttles); i++) {
                enum sqs_error e = sqs_error_from_code(throttles[i], i < 3 ? 403 : 400);
                assert_int_equal(e, SQS_ERR_THROTTLED);
                assert_true(sqs_error_retryable(e));
                assert_false(sqs_error_queue_unreadable(e));
        }
        /* The other KMS errors are the key refusing the role. */
        assert_int_equal(sqs_error_from_code("KMS.AccessDeniedException", 400), SQS_ERR_ACCESS_DENIED);
        assert_int_equal(sqs_error_from_code(NULL, 429), SQS_ERR_THROTTLED);
        assert_int_equal(sqs_error_from_code("SomethingNew", 400), SQS_ERR_OTHER);
        assert_int_equal(sqs_error_from_code(NULL, 502), SQS_ERR_SERVER);
        assert_string_equal(sqs_error_to_string(SQS_ERR_ACCESS_DENIED), "access-denied");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_receive_events, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_batch_stale_handle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_change_visibility, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_receives, setup, teardown),
                cmocka_unit_test_setup_teardown(test_get_attributes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_faults_mapped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_throttle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_poll_returns_when_due, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_poll_scaled_clock, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_signature, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sts_session_tokens, setup, teardown),
                cmocka_unit_test_setup_teardown(test_query_protocol, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fake_answers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_endpoint_and_region, setup, teardown),
                cmocka_unit_test(test_error_codes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
