#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sim/aws_request.h"
#include "sim/imds_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- the request as it was signed: its header lines ---- */

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

/* ---- verification ---- */

static const char *session_token(const struct sim_http_request *rq)
{
        const char *token =
            MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "X-Amz-Security-Token");
        return token ? token
                     : MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND,
                                                   "X-Amz-Security-Token");
}

struct role_lookup {
        sigv4_secret_lookup_fn lookup;
        void *userdata;
};

/* The instance role's key first (any surface takes it), then the surface's own. */
static const char *role_or_surface(const char *akid, void *userdata)
{
        const struct role_lookup *l = userdata;
        return streq(akid, SIM_IMDS_ACCESS_KEY_ID) ? SIM_IMDS_SECRET_ACCESS_KEY
                                                   : l->lookup(akid, l->userdata);
}

bool sim_aws_instance_role(const struct sim_http_request *rq)
{
        const char *auth = MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "Authorization");
        const char *cred = auth ? strstr(auth, "Credential=") : NULL;
        size_t n = strlen(SIM_IMDS_ACCESS_KEY_ID);

        if (!cred)
                cred =
                    MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND, "X-Amz-Credential");
        else
                cred += strlen("Credential=");
        return cred && strncmp(cred, SIM_IMDS_ACCESS_KEY_ID, n) == 0 && cred[n] == '/';
}

int sim_aws_verify(const struct sim_http_request *rq, const char *service, sigv4_secret_lookup_fn lookup,
                   void *userdata, struct sim_sts *sts)
{
        struct role_lookup rl = { lookup, userdata };
        struct header_list h = {};
        _cleanup_free_ char *akid = NULL, *why = NULL;
        int r;

        if (!MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "Authorization") &&
            !MHD_lookup_connection_value(rq->connection, MHD_GET_ARGUMENT_KIND, "X-Amz-Signature"))
                return -EPERM;
        MHD_get_connection_values(rq->connection, MHD_HEADER_KIND, collect_header, &h);
        if (h.error < 0 || !h.v) {
                header_list_free(&h);
                return -ENOMEM;
        }
        struct sim_sigv4_request sr = {
                .method = rq->method,
                .target = rq->target ? rq->target : rq->url,
                .headers = (const char *const *)h.v,
                .body = rq->body,
                .body_len = rq->body_len,
                .service = service,
                .now_usec = now_realtime_usec(),
        };
        r = sim_sigv4_check(&sr, role_or_surface, &rl, &akid, &why);
        header_list_free(&h);
        if (r == 0 && streq(akid, SIM_IMDS_ACCESS_KEY_ID)) {
                /* The role's key goes with the session token IMDS handed out with it, nothing else. */
                if (!streq(session_token(rq), SIM_IMDS_SESSION_TOKEN))
                        r = -ENOKEY;
        } else if (r == 0 && sts && !sim_sts_session_token_valid(sts, akid, session_token(rq)))
                r = -ENOKEY;
        if (r < 0 && r != -ENOMEM)
                log_debug("sim %s: refused signature: %s", service, why ? why : strerror(-r));
        return r == -EINVAL ? -EACCES : r;
}
