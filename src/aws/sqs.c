/* Amazon SQS client (AWS JSON 1.0 protocol), async on the core loop. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "spotdrain/sqs.h"

#define CALL_TIMEOUT_USEC (30ULL * 1000000ULL)

enum op_kind {
        OP_RECEIVE,
        OP_DELETE,
        OP_DELETE_BATCH,
        OP_CHANGE_VISIBILITY,
        OP_CHANGE_VISIBILITY_BATCH,
        OP_GET_ATTRIBUTES,
};

struct sqs_op {
        struct sqs_client *client;
        struct sqs_op *prev, *next;
        enum op_kind kind;
        struct aws_request *req;
        union {
                sqs_receive_fn receive;
                sqs_done_fn done;
                sqs_batch_fn batch;
                sqs_attributes_fn attributes;
        } cb;
        void *userdata;
        char **batch_ids; /* the batches: the request's entry ids, in order */
        size_t n_batch_ids;
};

struct sqs_client {
        struct loop *loop;
        struct aws_client *aws;
        char *queue_url;
        struct sqs_op *ops;
};

/* ---- errors ---- */

static const char *const error_names[_SQS_ERR_MAX] = {
        [SQS_OK] = "ok",
        [SQS_ERR_ACCESS_DENIED] = "access-denied",
        [SQS_ERR_NONEXISTENT_QUEUE] = "nonexistent-queue",
        [SQS_ERR_RECEIPT_HANDLE] = "receipt-handle-invalid",
        [SQS_ERR_NOT_INFLIGHT] = "message-not-inflight",
        [SQS_ERR_AUTH] = "authentication-failed",
        [SQS_ERR_EXPIRED_TOKEN] = "expired-token",
        [SQS_ERR_INVALID_REQUEST] = "invalid-request",
        [SQS_ERR_THROTTLED] = "throttled",
        [SQS_ERR_SERVER] = "server-error",
        [SQS_ERR_TRANSPORT] = "transport-error",
        [SQS_ERR_PROTOCOL] = "protocol-error",
        [SQS_ERR_NO_CREDENTIALS] = "no-credentials",
        [SQS_ERR_OTHER] = "error",
};

const char *sqs_error_to_string(enum sqs_error e)
{
        return (unsigned)e < _SQS_ERR_MAX ? error_names[e] : "error";
}

bool sqs_error_queue_unreadable(enum sqs_error e)
{
        return e == SQS_ERR_ACCESS_DENIED || e == SQS_ERR_NONEXISTENT_QUEUE || e == SQS_ERR_AUTH ||
               e == SQS_ERR_NO_CREDENTIALS;
}

bool sqs_error_retryable(enum sqs_error e)
{
        return e == SQS_ERR_THROTTLED || e == SQS_ERR_SERVER || e == SQS_ERR_TRANSPORT ||
               e == SQS_ERR_EXPIRED_TOKEN;
}

/* The codes only SQS sends (the legacy query name and the JSON shape name, both accepted, with or without
 * an "Exception" suffix); the rest are the request layer's (awsreq.h). */
static const struct {
        const char *code;
        enum sqs_error kind;
} error_codes[] = {
        { "AWS.SimpleQueueService.NonExistentQueue", SQS_ERR_NONEXISTENT_QUEUE },
        { "QueueDoesNotExist", SQS_ERR_NONEXISTENT_QUEUE },
        { "NonExistentQueue", SQS_ERR_NONEXISTENT_QUEUE },
        { "ReceiptHandleIsInvalid", SQS_ERR_RECEIPT_HANDLE },
        { "AWS.SimpleQueueService.MessageNotInflight", SQS_ERR_NOT_INFLIGHT },
        { "MessageNotInflight", SQS_ERR_NOT_INFLIGHT },
        { "InvalidParameterValue", SQS_ERR_INVALID_REQUEST },
        { "InvalidParameterCombination", SQS_ERR_INVALID_REQUEST },
        { "MissingParameter", SQS_ERR_INVALID_REQUEST },
        { "MissingRequiredParameter", SQS_ERR_INVALID_REQUEST },
        { "InvalidAttributeName", SQS_ERR_INVALID_REQUEST },
        { "InvalidAction", SQS_ERR_INVALID_REQUEST },
        { "UnknownOperation", SQS_ERR_INVALID_REQUEST },
        { "Serialization", SQS_ERR_INVALID_REQUEST },
        { "InvalidAddress", SQS_ERR_INVALID_REQUEST },
        { "OverLimit", SQS_ERR_THROTTLED },
        /* KMS throttling the queue's server-side encryption: JSON KmsThrottled, query
         * KMS.ThrottlingException (seen here without its suffix). Ahead of the KMS.* rule below, which
         * reads the other KMS errors as the key refusing the role. */
        { "KmsThrottled", SQS_ERR_THROTTLED },
        { "KMS.Throttling", SQS_ERR_THROTTLED },
};

