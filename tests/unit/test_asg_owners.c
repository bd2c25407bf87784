/* controller/asg: which Auto Scaling groups are this cluster's (the kubernetes.io/cluster/NAME tag): the
 * answer's reading, one lookup per group kept for later, retries of a throttled lookup, a refused one
 * not kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube_fake.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"

/* A DescribeAutoScalingGroups answer for group with one tag (key NULL: none). */
static char *answer(const char *group, const char *key, const char *value)
{
        char *s = strprintf(
            "<DescribeAutoScalingGroupsResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\">"
            "<DescribeAutoScalingGroupsResult><AutoScalingGroups><member>"
            "<AutoScalingGroupName>%s</AutoScalingGroupName><MinSize>0</MinSize><MaxSize>3</MaxSize>"
            "<Tags>%s%s%s%s%s</Tags></member></AutoScalingGroups></DescribeAutoScalingGroupsResult>"
            "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></"
            "DescribeAutoScalingGroupsResponse>",
            group, key ? "<member><ResourceId>g</ResourceId><Key>" : "", key ? key : "",
            key ? "</Key><Value>" : "", key ? value : "", key ? "</Value></member>" : "");
        assert_non_null(s);
        return s;
}

static int tagged(const char *group, const char *key, const char *value, const char *asked)
{
        _cleanup_free_ char *a = answer(group, key, value);
        return asg_group_tagged(a, strlen(a), asked, "prod");
}

static void test_tagged(void **state)
{
        assert_int_equal(tagged("ng-1", "kubernetes.io/cluster/prod", "owned", "ng-1"), 1);
        assert_int_equal(tagged("ng-1", "kubernetes.io/cluster/prod", "shared", "ng-1"), 1);
        /* Another cluster's tag, a prefix of ours, or none at all. */
        assert_int_equal(tagged("ng-1", "kubernetes.io/cluster/staging", "owned", "ng-1"), 0);
        assert_int_equal(tagged("ng-1", "kubernetes.io/cluster/pro", "owned", "ng-1"), 0);
        assert_int_equal(tagged("ng-1", "kubernetes.io/cluster/prod-2", "owned", "ng-1"), 0);
        assert_int_equal(tagged("ng-1", NULL, NULL, "ng-1"), 0);
        /* The tag on another group of the answer is not this group's. */
        assert_int_equal(tagged("ng-2", "kubernetes.io/cluster/prod", "owned", "ng-1"), 0);
        static const char none[] = "<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult>"
                                   "<AutoScalingGroups/></DescribeAutoScalingGroupsResult>"
                                   "</DescribeAutoScalingGroupsResponse>";
        assert_int_equal(asg_group_tagged(none, strlen(none), "ng-1", "prod"), 0);
        assert_int_equal(asg_group_tagged("<nope", 5, "ng-1", "prod"), -EBADMSG);
        assert_int_equal(asg_group_tagged("<a/>", 4, "ng-1", "prod"), -EBADMSG);
        assert_int_equal(asg_group_tagged(none, strlen(none), "", "prod"), -EINVAL);
}

static const struct aws_credentials *creds_fn(void *userdata)
{
        return userdata;
}

struct got {
        int verdict;
        unsigned calls;
};

static void on_owned(int owned, void *userdata)
{
        struct got *g = userdata;
        g->verdict = owned;
        g->calls++;
}

struct fixture {
        struct kfake *fake;
        struct loop *loop;
        struct asg_client *asg;
        struct asg_owners *owners;
        struct aws_credentials creds;
};

