/* The SQS surface's files for each other (sqs_surface.h says what the surface does): sqs_surface.c the
 * listener, replies and signature checks; sqs_actions.c the actions; sqs_queue.c the queue and what the
 * model sends to it. */
#pragma once

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sim/sqs_surface.h"

#define XMLNS             "http://queue.amazonaws.com/doc/2012-11-05/"
#define MAX_MESSAGES      10
#define MAX_WAIT          20
#define MAX_VISIBILITY    43200
#define MAX_BATCH         10
#define WAKE_MAX_USEC     (1000ULL * 1000ULL)
#define RETENTION_SECONDS 345600
#define MAX_MESSAGE_SIZE  1048576

/* ---- errors, as the service answers them (fixtures/sqs/README.txt) ---- */
struct sqs_err {
        unsigned status;
        const char *code; /* the query protocol's code, and x-amzn-query-error */
        const char *type; /* the JSON protocol's __type */
        const char *fault;
};

static const struct sqs_err err_nonexistent = { 400, "AWS.SimpleQueueService.NonExistentQueue",
                                                "com.amazonaws.sqs#QueueDoesNotExist", "Sender" };
static const struct sqs_err err_handle = { 404, "ReceiptHandleIsInvalid",
                                           "com.amazonaws.sqs#ReceiptHandleIsInvalid", "Sender" };
static const struct sqs_err err_not_inflight = { 400, "AWS.SimpleQueueService.MessageNotInflight",
                                                 "com.amazonaws.sqs#MessageNotInflight", "Sender" };
static const struct sqs_err err_invalid_value = { 400, "InvalidParameterValue",
                                                  "com.amazon.coral.service#InvalidParameterValueException",
                                                  "Sender" };
static const struct sqs_err err_missing = { 400, "MissingParameter",
                                            "com.amazon.coral.service#MissingRequiredParameterException",
                                            "Sender" };
static const struct sqs_err err_attribute = { 400, "InvalidAttributeName",
                                              "com.amazonaws.sqs#InvalidAttributeName", "Sender" };
static const struct sqs_err err_action = { 400, "InvalidAction",
                                           "com.amazon.coral.service#UnknownOperationException", "Sender" };
static const struct sqs_err err_serialization = { 400, "SerializationException",
                                                  "com.amazon.coral.service#SerializationException",
                                                  "Sender" };
static const struct sqs_err err_too_many = { 400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                                             "com.amazonaws.sqs#TooManyEntriesInBatchRequest", "Sender" };
static const struct sqs_err err_empty_batch = { 400, "AWS.SimpleQueueService.EmptyBatchRequest",
                                                "com.amazonaws.sqs#EmptyBatchRequest", "Sender" };
static const struct sqs_err err_ids_not_distinct = { 400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                                                     "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
                                                     "Sender" };
static const struct sqs_err err_batch_id = { 400, "AWS.SimpleQueueService.InvalidBatchEntryId",
                                             "com.amazonaws.sqs#InvalidBatchEntryId", "Sender" };
static const struct sqs_err err_access_denied = { 403, "AccessDenied",
                                                  "com.amazon.coral.service#AccessDeniedException",
                                                  "Sender" };
static const struct sqs_err err_signature = { 403, "SignatureDoesNotMatch",
                                              "com.amazon.coral.service#InvalidSignatureException",
                                              "Sender" };
static const struct sqs_err err_token = { 403, "InvalidClientTokenId",
                                          "com.amazon.coral.service#UnrecognizedClientException", "Sender" };
static const struct sqs_err err_no_auth = { 403, "MissingAuthenticationToken",
                                            "com.amazon.coral.service#MissingAuthenticationTokenException",
                                            "Sender" };
static const struct sqs_err err_internal = { 500, "InternalError", "com.amazonaws.sqs#InternalError",
                                             "Receiver" };
/* Throttling: SQS's modeled error (awsQueryError RequestThrottled, 403, in the SDKs' models) and the
 * common error every AWS service may answer. */
static const struct sqs_err err_throttled = { 403, "RequestThrottled", "com.amazonaws.sqs#RequestThrottled",
                                              "Sender" };
static const struct sqs_err err_throttling = { 400, "ThrottlingException",
                                               "com.amazon.coral.availability#ThrottlingException",
                                               "Sender" };

/* ---- state ---- */
struct queued {
        char *message_id;
        char *body;
        char md5[33];
        uint64_t sent_ms;
        double visible_at; /* scenario seconds */
        unsigned receive_count;
        uint64_t first_receive_ms;
        char *handle; /* the latest receipt handle; NULL until received */
};

struct node_state {
        /* What was last delivered, so that a later or different event of the node is delivered too. */
        bool rebalance_sent, notice_sent, closed_sent; /* closed: a reboot's Health event, once back */
        double rebalance_at, notice_at;
        char notice_kind[32];
};

struct sim_sqs {
        struct sim *sim;
        bool *launch_sent; /* per launch (sim_launch_hook()): its lifecycle message was queued */
        size_t n_launch_sent;
        struct sim_http *http;
        char *name, *path, *queue_url, *arn, *region, *scenario;
        uint64_t created_s;

        pthread_mutex_t lock;
        pthread_cond_t cond;       /* CLOCK_MONOTONIC: the queue changed, or look at the model again */
        pthread_cond_t polls_cond; /* CLOCK_MONOTONIC: the number of waiting polls changed */
        bool stopping;
        struct queued *msgs; /* sorted by sent_ms */
        size_t n_msgs, cap;
        struct node_state *nodes;
        size_t n_nodes;
        uint64_t handle_seq, request_seq;
        struct sim_sqs_fault fault;
        struct sim_sqs_stats stats;
        sigv4_secret_lookup_fn lookup;
        void *lookup_userdata;
        struct sim_sts *sts; /* checks session tokens when set */
};

/* What an action produced: a result in the JSON protocol's shape (NULL: no output), or an error. */
struct outcome {
        cJSON *result;
        const struct sqs_err *err;
        char *message;
};

void sim_sqs_outcome_error(struct outcome *o, const struct sqs_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sim_sqs_monotonic_deadline(uint64_t mono_usec, struct timespec *ts);
/* One action (q->lock held): the outcome's result or error. */
void sim_sqs_act(struct sim_sqs *q, const char *action, const cJSON *p, const char *path, struct outcome *o);

/* sqs_queue.c */
uint64_t sim_sqs_mix64(uint64_t x);
void sim_sqs_uuid_from(const char *key, const char *salt, char out[37]);
void sim_sqs_md5_hex(const char *data, size_t len, char out[33]);
int sim_sqs_enqueue(struct sim_sqs *q, const char *message_id, char *body, uint64_t sent_ms, double at);
double sim_sqs_sync_model(struct sim_sqs *q);
double sim_sqs_scenario_now(struct sim_sqs *q, uint64_t *ret_wall_ms);
char *sim_sqs_new_handle(struct sim_sqs *q, const struct queued *m);
struct queued *sim_sqs_find_handle(struct sim_sqs *q, const char *handle);
void sim_sqs_remove_msg(struct sim_sqs *q, struct queued *m);
