/* aws/sns: SNS notification signatures (SignatureVersion 1 and 2), the canonical string, the certificate URL
 * rule, and the envelope's fields. The signatures are made here with a key of the test's own, as SNS makes
 * them: PKCS#1 v1.5 over the canonical string. */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spotdrain/sns.h"
#include "spotdrain/util.h"
#include "tls_certs.h"

static char *cert_pem, *key_pem;

static int group_setup(void **state)
{
        tls_test_cert_rsa("sns.us-east-1.amazonaws.com", &cert_pem, &key_pem);
        return 0;
}

static int group_teardown(void **state)
{
        free(cert_pem);
        free(key_pem);
        return 0;
}

/* Base64 of the signature of text with the test key. */
static char *sign(const char *text, const EVP_MD *md)
{
        BIO *b = BIO_new_mem_buf(key_pem, -1);
        EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned char sig[512];
        size_t len = sizeof(sig);

        assert_non_null(k);
        assert_int_equal(EVP_DigestSignInit(ctx, NULL, md, NULL, k), 1);
        assert_int_equal(EVP_DigestSign(ctx, sig, &len, (const unsigned char *)text, strlen(text)), 1);
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(k);
        BIO_free(b);
        return base64_encode(sig, len);
}

static struct sns_envelope envelope(const char *version, const char *subject)
{
        struct sns_envelope e = {
                .type = strdup("Notification"),
                .message_id = strdup("c8a8e5d2-7b4f-5d8e-9a3c-2f1b0e9d8c7a"),
                .topic_arn = strdup("arn:aws:sns:us-east-1:123456789012:spot-events"),
                .subject = subject ? strdup(subject) : NULL,
                .message = strdup("{\"detail-type\":\"EC2 Spot Instance Interruption Warning\"}"),
                .timestamp = strdup("2024-05-14T10:21:53.612Z"),
                .signature_version = strdup(version),
                .signing_cert_url =
                    strdup("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem"),
        };
        _cleanup_free_ char *text = sns_canonical(&e);
        e.signature = sign(text, streq(version, "1") ? EVP_sha1() : EVP_sha256());
        return e;
}

static void test_canonical(void **state)
{
        struct sns_envelope e = envelope("2", NULL);
        _cleanup_free_ char *text = sns_canonical(&e);
        assert_string_equal(
            text, "Message\n{\"detail-type\":\"EC2 Spot Instance Interruption Warning\"}\n"
                  "MessageId\nc8a8e5d2-7b4f-5d8e-9a3c-2f1b0e9d8c7a\n"
                  "Timestamp\n2024-05-14T10:21:53.612Z\n"
                  "TopicArn\narn:aws:sns:us-east-1:123456789012:spot-events\nType\nNotification\n");
        sns_envelope_clear(&e);
        e = envelope("2", "spot");
        _cleanup_free_ char *with = sns_canonical(&e);
        assert_non_null(
            strstr(with, "MessageId\nc8a8e5d2-7b4f-5d8e-9a3c-2f1b0e9d8c7a\nSubject\nspot\nTimestamp\n"));
        sns_envelope_clear(&e);
}

static void test_verify(void **state)
{
        char why[256];
        static const char *const versions[] = { "1", "2" };

        for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
                struct sns_envelope e = envelope(versions[i], i ? "subject" : NULL);
                assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), 0);
                /* Any field changed after signing: refused. */
                free(e.message);
                e.message = strdup("{\"detail-type\":\"EC2 Spot Instance Interruption Warning\",\"x\":1}");
                assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), -EBADMSG);
                assert_non_null(strstr(why, "does not match"));
                sns_envelope_clear(&e);
        }

        struct sns_envelope e = envelope("2", NULL);
        free(e.signature_version);
        e.signature_version = strdup("3");
        assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), -EBADMSG);
        assert_non_null(strstr(why, "SignatureVersion '3'"));
        free(e.signature_version);
        e.signature_version = strdup("1"); /* signed with SHA256, claimed SHA1 */
        assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), -EBADMSG);
        free(e.signature_version);
        e.signature_version = strdup("2");
        free(e.signature);
        e.signature = strdup("@@not base64@@");
        assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), -EBADMSG);
        assert_non_null(strstr(why, "Base64"));
        sns_envelope_clear(&e);

        /* A certificate with another key, or an EC key, or no certificate at all. */
        char *other_cert, *other_key, *ec_cert, *ec_key;
        tls_test_cert_rsa("other", &other_cert, &other_key);
        tls_test_cert("ec", NULL, &ec_cert, &ec_key);
        e = envelope("2", NULL);
        assert_int_equal(sns_verify(&e, other_cert, strlen(other_cert), why, sizeof(why)), -EBADMSG);
        assert_int_equal(sns_verify(&e, ec_cert, strlen(ec_cert), why, sizeof(why)), -EBADMSG);
        assert_non_null(strstr(why, "no RSA key"));
        assert_int_equal(sns_verify(&e, "junk", 4, why, sizeof(why)), -EBADMSG);
        sns_envelope_clear(&e);
        free(other_cert);
        free(other_key);
        free(ec_cert);
        free(ec_key);
}

