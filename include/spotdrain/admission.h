/* admission: the controller's validating admission webhook for the agents' evictions (issue #15,
 * docs/security.md "Evictions: the controller's admission webhook").
 *
 * The chart's ValidatingAdmissionPolicy holds an agent's node writes and pod deletes to its own node, but a
 * pods/eviction CREATE carries only an Eviction (the pod's name and namespace), so no CEL expression can
 * see where the pod runs. The controller watches every pod anyway; it answers AdmissionReview v1 requests
 * (POST, JSON, over TLS) for the agents' evictions: an eviction by one of the agent users is allowed only
 * when the pod it names is bound to the node that the API server names in the agent's token
 * (userInfo.extra["authentication.kubernetes.io/node-name"], exactly one value).
 *
 * The webhook configuration's matchConditions send it only the agents' pods/eviction CREATEs; a request of
 * anyone else that reaches it anyway is allowed ("not matched": not this webhook's to judge). */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/util.h"

#define ADMISSION_NODE_CLAIM  "authentication.kubernetes.io/node-name"
#define ADMISSION_API_VERSION "admission.k8s.io/v1"
/* The largest AdmissionReview body taken: an Eviction is small, but the review also carries the user's
 * groups and extra; 1 MiB is far more than that and bounds what a client can make us hold. */
#define ADMISSION_MAX_BODY (1024u * 1024u)

enum admission_verdict {
        ADMISSION_NOT_MATCHED, /* not an agent's eviction: allowed, not judged */
        ADMISSION_ALLOWED,     /* an agent evicts a pod bound to its own node */
        ADMISSION_DENIED,
        _ADMISSION_VERDICT_MAX,
};

/* Why an agent's eviction was denied (the metric's reason label, the alert's reason). */
enum admission_deny {
        ADMISSION_DENY_NONE,
        ADMISSION_DENY_NO_CLAIM,    /* the token names no node, or several */
        ADMISSION_DENY_OTHER_NODE,  /* the pod is bound to another node, or to none */
        ADMISSION_DENY_UNKNOWN_POD, /* the controller knows no such pod (yet) */
        ADMISSION_DENY_NOT_SYNCED,  /* the controller's pod list is not complete yet */
        ADMISSION_DENY_MALFORMED,   /* an agent's request without a pod name or namespace */
        _ADMISSION_DENY_MAX,
};
/* "allowed", "denied", "not-matched". */
const char *admission_verdict_label(enum admission_verdict v);
/* "no-node-claim", "other-node", "unknown-pod", "not-synced", "malformed"; "" for NONE. */
const char *admission_deny_label(enum admission_deny d);

/* Where the pod namespace/name is bound: 1 with *ret_node set (borrowed until the next call; NULL or ""
 * when the pod is bound to no node), 0 when no such pod is known, -EAGAIN while the pod list is not
 * complete yet. */
typedef int (*admission_pod_node_fn)(void *userdata, const char *namespace, const char *name,
                                     const char **ret_node);

struct admission_decision {
        enum admission_verdict verdict;
        enum admission_deny deny;
        char node[254];     /* the token's node, "" when none */
        char pod_node[254]; /* the pod's node, "" when unknown or unbound */
        char message[512];  /* for the API server's answer to the agent and for the log */
};

/* The decision on one AdmissionRequest (the review's "request" object). agent_users: the agents'
 * usernames (system:serviceaccount:NS:NAME), NULL-terminated; an empty list matches no one. */
void admission_decide(const cJSON *request, char *const *agent_users, admission_pod_node_fn pod_node,
                      void *userdata, struct admission_decision *ret);

/* A whole AdmissionReview body in, the AdmissionReview answer out (*ret_json, malloc()ed): 0, or -EINVAL
 * when the body is no AdmissionReview v1 with a request and its uid (*ret_error says why; the server
 * answers 400), -ENOMEM. ret_decision (may be NULL) gets the decision. */
int admission_review(const char *body, size_t len, char *const *agent_users, admission_pod_node_fn pod_node,
                     void *userdata, char **ret_json, struct admission_decision *ret_decision,
                     const char **ret_error);

/* ---- the server ---- */

struct loop;
struct kube_client;
struct metrics;
struct alert_bus;

struct admission_options {
        const char *listen;    /* HOST:PORT as httpd.h reads it ("[::]:9443", port 0 picks one) */
        const char *cert_file; /* PEM: the serving certificate (and its chain) */
        const char *key_file;  /* PEM: its private key */
        char *const *agent_users;
        struct kube_client *kube; /* the pod informer's client; borrowed */
        struct metrics *metrics;  /* spotdrain_admission_reviews_total; may be NULL */
        struct alert_bus *bus;    /* eviction-denied, once per node and reason an hour; may be NULL */
        /* Tests: look pods up here instead of an informer (kube is then unused). */
        admission_pod_node_fn pod_node;
        void *pod_node_userdata;
};

#define METRIC_ADMISSION_REVIEWS "spotdrain_admission_reviews_total" /* {verdict,reason} */

struct admission_server;
/* Serves POST /validate-eviction on the loop's thread (libmicrohttpd driven by sd-event, so the pod
 * informer is read without locks). -EINVAL for a bad address or no agent user, -ENOENT / -EACCES for the
 * key or certificate files, -EADDRINUSE when it cannot listen. */
int admission_server_start(struct loop *l, const struct admission_options *o, struct admission_server **ret);
struct admission_server *admission_server_free(struct admission_server *s); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct admission_server *, admission_server_free);
uint16_t admission_server_port(const struct admission_server *s);
/* True once the pod informer has its first complete list (always with o->pod_node): before, every agent's
 * eviction is denied not-synced, so a webhook-only process is not ready until then. */
bool admission_server_synced(const struct admission_server *s);
/* The metric family, for a front end's registry. */
extern const struct metric_family_def admission_metric_family;
