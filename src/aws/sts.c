/* aws/sts: the sts:AssumeRoleWithWebIdentity request body and answer (query protocol, XML). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awscreds.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"

int aws_sts_web_identity_body(const char *role_arn, const char *session_name, const char *token, char **ret)
{
        struct buf b = { 0 };
        int r;

        if (isempty(role_arn) || isempty(session_name) || !token || !ret)
                return -EINVAL;
        r = aws_form_add(&b, "Action", "AssumeRoleWithWebIdentity");
        if (r >= 0)
                r = aws_form_add(&b, "Version", "2011-06-15");
        if (r >= 0)
                r = aws_form_add(&b, "RoleArn", role_arn);
        if (r >= 0)
                r = aws_form_add(&b, "RoleSessionName", session_name);
        if (r >= 0)
                r = aws_form_add(&b, "WebIdentityToken", token);
        if (r >= 0)
                r = buf_append(&b, "", 1);
        if (r < 0) {
                if (b.data)
                        explicit_bzero(b.data, b.cap);
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}

int aws_sts_parse_web_identity(long status, const char *body, size_t len, struct aws_credentials *ret,
                               char **ret_message)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        struct aws_credentials c = { 0 };
        const struct awsxml_node *cr;
        const char *akid, *secret, *token, *exp;
        int r;

        if (!ret || !ret_message)
                return -EINVAL;
        if (status < 200 || status > 299) {
                struct aws_result e;
                aws_result_from_answer(AWS_PROTOCOL_QUERY, 0, status, body, body ? len : 0, &e);
                r = http_status_to_errno(status) ?: -EIO;
                if (e.code[0])
                        *ret_message =
                            strprintf("%s: %s", e.code, e.message[0] ? e.message : "(no message)");
                else
                        *ret_message = strprintf("HTTP status %ld without an STS error document", status);
                return r;
        }
        r = body ? awsxml_parse(body, len, &x, NULL) : -EBADMSG;
        if (r < 0) {
                *ret_message = strdup("unreadable AssumeRoleWithWebIdentity answer");
                return -EBADMSG;
        }
        cr =
            awsxml_find(awsxml_root(x), "/AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/"
                                        "Credentials");
        akid = awsxml_find_text(cr, "AccessKeyId");
        secret = awsxml_find_text(cr, "SecretAccessKey");
        token = awsxml_find_text(cr, "SessionToken");
        exp = awsxml_find_text(cr, "Expiration");
        if (isempty(akid) || isempty(secret) || isempty(token) || isempty(exp) ||
            parse_rfc3339(exp, &c.expiration_usec) < 0) {
                *ret_message = strdup("AssumeRoleWithWebIdentity answer without complete Credentials");
                return -EBADMSG;
        }
        c.access_key_id = strdup(akid);
        c.secret_access_key = strdup(secret);
        c.session_token = strdup(token);
        c.source = strdup("web-identity");
        if (!c.access_key_id || !c.secret_access_key || !c.session_token || !c.source) {
                aws_credentials_clear(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}
