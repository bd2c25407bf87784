/* aws/sigv4_verify: checks a SigV4-signed request (Authorization header or presigned query), as AWS does,
 * for the simulator's AWS surfaces: the canonical request is rebuilt from what arrived with the signed
 * headers the client named, signed with the secret the lookup gives, and compared in constant time. */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aws/sigv4_internal.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

static const char *header_find(const char *const *headers, const char *name)
{
        size_t n = strlen(name);

        for (const char *const *p = headers; p && *p; p++) {
                const char *s = *p;
                while (is_ws(*s))
                        s++;
                if (strncasecmp(s, name, n) == 0) {
                        const char *t = s + n;
                        while (*t == ' ' || *t == '\t')
                                t++;
                        if (*t == ':') {
                                t++;
                                while (is_ws(*t))
                                        t++;
                                return t;
                        }
                }
        }
        return NULL;
}

/* The decoded value of a query parameter, or NULL. */
static char *query_get(const struct url_parts *u, const char *name)
{
        const char *q = u->query;

        for (size_t i = 0; q && i < u->query_len;) {
                size_t l = 0, eq;
                while (i + l < u->query_len && q[i + l] != '&')
                        l++;
                for (eq = 0; eq < l && q[i + eq] != '='; eq++)
                        ;
                _cleanup_free_ char *n = sv4_uri_decode(&q[i], eq);
                if (n && streq(n, name))
                        return eq < l ? sv4_uri_decode(&q[i + eq + 1], l - eq - 1) : strdup("");
                i += l + 1;
        }
        return NULL;
}

static int parse_amz_date(const char *s, uint64_t *ret)
{
        struct tm tm = { 0 };
        const char *e;

        if (!s || strlen(s) != 16)
                return -EINVAL;
        e = strptime(s, "%Y%m%dT%H%M%SZ", &tm);
        if (!e || *e)
                return -EINVAL;
        *ret = (uint64_t)timegm(&tm) * 1000000ULL;
        return 0;
}

static int why(char **ret_why, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why(char **ret_why, int error, const char *fmt, ...)
{
        va_list ap;

        if (ret_why) {
                char *s = NULL;
                va_start(ap, fmt);
                if (vasprintf(&s, fmt, ap) < 0)
                        s = NULL;
                va_end(ap);
                free(*ret_why);
                *ret_why = s;
        }
        return error;
}

/* Splits "a;b;c" into a NULL-terminated vector. */
static char **split_names(const char *s)
{
        size_t n = 1;
        char **v;

        for (const char *p = s; *p; p++)
                n += *p == ';';
        v = calloc(n + 1, sizeof(char *));
        if (!v)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                size_t l = strcspn(s, ";");
                v[i] = strndup(s, l);
                if (!v[i]) {
                        sigv4_strv_free(v);
                        return NULL;
                }
                s += l + (s[l] == ';');
        }
        return v;
}

struct auth_fields {
        char *akid, *date, *region, *service;
        char *signed_headers, *signature;
};

static void auth_fields_free(struct auth_fields *a)
{
        free(a->akid);
        free(a->date);
        free(a->region);
        free(a->service);
        free(a->signed_headers);
        free(a->signature);
}

/* "AKID/20150830/us-east-1/service/aws4_request" */
static int parse_credential(const char *cred, struct auth_fields *a)
{
        char *parts[5] = { 0 };
        const char *p = cred;
        int r = 0;

        for (size_t i = 0; i < 5; i++) {
                size_t l = strcspn(p, "/");
                if ((i < 4 && p[l] != '/') || (i == 4 && p[l] != '\0') || l == 0) {
                        r = -EINVAL;
                        break;
                }
                parts[i] = strndup(p, l);
                if (!parts[i]) {
                        r = -ENOMEM;
                        break;
                }
                p += l + 1;
        }
        if (r >= 0 && !streq(parts[4], "aws4_request"))
                r = -EINVAL;
        if (r < 0) {
                for (size_t i = 0; i < 5; i++)
                        free(parts[i]);
                return r;
        }
        a->akid = parts[0];
        a->date = parts[1];
        a->region = parts[2];
        a->service = parts[3];
        free(parts[4]);
        return 0;
}

static int parse_authorization(const char *v, struct auth_fields *a)
{
        const char *p;
        int r;

        if (!startswith(v, SIGV4_ALGORITHM " "))
                return -EINVAL;
        p = v + strlen(SIGV4_ALGORITHM);
        while (*p) {
                while (*p == ' ' || *p == ',')
                        p++;
                size_t l = strcspn(p, ", ");
                _cleanup_free_ char *item = strndup(p, l);
                if (!item)
                        return -ENOMEM;
                p += l;
                if (startswith(item, "Credential=")) {
                        if (a->akid)
                                return -EINVAL;
                        r = parse_credential(item + strlen("Credential="), a);
                        if (r < 0)
                                return r;
                } else if (startswith(item, "SignedHeaders=")) {
                        if (free_and_strdup(&a->signed_headers, item + strlen("SignedHeaders=")) < 0)
                                return -ENOMEM;
                } else if (startswith(item, "Signature=")) {
                        if (free_and_strdup(&a->signature, item + strlen("Signature=")) < 0)
                                return -ENOMEM;
                } else if (*item)
                        return -EINVAL;
        }
        if (!a->akid || isempty(a->signed_headers) || !a->signature || strlen(a->signature) != 64)
                return -EINVAL;
        return 0;
}

