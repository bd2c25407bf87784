/* The SQS query protocol (what Debian's botocore 1.29 speaks): the form-encoded request into the same
 * parameters as the JSON protocol's, and a result into the XML the service answers. */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/sqs_query.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define MAX_LIST_INDEX 64

const char *sim_sqs_param(const cJSON *p, const char *key)
{
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, key));
}

bool sim_sqs_is_batch(const char *action)
{
        size_t len = action ? strlen(action) : 0;
        return len > 5 && streq(action + len - 5, "Batch");
}

/* ---- the query protocol: form → parameters, result → XML ---- */

/* The item at 1-based index of the list key of p, created (as an object when obj) when absent. */
static cJSON *list_slot(cJSON *p, const char *key, long index, bool obj)
{
        cJSON *a = cJSON_GetObjectItemCaseSensitive(p, key), *item;

        if (!a && !(a = cJSON_AddArrayToObject(p, key)))
                return NULL;
        while (cJSON_GetArraySize(a) < index)
                if (!cJSON_AddItemToArray(a, cJSON_CreateNull()))
                        return NULL;
        item = cJSON_GetArrayItem(a, (int)index - 1);
        if (obj && !cJSON_IsObject(item)) {
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_ReplaceItemInArray(a, (int)index - 1, o)) {
                        cJSON_Delete(o);
                        return NULL;
                }
                item = o;
        }
        return item;
}

static bool parse_index(const char *s, long *ret, const char **end)
{
        char *e = NULL;
        long v;

        if (!isdigit((unsigned char)*s))
                return false;
        errno = 0;
        v = strtol(s, &e, 10);
        if (errno || v < 1 || v > MAX_LIST_INDEX)
                return false;
        *ret = v;
        *end = e;
        return true;
}

/* Adds one form field to the parameters in the JSON protocol's shape. */
static int form_field(cJSON *p, const char *key, const char *value)
{
        static const char *const numbers[] = { "MaxNumberOfMessages", "WaitTimeSeconds", "VisibilityTimeout",
                                               "DelaySeconds" };
        static const struct {
                const char *prefix, *list;
        } lists[] = {
                { "AttributeName.", "AttributeNames" },
                { "MessageSystemAttributeName.", "MessageSystemAttributeNames" },
                { "MessageAttributeName.", "MessageAttributeNames" },
        };
        static const char *const entry_lists[] = { "DeleteMessageBatchRequestEntry.",
                                                   "ChangeMessageVisibilityBatchRequestEntry.",
                                                   "SendMessageBatchRequestEntry." };
        const char *end;
        long index;

        for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
                if (startswith(key, lists[i].prefix)) {
                        cJSON *a, *s;
                        if (!parse_index(key + strlen(lists[i].prefix), &index, &end) || *end)
                                return 0;
                        if (!list_slot(p, lists[i].list, index, false))
                                return -ENOMEM;
                        a = cJSON_GetObjectItemCaseSensitive(p, lists[i].list);
                        s = cJSON_CreateString(value);
                        if (!s || !cJSON_ReplaceItemInArray(a, (int)index - 1, s)) {
                                cJSON_Delete(s);
                                return -ENOMEM;
                        }
                        return 0;
                }
        /* The batches' entries: DeleteMessageBatchRequestEntry.N.Id, ... */
        for (size_t i = 0; i < ARRAY_SIZE(entry_lists); i++)
                if (startswith(key, entry_lists[i])) {
                        if (!parse_index(key + strlen(entry_lists[i]), &index, &end) || *end != '.')
                                return 0;
                        p = list_slot(p, "Entries", index, true);
                        if (!p)
                                return -ENOMEM;
                        key = end + 1;
                        break;
                }
        cJSON_DeleteItemFromObjectCaseSensitive(p, key);
        for (size_t i = 0; i < ARRAY_SIZE(numbers); i++)
                if (streq(key, numbers[i])) {
                        char *e = NULL;
                        long v;
                        errno = 0;
                        v = strtol(value, &e, 10);
                        if (!errno && e != value && !*e)
                                return cJSON_AddNumberToObject(p, key, (double)v) ? 0 : -ENOMEM;
                }
        return cJSON_AddStringToObject(p, key, value) ? 0 : -ENOMEM;
}

int sim_sqs_form_param(void *userdata, const char *key, const char *value)
{
        return form_field(userdata, key, value);
}

enum MHD_Result sim_sqs_collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        return form_field(cls, key, value ? value : "") < 0 ? MHD_NO : MHD_YES;
}

