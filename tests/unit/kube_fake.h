/* A fake Kubernetes API server for the kube client's tests: libmicrohttpd on 127.0.0.1, port 0, scripted
 * answers (matched by method, path and a query or body substring, used once unless sticky), captured
 * requests. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct kfake;

struct kfake_request {
        char *method;
        char *path;  /* without the query */
        char *query; /* raw, as sent ("" when none) */
        char *content_type;
        char *authorization;
        char *body;
};

struct kfake_script {
        const char *method;
        const char *path;
        const char *query_contains; /* NULL: any query */
        const char *body_contains;  /* NULL: any request body (an AWS query-protocol form's Action=...) */
        int status;
        const char *body;
        const char *retry_after;
        const char *const *chunks; /* NULL-terminated: a streamed (chunked) answer, one chunk per write */
        bool sticky;               /* answers every matching request */
        /* With chunks: the stream then stays open and silent. Without: no answer at all, not even its head.
         * Either until kfake_stop. */
        bool hold_open;
};

int kfake_start(struct kfake **ret);
void kfake_stop(struct kfake *f);
const char *kfake_url(const struct kfake *f);
int kfake_add(struct kfake *f, const struct kfake_script *s);
/* Shorthand for a one-time JSON answer. */
int kfake_answer(struct kfake *f, const char *method, const char *path, int status, const char *body);
size_t kfake_count(struct kfake *f);
/* The i-th captured request (stable pointer), NULL beyond the count. */
const struct kfake_request *kfake_request(struct kfake *f, size_t i);
/* Index of the first request at or after start with this method and path, or -1. */
long kfake_find(struct kfake *f, const char *method, const char *path, size_t start);
/* Called in the server's thread for each request, before it is answered. */
void kfake_set_hook(struct kfake *f, void (*hook)(const struct kfake_request *req, void *userdata),
                    void *userdata);
