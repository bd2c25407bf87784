/* What the files of the simulator's Kubernetes API surface share (server.c routes; the others serve one
 * concern each). Not for use outside src/sim/. */
#pragma once

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim/model.h"
#include "sim/server.h"

struct sim_http {
        struct MHD_Daemon *daemon;
        sim_http_handler_fn handler;
        void *userdata;
        uint16_t port;
        char *url;
        char *address; /* host:port */
};

/* One client's token bucket of the emulated priority and fairness (apf.c). */
struct sim_apf_flow {
        uint64_t hash; /* of its Authorization; 0 = free */
        double tokens;
        uint64_t refilled, seen; /* monotonic usec */
};

struct sim_server {
        struct sim *sim;
        struct sim_http *http;
        pthread_t ticker;
        bool ticker_started;
        atomic_bool stopping;
        double error_rate;
        unsigned latency_ms;
        unsigned label_latency_ms; /* faults.node_label_latency_ms */
        double watch_drop_rate, watch_gone_rate, throttle_rate;
        uint64_t rng; /* the fault draws' seed */
        /* The request being dispatched, and how many requests of each key (folded) came before; under the
         * model lock. */
        uint64_t req_key, req_n, req_count[1024];
        /* Faults injected so far (GET /sim/v1/faults), under the model lock. */
        uint64_t n_errors, n_throttled, n_watch_dropped, n_watch_gone, n_list_gone;
        /* Priority and fairness (apf.c; qps 0 = off), its flows and rejections, under the model lock. */
        double apf_qps, apf_burst;
        unsigned apf_retry_after;
        struct sim_apf_flow apf_flows[64];
        uint64_t n_apf_rejected;
};

struct resource {
        const char *group; /* "" = core */
        const char *version;
        const char *name;
        const char *singular;
        const char *kind;
        bool namespaced;
        enum sim_kind sim_kind;
        const char *short_name;
        bool in_all; /* category "all" */
};

struct api_path {
        const struct resource *res;
        const char *ns, *name, *sub;
};

/* The answer of an API request, made while the model is locked, is serialised and sent once the lock is
 * released (a pod list of a large cluster takes longer to print than to build): dispatch() points this at
 * its own slot for the time it holds the lock. */
struct deferred_reply {
        struct MHD_Connection *c;
        unsigned status;
        cJSON *body;
        bool set;
};
extern _Thread_local struct deferred_reply *sim_deferred;

/* The fault draws are a function of the seed, the request (method, path, watch or not), how many such
 * requests came before, and the fault: a client's n-th PATCH of a node meets the same fault on every run,
 * whatever its other requests do in parallel. */
enum fault_salt {
        FAULT_ERROR = 1,
        FAULT_THROTTLE,
        FAULT_WATCH_GONE,
        FAULT_LIST_GONE,
        FAULT_WATCH_DROP,
        FAULT_WATCH_DROP_WHEN,
};

/* discovery.c */
const struct resource *sim_resource_find(const char *group, const char *version, const char *name);
char *sim_resource_api_version(const struct resource *r);
bool sim_resource_is_events_v1(const struct resource *r);
cJSON *sim_discovery_versions(const struct sim_server *srv);
cJSON *sim_discovery_group(const char *name);
bool sim_group_known(const char *name);
cJSON *sim_discovery_group_list(void);
cJSON *sim_discovery_resource_list(const char *group, const char *version);

/* selectors.c */
const cJSON *sim_json_path(const cJSON *obj, const char *dotted);
const char *sim_json_str(const cJSON *obj, const char *dotted);
double sim_json_num(const cJSON *obj, const char *dotted);
void sim_list_filter_for(const char *lsel, const char *fsel, char *node_buf, size_t node_len,
                         struct sim_list_filter *ret);

/* events_v1.c */
void sim_event_convert(cJSON *ev, bool to_events_v1);

/* reply.c */
/* Sends and frees text (NULL: MHD_NO), with Cache-Control as kube-apiserver sends it. */
enum MHD_Result sim_reply_text(struct MHD_Connection *c, unsigned status, const char *type, char *text);
/* The same, with a Retry-After header when retry_after is not NULL. */
enum MHD_Result sim_reply_text_retry(struct MHD_Connection *c, unsigned status, const char *type, char *text,
                                     const char *retry_after);
enum MHD_Result sim_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body);
cJSON *sim_status_new(unsigned code, const char *reason, const char *message, const char *kind,
                      const char *name);
enum MHD_Result sim_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                                 const char *message);
enum MHD_Result sim_reply_not_found(struct MHD_Connection *c);
enum MHD_Result sim_reply_errno(struct MHD_Connection *c, int r);

/* faults.c */
uint64_t sim_fault_mix(uint64_t x);
void sim_fault_begin(struct sim_server *srv, const char *method, const char *url, bool watch);
double sim_fault_uniform(const struct sim_server *srv, enum fault_salt salt);
bool sim_fault_draw(const struct sim_server *srv, double rate, enum fault_salt salt);
enum MHD_Result sim_reply_throttled(struct MHD_Connection *c);
/* Whether the emulated priority and fairness lets the request being dispatched run (takes a token of its
 * client's bucket); under the model lock. */
bool sim_apf_admit(struct sim_server *srv, struct MHD_Connection *c);
/* kube-apiserver's answer to a request its priority and fairness turned away. */
enum MHD_Result sim_reply_apf_rejected(const struct sim_server *srv, struct MHD_Connection *c);

/* table.c */
cJSON *sim_table_new(struct sim *s, enum sim_kind k, const cJSON *items, const char *include,
                     const cJSON *list_meta);
bool sim_wants_table(struct MHD_Connection *c);

/* request.c */
const char *sim_arg(struct MHD_Connection *c, const char *key);
bool sim_arg_true(struct MHD_Connection *c, const char *key);
int sim_parse_int64(const char *s, int64_t *ret); /* -EINVAL malformed, -ERANGE out of range */
/* 0 absent (ret untouched), 1 set, <0 malformed: answer sim_reply_bad_int(). */
int sim_arg_int64(struct MHD_Connection *c, const char *key, int64_t *ret);
enum MHD_Result sim_reply_bad_int(struct MHD_Connection *c, const char *key);
const char *sim_content_type(struct MHD_Connection *c, char *buf, size_t len);
bool sim_content_is_json(const char *media_type); /* "" or application/json */
char *sim_not_found_message(const struct api_path *ap);
cJSON *sim_parse_body(const struct sim_http_request *rq);
const char *sim_user_agent(struct MHD_Connection *c);

/* kube_list.c, kube_write.c, watch.c */
enum MHD_Result sim_serve_list(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap);
enum MHD_Result sim_serve_get(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap);
/* GET .../deployments/NAME/scale */
enum MHD_Result sim_serve_scale_get(struct sim_server *srv, struct MHD_Connection *c,
                                    const struct api_path *ap);
enum MHD_Result sim_serve_write(struct sim_server *srv, struct MHD_Connection *c, const char *method,
                                const struct api_path *ap, const struct sim_http_request *rq);
enum MHD_Result sim_serve_watch(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap);
/* The client hung up (a stream with nothing to send would otherwise hold its thread). */
bool sim_peer_gone(int fd);

/* podlog.c: GET pods/NAME/log */
enum MHD_Result sim_serve_pod_log(struct sim_server *srv, struct MHD_Connection *c,
                                  const struct api_path *ap);
