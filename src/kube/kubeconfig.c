/* kubeconfig files, the in-cluster service account, and the credentials they lead to (static token, token
 * file, exec plugin). Follows client-go's clientcmd rules where they matter: relative paths are relative to
 * the kubeconfig's directory, a file and its *-data twin together are an error (as kubectl's validation
 * says), v1 exec plugins must state interactiveMode, and an exec plugin's answer must carry the apiVersion
 * it was asked for. Exec credential plugins are run by exec_plugin.c. */
#include "spotdrain/kubeconfig.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kubeconfig_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define KC_TOKEN_FILE_MAX    (1024u * 1024u)
#define KC_TOKEN_REREAD_USEC (60ULL * 1000000ULL)
#define KC_INCLUSTER_ROOT    "/var/run/secrets/kubernetes.io/serviceaccount"

#define EXEC_V1      "client.authentication.k8s.io/v1"
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

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
        kc_exec_state_free(c->exec_state);
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

/* An optional string key that counts as absent when empty: *ret is NULL then. */
static int kc_opt_str(struct kcp *p, const struct ynode *map, const char *prefix, const char *key,
                      const char **ret)
{
        const char *v;
        int r = kc_str(p, map, prefix, key, false, &v);
        if (r < 0)
                return r;
        *ret = isempty(v) ? NULL : v;
        return 0;
}

/* A file reference: made absolute against the kubeconfig's directory and checked readable now, so that a
 * typo is reported with its line rather than at the first request. */
static int kc_file(struct kcp *p, const struct ynode *map, const char *prefix, const char *key, char **ret)
{
        const char *v;
        _cleanup_free_ char *abs = NULL;
        int r = kc_opt_str(p, map, prefix, key, &v);
        if (r < 0)
                return r;
        if (v) {
                r = kc_abs_path(p->dir, v, &abs);
                if (r < 0)
                        return r;
                if (access(abs, R_OK) < 0)
                        return kc_fail(p, ynode_get(map, key), "%s.%s: %s: %s", prefix, key, abs,
                                       strerror(errno));
        }
        *ret = TAKE_PTR(abs);
        return 0;
}

/* A base64 *-data field decoded to PEM text. */
static int kc_pem_data(struct kcp *p, const struct ynode *map, const char *prefix, const char *key,
                       char **ret)
{
        const char *v;
        int r = kc_opt_str(p, map, prefix, key, &v);
        if (r < 0)
                return r;
        if (!v) {
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

int kube_config_load_file(const char *path, const char *context, struct kube_config **ret, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *root = NULL;
        char *err = NULL;
        int r = yaml_load_file(path, KC_FILE_MAX, &root, &err);
        if (r < 0)
                return kc_set_error(ret_error, r, err);
        _cleanup_free_ char *dir = NULL;
        r = dir_of(path, &dir);
        if (r < 0)
                return kc_set_error(ret_error, r, strprintf("%s: %s", path, strerror(-r)));
        _cleanup_(kube_config_freep) struct kube_config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        struct kcp p = { .path = path, .dir = dir, .root = root };
        r = kc_parse(&p, context, c);
        if (r < 0)
                return kc_set_error(ret_error, r, p.error);
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
                return kc_set_error(ret_error, r, strprintf("%s: %s", c->token_file, strerror(-r)));
        if (!*tok) {
                free(tok);
                return kc_set_error(ret_error, -EINVAL, strprintf("%s: token file is empty", c->token_file));
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
                return kc_set_error(
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
                return kc_set_error(
                    ret_error, -ENOENT,
                    strprintf("context '%s' given but there is no kubeconfig (in-cluster)", context));
        return kube_config_load_incluster(NULL, ret, ret_error);
}

int kube_config_token(struct kube_config *c, const char **ret_token, char **ret_error)
{
        int r;
        if (c->exec) {
                if (!kc_exec_cache_valid(c, now_monotonic_usec())) {
                        r = kc_exec_run_sync(c, ret_error);
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
                                return kc_set_error(ret_error, r, err);
                        free(err);
                }
                *ret_token = c->cached_token;
                return 0;
        }
        *ret_token = c->token;
        return 0;
}

int kube_config_token_async(struct kube_config *c, struct loop *l, const char **ret_token, kube_token_fn fn,
                            void *userdata, struct kube_token_wait **ret_wait, char **ret_error)
{
        if (!c->exec) {
                int r = kube_config_token(c, ret_token, ret_error);
                return r < 0 ? r : 1;
        }
        return kc_exec_token_async(c, l, ret_token, fn, userdata, ret_wait, ret_error);
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
