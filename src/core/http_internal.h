/* Private to the HTTP client (src/core/http*.c): URL and proxy parsing, the TLS layer. */
#pragma once

#include <openssl/ssl.h>
#include <stdint.h>

#include "spotdrain/core.h"

/* An http(s) URL split into what the client needs. */
struct http_url {
        bool https;
        char *host;     /* as written, IPv6 literals without brackets */
        char *hostport; /* the Host header: brackets kept, port only when not the default */
        uint16_t port;
        char *target; /* path and query as given ("/" when empty), fragment dropped */
        bool ip_literal;
};

/* -EINVAL for a malformed URL, -EPROTONOSUPPORT for another scheme. */
int http_url_parse(const char *url, struct http_url *ret);
void http_url_clear(struct http_url *u);
/* Loopback and the link-local AWS services: plain http allowed, never proxied. */
bool http_host_is_local(const char *host);

/* The proxy for an https URL to host: from https_proxy/HTTPS_PROXY unless no_proxy/NO_PROXY matches or the
 * host is local. 0 with *ret_host NULL when there is none. ret_auth gets "Basic <base64>" or NULL. */
int http_proxy_for(const char *host, char **ret_host, uint16_t *ret_port, char **ret_auth);
/* no_proxy matching, split out for tests: comma list, leading-dot and suffix match, "*". */
bool http_no_proxy_match(const char *no_proxy, const char *host);

/* TLS settings by content: entries are cached on the loop and shared by calls and pooled connections. */
struct http_tls_entry {
        struct http_tls_entry *next;
        char *field[6];   /* ca_file, ca_pem, cert_file, cert_pem, key_file, key_pem */
        SSL_CTX *ssl_ctx; /* created on first handshake */
        unsigned refs;
};

int http_tls_init(void);
int http_tls_entry_get(struct http_tls_entry **list, const struct http_tls *tls,
                       struct http_tls_entry **ret);
void http_tls_entry_unref(struct http_tls_entry *e);
void http_tls_entries_free(struct http_tls_entry **list);
/* Creates the entry's SSL_CTX if needed; on failure errbuf says why. */
int http_tls_entry_ctx(struct http_tls_entry *e, char *errbuf, size_t errlen);
/* An SSL object on fd, verifying host (a name or an IP literal). */
int http_tls_new(SSL_CTX *ctx, int fd, const char *host, bool ip_literal, SSL **ret);
/* Why a handshake failed, in words. */
void http_tls_explain(SSL *ssl, int ssl_error, int saved_errno, char *errbuf, size_t errlen);

/* The answer parser alone, for the fuzzer (fuzz/fuzz_http.c): feeds data as the answer to a call (a HEAD
 * request when head; streamed to a sink when stream), in pieces ending at each of cuts (ascending offsets;
 * the rest in one last piece), until it is complete or fails. Returns what the last feed returned (1
 * complete, 0 wants more, <0 error); *ret_status the status parsed, *ret_body the body bytes decoded and
 * *ret_sum a checksum of them. */
struct http_fuzz_result {
        long status;
        size_t body;
        uint64_t sum;
};
int http_fuzz_feed(const char *data, size_t n, const size_t *cuts, size_t n_cuts, bool head, bool stream,
                   size_t max_body, struct http_fuzz_result *ret);