static void fixture_start(struct fixture *f)
{
        f->creds =
            (struct aws_credentials){ .access_key_id = (char *)"AKID", .secret_access_key = (char *)"s" };
        assert_int_equal(kfake_start(&f->fake), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(
            asg_client_new(f->loop, kfake_url(f->fake), "us-east-1", creds_fn, &f->creds, &f->asg), 0);
        assert_int_equal(asg_owners_new(f->loop, f->asg, "prod", &f->owners), 0);
}

static void fixture_stop(struct fixture *f)
{
        asg_owners_free(f->owners);
        asg_client_free(f->asg);
        loop_free(f->loop);
        kfake_stop(f->fake);
}

static void wait_answer(struct fixture *f, struct got *g)
{
        bool never = false;
        for (int i = 0; i < 5000 && g->calls == 0; i++)
                loop_run_until(f->loop, &never, 2 * 1000);
        assert_int_equal(g->calls, 1);
}

static void test_lookup_kept(void **state)
{
        _cleanup_free_ char *ours = answer("ng-1", "kubernetes.io/cluster/prod", "owned");
        _cleanup_free_ char *theirs = answer("ng-2", "kubernetes.io/cluster/staging", "owned");
        struct fixture f = {};
        struct got g1 = {}, g2 = {}, g3 = {};
        struct asg_owners_stats st;

        fixture_start(&f);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, ours), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, theirs), 0);
        /* Two actions of one group wait on one lookup. */
        assert_int_equal(asg_owners_check(f.owners, "ng-1", on_owned, &g1), -EINPROGRESS);
        assert_int_equal(asg_owners_check(f.owners, "ng-1", on_owned, &g2), -EINPROGRESS);
        wait_answer(&f, &g1);
        assert_int_equal(g1.verdict, 1);
        assert_int_equal(g2.calls, 1);
        assert_int_equal(g2.verdict, 1);
        assert_int_equal(kfake_count(f.fake), 1);
        const struct kfake_request *rq = kfake_request(f.fake, 0);
        assert_non_null(strstr(rq->body, "Action=DescribeAutoScalingGroups&Version=2011-01-01"));
        assert_non_null(strstr(rq->body, "AutoScalingGroupNames.member.1=ng-1"));
        assert_non_null(strstr(rq->authorization, "/us-east-1/autoscaling/aws4_request"));
        /* Known now: answered at once, nothing sent. */
        assert_int_equal(asg_owners_check(f.owners, "ng-1", on_owned, &g3), 1);
        assert_int_equal(g3.calls, 0);
        assert_int_equal(kfake_count(f.fake), 1);

        /* Another cluster's group: 0, kept too. */
        assert_int_equal(asg_owners_check(f.owners, "ng-2", on_owned, &g3), -EINPROGRESS);
        wait_answer(&f, &g3);
        assert_int_equal(g3.verdict, 0);
        assert_int_equal(asg_owners_check(f.owners, "ng-2", on_owned, &g3), 0);
        assert_int_equal(kfake_count(f.fake), 2);
        asg_owners_stats(f.owners, &st);
        assert_int_equal(st.lookups, 2);
        assert_int_equal(st.cached, 2);
        fixture_stop(&f);
}

static void test_lookup_retried(void **state)
{
        _cleanup_free_ char *ours = answer("ng-1", "kubernetes.io/cluster/prod", "owned");
        static const char throttled[] = "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
                                        "<Message>Rate exceeded</Message></Error><RequestId>r</RequestId>"
                                        "</ErrorResponse>";
        static const char denied[] =
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
            "<Message>not authorized to perform: autoscaling:DescribeAutoScalingGroups"
            "</Message></Error><RequestId>r</RequestId></ErrorResponse>";
        struct fixture f = {};
        struct got g = {}, h = {};
        struct asg_owners_stats st;

        fixture_start(&f);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 400, throttled), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 503, "<ErrorResponse/>"), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, ours), 0);
        assert_int_equal(asg_owners_check(f.owners, "ng-1", on_owned, &g), -EINPROGRESS);
        wait_answer(&f, &g);
        assert_int_equal(g.verdict, 1);
        assert_int_equal(kfake_count(f.fake), 3);
        asg_owners_stats(f.owners, &st);
        assert_int_equal(st.retries, 2);

        /* Refused: not retried, not kept, the waiter told the error; the next action asks again. */
        g = (struct got){};
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 403, denied), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 403, denied), 0);
        assert_int_equal(asg_owners_check(f.owners, "ng-9", on_owned, &g), -EINPROGRESS);
        wait_answer(&f, &g);
        assert_int_equal(g.verdict, -EACCES);
        assert_int_equal(kfake_count(f.fake), 4);
        assert_int_equal(asg_owners_check(f.owners, "ng-9", on_owned, &h), -EINPROGRESS);
        wait_answer(&f, &h);
        assert_int_equal(kfake_count(f.fake), 5);
        asg_owners_stats(f.owners, &st);
        assert_int_equal(st.failures, 2);

        /* A lookup still in flight when the cache goes: its waiter hears -ECANCELED, once. */
        g = (struct got){};
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, ours), 0);
        assert_int_equal(asg_owners_check(f.owners, "ng-3", on_owned, &g), -EINPROGRESS);
        f.owners = asg_owners_free(f.owners);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.verdict, -ECANCELED);
        fixture_stop(&f);
}

/* ---- the hooks' HeartbeatTimeout (DescribeLifecycleHooks) ---- */