int sigv4_verify(const struct sigv4_request *r, sigv4_secret_lookup_fn lookup, void *userdata,
                 char **ret_why)
{
        _cleanup_free_ char *q_cred = NULL, *q_date = NULL, *q_expires = NULL, *q_signed = NULL,
                            *q_sig = NULL, *creq = NULL, *sts = NULL;
        _cleanup_strv_ char **only = NULL;
        struct auth_fields a = { 0 };
        const char *auth, *date, *secret;
        struct url_parts u;
        uint64_t t;
        bool presigned;
        char sig[65];
        int k;

        if (!r || !lookup)
                return -EINVAL;
        k = sv4_url_split(r->url, &u);
        if (k < 0)
                return why(ret_why, k, "malformed URL");

        q_sig = query_get(&u, "X-Amz-Signature");
        presigned = q_sig != NULL;
        if (presigned) {
                q_cred = query_get(&u, "X-Amz-Credential");
                q_date = query_get(&u, "X-Amz-Date");
                q_expires = query_get(&u, "X-Amz-Expires");
                q_signed = query_get(&u, "X-Amz-SignedHeaders");
                _cleanup_free_ char *alg = query_get(&u, "X-Amz-Algorithm");
                if (!streq(alg, SIGV4_ALGORITHM) || !q_cred || !q_date || !q_signed || strlen(q_sig) != 64)
                        return why(ret_why, -EINVAL, "incomplete presigned query");
                k = parse_credential(q_cred, &a);
                if (k < 0) {
                        auth_fields_free(&a);
                        return why(ret_why, -EINVAL, "malformed X-Amz-Credential");
                }
                a.signed_headers = TAKE_PTR(q_signed);
                a.signature = TAKE_PTR(q_sig);
                date = q_date;
        } else {
                auth = header_find(r->headers, "authorization");
                if (!auth)
                        return why(ret_why, -EINVAL, "missing Authorization header");
                k = parse_authorization(auth, &a);
                if (k < 0) {
                        auth_fields_free(&a);
                        return why(ret_why, -EINVAL, "malformed Authorization header");
                }
                date = header_find(r->headers, "x-amz-date");
        }

        if (parse_amz_date(date, &t) < 0) {
                k = why(ret_why, -EINVAL, "missing or malformed X-Amz-Date");
                goto out;
        }
        if (strncmp(date, a.date, 8) != 0 || strlen(a.date) != 8) {
                k = why(ret_why, -EACCES, "credential scope date %s does not match X-Amz-Date %s", a.date,
                        date);
                goto out;
        }
        if ((r->region && !streq(r->region, a.region)) || (r->service && !streq(r->service, a.service))) {
                k = why(ret_why, -EACCES, "credential scope %s/%s, expected %s/%s", a.region, a.service,
                        r->region ? r->region : "", r->service ? r->service : "");
                goto out;
        }
        if (r->time_usec > 0) {
                uint64_t lo = t > SIGV4_MAX_SKEW_S * 1000000ULL ? t - SIGV4_MAX_SKEW_S * 1000000ULL : 0;
                uint64_t hi = t + SIGV4_MAX_SKEW_S * 1000000ULL;
                if (presigned) {
                        unsigned long e = q_expires ? strtoul(q_expires, NULL, 10) : 0;
                        lo = t;
                        hi = t + (uint64_t)e * 1000000ULL;
                }
                if (r->time_usec < lo || r->time_usec > hi) {
                        k = why(ret_why, -EACCES,
                                presigned ? "request has expired"
                                          : "signature expired: %s is "
                                            "more than 15 minutes from the server time",
                                date);
                        goto out;
                }
        }
        secret = lookup(a.akid, userdata);
        if (!secret) {
                k = why(ret_why, -ENOKEY, "unknown access key id %s", a.akid);
                goto out;
        }
        only = split_names(a.signed_headers);
        if (!only) {
                k = -ENOMEM;
                goto out;
        }
        if (!sv4_name_in("host", (const char *const *)only)) {
                k = why(ret_why, -EACCES, "host is not among the signed headers");
                goto out;
        }

        struct sigv4_request vr = *r;
        vr.time_usec = t;
        vr.region = a.region;
        vr.service = a.service;
        static const char *const drop_sig[] = { "X-Amz-Signature", NULL };
        static const char *const drop_sig_token[] = { "X-Amz-Signature", "X-Amz-Security-Token", NULL };
        struct canon_in in = { .r = &vr,
                               .only = only,
                               .drop_query = !presigned                  ? NULL
                                             : r->session_token_unsigned ? drop_sig_token
                                                                         : drop_sig };
        k = sv4_canon_build(&in, &creq, NULL);
        if (k >= 0)
                k = sigv4_string_to_sign(&vr, creq, &sts);
        if (k >= 0)
                k = sigv4_signature(&vr, secret, sts, sig);
        if (k < 0)
                goto out;
        if (CRYPTO_memcmp(sig, a.signature, 64) != 0) {
                k = why(ret_why, -EACCES,
                        "the request signature we calculated does not match the signature you provided; "
                        "canonical request:\n%s\nstring to sign:\n%s",
                        creq, sts);
                goto out;
        }
        k = 0;
out:
        auth_fields_free(&a);
        return k;
}