static void test_cert_url(void **state)
{
        const char *ep = "https://sns.us-east-1.amazonaws.com";

        assert_true(sns_cert_url_allowed(
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-01.pem", ep));
        assert_false(
            sns_cert_url_allowed("http://sns.us-east-1.amazonaws.com/SimpleNotificationService-01.pem", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com.evil.example/x.pem", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com@evil.example/x.pem", ep));
        assert_false(sns_cert_url_allowed("https://sns.eu-west-1.amazonaws.com/x.pem", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com/x.pem?redirect=1", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com/../x.pem", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com/x.txt", ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com/.pem", ep));
        assert_false(sns_cert_url_allowed(NULL, ep));
        assert_false(sns_cert_url_allowed("https://sns.us-east-1.amazonaws.com/x.pem", NULL));
        /* $AWS_ENDPOINT_URL_SNS, as resolved: the same rule under it. */
        assert_true(sns_cert_url_allowed("http://127.0.0.1:8000/certs/sns.pem", "http://127.0.0.1:8000"));
        assert_false(sns_cert_url_allowed("http://127.0.0.1:80001/certs/sns.pem", "http://127.0.0.1:8000"));
}

static void test_envelope(void **state)
{
        const char *dir = getenv("SPOTDRAIN_FIXTURES") ?: "../shared/fixtures";
        char path[512], why[256];
        snprintf(path, sizeof(path), "%s/eventbridge/sns-wrapped-spot.json", dir);
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        struct sns_envelope e;

        assert_int_equal(read_file_full(path, 1 << 20, &body, &len), 0);
        assert_int_equal(sns_envelope_parse(body, len, &e, why, sizeof(why)), 0);
        assert_string_equal(e.type, "Notification");
        assert_string_equal(e.topic_arn, "arn:aws:sns:us-east-1:123456789012:spotguard-events");
        assert_string_equal(e.signature_version, "1");
        assert_null(e.subject);
        assert_non_null(strstr(e.message, "EC2 Spot Instance Interruption Warning"));
        assert_true(sns_cert_url_allowed(e.signing_cert_url, "https://sns.us-east-1.amazonaws.com"));
        /* The fixture's signature is AWS's documentation example, not a real one: it does not verify. */
        assert_int_equal(sns_verify(&e, cert_pem, strlen(cert_pem), why, sizeof(why)), -EBADMSG);
        sns_envelope_clear(&e);

        static const char *bare = "{\"detail-type\":\"EC2 Spot Instance Interruption Warning\"}";
        assert_int_equal(sns_envelope_parse(bare, strlen(bare), &e, why, sizeof(why)), -ENOENT);
        static const char *confirm =
            "{\"Type\":\"SubscriptionConfirmation\",\"TopicArn\":\"arn:aws:sns:x\"}";
        assert_int_equal(sns_envelope_parse(confirm, strlen(confirm), &e, why, sizeof(why)), -EBADMSG);
        static const char *unsigned_ =
            "{\"Type\":\"Notification\",\"TopicArn\":\"arn:aws:sns:x\",\"MessageId\":\"m\","
            "\"Message\":\"{}\",\"Timestamp\":\"t\"}";
        assert_int_equal(sns_envelope_parse(unsigned_, strlen(unsigned_), &e, why, sizeof(why)), -EBADMSG);
        assert_string_equal(why, "SNS notification without SignatureVersion");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_canonical),
                cmocka_unit_test(test_verify),
                cmocka_unit_test(test_cert_url),
                cmocka_unit_test(test_envelope),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