static char *hooks_answer(const char *hook, const char *timeout, const char *global)
{
        char *s = strprintf(
            "<DescribeLifecycleHooksResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\">"
            "<DescribeLifecycleHooksResult><LifecycleHooks><member><LifecycleHookName>%s</LifecycleHookName>"
            "<AutoScalingGroupName>ng-1</AutoScalingGroupName><HeartbeatTimeout>%s</HeartbeatTimeout>%s%s%s"
            "<DefaultResult>ABANDON</DefaultResult></member></LifecycleHooks></DescribeLifecycleHooksResult>"
            "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeLifecycleHooksResponse>",
            hook, timeout, global ? "<GlobalTimeout>" : "", global ? global : "",
            global ? "</GlobalTimeout>" : "");
        assert_non_null(s);
        return s;
}

static int timeouts(const char *hook, const char *timeout, const char *global, const char *asked,
                    uint64_t *hb, uint64_t *gl)
{
        _cleanup_free_ char *a = hooks_answer(hook, timeout, global);
        return asg_hook_timeouts(a, strlen(a), asked, hb, gl);
}

static void test_hook_timeouts(void **state)
{
        uint64_t hb = 0, gl = 0;

        assert_int_equal(timeouts("drain", "120", "12000", "drain", &hb, &gl), 0);
        assert_int_equal(hb, 120 * 1000000ULL);
        assert_int_equal(gl, 12000 * 1000000ULL);
        /* No GlobalTimeout: Auto Scaling's min(100 x HeartbeatTimeout, 48 h). */
        assert_int_equal(timeouts("drain", "3600", NULL, "drain", &hb, &gl), 0);
        assert_int_equal(gl, 172800 * 1000000ULL);
        assert_int_equal(timeouts("other", "120", NULL, "drain", &hb, &gl), -ENOENT);
        assert_int_equal(timeouts("drain", "", NULL, "drain", &hb, &gl), -EBADMSG);
        assert_int_equal(timeouts("drain", "0", NULL, "drain", &hb, &gl), -EBADMSG);
        assert_int_equal(timeouts("drain", "12x", NULL, "drain", &hb, &gl), -EBADMSG);
        assert_int_equal(asg_hook_timeouts("<a/>", 4, "drain", &hb, &gl), -EBADMSG);
}

static void on_hooks(void *userdata)
{
        (*(unsigned *)userdata)++;
}

static void test_hooks_kept(void **state)
{
        _cleanup_free_ char *ours = hooks_answer("drain", "120", "12000");
        static const char throttled[] = "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
                                        "<Message>Rate exceeded</Message></Error><RequestId>r</RequestId>"
                                        "</ErrorResponse>";
        struct fixture f = {};
        struct asg_hooks *h = NULL;
        unsigned changed = 0;
        uint64_t hb = 0, gl = 0;
        bool never = false;

        fixture_start(&f);
        assert_int_equal(asg_hooks_new(f.loop, f.asg, on_hooks, &changed, &h), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 400, throttled), 0);
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, ours), 0);
        assert_int_equal(asg_hooks_get(h, "ng-1", "drain", &hb, &gl), -EINPROGRESS);
        assert_int_equal(asg_hooks_get(h, "ng-1", "drain", &hb, &gl), -EINPROGRESS);
        for (int i = 0; i < 5000 && changed == 0; i++)
                loop_run_until(f.loop, &never, 2 * 1000);
        assert_int_equal(changed, 1);
        /* The throttled call was retried; the answer is kept: nothing more is sent. */
        assert_int_equal(kfake_count(f.fake), 2);
        const struct kfake_request *rq = kfake_request(f.fake, 1);
        assert_non_null(strstr(rq->body, "Action=DescribeLifecycleHooks&Version=2011-01-01"));
        assert_non_null(strstr(rq->body, "AutoScalingGroupName=ng-1"));
        assert_non_null(strstr(rq->body, "LifecycleHookNames.member.1=drain"));
        assert_int_equal(asg_hooks_get(h, "ng-1", "drain", &hb, &gl), 0);
        assert_int_equal(hb, 120 * 1000000ULL);
        assert_int_equal(gl, 12000 * 1000000ULL);
        assert_int_equal(kfake_count(f.fake), 2);
        /* A lookup in flight when the cache goes is dropped, its callback not called. */
        assert_int_equal(kfake_answer(f.fake, "POST", "/", 200, ours), 0);
        assert_int_equal(asg_hooks_get(h, "ng-2", "drain", &hb, &gl), -EINPROGRESS);
        asg_hooks_free(h);
        assert_int_equal(changed, 1);
        fixture_stop(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tagged),         cmocka_unit_test(test_lookup_kept),
                cmocka_unit_test(test_lookup_retried), cmocka_unit_test(test_hook_timeouts),
                cmocka_unit_test(test_hooks_kept),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
