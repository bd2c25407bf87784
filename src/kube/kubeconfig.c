/* kubeconfig files, the in-cluster service account, and the credentials they lead to (static token, token
 * file, exec plugin). Follows client-go's clientcmd rules where they matter: relative paths are relative to
 * the kubeconfig's directory, a file and its *-data twin together are an error (as kubectl's validation
 * says), v1 exec plugins must state interactiveMode, and an exec plugin's answer must carry the apiVersion
 * it was asked for. */
#include "spotdrain/kubeconfig.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define KC_FILE_MAX             (4u * 1024u * 1024u)
#define KC_TOKEN_FILE_MAX       (1024u * 1024u)
#define KC_EXEC_OUTPUT_MAX      (1024u * 1024u)
#define KC_EXEC_TIMEOUT_USEC    (10ULL * 1000000ULL)
#define KC_EXEC_KILL_GRACE_USEC (1ULL * 1000000ULL) /* SIGTERM, then this long until SIGKILL */
#define KC_EXEC_POLL_USEC       (20ULL * 1000ULL)   /* waitpid polling without pidfds */
#define KC_EXEC_STDERR_KEEP     4096                /* the tail of stderr kept for messages */
#define KC_EXEC_STDERR_EXCERPT  400                 /* how much of it goes into a message */
/* A failed run is not repeated before this backoff (1 s doubling to 1 min, jittered) has passed. */
#define KC_EXEC_RETRY_BASE_USEC (1ULL * 1000000ULL)
#define KC_EXEC_RETRY_MAX_USEC  (60ULL * 1000000ULL)
/* Below max(this, 10% of its lifetime) left, a credential is renewed in the background. */
#define KC_REFRESH_MIN_USEC (10ULL * 1000000ULL)
/* A token is given up this long before its expirationTimestamp, so that a request sent just before the
 * expiry does not arrive after it. */
#define KC_EXPIRY_SKEW_USEC  (10ULL * 1000000ULL)
#define KC_TOKEN_REREAD_USEC (60ULL * 1000000ULL)
#define KC_INCLUSTER_ROOT    "/var/run/secrets/kubernetes.io/serviceaccount"

#define EXEC_V1      "client.authentication.k8s.io/v1"
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

extern char **environ;

/* Appends a copy of s to the NULL-terminated vector *v (which may be NULL). */
static int strv_push(char ***v, size_t *n, const char *s)
{
        char *copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        char **nv = realloc(*v, (*n + 2) * sizeof(char *));
        if (!nv) {
                free(copy);
                return -ENOMEM;
        }
        nv[(*n)++] = copy;
        nv[*n] = NULL;
        *v = nv;
        return 0;
}

static struct kube_exec *kube_exec_free(struct kube_exec *e)
{
        if (!e)
                return NULL;
        free(e->api_version);
        strv_free(e->argv);
        strv_free(e->env);
        free(e->interactive_mode);
        free(e);
        return NULL;
}

static void kube_exec_freep(struct kube_exec **e)
{
        kube_exec_free(*e);
}

static void exec_state_free(struct exec_state *st);

struct kube_config *kube_config_free(struct kube_config *c)
{
        if (!c)
                return NULL;
        free(c->source);
        free(c->context);
        free(c->server);
        free(c->namespace);
        free(c->tls_server_name);
        free(c->ca_file);
        free(c->ca_pem);
        free(c->cert_file);
        free(c->cert_pem);
        free(c->key_file);
        free_secret(c->key_pem);
        free_secret(c->token);
        free(c->token_file);
        exec_state_free(c->exec_state);
        kube_exec_free(c->exec);
        free(c->username);
        free_secret(c->password);
        free_secret(c->cached_token);
        free(c);
        return NULL;
}

/* ---- kubeconfig parsing ---- */

struct kcp {
        const char *path; /* as given, for messages */
        char *dir;        /* absolute directory of the kubeconfig */
        const struct ynode *root;
        char *error;
};

