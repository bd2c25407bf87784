/* The TLS layer of the HTTP client: OpenSSL contexts cached by their settings, verified connections. */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <sys/socket.h>

#include "core/http_internal.h"

#define TLS_ENTRIES_MAX 16

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static BIO_METHOD *sock_method;

/* A socket BIO that sends with MSG_NOSIGNAL: a peer that went away must not raise SIGPIPE, which the tests
 * and library users do not ignore. */
static int sock_bio_write(BIO *b, const char *data, int len)
{
        int fd = (int)(intptr_t)BIO_get_data(b);
        ssize_t n;

        BIO_clear_retry_flags(b);
        n = send(fd, data, (size_t)len, MSG_NOSIGNAL);
        if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                        BIO_set_retry_write(b);
                return -1;
        }
        return (int)n;
}

static int sock_bio_read(BIO *b, char *data, int len)
{
        int fd = (int)(intptr_t)BIO_get_data(b);
        ssize_t n;

        BIO_clear_retry_flags(b);
        n = recv(fd, data, (size_t)len, 0);
        if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                        BIO_set_retry_read(b);
                return -1;
        }
        return (int)n;
}

static int sock_bio_puts(BIO *b, const char *s)
{
        return sock_bio_write(b, s, (int)strlen(s));
}

static long sock_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
        return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int sock_bio_create(BIO *b)
{
        BIO_set_init(b, 1);
        return 1;
}

static int sock_bio_destroy(BIO *b)
{
        return 1; /* the socket belongs to the connection */
}

static void tls_init_once(void)
{
        if (OPENSSL_init_ssl(0, NULL) != 1)
                return;
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "spotdrain socket");
        if (!m)
                return;
        if (BIO_meth_set_write(m, sock_bio_write) != 1 || BIO_meth_set_read(m, sock_bio_read) != 1 ||
            BIO_meth_set_puts(m, sock_bio_puts) != 1 || BIO_meth_set_ctrl(m, sock_bio_ctrl) != 1 ||
            BIO_meth_set_create(m, sock_bio_create) != 1 || BIO_meth_set_destroy(m, sock_bio_destroy) != 1) {
                BIO_meth_free(m);
                return;
        }
        sock_method = m;
}

int http_tls_init(void)
{
        if (pthread_once(&tls_once, tls_init_once) != 0 || !sock_method)
                return -EIO;
        return 0;
}

static void entry_free(struct http_tls_entry *e)
{
        for (size_t i = 0; i < ARRAY_SIZE(e->field); i++)
                if (e->field[i]) {
                        /* A key in memory is a secret: leave no copy in freed memory. */
                        explicit_bzero(e->field[i], strlen(e->field[i]));
                        free(e->field[i]);
                }
        SSL_CTX_free(e->ssl_ctx);
        free(e);
}

int http_tls_entry_get(struct http_tls_entry **list, const struct http_tls *tls, struct http_tls_entry **ret)
{
        const struct http_tls none = { 0 };
        const char *f[6];
        struct http_tls_entry *e, **pp;
        unsigned n = 0;

        if (!tls)
                tls = &none;
        f[0] = tls->ca_file, f[1] = tls->ca_pem, f[2] = tls->cert_file;
        f[3] = tls->cert_pem, f[4] = tls->key_file, f[5] = tls->key_pem;

        for (e = *list; e; e = e->next) {
                bool same = true;
                for (size_t i = 0; i < ARRAY_SIZE(f) && same; i++)
                        same = streq_ptr(e->field[i], f[i]);
                if (same) {
                        e->refs++;
                        *ret = e;
                        return 0;
                }
                n++;
        }

        /* Settings that changed (a rotated client certificate) leave unused entries behind: drop them. */
        if (n >= TLS_ENTRIES_MAX)
                for (pp = list; *pp;) {
                        if ((*pp)->refs == 0) {
                                e = *pp;
                                *pp = e->next;
                                entry_free(e);
                        } else
                                pp = &(*pp)->next;
                }

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(f); i++)
                if (f[i] && !(e->field[i] = strdup(f[i]))) {
                        entry_free(e);
                        return -ENOMEM;
                }
        e->refs = 1;
        e->next = *list;
        *list = e;
        *ret = e;
        return 0;
}

void http_tls_entry_unref(struct http_tls_entry *e)
{
        if (e && e->refs > 0)
                e->refs--;
}

void http_tls_entries_free(struct http_tls_entry **list)
{
        while (*list) {
                struct http_tls_entry *e = *list;
                *list = e->next;
                entry_free(e);
        }
}

static void explain_ssl_error(const char *what, char *errbuf, size_t errlen)
{
        unsigned long e = ERR_peek_last_error();
        char reason[200];

        if (e) {
                ERR_error_string_n(e, reason, sizeof(reason));
                snprintf(errbuf, errlen, "%s: %s", what, reason);
        } else
                snprintf(errbuf, errlen, "%s", what);
        ERR_clear_error();
}

