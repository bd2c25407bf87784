/* The SQS query protocol's request and answer forms (sqs_query.c), for the SQS surface. */
#pragma once

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdbool.h>

struct buf;

/* DeleteMessageBatch, ChangeMessageVisibilityBatch, SendMessageBatch: an action of entries. */
bool sim_sqs_is_batch(const char *action);
/* A string parameter of p, or NULL. */
const char *sim_sqs_param(const cJSON *p, const char *key);
/* Adds one form field (key=value, value decoded) to the parameters object userdata: "X.N" and "X.N.Y" keys
 * build the lists and objects the JSON protocol carries. */
int sim_sqs_form_param(void *userdata, const char *key, const char *value);
/* The same as an MHD_get_connection_values() iterator over the query string. */
enum MHD_Result sim_sqs_collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value);
/* <name>value</name>, value escaped. */
int sim_sqs_xml_element(struct buf *b, const char *name, const char *value);
/* The <ActionResult> element of an action's result object. */
int sim_sqs_xml_result(struct buf *b, const char *action, const cJSON *res);