enum sqs_error sqs_error_from_code(const char *code, long status)
{
        char buf[96];

        if (!isempty(code)) {
                aws_error_code_base(code, buf, sizeof(buf));
                for (size_t i = 0; i < ARRAY_SIZE(error_codes); i++)
                        if (streq(error_codes[i].code, buf))
                                return error_codes[i].kind;
                /* Batch validation errors (TooManyEntriesInBatchRequest, EmptyBatchRequest, ...). */
                if (startswith(buf, "AWS.SimpleQueueService.") || strstr(buf, "Batch"))
                        return SQS_ERR_INVALID_REQUEST;
                if (startswith(buf, "KMS."))
                        return SQS_ERR_ACCESS_DENIED;
        }
        switch (aws_error_classify(code, status, NULL)) {
        case AWS_ERR_THROTTLED:
                return SQS_ERR_THROTTLED;
        case AWS_ERR_EXPIRED_CREDENTIALS:
                return SQS_ERR_EXPIRED_TOKEN;
        case AWS_ERR_INVALID_CREDENTIALS:
                return SQS_ERR_AUTH;
        case AWS_ERR_ACCESS_DENIED:
                return SQS_ERR_ACCESS_DENIED;
        case AWS_ERR_SERVER:
                return SQS_ERR_SERVER;
        case AWS_ERR_TRANSPORT:
                return SQS_ERR_TRANSPORT;
        case AWS_ERR_NO_CREDENTIALS:
                return SQS_ERR_NO_CREDENTIALS;
        default:
                return isempty(code) ? SQS_ERR_PROTOCOL : SQS_ERR_OTHER;
        }
}

static int error_to_errno(enum sqs_error kind, long status)
{
        switch (kind) {
        case SQS_OK:
                return 0;
        case SQS_ERR_ACCESS_DENIED:
                return -EACCES;
        case SQS_ERR_NONEXISTENT_QUEUE:
                return -ENOENT;
        case SQS_ERR_RECEIPT_HANDLE:
        case SQS_ERR_NOT_INFLIGHT:
                return -ESTALE;
        case SQS_ERR_AUTH:
                return -EKEYREJECTED;
        case SQS_ERR_EXPIRED_TOKEN:
                return -EKEYEXPIRED;
        case SQS_ERR_INVALID_REQUEST:
                return -EINVAL;
        case SQS_ERR_THROTTLED:
                return -EBUSY;
        case SQS_ERR_SERVER:
                return -EIO;
        case SQS_ERR_PROTOCOL:
                return -EBADMSG;
        case SQS_ERR_NO_CREDENTIALS:
                return -ENOKEY;
        case SQS_ERR_TRANSPORT:
        case SQS_ERR_OTHER:
        case _SQS_ERR_MAX:
                break;
        }
        return http_status_to_errno(status) ?: -EIO;
}

