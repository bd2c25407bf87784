/* The listener every simulated surface uses: libmicrohttpd, one thread per connection so that a handler
 * may block (a watch on the model's condition variable), the body collected before the handler runs. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define MAX_BODY (4u * 1024u * 1024u)

/* ---- the generic listener ---- */

struct conn_state {
        char *target; /* the request target as received (before MHD decodes it) */
        struct buf body;
        bool begun; /* the first call (headers only) was answered */
        bool too_big;
        bool started;
};

/* Called with the raw request target before the headers: the SigV4 check signs what was sent. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
        struct conn_state *st = calloc(1, sizeof(*st));
        if (st)
                st->target = strdup(uri ? uri : "");
        return st;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size,
                                  void **con_cls)
{
        struct sim_http *h = cls;
        struct conn_state *st = *con_cls;
        struct sim_http_request rq;

        if (!st || !st->target)
                return MHD_NO;
        if (!st->begun) {
                st->begun = true;
                return MHD_YES;
        }
        if (*upload_size > 0) {
                if (st->body.len + *upload_size > MAX_BODY)
                        st->too_big = true;
                else if (buf_append(&st->body, upload, *upload_size) < 0)
                        return MHD_NO;
                *upload_size = 0;
                return MHD_YES;
        }
        if (st->started)
                return MHD_YES;
        st->started = true;
        rq = (struct sim_http_request){
                .connection = c,
                .method = method,
                .url = url,
                .target = st->target,
                .body = st->body.data ? st->body.data : "",
                .body_len = st->body.len,
                .body_too_large = st->too_big,
        };
        return h->handler(h->userdata, &rq) < 0 ? MHD_NO : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct conn_state *st = *con_cls;
        if (!st)
                return;
        buf_free(&st->body);
        free(st->target);
        free(st);
        *con_cls = NULL;
}

/* Headers and body leave in one segment instead of waiting on Nagle for the client's delayed ACK. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        const union MHD_ConnectionInfo *ci;
        int one = 1;

        if (toe != MHD_CONNECTION_NOTIFY_STARTED)
                return;
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                (void)setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int parse_listen(const char *listen, struct sockaddr_storage *ret_sa, socklen_t *ret_len,
                        char **ret_host)
{
        _cleanup_free_ char *copy = strdup(listen);
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        char *host, *port, *colon;

        if (!copy)
                return -ENOMEM;
        colon = strrchr(copy, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        host = copy;
        port = colon + 1;
        if (host[0] == '[') {
                size_t n = strlen(host);
                if (n < 2 || host[n - 1] != ']')
                        return -EINVAL;
                host[n - 1] = 0;
                host++;
        }
        if (streq(host, "localhost") || isempty(host))
                host = "127.0.0.1";
        if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
                return -EINVAL;
        memcpy(ret_sa, res->ai_addr, res->ai_addrlen);
        *ret_len = res->ai_addrlen;
        freeaddrinfo(res);
        /* The URL must reach the server: a wildcard address is reached through loopback. */
        if (streq(host, "0.0.0.0"))
                host = "127.0.0.1";
        else if (streq(host, "::"))
                host = "::1";
        *ret_host = strchr(host, ':') ? strprintf("[%s]", host) : strdup(host);
        return *ret_host ? 0 : -ENOMEM;
}

/* As many connections as the process may have descriptors (raised to its hard limit), less a few for the
 * rest of it: libmicrohttpd's default (1,020, FD_SETSIZE's) is less than a large run's watches (one per
 * draining node) with the clients' other connections, and the connections past it got no answer at all. */
static unsigned connection_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 1000;
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
                rl.rlim_cur = want;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        rlim_t n = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
        return n > 1064 ? (unsigned)(n - 64) : 1000;
}

int sim_http_start(const char *listen, sim_http_handler_fn handler, void *userdata, struct sim_http **ret)
{
        struct sim_http *h;
        struct sockaddr_storage sa = {};
        socklen_t sa_len = 0;
        _cleanup_free_ char *host = NULL;
        const union MHD_DaemonInfo *di;
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
        int r;

        r = parse_listen(listen ? listen : "127.0.0.1:0", &sa, &sa_len, &host);
        if (r < 0)
                return r;
        if (sa.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->handler = handler;
        h->userdata = userdata;
        errno = 0;
        h->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
            connection_limit(), MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_END);
        if (!h->daemon) {
                r = errno > 0 ? -errno : -EADDRNOTAVAIL;
                free(h);
                return r;
        }
        di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
        h->port = di ? di->port : 0;
        h->url = strprintf("http://%s:%u", host, h->port);
        h->address = strprintf("%s:%u", host, h->port);
        if (!h->url || !h->address || h->port == 0) {
                sim_http_stop(h);
                return -ENOMEM;
        }
        *ret = h;
        return 0;
}

struct sim_http *sim_http_stop(struct sim_http *h)
{
        if (!h)
                return NULL;
        if (h->daemon)
                MHD_stop_daemon(h->daemon);
        free(h->url);
        free(h->address);
        free(h);
        return NULL;
}

const char *sim_http_url(const struct sim_http *h)
{
        return h->url;
}

uint16_t sim_http_port(const struct sim_http *h)
{
        return h->port;
}

int sim_http_reply(struct MHD_Connection *c, unsigned status, const char *content_type, char *body)
{
        return sim_reply_text(c, status, content_type, body) == MHD_YES ? 0 : -EIO;
}

int sim_http_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body)
{
        return sim_reply_json(c, status, body) == MHD_YES ? 0 : -EIO;
}

int sim_http_date(uint64_t usec, bool weekday, char *buf, size_t len)
{
        static const char *const days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
        static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
        time_t t = (time_t)(usec / 1000000ULL);
        struct tm tm;

        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        snprintf(buf, len, "%s%s%02d %s %04d %02d:%02d:%02d GMT", weekday ? days[tm.tm_wday] : "",
                 weekday ? ", " : "", tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
                 tm.tm_min, tm.tm_sec);
        return 0;
}