static int xml_escape(struct buf *b, const char *s)
{
        for (; s && *s; s++) {
                const char *rep = NULL;
                switch (*s) {
                case '&':
                        rep = "&amp;";
                        break;
                case '<':
                        rep = "&lt;";
                        break;
                case '>':
                        rep = "&gt;";
                        break;
                case '"':
                        rep = "&quot;";
                        break;
                case '\'':
                        rep = "&apos;";
                        break;
                case '\r':
                        rep = "&#xD;";
                        break;
                default:
                        break;
                }
                if ((rep ? buf_append(b, rep, strlen(rep)) : buf_append(b, s, 1)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int sim_sqs_xml_element(struct buf *b, const char *name, const char *value)
{
        if (buf_printf(b, "<%s>", name) < 0 || xml_escape(b, value) < 0 || buf_printf(b, "</%s>", name) < 0)
                return -ENOMEM;
        return 0;
}

static int xml_attributes(struct buf *b, const cJSON *attrs)
{
        const cJSON *a;
        cJSON_ArrayForEach (a, attrs)
                if (buf_printf(b, "<Attribute>") < 0 || sim_sqs_xml_element(b, "Name", a->string) < 0 ||
                    sim_sqs_xml_element(b, "Value", cJSON_GetStringValue(a)) < 0 ||
                    buf_printf(b, "</Attribute>") < 0)
                        return -ENOMEM;
        return 0;
}

int sim_sqs_xml_result(struct buf *b, const char *action, const cJSON *res)
{
        const cJSON *x, *e;

        if (streq(action, "ReceiveMessage")) {
                x = cJSON_GetObjectItemCaseSensitive(res, "Messages");
                if (cJSON_GetArraySize(x) == 0)
                        return buf_printf(b, "<ReceiveMessageResult/>");
                if (buf_printf(b, "<ReceiveMessageResult>") < 0)
                        return -ENOMEM;
                cJSON_ArrayForEach (e, x) {
                        if (buf_printf(b, "<Message>") < 0 ||
                            sim_sqs_xml_element(b, "MessageId", sim_sqs_param(e, "MessageId")) < 0 ||
                            sim_sqs_xml_element(b, "ReceiptHandle", sim_sqs_param(e, "ReceiptHandle")) < 0 ||
                            sim_sqs_xml_element(b, "MD5OfBody", sim_sqs_param(e, "MD5OfBody")) < 0 ||
                            sim_sqs_xml_element(b, "Body", sim_sqs_param(e, "Body")) < 0 ||
                            xml_attributes(b, cJSON_GetObjectItemCaseSensitive(e, "Attributes")) < 0 ||
                            buf_printf(b, "</Message>") < 0)
                                return -ENOMEM;
                }
                return buf_printf(b, "</ReceiveMessageResult>");
        }
        if (streq(action, "GetQueueAttributes")) {
                x = cJSON_GetObjectItemCaseSensitive(res, "Attributes");
                if (cJSON_GetArraySize(x) == 0)
                        return buf_printf(b, "<GetQueueAttributesResult/>");
                if (buf_printf(b, "<GetQueueAttributesResult>") < 0 || xml_attributes(b, x) < 0)
                        return -ENOMEM;
                return buf_printf(b, "</GetQueueAttributesResult>");
        }
        if (streq(action, "GetQueueUrl"))
                return buf_printf(b, "<GetQueueUrlResult>") < 0 ||
                               sim_sqs_xml_element(b, "QueueUrl", sim_sqs_param(res, "QueueUrl")) < 0
                           ? -ENOMEM
                           : buf_printf(b, "</GetQueueUrlResult>");
        if (streq(action, "SendMessage"))
                return buf_printf(b, "<SendMessageResult>") < 0 ||
                               sim_sqs_xml_element(b, "MessageId", sim_sqs_param(res, "MessageId")) < 0 ||
                               sim_sqs_xml_element(b, "MD5OfMessageBody",
                                                   sim_sqs_param(res, "MD5OfMessageBody")) < 0
                           ? -ENOMEM
                           : buf_printf(b, "</SendMessageResult>");
        if (sim_sqs_is_batch(action)) {
                if (buf_printf(b, "<%sResult>", action) < 0)
                        return -ENOMEM;
                cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(res, "Successful"))
                        if (buf_printf(b, "<%sResultEntry>", action) < 0 ||
                            sim_sqs_xml_element(b, "Id", sim_sqs_param(e, "Id")) < 0 ||
                            (sim_sqs_param(e, "MessageId") &&
                             (sim_sqs_xml_element(b, "MessageId", sim_sqs_param(e, "MessageId")) < 0 ||
                              sim_sqs_xml_element(b, "MD5OfMessageBody",
                                                  sim_sqs_param(e, "MD5OfMessageBody")) < 0)) ||
                            buf_printf(b, "</%sResultEntry>", action) < 0)
                                return -ENOMEM;
                cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(res, "Failed"))
                        if (buf_printf(b, "<BatchResultErrorEntry>") < 0 ||
                            sim_sqs_xml_element(b, "Id", sim_sqs_param(e, "Id")) < 0 ||
                            sim_sqs_xml_element(b, "Code", sim_sqs_param(e, "Code")) < 0 ||
                            sim_sqs_xml_element(b, "Message", sim_sqs_param(e, "Message")) < 0 ||
                            buf_printf(b, "<SenderFault>true</SenderFault></BatchResultErrorEntry>") < 0)
                                return -ENOMEM;
                return buf_printf(b, "</%sResult>", action);
        }
        return 0;
}