static void result_set(struct sqs_result *res, enum sqs_error kind, int error, long status, const char *code,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void result_set(struct sqs_result *res, enum sqs_error kind, int error, long status, const char *code,
                       const char *fmt, ...)
{
        va_list ap;

        *res = (struct sqs_result){ .kind = kind, .error = error, .status = status };
        snprintf(res->code, sizeof(res->code), "%s", code ? code : "");
        if (fmt) {
                va_start(ap, fmt);
                vsnprintf(res->message, sizeof(res->message), fmt, ap);
                va_end(ap);
        }
}

/* A call that failed in the request layer: its code and message, SQS's kind. */
static void result_from_aws(struct sqs_result *res, const struct aws_result *a)
{
        enum sqs_error kind = a->cls == AWS_ERR_TRANSPORT || a->cls == AWS_ERR_CANCELLED ? SQS_ERR_TRANSPORT
                              : a->cls == AWS_ERR_NO_CREDENTIALS ? SQS_ERR_NO_CREDENTIALS
                                                                 : sqs_error_from_code(a->code, a->status);

        if (isempty(a->code) && kind == SQS_ERR_PROTOCOL)
                kind = SQS_ERR_OTHER;
        result_set(res, kind, kind == SQS_ERR_TRANSPORT ? a->error : error_to_errno(kind, a->status),
                   a->status, a->code, "%s", a->message);
}

/* ---- client ---- */

static bool host_char(char c)
{
        return isalnum((unsigned char)c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' ||
               c == '_';
}

/* "scheme://authority" of an absolute http(s) URL; with ret_path the rest (at least "/"). */
static int url_split(const char *url, char **ret_base, const char **ret_path)
{
        const char *p, *host;

        if (startswith(url, "https://"))
                host = url + strlen("https://");
        else if (startswith(url, "http://"))
                host = url + strlen("http://");
        else
                return -EINVAL;
        for (p = host; *p && *p != '/'; p++)
                if (!host_char(*p))
                        return -EINVAL;
        if (p == host)
                return -EINVAL;
        *ret_base = strndup(url, (size_t)(p - url));
        if (!*ret_base)
                return -ENOMEM;
        if (ret_path)
                *ret_path = p;
        return 0;
}

/* sqs.REGION.amazonaws.com[.cn] or the legacy REGION.queue.amazonaws.com / queue.amazonaws.com. */
static char *region_from_base(const char *base)
{
        const char *host = strstr(base, "://") + 3, *end;
        size_t len;

        end = strchr(host, ':');
        len = end ? (size_t)(end - host) : strlen(host);
        if (len > 4 && startswith(host, "sqs.")) {
                const char *dot = memchr(host + 4, '.', len - 4);
                if (dot && (size_t)(dot - host) < len && startswith(dot, ".amazonaws.com"))
                        return strndup(host + 4, (size_t)(dot - host - 4));
        }
        if (startswith(host, "queue.amazonaws.com"))
                return strdup("us-east-1");
        end = strstr(host, ".queue.amazonaws.com");
        if (end && (size_t)(end - host) < len)
                return strndup(host, (size_t)(end - host));
        return NULL;
}

int sqs_client_new(struct loop *l, const struct sqs_config *cfg, struct sqs_client **ret)
{
        _cleanup_free_ char *base = NULL, *region = NULL;
        struct sqs_client *c;
        const char *path;
        int r;

        if (!l || !cfg || isempty(cfg->queue_url) || !cfg->credentials)
                return -EINVAL;
        r = url_split(cfg->queue_url, &base, &path);
        if (r < 0)
                return r;
        if (streq(path, "") || streq(path, "/"))
                return -EINVAL;
        if (isempty(cfg->region)) {
                region = region_from_base(base);
                if (!region && !aws_env_region(NULL))
                        return -EDESTADDRREQ;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->queue_url = strdup(cfg->queue_url);
        if (!c->queue_url) {
                sqs_client_free(c);
                return -ENOMEM;
        }
        /* Endpoint: the flag, the environment, else the queue URL's host. */
        r = aws_client_new(l,
                           &(struct aws_client_config){
                               .service = "sqs",
                               .protocol = AWS_PROTOCOL_JSON_10,
                               .target_prefix = "AmazonSQS",
                               .endpoint = { .service_id = "SQS",
                                             .host = "sqs",
                                             .configured = cfg->endpoint,
                                             .fallback = base },
                               .region = !isempty(cfg->region) ? cfg->region : region,
                               .credentials = cfg->credentials,
                               .credentials_userdata = cfg->credentials_userdata,
                               .timeout_usec = CALL_TIMEOUT_USEC,
                               .max_body = 2 * SQS_MAX_MESSAGES * SQS_MAX_MESSAGE_BYTES,
                           },
                           &c->aws);
        if (r < 0) {
                sqs_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

static void op_free(struct sqs_op *op)
{
        struct sqs_client *c = op->client;

        if (op->prev)
                op->prev->next = op->next;
        else if (c->ops == op)
                c->ops = op->next;
        if (op->next)
                op->next->prev = op->prev;
        for (size_t i = 0; i < op->n_batch_ids; i++)
                free(op->batch_ids[i]);
        free(op->batch_ids);
        free(op);
}

struct sqs_op *sqs_op_cancel(struct sqs_op *op)
{
        if (!op)
                return NULL;
        op->req = aws_request_cancel(op->req);
        op_free(op);
        return NULL;
}

struct sqs_client *sqs_client_free(struct sqs_client *c)
{
        if (!c)
                return NULL;
        while (c->ops)
                sqs_op_cancel(c->ops);
        aws_client_free(c->aws);
        free(c->queue_url);
        free(c);
        return NULL;
}

const char *sqs_client_endpoint(const struct sqs_client *c)
{
        return aws_client_endpoint(c->aws);
}

const char *sqs_client_region(const struct sqs_client *c)
{
        return aws_client_region(c->aws);
}

const char *sqs_client_queue_url(const struct sqs_client *c)
{
        return c->queue_url;
}

/* ---- messages and attributes ---- */

void sqs_message_clear(struct sqs_message *m)
{
        if (!m)
                return;
        free(m->message_id);
        free(m->receipt_handle);
        free(m->body);
        free(m->sender_id);
        *m = (struct sqs_message){};
}

void sqs_messages_free(struct sqs_message *m, size_t n)
{
        if (!m)
                return;
        for (size_t i = 0; i < n; i++)
                sqs_message_clear(&m[i]);
        free(m);
}

void sqs_attributes_free(struct sqs_attribute *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++) {
                free(a[i].name);
                free(a[i].value);
        }
        free(a);
}

const char *sqs_attribute_get(const struct sqs_attribute *a, size_t n, const char *name)
{
        for (size_t i = 0; a && i < n; i++)
                if (streq(a[i].name, name))
                        return a[i].value;
        return NULL;
}

/* ---- the call ---- */

static void on_answer(const struct aws_result *a, const char *body, size_t len, void *userdata);

static const char *const op_actions[] = {
        [OP_RECEIVE] = "ReceiveMessage",
        [OP_DELETE] = "DeleteMessage",
        [OP_DELETE_BATCH] = "DeleteMessageBatch",
        [OP_CHANGE_VISIBILITY] = "ChangeMessageVisibility",
        [OP_CHANGE_VISIBILITY_BATCH] = "ChangeMessageVisibilityBatch",
        [OP_GET_ATTRIBUTES] = "GetQueueAttributes",
};

/* Sends body (a JSON object, consumed) as the op's action. On failure nothing was sent. */
static int op_send(struct sqs_op *op, cJSON *body, uint64_t timeout_usec)
{
        struct sqs_client *c = op->client;
        _cleanup_free_ char *text = NULL;
        int r;

        if (!body)
                return -ENOMEM;
        r = cJSON_AddStringToObject(body, "QueueUrl", c->queue_url) ? 0 : -ENOMEM;
        if (r == 0) {
                text = cJSON_PrintUnformatted(body);
                r = text ? 0 : -ENOMEM;
        }
        cJSON_Delete(body);
        if (r < 0)
                return r;
        return aws_request_start(c->aws,
                                 &(struct aws_call_params){ .action = op_actions[op->kind],
                                                            .body = text,
                                                            .timeout_usec = timeout_usec },
                                 on_answer, op, &op->req);
}

static struct sqs_op *op_new(struct sqs_client *c, enum op_kind kind, void *userdata)
{
        struct sqs_op *op = calloc(1, sizeof(*op));
        if (!op)
                return NULL;
        op->client = c;
        op->kind = kind;
        op->userdata = userdata;
        op->next = c->ops;
        if (c->ops)
                c->ops->prev = op;
        c->ops = op;
        return op;
}

/* op_new() for a request whose body is made: without memory for the op, the body is freed too. */
static struct sqs_op *op_new_body(struct sqs_client *c, enum op_kind kind, void *userdata, cJSON *body)
{
        struct sqs_op *op = op_new(c, kind, userdata);
        if (!op)
                cJSON_Delete(body);
        return op;
}

/* Starts op with body, or frees it on failure. */
static int op_start(struct sqs_op *op, cJSON *body, uint64_t timeout_usec, struct sqs_op **ret)
{
        int r = op_send(op, body, timeout_usec);
        if (r < 0) {
                log_debug_errno(r, "sqs: %s not sent", op_actions[op->kind]);
                op_free(op);
                return r;
        }
        if (ret)
                *ret = op;
        return 0;
}

static bool md5_matches(const char *body, size_t len, const char *hex)
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        char got[2 * EVP_MAX_MD_SIZE + 1];

        if (!EVP_Digest(body, len, md, &mdlen, EVP_md5(), NULL))
                return false;
        for (unsigned i = 0; i < mdlen; i++)
                snprintf(got + 2 * i, 3, "%02x", md[i]);
        return strcasecmp(got, hex) == 0;
}

static int attr_u64(const cJSON *attrs, const char *name, uint64_t *ret)
{
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(attrs, name));
        char *end = NULL;
        unsigned long long x;

        if (!v)
                return 0;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static int message_parse(const cJSON *m, struct sqs_message *ret, char *why, size_t why_len)
{
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "MessageId"));
        const char *handle = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "ReceiptHandle"));
        const char *body = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "Body"));
        const char *md5 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "MD5OfBody"));
        const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(m, "Attributes");
        const char *sender = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(attrs, "SenderId"));
        uint64_t count = 0, sent = 0, first = 0;

        if (isempty(id) || isempty(handle) || !body) {
                snprintf(why, why_len, "a message without MessageId, ReceiptHandle or Body");
                return -EBADMSG;
        }
        if (md5 && !md5_matches(body, strlen(body), md5)) {
                snprintf(why, why_len, "MD5OfBody of message %s does not match its body", id);
                return -EBADMSG;
        }
        if (attr_u64(attrs, "ApproximateReceiveCount", &count) < 0 ||
            attr_u64(attrs, "SentTimestamp", &sent) < 0 ||
            attr_u64(attrs, "ApproximateFirstReceiveTimestamp", &first) < 0 || count > UINT32_MAX ||
            sent > UINT64_MAX / 1000 || first > UINT64_MAX / 1000) {
                snprintf(why, why_len, "message %s has a malformed attribute", id);
                return -EBADMSG;
        }
        *ret = (struct sqs_message){
                .message_id = strdup(id),
                .receipt_handle = strdup(handle),
                .body = strdup(body),
                .body_len = strlen(body),
                .receive_count = (unsigned)count,
                .sent_usec = sent * 1000,
                .first_receive_usec = first * 1000,
                .sender_id = !isempty(sender) ? strdup(sender) : NULL,
        };
        if (!ret->message_id || !ret->receipt_handle || !ret->body ||
            (!isempty(sender) && !ret->sender_id)) {
                sqs_message_clear(ret);
                return -ENOMEM;
        }
        return 0;
}

