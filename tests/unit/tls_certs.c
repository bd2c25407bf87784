/* Self-signed certificates for the tests' TLS servers. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tls_certs.h"

static char *bio_to_string(BIO *b)
{
        char *data;
        long n = BIO_get_mem_data(b, &data);
        char *s = n >= 0 ? strndup(data, (size_t)n) : NULL;
        assert_non_null(s);
        return s;
}

static void add_ext(X509 *x, int nid, const char *value)
{
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(x, ext, -1), 1);
        X509_EXTENSION_free(ext);
}

static void make_cert(EVP_PKEY *pkey, const char *cn, const char *san, char **ret_cert, char **ret_key)
{
        X509 *x = X509_new();
        BIO *bc = BIO_new(BIO_s_mem()), *bk = BIO_new(BIO_s_mem());

        assert_non_null(pkey);
        assert_non_null(x);
        assert_true(bc && bk);
        assert_int_equal(X509_set_version(x, 2), 1);
        assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), 1), 1);
        assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
        assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
        assert_int_equal(X509_set_pubkey(x, pkey), 1);
        X509_NAME *name = X509_get_subject_name(x);
        assert_int_equal(
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0), 1);
        assert_int_equal(X509_set_issuer_name(x, name), 1);
        add_ext(x, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign");
        if (san)
                add_ext(x, NID_subject_alt_name, san);
        assert_true(X509_sign(x, pkey, EVP_sha256()) > 0);
        assert_int_equal(PEM_write_bio_X509(bc, x), 1);
        assert_int_equal(PEM_write_bio_PrivateKey(bk, pkey, NULL, NULL, 0, NULL, NULL), 1);
        *ret_cert = bio_to_string(bc);
        *ret_key = bio_to_string(bk);
        BIO_free(bc);
        BIO_free(bk);
        X509_free(x);
        EVP_PKEY_free(pkey);
}

void tls_test_cert(const char *cn, const char *san, char **ret_cert, char **ret_key)
{
        make_cert(EVP_EC_gen("P-256"), cn, san, ret_cert, ret_key);
}

void tls_test_cert_rsa(const char *cn, char **ret_cert, char **ret_key)
{
        make_cert(EVP_RSA_gen(2048), cn, NULL, ret_cert, ret_key);
}
