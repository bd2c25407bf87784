/* controller/trust: every reason a notice from the queue is refused, the queue URL's account, and the alert
 * limiter. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/trust.h"

#define SEC UINT64_C(1000000)

static struct notice spot(const char *account, const char *region)
{
        struct notice n = { .kind = NOTICE_SPOT_INTERRUPTION };
        snprintf(n.instance_id, sizeof(n.instance_id), "i-0a00000000000000a");
        snprintf(n.account, sizeof(n.account), "%s", account);
        snprintf(n.region, sizeof(n.region), "%s", region);
        return n;
}

static void test_queue_account(void **state)
{
        char a[NOTICE_ACCOUNT_SIZE];

        assert_int_equal(trust_queue_account("https://sqs.us-east-1.amazonaws.com/123456789012/spot", a), 0);
        assert_string_equal(a, "123456789012");
        assert_int_equal(trust_queue_account("http://127.0.0.1:4566/000000000000/q?x=1", a), 0);
        assert_string_equal(a, "000000000000");
        /* No account in the path: none is trusted by the URL. */
        assert_int_equal(trust_queue_account("https://sqs.us-east-1.amazonaws.com/spot", a), -EINVAL);
        assert_string_equal(a, "");
        assert_int_equal(trust_queue_account("https://sqs.us-east-1.amazonaws.com/12345678901/q", a),
                         -EINVAL);
        assert_int_equal(trust_queue_account("https://sqs.us-east-1.amazonaws.com/1234567890123/q", a),
                         -EINVAL);
        assert_int_equal(trust_queue_account("https://sqs.us-east-1.amazonaws.com/12345678901x/q", a),
                         -EINVAL);
        assert_int_equal(trust_queue_account("no scheme/123456789012/q", a), -EINVAL);
        assert_int_equal(trust_queue_account("https://host", a), -EINVAL);
        assert_int_equal(trust_queue_account(NULL, a), -EINVAL);
}

static void test_verdicts(void **state)
{
        char *allowed[] = { (char *)"222222222222", NULL };
        struct trust_policy p = { .queue_account = "111111111111",
                                  .allowed_accounts = allowed,
                                  .region = "us-east-1" };
        char why[256];
        struct notice n;

        n = spot("111111111111", "us-east-1");
        assert_int_equal(trust_check(&p, &n, why, sizeof(why)), TRUST_OK);
        assert_string_equal(why, "");
        n = spot("222222222222", "us-east-1"); /* controller.allowed_accounts */
        assert_int_equal(trust_check(&p, &n, why, sizeof(why)), TRUST_OK);
        n = spot("111111111111", ""); /* a body naming no region came through the cluster's queue */
        assert_int_equal(trust_check(&p, &n, NULL, 0), TRUST_OK);

        n = spot("", "us-east-1");
        assert_int_equal(trust_check(&p, &n, why, sizeof(why)), TRUST_NO_ACCOUNT);
        assert_non_null(strstr(why, "names no account"));
        n = spot("333333333333", "us-east-1");
        assert_int_equal(trust_check(&p, &n, why, sizeof(why)), TRUST_FOREIGN_ACCOUNT);
        assert_non_null(strstr(why, "account 333333333333, not the queue's (111111111111)"));
        n = spot("111111111111", "eu-west-1");
        assert_int_equal(trust_check(&p, &n, why, sizeof(why)), TRUST_FOREIGN_REGION);
        assert_non_null(strstr(why, "region eu-west-1, the cluster is in us-east-1"));

        /* A queue URL without an account: only the allowed list counts. */
        struct trust_policy q = { .queue_account = "", .allowed_accounts = NULL, .region = NULL };
        n = spot("111111111111", "eu-west-1");
        assert_int_equal(trust_check(&q, &n, why, sizeof(why)), TRUST_FOREIGN_ACCOUNT);
        assert_non_null(strstr(why, "queue's (unknown)"));
        /* No cluster region known: any region. */
        q.allowed_accounts = allowed;
        n = spot("222222222222", "eu-west-1");
        assert_int_equal(trust_check(&q, &n, why, sizeof(why)), TRUST_OK);

        assert_string_equal(trust_verdict_label(TRUST_NO_ACCOUNT), "no-account");
        assert_string_equal(trust_verdict_label(TRUST_FOREIGN_ACCOUNT), "foreign-account");
        assert_string_equal(trust_verdict_label(TRUST_FOREIGN_REGION), "foreign-region");
        assert_null(trust_verdict_label(_TRUST_VERDICT_MAX));
}

