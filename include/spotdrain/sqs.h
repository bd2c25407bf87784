/* aws/sqs: the Amazon SQS client of the controller (AWS JSON 1.0 protocol, SigV4 service "sqs").
 *
 * Every call is a POST to the endpoint's "/" with Content-Type application/x-amz-json-1.0 and X-Amz-Target
 * AmazonSQS.<Operation>, signed with the credentials the provider callback yields at send time. Calls run
 * asynchronously on the core loop and report through a callback exactly once (unless cancelled). Signing,
 * sending and the error classes are the AWS request layer's (awsreq.h); the classes SQS adds are below.
 *
 * Endpoint, in order: sqs_config.endpoint, $AWS_ENDPOINT_URL_SQS, $AWS_ENDPOINT_URL, else the scheme and
 * host of the queue URL (aws_endpoint_resolve()). Plain http is only accepted for loopback hosts (core's
 * HTTP client enforces it). Region, in order: sqs_config.region, the queue URL's host
 * (sqs.REGION.amazonaws.com[.cn] or the legacy REGION.queue.amazonaws.com), $AWS_REGION,
 * $AWS_DEFAULT_REGION.
 *
 * Errors come back as a struct sqs_result: a negative errno, a classified kind, the HTTP status and the
 * server's error code and message (the code is the part of the JSON "__type" after '#', e.g.
 * "QueueDoesNotExist", "AccessDeniedException"). The client logs at debug level only and never logs bodies,
 * receipt handles or credentials. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/sigv4.h"

struct loop;
struct sqs_client;
struct sqs_op;

/* Protocol limits (SQS API reference). */
#define SQS_MAX_MESSAGES      10
#define SQS_MAX_WAIT_SECONDS  20
#define SQS_MAX_VISIBILITY    43200
#define SQS_MAX_BATCH         10
#define SQS_BATCH_ID_MAX      80
#define SQS_MAX_MESSAGE_BYTES (1024u * 1024u)
/* Real time added to the long poll for the HTTP timeout of a ReceiveMessage. */
#define SQS_RECEIVE_SLACK_USEC (10ULL * 1000000ULL)

enum sqs_error {
        SQS_OK,
        SQS_ERR_ACCESS_DENIED,     /* AccessDenied(Exception): the role may not use the queue (-EACCES) */
        SQS_ERR_NONEXISTENT_QUEUE, /* QueueDoesNotExist / AWS.SimpleQueueService.NonExistentQueue (-ENOENT)
                                    */
        SQS_ERR_RECEIPT_HANDLE,    /* ReceiptHandleIsInvalid: stale or malformed handle (-ESTALE) */
        SQS_ERR_NOT_INFLIGHT,      /* MessageNotInflight: the message is visible again (-ESTALE) */
        SQS_ERR_AUTH,              /* signature, unknown key, missing auth (-EKEYREJECTED) */
        SQS_ERR_EXPIRED_TOKEN,     /* ExpiredToken, RequestExpired: refresh credentials (-EKEYEXPIRED) */
        SQS_ERR_INVALID_REQUEST,   /* InvalidParameterValue, MissingParameter, batch errors... (-EINVAL) */
        SQS_ERR_THROTTLED,      /* RequestThrottled, ThrottlingException, OverLimit, KmsThrottled (-EBUSY) */
        SQS_ERR_SERVER,         /* 5xx, InternalError, ServiceUnavailable (-EIO) */
        SQS_ERR_TRANSPORT,      /* no answer: connection, timeout, TLS (the transport's errno) */
        SQS_ERR_PROTOCOL,       /* an answer that is not what the protocol says (-EBADMSG) */
        SQS_ERR_NO_CREDENTIALS, /* the provider had none (-ENOKEY) */
        SQS_ERR_OTHER,          /* any other error code (errno from the HTTP status) */
        _SQS_ERR_MAX,
};

struct sqs_result {
        int error; /* 0 or a negative errno */
        enum sqs_error kind;
        long status;       /* HTTP status; 0 when no answer came */
        char code[96];     /* AWS error code, "" when none */
        char message[256]; /* the server's message (truncated), or what went wrong locally */
};

const char *sqs_error_to_string(enum sqs_error e); /* "access-denied", "nonexistent-queue", ... */
/* The queue cannot be read with these credentials: the controller's queue-unreadable alert. */
bool sqs_error_queue_unreadable(enum sqs_error e);
/* Worth retrying the same call after a backoff (throttling, server errors, transport errors). */
bool sqs_error_retryable(enum sqs_error e);
/* Classifies an AWS error code (with or without the "namespace#" prefix) as this client does. */
enum sqs_error sqs_error_from_code(const char *code, long status);

/* The credentials to sign the next call with, borrowed (the provider keeps them; they need only stay valid
 * during the call to this function's caller). NULL when none are available (the call then fails with
 * -ENOKEY before sending). With an aws_creds_provider (awscreds.h), keep a copy of the latest credentials
 * from its on_refresh callback (aws_credentials_copy) and return that copy here; an expired copy earns
 * SQS_ERR_EXPIRED_TOKEN, which is retryable once the provider has refreshed. */
typedef const struct aws_credentials *(*sqs_credentials_fn)(void *userdata);

struct sqs_config {
        const char *queue_url; /* required: https://sqs.REGION.amazonaws.com/ACCOUNT/NAME */
        const char *endpoint;  /* optional override (a flag); beats the environment */
        const char *region;    /* optional override */
        sqs_credentials_fn credentials;
        void *credentials_userdata;
};

/* -EINVAL for a queue URL that is not absolute http(s) with a path, -EDESTADDRREQ when no region can be
 * found, -ENOMEM. The environment is read here, once. */
