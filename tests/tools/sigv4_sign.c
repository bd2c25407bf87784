/* Test helper (not a unit test): signs requests read as JSON lines on stdin with spotdrain's SigV4 and
 * prints each Authorization header value on its own line. Used by tests/integration/sigv4_botocore.sh.
 * Input: {"method", "url", "headers": [[name, value], ...], "body_b64", "region", "service", "time" (unix
 * seconds), "akid", "secret", "token" (optional)}. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

static const char *str(const cJSON *o, const char *key)
{
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int sign_one(const char *line)
{
        _cleanup_free_ unsigned char *body = NULL;
        _cleanup_free_ char **headers = NULL;
        size_t body_len = 0, n = 0;
        char **out = NULL;
        cJSON *o = cJSON_Parse(line), *h;
        int r = -EINVAL;

        if (!o)
                return -EINVAL;
        cJSON *hs = cJSON_GetObjectItemCaseSensitive(o, "headers");
        headers = calloc((size_t)cJSON_GetArraySize(hs) + 1, sizeof(char *));
        if (!headers)
                goto out;
        cJSON_ArrayForEach (h, hs) {
                const char *name = cJSON_GetStringValue(cJSON_GetArrayItem(h, 0));
                const char *value = cJSON_GetStringValue(cJSON_GetArrayItem(h, 1));
                if (!name || !value || !(headers[n++] = strprintf("%s: %s", name, value)))
                        goto out;
        }
        const char *b64 = str(o, "body_b64");
        if (b64 && *b64 && base64_decode(b64, strlen(b64), &body, &body_len) < 0)
                goto out;
        struct sigv4_request req = {
                .method = str(o, "method"),
                .url = str(o, "url"),
                .headers = (const char *const *)headers,
                .body = body,
                .body_len = body_len,
                .region = str(o, "region"),
                .service = str(o, "service"),
                .time_usec =
                    (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "time")) * 1000000ULL,
        };
        struct aws_credentials c = {
                .access_key_id = (char *)str(o, "akid"),
                .secret_access_key = (char *)str(o, "secret"),
                .session_token = (char *)str(o, "token"),
        };
        r = sigv4_sign_headers(&req, &c, &out);
        if (r < 0)
                goto out;
        for (char **p = out; *p; p++)
                if (startswith(*p, "Authorization: "))
                        printf("%s\n", *p + strlen("Authorization: "));
        sigv4_strv_free(out);
out:
        for (size_t i = 0; headers && i < n; i++)
                free(headers[i]);
        cJSON_Delete(o);
        return r;
}

int main(void)
{
        char *line = NULL;
        size_t cap = 0;
        unsigned lineno = 0;

        while (getline(&line, &cap, stdin) > 0) {
                lineno++;
                if (sign_one(line) < 0) {
                        fprintf(stderr, "sigv4_sign: request %u: cannot sign\n", lineno);
                        printf("ERROR\n");
                }
        }
        free(line);
        return 0;
}