static void finish_receive(struct sqs_op *op, struct sqs_result *res, const cJSON *o)
{
        const cJSON *list = o ? cJSON_GetObjectItemCaseSensitive(o, "Messages") : NULL;
        struct sqs_message *msgs = NULL;
        size_t n = 0;
        char why[160] = "";
        int r = 0;

        if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list)) {
                result_set(res, SQS_ERR_PROTOCOL, -EBADMSG, res->status, NULL, "Messages is not a list");
                op->cb.receive(op->client, res, NULL, 0, op->userdata);
                return;
        }
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) > 0) {
                size_t total = (size_t)cJSON_GetArraySize(list);
                const cJSON *m;
                msgs = calloc(total, sizeof(*msgs));
                if (!msgs)
                        r = -ENOMEM;
                cJSON_ArrayForEach (m, list) {
                        if (r < 0)
                                break;
                        r = message_parse(m, &msgs[n], why, sizeof(why));
                        if (r == 0)
                                n++;
                }
        }
        if (r < 0) {
                sqs_messages_free(msgs, n);
                msgs = NULL;
                n = 0;
                result_set(res, r == -ENOMEM ? SQS_ERR_OTHER : SQS_ERR_PROTOCOL, r, res->status, NULL, "%s",
                           r == -ENOMEM ? "out of memory" : why);
        }
        log_debug("sqs: ReceiveMessage: %zu message(s)", n);
        op->cb.receive(op->client, res, msgs, n, op->userdata);
        sqs_messages_free(msgs, n);
}

