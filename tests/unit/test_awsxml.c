/* The AWS XML reader on the STS and EC2 fixtures (../shared/fixtures or $SPOTDRAIN_FIXTURES) and on
 * malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spotdrain/awsxml.h"
#include "spotdrain/util.h"

static char *fixture(const char *rel, size_t *len)
{
        const char *base = getenv("SPOTDRAIN_FIXTURES") ?: "../shared/fixtures";
        _cleanup_free_ char *path = strprintf("%s/%s", base, rel);
        char *s = NULL;

        assert_non_null(path);
        assert_int_equal(read_file_full(path, 1 << 20, &s, len), 0);
        return s;
}

static void test_sts_answer(void **state)
{
        size_t len;
        _cleanup_free_ char *xml = fixture("sts/assume-role-with-web-identity.response.xml", &len);
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        struct aws_error e = { 0 };

        assert_int_equal(awsxml_parse(xml, len, &x, NULL), 0);
        const struct awsxml_node *root = awsxml_root(x);
        assert_string_equal(awsxml_name(root), "AssumeRoleWithWebIdentityResponse");
        const struct awsxml_node *c = awsxml_find(root, "AssumeRoleWithWebIdentityResult/Credentials");
        assert_non_null(c);
        assert_string_equal(awsxml_find_text(c, "AccessKeyId"), "ASIAEXAMPLEIRSA12345");
        assert_string_equal(awsxml_find_text(c, "SecretAccessKey"),
                            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
        assert_string_equal(awsxml_find_text(c, "Expiration"), "2024-05-14T11:21:53Z");
        assert_string_equal(
            awsxml_find_text(root, "/AssumeRoleWithWebIdentityResponse/ResponseMetadata/RequestId"),
            "ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE");
        assert_null(awsxml_find(root, "/Other/ResponseMetadata"));
        assert_null(awsxml_find_text(c, "Missing"));
        assert_string_equal(
            awsxml_text(awsxml_descendant(root, "Arn")),
            "arn:aws:sts::123456789012:assumed-role/spotguard-irsa/botocore-session-1715682113");
        /* An element with children only has empty text. */
        assert_string_equal(awsxml_text(c), "");
        assert_int_equal(aws_error_parse(xml, len, &e), -ENOMSG);
}

static void test_sts_errors(void **state)
{
        static const struct {
                const char *file, *code, *message_start, *request_id;
        } cases[] = {
                { "sts/error-invalid-identity-token.response.xml", "InvalidIdentityToken",
                  "No OpenIDConnect", "c1a7d3b9-5e2f-4a6c-8d0b-2e4f6a8c0e13" },
                { "sts/error-expired-token.response.xml", "ExpiredTokenException", "Token expired",
                  "7b9d1f3a-5c7e-4a2b-9d4f-6a8c0e2b4d6f" },
                { "sts/error-access-denied.response.xml", "AccessDenied", "Not authorized",
                  "3e5a7c9b-1d2f-4b6a-8c0e-5f7a9b1c3d5e" },
                { "ec2/error-unauthorized-operation.response.xml", "UnauthorizedOperation",
                  "You are not authorized", "5e2b9f70-7a1d-4c3e-b8f6-0d9a2c4e6b81" },
                { "ec2/error-request-limit-exceeded.response.xml", "RequestLimitExceeded", "Request limit",
                  "d4c2b0a9-8e7f-4d6c-b5a4-392817f6e5d4" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                size_t len;
                _cleanup_free_ char *xml = fixture(cases[i].file, &len);
                struct aws_error e = { 0 };
                assert_int_equal(aws_error_parse(xml, len, &e), 0);
                assert_string_equal(e.code, cases[i].code);
                assert_true(startswith(e.message, cases[i].message_start));
                assert_string_equal(e.request_id, cases[i].request_id);
                if (startswith(cases[i].file, "sts/"))
                        assert_string_equal(e.type, "Sender");
                else
                        assert_null(e.type);
                aws_error_clear(&e);
        }
}

/* moto's signature and key errors: ErrorResponse/Errors/Error, read as botocore reads them. */
static void test_error_response_errors(void **state)
{
        static const char xml[] =
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ErrorResponse><Errors><Error>"
            "<Code>InvalidClientTokenId</Code><Message>The security token included in "
            "the request is invalid.</Message><Type>Sender</Type></Error></Errors>"
            "</ErrorResponse>";
        static const char neither[] = "<ErrorResponse><Other><Error><Code>X</Code></Error></Other>"
                                      "</ErrorResponse>";
        struct aws_error e = { 0 };

        assert_int_equal(aws_error_parse(xml, strlen(xml), &e), 0);
        assert_string_equal(e.code, "InvalidClientTokenId");
        assert_string_equal(e.message, "The security token included in the request is invalid.");
        assert_string_equal(e.type, "Sender");
        assert_null(e.request_id);
        aws_error_clear(&e);
        assert_int_equal(aws_error_parse(neither, strlen(neither), &e), -ENOMSG);
}

static void test_ec2_create_fleet(void **state)
{
        size_t len;
        _cleanup_free_ char *xml = fixture("ec2/create-fleet-instant.response.xml", &len);
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        unsigned errors = 0, instances = 0;

        assert_int_equal(awsxml_parse(xml, len, &x, NULL), 0);
        const struct awsxml_node *root = awsxml_root(x);
        assert_string_equal(awsxml_name(root), "CreateFleetResponse");
        assert_true(startswith(awsxml_find_text(root, "fleetId"), "fleet-"));
        AWSXML_FOREACH(item, awsxml_child(root, "errorSet"), "item")
        {
                assert_string_equal(awsxml_find_text(item, "errorCode"), "InsufficientInstanceCapacity");
                assert_string_equal(
                    awsxml_find_text(item, "launchTemplateAndOverrides/launchTemplateSpecification/version"),
                    "3");
                errors++;
        }
        AWSXML_FOREACH(item, awsxml_child(root, "fleetInstanceSet"), "item")
        {
                assert_string_equal(awsxml_find_text(item, "lifecycle"), "spot");
                AWSXML_FOREACH(id, awsxml_child(item, "instanceIds"), "item")
                {
                        assert_string_equal(awsxml_text(id), "i-0fedcba9876543210");
                        instances++;
                }
        }
        assert_int_equal(errors, 2);
        assert_int_equal(instances, 1);
        /* any-name iteration sees every child in order */
        unsigned n = 0;
        AWSXML_FOREACH(c, root, NULL)
        n++;
        assert_int_equal(n, 4);
}

static void test_every_ec2_fixture_parses(void **state)
{
        static const char *files[] = {
                "ec2/create-fleet-instant.response-no-capacity.xml",
                "ec2/describe-instances.response.xml",
                "ec2/describe-instances.response-empty.xml",
                "ec2/error-insufficient-instance-capacity-runinstances.response.xml",
                "ec2/error-invalid-instance-id-not-found.response.xml",
        };
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                size_t len;
                _cleanup_free_ char *xml = fixture(files[i], &len);
                _cleanup_(awsxml_freep) struct awsxml *x = NULL;
                assert_int_equal(awsxml_parse(xml, len, &x, NULL), 0);
                assert_non_null(awsxml_name(awsxml_root(x)));
                assert_true(strlen(awsxml_find_text(awsxml_root(x), "requestId") ?: "x") > 0);
        }
}

