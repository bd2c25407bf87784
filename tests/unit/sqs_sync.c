/* Blocking wrappers of the SQS client, for the tests (sqs_sync.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "sqs_sync.h"

#define CALL_TIMEOUT_USEC (30ULL * 1000000ULL)
/* A wrapper waits for the call's own timeout plus this much before giving up on the loop. */
#define SYNC_SLACK_USEC (5ULL * 1000000ULL)

static void result_set(struct sqs_result *res, enum sqs_error kind, int error, long status, const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));
static void result_set(struct sqs_result *res, enum sqs_error kind, int error, long status, const char *fmt,
                       ...)
{
        va_list ap;

        *res = (struct sqs_result){ .kind = kind, .error = error, .status = status };
        va_start(ap, fmt);
        vsnprintf(res->message, sizeof(res->message), fmt, ap);
        va_end(ap);
}

struct sync_state {
        bool done;
        struct sqs_result *res;
        struct sqs_message *msgs;
        size_t n_msgs;
        struct sqs_entry_result *entries;
        size_t n_entries;
        struct sqs_attribute *attrs;
        size_t n_attrs;
        int error; /* ENOMEM while copying */
};

static void sync_start_failed(struct sqs_result *res, int r)
{
        result_set(res,
                   r == -ENOKEY   ? SQS_ERR_NO_CREDENTIALS
                   : r == -EINVAL ? SQS_ERR_INVALID_REQUEST
                                  : SQS_ERR_OTHER,
                   r, 0, "the call could not be sent: %s", strerror(-r));
}

static int sync_run(struct sqs_client *c, struct sync_state *st, uint64_t timeout_usec)
{
        int r = loop_run_until(sqs_client_loop(c), &st->done, timeout_usec + SYNC_SLACK_USEC);
        if (r < 0) {
                result_set(st->res, SQS_ERR_TRANSPORT, r, 0, "the loop ended before the answer");
                return r;
        }
        return st->res->error;
}

