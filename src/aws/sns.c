/* The signature of an SNS notification: see sns.h. */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/sns.h"
#include "spotdrain/util.h"

void sns_envelope_clear(struct sns_envelope *e)
{
        char **fields[] = {
                &e->type,      &e->message_id,        &e->topic_arn, &e->subject,         &e->message,
                &e->timestamp, &e->signature_version, &e->signature, &e->signing_cert_url
        };
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                free(*fields[i]);
                *fields[i] = NULL;
        }
}

static int take(const cJSON *root, const char *key, bool required, char **ret, char *why, size_t why_size)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

        *ret = NULL;
        if (!v || cJSON_IsNull(v)) {
                if (required)
                        snprintf(why, why_size, "SNS notification without %s", key);
                return required ? -EBADMSG : 0;
        }
        if (!cJSON_IsString(v) || !v->valuestring) {
                snprintf(why, why_size, "SNS notification: %s is not a string", key);
                return -EBADMSG;
        }
        *ret = strdup(v->valuestring);
        return *ret ? 0 : -ENOMEM;
}

int sns_envelope_parse(const char *body, size_t len, struct sns_envelope *e, char *why, size_t why_size)
{
        cJSON *root = cJSON_ParseWithLength(body, len);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "Type");
        char scratch[1];
        int r;

        if (!why || why_size == 0) {
                why = scratch;
                why_size = sizeof(scratch);
        }
        *e = (struct sns_envelope){ 0 };
        if (!cJSON_IsObject(root) || !cJSON_IsString(type) ||
            !cJSON_GetObjectItemCaseSensitive(root, "TopicArn")) {
                cJSON_Delete(root);
                return -ENOENT;
        }
        if (!streq(type->valuestring, "Notification")) {
                snprintf(why, why_size, "SNS %s is not a notification", type->valuestring);
                cJSON_Delete(root);
                return -EBADMSG;
        }
        r = take(root, "Type", true, &e->type, why, why_size);
        if (r >= 0)
                r = take(root, "MessageId", true, &e->message_id, why, why_size);
        if (r >= 0)
                r = take(root, "TopicArn", true, &e->topic_arn, why, why_size);
        if (r >= 0)
                r = take(root, "Subject", false, &e->subject, why, why_size);
        if (r >= 0)
                r = take(root, "Message", true, &e->message, why, why_size);
        if (r >= 0)
                r = take(root, "Timestamp", true, &e->timestamp, why, why_size);
        if (r >= 0)
                r = take(root, "SignatureVersion", true, &e->signature_version, why, why_size);
        if (r >= 0)
                r = take(root, "Signature", true, &e->signature, why, why_size);
        if (r >= 0)
                r = take(root, "SigningCertURL", true, &e->signing_cert_url, why, why_size);
        cJSON_Delete(root);
        if (r < 0)
                sns_envelope_clear(e);
        return r;
}

char *sns_canonical(const struct sns_envelope *e)
{
        if (e->subject)
                return strprintf(
                    "Message\n%s\nMessageId\n%s\nSubject\n%s\nTimestamp\n%s\nTopicArn\n%s\nType\n%s\n",
                    e->message, e->message_id, e->subject, e->timestamp, e->topic_arn, e->type);
        return strprintf("Message\n%s\nMessageId\n%s\nTimestamp\n%s\nTopicArn\n%s\nType\n%s\n", e->message,
                         e->message_id, e->timestamp, e->topic_arn, e->type);
}

bool sns_cert_url_allowed(const char *url, const char *endpoint)
{
        size_t n = endpoint ? strlen(endpoint) : 0;
        const char *path;

        if (!url || n == 0 || strncmp(url, endpoint, n) != 0 || url[n] != '/')
                return false;
        path = url + n;
        if (strpbrk(path, "?#\\@") || strstr(path, "..") || strstr(path, "//"))
                return false;
        size_t len = strlen(path);
        return len > 5 && strcmp(path + len - 4, ".pem") == 0;
}

int sns_verify(const struct sns_envelope *e, const char *cert_pem, size_t cert_len, char *why,
               size_t why_size)
{
        const EVP_MD *md = streq(e->signature_version, "1")   ? EVP_sha1()
                           : streq(e->signature_version, "2") ? EVP_sha256()
                                                              : NULL;
        _cleanup_free_ unsigned char *sig = NULL;
        _cleanup_free_ char *text = NULL;
        EVP_MD_CTX *ctx = NULL;
        EVP_PKEY *key = NULL;
        X509 *cert = NULL;
        BIO *bio = NULL;
        size_t sig_len = 0;
        int r = -EBADMSG;

        if (!md) {
                snprintf(why, why_size, "SNS SignatureVersion '%s' is not 1 or 2", e->signature_version);
                return -EBADMSG;
        }
        if (base64_decode(e->signature, strlen(e->signature), &sig, &sig_len) < 0 || sig_len == 0) {
                snprintf(why, why_size, "SNS Signature is not Base64");
                return -EBADMSG;
        }
        text = sns_canonical(e);
        if (!text)
                return -ENOMEM;
        bio = BIO_new_mem_buf(cert_pem, (int)cert_len);
        cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        key = cert ? X509_get_pubkey(cert) : NULL;
        if (!key || EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
                snprintf(why, why_size, "the signing certificate holds no RSA key");
                goto out;
        }
        if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0 ||
            X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
                snprintf(why, why_size, "the signing certificate is not valid now");
                goto out;
        }
        ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestVerifyInit(ctx, NULL, md, NULL, key) != 1 ||
            EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)text, strlen(text)) != 1) {
                snprintf(why, why_size, "the SNS signature does not match the message");
                goto out;
        }
        r = 0;
out:
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(key);
        X509_free(cert);
        BIO_free(bio);
        return r;
}
