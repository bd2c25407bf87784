/* Where and how to reach the Kubernetes API: kubeconfig files and the in-cluster service account. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kube_exec {
        char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
        char **argv;       /* command followed by args; run directly, never through a shell */
        char **env;        /* extra "NAME=value" entries */
        char *interactive_mode;
        bool provide_cluster_info;
};

struct kube_config {
        char *source;  /* the kubeconfig path, or "in-cluster" */
        char *context; /* context name used */
        char *server;  /* https://host:port (no trailing slash) */
        char *namespace;
        char *tls_server_name;
        /* TLS: a file path or in-memory PEM (decoded *-data), never both */
        char *ca_file, *ca_pem;
        char *cert_file, *cert_pem;
        char *key_file, *key_pem;
        /* credentials: a static token, a token file re-read on its TTL and after a 401, or an exec plugin */
        char *token;
        char *token_file;
        struct kube_exec *exec;
        char *username, *password; /* basic auth (rare; supported for completeness) */

        /* credential cache (owned here) */
        char *cached_token;
        uint64_t cached_token_expiry_usec; /* CLOCK_MONOTONIC (real token lifetimes); 0 = none */
        uint64_t token_read_usec;
        uint64_t token_reread_usec; /* how often token_file is re-read; default 60 s */

        /* exec plugin runs; 0 = default (tests set them) */
        uint64_t exec_timeout_usec;    /* a run's deadline: 10 s, then SIGTERM and SIGKILL 1 s later */
        size_t exec_output_max;        /* stdout cap: 1 MiB */
        uint64_t exec_retry_base_usec; /* first backoff after a failed run: 1 s, doubling to 1 min */
        /* CLOCK_MONOTONIC before which a failed run is not repeated (backoff; aged by hand in tests) */
        uint64_t exec_retry_after_usec;
        struct exec_state *exec_state; /* runs and waiters of kube_config_token_async (exec_plugin.c) */
};

/* Loads a kubeconfig (context NULL = current-context). Errors name file, line and key. */
int kube_config_load_file(const char *path, const char *context, struct kube_config **ret, char **ret_error);
/* The in-cluster service account. root overrides /var/run/secrets/kubernetes.io/serviceaccount (tests); the
 * server comes from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT. */
int kube_config_load_incluster(const char *root, struct kube_config **ret, char **ret_error);
/* --kubeconfig FILE, else $KUBECONFIG (first of a colon list), else ~/.kube/config if present, else
 * in-cluster. */
int kube_config_load_auto(const char *flag_path, const char *context, struct kube_config **ret,
                          char **ret_error);
struct kube_config *kube_config_free(struct kube_config *c);
static inline void kube_config_freep(struct kube_config **c)
{
        kube_config_free(*c);
}

/* The bearer token to send now (NULL when the config uses none, e.g. client certificates only). Static token
 * as is; token_file re-read when older than token_reread_usec; exec plugin run (argv, no shell) and its
 * token cached until its expirationTimestamp. May also set client cert/key PEM from an exec plugin answer.
 * Never logs the token. */
int kube_config_token(struct kube_config *c, const char **ret_token, char **ret_error);
/* For the event loop: the same credential without blocking it. An exec plugin runs as a child process that
 * the loop watches (its output, its exit and its deadline); one run at a time serves every caller. Returns
 * 1 with *ret_token (as kube_config_token) when a credential is at hand; 0 when the caller must wait: fn
 * then runs once, later, from the loop, with the token (valid during the call only; NULL for a
 * certificate-only credential) or the run's failure (error and a message with the plugin's exit status and
 * the tail of its stderr), unless the wait is cancelled first; <0 with *ret_error when the plugin cannot be
 * started, or failed before and its retry backoff has not passed. A credential with less than max(10 s, 10%
 * of its lifetime) left is still returned while a run renews it in the background. Use one loop per config;
 * kube_config_free() drops the waits (their callbacks never run; cancelling them stays allowed). */
struct loop;
struct kube_token_wait;
typedef void (*kube_token_fn)(int error, const char *token, const char *error_message, void *userdata);
int kube_config_token_async(struct kube_config *c, struct loop *l, const char **ret_token, kube_token_fn fn,
                            void *userdata, struct kube_token_wait **ret_wait, char **ret_error);
struct kube_token_wait *kube_token_wait_cancel(struct kube_token_wait *w); /* NULL-safe; returns NULL */
/* After a 401: forget cached credentials so the next kube_config_token re-reads or re-runs. */
void kube_config_invalidate(struct kube_config *c);
/* After a 401 for a request sent with token (NULL: none): the same, unless the credential has been renewed
 * since that request left (then the 401 is about the old one). */
void kube_config_token_rejected(struct kube_config *c, const char *token);