static int batch_fill(struct sqs_op *op, const cJSON *o, struct sqs_entry_result *entries)
{
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "Successful");
        const cJSON *failed = cJSON_GetObjectItemCaseSensitive(o, "Failed");
        const cJSON *e;
        bool *seen;

        if ((ok && !cJSON_IsArray(ok) && !cJSON_IsNull(ok)) ||
            (failed && !cJSON_IsArray(failed) && !cJSON_IsNull(failed)))
                return -EBADMSG;
        seen = calloc(op->n_batch_ids, sizeof(bool));
        if (!seen)
                return -ENOMEM;
        for (size_t i = 0; i < op->n_batch_ids; i++)
                snprintf(entries[i].id, sizeof(entries[i].id), "%s", op->batch_ids[i]);
        cJSON_ArrayForEach (e, (cJSON_IsArray(ok) ? ok : NULL)) {
                const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "Id"));
                for (size_t i = 0; i < op->n_batch_ids; i++)
                        if (streq(id, op->batch_ids[i]))
                                seen[i] = true;
        }
        cJSON_ArrayForEach (e, (cJSON_IsArray(failed) ? failed : NULL)) {
                const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "Id"));
                const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "Code"));
                const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "Message"));
                for (size_t i = 0; i < op->n_batch_ids; i++) {
                        struct sqs_entry_result *x = &entries[i];
                        if (!streq(id, op->batch_ids[i]))
                                continue;
                        seen[i] = true;
                        x->kind = sqs_error_from_code(code, 400);
                        if (x->kind == SQS_ERR_PROTOCOL)
                                x->kind = SQS_ERR_OTHER;
                        x->error = error_to_errno(x->kind, 400);
                        x->sender_fault = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "SenderFault"));
                        snprintf(x->code, sizeof(x->code), "%s", code ? code : "");
                        snprintf(x->message, sizeof(x->message), "%s", msg ? msg : "");
                }
        }
        for (size_t i = 0; i < op->n_batch_ids; i++)
                /* Shadow mode answered the batch itself, with nothing: every entry went as far as it can. */
                if (!seen[i] && !(dry_run_enabled() && !ok && !failed)) {
                        entries[i].kind = SQS_ERR_PROTOCOL;
                        entries[i].error = -EBADMSG;
                        snprintf(entries[i].message, sizeof(entries[i].message),
                                 "the answer does not name this entry");
                }
        free(seen);
        return 0;
}

