/* URL parsing, the plain-http allowlist and proxy selection for the HTTP client. */
#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>

#include "core/http_internal.h"

void http_url_clear(struct http_url *u)
{
        free(u->host);
        free(u->hostport);
        free(u->target);
        *u = (struct http_url){ 0 };
}

static bool valid_reg_name(const char *s, size_t n)
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
                        return false;
        return true;
}

static int parse_port(const char *s, size_t n, uint16_t *ret)
{
        unsigned v = 0;

        if (n == 0 || n > 5)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t)v;
        return 0;
}

/* Splits "host[:port]" or "[v6][:port]"; the host is returned without brackets. */
static int parse_authority(const char *a, size_t n, char **ret_host, bool *ret_v6, uint16_t *port)
{
        const char *h, *colon = NULL;
        size_t hn;
        bool v6 = false;
        int r;

        if (n > 0 && a[0] == '[') {
                const char *close = memchr(a, ']', n);
                if (!close)
                        return -EINVAL;
                h = a + 1;
                hn = (size_t)(close - h);
                if (close + 1 < a + n) {
                        if (close[1] != ':')
                                return -EINVAL;
                        colon = close + 1;
                }
                v6 = true;
        } else {
                colon = memchr(a, ':', n);
                h = a;
                hn = colon ? (size_t)(colon - a) : n;
        }
        if (colon && (r = parse_port(colon + 1, (size_t)(a + n - colon - 1), port)) < 0)
                return r;

        _cleanup_free_ char *host = strndup(h, hn);
        if (!host)
                return -ENOMEM;
        if (v6) {
                struct in6_addr a6;
                if (inet_pton(AF_INET6, host, &a6) != 1)
                        return -EINVAL;
        } else if (!valid_reg_name(host, hn))
                return -EINVAL;
        *ret_v6 = v6;
        *ret_host = TAKE_PTR(host);
        return 0;
}

int http_url_parse(const char *url, struct http_url *ret)
{
        _cleanup_(http_url_clear) struct http_url u = { 0 };
        const char *sep = strstr(url, "://"), *a, *end;
        bool v6 = false;
        int r;

        if (!sep)
                return -EINVAL;
        for (const char *p = url; *p; p++)
                if ((unsigned char)*p <= ' ' || *p == 0x7f)
                        return -EINVAL;
        if ((size_t)(sep - url) == 5 && strncasecmp(url, "https", 5) == 0)
                u.https = true;
        else if ((size_t)(sep - url) != 4 || strncasecmp(url, "http", 4) != 0)
                return -EPROTONOSUPPORT;
        u.port = u.https ? 443 : 80;

        a = sep + 3;
        end = a + strcspn(a, "/?#");
        /* Credentials in the URL would end up in logs; nothing here uses them. */
        if (memchr(a, '@', (size_t)(end - a)))
                return -EINVAL;
        r = parse_authority(a, (size_t)(end - a), &u.host, &v6, &u.port);
        if (r < 0)
                return r;

        struct in_addr a4;
        u.ip_literal = v6 || inet_pton(AF_INET, u.host, &a4) == 1;
        bool default_port = u.port == (u.https ? 443 : 80);
        if (default_port)
                u.hostport = strprintf(v6 ? "[%s]" : "%s", u.host);
        else
                u.hostport = strprintf(v6 ? "[%s]:%u" : "%s:%u", u.host, u.port);
        size_t tn = strcspn(end, "#");
        u.target = tn == 0         ? strdup("/")
                   : end[0] == '?' ? strprintf("/%.*s", (int)tn, end)
                                   : strndup(end, tn);
        if (!u.hostport || !u.target)
                return -ENOMEM;
        *ret = u;
        u = (struct http_url){ 0 };
        return 0;
}

/* Plain http is allowed only where there is no network to eavesdrop on: loopback, and the instance metadata
 * service, which is link-local and speaks only http. */