static void sync_receive_done(struct sqs_client *c, const struct sqs_result *res, struct sqs_message *msgs,
                              size_t n, void *userdata)
{
        struct sync_state *st = userdata;

        *st->res = *res;
        st->done = true;
        if (n == 0)
                return;
        st->msgs = calloc(n, sizeof(*msgs));
        if (!st->msgs) {
                result_set(st->res, SQS_ERR_OTHER, -ENOMEM, res->status, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                st->msgs[i] = msgs[i];
                msgs[i] = (struct sqs_message){};
        }
        st->n_msgs = n;
}

int sqs_receive_sync(struct sqs_client *c, const struct sqs_receive_opts *opts, struct sqs_result *res,
                     struct sqs_message **ret_msgs, size_t *ret_n)
{
        struct sqs_receive_opts o = opts ? *opts : SQS_RECEIVE_OPTS_DEFAULT;
        struct sync_state st = { .res = res };
        struct sqs_op *op = NULL;
        int r;

        r = sqs_receive(c, &o, sync_receive_done, &st, &op);
        if (r < 0) {
                sync_start_failed(res, r);
                return r;
        }
        r = sync_run(c, &st,
                     (uint64_t)(o.wait_seconds > 0 ? o.wait_seconds : SQS_MAX_WAIT_SECONDS) * 1000000ULL +
                         SQS_RECEIVE_SLACK_USEC);
        if (!st.done)
                sqs_op_cancel(op);
        if (r < 0) {
                sqs_messages_free(st.msgs, st.n_msgs);
                return r;
        }
        *ret_msgs = st.msgs;
        *ret_n = st.n_msgs;
        return 0;
}

static void sync_done(struct sqs_client *c, const struct sqs_result *res, void *userdata)
{
        struct sync_state *st = userdata;
        *st->res = *res;
        st->done = true;
}

static int sync_handle_op(struct sqs_client *c, bool del, const char *handle, unsigned visibility,
                          struct sqs_result *res)
{
        struct sync_state st = { .res = res };
        struct sqs_op *op = NULL;
        int r;

        r = del ? sqs_delete(c, handle, sync_done, &st, &op)
                : sqs_change_visibility(c, handle, visibility, sync_done, &st, &op);
        if (r < 0) {
                sync_start_failed(res, r);
                return r;
        }
        r = sync_run(c, &st, CALL_TIMEOUT_USEC);
        if (!st.done)
                sqs_op_cancel(op);
        return r;
}

int sqs_delete_sync(struct sqs_client *c, const char *receipt_handle, struct sqs_result *res)
{
        return sync_handle_op(c, true, receipt_handle, 0, res);
}

int sqs_change_visibility_sync(struct sqs_client *c, const char *receipt_handle, unsigned timeout_seconds,
                               struct sqs_result *res)
{
        return sync_handle_op(c, false, receipt_handle, timeout_seconds, res);
}

static void sync_batch_done(struct sqs_client *c, const struct sqs_result *res,
                            const struct sqs_entry_result *entries, size_t n, void *userdata)
{
        struct sync_state *st = userdata;

        *st->res = *res;
        st->done = true;
        if (n == 0)
                return;
        st->entries = malloc(n * sizeof(*entries));
        if (!st->entries) {
                result_set(st->res, SQS_ERR_OTHER, -ENOMEM, res->status, "out of memory");
                return;
        }
        memcpy(st->entries, entries, n * sizeof(*entries));
        st->n_entries = n;
}

/* DeleteMessageBatch (visibility < 0) or ChangeMessageVisibilityBatch. */
static int sync_batch(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n, int visibility,
                      struct sqs_result *res, struct sqs_entry_result **ret_entries)
{
        struct sync_state st = { .res = res };
        struct sqs_op *op = NULL;
        int r;

        r = visibility < 0 ? sqs_delete_batch(c, entries, n, sync_batch_done, &st, &op)
                           : sqs_change_visibility_batch(c, entries, n, (unsigned)visibility,
                                                         sync_batch_done, &st, &op);
        if (r < 0) {
                sync_start_failed(res, r);
                return r;
        }
        r = sync_run(c, &st, CALL_TIMEOUT_USEC);
        if (!st.done)
                sqs_op_cancel(op);
        if (r < 0) {
                free(st.entries);
                return r;
        }
        *ret_entries = st.entries;
        return 0;
}

int sqs_delete_batch_sync(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                          struct sqs_result *res, struct sqs_entry_result **ret_entries)
{
        return sync_batch(c, entries, n, -1, res, ret_entries);
}

int sqs_change_visibility_batch_sync(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                                     unsigned timeout_seconds, struct sqs_result *res,
                                     struct sqs_entry_result **ret_entries)
{
        return sync_batch(c, entries, n, (int)timeout_seconds, res, ret_entries);
}

static void sync_attributes_done(struct sqs_client *c, const struct sqs_result *res,
                                 const struct sqs_attribute *attrs, size_t n, void *userdata)
{
        struct sync_state *st = userdata;

        *st->res = *res;
        st->done = true;
        if (n == 0)
                return;
        st->attrs = calloc(n, sizeof(*attrs));
        if (!st->attrs) {
                result_set(st->res, SQS_ERR_OTHER, -ENOMEM, res->status, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                st->attrs[i].name = strdup(attrs[i].name);
                st->attrs[i].value = strdup(attrs[i].value);
                st->n_attrs = i + 1;
                if (!st->attrs[i].name || !st->attrs[i].value) {
                        result_set(st->res, SQS_ERR_OTHER, -ENOMEM, res->status, "out of memory");
                        return;
                }
        }
}

int sqs_get_attributes_sync(struct sqs_client *c, const char *const *names, struct sqs_result *res,
                            struct sqs_attribute **ret_attrs, size_t *ret_n)
{
        struct sync_state st = { .res = res };
        struct sqs_op *op = NULL;
        int r;

        r = sqs_get_attributes(c, names, sync_attributes_done, &st, &op);
        if (r < 0) {
                sync_start_failed(res, r);
                return r;
        }
        r = sync_run(c, &st, CALL_TIMEOUT_USEC);
        if (!st.done)
                sqs_op_cancel(op);
        if (r < 0) {
                sqs_attributes_free(st.attrs, st.n_attrs);
                return r;
        }
        *ret_attrs = st.attrs;
        *ret_n = st.n_attrs;
        return 0;
}

/* ---- sending (a sender's side, for the tests) ---- */

struct send_state {
        bool done;
        int error;
};

static const struct aws_credentials *send_creds(void *userdata)
{
        return userdata;
}

static void send_done(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct send_state *st = userdata;
        st->done = true;
        /* Every entry must be Successful: the answer names none as Failed. */
        st->error = res->error < 0                                                  ? res->error
                    : body && memmem(body, len, "\"Failed\"", strlen("\"Failed\"")) ? -EIO
                                                                                    : 0;
}

int sqs_send_sync(struct loop *l, const char *queue_url, const struct aws_credentials *creds,
                  const char *const *bodies, size_t n, unsigned delay_seconds)
{
        _cleanup_free_ char *base = NULL;
        const char *host = strstr(queue_url, "://"), *path;
        struct aws_client *c = NULL;
        int r;

        if (!host || !(path = strchr(host + 3, '/')) ||
            !(base = strndup(queue_url, (size_t)(path - queue_url))))
                return -EINVAL;
        r = aws_client_new(l,
                           &(struct aws_client_config){
                               .service = "sqs",
                               .protocol = AWS_PROTOCOL_JSON_10,
                               .target_prefix = "AmazonSQS",
                               .endpoint = { .service_id = "SQS", .host = "sqs", .configured = base },
                               .region = "us-east-1",
                               .credentials = send_creds,
                               .credentials_userdata = (void *)creds },
                           &c);
        for (size_t i = 0; r >= 0 && i < n; i += SQS_MAX_BATCH) {
                cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "Entries");
                struct send_state st = {};
                _cleanup_free_ char *text = NULL;
                char id[16];

                cJSON_AddStringToObject(o, "QueueUrl", queue_url);
                for (size_t k = i; k < n && k < i + SQS_MAX_BATCH; k++) {
                        cJSON *e = cJSON_CreateObject();
                        snprintf(id, sizeof(id), "s%zu", k - i);
                        cJSON_AddStringToObject(e, "Id", id);
                        cJSON_AddStringToObject(e, "MessageBody", bodies[k]);
                        cJSON_AddNumberToObject(e, "DelaySeconds", delay_seconds);
                        cJSON_AddItemToArray(list, e);
                }
                text = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                r = text ? aws_request_start(
                               c, &(struct aws_call_params){ .action = "SendMessageBatch", .body = text },
                               send_done, &st, NULL)
                         : -ENOMEM;
                if (r >= 0)
                        r = loop_run_until(l, &st.done, CALL_TIMEOUT_USEC + SYNC_SLACK_USEC);
                if (r >= 0)
                        r = st.done ? st.error : -ETIMEDOUT;
        }
        aws_client_free(c);
        return r < 0 ? r : 0;
}
