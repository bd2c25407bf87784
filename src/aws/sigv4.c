/* aws/sigv4: AWS Signature Version 4 (header and query auth).
 *
 * The canonical form follows the AWS SigV4 test suites and botocore's SigV4Auth (the oracle of the tests):
 * the path has its dot segments removed and its slashes collapsed (unless keep_path), then every byte
 * outside RFC 3986's unreserved set and '/' is percent-encoded (so an encoded '%' is encoded again, as AWS
 * expects from non-S3 clients); query names and values are decoded and re-encoded the same way ('/' too),
 * sorted by name then value; header names are lowercased, values trimmed with whitespace runs (folded lines
 * included) collapsed to one space, duplicates joined with ',' in their order. The simulator verifies with
 * its own code (src/sim/sigv4_check.c). */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "aws/sigv4_internal.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

static const char sigv4_hex[] = "0123456789abcdef";

void aws_credentials_clear(struct aws_credentials *c)
{
        if (!c)
                return;
        if (c->secret_access_key) {
                explicit_bzero(c->secret_access_key, strlen(c->secret_access_key));
                free(c->secret_access_key);
        }
        if (c->session_token) {
                explicit_bzero(c->session_token, strlen(c->session_token));
                free(c->session_token);
        }
        free(c->access_key_id);
        free(c->source);
        *c = (struct aws_credentials){ 0 };
}

void sigv4_strv_free(char **v)
{
        strv_free(v);
}

static void to_hex(const unsigned char *in, size_t n, char *out)
{
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = sigv4_hex[in[i] >> 4];
                out[2 * i + 1] = sigv4_hex[in[i] & 15];
        }
        out[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t len, char out[65])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;

        if (EVP_Digest(data ? data : "", len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
                return -EIO;
        to_hex(md, 32, out);
        return 0;
}

static int hmac_sha256(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
        unsigned len = 0;

        if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &len) ||
            len != 32)
                return -EIO;
        return 0;
}

