#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sim/aws_request.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

int sim_aws_form_parse(const char *body, size_t len, sim_aws_form_field_fn field, void *userdata)
{
        for (size_t i = 0; i < len;) {
                size_t j = i, eq;
                while (j < len && body[j] != '&')
                        j++;
                for (eq = i; eq < j && body[eq] != '='; eq++)
                        ;
                if (j > i) {
                        _cleanup_free_ char *k = sigv4_form_decode(body + i, eq - i);
                        _cleanup_free_ char *v = sigv4_form_decode(body + eq + (eq < j), j - eq - (eq < j));
                        int r;
                        if (!k || !v)
                                return -ENOMEM;
                        r = field(userdata, k, v);
                        if (r < 0)
                                return r;
                }
                i = j + 1;
        }
        return 0;
}

/* ---- the request as it was signed: headers and the absolute URL ---- */

struct header_list {
        char **v;
        size_t n, cap;
        int error;
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct header_list *h = cls;
        char *line;

        if (h->n + 2 > h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 16;
                char **v = realloc(h->v, cap * sizeof(char *));
                if (!v) {
                        h->error = -ENOMEM;
                        return MHD_NO;
                }
                h->v = v;
                h->cap = cap;
        }
        line = strprintf("%s: %s", key, value ? value : "");
        if (!line) {
                h->error = -ENOMEM;
                return MHD_NO;
        }
        h->v[h->n++] = line;
        h->v[h->n] = NULL;
        return MHD_YES;
}

static void header_list_free(struct header_list *h)
{
        for (size_t i = 0; i < h->n; i++)
                free(h->v[i]);
        free(h->v);
}

static bool unreserved(unsigned char c)
{
        return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

static int query_append(struct buf *b, const char *s)
{
        for (; *s; s++) {
                int r = unreserved((unsigned char)*s) ? buf_append(b, s, 1)
                                                      : buf_printf(b, "%%%02X", (unsigned char)*s);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct buf *b = cls;
        if ((b->len > 0 && buf_append(b, "&", 1) < 0) || query_append(b, key) < 0 ||
            buf_append(b, "=", 1) < 0 || query_append(b, value ? value : "") < 0)
                return MHD_NO;
        return MHD_YES;
}

/* MHD hands the query decoded: it is encoded again (as the SDKs encode it) to rebuild the signed URL. */
static char *request_url(const struct sim_http_request *rq)
{
        const char *host = MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "Host");
        struct buf query = {};
        char *url;

        MHD_get_connection_values(rq->connection, MHD_GET_ARGUMENT_KIND, collect_query, &query);
        if (buf_append(&query, "", 1) < 0) {
                buf_free(&query);
                return NULL;
        }
        url = strprintf("http://%s%s%s%s", host ? host : "localhost", rq->url, query.len > 1 ? "?" : "",
                        query.data);
        buf_free(&query);
        return url;
}

/* ---- verification ---- */

static bool session_token_valid(struct sim_sts *sts, const struct sim_http_request *rq)
{
        const char *auth = MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "Authorization");
        const char *cred =
            MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND, "X-Amz-Credential");
        const char *token =
            MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "X-Amz-Security-Token");
        const char *slash;
        _cleanup_free_ char *akid = NULL;

        if (!token)
                token = MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND,
                                                    "X-Amz-Security-Token");
        if (auth && strstr(auth, "Credential="))
                cred = strstr(auth, "Credential=") + strlen("Credential=");
        slash = cred ? strchr(cred, '/') : NULL;
        if (!slash)
                return false;
        akid = strndup(cred, (size_t)(slash - cred));
        return akid && sim_sts_session_token_valid(sts, akid, token);
}

int sim_aws_verify(const struct sim_http_request *rq, const char *service, sigv4_secret_lookup_fn lookup,
                   void *userdata, struct sim_sts *sts)
{
        struct header_list h = {};
        _cleanup_free_ char *url = NULL, *why = NULL;
        int r;

        if (!MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "Authorization") &&
            !MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND, "X-Amz-Signature"))
                return -EPERM;
        MHD_get_connection_values(rq->connection, MHD_HEADER_KIND, collect_header, &h);
        url = request_url(rq);
        if (h.error < 0 || !h.v || !url) {
                header_list_free(&h);
                return -ENOMEM;
        }
        struct sigv4_request sr = {
                .method = rq->method,
                .url = url,
                .headers = (const char *const *)h.v,
                .body = rq->body,
                .body_len = rq->body_len,
                .service = service,
                .time_usec = now_realtime_usec(),
        };
        r = sigv4_verify(&sr, lookup, userdata, &why);
        header_list_free(&h);
        if (r == 0 && sts && !session_token_valid(sts, rq))
                r = -ENOKEY;
        if (r < 0 && r != -ENOMEM)
                log_debug("sim %s: refused signature: %s", service, why ? why : strerror(-r));
        return r == -EINVAL ? -EACCES : r;
}
