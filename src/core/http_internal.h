/* The HTTP client's files for each other: http.c the calls on the loop, http_setup.c the setup of one. */
#pragma once

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "spotdrain/core.h"

#define HTTP_TIMEOUT_USEC         (30ULL * 1000000ULL)
#define HTTP_CONNECT_TIMEOUT_USEC (5ULL * 1000000ULL)
#define HTTP_STREAM_IDLE_USEC     (10ULL * 1000000ULL)
#define HTTP_STALL_CAUTION_USEC   (60ULL * 1000000ULL)
#define HTTP_MAX_BODY             ((size_t)16 * 1024 * 1024)
#define HTTP_MAX_HEADER           ((size_t)64 * 1024)
/* Files larger than this are no certificate bundle. */
#define HTTP_MAX_PEM_FILE ((off_t)4 * 1024 * 1024)

struct http_ctx;

/* One socket curl asked us to watch. */
struct curl_sock {
        struct http_ctx *ctx;
        sd_event_source *source;
        struct curl_sock *prev, *next;
};

/* A PEM file read into memory, re-read when its identity or modification time changes. */
struct pem_file {
        char *path;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        char *data;
        struct pem_file *next;
};

struct http_call {
        struct http_ctx *ctx;
        CURL *easy;
        CURLU *url;
        struct curl_slist *headers;
        struct curl_slist *connect_to;
        http_done_fn done;
        void *userdata;
        int (*on_data)(const char *data, size_t len, void *userdata);
        char *verify_name;  /* the name (or address) the certificate must be made out for */
        bool streaming;     /* on_data and a 2xx answer: chunks go to on_data */
        bool status_known;  /* streaming decided */
        bool cancelled;     /* cancelled from inside a curl callback; freed by http_dispatch() */
        bool pending_add;   /* started from inside a curl callback; added by http_dispatch() */
        bool finishing;     /* done is running; freed when it returns */
        bool idle_limited;  /* LOW_SPEED set: a -ETIMEDOUT may be the idle limit */
        bool method_head;   /* a HEAD request: no body is expected */
        size_t header_size; /* bytes of header lines so far, interim answers included */
        size_t max_body;
        struct buf body;
        int abort_error; /* why the write or header callback stopped the transfer */
        struct http_response resp;
        struct http_call *prev, *next;
};

/* Per-loop state, created on the first request. */
struct http_ctx {
        struct loop *loop;
        CURLM *multi;
        sd_event_source *timer;
        struct curl_sock *socks;
        struct http_call *calls;
        struct pem_file *pem_files;
        unsigned in_curl;    /* depth of curl_multi_socket_action(): no handle removal allowed inside */
        uint64_t last_stall; /* CLOCK_MONOTONIC usec when a call last timed out; 0 = never */
};

struct url_parts {
        bool https;
        bool local;
        char *host; /* as curl gives it: IPv6 literals in brackets */
        long port;
};

/* http_setup.c */
void http_pem_files_free(struct pem_file *f);
void http_url_parts_clear(struct url_parts *p);
/* The URL's parts, or an error when it is malformed or plain http to a host not allowed it. */
int http_check_url(CURLU *u, const char *url, struct url_parts *ret);
/* The easy handle's options for req: method, headers, body, limits, TLS. */
int http_setup_request(struct http_call *c, const struct http_request *req, const struct url_parts *u);
