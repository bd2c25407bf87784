/* sim/sigv4_check: the simulator's own check of AWS Signature Version 4, written from the AWS documentation
 * apart from the product's signer (src/aws/sigv4.c) so that a mistake in one is caught by the other. It
 * works on the request as the server received it: method, request target (path and query still
 * percent-encoded), header lines, body. Header (Authorization) and query (presigned URL) forms. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The secret of an access key id, or NULL when the key is unknown. */
typedef const char *(*sigv4_secret_lookup_fn)(const char *access_key_id, void *userdata);

struct sim_sigv4_request {
        const char *method;
        /* "/path?query" as received, or an absolute URL (whose authority stands for a missing Host). */
        const char *target;
        const char *const *headers; /* NULL-terminated "Name: value" lines as received */
        const void *body;
        size_t body_len;
        const char *region;  /* the region the server is in; NULL accepts any */
        const char *service; /* the service the server is; NULL accepts any */
        uint64_t now_usec;   /* the server's wall clock; 0 leaves the time unchecked */
        bool s3_path;        /* S3: the path is signed as sent (no dot segments removed, encoded once) */
        bool token_unsigned; /* presigned: X-Amz-Security-Token was added after signing */
};

/* 0 when r carries a valid signature by a key lookup knows; -EACCES wrong signature, scope or time;
 * -EINVAL no or malformed authentication; -ENOKEY unknown key; -ENOMEM. ret_akid (optional) gets the access
 * key id the request named, ret_why (optional) what was refused, with the canonical request and string to
 * sign on a signature mismatch (as AWS says in its SignatureDoesNotMatch). */
int sim_sigv4_check(const struct sim_sigv4_request *r, sigv4_secret_lookup_fn lookup, void *userdata,
                    char **ret_akid, char **ret_why);

/* The steps, for the test suites: the canonical request of r as signed with signed_headers (';'-joined
 * lowercase names), and the signature of string_to_sign (hex, 64 chars + NUL). */
int sim_sigv4_canonical(const struct sim_sigv4_request *r, const char *signed_headers, char **ret);
int sim_sigv4_sign(const char *secret, const char *date8, const char *region, const char *service,
                   const char *string_to_sign, char ret_hex[65]);
