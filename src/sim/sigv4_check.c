/* sim/sigv4_check: AWS Signature Version 4 as the receiving side applies it, after the AWS documentation
 * ("Create a signed AWS API request", "Authenticating requests: using query parameters").
 *
 *   CanonicalRequest = Method \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n SignedHeaders \n
 *                      HashedPayload
 *   StringToSign     = "AWS4-HMAC-SHA256" \n X-Amz-Date \n date/region/service/aws4_request \n
 *                      hex(SHA256(CanonicalRequest))
 *   SigningKey       = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), service), "aws4_request")
 *   Signature        = hex(HMAC(SigningKey, StringToSign))
 *
 * Everything is taken from the request as received; nothing here comes from the product's signer. */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sim/sigv4_check.h"
#include "spotdrain/util.h"

#define ALGORITHM       "AWS4-HMAC-SHA256"
#define SKEW_USEC       (15ULL * 60ULL * 1000000ULL) /* AWS: 15 minutes either way */
#define MAX_EXPIRES_S   604800ULL                    /* AWS: a presigned URL lives at most a week */
#define UNSIGNED_BODY   "UNSIGNED-PAYLOAD"
#define STREAMING_BODY  "STREAMING-"
#define CONTENT_SHA_HDR "x-amz-content-sha256"

/* ---- the pieces of the request target ---- */

struct target {
        const char *authority; /* absolute URL only */
        size_t authority_len;
        bool https;
        const char *path;
        size_t path_len;
        const char *query; /* after '?'; NULL without one */
        size_t query_len;
};

/* The Host an absolute-form target stands for (RFC 9112 §3.2.2): its authority without userinfo, the host
 * in lowercase (names are case-insensitive) and a default port left out, as a client sends it. */