static int load_ca_pem(SSL_CTX *ctx, const char *pem)
{
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x;
        unsigned n = 0;

        if (!b)
                return -ENOMEM;
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
                int ok = X509_STORE_add_cert(store, x);
                X509_free(x);
                if (ok != 1) {
                        BIO_free(b);
                        return -EBADMSG;
                }
                n++;
        }
        BIO_free(b);
        /* The loop ends on "no start line" after the last certificate: not an error once some were read. */
        if (n == 0)
                return -EBADMSG;
        ERR_clear_error();
        return 0;
}

static int load_cert_pem(SSL_CTX *ctx, const char *pem)
{
        BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x;
        int r = 0;

        if (!b)
                return -ENOMEM;
        x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (!x || SSL_CTX_use_certificate(ctx, x) != 1)
                r = -EBADMSG;
        X509_free(x);
        /* Intermediates follow the leaf. */
        while (r == 0 && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
                        X509_free(x);
                        r = -EBADMSG;
                }
        BIO_free(b);
        if (r == 0)
                ERR_clear_error();
        return r;
}

static int load_key_pem(SSL_CTX *ctx, const char *pem)
{
        BIO *b = BIO_new_mem_buf(pem, -1);
        EVP_PKEY *k;
        int r = 0;

        if (!b)
                return -ENOMEM;
        k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        if (!k || SSL_CTX_use_PrivateKey(ctx, k) != 1)
                r = -EBADMSG;
        EVP_PKEY_free(k);
        BIO_free(b);
        return r;
}

int http_tls_entry_ctx(struct http_tls_entry *e, char *errbuf, size_t errlen)
{
        const char *ca_file = e->field[0], *ca_pem = e->field[1], *cert_file = e->field[2];
        const char *cert_pem = e->field[3], *key_file = e->field[4], *key_pem = e->field[5];
        SSL_CTX *ctx;
        int r;

        if (e->ssl_ctx)
                return 0;
        ERR_clear_error();
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx)
                return -ENOMEM;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        /* A peer that closes without close_notify ends the stream like EOF; bodies carry their length. */
        SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
        /* RELEASE_BUFFERS: an idle connection (a watch between events, a kept-alive one) holds no 34 KiB
         * record buffers; a controller watches one node's pods per drain under way. */
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
                r = -EIO;
                explain_ssl_error("cannot require TLS 1.2", errbuf, errlen);
                goto fail;
        }

        if (ca_pem && load_ca_pem(ctx, ca_pem) < 0) {
                r = -EBADMSG;
                explain_ssl_error("cannot load the CA certificates from memory", errbuf, errlen);
                goto fail;
        }
        if (ca_file && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
                r = -EBADMSG;
                explain_ssl_error("cannot load the CA file", errbuf, errlen);
                goto fail;
        }
        if (!ca_pem && !ca_file && SSL_CTX_set_default_verify_paths(ctx) != 1) {
                r = -EBADMSG;
                explain_ssl_error("cannot load the system CA certificates", errbuf, errlen);
                goto fail;
        }
        if ((cert_pem && load_cert_pem(ctx, cert_pem) < 0) ||
            (cert_file && SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1)) {
                r = -EBADMSG;
                explain_ssl_error("cannot load the client certificate", errbuf, errlen);
                goto fail;
        }
        if ((key_pem && load_key_pem(ctx, key_pem) < 0) ||
            (key_file && SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) ||
            ((key_pem || key_file) && SSL_CTX_check_private_key(ctx) != 1)) {
                r = -EBADMSG;
                explain_ssl_error("cannot load the client key", errbuf, errlen);
                goto fail;
        }
        e->ssl_ctx = ctx;
        return 0;

fail:
        SSL_CTX_free(ctx);
        return r;
}

int http_tls_new(SSL_CTX *ctx, int fd, const char *host, bool ip_literal, SSL **ret)
{
        SSL *ssl = SSL_new(ctx);
        BIO *b;

        if (!ssl)
                return -ENOMEM;
        b = BIO_new(sock_method);
        if (!b) {
                SSL_free(ssl);
                return -ENOMEM;
        }
        BIO_set_data(b, (void *)(intptr_t)fd);
        SSL_set_bio(ssl, b, b);

        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        /* Names get SNI and a DNS-name check; IP literals are matched against IP SANs only. */
        if (ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1
                       : X509_VERIFY_PARAM_set1_host(param, host, 0) != 1 ||
                             SSL_set_tlsext_host_name(ssl, host) != 1) {
                SSL_free(ssl);
                ERR_clear_error();
                return -EINVAL;
        }
        SSL_set_connect_state(ssl);
        *ret = ssl;
        return 0;
}

void http_tls_explain(SSL *ssl, int ssl_error, int saved_errno, char *errbuf, size_t errlen)
{
        long v = SSL_get_verify_result(ssl);

        if (v != X509_V_OK) {
                snprintf(errbuf, errlen, "certificate verify failed: %s", X509_verify_cert_error_string(v));
                ERR_clear_error();
        } else if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0)
                snprintf(errbuf, errlen, "TLS handshake failed: %s",
                         saved_errno ? strerror(saved_errno) : "connection closed by the server");
        else if (ssl_error == SSL_ERROR_ZERO_RETURN)
                snprintf(errbuf, errlen, "TLS handshake failed: connection closed by the server");
        else
                explain_ssl_error("TLS handshake failed", errbuf, errlen);
}