static void test_limiter(void **state)
{
        static struct trust_limiter l;
        uint64_t t = 1000 * SEC;

        assert_true(trust_limiter_allow(&l, "333333333333", TRUST_FOREIGN_ACCOUNT, t));
        assert_false(trust_limiter_allow(&l, "333333333333", TRUST_FOREIGN_ACCOUNT, t + SEC));
        /* Another reason or another sender is alerted on its own. */
        assert_true(trust_limiter_allow(&l, "333333333333", TRUST_FOREIGN_REGION, t + SEC));
        assert_true(trust_limiter_allow(&l, "444444444444", TRUST_FOREIGN_ACCOUNT, t + SEC));
        /* After the interval, once again. */
        assert_false(trust_limiter_allow(&l, "333333333333", TRUST_FOREIGN_ACCOUNT,
                                         t + TRUST_ALERT_INTERVAL_USEC - 1));
        assert_true(
            trust_limiter_allow(&l, "333333333333", TRUST_FOREIGN_ACCOUNT, t + TRUST_ALERT_INTERVAL_USEC));
        /* A flood of senders pushes out the oldest, never more than the table holds. */
        char sender[16];
        for (int i = 0; i < 2 * TRUST_LIMITER_SLOTS; i++) {
                snprintf(sender, sizeof(sender), "%012d", 500000 + i);
                assert_true(
                    trust_limiter_allow(&l, sender, TRUST_FOREIGN_ACCOUNT, t + 2 * SEC + (uint64_t)i));
        }
        snprintf(sender, sizeof(sender), "%012d", 500000 + 2 * TRUST_LIMITER_SLOTS - 1);
        assert_false(trust_limiter_allow(&l, sender, TRUST_FOREIGN_ACCOUNT, t + 3 * SEC + 200));
}

/* The newer kinds meet the same checks: a Capacity Reservation warning parsed from its documented form is
 * trusted from the queue's account and region only. */
static void test_capacity_reservation_checked(void **state)
{
        static const char body[] =
            "{\"version\":\"0\",\"id\":\"12345678-1234-1234-1234-123456789012\",\"detail-type\":\"EC2 "
            "Capacity Reservation Instance Interruption Warning\",\"source\":\"aws.ec2\",\"account\":"
            "\"123456789012\",\"time\":\"2025-11-20T10:00:00Z\",\"region\":\"us-east-1\",\"detail\":{"
            "\"instance-id\":\"i-0a00000000000000a\",\"instance-action\":\"terminate\"}}";
        struct trust_policy p = { .queue_account = "123456789012", .region = "us-east-1" };
        struct notice *v = NULL;
        size_t n = 0;
        char why[256];

        assert_int_equal(notice_parse(body, strlen(body), NULL, &v, &n, why, sizeof(why)), 0);
        assert_int_equal(n, 1);
        assert_int_equal(v[0].kind, NOTICE_CAPACITY_RESERVATION_INTERRUPTION);
        assert_int_equal(trust_check(&p, &v[0], why, sizeof(why)), TRUST_OK);
        snprintf(p.queue_account, sizeof(p.queue_account), "111111111111");
        assert_int_equal(trust_check(&p, &v[0], why, sizeof(why)), TRUST_FOREIGN_ACCOUNT);
        assert_non_null(
            strstr(why, "capacity-reservation-interruption notice comes from account 123456789012"));
        snprintf(p.queue_account, sizeof(p.queue_account), "123456789012");
        p.region = "eu-west-1";
        assert_int_equal(trust_check(&p, &v[0], why, sizeof(why)), TRUST_FOREIGN_REGION);
        free(v);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_queue_account),
                cmocka_unit_test(test_verdicts),
                cmocka_unit_test(test_limiter),
                cmocka_unit_test(test_capacity_reservation_checked),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
