/* aws/sns: the signature of an SNS notification (issue #15, controller.verify_sns_signature).
 *
 * SNS signs every message it delivers: the signature (Base64, PKCS#1 v1.5 with SHA1 for SignatureVersion 1,
 * SHA256 for 2) is over a canonical string of the message's fields, "Name\nvalue\n" for Message, MessageId,
 * Subject (when present), Timestamp, TopicArn and Type in that order, with the key of the certificate at
 * SigningCertURL. That URL must be the SNS endpoint of the region over HTTPS
 * (https://sns.REGION.amazonaws.com, or $AWS_ENDPOINT_URL_SNS, as aws_endpoint_resolve() gives it) and name
 * a .pem file: anything else could hand us a key of the sender's own. Only notifications are verified; a
 * subscription confirmation is not a notice anyway. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct sns_envelope {
        char *type, *message_id, *topic_arn, *subject, *message, *timestamp;
        char *signature_version, *signature, *signing_cert_url;
};
void sns_envelope_clear(struct sns_envelope *e);

/* 0 with *e filled when body is an SNS Notification (Type "Notification" and a TopicArn), -ENOENT when it is
 * not SNS, -EBADMSG (why says which field) for an SNS body missing what a signature needs. */
int sns_envelope_parse(const char *body, size_t len, struct sns_envelope *e, char *why, size_t why_size);

/* The string SNS signs (malloc'ed). */
char *sns_canonical(const struct sns_envelope *e);

/* Whether e->signing_cert_url may be fetched: endpoint (e.g. "https://sns.us-east-1.amazonaws.com") followed
 * by a path ending in ".pem", no query, no fragment, no "..". */
bool sns_cert_url_allowed(const char *url, const char *endpoint);

/* 0 when e's signature verifies with the RSA key of the PEM certificate; -EBADMSG (why says why: an unknown
 * SignatureVersion, bad Base64, a certificate that does not parse or is expired, a signature that does not
 * match) otherwise. */
int sns_verify(const struct sns_envelope *e, const char *cert_pem, size_t cert_len, char *why,
               size_t why_size);
