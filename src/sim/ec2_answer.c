/* The EC2 and Auto Scaling surface's answers (XML, errors in each API's shape) and request parameters. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/aws_request.h"
#include "sim/ec2_internal.h"
#include "sim/ec2_surface.h"
#include "sim/elbv2.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

void sim_ec2_ans_printf(struct answer *a, const char *fmt, ...)
{
        va_list ap;
        char *s;

        va_start(ap, fmt);
        int k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0 || buf_append(&a->body, s, (size_t)k) < 0)
                a->oom = true;
        if (k >= 0)
                free(s);
}

void sim_ec2_ans_text(struct answer *a, const char *s)
{
        for (; s && *s; s++) {
                const char *e = *s == '&'   ? "&amp;"
                                : *s == '<' ? "&lt;"
                                : *s == '>' ? "&gt;"
                                : *s == '"' ? "&quot;"
                                            : NULL;
                if ((e ? buf_append(&a->body, e, strlen(e)) : buf_append(&a->body, s, 1)) < 0)
                        a->oom = true;
        }
}

/* <name>text</name>, text escaped. */
void sim_ec2_ans_elem(struct answer *a, const char *name, const char *text)
{
        sim_ec2_ans_printf(a, "<%s>", name);
        sim_ec2_ans_text(a, text);
        sim_ec2_ans_printf(a, "</%s>", name);
}

void sim_ec2_ans_reset(struct answer *a)
{
        buf_free(&a->body);
        a->body = (struct buf){};
}

void sim_ec2_request_id(struct sim_ec2 *e, char out[37])
{
        uint64_t n = ++e->seq;
        snprintf(out, 37, "5e2b9f70-%04x-4c3e-b8f6-%012" PRIx64, (unsigned)(n & 0xffff), n * 2654435761u);
}

void sim_ec2_error_answer(struct sim_ec2 *e, struct answer *a, unsigned status, const char *xmlns,
                          const char *code, const char *fmt, ...)
{
        char msg[512], rid[37];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_reset(a);
        a->status = status;
        if (xmlns)
                sim_ec2_ans_printf(a, "<ErrorResponse xmlns=\"%s\"><Error><Type>%s</Type>", xmlns,
                                   status >= 500 ? "Receiver" : "Sender");
        else
                sim_ec2_ans_printf(a,
                                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>");
        sim_ec2_ans_elem(a, "Code", code);
        sim_ec2_ans_elem(a, "Message", msg);
        if (xmlns)
                sim_ec2_ans_printf(a, "</Error><RequestId>%s</RequestId></ErrorResponse>", rid);
        else
                sim_ec2_ans_printf(a, "</Error></Errors><RequestID>%s</RequestID></Response>", rid);
}

/* ---- parameters ---- */

int sim_ec2_param_set(cJSON *p, const char *key, const char *value)
{
        cJSON_DeleteItemFromObjectCaseSensitive(p, key);
        return cJSON_AddStringToObject(p, key, value) ? 0 : -ENOMEM;
}

int sim_ec2_form_param(void *userdata, const char *key, const char *value)
{
        return sim_ec2_param_set(userdata, key, value);
}

enum MHD_Result sim_ec2_collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        return sim_ec2_param_set(cls, key, value ? value : "") < 0 ? MHD_NO : MHD_YES;
}

const char *sim_ec2_param(const cJSON *p, const char *fmt, ...)
{
        char key[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(key, sizeof(key), fmt, ap);
        va_end(ap);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}