static bool is_unreserved(unsigned char c)
{
        return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

/* Percent-encodes every byte but the unreserved ones (and '/' when keep_slash), uppercase hex. */
static int uri_encode(struct buf *b, const char *s, size_t n, bool keep_slash)
{
        static const char up[] = "0123456789ABCDEF";
        int r;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (is_unreserved(c) || (keep_slash && c == '/'))
                        r = buf_append(b, &s[i], 1);
                else {
                        char e[3] = { '%', up[c >> 4], up[c & 15] };
                        r = buf_append(b, e, 3);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decodes %XX (a '%' not followed by two hex digits stays as it is); '+' is a space in form bodies only. */
static char *percent_decode(const char *s, size_t n, bool plus_is_space)
{
        char *out = malloc(n + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int h, l;
                if (plus_is_space && s[i] == '+')
                        *o++ = ' ';
                else if (s[i] == '%' && i + 2 < n && (h = hexval(s[i + 1])) >= 0 &&
                         (l = hexval(s[i + 2])) >= 0) {
                        *o++ = (char)(h << 4 | l);
                        i += 2;
                } else
                        *o++ = s[i];
        }
        *o = '\0';
        return out;
}

/* In a URI '+' is a plus, as AWS reads it. */
char *sv4_uri_decode(const char *s, size_t n)
{
        return percent_decode(s, n, false);
}

/* ---- URL pieces ---- */

int sv4_url_split(const char *url, struct url_parts *ret)
{
        struct url_parts p = { 0 };
        const char *s, *a, *e;

        if (!url)
                return -EINVAL;
        s = strstr(url, "://");
        if (!s || s == url)
                return -EINVAL;
        p.scheme = url;
        p.scheme_len = (size_t)(s - url);
        /* AWS endpoints are http(s) URLs: anything else before "://" is no scheme but a malformed URL, which
         * a server would read otherwise than the signer. */
        if (!(p.scheme_len == 4 && strncasecmp(url, "http", 4) == 0) &&
            !(p.scheme_len == 5 && strncasecmp(url, "https", 5) == 0))
                return -EINVAL;
        a = s + 3;
        e = a + strcspn(a, "/?#");
        for (const char *at = a; at < e; at++)
                if (*at == '@')
                        a = at + 1;
        if (e == a)
                return -EINVAL;
        for (const char *c = a; c < e; c++)
                if ((unsigned char)*c <= ' ' || *c == 0x7f)
                        return -EINVAL;
        /* A port, if any (after the last colon outside an IPv6 literal's brackets), is digits. */
        const char *close = memchr(a, ']', (size_t)(e - a)), *from = close ? close : a, *colon = NULL;
        for (const char *c = from; c < e; c++)
                if (*c == ':')
                        colon = c;
        if (colon && (colon + 1 == e || colon + 6 < e))
                return -EINVAL;
        for (const char *c = colon ? colon + 1 : e; c < e; c++)
                if (!isdigit((unsigned char)*c))
                        return -EINVAL;
        p.host = a;
        p.host_len = (size_t)(e - a);
        p.path = e;
        p.path_len = strcspn(e, "?#");
        if (e[p.path_len] == '?') {
                p.query = e + p.path_len + 1;
                p.query_len = strcspn(p.query, "#");
        }
        *ret = p;
        return 0;
}

/* The Host header value botocore derives: lowercase, default port dropped. */
static char *url_host_header(const struct url_parts *u)
{
        const char *h = u->host, *colon = NULL;
        size_t n = u->host_len;
        char *out;

        /* The port's colon is the last one after a closing bracket (IPv6 literals carry colons). */
        for (size_t i = n; i > 0; i--) {
                if (h[i - 1] == ']')
                        break;
                if (h[i - 1] == ':') {
                        colon = &h[i - 1];
                        break;
                }
        }
        if (colon) {
                const char *port = colon + 1;
                size_t plen = n - (size_t)(port - h);
                bool https = u->scheme_len == 5 && strncasecmp(u->scheme, "https", 5) == 0;
                bool http = u->scheme_len == 4 && strncasecmp(u->scheme, "http", 4) == 0;
                if (plen == 0 || (https && plen == 3 && strncmp(port, "443", 3) == 0) ||
                    (http && plen == 2 && strncmp(port, "80", 2) == 0))
                        n = (size_t)(colon - h);
        }
        out = strndup(h, n);
        if (!out)
                return NULL;
        for (char *c = out; *c; c++)
                if (!colon || c < out + (colon - h))
                        *c = (char)tolower((unsigned char)*c);
        return out;
}

/* ---- canonical URI ---- */

/* RFC 3986 5.2.4 dot-segment removal, with empty segments dropped (AWS wants runs of slashes collapsed). */
static int path_normalize(const char *path, size_t n, char **ret)
{
        _cleanup_free_ const char **seg = NULL;
        _cleanup_free_ size_t *seglen = NULL;
        size_t nseg = 0;
        struct buf b = { 0 };
        int r = 0;

        seg = calloc(n + 1, sizeof(*seg));
        seglen = calloc(n + 1, sizeof(*seglen));
        if (!seg || !seglen)
                return -ENOMEM;
        for (size_t i = 0; i < n;) {
                size_t l = 0;
                while (i + l < n && path[i + l] != '/')
                        l++;
                if (l == 0 || (l == 1 && path[i] == '.'))
                        ;
                else if (l == 2 && path[i] == '.' && path[i + 1] == '.') {
                        if (nseg > 0)
                                nseg--;
                } else {
                        seg[nseg] = &path[i];
                        seglen[nseg++] = l;
                }
                i += l + 1;
        }
        if (n > 0 && path[0] == '/')
                r = buf_append(&b, "/", 1);
        for (size_t i = 0; r >= 0 && i < nseg; i++) {
                if (i > 0)
                        r = buf_append(&b, "/", 1);
                if (r >= 0)
                        r = buf_append(&b, seg[i], seglen[i]);
        }
        if (r >= 0 && nseg > 0 && path[n - 1] == '/')
                r = buf_append(&b, "/", 1);
        if (r >= 0)
                r = buf_append(&b, "", 1);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}

static int canonical_uri(const struct sigv4_request *r, const struct url_parts *u, struct buf *out)
{
        _cleanup_free_ char *norm = NULL;
        const char *p = u->path;
        size_t n = u->path_len;
        int k;

        if (!r->keep_path) {
                k = path_normalize(p, n, &norm);
                if (k < 0)
                        return k;
                p = norm;
                n = strlen(norm);
        }
        if (n == 0)
                return buf_append(out, "/", 1);
        return uri_encode(out, p, n, true);
}

/* ---- canonical query ---- */

struct qparam {
        char *name; /* canonical (encoded) */
        char *value;
};

static int qparam_cmp(const void *a, const void *b)
{
        const struct qparam *x = a, *y = b;
        int c = strcmp(x->name, y->name);
        return c != 0 ? c : strcmp(x->value, y->value);
}

static char *encode_component(const char *s, size_t n)
{
        _cleanup_free_ char *dec = sv4_uri_decode(s, n);
        struct buf b = { 0 };

        if (!dec)
                return NULL;
        if (uri_encode(&b, dec, strlen(dec), false) < 0 || buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

/* Appends the canonical pairs of a raw query string, except those named in drop (decoded names). */
static int query_collect(const char *q, size_t qlen, const char *const *drop, struct qparam **params,
                         size_t *n, size_t *cap)
{
        for (size_t i = 0; q && i < qlen;) {
                size_t l = 0, eq;
                while (i + l < qlen && q[i + l] != '&')
                        l++;
                if (l > 0) {
                        _cleanup_free_ char *name = NULL, *value = NULL;
                        for (eq = 0; eq < l && q[i + eq] != '='; eq++)
                                ;
                        name = encode_component(&q[i], eq);
                        value = eq < l ? encode_component(&q[i + eq + 1], l - eq - 1) : strdup("");
                        if (!name || !value)
                                return -ENOMEM;
                        if (drop) {
                                _cleanup_free_ char *dn = sv4_uri_decode(&q[i], eq);
                                if (!dn)
                                        return -ENOMEM;
                                if (sv4_name_in(dn, drop)) {
                                        i += l + 1;
                                        continue;
                                }
                        }
                        if (*n == *cap) {
                                size_t nc = *cap ? *cap * 2 : 8;
                                struct qparam *np = realloc(*params, nc * sizeof(*np));
                                if (!np)
                                        return -ENOMEM;
                                *params = np;
                                *cap = nc;
                        }
                        (*params)[(*n)++] = (struct qparam){ TAKE_PTR(name), TAKE_PTR(value) };
                }
                i += l + 1;
        }
        return 0;
}

static void qparams_free(struct qparam *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(p[i].name);
                free(p[i].value);
        }
        free(p);
}

/* extra: a raw query fragment ("a=b&c=d", encoded) added to the URL's own. */
static int canonical_query(const struct url_parts *u, const char *extra, const char *const *drop,
                           struct buf *out)
{
        struct qparam *p = NULL;
        size_t n = 0, cap = 0;
        int r;

        r = query_collect(u->query, u->query_len, drop, &p, &n, &cap);
        if (r >= 0 && extra)
                r = query_collect(extra, strlen(extra), drop, &p, &n, &cap);
        if (r >= 0) {
                if (n > 0)
                        qsort(p, n, sizeof(*p), qparam_cmp);
                for (size_t i = 0; r >= 0 && i < n; i++)
                        r = buf_printf(out, "%s%s=%s", i > 0 ? "&" : "", p[i].name, p[i].value);
        }
        qparams_free(p, n);
        return r;
}

/* ---- canonical headers ---- */

struct hdr {
        char *name;  /* lowercase */
        char *value; /* trimmed, whitespace runs collapsed */
        size_t order;
};

struct hdrs {
        struct hdr *v;
        size_t n, cap;
};

static void hdrs_free(struct hdrs *h)
{
        for (size_t i = 0; i < h->n; i++) {
                free(h->v[i].name);
                free(h->v[i].value);
        }
        free(h->v);
        *h = (struct hdrs){ 0 };
}

static char *header_name(const char *line, size_t n)
{
        while (n > 0 && is_ws(line[n - 1]))
                n--;
        while (n > 0 && is_ws(*line)) {
                line++;
                n--;
        }
        char *s = strndup(line, n);
        if (!s)
                return NULL;
        for (char *c = s; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        return s;
}

/* An HTTP field name (RFC 9110 token). Anything else could not be told apart in SignedHeaders, which ';'
 * delimits. */
static bool header_name_valid(const char *name)
{
        if (isempty(name))
                return false;
        for (const char *c = name; *c; c++)
                if (!isalnum((unsigned char)*c) && !strchr("!#$%&'*+-.^_`|~", *c))
                        return false;
        return true;
}

static char *header_value_trimall(const char *v)
{
        size_t n = strlen(v);
        char *out = malloc(n + 1), *o = out;
        bool pending_space = false;

        if (!out)
                return NULL;
        for (; *v; v++) {
                if (is_ws(*v)) {
                        pending_space = o != out;
                        continue;
                }
                if (pending_space)
                        *o++ = ' ';
                pending_space = false;
                *o++ = *v;
        }
        *o = '\0';
        return out;
}

bool sv4_name_in(const char *name, const char *const *list)
{
        for (; list && *list; list++)
                if (streq(name, *list))
                        return true;
        return false;
}

/* Headers never signed: proxies and HTTP stacks add or rewrite them (botocore leaves them out too). */
static const char *const unsigned_headers[] = { "authorization", "expect", "user-agent", "x-amzn-trace-id",
                                                NULL };

static int hdrs_add(struct hdrs *h, const char *line)
{
        const char *colon = strchr(line, ':');
        _cleanup_free_ char *name = NULL, *value = NULL;

        if (!colon)
                return -EINVAL;
        name = header_name(line, (size_t)(colon - line));
        value = header_value_trimall(colon + 1);
        if (!name || !value)
                return -ENOMEM;
        if (!header_name_valid(name))
                return -EINVAL;
        if (h->n == h->cap) {
                size_t nc = h->cap ? h->cap * 2 : 8;
                struct hdr *nv = realloc(h->v, nc * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                h->v = nv;
                h->cap = nc;
        }
        h->v[h->n] = (struct hdr){ TAKE_PTR(name), TAKE_PTR(value), h->n };
        h->n++;
        return 0;
}

static bool hdrs_has(const struct hdrs *h, const char *name)
{
        for (size_t i = 0; i < h->n; i++)
                if (streq(h->v[i].name, name))
                        return true;
        return false;
}

static int hdr_cmp(const void *a, const void *b)
{
        const struct hdr *x = a, *y = b;
        int c = strcmp(x->name, y->name);
        if (c != 0)
                return c;
        return x->order < y->order ? -1 : x->order > y->order;
}

static int format_amz_date(uint64_t usec, char out[17])
{
        time_t t = (time_t)(usec / 1000000);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
                return -EINVAL;
        return 0;
}

static int canon_headers(const struct canon_in *in, const struct url_parts *u, struct hdrs *h)
{
        int r;

        for (const char *const *p = in->r->headers; p && *p; p++) {
                const char *colon = strchr(*p, ':');
                _cleanup_free_ char *name = colon ? header_name(*p, (size_t)(colon - *p)) : NULL;
                if (!colon)
                        return -EINVAL;
                if (!name)
                        return -ENOMEM;
                if (sv4_name_in(name, in->drop) ||
                    (in->only && !sv4_name_in(name, (const char *const *)in->only)) ||
                    (!in->only && sv4_name_in(name, unsigned_headers)))
                        continue;
                r = hdrs_add(h, *p);
                if (r < 0)
                        return r;
        }
        for (const char *const *p = in->add; p && *p; p++) {
                r = hdrs_add(h, *p);
                if (r < 0)
                        return r;
        }
        if (!hdrs_has(h, "host") && (!in->only || sv4_name_in("host", (const char *const *)in->only))) {
                _cleanup_free_ char *host = url_host_header(u), *line = NULL;
                if (!host || !(line = strprintf("host:%s", host)))
                        return -ENOMEM;
                r = hdrs_add(h, line);
                if (r < 0)
                        return r;
        }
        if (in->add_date && !hdrs_has(h, "x-amz-date")) {
                char date[17], line[32];
                r = format_amz_date(in->r->time_usec, date);
                if (r < 0)
                        return r;
                snprintf(line, sizeof(line), "x-amz-date:%s", date);
                r = hdrs_add(h, line);
                if (r < 0)
                        return r;
        }
        if (h->n > 0)
                qsort(h->v, h->n, sizeof(*h->v), hdr_cmp);
        return 0;
}

/* "name:v1,v2\n..." and "name;name2". */
static int hdrs_format(const struct hdrs *h, struct buf *canon, struct buf *signed_names)
{
        int r = 0;

        for (size_t i = 0; r >= 0 && i < h->n; i++) {
                bool same = i > 0 && streq(h->v[i].name, h->v[i - 1].name);
                if (same)
                        r = buf_printf(canon, ",%s", h->v[i].value);
                else {
                        if (i > 0)
                                r = buf_append(canon, "\n", 1);
                        if (r >= 0)
                                r = buf_printf(canon, "%s:%s", h->v[i].name, h->v[i].value);
                        if (r >= 0)
                                r = buf_printf(signed_names, "%s%s", signed_names->len > 0 ? ";" : "",
                                               h->v[i].name);
                }
        }
        if (r >= 0)
                r = buf_append(canon, "\n", 1);
        if (r >= 0)
                r = buf_append(signed_names, "", 1);
        return r;
}

static int canon_signed_headers(const struct canon_in *in, char **ret)
{
        struct url_parts u;
        struct hdrs h = { 0 };
        struct buf canon = { 0 }, names = { 0 };
        int r;

        r = sv4_url_split(in->r->url, &u);
        if (r >= 0)
                r = canon_headers(in, &u, &h);
        if (r >= 0)
                r = hdrs_format(&h, &canon, &names);
        hdrs_free(&h);
        buf_free(&canon);
        if (r < 0) {
                buf_free(&names);
                return r;
        }
        *ret = names.data;
        return 0;
}

int sv4_canon_build(const struct canon_in *in, char **ret_creq, char **ret_signed)
{
        const struct sigv4_request *r = in->r;
        struct url_parts u;
        struct hdrs h = { 0 };
        struct buf b = { 0 }, names = { 0 };
        char payload[65];
        int k;

        if (!r || isempty(r->method))
                return -EINVAL;
        k = sv4_url_split(r->url, &u);
        if (k < 0)
                return k;
        if (in->payload_hash)
                snprintf(payload, sizeof(payload), "%s", in->payload_hash);
        else {
                k = sha256_hex(r->body, r->body ? r->body_len : 0, payload);
                if (k < 0)
                        return k;
        }

        k = buf_printf(&b, "%s\n", r->method);
        if (k >= 0)
                k = canonical_uri(r, &u, &b);
        if (k >= 0)
                k = buf_append(&b, "\n", 1);
        if (k >= 0)
                k = canonical_query(&u, in->extra_query, in->drop_query, &b);
        if (k >= 0)
                k = buf_append(&b, "\n", 1);
        if (k >= 0)
                k = canon_headers(in, &u, &h);
        if (k >= 0)
                k = hdrs_format(&h, &b, &names);
        if (k >= 0)
                k = buf_printf(&b, "\n%s\n%s", names.data, payload);
        if (k >= 0)
                k = buf_append(&b, "", 1);
        hdrs_free(&h);
        if (k < 0) {
                buf_free(&b);
                buf_free(&names);
                return k;
        }
        *ret_creq = b.data;
        if (ret_signed)
                *ret_signed = names.data;
        else
                buf_free(&names);
        return 0;
}

/* ---- the public steps ---- */

int sigv4_canonical_request(const struct sigv4_request *r, char **ret_canonical, char **ret_signed_headers)
{
        struct canon_in in = { .r = r, .add_date = true };

        if (!r || !ret_canonical)
                return -EINVAL;
        return sv4_canon_build(&in, ret_canonical, ret_signed_headers);
}

static int credential_scope(const struct sigv4_request *r, char **ret)
{
        char date[17];
        int k;

        if (isempty(r->region) || isempty(r->service))
                return -EINVAL;
        k = format_amz_date(r->time_usec, date);
        if (k < 0)
                return k;
        *ret = strprintf("%.8s/%s/%s/aws4_request", date, r->region, r->service);
        return *ret ? 0 : -ENOMEM;
}

int sigv4_string_to_sign(const struct sigv4_request *r, const char *canonical_request, char **ret)
{
        _cleanup_free_ char *scope = NULL;
        char date[17], hash[65];
        int k;

        if (!r || !canonical_request || !ret)
                return -EINVAL;
        k = credential_scope(r, &scope);
        if (k < 0)
                return k;
        k = format_amz_date(r->time_usec, date);
        if (k < 0)
                return k;
        k = sha256_hex(canonical_request, strlen(canonical_request), hash);
        if (k < 0)
                return k;
        *ret = strprintf(SIGV4_ALGORITHM "\n%s\n%s\n%s", date, scope, hash);
        return *ret ? 0 : -ENOMEM;
}

int sigv4_signature(const struct sigv4_request *r, const char *secret_access_key, const char *string_to_sign,
                    char ret_hex[65])
{
        _cleanup_free_ char *key0 = NULL;
        unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
        char date[17];
        int k;

        if (!r || !secret_access_key || !string_to_sign || isempty(r->region) || isempty(r->service))
                return -EINVAL;
        k = format_amz_date(r->time_usec, date);
        if (k < 0)
                return k;
        date[8] = '\0';
        key0 = strprintf("AWS4%s", secret_access_key);
        if (!key0)
                return -ENOMEM;
        k = hmac_sha256(key0, strlen(key0), date, k1);
        if (k >= 0)
                k = hmac_sha256(k1, 32, r->region, k2);
        if (k >= 0)
                k = hmac_sha256(k2, 32, r->service, k3);
        if (k >= 0)
                k = hmac_sha256(k3, 32, "aws4_request", k4);
        if (k >= 0)
                k = hmac_sha256(k4, 32, string_to_sign, sig);
        explicit_bzero(key0, strlen(key0));
        explicit_bzero(k1, sizeof(k1));
        explicit_bzero(k2, sizeof(k2));
        explicit_bzero(k3, sizeof(k3));
        explicit_bzero(k4, sizeof(k4));
        if (k < 0)
                return k;
        to_hex(sig, 32, ret_hex);
        return 0;
}

/* Canonical request → string to sign → signature, for a prepared canon_in. */
static int sign_with(const struct canon_in *in, const char *secret, char **ret_signed_names, char sig[65],
                     char **ret_creq, char **ret_sts)
{
        _cleanup_free_ char *creq = NULL, *names = NULL, *sts = NULL;
        int k;

        k = sv4_canon_build(in, &creq, &names);
        if (k < 0)
                return k;
        k = sigv4_string_to_sign(in->r, creq, &sts);
        if (k < 0)
                return k;
        k = sigv4_signature(in->r, secret, sts, sig);
        if (k < 0)
                return k;
        if (ret_signed_names)
                *ret_signed_names = TAKE_PTR(names);
        if (ret_creq)
                *ret_creq = TAKE_PTR(creq);
        if (ret_sts)
                *ret_sts = TAKE_PTR(sts);
        return 0;
}

static bool creds_usable(const struct aws_credentials *c)
{
        return c && !isempty(c->access_key_id) && !isempty(c->secret_access_key);
}

/* The caller's own copies of what the signer sets are replaced, as botocore does on a retry. */
static const char *const signer_headers[] = { "authorization", "x-amz-date", "x-amz-security-token",
                                              "x-amz-content-sha256", NULL };

int sigv4_sign_headers(const struct sigv4_request *r, const struct aws_credentials *c, char ***ret_headers)
{
        _cleanup_free_ char *date_h = NULL, *token_h = NULL, *sha_h = NULL, *auth = NULL, *names = NULL,
                            *scope = NULL;
        _cleanup_strv_ char **out = NULL;
        const char *add[4] = { 0 };
        size_t nadd = 0, nout = 0;
        char date[17], sig[65], payload[65];
        int k;

        if (!r || !creds_usable(c) || !ret_headers)
                return -EINVAL;
        k = format_amz_date(r->time_usec, date);
        if (k < 0)
                return k;
        k = sha256_hex(r->body, r->body ? r->body_len : 0, payload);
        if (k < 0)
                return k;
        date_h = strprintf("X-Amz-Date: %s", date);
        if (!date_h)
                return -ENOMEM;
        add[nadd++] = date_h;
        if (!isempty(c->session_token)) {
                token_h = strprintf("X-Amz-Security-Token: %s", c->session_token);
                if (!token_h)
                        return -ENOMEM;
                if (!r->session_token_unsigned)
                        add[nadd++] = token_h;
        }
        if (r->content_sha256_header) {
                sha_h = strprintf("x-amz-content-sha256: %s", payload);
                if (!sha_h)
                        return -ENOMEM;
                add[nadd++] = sha_h;
        }

        struct canon_in in = { .r = r, .drop = signer_headers, .add = add, .payload_hash = payload };
        k = sign_with(&in, c->secret_access_key, &names, sig, NULL, NULL);
        if (k < 0)
                return k;
        k = credential_scope(r, &scope);
        if (k < 0)
                return k;
        auth =
            strprintf("Authorization: " SIGV4_ALGORITHM " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                      c->access_key_id, scope, names, sig);
        if (!auth)
                return -ENOMEM;

        out = calloc(5, sizeof(char *));
        if (!out)
                return -ENOMEM;
        /* Order of the CRT suite's signed requests: token, date, content hash, authorization. */
        if (token_h)
                out[nout++] = TAKE_PTR(token_h);
        out[nout++] = TAKE_PTR(date_h);
        if (sha_h)
                out[nout++] = TAKE_PTR(sha_h);
        out[nout++] = TAKE_PTR(auth);
        *ret_headers = TAKE_PTR(out);
        return 0;
}

static int append_encoded_param(struct buf *b, const char *name, const char *value)
{
        int k = buf_printf(b, "%s%s=", b->len > 0 ? "&" : "", name);
        if (k >= 0)
                k = uri_encode(b, value, strlen(value), false);
        return k;
}

int sigv4_presign_url(const struct sigv4_request *r, const struct aws_credentials *c,
                      unsigned expires_seconds, char **ret_url)
{
        return sigv4_presign_steps(r, c, expires_seconds, ret_url, NULL, NULL);
}

int sigv4_presign_steps(const struct sigv4_request *r, const struct aws_credentials *c,
                        unsigned expires_seconds, char **ret_url, char **ret_canonical,
                        char **ret_string_to_sign)
{
        _cleanup_free_ char *names = NULL, *scope = NULL, *cred = NULL, *creq = NULL, *sts = NULL;
        struct buf q = { 0 }, url = { 0 };
        char date[17], sig[65], expires[16];
        struct url_parts u;
        int k;

        if (!r || !creds_usable(c) || !ret_url || expires_seconds == 0)
                return -EINVAL;
        k = sv4_url_split(r->url, &u);
        if (k < 0)
                return k;
        k = format_amz_date(r->time_usec, date);
        if (k < 0)
                return k;
        k = credential_scope(r, &scope);
        if (k < 0)
                return k;
        cred = strprintf("%s/%s", c->access_key_id, scope);
        if (!cred)
                return -ENOMEM;
        snprintf(expires, sizeof(expires), "%u", expires_seconds);

        struct canon_in hin = { .r = r, .drop = signer_headers };
        k = canon_signed_headers(&hin, &names);
        if (k < 0)
                return k;

        /* The order of the CRT suite's presigned URLs; the canonical form sorts them anyway. */
        k = append_encoded_param(&q, "X-Amz-Algorithm", SIGV4_ALGORITHM);
        if (k >= 0)
                k = append_encoded_param(&q, "X-Amz-Credential", cred);
        if (k >= 0)
                k = append_encoded_param(&q, "X-Amz-Date", date);
        if (k >= 0)
                k = append_encoded_param(&q, "X-Amz-SignedHeaders", names);
        if (k >= 0)
                k = append_encoded_param(&q, "X-Amz-Expires", expires);
        if (k >= 0 && !isempty(c->session_token) && !r->session_token_unsigned)
                k = append_encoded_param(&q, "X-Amz-Security-Token", c->session_token);
        if (k >= 0)
                k = buf_append(&q, "", 1);
        if (k < 0)
                goto fail;

        hin.extra_query = q.data;
        k = sign_with(&hin, c->secret_access_key, NULL, sig, &creq, &sts);
        if (k < 0)
                goto fail;

        q.len--; /* the NUL */
        if (!isempty(c->session_token) && r->session_token_unsigned)
                k = append_encoded_param(&q, "X-Amz-Security-Token", c->session_token);
        if (k >= 0)
                k = append_encoded_param(&q, "X-Amz-Signature", sig);
        if (k < 0)
                goto fail;

        /* The URL as given (fragment dropped), then the auth parameters. */
        {
                size_t base = u.query ? (size_t)(u.query - r->url) + u.query_len
                                      : (size_t)(u.path - r->url) + u.path_len;
                const char *sep = !u.query ? "?" : u.query_len > 0 ? "&" : "";
                k = buf_append(&url, r->url, base);
                if (k >= 0)
                        k = buf_printf(&url, "%s%.*s", sep, (int)q.len, q.data);
                if (k >= 0)
                        k = buf_append(&url, "", 1);
        }
        if (k < 0)
                goto fail;
        buf_free(&q);
        *ret_url = url.data;
        if (ret_canonical)
                *ret_canonical = TAKE_PTR(creq);
        if (ret_string_to_sign)
                *ret_string_to_sign = TAKE_PTR(sts);
        return 0;
fail:
        buf_free(&q);
        buf_free(&url);
        return k;
}
