/* The simulator's Kubernetes API surface: a libmicrohttpd server that answers kubectl and spotdrain from the
 * model (model.h), plus the simulator's own control paths under /sim/v1/.
 *
 * One listener per surface: this one serves the Kubernetes API. IMDS, SQS, EC2 and STS surfaces get their
 * own listeners beside it, sharing the same struct sim and its lock. The server owns a ticker thread that
 * runs the model's timed actions (sim_advance) as they fall due and wakes every watcher. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim;
struct sim_server;
struct sim_http;
struct MHD_Connection;

/* ---- a listener for one simulated surface ----
 * libmicrohttpd with a thread per connection (a handler may block, e.g. to stream), TCP_NODELAY, keep-alive,
 * the request body collected before the handler runs. Each surface (Kubernetes API, IMDS per node, SQS, EC2,
 * STS) gets its own listener and URL. */
struct sim_http_request {
        struct MHD_Connection *connection; /* for MHD_lookup_connection_value() and the replies */
        const char *method;
        const char *url;    /* the path; the query is in MHD_GET_ARGUMENT_KIND values */
        const char *target; /* path and query as received, still percent-encoded */
        const char *body;   /* never NULL; body_len bytes (binary bodies allowed) */
        size_t body_len;
        bool body_too_large; /* over 4 MiB: body is truncated, answer 413 */
};
/* Queues exactly one response on rq->connection; returns 0, or <0 to drop the connection. */
typedef int (*sim_http_handler_fn)(void *userdata, const struct sim_http_request *rq);
/* listen: "HOST:PORT" (numeric host or localhost; port 0 picks one; NULL = "127.0.0.1:0"). */
int sim_http_start(const char *listen, sim_http_handler_fn handler, void *userdata, struct sim_http **ret);
struct sim_http *sim_http_stop(struct sim_http *h); /* waits for every connection thread; NULL-safe */
const char *sim_http_url(const struct sim_http *h); /* "http://127.0.0.1:PORT" */
uint16_t sim_http_port(const struct sim_http *h);
/* Replies (take ownership of body; Cache-Control: no-cache). */
int sim_http_reply(struct MHD_Connection *c, unsigned status, const char *content_type, char *body);
int sim_http_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body);
/* usec as an HTTP-date, "Tue, 28 May 2024 06:00:00 GMT" (RFC 1123), or without weekday as IMDS writes
 * scheduled event times, "28 May 2024 06:00:00 GMT". -EINVAL when it has no calendar date. */
int sim_http_date(uint64_t usec, bool weekday, char *buf, size_t len);

/* ---- the Kubernetes API surface ---- */

struct ynode;

struct sim_server_options {
        const char *listen;    /* "HOST:PORT", port 0 picks one; NULL = "127.0.0.1:0" */
        double api_error_rate; /* share of resource requests answered 500 (scenario faults.api_error_rate) */
        unsigned api_latency_ms; /* added before every resource request (faults.api_latency_ms) */
        /* added before a PATCH of a Node that sets labels, and before it is applied (a slow admission
         * webhook on labels): faults.node_label_latency_ms */
        unsigned node_label_latency_ms;
        double watch_drop_rate; /* share of watch streams ended early, after 1-3 events or 0.2-2 s */
        double watch_gone_rate; /* share of watches and lists from a resourceVersion answered 410 Expired */
        double api_throttle_rate; /* share of non-eviction resource requests answered 429, Retry-After: 1 */
        /* The AWS surfaces' faults (sim_surfaces_start): shares of requests answered with an error. */
        double sqs_error_rate;     /* InternalError (500) */
        double sqs_duplicate_rate; /* messages delivered twice */
        double sqs_throttle_rate;  /* RequestThrottled (403) / ThrottlingException (400) */
        double imds_error_rate;    /* 500 */
        double imds_timeout_rate;  /* never answered: the connection hangs 2 s, then drops */
        double sts_error_rate;     /* InternalFailure (500) */
        uint64_t seed;             /* for the error draws; 0 = 1 */
        /* The API server's priority and fairness (scenario api_priority_fairness, sim serve --apf-qps):
         * requests a second per client (its Authorization), sustained; 0 = off. A request beyond them is
         * answered 429 with Retry-After, before it runs. */
        double apf_qps;
        double apf_burst;         /* 0 = apf_qps (at least 1) */
        unsigned apf_retry_after; /* seconds; 0 = 1 */
};
/* The faults: section (and seed) of a loaded scenario. Leaves opt->listen alone. */
void sim_server_options_from_scenario(const struct ynode *scenario, struct sim_server_options *opt);

/* Starts serving s. The model's clock must have been started (sim_start). s must outlive the server. */
int sim_server_start_with(struct sim *s, const struct sim_server_options *opt, struct sim_server **ret);
/* The same without faults. */
int sim_server_start(struct sim *s, const char *listen, struct sim_server **ret);
/* Stops accepting, ends every watch, joins every thread. NULL-safe; returns NULL. */
struct sim_server *sim_server_stop(struct sim_server *srv);
/* "http://127.0.0.1:PORT" */
const char *sim_server_url(const struct sim_server *srv);
uint16_t sim_server_port(const struct sim_server *srv);

/* A kubeconfig (YAML) that reaches url with a bearer token, for kubectl and spotdrain. New string. */
char *sim_server_kubeconfig(const char *url, const char *token);

/* ---- pieces exposed for unit tests ---- */

/* Kubernetes label selector (=, ==, !=, in, notin, exists, !key) against a labels object (NULL = none).
 * Returns 1 match, 0 no match, -EINVAL on a malformed selector. */
int sim_label_selector_match(const char *selector, const cJSON *labels);
/* Field selector ("spec.nodeName=n1,status.phase!=Failed") against an object; a missing field compares
 * as "". Returns 1, 0 or -EINVAL. */
int sim_field_selector_match(const char *selector, const cJSON *obj);
/* Continue tokens of a paged list: the list's resourceVersion and the offset of the next item. */
char *sim_continue_encode(uint64_t rv, size_t offset);
int sim_continue_decode(const char *token, uint64_t *ret_rv, size_t *ret_offset);
/* Decodes a protobuf DeleteOptions body (kubectl 1.32+: "k8s\0" + runtime.Unknown wrapping
 * meta.k8s.io/v1 DeleteOptions). ret_grace is -1 when absent; ret_uid is NULL when no UID precondition. */
int sim_protobuf_delete_options(const void *data, size_t len, int64_t *ret_grace, char **ret_uid);