bool http_host_is_local(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6, svc;

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1) {
                uint32_t a = ntohl(a4.s_addr);
                /* 127.0.0.0/8; IMDS 169.254.169.254; EKS Pod Identity 169.254.170.23; ECS 169.254.170.2 */
                return (a >> 24) == 127 || a == 0xa9fea9feU || a == 0xa9feaa17U || a == 0xa9feaa02U;
        }
        if (inet_pton(AF_INET6, host, &a6) != 1)
                return false;
        if (IN6_IS_ADDR_LOOPBACK(&a6))
                return true;
        /* IMDS and EKS Pod Identity over IPv6 */
        static const char *const link_local_services[] = { "fd00:ec2::254", "fd00:ec2::23" };
        for (size_t i = 0; i < ARRAY_SIZE(link_local_services); i++)
                if (inet_pton(AF_INET6, link_local_services[i], &svc) == 1 &&
                    memcmp(&a6, &svc, sizeof(a6)) == 0)
                        return true;
        return false;
}

/* Never through a proxy: what is local or link-local is not reachable from one. */
static bool host_is_never_proxied(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;

        if (http_host_is_local(host))
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 16) == 0xa9feU; /* 169.254.0.0/16 */
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LINKLOCAL(&a6);
        return false;
}

bool http_no_proxy_match(const char *no_proxy, const char *host)
{
        size_t hn = strlen(host);

        if (hn > 0 && host[hn - 1] == '.')
                hn--;
        for (const char *p = no_proxy; p && *p;) {
                size_t n = strcspn(p, ",");
                const char *e = p;
                const char *next = p[n] ? p + n + 1 : p + n;

                /* Trim blanks around the entry. */
                while (n > 0 && isspace((unsigned char)e[0]))
                        e++, n--;
                while (n > 0 && isspace((unsigned char)e[n - 1]))
                        n--;
                if (n == 1 && e[0] == '*')
                        return true;
                if (n > 0 && e[0] == '.')
                        e++, n--;
                if (n > 0 && e[n - 1] == '.')
                        n--;
                if (n > 0 && n <= hn && strncasecmp(host + hn - n, e, n) == 0 &&
                    (n == hn || host[hn - n - 1] == '.'))
                        return true;
                p = next;
        }
        return false;
}

static int percent_decode(const char *s, size_t n, char **ret)
{
        char *out = malloc(n + 1), *o = out;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                    isxdigit((unsigned char)s[i + 2])) {
                        char hex[3] = { s[i + 1], s[i + 2], 0 };
                        *o++ = (char)strtoul(hex, NULL, 16);
                        i += 2;
                } else
                        *o++ = s[i];
        }
        *o = 0;
        *ret = out;
        return 0;
}

int http_proxy_for(const char *host, char **ret_host, uint16_t *ret_port, char **ret_auth)
{
        const char *proxy = getenv("https_proxy");
        const char *no_proxy = getenv("no_proxy");
        _cleanup_free_ char *phost = NULL, *auth = NULL;
        uint16_t port = 1080;
        bool v6;
        int r;

        if (isempty(proxy))
                proxy = getenv("HTTPS_PROXY");
        if (isempty(no_proxy))
                no_proxy = getenv("NO_PROXY");
        if (isempty(proxy) || host_is_never_proxied(host) || http_no_proxy_match(no_proxy, host)) {
                *ret_host = NULL;
                *ret_auth = NULL;
                return 0;
        }

        const char *sep = strstr(proxy, "://"), *a = proxy;
        if (sep) {
                /* Only plain http proxies: the tunnel itself carries the TLS. */
                if ((size_t)(sep - proxy) != 4 || strncasecmp(proxy, "http", 4) != 0)
                        return -EPROTONOSUPPORT;
                a = sep + 3;
        }
        const char *end = a + strcspn(a, "/?#");
        const char *at = memrchr(a, '@', (size_t)(end - a));
        if (at) {
                _cleanup_free_ char *user = NULL;
                r = percent_decode(a, (size_t)(at - a), &user);
                if (r < 0)
                        return r;
                _cleanup_free_ char *b64 = base64_encode((const unsigned char *)user, strlen(user));
                explicit_bzero(user, strlen(user));
                if (!b64)
                        return -ENOMEM;
                auth = strprintf("Basic %s", b64);
                explicit_bzero(b64, strlen(b64));
                if (!auth)
                        return -ENOMEM;
                a = at + 1;
        }
        r = parse_authority(a, (size_t)(end - a), &phost, &v6, &port);
        if (r < 0) {
                if (auth)
                        explicit_bzero(auth, strlen(auth));
                return r;
        }
        *ret_host = TAKE_PTR(phost);
        *ret_port = port;
        *ret_auth = TAKE_PTR(auth);
        return 0;
}
