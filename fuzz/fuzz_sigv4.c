/* libFuzzer target for SigV4 (src/aws/sigv4.c): canonicalization, header and query signing, and the
 * simulator's own verifier (src/sim/sigv4_check.c), on requests made of arbitrary bytes.
 *
 * Input: one flag byte, then "METHOD\nURL\nHeader: value\n...\n\nBODY" (the header lines end at the first
 * empty line; everything after it is the body). Flags: bit 0 keep_path, bit 1 content_sha256_header,
 * bit 2 a session token, bit 3 session_token_unsigned.
 * Properties checked besides memory safety: a request signed here verifies (header and presigned form),
 * unless the input already carries the headers or query parameters that signing adds.
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_sigv4/)
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spotdrain/sigv4.h"
#include "sim/sigv4_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADERS 64
#define SECRET      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static const char *lookup(const char *access_key_id, void *userdata)
{
        (void)userdata;
        return access_key_id && strcmp(access_key_id, "AKIDEXAMPLE") == 0 ? SECRET : NULL;
}

/* The simulator's own verifier (src/sim/sigv4_check.c) on r as a server would receive it. */
static int verify(const struct sigv4_request *r, char **why)
{
        struct sim_sigv4_request s = { .method = r->method,
                                       .target = r->url,
                                       .headers = r->headers,
                                       .body = r->body,
                                       .body_len = r->body_len,
                                       .region = r->region,
                                       .service = r->service,
                                       .s3_path = r->keep_path,
                                       .token_unsigned = r->session_token_unsigned };
        return sim_sigv4_check(&s, lookup, NULL, NULL, why);
}

static bool mentions_signing(const char *s)
{
        static const char *const words[] = { "authorization", "x-amz-" };
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strcasestr(s, words[i]))
                        return true;
        return false;
}

/* A header line the HTTP grammar allows: a token (RFC 9110 tchar) before the colon. Other names ("a;b",
 * "x,y") cannot reach the verifier through an HTTP server, and the signer does not refuse them (see
 * docs/fuzzing.md), so the round-trip property is only asserted for well-formed names. */
static bool header_well_formed(const char *h)
{
        const char *colon = strchr(h, ':');
        if (!colon || colon == h)
                return false;
        for (const char *p = h; p < colon; p++)
                if (!(isalnum((unsigned char)*p) || strchr("!#$%&'*+-.^_`|~", *p)))
                        return false;
        /* The value: no control characters but HTAB (RFC 9110 field-value); a server refuses others. */
        for (const char *p = colon + 1; *p; p++)
                if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

/* A request target an HTTP client sends as it is: printable ASCII only (libcurl percent-encodes nothing
 * for us, and a server refuses raw control or 8-bit bytes in the request line). */
static bool url_well_formed(const char *u)
{
        for (const char *p = u; *p; p++) {
                if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
                        return false;
                /* A '%' not followed by two hex digits: the signer and the simulator read such a broken
                 * escape differently (docs/fuzzing.md); spotdrain never builds one. */
                if (*p == '%' && !(isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])))
                        return false;
        }
        return true;
}

static void check(const struct sigv4_request *r, bool token, bool clean)
{
        struct aws_credentials creds = {
                .access_key_id = (char *)"AKIDEXAMPLE",
                .secret_access_key = (char *)SECRET,
                .session_token = token ? (char *)"FQoGZXIvYXdzEXAMPLETOKEN" : NULL,
        };
        char *canonical = NULL, *signed_headers = NULL;
        if (sigv4_canonical_request(r, &canonical, &signed_headers) == 0) {
                char *sts = NULL;
                if (sigv4_string_to_sign(r, canonical, &sts) == 0)
                        free(sts);
                free(canonical);
                free(signed_headers);
        }

        /* The raw request as the simulator would see it (a fuzzed Authorization header, if any). */
        char *why = NULL;
        (void)verify(r, &why);
        free(why);

        char **added = NULL;
        if (sigv4_sign_headers(r, &creds, &added) == 0) {
                const char *all[MAX_HEADERS * 2 + 1];
                size_t n = 0;
                for (size_t i = 0; r->headers[i]; i++)
                        all[n++] = r->headers[i];
                for (size_t i = 0; added[i] && n < MAX_HEADERS * 2; i++)
                        all[n++] = added[i];
                all[n] = NULL;
                struct sigv4_request r2 = *r;
                r2.headers = all;
                why = NULL;
                int k = verify(&r2, &why);
                if (k != 0 && clean) {
                        fprintf(stderr, "signed request does not verify: %d %s\n", k, why ? why : "");
                        abort();
                }
                free(why);
                sigv4_strv_free(added);
        }

        char *url = NULL;
        if (sigv4_presign_url(r, &creds, 300, &url) == 0) {
                struct sigv4_request r3 = *r;
                r3.url = url;
                why = NULL;
                int k = verify(&r3, &why);
                if (k != 0 && clean) {
                        fprintf(stderr, "presigned URL does not verify: %d %s\n%s\n", k, why ? why : "",
                                url);
                        abort();
                }
                free(why);
                free(url);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        uint8_t flags = data[0];
        char *s = malloc(size);
        if (!s)
                return 0;
        memcpy(s, data + 1, size - 1);
        s[size - 1] = 0;
        size_t len = size - 1;

        /* method \n url \n headers... \n\n body; the body may hold NULs, the lines may not. */
        char *method = s, *url = NULL, *body = NULL;
        const char *headers[MAX_HEADERS + 1];
        size_t n_headers = 0;
        char *nl = memchr(s, '\n', len);
        if (nl) {
                *nl = 0;
                url = nl + 1;
                char *end = s + len;
                char *p = memchr(url, '\n', (size_t)(end - url));
                if (p) {
                        *p = 0;
                        p++;
                        while (p < end) {
                                char *q = memchr(p, '\n', (size_t)(end - p));
                                if (!q)
                                        q = end;
                                *q = 0;
                                if (q == p) {
                                        body = q + 1;
                                        break;
                                }
                                if (n_headers < MAX_HEADERS)
                                        headers[n_headers++] = p;
                                p = q + 1;
                        }
                }
        }
        headers[n_headers] = NULL;
        if (!url || strlen(method) != (size_t)((url - 1) - method)) {
                free(s);
                return 0;
        }
        size_t body_len = body && body <= s + len ? (size_t)(s + len - body) : 0;

        struct sigv4_request r = {
                .method = method,
                .url = url,
                .headers = headers,
                .body = body_len ? body : NULL,
                .body_len = body_len,
                .region = "us-east-1",
                .service = "sqs",
                .time_usec = 1440938160ULL * 1000000ULL,
                .keep_path = flags & 1,
                .content_sha256_header = flags & 2,
                .session_token_unsigned = flags & 8,
        };
        /* S3-style paths (keep_path; spotdrain signs none): the signer encodes a '%' again, the simulator
         * reads escapes as S3 does; which is S3's is left open (docs/fuzzing.md), so escapes are left out.
         */
        bool clean = !mentions_signing(url) && url_well_formed(url) && !((flags & 1) && strchr(url, '%'));
        for (size_t i = 0; i < n_headers; i++)
                if (mentions_signing(headers[i]) || !header_well_formed(headers[i]))
                        clean = false;
        check(&r, flags & 4, clean);
        free(s);
        return 0;
}
