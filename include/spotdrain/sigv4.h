/* aws/sigv4: AWS Signature Version 4 (header and query auth) and the credentials it signs with. Pure: no
 * I/O. The simulator checks what clients sent with its own code (src/sim/sigv4_check.c), not this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct aws_credentials {
        char *access_key_id;
        char *secret_access_key;  /* never logged */
        char *session_token;      /* NULL for long-term keys; never logged */
        uint64_t expiration_usec; /* wall clock; 0 = does not expire */
        char *source;             /* "env", "web-identity", "pod-identity", "imds", ... (for logs) */
};
void aws_credentials_clear(struct aws_credentials *c); /* wipes the secrets before freeing */

struct sigv4_request {
        const char *method;
        const char *url;            /* absolute URL, query included */
        const char *const *headers; /* NULL-terminated "Name: value"; Host is taken from the URL if absent */
        const void *body;
        size_t body_len;
        const char *region;
        const char *service; /* "sqs", "ec2", "sts", "autoscaling" */
        uint64_t time_usec;  /* signing instant (X-Amz-Date), wall clock */
        /* The defaults (all false) are right for SQS, EC2, STS and Auto Scaling. */
        bool keep_path;              /* S3 style: no dot-segment removal or slash collapsing in the path */
        bool content_sha256_header;  /* header auth also signs and returns x-amz-content-sha256 */
        bool session_token_unsigned; /* X-Amz-Security-Token added after signing (services that ask so) */
};

/* Header auth: the headers to add to the request (NULL-terminated array of malloc'ed "Name: value" strings:
 * X-Amz-Date, X-Amz-Security-Token when there is a session token, Authorization). Free with sigv4_strv_free.
 */
int sigv4_sign_headers(const struct sigv4_request *r, const struct aws_credentials *c, char ***ret_headers);
/* Query auth (presigned URL) valid for expires_seconds. */
int sigv4_presign_url(const struct sigv4_request *r, const struct aws_credentials *c,
                      unsigned expires_seconds, char **ret_url);
void sigv4_strv_free(char **v);
/* sigv4_presign_url, also returning its canonical request and string to sign (for the test suites). */
int sigv4_presign_steps(const struct sigv4_request *r, const struct aws_credentials *c,
                        unsigned expires_seconds, char **ret_url, char **ret_canonical,
                        char **ret_string_to_sign);

/* The steps, exposed for the test suite. */
int sigv4_canonical_request(const struct sigv4_request *r, char **ret_canonical, char **ret_signed_headers);
int sigv4_string_to_sign(const struct sigv4_request *r, const char *canonical_request, char **ret);
int sigv4_signature(const struct sigv4_request *r, const char *secret_access_key, const char *string_to_sign,
                    char ret_hex[65]);
