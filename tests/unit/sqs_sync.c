/* Blocking wrappers of the SQS client, for the tests (sqs_sync.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int sqs_delete_batch_sync(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                          struct sqs_result *res, struct sqs_entry_result **ret_entries)
{
        struct sync_state st = { .res = res };
        struct sqs_op *op = NULL;
        int r;

        r = sqs_delete_batch(c, entries, n, sync_batch_done, &st, &op);
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