static void finish_batch(struct sqs_op *op, struct sqs_result *res, const cJSON *o)
{
        struct sqs_entry_result *entries = calloc(op->n_batch_ids, sizeof(*entries));
        int r = entries ? batch_fill(op, o, entries) : -ENOMEM;

        if (r < 0) {
                result_set(res, r == -ENOMEM ? SQS_ERR_OTHER : SQS_ERR_PROTOCOL, r, res->status, NULL, "%s",
                           r == -ENOMEM ? "out of memory" : "malformed batch answer");
                op->cb.batch(op->client, res, NULL, 0, op->userdata);
        } else
                op->cb.batch(op->client, res, entries, op->n_batch_ids, op->userdata);
        free(entries);
}

static void finish_attributes(struct sqs_op *op, struct sqs_result *res, const cJSON *o)
{
        const cJSON *attrs = o ? cJSON_GetObjectItemCaseSensitive(o, "Attributes") : NULL, *a;
        struct sqs_attribute *list = NULL;
        size_t n = 0;

        if (attrs && !cJSON_IsObject(attrs) && !cJSON_IsNull(attrs)) {
                result_set(res, SQS_ERR_PROTOCOL, -EBADMSG, res->status, NULL, "Attributes is not a map");
                op->cb.attributes(op->client, res, NULL, 0, op->userdata);
                return;
        }
        if (cJSON_IsObject(attrs) && cJSON_GetArraySize(attrs) > 0) {
                list = calloc((size_t)cJSON_GetArraySize(attrs), sizeof(*list));
                if (!list) {
                        result_set(res, SQS_ERR_OTHER, -ENOMEM, res->status, NULL, "out of memory");
                        op->cb.attributes(op->client, res, NULL, 0, op->userdata);
                        return;
                }
                cJSON_ArrayForEach (a, attrs) {
                        const char *v = cJSON_GetStringValue(a);
                        if (!v || !a->string)
                                continue;
                        list[n].name = strdup(a->string);
                        list[n].value = strdup(v);
                        n++;
                        if (!list[n - 1].name || !list[n - 1].value) {
                                sqs_attributes_free(list, n);
                                result_set(res, SQS_ERR_OTHER, -ENOMEM, res->status, NULL, "out of memory");
                                op->cb.attributes(op->client, res, NULL, 0, op->userdata);
                                return;
                        }
                }
        }
        op->cb.attributes(op->client, res, list, n, op->userdata);
        sqs_attributes_free(list, n);
}

static void op_fail(struct sqs_op *op, const struct sqs_result *res)
{
        switch (op->kind) {
        case OP_RECEIVE:
                op->cb.receive(op->client, res, NULL, 0, op->userdata);
                break;
        case OP_DELETE_BATCH:
        case OP_CHANGE_VISIBILITY_BATCH:
                op->cb.batch(op->client, res, NULL, 0, op->userdata);
                break;
        case OP_GET_ATTRIBUTES:
                op->cb.attributes(op->client, res, NULL, 0, op->userdata);
                break;
        case OP_DELETE:
        case OP_CHANGE_VISIBILITY:
                op->cb.done(op->client, res, op->userdata);
                break;
        }
}