static int kc_fail(struct kcp *p, const struct ynode *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int kc_fail(struct kcp *p, const struct ynode *at, const char *fmt, ...)
{
        if (p->error)
                return -EINVAL;
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = NULL;
        int n = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (n < 0) {
                msg = NULL;
                return -ENOMEM;
        }
        p->error = at ? strprintf("%s:%u: %s", p->path, at->line, msg) : strprintf("%s: %s", p->path, msg);
        return p->error ? -EINVAL : -ENOMEM;
}

/* A scalar string field of map; NULL when absent or null. */
static int kc_str(struct kcp *p, const struct ynode *map, const char *prefix, const char *key, bool required,
                  const char **ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (ynode_is_null(n)) {
                if (required)
                        return kc_fail(p, map, "%s.%s: missing", prefix, key);
                *ret = NULL;
                return 0;
        }
        if (n->type != YNODE_SCALAR)
                return kc_fail(p, n, "%s.%s: expected a string", prefix, key);
        if (required && isempty(n->value))
                return kc_fail(p, n, "%s.%s: empty", prefix, key);
        *ret = n->value;
        return 0;
}

static int kc_bool(struct kcp *p, const struct ynode *map, const char *prefix, const char *key, bool *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (ynode_is_null(n)) {
                *ret = false;
                return 0;
        }
        /* kubeconfigs written by tools sometimes quote booleans; accept "true"/"false" either way */
        if (n->type == YNODE_SCALAR && (streq(n->value, "true") || streq(n->value, "false"))) {
                *ret = streq(n->value, "true");
                return 0;
        }
        if (ynode_bool(n, ret) < 0)
                return kc_fail(p, n, "%s.%s: expected true or false", prefix, key);
        return 0;
}

static int kc_dup(struct kcp *p, const char *s, char **ret)
{
        if (!s) {
                *ret = NULL;
                return 0;
        }
        char *d = strdup(s);
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

static int kc_abs_path(const char *dir, const char *path, char **ret)
{
        while (path[0] == '.' && path[1] == '/')
                path += 2;
        char *r = path[0] == '/' ? strdup(path) : strprintf("%s/%s", dir, path);
        if (!r)
                return -ENOMEM;
        *ret = r;
        return 0;
}

/* A file reference: made absolute against the kubeconfig's directory and checked readable now, so that a
 * typo is reported with its line rather than at the first request. */
static int kc_file(struct kcp *p, const struct ynode *map, const char *prefix, const char *key, char **ret)
{
        const char *v;
        int r = kc_str(p, map, prefix, key, false, &v);
        if (r < 0)
                return r;
        if (isempty(v)) {
                *ret = NULL;
                return 0;
        }
        _cleanup_free_ char *abs = NULL;
        r = kc_abs_path(p->dir, v, &abs);
        if (r < 0)
                return r;
        if (access(abs, R_OK) < 0)
                return kc_fail(p, ynode_get(map, key), "%s.%s: %s: %s", prefix, key, abs, strerror(errno));
        *ret = TAKE_PTR(abs);
        return 0;
}

/* A base64 *-data field decoded to PEM text. */
static int kc_pem_data(struct kcp *p, const struct ynode *map, const char *prefix, const char *key,
                       char **ret)
{
        const char *v;
        int r = kc_str(p, map, prefix, key, false, &v);
        if (r < 0)
                return r;
        if (isempty(v)) {
                *ret = NULL;
                return 0;
        }
        _cleanup_free_ unsigned char *data = NULL;
        size_t len;
        r = base64_decode(v, strlen(v), &data, &len);
        if (r == -ENOMEM)
                return r;
        const struct ynode *n = ynode_get(map, key);
        if (r < 0)
                return kc_fail(p, n, "%s.%s: not valid base64", prefix, key);
        if (memchr(data, 0, len) || !strstr((char *)data, "-----BEGIN "))
                return kc_fail(p, n, "%s.%s: does not decode to PEM", prefix, key);
        *ret = (char *)TAKE_PTR(data);
        return 0;
}

/* A file path or its *-data twin, never both. */
static int kc_file_or_data(struct kcp *p, const struct ynode *map, const char *prefix, const char *file_key,
                           const char *data_key, char **ret_file, char **ret_pem)
{
        _cleanup_free_ char *file = NULL, *pem = NULL;
        int r = kc_file(p, map, prefix, file_key, &file);
        if (r < 0)
                return r;
        r = kc_pem_data(p, map, prefix, data_key, &pem);
        if (r < 0)
                return r;
        if (file && pem)
                return kc_fail(p, ynode_get(map, data_key), "%s: %s and %s are both set", prefix, file_key,
                               data_key);
        *ret_file = TAKE_PTR(file);
        *ret_pem = TAKE_PTR(pem);
        return 0;
}

static bool host_is_loopback(const char *host, size_t len)
{
        return (len == 9 && !strncmp(host, "localhost", 9)) || (len == 5 && !strncmp(host, "[::1]", 5)) ||
               (len >= 4 && !strncmp(host, "127.", 4));
}

/* https://host[:port][/path] without a trailing slash. A bare host gets https:// (as client-go does); plain
 * http is accepted only on loopback, where the test servers and the simulator listen. */
static int kc_server(struct kcp *p, const struct ynode *at, const char *prefix, const char *v, char **ret)
{
        _cleanup_free_ char *s = strstr(v, "://") ? strdup(v) : strprintf("https://%s", v);
        if (!s)
                return -ENOMEM;
        size_t l = strlen(s);
        while (l > 0 && s[l - 1] == '/')
                s[--l] = 0;
        bool http = startswith(s, "http://");
        if (!http && !startswith(s, "https://"))
                return kc_fail(p, at, "%s.server: '%s': scheme must be https", prefix, v);
        const char *host = s + (http ? 7 : 8);
        size_t hl = strcspn(host, "/");
        if (hl == 0)
                return kc_fail(p, at, "%s.server: '%s': no host", prefix, v);
        if (http) {
                /* strip the port to test the host */
                size_t h = hl;
                if (host[0] == '[') {
                        const char *e = memchr(host, ']', hl);
                        h = e ? (size_t)(e - host) + 1 : hl;
                } else {
                        const char *colon = memchr(host, ':', hl);
                        if (colon)
                                h = (size_t)(colon - host);
                }
                if (!host_is_loopback(host, h))
                        return kc_fail(p, at, "%s.server: '%s': plain http is only allowed on loopback",
                                       prefix, v);
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* Finds the entry of list (clusters, users, contexts) called name; returns its inner map (cluster, user,
 * context) and a key prefix for messages. -ENOENT when there is none. */
static int kc_find(struct kcp *p, const char *list, const char *inner, const char *name,
                   const struct ynode **ret_map, char **ret_prefix)
{
        const struct ynode *l = ynode_get(p->root, list);
        if (ynode_is_null(l))
                return -ENOENT;
        if (l->type != YNODE_SEQ)
                return kc_fail(p, l, "%s: expected a list", list);
        for (size_t i = 0; i < l->n_children; i++) {
                const struct ynode *e = &l->children[i];
                _cleanup_free_ char *prefix = strprintf("%s[%zu]", list, i);
                if (!prefix)
                        return -ENOMEM;
                if (e->type != YNODE_MAP)
                        return kc_fail(p, e, "%s: expected a map", prefix);
                const char *n;
                int r = kc_str(p, e, prefix, "name", true, &n);
                if (r < 0)
                        return r;
                if (!streq(n, name))
                        continue;
                const struct ynode *m = ynode_get(e, inner);
                if (ynode_is_null(m))
                        return kc_fail(p, e, "%s.%s: missing", prefix, inner);
                if (m->type != YNODE_MAP)
                        return kc_fail(p, m, "%s.%s: expected a map", prefix, inner);
                char *full = strprintf("%s.%s", prefix, inner);
                if (!full)
                        return -ENOMEM;
                *ret_map = m;
                *ret_prefix = full;
                return 0;
        }
        return -ENOENT;
}

static int kc_parse_cluster(struct kcp *p, const struct ynode *m, const char *prefix, struct kube_config *c)
{
        const char *server, *tls_name;
        int r = kc_str(p, m, prefix, "server", true, &server);
        if (r < 0)
                return r;
        r = kc_server(p, ynode_get(m, "server"), prefix, server, &c->server);
        if (r < 0)
                return r;
        bool insecure;
        r = kc_bool(p, m, prefix, "insecure-skip-tls-verify", &insecure);
        if (r < 0)
                return r;
        if (insecure)
                return kc_fail(p, ynode_get(m, "insecure-skip-tls-verify"),
                               "%s.insecure-skip-tls-verify: TLS verification cannot be disabled", prefix);
        r = kc_str(p, m, prefix, "tls-server-name", false, &tls_name);
        if (r < 0)
                return r;
        r = kc_dup(p, tls_name, &c->tls_server_name);
        if (r < 0)
                return r;
        return kc_file_or_data(p, m, prefix, "certificate-authority", "certificate-authority-data",
                               &c->ca_file, &c->ca_pem);
}

static int kc_parse_exec(struct kcp *p, const struct ynode *m, const char *prefix, struct kube_exec **ret)
{
        if (m->type != YNODE_MAP)
                return kc_fail(p, m, "%s: expected a map", prefix);
        _cleanup_(kube_exec_freep) struct kube_exec *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        const char *api, *command, *mode;
        int r = kc_str(p, m, prefix, "apiVersion", true, &api);
        if (r < 0)
                return r;
        if (!streq(api, EXEC_V1) && !streq(api, EXEC_V1BETA1))
                return kc_fail(p, ynode_get(m, "apiVersion"),
                               "%s.apiVersion: '%s' is not supported (use %s or %s)", prefix, api, EXEC_V1,
                               EXEC_V1BETA1);
        r = kc_str(p, m, prefix, "command", true, &command);
        if (r < 0)
                return r;
        r = kc_str(p, m, prefix, "interactiveMode", false, &mode);
        if (r < 0)
                return r;
        if (!mode) {
                /* client-go defaults v1beta1 to IfAvailable and requires v1 to say */
                if (streq(api, EXEC_V1))
                        return kc_fail(p, m, "%s.interactiveMode: missing (required by %s)", prefix,
                                       EXEC_V1);
                mode = "IfAvailable";
        }
        if (!streq(mode, "Never") && !streq(mode, "IfAvailable") && !streq(mode, "Always"))
                return kc_fail(p, ynode_get(m, "interactiveMode"),
                               "%s.interactiveMode: '%s' is not one of Never, IfAvailable, Always", prefix,
                               mode);
        if (streq(mode, "Always"))
                return kc_fail(p, ynode_get(m, "interactiveMode"),
                               "%s.interactiveMode: Always needs a terminal, which a daemon does not have",
                               prefix);
        r = kc_bool(p, m, prefix, "provideClusterInfo", &e->provide_cluster_info);
        if (r < 0)
                return r;
        e->api_version = strdup(api);
        e->interactive_mode = strdup(mode);
        if (!e->api_version || !e->interactive_mode)
                return -ENOMEM;

        /* A command with a slash is a path (relative to the kubeconfig); a bare name is looked up in PATH.
         */
        _cleanup_free_ char *cmd = NULL;
        if (strchr(command, '/'))
                r = kc_abs_path(p->dir, command, &cmd);
        else
                r = kc_dup(p, command, &cmd);
        if (r < 0)
                return r;
        size_t n = 0;
        r = strv_push(&e->argv, &n, cmd);
        if (r < 0)
                return r;
        const struct ynode *args = ynode_get(m, "args");
        if (!ynode_is_null(args)) {
                if (args->type != YNODE_SEQ)
                        return kc_fail(p, args, "%s.args: expected a list", prefix);
                for (size_t i = 0; i < args->n_children; i++) {
                        const struct ynode *a = &args->children[i];
                        if (a->type != YNODE_SCALAR)
                                return kc_fail(p, a, "%s.args[%zu]: expected a string", prefix, i);
                        r = strv_push(&e->argv, &n, a->value ? a->value : "");
                        if (r < 0)
                                return r;
                }
        }
        const struct ynode *env = ynode_get(m, "env");
        size_t ne = 0;
        if (!ynode_is_null(env)) {
                if (env->type != YNODE_SEQ)
                        return kc_fail(p, env, "%s.env: expected a list", prefix);
                for (size_t i = 0; i < env->n_children; i++) {
                        const struct ynode *v = &env->children[i];
                        _cleanup_free_ char *ep = strprintf("%s.env[%zu]", prefix, i);
                        if (!ep)
                                return -ENOMEM;
                        if (v->type != YNODE_MAP)
                                return kc_fail(p, v, "%s: expected a map of name and value", ep);
                        const char *name, *value;
                        r = kc_str(p, v, ep, "name", true, &name);
                        if (r < 0)
                                return r;
                        if (strchr(name, '='))
                                return kc_fail(p, ynode_get(v, "name"), "%s.name: contains '='", ep);
                        r = kc_str(p, v, ep, "value", false, &value);
                        if (r < 0)
                                return r;
                        _cleanup_free_ char *kv = strprintf("%s=%s", name, value ? value : "");
                        if (!kv)
                                return -ENOMEM;
                        r = strv_push(&e->env, &ne, kv);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(e);
        return 0;
}

static int kc_parse_user(struct kcp *p, const struct ynode *m, const char *prefix, struct kube_config *c)
{
        if (ynode_get(m, "auth-provider"))
                return kc_fail(p, ynode_get(m, "auth-provider"),
                               "%s.auth-provider: auth-provider plugins are not supported; use exec",
                               prefix);
        const char *token, *username, *password;
        int r = kc_str(p, m, prefix, "token", false, &token);
        if (r < 0)
                return r;
        r = kc_file(p, m, prefix, "tokenFile", &c->token_file);
        if (r < 0)
                return r;
        if (token && c->token_file)
                return kc_fail(p, ynode_get(m, "tokenFile"), "%s: token and tokenFile are both set", prefix);
        r = kc_str(p, m, prefix, "username", false, &username);
        if (r < 0)
                return r;
        r = kc_str(p, m, prefix, "password", false, &password);
        if (r < 0)
                return r;
        if (!username != !password)
                return kc_fail(p, m, "%s.%s: missing (username and password go together)", prefix,
                               username ? "password" : "username");
        const struct ynode *exec = ynode_get(m, "exec");
        if (!ynode_is_null(exec)) {
                _cleanup_free_ char *ep = strprintf("%s.exec", prefix);
                if (!ep)
                        return -ENOMEM;
                r = kc_parse_exec(p, exec, ep, &c->exec);
                if (r < 0)
                        return r;
        }
        unsigned methods = !!(token || c->token_file) + !!username + !!c->exec;
        if (methods > 1)
                return kc_fail(
                    p, m, "%s: more than one of token/tokenFile, username/password and exec is set", prefix);
        r = kc_dup(p, token, &c->token);
        if (r < 0)
                return r;
        r = kc_dup(p, username, &c->username);
        if (r < 0)
                return r;
        r = kc_dup(p, password, &c->password);
        if (r < 0)
                return r;
        r = kc_file_or_data(p, m, prefix, "client-certificate", "client-certificate-data", &c->cert_file,
                            &c->cert_pem);
        if (r < 0)
                return r;
        r = kc_file_or_data(p, m, prefix, "client-key", "client-key-data", &c->key_file, &c->key_pem);
        if (r < 0)
                return r;
        bool cert = c->cert_file || c->cert_pem, key = c->key_file || c->key_pem;
        if (cert != key)
                return kc_fail(p, m, "%s.%s: missing (a client certificate needs its key)", prefix,
                               cert ? "client-key" : "client-certificate");
        return 0;
}

static int kc_parse(struct kcp *p, const char *context, struct kube_config *c)
{
        if (p->root->type != YNODE_MAP)
                return kc_fail(p, p->root, "expected a map at the top");
        const char *ctx = context;
        if (!ctx) {
                int r = kc_str(p, p->root, "", "current-context", false, &ctx);
                if (r < 0)
                        return r;
                if (isempty(ctx))
                        return kc_fail(p, NULL, "no current-context set and no context given");
        }
        const struct ynode *cm, *clm, *um = NULL;
        _cleanup_free_ char *cprefix = NULL, *clprefix = NULL, *uprefix = NULL;
        int r = kc_find(p, "contexts", "context", ctx, &cm, &cprefix);
        if (r == -ENOENT)
                return kc_fail(p, NULL, "context '%s' not found", ctx);
        if (r < 0)
                return r;
        const char *cluster, *user, *ns;
        r = kc_str(p, cm, cprefix, "cluster", true, &cluster);
        if (r < 0)
                return r;
        r = kc_str(p, cm, cprefix, "user", false, &user);
        if (r < 0)
                return r;
        r = kc_str(p, cm, cprefix, "namespace", false, &ns);
        if (r < 0)
                return r;
        r = kc_find(p, "clusters", "cluster", cluster, &clm, &clprefix);
        if (r == -ENOENT)
                return kc_fail(p, ynode_get(cm, "cluster"), "%s.cluster: cluster '%s' not found", cprefix,
                               cluster);
        if (r < 0)
                return r;
        if (!isempty(user)) {
                r = kc_find(p, "users", "user", user, &um, &uprefix);
                if (r == -ENOENT)
                        return kc_fail(p, ynode_get(cm, "user"), "%s.user: user '%s' not found", cprefix,
                                       user);
                if (r < 0)
                        return r;
        }
        c->context = strdup(ctx);
        c->namespace = strdup(isempty(ns) ? "default" : ns);
        if (!c->context || !c->namespace)
                return -ENOMEM;
        r = kc_parse_cluster(p, clm, clprefix, c);
        if (r < 0)
                return r;
        if (um)
                r = kc_parse_user(p, um, uprefix, c);
        return r;
}

static int dir_of(const char *path, char **ret)
{
        _cleanup_free_ char *d = strdup(path);
        if (!d)
                return -ENOMEM;
        char *slash = strrchr(d, '/');
        if (!slash)
                strcpy(d, ".");
        else if (slash == d)
                d[1] = 0;
        else
                *slash = 0;
        char *abs = realpath(d, NULL);
        if (!abs)
                return -errno;
        *ret = abs;
        return 0;
}

static int set_error(char **ret_error, int r, char *msg)
{
        if (ret_error && msg)
                *ret_error = msg;
        else
                free(msg);
        return r;
}

int kube_config_load_file(const char *path, const char *context, struct kube_config **ret, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *root = NULL;
        char *err = NULL;
        int r = yaml_load_file(path, KC_FILE_MAX, &root, &err);
        if (r < 0)
                return set_error(ret_error, r, err);
        _cleanup_free_ char *dir = NULL;
        r = dir_of(path, &dir);
        if (r < 0)
                return set_error(ret_error, r, strprintf("%s: %s", path, strerror(-r)));
        _cleanup_(kube_config_freep) struct kube_config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        struct kcp p = { .path = path, .dir = dir, .root = root };
        r = kc_parse(&p, context, c);
        if (r < 0)
                return set_error(ret_error, r, p.error);
        free(p.error);
        c->source = strdup(path);
        if (!c->source)
                return -ENOMEM;
        c->token_reread_usec = KC_TOKEN_REREAD_USEC;
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- in-cluster ---- */

static int read_trimmed(const char *path, size_t max, char **ret)
{
        _cleanup_free_ char *s = NULL;
        size_t len;
        int r = read_file_full(path, max, &s, &len);
        if (r < 0)
                return r;
        if (strlen(s) != len) {
                explicit_bzero(s, len);
                return -EBADMSG;
        }
        size_t a = strspn(s, " \t\r\n");
        while (len > a && strchr(" \t\r\n", s[len - 1]))
                len--;
        memmove(s, s + a, len - a);
        s[len - a] = 0;
        *ret = TAKE_PTR(s);
        return 0;
}

/* Reads the token file into the cache. */
static int kc_read_token_file(struct kube_config *c, char **ret_error)
{
        char *tok = NULL;
        int r = read_trimmed(c->token_file, KC_TOKEN_FILE_MAX, &tok);
        if (r < 0)
                return set_error(ret_error, r, strprintf("%s: %s", c->token_file, strerror(-r)));
        if (!*tok) {
                free(tok);
                return set_error(ret_error, -EINVAL, strprintf("%s: token file is empty", c->token_file));
        }
        free_secret(c->cached_token);
        c->cached_token = tok;
        c->token_read_usec = now_monotonic_usec();
        return 0;
}

int kube_config_load_incluster(const char *root, struct kube_config **ret, char **ret_error)
{
        if (!root)
                root = KC_INCLUSTER_ROOT;
        const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
        if (isempty(host) || isempty(port))
                return set_error(
                    ret_error, -ENXIO,
                    strdup("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
                           "set (not running in a pod?)"));
        _cleanup_(kube_config_freep) struct kube_config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->source = strdup("in-cluster");
        c->context = strdup("in-cluster");
        c->server = strchr(host, ':') ? strprintf("https://[%s]:%s", host, port)
                                      : strprintf("https://%s:%s", host, port);
        c->token_file = strprintf("%s/token", root);
        _cleanup_free_ char *ca = strprintf("%s/ca.crt", root), *nsf = strprintf("%s/namespace", root);
        if (!c->source || !c->context || !c->server || !c->token_file || !ca || !nsf)
                return -ENOMEM;
        c->token_reread_usec = KC_TOKEN_REREAD_USEC;
        /* the token must be there from the start; a later failed re-read keeps the previous one */
        int r = kc_read_token_file(c, ret_error);
        if (r < 0)
                return r;
        /* Without ca.crt the system trust store verifies the server (as client-go does); never no
         * verification. */
        if (access(ca, R_OK) == 0)
                c->ca_file = TAKE_PTR(ca);
        r = read_trimmed(nsf, 4096, &c->namespace);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || isempty(c->namespace)) {
                r = free_and_strdup(&c->namespace, "default");
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int kube_config_load_auto(const char *flag_path, const char *context, struct kube_config **ret,
                          char **ret_error)
{
        if (!isempty(flag_path))
                return kube_config_load_file(flag_path, context, ret, ret_error);
        const char *env = getenv("KUBECONFIG");
        if (!isempty(env)) {
                /* kubectl merges the list; spotdrain takes its first non-empty entry */
                size_t n = strcspn(env, ":");
                while (n == 0 && env[0] == ':') {
                        env++;
                        n = strcspn(env, ":");
                }
                if (n > 0) {
                        _cleanup_free_ char *first = strndup(env, n);
                        if (!first)
                                return -ENOMEM;
                        return kube_config_load_file(first, context, ret, ret_error);
                }
        }
        const char *home = getenv("HOME");
        if (!isempty(home)) {
                _cleanup_free_ char *def = strprintf("%s/.kube/config", home);
                if (!def)
                        return -ENOMEM;
                if (access(def, F_OK) == 0)
                        return kube_config_load_file(def, context, ret, ret_error);
        }
        if (context)
                return set_error(
                    ret_error, -ENOENT,
                    strprintf("context '%s' given but there is no kubeconfig (in-cluster)", context));
        return kube_config_load_incluster(NULL, ret, ret_error);
}

/* ---- exec credential plugins ---- */

static int exec_info_json(const struct kube_config *c, char **ret)
{
        const struct kube_exec *e = c->exec;
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return -ENOMEM;
        cJSON *spec = NULL;
        int r = -ENOMEM;
        if (!cJSON_AddStringToObject(o, "apiVersion", e->api_version) ||
            !cJSON_AddStringToObject(o, "kind", "ExecCredential") ||
            !(spec = cJSON_AddObjectToObject(o, "spec")) ||
            !cJSON_AddBoolToObject(spec, "interactive", false))
                goto out;
        if (e->provide_cluster_info) {
                cJSON *cl = cJSON_AddObjectToObject(spec, "cluster");
                if (!cl || !cJSON_AddStringToObject(cl, "server", c->server))
                        goto out;
                if (c->tls_server_name &&
                    !cJSON_AddStringToObject(cl, "tls-server-name", c->tls_server_name))
                        goto out;
                _cleanup_free_ char *pem = NULL;
                const char *ca = c->ca_pem;
                if (!ca && c->ca_file) {
                        size_t len;
                        r = read_file_full(c->ca_file, KC_FILE_MAX, &pem, &len);
                        if (r < 0)
                                goto out;
                        r = -ENOMEM;
                        ca = pem;
                }
                if (ca) {
                        _cleanup_free_ char *b64 = base64_encode((const unsigned char *)ca, strlen(ca));
                        if (!b64 || !cJSON_AddStringToObject(cl, "certificate-authority-data", b64))
                                goto out;
                }
        }
        char *s = cJSON_PrintUnformatted(o);
        if (!s)
                goto out;
        *ret = s;
        r = 0;
out:
        cJSON_Delete(o);
        return r;
}

/* environ, minus the names the kubeconfig sets, plus its env and KUBERNETES_EXEC_INFO. The strings are
 * borrowed; only the array is allocated. */
static int exec_envp(const struct kube_exec *e, const char *info, char ***ret)
{
        size_t n_env = 0, n_extra = 0;
        for (char **p = environ; p && *p; p++)
                n_env++;
        for (char **p = e->env; p && *p; p++)
                n_extra++;
        char **envp = calloc(n_env + n_extra + 2, sizeof(char *));
        if (!envp)
                return -ENOMEM;
        size_t k = 0;
        for (char **p = environ; p && *p; p++) {
                size_t nl = strcspn(*p, "=");
                bool shadowed =
                    nl == strlen("KUBERNETES_EXEC_INFO") && !strncmp(*p, "KUBERNETES_EXEC_INFO", nl);
                for (char **q = e->env; !shadowed && q && *q; q++)
                        shadowed = strcspn(*q, "=") == nl && !strncmp(*p, *q, nl);
                if (!shadowed)
                        envp[k++] = *p;
        }
        for (char **q = e->env; q && *q; q++)
                envp[k++] = *q;
        envp[k++] = (char *)info;
        envp[k] = NULL;
        *ret = envp;
        return 0;
}

static void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}

/* ---- one plugin run: a child process watched by sd-event sources ----
 * stdout is collected up to a cap, a bounded tail of stderr is kept for the error message, and the exit is
 * seen through a pidfd (so SIGCHLD need not be blocked; kernels without pidfds poll waitpid on a timer).
 * Nothing here blocks: past its deadline or its output cap the plugin's process group gets SIGTERM, then
 * SIGKILL after a grace, and is reaped whenever it goes. */

struct exec_run;
typedef void (*exec_run_fn)(struct exec_run *run, void *userdata);

struct exec_run {
        sd_event *event;
        char *cmd; /* argv[0], for messages */
        pid_t pid;
        int out_fd, err_fd, pid_fd;
        sd_event_source *out_src, *err_src, *exit_src, *timer_src;
        size_t out_max;
        uint64_t timeout_usec;
        struct buf out;
        char err[KC_EXEC_STDERR_KEEP];
        size_t err_len;
        bool err_cut;     /* err holds only the tail of what was written */
        bool out_eof;     /* stdout closed */
        bool exited;      /* reaped */
        bool finished;    /* done has been called */
        bool terminating; /* SIGTERM sent; SIGKILL follows when the timer fires again */
        int status;
        int error; /* <0 when the run failed; message says how */
        char *message;
        exec_run_fn done;
        void *userdata;
        struct exec_run **list, *prev, *next; /* runs whose process is not reaped yet */
};

static void exec_run_free(struct exec_run *run)
{
        if (!run)
                return;
        if (run->prev)
                run->prev->next = run->next;
        else if (run->list && *run->list == run)
                *run->list = run->next;
        if (run->next)
                run->next->prev = run->prev;
        sd_event_source_disable_unref(run->out_src);
        sd_event_source_disable_unref(run->err_src);
        sd_event_source_disable_unref(run->exit_src);
        sd_event_source_disable_unref(run->timer_src);
        closep(&run->out_fd);
        closep(&run->err_fd);
        closep(&run->pid_fd);
        if (run->out.data)
                explicit_bzero(run->out.data, run->out.cap);
        buf_free(&run->out);
        sd_event_unref(run->event);
        free(run->cmd);
        free(run->message);
        free(run);
}

/* The last resort, for teardown and the synchronous path: SIGKILL and a wait that SIGKILL keeps short. */
static void exec_run_abandon(struct exec_run *run)
{
        if (!run->exited) {
                (void)kill(-run->pid, SIGKILL);
                (void)kill(run->pid, SIGKILL);
                while (waitpid(run->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        exec_run_free(run);
}

/* The whole process group: a plugin that is a shell script takes its children along. */
static void exec_run_kill(struct exec_run *run)
{
        if (run->exited)
                return;
        int sig = run->terminating ? SIGKILL : SIGTERM;
        if (kill(-run->pid, sig) < 0)
                (void)kill(run->pid, sig);
        if (!run->terminating) {
                run->terminating = true;
                if (sd_event_source_set_time_relative(run->timer_src, KC_EXEC_KILL_GRACE_USEC) < 0 ||
                    sd_event_source_set_enabled(run->timer_src, SD_EVENT_ONESHOT) < 0)
                        exec_run_kill(run); /* no timer for the grace: SIGKILL now */
        }
}

/* Calls done once; afterwards the run lives on only until its process is reaped. */
static void exec_run_complete(struct exec_run *run)
{
        run->finished = true;
        run->out_src = sd_event_source_disable_unref(run->out_src);
        run->err_src = sd_event_source_disable_unref(run->err_src);
        closep(&run->out_fd);
        closep(&run->err_fd);
        run->out_fd = run->err_fd = -1;
        run->done(run, run->userdata);
}

/* The end of every event handler (never deeper, where callers still hold the run). */
static void exec_run_release_if_over(struct exec_run *run)
{
        if (run->finished && run->exited)
                exec_run_free(run);
}

/* The tail of what the plugin wrote on stderr, on one line. */
static char *exec_run_stderr_excerpt(const struct exec_run *run)
{
        size_t end = run->err_len;
        while (end > 0 && strchr(" \t\r\n", run->err[end - 1]))
                end--;
        size_t start = end > KC_EXEC_STDERR_EXCERPT ? end - KC_EXEC_STDERR_EXCERPT : 0;
        while (start < end && strchr(" \t\r\n", run->err[start]))
                start++;
        if (start == end)
                return NULL;
        struct buf b = { 0 };
        int r = (start > 0 || run->err_cut) ? buf_append(&b, "...", 3) : 0;
        bool sep = false;
        for (size_t i = start; r >= 0 && i < end; i++) {
                unsigned char ch = (unsigned char)run->err[i];
                if (ch == '\n' || ch == '\r') {
                        sep = true;
                        continue;
                }
                if (sep)
                        r = buf_append(&b, "; ", 2);
                sep = false;
                char out = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
                if (r >= 0)
                        r = buf_append(&b, &out, 1);
        }
        if (r < 0 || buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

/* Ends the run as failed with "exec plugin CMD: <what> (stderr: ...)" and stops the process. */
static void exec_run_fail(struct exec_run *run, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void exec_run_fail(struct exec_run *run, int error, const char *fmt, ...)
{
        if (run->finished)
                return;
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *what = NULL;
        if (vasprintf(&what, fmt, ap) < 0)
                what = NULL;
        va_end(ap);
        _cleanup_free_ char *excerpt = exec_run_stderr_excerpt(run);
        run->error = error;
        run->message =
            excerpt ? strprintf("exec plugin %s: %s (stderr: %s)", run->cmd, what ? what : "", excerpt)
                    : strprintf("exec plugin %s: %s", run->cmd, what ? what : "");
        exec_run_kill(run);
        exec_run_complete(run);
}

/* Both the exit and the end of stdout seen: judge the run. */
static void exec_run_check(struct exec_run *run)
{
        if (run->finished || !run->exited || !run->out_eof)
                return;
        int st = run->status;
        if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
                return exec_run_fail(run, -EIO, "exited with status %d%s", WEXITSTATUS(st),
                                     WEXITSTATUS(st) == 127 ? " (not found or not executable?)" : "");
        if (!WIFEXITED(st))
                return exec_run_fail(run, -EIO, "killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (buf_append(&run->out, "", 1) < 0)
                return exec_run_fail(run, -ENOMEM, "%s", strerror(ENOMEM));
        /* stderr no longer reaches the daemon's own; warnings of a plugin that succeeded are kept at debug
         */
        _cleanup_free_ char *excerpt = exec_run_stderr_excerpt(run);
        if (excerpt)
                log_debug("exec plugin %s: stderr: %s", run->cmd, excerpt);
        exec_run_complete(run);
}

/* Reads what the pipe holds now; true at its end (or on a read error). */
static bool exec_run_drain(struct exec_run *run, int fd, bool is_stdout)
{
        for (;;) {
                char chunk[4096];
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno != EAGAIN;
                if (n == 0)
                        return true;
                if (!is_stdout) {
                        size_t len = (size_t)n;
                        if (len >= sizeof(run->err)) {
                                memcpy(run->err, chunk + len - sizeof(run->err), sizeof(run->err));
                                run->err_len = sizeof(run->err);
                                run->err_cut = true;
                                continue;
                        }
                        if (run->err_len + len > sizeof(run->err)) {
                                size_t drop = run->err_len + len - sizeof(run->err);
                                memmove(run->err, run->err + drop, run->err_len - drop);
                                run->err_len -= drop;
                                run->err_cut = true;
                        }
                        memcpy(run->err + run->err_len, chunk, len);
                        run->err_len += len;
                        continue;
                }
                if (run->out.len + (size_t)n > run->out_max) {
                        exec_run_fail(run, -EFBIG, "wrote more than %zu bytes to stdout", run->out_max);
                        return true;
                }
                if (buf_append(&run->out, chunk, (size_t)n) < 0) {
                        exec_run_fail(run, -ENOMEM, "%s", strerror(ENOMEM));
                        return true;
                }
        }
}

static int exec_on_stdout(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct exec_run *run = userdata;
        if (exec_run_drain(run, fd, true) && !run->finished) {
                run->out_eof = true;
                run->out_src = sd_event_source_disable_unref(run->out_src);
                exec_run_check(run);
        }
        exec_run_release_if_over(run);
        return 0;
}

static int exec_on_stderr(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct exec_run *run = userdata;
        if (exec_run_drain(run, fd, false))
                run->err_src = sd_event_source_disable_unref(run->err_src);
        return 0;
}

/* Reaps the plugin if it has exited; true when it has. */
static bool exec_run_reap(struct exec_run *run)
{
        int status;
        pid_t p;
        while ((p = waitpid(run->pid, &status, WNOHANG)) < 0 && errno == EINTR)
                ;
        if (p == 0 || (p < 0 && errno != ECHILD))
                return false;
        run->exited = true;
        run->status = p > 0 ? status : 0;
        run->exit_src = sd_event_source_disable_unref(run->exit_src);
        /* the exit may be dispatched before the last of the output */
        if (run->err_src && exec_run_drain(run, run->err_fd, false))
                run->err_src = sd_event_source_disable_unref(run->err_src);
        if (run->out_src && exec_run_drain(run, run->out_fd, true) && !run->finished) {
                run->out_eof = true;
                run->out_src = sd_event_source_disable_unref(run->out_src);
        }
        exec_run_check(run);
        exec_run_release_if_over(run);
        return true;
}

static int exec_on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        exec_run_reap(userdata);
        return 0;
}

static int exec_on_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct exec_run *run = userdata;
        if (!exec_run_reap(run) && sd_event_source_set_time_relative(s, KC_EXEC_POLL_USEC) >= 0)
                (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int exec_on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct exec_run *run = userdata;
        if (run->finished)
                exec_run_kill(run); /* the grace is over */
        else
                exec_run_fail(run, -ETIMEDOUT, "timed out after %.1f s", (double)run->timeout_usec / 1e6);
        exec_run_release_if_over(run);
        return 0;
}

/* Starts the plugin: argv directly (no shell), stdin /dev/null, its own process group. done is called once,
 * from the event loop, never from here. */
static int exec_run_start(const struct kube_config *c, sd_event *event, struct exec_run **list,
                          exec_run_fn done, void *userdata, char **ret_error)
{
        const struct kube_exec *e = c->exec;
        _cleanup_free_ char *info_json = NULL, *info = NULL;
        int r = exec_info_json(c, &info_json);
        if (r < 0)
                return set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
        info = strprintf("KUBERNETES_EXEC_INFO=%s", info_json);
        if (!info)
                return -ENOMEM;
        _cleanup_free_ char **envp = NULL;
        r = exec_envp(e, info, &envp);
        if (r < 0)
                return r;
        struct exec_run *run = calloc(1, sizeof(*run));
        if (!run)
                return -ENOMEM;
        run->out_fd = run->err_fd = run->pid_fd = -1;
        run->event = sd_event_ref(event);
        run->cmd = strdup(e->argv[0]);
        run->out_max = c->exec_output_max ? c->exec_output_max : KC_EXEC_OUTPUT_MAX;
        run->timeout_usec = c->exec_timeout_usec ? c->exec_timeout_usec : KC_EXEC_TIMEOUT_USEC;
        run->done = done;
        run->userdata = userdata;
        int out[2] = { -1, -1 }, err[2] = { -1, -1 };
        _cleanup_(closep) int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!run->cmd || devnull < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                r = run->cmd ? -errno : -ENOMEM;
                closep(&out[0]);
                closep(&out[1]);
                exec_run_free(run);
                return set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
        }
        run->out_fd = out[0];
        run->err_fd = err[0];
        /* linked before the fork: a child that fails to exec exits with every block still reachable,
         * which keeps memcheck (it follows the child) quiet */
        run->list = list;
        run->next = *list;
        if (*list)
                (*list)->prev = run;
        *list = run;
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                close(out[1]);
                close(err[1]);
                exec_run_free(run);
                return set_error(ret_error, r,
                                 strprintf("exec plugin %s: fork: %s", e->argv[0], strerror(-r)));
        }
        if (pid == 0) {
                /* The event loop blocks the signals it handles and the daemon ignores SIGPIPE; both would be
                 * inherited through exec, so the plugin gets the defaults back. Its own process group lets
                 * a timeout stop whatever it started. Async-signal-safe calls only. */
                sigset_t none;
                sigemptyset(&none);
                if (sigprocmask(SIG_SETMASK, &none, NULL) < 0 || signal(SIGPIPE, SIG_DFL) == SIG_ERR ||
                    setpgid(0, 0) < 0 || dup2(devnull, STDIN_FILENO) < 0 ||
                    dup2(out[1], STDOUT_FILENO) < 0 || dup2(err[1], STDERR_FILENO) < 0)
                        _exit(127);
                execvpe(e->argv[0], e->argv, envp);
                _exit(127);
        }
        run->pid = pid;
        (void)setpgid(pid, pid); /* also here, so that a kill right away already reaches the group */
        close(out[1]);
        close(err[1]);

        run->pid_fd = pidfd_open(pid, 0);
        if (fcntl(run->out_fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(run->err_fd, F_SETFL, O_NONBLOCK) < 0)
                r = -errno;
        else if ((r = sd_event_add_io(event, &run->out_src, run->out_fd, EPOLLIN, exec_on_stdout, run)) >=
                     0 &&
                 (r = sd_event_add_io(event, &run->err_src, run->err_fd, EPOLLIN, exec_on_stderr, run)) >=
                     0 &&
                 (r = sd_event_add_time_relative(event, &run->timer_src, CLOCK_MONOTONIC, run->timeout_usec,
                                                 0, exec_on_timer, run)) >= 0)
                r = run->pid_fd >= 0
                        ? sd_event_add_io(event, &run->exit_src, run->pid_fd, EPOLLIN, exec_on_pidfd, run)
                        : sd_event_add_time_relative(event, &run->exit_src, CLOCK_MONOTONIC,
                                                     KC_EXEC_POLL_USEC, 0, exec_on_poll, run);
        if (r < 0) {
                exec_run_abandon(run);
                return set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
        }
        (void)sd_event_source_set_description(run->timer_src, "exec-plugin-timeout");
        return 0;
}

static const char *json_str(const cJSON *o, const char *key, bool *ret_bad)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!v || cJSON_IsNull(v))
                return NULL;
        if (!cJSON_IsString(v)) {
                *ret_bad = true;
                return NULL;
        }
        return v->valuestring;
}

static void cjson_deletep(cJSON **o)
{
        cJSON_Delete(*o);
}

/* Parses the ExecCredential the plugin printed and fills the cache. */
static int exec_parse(struct kube_config *c, const char *text, char **ret_error)
{
        const char *cmd = c->exec->argv[0];
        _cleanup_(cjson_deletep) cJSON *o = cJSON_Parse(text);
        if (!o || !cJSON_IsObject(o))
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: output is not a JSON object", cmd));
        bool bad = false;
        const char *api = json_str(o, "apiVersion", &bad), *kind = json_str(o, "kind", &bad);
        if (!streq(api, c->exec->api_version))
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: returned apiVersion '%s', expected '%s'", cmd,
                                           api ? api : "", c->exec->api_version));
        if (!streq(kind, "ExecCredential"))
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: returned kind '%s', expected 'ExecCredential'",
                                           cmd, kind ? kind : ""));
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
        if (!cJSON_IsObject(st))
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: no status in its answer", cmd));
        const char *token = json_str(st, "token", &bad), *exp = json_str(st, "expirationTimestamp", &bad),
                   *cert = json_str(st, "clientCertificateData", &bad),
                   *key = json_str(st, "clientKeyData", &bad);
        if (bad)
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: status fields must be strings", cmd));
        if (isempty(cert) != isempty(key))
                return set_error(
                    ret_error, -EBADMSG,
                    strprintf("exec plugin %s: clientCertificateData and clientKeyData go together", cmd));
        if (isempty(token) && isempty(cert))
                return set_error(
                    ret_error, -EBADMSG,
                    strprintf("exec plugin %s: returned neither a token nor a client certificate", cmd));
        uint64_t exp_usec = 0;
        if (!isempty(exp) && parse_rfc3339(exp, &exp_usec) < 0)
                return set_error(ret_error, -EBADMSG,
                                 strprintf("exec plugin %s: bad expirationTimestamp '%s'", cmd, exp));

        /* An empty cached token marks a cached certificate-only answer. */
        _cleanup_free_ char *tok = strdup(token ? token : "");
        _cleanup_free_ char *cert_pem = cert ? strdup(cert) : NULL;
        _cleanup_free_ char *key_pem = key ? strdup(key) : NULL;
        if (!tok || (cert && !cert_pem) || (key && !key_pem)) {
                if (key_pem)
                        explicit_bzero(key_pem, strlen(key_pem));
                if (tok)
                        explicit_bzero(tok, strlen(tok));
                return -ENOMEM;
        }
        if (cert_pem) {
                /* the plugin's certificate replaces the kubeconfig's, as in client-go */
                free(c->cert_file);
                free(c->key_file);
                c->cert_file = c->key_file = NULL;
                free(c->cert_pem);
                free_secret(c->key_pem);
                c->cert_pem = TAKE_PTR(cert_pem);
                c->key_pem = TAKE_PTR(key_pem);
        }
        free_secret(c->cached_token);
        c->cached_token = TAKE_PTR(tok);
        uint64_t mono = now_monotonic_usec();
        c->token_read_usec = mono;
        if (exp_usec == 0)
                c->cached_token_expiry_usec = 0; /* good until a 401 */
        else {
                uint64_t real = now_realtime_usec();
                uint64_t left =
                    exp_usec > real + KC_EXPIRY_SKEW_USEC ? exp_usec - real - KC_EXPIRY_SKEW_USEC : 0;
                /* already stale: still handed out once, the next call runs the plugin again */
                c->cached_token_expiry_usec = left > 0 ? mono + left : (mono > 0 ? mono : 1);
        }
        return 0;
}

static bool exec_cache_valid(const struct kube_config *c, uint64_t now)
{
        if (!c->cached_token)
                return false;
        return c->cached_token_expiry_usec == 0 || now < c->cached_token_expiry_usec;
}

/* A credential with less than max(10 s, 10% of its lifetime) left is renewed while it is still used. */
static bool exec_refresh_due(const struct kube_config *c, uint64_t now)
{
        if (!c->cached_token || c->cached_token_expiry_usec == 0)
                return false;
        uint64_t life = c->cached_token_expiry_usec > c->token_read_usec
                            ? c->cached_token_expiry_usec - c->token_read_usec
                            : 0;
        uint64_t margin = life / 10 > KC_REFRESH_MIN_USEC ? life / 10 : KC_REFRESH_MIN_USEC;
        return now + margin >= c->cached_token_expiry_usec;
}

/* ---- the synchronous path (one-shot commands, tests): the same run on a private event loop ---- */

struct exec_sync {
        bool done;
        int error;
        char *message;
        char *out;
};

static void exec_sync_done(struct exec_run *run, void *userdata)
{
        struct exec_sync *s = userdata;
        s->done = true;
        s->error = run->error;
        s->message = TAKE_PTR(run->message);
        if (run->error == 0) {
                s->out = run->out.data;
                run->out = (struct buf){ 0 };
        }
}

static int exec_run_sync(struct kube_config *c, char **ret_error)
{
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        int r = sd_event_new(&e);
        if (r < 0)
                return set_error(ret_error, r,
                                 strprintf("exec plugin %s: %s", c->exec->argv[0], strerror(-r)));
        struct exec_run *runs = NULL;
        struct exec_sync s = { 0 };
        r = exec_run_start(c, e, &runs, exec_sync_done, &s, ret_error);
        if (r < 0)
                return r;
        while (!s.done && r >= 0)
                r = sd_event_run(e, UINT64_MAX);
        /* a plugin that failed is not waited for beyond its deadline */
        while (runs)
                exec_run_abandon(runs);
        if (!s.done)
                return set_error(ret_error, r,
                                 strprintf("exec plugin %s: %s", c->exec->argv[0], strerror(-r)));
        if (s.error < 0)
                return set_error(ret_error, s.error, s.message);
        free(s.message);
        r = exec_parse(c, s.out, ret_error);
        explicit_bzero(s.out, strlen(s.out));
        free(s.out);
        return r;
}

/* ---- the asynchronous path: one run at a time on the caller's loop, serving every waiter ---- */

struct kube_token_wait {
        struct exec_state *state;
        kube_token_fn fn;
        void *userdata;
        uint64_t run_id; /* the run it waits for */
        struct kube_token_wait *prev, *next;
};

struct exec_state {
        struct kube_config *cfg;
        sd_event *event;
        struct exec_run *runs;   /* every run whose process is not reaped yet */
        struct exec_run *active; /* the run the waiters wait for */
        uint64_t run_id;         /* of the latest run */
        struct kube_token_wait *waiters, *waiters_tail;
        struct backoff backoff;
        int last_error;
        char *last_message; /* why the last run failed; NULL after a success */
};

static void exec_state_free(struct exec_state *st)
{
        if (!st)
                return;
        while (st->runs)
                exec_run_abandon(st->runs);
        /* waits still held by their owners are theirs to drop; their callbacks never run */
        while (st->waiters) {
                struct kube_token_wait *w = st->waiters;
                st->waiters = w->next;
                w->state = NULL;
                w->prev = w->next = NULL;
        }
        sd_event_unref(st->event);
        free(st->last_message);
        free(st);
}

static void waiter_unlink(struct kube_token_wait *w)
{
        struct exec_state *st = w->state;
        if (w->prev)
                w->prev->next = w->next;
        else
                st->waiters = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                st->waiters_tail = w->prev;
        w->prev = w->next = NULL;
}

struct kube_token_wait *kube_token_wait_cancel(struct kube_token_wait *w)
{
        if (!w)
                return NULL;
        if (w->state)
                waiter_unlink(w);
        free(w);
        return NULL;
}

static void exec_state_record_failure(struct exec_state *st, int error, const char *message)
{
        struct kube_config *c = st->cfg;
        st->last_error = error;
        char *m = strdup(message ? message : strerror(-error));
        if (m) {
                free(st->last_message);
                st->last_message = m;
        }
        c->exec_retry_after_usec = now_monotonic_usec() + backoff_next(&st->backoff);
}

static void exec_state_done(struct exec_run *run, void *userdata)
{
        struct exec_state *st = userdata;
        struct kube_config *c = st->cfg;
        uint64_t id = st->run_id;
        st->active = NULL;
        int error = run->error;
        _cleanup_free_ char *parse_error = NULL;
        if (error == 0) {
                error = exec_parse(c, run->out.data, &parse_error);
                explicit_bzero(run->out.data, run->out.len);
        }
        const char *message = error == 0 ? NULL : parse_error ? parse_error : run->message;
        /* a copy: a waiter's callback may drop the cached credential (a 401) before the next one runs */
        _cleanup_free_ char *token = NULL;
        if (error == 0 && !(token = strdup(c->cached_token)))
                error = -ENOMEM;
        bool waited = st->waiters && st->waiters->run_id == id;
        if (error == 0) {
                backoff_reset(&st->backoff);
                free(st->last_message);
                st->last_message = NULL;
                c->exec_retry_after_usec = 0;
        } else {
                exec_state_record_failure(st, error, message);
                if (!waited)
                        log_warning("exec credential plugin: refresh failed, the current credential is used "
                                    "until it expires: %s",
                                    message ? message : strerror(-error));
        }
        while (st->waiters && st->waiters->run_id == id) {
                struct kube_token_wait *w = st->waiters;
                waiter_unlink(w);
                kube_token_fn fn = w->fn;
                void *ud = w->userdata;
                free(w);
                fn(error, error == 0 && !isempty(token) ? token : NULL, message, ud);
        }
        if (token)
                explicit_bzero(token, strlen(token));
}

static int exec_state_start(struct exec_state *st, char **ret_error)
{
        _cleanup_free_ char *err = NULL;
        int r = exec_run_start(st->cfg, st->event, &st->runs, exec_state_done, st, &err);
        if (r < 0) {
                exec_state_record_failure(st, r, err);
                return set_error(ret_error, r, TAKE_PTR(err));
        }
        st->active = st->runs;
        st->run_id++;
        return 0;
}

int kube_config_token_async(struct kube_config *c, struct loop *l, const char **ret_token, kube_token_fn fn,
                            void *userdata, struct kube_token_wait **ret_wait, char **ret_error)
{
        if (!c->exec) {
                int r = kube_config_token(c, ret_token, ret_error);
                return r < 0 ? r : 1;
        }
        struct exec_state *st = c->exec_state;
        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st)
                        return -ENOMEM;
                st->cfg = c;
                st->event = sd_event_ref(loop_event(l));
                uint64_t base = c->exec_retry_base_usec ? c->exec_retry_base_usec : KC_EXEC_RETRY_BASE_USEC;
                st->backoff =
                    BACKOFF_INIT(base, base > KC_EXEC_RETRY_MAX_USEC ? base : KC_EXEC_RETRY_MAX_USEC);
                c->exec_state = st;
        }
        uint64_t now = now_monotonic_usec();
        bool may_run = !st->active && now >= c->exec_retry_after_usec;
        if (exec_cache_valid(c, now)) {
                if (may_run && exec_refresh_due(c, now)) {
                        _cleanup_free_ char *err = NULL;
                        if (exec_state_start(st, &err) < 0)
                                log_debug("exec credential plugin: cannot start a refresh: %s",
                                          err ? err : "out of memory");
                }
                *ret_token = isempty(c->cached_token) ? NULL : c->cached_token;
                return 1;
        }
        if (!st->active) {
                if (!may_run && st->last_message)
                        return set_error(ret_error, st->last_error,
                                         strprintf("%s (tried again in %.1f s)", st->last_message,
                                                   (double)(c->exec_retry_after_usec - now) / 1e6));
                int r = exec_state_start(st, ret_error);
                if (r < 0)
                        return r;
        }
        struct kube_token_wait *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct kube_token_wait){
                .state = st, .fn = fn, .userdata = userdata, .run_id = st->run_id, .prev = st->waiters_tail
        };
        if (st->waiters_tail)
                st->waiters_tail->next = w;
        else
                st->waiters = w;
        st->waiters_tail = w;
        *ret_wait = w;
        return 0;
}

int kube_config_token(struct kube_config *c, const char **ret_token, char **ret_error)
{
        int r;
        if (c->exec) {
                if (!exec_cache_valid(c, now_monotonic_usec())) {
                        r = exec_run_sync(c, ret_error);
                        if (r < 0)
                                return r;
                }
                *ret_token = isempty(c->cached_token) ? NULL : c->cached_token;
                return 0;
        }
        if (c->token_file) {
                uint64_t reread = c->token_reread_usec ? c->token_reread_usec : KC_TOKEN_REREAD_USEC;
                if (!c->cached_token || now_monotonic_usec() - c->token_read_usec >= reread) {
                        char *err = NULL;
                        r = kc_read_token_file(c, &err);
                        /* a rotation that fails keeps the token read before (client-go does the same) */
                        if (r < 0 && !c->cached_token)
                                return set_error(ret_error, r, err);
                        free(err);
                }
                *ret_token = c->cached_token;
                return 0;
        }
        *ret_token = c->token;
        return 0;
}

void kube_config_invalidate(struct kube_config *c)
{
        if (!c)
                return;
        free_secret(c->cached_token);
        c->cached_token = NULL;
        c->cached_token_expiry_usec = 0;
        c->token_read_usec = 0;
}

void kube_config_token_rejected(struct kube_config *c, const char *token)
{
        /* Requests sent with the old credential keep coming back after a new one arrived; only the first
         * 401 for a credential forgets it (as client-go compares the credential it sent). */
        if (!c || (c->cached_token && !streq_ptr(isempty(c->cached_token) ? NULL : c->cached_token, token)))
                return;
        kube_config_invalidate(c);
}
