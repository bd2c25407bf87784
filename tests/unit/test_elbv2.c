/* The ELBv2 client's forms and answers: DescribeTargetHealth as ELBv2 answers it (a draining target with its
 * reason, a healthy one without), as moto answers an instance asked by id after DeregisterTargets (unused,
 * Target.NotRegistered); DescribeTargetGroupAttributes' deregistration delay; malformed answers refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spotdrain/elbv2.h"

#define NS  "xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/\""
#define ARN "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/73e2d6bc24d8a067"

static void test_bodies(void **state)
{
        char *b = NULL;
        const char *ids[] = { "i-0a00000000000000a", "10.0.0.7" };
        assert_int_equal(elbv2_health_body(ARN, ids, 2, &b), 0);
        assert_string_equal(
            b, "Action=DescribeTargetHealth&Version=2015-12-01&TargetGroupArn=arn%3Aaws%3A"
               "elasticloadbalancing%3Aus-east-1%3A123456789012%3Atargetgroup%2Fk8s-shop-web%2F"
               "73e2d6bc24d8a067&Targets.member.1.Id=i-0a00000000000000a&Targets.member.2.Id=10.0."
               "0.7");
        free(b);
        assert_int_equal(elbv2_attributes_body(ARN, &b), 0);
        assert_non_null(
            strstr(b, "Action=DescribeTargetGroupAttributes&Version=2015-12-01&TargetGroupArn="));
        free(b);
        assert_int_equal(elbv2_deregister_body(ARN, ids, 1, &b), 0);
        assert_non_null(strstr(b, "Action=DeregisterTargets&"));
        assert_non_null(strstr(b, "&Targets.member.1.Id=i-0a00000000000000a"));
        assert_null(strstr(b, "member.2"));
        free(b);
        assert_int_equal(elbv2_deregister_body(ARN, ids, 0, &b), -EINVAL);
        assert_int_equal(elbv2_health_body("", ids, 1, &b), -EINVAL);
}

static void test_health(void **state)
{
        static const char xml[] =
            "<DescribeTargetHealthResponse " NS "><DescribeTargetHealthResult><TargetHealthDescriptions>"
            "<member><HealthCheckPort>30080</HealthCheckPort><TargetHealth><State>healthy</State></"
            "TargetHealth>"
            "<Target><Port>30080</Port><Id>i-0b00000000000000b</Id></Target></member>"
            "<member><Target><Id>i-0a00000000000000a</Id><Port>30080</Port></Target><TargetHealth>"
            "<State>draining</State><Reason>Target.DeregistrationInProgress</Reason>"
            "<Description>Target deregistration is in progress</Description></TargetHealth></member>"
            "</TargetHealthDescriptions></DescribeTargetHealthResult><ResponseMetadata><RequestId>x</"
            "RequestId>"
            "</ResponseMetadata></DescribeTargetHealthResponse>";
        struct elbv2_target_health *t = NULL;
        size_t n = 0;
        assert_int_equal(elbv2_parse_health(xml, strlen(xml), &t, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(t[0].id, "i-0b00000000000000b");
        assert_string_equal(t[0].state, "healthy");
        assert_string_equal(t[0].reason, "");
        assert_int_equal(t[0].port, 30080);
        assert_string_equal(t[1].id, "i-0a00000000000000a");
        assert_string_equal(t[1].state, "draining");
        assert_string_equal(t[1].reason, "Target.DeregistrationInProgress");
        free(t);
}

/* moto 5 (responses.py's template): the instance asked by id after DeregisterTargets. */
static void test_health_moto_unused(void **state)
{
        static const char xml[] =
            "<DescribeTargetHealthResponse " NS ">\n  <DescribeTargetHealthResult>\n"
            "    <TargetHealthDescriptions>\n      <member>\n        <HealthCheckPort>80</HealthCheckPort>\n"
            "        <TargetHealth>\n          <State>unused</State>\n"
            "          <Reason>Target.NotRegistered</Reason>\n"
            "          <Description>Target is not registered to the target group</Description>\n"
            "        </TargetHealth>\n        <Target>\n          <Port>80</Port>\n"
            "          <Id>i-0123456789abcdef0</Id>\n        </Target>\n      </member>\n"
            "    </TargetHealthDescriptions>\n  </DescribeTargetHealthResult>\n"
            "</DescribeTargetHealthResponse>";
        struct elbv2_target_health *t = NULL;
        size_t n = 0;
        assert_int_equal(elbv2_parse_health(xml, strlen(xml), &t, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(t[0].state, "unused");
        assert_string_equal(t[0].reason, "Target.NotRegistered");
        free(t);
}

static void test_delay(void **state)
{
        static const char xml[] =
            "<DescribeTargetGroupAttributesResponse " NS "><DescribeTargetGroupAttributesResult><Attributes>"
            "<member><Key>stickiness.enabled</Key><Value>false</Value></member>"
            "<member><Key>deregistration_delay.timeout_seconds</Key><Value>300</Value></member>"
            "</Attributes></DescribeTargetGroupAttributesResult></DescribeTargetGroupAttributesResponse>";
        static const char none[] =
            "<DescribeTargetGroupAttributesResponse " NS "><DescribeTargetGroupAttributesResult><Attributes>"
            "<member><Key>stickiness.enabled</Key><Value>false</Value></member>"
            "</Attributes></DescribeTargetGroupAttributesResult></DescribeTargetGroupAttributesResponse>";
        static const char bad[] =
            "<DescribeTargetGroupAttributesResponse " NS "><DescribeTargetGroupAttributesResult><Attributes>"
            "<member><Key>deregistration_delay.timeout_seconds</Key><Value>5m</Value></member>"
            "</Attributes></DescribeTargetGroupAttributesResult></DescribeTargetGroupAttributesResponse>";
        unsigned s = 0;
        assert_int_equal(elbv2_parse_delay(xml, strlen(xml), &s), 0);
        assert_int_equal(s, 300);
        assert_int_equal(elbv2_parse_delay(none, strlen(none), &s), -ENOENT);
        assert_int_equal(elbv2_parse_delay(bad, strlen(bad), &s), -EBADMSG);
}

static void test_malformed(void **state)
{
        static const char other[] =
            "<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>";
        static const char broken[] = "<DescribeTargetHealthResponse><DescribeTargetHealthResult>";
        static const char no_state[] =
            "<DescribeTargetHealthResponse><DescribeTargetHealthResult><TargetHealthDescriptions><member>"
            "<Target><Id>i-1</Id></Target></member></TargetHealthDescriptions></DescribeTargetHealthResult>"
            "</DescribeTargetHealthResponse>";
        struct elbv2_target_health *t = NULL;
        size_t n = 0;
        assert_int_equal(elbv2_parse_health(other, strlen(other), &t, &n), -EBADMSG);
        assert_int_equal(elbv2_parse_health(broken, strlen(broken), &t, &n), -EBADMSG);
        assert_int_equal(elbv2_parse_health(no_state, strlen(no_state), &t, &n), -EBADMSG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bodies),
                cmocka_unit_test(test_health),
                cmocka_unit_test(test_health_moto_unused),
                cmocka_unit_test(test_delay),
                cmocka_unit_test(test_malformed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
