/* controller/managed: controller.managed_tag. The tag's filter; a message parked until its instance is
 * looked up (one DescribeInstances, filtered on the tag), then passed or refused from what is kept;
 * throttling retried, a refusal not kept, several messages for one instance sharing one lookup. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/managed.h"
#include "kube_fake.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"

#define LISTED                                                                                           \
        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r"     \
        "</requestId><reservationSet><item><reservationId>r-1</reservationId><instancesSet><item>"       \
        "<instanceId>i-0a00000000000000a</instanceId><instanceState><code>16</code><name>running</name>" \
        "</instanceState></item></instancesSet></item></reservationSet></DescribeInstancesResponse>"
#define NONE                                                                                         \
        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r" \
        "</requestId><reservationSet/></DescribeInstancesResponse>"
#define EC2_ERROR(code)                        \
        "<Response><Errors><Error><Code>" code \
        "</Code><Message>m</Message></Error></Errors><RequestID>r</RequestID></Response>"

static void test_filter(void **state)
{
        char *f = NULL;

        assert_int_equal(managed_tag_filter("spotdrain.io/managed", &f), 0);
        assert_string_equal(f, "tag-key=spotdrain.io/managed");
        free(f);
        assert_int_equal(managed_tag_filter("team=ml", &f), 0);
        assert_string_equal(f, "tag:team=ml");
        free(f);
        assert_int_equal(managed_tag_filter("", &f), -EINVAL);
        assert_int_equal(managed_tag_filter("=x", &f), -EINVAL);
        assert_int_equal(managed_tag_filter(NULL, &f), -EINVAL);
}

static const struct aws_credentials *creds_fn(void *userdata)
{
        return userdata;
}

struct resumed {
        unsigned calls;
        int error;
        char id[32];
};

static void on_resume(void *userdata, struct sqs_message *m, int error)
{
        struct resumed *r = userdata;
        r->calls++;
        r->error = error;
        snprintf(r->id, sizeof(r->id), "%s", m->message_id);
        sqs_message_clear(m);
}

struct fixture {
        struct kfake *fake;
        struct loop *loop;
        struct ec2_client *ec2;
        struct managed_gate *gate;
        struct aws_credentials creds;
};

static void start(struct fixture *f, const char *tag)
{
        f->creds =
            (struct aws_credentials){ .access_key_id = (char *)"AKID", .secret_access_key = (char *)"s" };
        assert_int_equal(kfake_start(&f->fake), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(ec2_client_new(f->loop,
                                        &(struct ec2_config){ .endpoint = kfake_url(f->fake),
                                                              .region = "us-east-1",
                                                              .credentials = creds_fn,
                                                              .userdata = &f->creds },
                                        &f->ec2),
                         0);
        assert_int_equal(managed_gate_new(f->loop, f->ec2, tag, &f->gate), 0);
}

static void stop(struct fixture *f)
{
        managed_gate_free(f->gate);
        ec2_client_free(f->ec2);
        loop_free(f->loop);
        kfake_stop(f->fake);
}

static struct sqs_message message(const char *id)
{
        struct sqs_message m = { .message_id = strdup(id),
                                 .receipt_handle = strdup("h"),
                                 .body = strdup("{}") };
        assert_non_null(m.message_id);
        return m;
}

static struct notice spot(const char *instance)
{
        struct notice n = { .kind = NOTICE_SPOT_INTERRUPTION };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", instance);
        return n;
}

static enum managed_verdict check(struct fixture *f, const char *msg_id, const struct notice *n,
                                  struct resumed *r, char *why, size_t why_size)
{
        struct sqs_message m = message(msg_id);
        enum managed_verdict v = managed_gate_check(f->gate, &m, n, 1, on_resume, r, why, why_size);
        if (v == MANAGED_PARKED)
                assert_null(m.message_id); /* moved into the gate */
        sqs_message_clear(&m);
        return v;
}

static void wait_resumed(struct fixture *f, const struct resumed *r, unsigned calls)
{
        bool never = false;
        for (int i = 0; i < 5000 && r->calls < calls; i++)
                loop_run_until(f->loop, &never, 2 * 1000);
        assert_int_equal(r->calls, calls);
}