static int host_from_authority(struct buf *b, const struct target *t)
{
        const char *a = t->authority, *e = t->authority + t->authority_len;
        for (const char *p = a; p < e; p++)
                if (*p == '@')
                        a = p + 1;
        size_t n = (size_t)(e - a);
        if ((t->https && n > 4 && memcmp(e - 4, ":443", 4) == 0) ||
            (!t->https && n > 3 && memcmp(e - 3, ":80", 3) == 0))
                n -= t->https ? 4 : 3;
        for (size_t i = 0; i < n; i++) {
                char ch = (char)tolower((unsigned char)a[i]);
                if (buf_append(b, &ch, 1) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void target_split(const char *t, struct target *ret)
{
        const char *p = t;

        *ret = (struct target){};
        if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
                ret->https = strncasecmp(p, "https://", 8) == 0;
                p = strstr(p, "//") + 2;
                ret->authority = p;
                ret->authority_len = strcspn(p, "/?#");
                p += ret->authority_len;
        }
        ret->path = p;
        ret->path_len = strcspn(p, "?#");
        p += ret->path_len;
        if (*p == '?') {
                ret->query = p + 1;
                ret->query_len = strcspn(p + 1, "#");
        }
}

static bool unreserved(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_' || c == '.' || c == '~';
}

/* AWS's UriEncode: every byte but the unreserved ones as %XY (uppercase); '/' kept when keep_slash. */
static int uri_encode(struct buf *b, const char *s, size_t n, bool keep_slash)
{
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                int r = unreserved(c) || (keep_slash && c == '/') ? buf_append(b, &s[i], 1)
                                                                  : buf_printf(b, "%%%02X", c);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int hexval(char c)
{
        static const char digits[] = "0123456789abcdef";
        const char *p = c ? strchr(digits, tolower((unsigned char)c)) : NULL;
        return p ? (int)(p - digits) : -1;
}

/* %XY sequences decoded; anything else (a stray '%', '+') kept as it is. */
static char *pct_decode(const char *s, size_t n)
{
        char *d = malloc(n + 1), *o = d;

        if (!d)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;
                if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 &&
                    (lo = hexval(s[i + 2])) >= 0) {
                        *o++ = (char)(hi << 4 | lo);
                        i += 2;
                } else
                        *o++ = s[i];
        }
        *o = '\0';
        return d;
}

/* ---- canonical URI ---- */

/* Every service but S3 signs the path with its dot segments resolved and its empty segments dropped, the
 * trailing slash kept, then encoded once more over what was sent (the "double encoding"). S3 signs the path
 * as sent, encoded once. */
static int canonical_uri(struct buf *b, const struct target *t, bool s3_path)
{
        if (t->path_len == 0)
                return buf_append(b, "/", 1);
        if (s3_path) {
                _cleanup_free_ char *d = pct_decode(t->path, t->path_len);
                return d ? uri_encode(b, d, strlen(d), true) : -ENOMEM;
        }

        const char *path = t->path, *end = t->path + t->path_len;
        size_t nseg = 0, cap = 1;
        for (const char *p = path; p < end; p++)
                cap += *p == '/';
        _cleanup_free_ const char **seg = calloc(cap, sizeof(char *));
        _cleanup_free_ size_t *len = calloc(cap, sizeof(size_t));
        if (!seg || !len)
                return -ENOMEM;
        /* A trailing slash as sent is kept ("/a/" and "/a/b/../"); "/a/." and "/a/b/.." end without one, as
         * botocore's normalize_url_path has it (the fuzzer found the difference with the signer). */
        bool trailing = end[-1] == '/';
        for (const char *p = path; p < end;) {
                size_t l = 0;
                while (p + l < end && p[l] != '/')
                        l++;
                if (l == 2 && p[0] == '.' && p[1] == '.') {
                        if (nseg > 0)
                                nseg--;
                } else if (l > 0 && !(l == 1 && p[0] == '.')) {
                        seg[nseg] = p;
                        len[nseg++] = l;
                }
                p += l + 1;
        }
        if (buf_append(b, "/", 1) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < nseg; i++)
                if ((i > 0 && buf_append(b, "/", 1) < 0) || uri_encode(b, seg[i], len[i], false) < 0)
                        return -ENOMEM;
        if (trailing && nseg > 0 && buf_append(b, "/", 1) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- canonical query ---- */

struct qparam {
        char *name, *value; /* decoded */
        char *ename, *evalue;
};

static int qparam_cmp(const void *a, const void *b)
{
        const struct qparam *x = a, *y = b;
        int c = strcmp(x->ename, y->ename);
        return c ? c : strcmp(x->evalue, y->evalue);
}

struct query {
        struct qparam *v;
        size_t n;
};

static void query_free(struct query *q)
{
        for (size_t i = 0; i < q->n; i++) {
                free(q->v[i].name);
                free(q->v[i].value);
                free(q->v[i].ename);
                free(q->v[i].evalue);
        }
        free(q->v);
        *q = (struct query){};
}

static char *encoded(const char *s)
{
        struct buf b = {};
        if (uri_encode(&b, s, strlen(s), false) < 0 || buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

static int query_parse(const struct target *t, struct query *ret)
{
        size_t cap = 1;

        *ret = (struct query){};
        if (!t->query)
                return 0;
        for (size_t i = 0; i < t->query_len; i++)
                cap += t->query[i] == '&';
        ret->v = calloc(cap, sizeof(struct qparam));
        if (!ret->v)
                return -ENOMEM;
        for (size_t i = 0; i < t->query_len;) {
                const char *s = &t->query[i];
                size_t l = 0, eq;
                while (i + l < t->query_len && s[l] != '&')
                        l++;
                for (eq = 0; eq < l && s[eq] != '='; eq++)
                        ;
                i += l + 1;
                if (l == 0)
                        continue;
                struct qparam *p = &ret->v[ret->n++];
                p->name = pct_decode(s, eq);
                p->value = eq < l ? pct_decode(s + eq + 1, l - eq - 1) : strdup("");
                if (!p->name || !p->value)
                        return -ENOMEM;
                p->ename = encoded(p->name);
                p->evalue = encoded(p->value);
                if (!p->ename || !p->evalue)
                        return -ENOMEM;
        }
        return 0;
}

static const char *query_get(const struct query *q, const char *name)
{
        for (size_t i = 0; i < q->n; i++)
                if (streq(q->v[i].name, name))
                        return q->v[i].value;
        return NULL;
}

/* Sorted by encoded name, then value; the parameters named in skip left out. */
static int canonical_query(struct buf *b, struct query *q, const char *const *skip)
{
        bool first = true;

        if (q->n > 1)
                qsort(q->v, q->n, sizeof(struct qparam), qparam_cmp);
        for (size_t i = 0; i < q->n; i++) {
                bool skipped = false;
                for (const char *const *s = skip; s && *s; s++)
                        skipped = skipped || streq(q->v[i].name, *s);
                if (skipped)
                        continue;
                if (buf_printf(b, "%s%s=%s", first ? "" : "&", q->v[i].ename, q->v[i].evalue) < 0)
                        return -ENOMEM;
                first = false;
        }
        return 0;
}

/* ---- canonical headers ---- */

static bool space(char c)
{
        return c == ' ' || c == '\t';
}

/* Within a header value a folded line (obs-fold: CRLF then spaces) counts as spaces, as RFC 7230 says. */
static bool lws(char c)
{
        return space(c) || c == '\r' || c == '\n';
}

/* The value of every header line named name (case-insensitive), trimmed, inner runs of spaces made one,
 * comma-joined in the order received. Returns how many lines matched. */
static int header_values(const char *const *headers, const char *name, struct buf *b)
{
        size_t n = strlen(name);
        int count = 0;

        for (const char *const *h = headers; h && *h; h++) {
                const char *s = *h, *e;
                if (strncasecmp(s, name, n) != 0 || s[n] != ':')
                        continue;
                s += n + 1;
                while (lws(*s))
                        s++;
                e = s + strlen(s);
                while (e > s && lws(e[-1]))
                        e--;
                if (count++ > 0 && buf_append(b, ",", 1) < 0)
                        return -ENOMEM;
                for (const char *p = s; p < e; p++) {
                        if (lws(*p) && p > s && lws(p[-1]))
                                continue;
                        if (buf_append(b, lws(*p) ? " " : p, 1) < 0)
                                return -ENOMEM;
                }
        }
        return count;
}

/* A header's single value (trimmed), malloc'ed, or NULL when absent. */
static char *header_get(const char *const *headers, const char *name)
{
        struct buf b = {};
        int r = header_values(headers, name, &b);
        if (r <= 0 || buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

/* ---- hashing ---- */

static void hex(const unsigned char *d, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[d[i] >> 4];
                out[2 * i + 1] = digits[d[i] & 15];
        }
        out[2 * n] = '\0';
}

static void sha256_hex(const void *data, size_t n, char out[65])
{
        unsigned char d[SHA256_DIGEST_LENGTH];
        SHA256(data, n, d);
        hex(d, sizeof(d), out);
}

static int hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
        unsigned len = 32;
        return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &len)
                   ? 0
                   : -ENOMEM;
}

int sim_sigv4_sign(const char *secret, const char *date8, const char *region, const char *service,
                   const char *string_to_sign, char ret_hex[65])
{
        _cleanup_free_ char *k0 = strprintf("AWS4%s", secret);
        unsigned char k[32], sig[32];
        int r;

        if (!k0)
                return -ENOMEM;
        r = hmac(k0, strlen(k0), date8, k);
        if (r >= 0)
                r = hmac(k, sizeof(k), region, k);
        if (r >= 0)
                r = hmac(k, sizeof(k), service, k);
        if (r >= 0)
                r = hmac(k, sizeof(k), "aws4_request", k);
        if (r >= 0)
                r = hmac(k, sizeof(k), string_to_sign, sig);
        OPENSSL_cleanse(k0, strlen(k0));
        OPENSSL_cleanse(k, sizeof(k));
        if (r < 0)
                return r;
        hex(sig, sizeof(sig), ret_hex);
        return 0;
}

/* ---- the canonical request ---- */

struct check {
        const struct sim_sigv4_request *r;
        struct target t;
        struct query q;
        bool presigned;
        char *akid, *date8, *region, *service, *signed_headers, *signature, *amz_date;
        char *why;
};

static int refuse(struct check *c, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(struct check *c, int error, const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        free(c->why);
        c->why = s;
        return error;
}

static int payload_hash(struct check *c, char out[65])
{
        const struct sim_sigv4_request *r = c->r;
        _cleanup_free_ char *declared = header_get(r->headers, CONTENT_SHA_HDR);
        char actual[65];

        sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, actual);
        if (declared && (streq(declared, UNSIGNED_BODY) || startswith(declared, STREAMING_BODY))) {
                snprintf(out, 65, "%s", declared);
                return 0;
        }
        if (declared && strcasecmp(declared, actual) != 0)
                return refuse(c, -EACCES,
                              "the provided x-amz-content-sha256 header does not match what "
                              "was computed");
        memcpy(out, actual, 65);
        return 0;
}

static int build_canonical(struct check *c, char **ret)
{
        static const char *const skip_sig[] = { "X-Amz-Signature", NULL };
        static const char *const skip_sig_token[] = { "X-Amz-Signature", "X-Amz-Security-Token", NULL };
        const struct sim_sigv4_request *r = c->r;
        struct buf b = {};
        char body[65];
        int k;

        k = payload_hash(c, body);
        if (k < 0)
                return k;
        if (buf_printf(&b, "%s\n", r->method) < 0 || canonical_uri(&b, &c->t, r->s3_path) < 0 ||
            buf_append(&b, "\n", 1) < 0 ||
            canonical_query(&b, &c->q,
                            !c->presigned       ? NULL
                            : r->token_unsigned ? skip_sig_token
                                                : skip_sig) < 0 ||
            buf_append(&b, "\n", 1) < 0)
                goto oom;
        for (const char *p = c->signed_headers; *p;) {
                size_t l = strcspn(p, ";");
                _cleanup_free_ char *name = strndup(p, l);
                if (!name || buf_printf(&b, "%s:", name) < 0)
                        goto oom;
                k = header_values(r->headers, name, &b);
                if (k < 0)
                        goto oom;
                if (k == 0 && streq(name, "host") && c->t.authority)
                        k = host_from_authority(&b, &c->t) < 0 ? -ENOMEM : 1;
                if (k < 0)
                        goto oom;
                if (k == 0) {
                        buf_free(&b);
                        return refuse(c, -EACCES, "the signed header %s is not in the request", name);
                }
                if (buf_append(&b, "\n", 1) < 0)
                        goto oom;
                p += l + (p[l] == ';');
        }
        if (buf_printf(&b, "\n%s\n%s", c->signed_headers, body) < 0 || buf_append(&b, "", 1) < 0)
                goto oom;
        *ret = b.data;
        return 0;
oom:
        buf_free(&b);
        return -ENOMEM;
}

/* ---- what the request says about its signature ---- */

/* "AKID/YYYYMMDD/region/service/aws4_request" */
static int parse_scope(struct check *c, const char *cred)
{
        char **dst[] = { &c->akid, &c->date8, &c->region, &c->service };
        const char *p = cred;

        for (size_t i = 0; i < 4; i++) {
                size_t l = strcspn(p, "/");
                if (l == 0 || p[l] != '/')
                        return refuse(c, -EINVAL, "malformed credential %s", cred);
                *dst[i] = strndup(p, l);
                if (!*dst[i])
                        return -ENOMEM;
                p += l + 1;
        }
        if (!streq(p, "aws4_request"))
                return refuse(c, -EINVAL,
                              "credential should be scoped with a valid terminator: "
                              "'aws4_request', not '%s'",
                              p);
        if (strlen(c->date8) != 8)
                return refuse(c, -EINVAL, "malformed credential date %s", c->date8);
        return 0;
}

static int take(char **dst, const char *s, size_t n)
{
        free(*dst);
        *dst = strndup(s, n);
        return *dst ? 0 : -ENOMEM;
}

/* AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=... (any order, ',' and spaces between) */
static int parse_authorization(struct check *c, const char *v)
{
        _cleanup_free_ char *cred = NULL;
        size_t alg = strlen(ALGORITHM);
        int k;

        if (strncmp(v, ALGORITHM, alg) != 0 || !space(v[alg]))
                return refuse(c, -EINVAL, "unsupported authorization type");
        for (const char *p = v + alg; *p;) {
                while (space(*p) || *p == ',')
                        p++;
                size_t l = strcspn(p, ", \t");
                if (l == 0)
                        break;
                if (startswith(p, "Credential="))
                        k = take(&cred, p + 11, l - 11);
                else if (startswith(p, "SignedHeaders="))
                        k = take(&c->signed_headers, p + 14, l - 14);
                else if (startswith(p, "Signature="))
                        k = take(&c->signature, p + 10, l - 10);
                else
                        return refuse(c, -EINVAL, "unknown authorization component %.*s", (int)l, p);
                if (k < 0)
                        return k;
                p += l;
        }
        if (!cred || !c->signed_headers || !c->signature)
                return refuse(c, -EINVAL,
                              "the authorization header needs Credential, SignedHeaders and "
                              "Signature");
        return parse_scope(c, cred);
}

/* YYYYMMDD'T'HHMMSS'Z' to microseconds. */
static int parse_iso(const char *s, uint64_t *ret)
{
        struct tm tm = {};
        const char *e;

        if (!s || strlen(s) != 16)
                return -EINVAL;
        e = strptime(s, "%Y%m%dT%H%M%SZ", &tm);
        if (!e || *e)
                return -EINVAL;
        *ret = (uint64_t)timegm(&tm) * 1000000ULL;
        return 0;
}

/* A Date header (IMF-fixdate) stands in for X-Amz-Date; the string to sign takes its ISO 8601 form. */
static int date_from_http(const char *s, char **ret)
{
        struct tm tm = {};
        const char *e = s ? strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm) : NULL;
        char out[17];

        if (!e || *e)
                return -EINVAL;
        if (strftime(out, sizeof(out), "%Y%m%dT%H%M%SZ", &tm) != 16)
                return -EINVAL;
        *ret = strdup(out);
        return *ret ? 0 : -ENOMEM;
}

static void iso(uint64_t usec, char out[17])
{
        time_t t = (time_t)(usec / 1000000ULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int check_time(struct check *c, uint64_t signed_at)
{
        uint64_t now = c->r->now_usec;
        char snow[17], sbound[17];

        if (now == 0)
                return 0;
        iso(now, snow);
        if (c->presigned) {
                const char *exp = query_get(&c->q, "X-Amz-Expires");
                char *end = NULL;
                unsigned long long e = exp ? strtoull(exp, &end, 10) : 0;
                if (!exp || !*exp || *end)
                        return refuse(c, -EINVAL, "X-Amz-Expires is missing or not a number");
                if (e == 0 || e > MAX_EXPIRES_S)
                        return refuse(c, -EINVAL, "X-Amz-Expires must be between 1 and %llu seconds",
                                      MAX_EXPIRES_S);
                if (now > signed_at + e * 1000000ULL)
                        return refuse(c, -EACCES, "Request has expired: signed %s for %llu s, now %s",
                                      c->amz_date, e, snow);
                if (signed_at > now + SKEW_USEC)
                        return refuse(c, -EACCES, "Request is not yet valid: %s, now %s", c->amz_date, snow);
                return 0;
        }
        if (now > signed_at + SKEW_USEC) {
                iso(now - SKEW_USEC, sbound);
                return refuse(c, -EACCES, "Signature expired: %s is now earlier than %s (%s - 15 min.)",
                              c->amz_date, sbound, snow);
        }
        if (signed_at > now + SKEW_USEC) {
                iso(now + SKEW_USEC, sbound);
                return refuse(c, -EACCES,
                              "Signature not yet current: %s is still later than %s (%s + 15 min.)",
                              c->amz_date, sbound, snow);
        }
        return 0;
}

static int read_signature(struct check *c)
{
        const struct sim_sigv4_request *r = c->r;
        _cleanup_free_ char *auth = header_get(r->headers, "authorization");
        const char *qsig = query_get(&c->q, "X-Amz-Signature");
        int k;

        if (auth && qsig)
                return refuse(c, -EINVAL, "only one auth mechanism allowed");
        if (qsig) {
                const char *alg = query_get(&c->q, "X-Amz-Algorithm");
                const char *cred = query_get(&c->q, "X-Amz-Credential");
                const char *date = query_get(&c->q, "X-Amz-Date");
                const char *sh = query_get(&c->q, "X-Amz-SignedHeaders");
                c->presigned = true;
                if (!alg || !streq(alg, ALGORITHM))
                        return refuse(c, -EINVAL, "X-Amz-Algorithm must be " ALGORITHM);
                if (!cred || !date || !sh)
                        return refuse(c, -EINVAL,
                                      "the presigned query needs X-Amz-Credential, X-Amz-Date, "
                                      "X-Amz-SignedHeaders and X-Amz-Signature");
                if (!(c->signature = strdup(qsig)) || !(c->signed_headers = strdup(sh)) ||
                    !(c->amz_date = strdup(date)))
                        return -ENOMEM;
                return parse_scope(c, cred);
        }
        if (!auth)
                return refuse(c, -EINVAL, "missing authentication");
        k = parse_authorization(c, auth);
        if (k < 0)
                return k;
        c->amz_date = header_get(r->headers, "x-amz-date");
        if (!c->amz_date) {
                _cleanup_free_ char *d = header_get(r->headers, "date");
                k = date_from_http(d, &c->amz_date);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return refuse(c, -EINVAL, "the request needs an X-Amz-Date or a Date header");
        }
        return 0;
}

static void check_free(struct check *c)
{
        query_free(&c->q);
        free(c->akid);
        free(c->date8);
        free(c->region);
        free(c->service);
        free(c->signed_headers);
        free(c->signature);
        free(c->amz_date);
        free(c->why);
}

/* The names in SignedHeaders: lowercase, and host among them. */
static int check_signed_names(struct check *c)
{
        bool host = false;

        for (const char *p = c->signed_headers; *p;) {
                size_t l = strcspn(p, ";");
                if (l == 0)
                        return refuse(c, -EINVAL, "empty name in SignedHeaders %s", c->signed_headers);
                for (size_t i = 0; i < l; i++)
                        if (p[i] >= 'A' && p[i] <= 'Z')
                                return refuse(c, -EINVAL, "SignedHeaders must be lowercase: %s",
                                              c->signed_headers);
                host = host || (l == 4 && strncmp(p, "host", 4) == 0);
                p += l + (p[l] == ';');
        }
        if (!host)
                return refuse(c, -EACCES, "host must be among the signed headers");
        return 0;
}

int sim_sigv4_canonical(const struct sim_sigv4_request *r, const char *signed_headers, char **ret)
{
        struct check c = { .r = r };
        int k;

        target_split(r->target, &c.t);
        k = query_parse(&c.t, &c.q);
        c.presigned = query_get(&c.q, "X-Amz-Signature") != NULL;
        c.signed_headers = (char *)signed_headers;
        if (k >= 0)
                k = build_canonical(&c, ret);
        c.signed_headers = NULL;
        check_free(&c);
        return k;
}

int sim_sigv4_check(const struct sim_sigv4_request *r, sigv4_secret_lookup_fn lookup, void *userdata,
                    char **ret_akid, char **ret_why)
{
        struct check c = { .r = r };
        _cleanup_free_ char *creq = NULL, *sts = NULL;
        const char *secret;
        char creq_hash[65], sig[65];
        uint64_t t;
        int k;

        if (!r || !r->method || !r->target || !lookup)
                return -EINVAL;
        target_split(r->target, &c.t);
        k = query_parse(&c.t, &c.q);
        if (k >= 0)
                k = read_signature(&c);
        if (k < 0)
                goto out;
        if (ret_akid && !(*ret_akid = strdup(c.akid))) {
                k = -ENOMEM;
                goto out;
        }
        if (parse_iso(c.amz_date, &t) < 0) {
                k = refuse(&c, -EINVAL, "malformed X-Amz-Date %s", c.amz_date);
                goto out;
        }
        if (strncmp(c.amz_date, c.date8, 8) != 0) {
                k = refuse(&c, -EACCES, "credential should be scoped to a valid date: %.8s, not %s",
                           c.amz_date, c.date8);
                goto out;
        }
        if (r->region && !streq(r->region, c.region)) {
                k = refuse(&c, -EACCES, "credential should be scoped to a valid region: %s, not %s",
                           r->region, c.region);
                goto out;
        }
        if (r->service && !streq(r->service, c.service)) {
                k = refuse(&c, -EACCES, "credential should be scoped to correct service: %s, not %s",
                           r->service, c.service);
                goto out;
        }
        k = check_time(&c, t);
        if (k >= 0)
                k = check_signed_names(&c);
        if (k < 0)
                goto out;
        secret = lookup(c.akid, userdata);
        if (!secret) {
                k = refuse(&c, -ENOKEY,
                           "the security token included in the request is invalid: unknown "
                           "access key id %s",
                           c.akid);
                goto out;
        }
        k = build_canonical(&c, &creq);
        if (k < 0)
                goto out;
        sha256_hex(creq, strlen(creq), creq_hash);
        sts = strprintf(ALGORITHM "\n%s\n%s/%s/%s/aws4_request\n%s", c.amz_date, c.date8, c.region,
                        c.service, creq_hash);
        if (!sts) {
                k = -ENOMEM;
                goto out;
        }
        k = sim_sigv4_sign(secret, c.date8, c.region, c.service, sts, sig);
        if (k < 0)
                goto out;
        if (strlen(c.signature) != 64 || CRYPTO_memcmp(sig, c.signature, 64) != 0) {
                k = refuse(&c, -EACCES,
                           "the request signature we calculated does not match the signature you provided; "
                           "the canonical string for this request should have been\n%s\nand the string to "
                           "sign\n%s",
                           creq, sts);
                goto out;
        }
        k = 0;
out:
        if (ret_why) {
                free(*ret_why);
                *ret_why = TAKE_PTR(c.why);
        }
        check_free(&c);
        return k;
}
