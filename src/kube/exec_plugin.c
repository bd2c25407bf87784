/* Exec credential plugins (client.authentication.k8s.io v1 and v1beta1): the plugin a kubeconfig names is
 * run as a child process, directly (never through a shell), with KUBERNETES_EXEC_INFO; its ExecCredential
 * answer fills the config's credential cache. One-shot commands run it on a private loop
 * (kube_config_token), daemons on their own loop without blocking it (kube_config_token_async). */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "kube/kubeconfig_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/util.h"

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
#define KC_EXPIRY_SKEW_USEC (10ULL * 1000000ULL)

extern char **environ;

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
                return kc_set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
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
                return kc_set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
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
                return kc_set_error(ret_error, r,
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
                return kc_set_error(ret_error, r, strprintf("exec plugin %s: %s", e->argv[0], strerror(-r)));
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
                return kc_set_error(ret_error, -EBADMSG,
                                    strprintf("exec plugin %s: output is not a JSON object", cmd));
        bool bad = false;
        const char *api = json_str(o, "apiVersion", &bad), *kind = json_str(o, "kind", &bad);
        if (!streq(api, c->exec->api_version))
                return kc_set_error(ret_error, -EBADMSG,
                                    strprintf("exec plugin %s: returned apiVersion '%s', expected '%s'", cmd,
                                              api ? api : "", c->exec->api_version));
        if (!streq(kind, "ExecCredential"))
                return kc_set_error(
                    ret_error, -EBADMSG,
                    strprintf("exec plugin %s: returned kind '%s', expected 'ExecCredential'", cmd,
                              kind ? kind : ""));
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
        if (!cJSON_IsObject(st))
                return kc_set_error(ret_error, -EBADMSG,
                                    strprintf("exec plugin %s: no status in its answer", cmd));
        const char *token = json_str(st, "token", &bad), *exp = json_str(st, "expirationTimestamp", &bad),
                   *cert = json_str(st, "clientCertificateData", &bad),
                   *key = json_str(st, "clientKeyData", &bad);
        if (bad)
                return kc_set_error(ret_error, -EBADMSG,
                                    strprintf("exec plugin %s: status fields must be strings", cmd));
        if (isempty(cert) != isempty(key))
                return kc_set_error(
                    ret_error, -EBADMSG,
                    strprintf("exec plugin %s: clientCertificateData and clientKeyData go together", cmd));
        if (isempty(token) && isempty(cert))
                return kc_set_error(
                    ret_error, -EBADMSG,
                    strprintf("exec plugin %s: returned neither a token nor a client certificate", cmd));
        uint64_t exp_usec = 0;
        if (!isempty(exp) && parse_rfc3339(exp, &exp_usec) < 0)
                return kc_set_error(ret_error, -EBADMSG,
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

bool kc_exec_cache_valid(const struct kube_config *c, uint64_t now)
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

int kc_exec_run_sync(struct kube_config *c, char **ret_error)
{
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        int r = sd_event_new(&e);
        if (r < 0)
                return kc_set_error(ret_error, r,
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
                return kc_set_error(ret_error, r,
                                    strprintf("exec plugin %s: %s", c->exec->argv[0], strerror(-r)));
        if (s.error < 0)
                return kc_set_error(ret_error, s.error, s.message);
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

void kc_exec_state_free(struct exec_state *st)
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
                return kc_set_error(ret_error, r, TAKE_PTR(err));
        }
        st->active = st->runs;
        st->run_id++;
        return 0;
}

int kc_exec_token_async(struct kube_config *c, struct loop *l, const char **ret_token, kube_token_fn fn,
                        void *userdata, struct kube_token_wait **ret_wait, char **ret_error)
{
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
        if (kc_exec_cache_valid(c, now)) {
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
                        return kc_set_error(ret_error, st->last_error,
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