static void test_parked_then_kept(void **state)
{
        struct notice a = spot("i-0a00000000000000a");
        struct notice test = { .kind = NOTICE_ASG_TEST_NOTIFICATION };
        struct resumed r1 = {}, r2 = {};
        struct fixture f = {};
        struct managed_stats st;
        char why[256] = "";

        start(&f, "spotdrain.io/managed");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, LISTED), 0);
        /* Two messages for one instance while it is looked up: one call, both handed back. */
        assert_int_equal(check(&f, "m-1", &a, &r1, why, sizeof(why)), MANAGED_PARKED);
        assert_int_equal(check(&f, "m-2", &a, &r2, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r1, 1);
        wait_resumed(&f, &r2, 1);
        assert_int_equal(r1.error, 0);
        assert_string_equal(r1.id, "m-1");
        assert_string_equal(r2.id, "m-2");
        assert_int_equal(kfake_count(f.fake), 1);
        const struct kfake_request *rq = kfake_request(f.fake, 0);
        assert_non_null(strstr(rq->body, "Action=DescribeInstances"));
        assert_non_null(strstr(rq->body, "InstanceId.1=i-0a00000000000000a"));
        assert_non_null(strstr(rq->body, "Filter.1.Name=tag-key&Filter.1.Value.1=spotdrain.io%2Fmanaged"));
        /* Known now: passed at once, nothing sent. */
        assert_int_equal(check(&f, "m-3", &a, &r1, why, sizeof(why)), MANAGED_PASS);
        assert_int_equal(kfake_count(f.fake), 1);
        /* A notice that names no instance needs no lookup. */
        assert_int_equal(check(&f, "m-4", &test, &r1, why, sizeof(why)), MANAGED_PASS);
        assert_int_equal(kfake_count(f.fake), 1);
        managed_gate_stats(f.gate, &st);
        assert_int_equal(st.lookups, 1);
        assert_int_equal(st.managed, 1);
        stop(&f);
}

static void test_unmanaged_refused(void **state)
{
        struct notice a = spot("i-0a00000000000000a");
        struct resumed r = {};
        struct fixture f = {};
        char why[256] = "";

        start(&f, "team=ml");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, NONE), 0);
        assert_int_equal(check(&f, "m-1", &a, &r, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r, 1);
        assert_int_equal(r.error, 0);
        assert_non_null(
            strstr(kfake_request(f.fake, 0)->body, "Filter.1.Name=tag%3Ateam&Filter.1.Value.1=ml"));
        /* Handed back, it is refused from what was kept. */
        assert_int_equal(check(&f, "m-1", &a, &r, why, sizeof(why)), MANAGED_REFUSE);
        assert_non_null(strstr(why, "instance i-0a00000000000000a does not carry the tag team=ml"));
        assert_int_equal(kfake_count(f.fake), 1);

        /* No such instance carries no tag either. */
        struct notice b = spot("i-0b00000000000000b");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 400, EC2_ERROR("InvalidInstanceID.NotFound")), 0);
        r = (struct resumed){};
        assert_int_equal(check(&f, "m-2", &b, &r, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r, 1);
        assert_int_equal(check(&f, "m-2", &b, &r, why, sizeof(why)), MANAGED_REFUSE);
        stop(&f);
}

static void test_retried_and_failed(void **state)
{
        struct notice a = spot("i-0a00000000000000a");
        struct resumed r = {};
        struct fixture f = {};
        struct managed_stats st;
        char why[256] = "";

        start(&f, "spotdrain.io/managed");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 503, EC2_ERROR("RequestLimitExceeded")), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, LISTED), 0);
        assert_int_equal(check(&f, "m-1", &a, &r, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(kfake_count(f.fake), 2);
        managed_gate_stats(f.gate, &st);
        assert_int_equal(st.retries, 1);

        /* Refused permission: handed back with the error at once, and not kept. */
        struct notice b = spot("i-0b00000000000000b");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 403, EC2_ERROR("UnauthorizedOperation")), 0);
        r = (struct resumed){};
        assert_int_equal(check(&f, "m-2", &b, &r, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r, 1);
        assert_true(r.error < 0);
        assert_int_equal(kfake_count(f.fake), 3);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, NONE), 0);
        r = (struct resumed){};
        assert_int_equal(check(&f, "m-2", &b, &r, why, sizeof(why)), MANAGED_PARKED);
        wait_resumed(&f, &r, 1);
        assert_int_equal(kfake_count(f.fake), 4);
        managed_gate_stats(f.gate, &st);
        assert_int_equal(st.failures, 1);

        /* Parked when the gate goes: dropped (the queue brings the message back), no callback. */
        struct notice c = spot("i-0c00000000000000c");
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, NONE), 0);
        r = (struct resumed){};
        assert_int_equal(check(&f, "m-3", &c, &r, why, sizeof(why)), MANAGED_PARKED);
        f.gate = managed_gate_free(f.gate);
        assert_int_equal(r.calls, 0);
        stop(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_filter),
                cmocka_unit_test(test_parked_then_kept),
                cmocka_unit_test(test_unmanaged_refused),
                cmocka_unit_test(test_retried_and_failed),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