static bool all_space(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!isspace((unsigned char)s[i]))
                        return false;
        return true;
}

static void on_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct sqs_op *op = userdata;
        struct sqs_result res = {};
        cJSON *o = NULL;

        op->req = NULL;
        if (a->error < 0) {
                result_from_aws(&res, a);
                op_fail(op, &res);
                op_free(op);
                return;
        }
        res.status = a->status;
        /* A success may carry no payload at all (awsJson1_0 "no output", or an empty long poll). */
        if (len > 0 && !all_space(body, len)) {
                o = cJSON_ParseWithLength(body, len);
                if (!cJSON_IsObject(o)) {
                        cJSON_Delete(o);
                        result_set(&res, SQS_ERR_PROTOCOL, -EBADMSG, a->status, NULL,
                                   "%s answer is not a JSON object", op_actions[op->kind]);
                        op_fail(op, &res);
                        op_free(op);
                        return;
                }
        }
        switch (op->kind) {
        case OP_RECEIVE:
                finish_receive(op, &res, o);
                break;
        case OP_DELETE_BATCH:
        case OP_CHANGE_VISIBILITY_BATCH:
                finish_batch(op, &res, o);
                break;
        case OP_GET_ATTRIBUTES:
                finish_attributes(op, &res, o);
                break;
        case OP_DELETE:
        case OP_CHANGE_VISIBILITY:
                op->cb.done(op->client, &res, op->userdata);
                break;
        }
        cJSON_Delete(o);
        op_free(op);
}

/* ---- operations ---- */

static cJSON *names_array(const char *const *names)
{
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; a && names[i]; i++)
                if (!cJSON_AddItemToArray(a, cJSON_CreateString(names[i]))) {
                        cJSON_Delete(a);
                        return NULL;
                }
        return a;
}

int sqs_receive(struct sqs_client *c, const struct sqs_receive_opts *opts, sqs_receive_fn done,
                void *userdata, struct sqs_op **ret)
{
        static const char *const attrs[] = { "SentTimestamp", "ApproximateReceiveCount",
                                             "ApproximateFirstReceiveTimestamp", "SenderId", NULL };
        struct sqs_receive_opts o = opts ? *opts : SQS_RECEIVE_OPTS_DEFAULT;
        struct sqs_op *op;
        cJSON *body;
        uint64_t timeout;

        if (!c || !done || o.max_messages < 1 || o.max_messages > SQS_MAX_MESSAGES ||
            o.wait_seconds > SQS_MAX_WAIT_SECONDS || o.visibility_timeout > SQS_MAX_VISIBILITY)
                return -EINVAL;
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "MaxNumberOfMessages", o.max_messages) ||
            (o.wait_seconds >= 0 && !cJSON_AddNumberToObject(body, "WaitTimeSeconds", o.wait_seconds)) ||
            (o.visibility_timeout >= 0 &&
             !cJSON_AddNumberToObject(body, "VisibilityTimeout", o.visibility_timeout)) ||
            !cJSON_AddItemToObject(
                body, o.legacy_attribute_names ? "AttributeNames" : "MessageSystemAttributeNames",
                names_array(attrs))) {
                cJSON_Delete(body);
                return -ENOMEM;
        }
        op = op_new_body(c, OP_RECEIVE, userdata, body);
        if (!op)
                return -ENOMEM;
        op->cb.receive = done;
        /* The queue's own wait time may apply when none is given: allow the longest. */
        timeout = (uint64_t)(o.wait_seconds >= 0 ? o.wait_seconds : SQS_MAX_WAIT_SECONDS) * 1000000ULL +
                  SQS_RECEIVE_SLACK_USEC;
        return op_start(op, body, timeout, ret);
}

static int handle_op(struct sqs_client *c, enum op_kind kind, const char *receipt_handle, int visibility,
                     sqs_done_fn done, void *userdata, struct sqs_op **ret)
{
        struct sqs_op *op;
        cJSON *body;

        if (!c || !done || isempty(receipt_handle))
                return -EINVAL;
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "ReceiptHandle", receipt_handle) ||
            (visibility >= 0 && !cJSON_AddNumberToObject(body, "VisibilityTimeout", visibility))) {
                cJSON_Delete(body);
                return -ENOMEM;
        }
        op = op_new_body(c, kind, userdata, body);
        if (!op)
                return -ENOMEM;
        op->cb.done = done;
        return op_start(op, body, CALL_TIMEOUT_USEC, ret);
}