static void test_text_entities_prefixes(void **state)
{
        static const char doc[] = "<a:Root xmlns:a=\"urn:x\"><a:V> x &amp; &lt;y&gt; &#x41; </a:V>"
                                  "<W><![CDATA[<raw>]]></W><E/></a:Root>";
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;

        assert_int_equal(awsxml_parse(doc, strlen(doc), &x, NULL), 0);
        assert_string_equal(awsxml_name(awsxml_root(x)), "Root");
        assert_string_equal(awsxml_find_text(awsxml_root(x), "V"), "x & <y> A");
        assert_string_equal(awsxml_find_text(awsxml_root(x), "W"), "<raw>");
        assert_string_equal(awsxml_find_text(awsxml_root(x), "E"), "");
}

static void test_malformed(void **state)
{
        static const char *bad[] = { "", "<a>", "<a></b>", "not xml", "<a>&bogus;</a>", "<a/><b/>" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct awsxml *x = NULL;
                _cleanup_free_ char *why = NULL;
                struct aws_error e = { 0 };
                assert_int_equal(awsxml_parse(bad[i], strlen(bad[i]), &x, &why), -EBADMSG);
                assert_null(x);
                assert_true(startswith(why, "line "));
                assert_int_equal(aws_error_parse(bad[i], strlen(bad[i]), &e), -EBADMSG);
                assert_null(e.code);
        }
}

static void test_depth_limit(void **state)
{
        struct buf b = { 0 };
        struct awsxml *x = NULL;

        for (int i = 0; i < AWSXML_MAX_DEPTH + 1; i++)
                assert_int_equal(buf_printf(&b, "<e%d>", i), 0);
        for (int i = AWSXML_MAX_DEPTH; i >= 0; i--)
                assert_int_equal(buf_printf(&b, "</e%d>", i), 0);
        assert_int_equal(awsxml_parse(b.data, b.len, &x, NULL), -E2BIG);
        assert_null(x);
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sts_answer),
                cmocka_unit_test(test_sts_errors),
                cmocka_unit_test(test_error_response_errors),
                cmocka_unit_test(test_ec2_create_fleet),
                cmocka_unit_test(test_every_ec2_fixture_parses),
                cmocka_unit_test(test_text_entities_prefixes),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_depth_limit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