int sqs_client_new(struct loop *l, const struct sqs_config *cfg, struct sqs_client **ret);
/* Cancels every call in flight (their callbacks are not called). NULL-safe; returns NULL. */
struct sqs_client *sqs_client_free(struct sqs_client *c);
static inline void sqs_client_freep(struct sqs_client **c)
{
        sqs_client_free(*c);
}
const char *sqs_client_endpoint(const struct sqs_client *c);
const char *sqs_client_region(const struct sqs_client *c);
const char *sqs_client_queue_url(const struct sqs_client *c);
struct loop *sqs_client_loop(const struct sqs_client *c);

/* Cancels one call in flight; its callback is not called. NULL-safe; returns NULL. Not from inside that
 * call's own callback (the call is finished then). */
struct sqs_op *sqs_op_cancel(struct sqs_op *op);

/* ---- ReceiveMessage ---- */
struct sqs_message {
        char *message_id;
        char *receipt_handle;
        char *body; /* NUL-terminated */
        size_t body_len;
        unsigned receive_count;      /* ApproximateReceiveCount; 0 when not sent */
        uint64_t sent_usec;          /* SentTimestamp (wall clock); 0 when not sent */
        uint64_t first_receive_usec; /* ApproximateFirstReceiveTimestamp; 0 when not sent */
        char *sender_id;             /* SenderId (the sending principal); NULL when not sent */
};
void sqs_message_clear(struct sqs_message *m);
/* Frees n messages and the array. NULL-safe. */
void sqs_messages_free(struct sqs_message *m, size_t n);

struct sqs_receive_opts {
        unsigned max_messages;       /* 1..10 */
        int wait_seconds;            /* 0..20 (long poll); <0 = the queue's ReceiveMessageWaitTimeSeconds */
        int visibility_timeout;      /* 0..43200 s; <0 = the queue's */
        bool legacy_attribute_names; /* send AttributeNames instead of MessageSystemAttributeNames */
};
#define SQS_RECEIVE_OPTS_DEFAULT                                          \
        ((struct sqs_receive_opts){ .max_messages = SQS_MAX_MESSAGES,     \
                                    .wait_seconds = SQS_MAX_WAIT_SECONDS, \
                                    .visibility_timeout = -1 })

/* msgs is NULL and n 0 on an empty poll (every form: "{}", an empty body, "Messages": null or []) and on
 * error. The messages belong to the client and are freed when the callback returns; the callback may take
 * any of their strings (TAKE_PTR), leaving NULL behind. A message whose MD5OfBody does not match its Body
 * fails the whole call (SQS_ERR_PROTOCOL), as the AWS SDKs do. */
typedef void (*sqs_receive_fn)(struct sqs_client *c, const struct sqs_result *res, struct sqs_message *msgs,
                               size_t n, void *userdata);
/* opts NULL = SQS_RECEIVE_OPTS_DEFAULT. -EINVAL for options out of range. ret may be NULL. */
int sqs_receive(struct sqs_client *c, const struct sqs_receive_opts *opts, sqs_receive_fn done,
                void *userdata, struct sqs_op **ret);

/* ---- DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility(Batch) ---- */
typedef void (*sqs_done_fn)(struct sqs_client *c, const struct sqs_result *res, void *userdata);
int sqs_delete(struct sqs_client *c, const char *receipt_handle, sqs_done_fn done, void *userdata,
               struct sqs_op **ret);

struct sqs_delete_entry {
        const char *id; /* unique in the batch: [A-Za-z0-9_-]{1,80} */
        const char *receipt_handle;
};
/* One entry's outcome. Entries the answer names neither as successful nor as failed are failed with
 * SQS_ERR_PROTOCOL. */
struct sqs_entry_result {
        char id[SQS_BATCH_ID_MAX + 1];
        int error; /* 0 when deleted */
        enum sqs_error kind;
        bool sender_fault;
        char code[96];
        char message[256];
};
/* When res->error is 0, entries[i] is the outcome of the i-th entry of the request (n of them; a 200 answer
 * may still fail some entries). Otherwise entries is NULL and n 0. */
typedef void (*sqs_batch_fn)(struct sqs_client *c, const struct sqs_result *res,
                             const struct sqs_entry_result *entries, size_t n, void *userdata);
/* 1..10 entries with distinct valid ids, else -EINVAL. */
int sqs_delete_batch(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                     sqs_batch_fn done, void *userdata, struct sqs_op **ret);

/* Keeps a received message hidden for timeout_seconds (0..43200) from now; 0 makes it visible at once. */
int sqs_change_visibility(struct sqs_client *c, const char *receipt_handle, unsigned timeout_seconds,
                          sqs_done_fn done, void *userdata, struct sqs_op **ret);
/* ChangeMessageVisibilityBatch: the same for 1..10 entries (as sqs_delete_batch's), each outcome told. */
int sqs_change_visibility_batch(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                                unsigned timeout_seconds, sqs_batch_fn done, void *userdata,
                                struct sqs_op **ret);

/* ---- GetQueueAttributes ---- */
struct sqs_attribute {
        char *name;
        char *value; /* every value is a string on the wire */
};
void sqs_attributes_free(struct sqs_attribute *a, size_t n);
const char *sqs_attribute_get(const struct sqs_attribute *a, size_t n, const char *name);
/* attrs is valid during the callback only. */
typedef void (*sqs_attributes_fn)(struct sqs_client *c, const struct sqs_result *res,
                                  const struct sqs_attribute *attrs, size_t n, void *userdata);
/* names: NULL-terminated attribute names, NULL = ["All"]. */
int sqs_get_attributes(struct sqs_client *c, const char *const *names, sqs_attributes_fn done,
                       void *userdata, struct sqs_op **ret);