int sqs_delete(struct sqs_client *c, const char *receipt_handle, sqs_done_fn done, void *userdata,
               struct sqs_op **ret)
{
        return handle_op(c, OP_DELETE, receipt_handle, -1, done, userdata, ret);
}

int sqs_change_visibility(struct sqs_client *c, const char *receipt_handle, unsigned timeout_seconds,
                          sqs_done_fn done, void *userdata, struct sqs_op **ret)
{
        if (timeout_seconds > SQS_MAX_VISIBILITY)
                return -EINVAL;
        return handle_op(c, OP_CHANGE_VISIBILITY, receipt_handle, (int)timeout_seconds, done, userdata, ret);
}

static bool batch_id_valid(const char *id)
{
        size_t len = id ? strlen(id) : 0;
        if (len < 1 || len > SQS_BATCH_ID_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char)id[i]) && id[i] != '-' && id[i] != '_')
                        return false;
        return true;
}

/* DeleteMessageBatch (visibility < 0) or ChangeMessageVisibilityBatch (every entry to visibility). */
static int batch_op(struct sqs_client *c, enum op_kind kind, const struct sqs_delete_entry *entries,
                    size_t n, int visibility, sqs_batch_fn done, void *userdata, struct sqs_op **ret)
{
        struct sqs_op *op;
        cJSON *body, *list;

        if (!c || !done || !entries || n < 1 || n > SQS_MAX_BATCH)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!batch_id_valid(entries[i].id) || isempty(entries[i].receipt_handle))
                        return -EINVAL;
                for (size_t j = 0; j < i; j++)
                        if (streq(entries[i].id, entries[j].id))
                                return -EINVAL;
        }
        body = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(body, "Entries");
        if (!list) {
                cJSON_Delete(body);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                cJSON *e = cJSON_CreateObject();
                if (!cJSON_AddStringToObject(e, "Id", entries[i].id) ||
                    !cJSON_AddStringToObject(e, "ReceiptHandle", entries[i].receipt_handle) ||
                    (visibility >= 0 && !cJSON_AddNumberToObject(e, "VisibilityTimeout", visibility)) ||
                    !cJSON_AddItemToArray(list, e)) {
                        cJSON_Delete(e);
                        cJSON_Delete(body);
                        return -ENOMEM;
                }
        }
        op = op_new_body(c, kind, userdata, body);
        if (!op)
                return -ENOMEM;
        op->cb.batch = done;
        op->batch_ids = calloc(n, sizeof(char *));
        if (!op->batch_ids) {
                op_free(op);
                cJSON_Delete(body);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                op->batch_ids[i] = strdup(entries[i].id);
                if (!op->batch_ids[i]) {
                        op_free(op);
                        cJSON_Delete(body);
                        return -ENOMEM;
                }
                op->n_batch_ids++;
        }
        return op_start(op, body, CALL_TIMEOUT_USEC, ret);
}

int sqs_delete_batch(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                     sqs_batch_fn done, void *userdata, struct sqs_op **ret)
{
        return batch_op(c, OP_DELETE_BATCH, entries, n, -1, done, userdata, ret);
}

int sqs_change_visibility_batch(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                                unsigned timeout_seconds, sqs_batch_fn done, void *userdata,
                                struct sqs_op **ret)
{
        if (timeout_seconds > SQS_MAX_VISIBILITY)
                return -EINVAL;
        return batch_op(c, OP_CHANGE_VISIBILITY_BATCH, entries, n, (int)timeout_seconds, done, userdata,
                        ret);
}

int sqs_get_attributes(struct sqs_client *c, const char *const *names, sqs_attributes_fn done,
                       void *userdata, struct sqs_op **ret)
{
        static const char *const all[] = { "All", NULL };
        struct sqs_op *op;
        cJSON *body;

        if (!c || !done)
                return -EINVAL;
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddItemToObject(body, "AttributeNames", names_array(names ? names : all))) {
                cJSON_Delete(body);
                return -ENOMEM;
        }
        op = op_new_body(c, OP_GET_ATTRIBUTES, userdata, body);
        if (!op)
                return -ENOMEM;
        op->cb.attributes = done;
        return op_start(op, body, CALL_TIMEOUT_USEC, ret);
}

struct loop *sqs_client_loop(const struct sqs_client *c)
{
        return c->loop;
}
