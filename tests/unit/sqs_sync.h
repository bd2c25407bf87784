/* Blocking wrappers of the SQS client for the tests: each runs the client's loop until the answer (at most
 * the call's own HTTP timeout and a few seconds) and returns res->error after filling *res, or the error
 * of starting the call (then *res says so too). */
#pragma once

#include "spotdrain/sqs.h"

int sqs_receive_sync(struct sqs_client *c, const struct sqs_receive_opts *opts, struct sqs_result *res,
                     struct sqs_message **ret_msgs, size_t *ret_n);
int sqs_delete_sync(struct sqs_client *c, const char *receipt_handle, struct sqs_result *res);
/* *ret_entries (n of them, free()) only when res->error is 0. */
int sqs_delete_batch_sync(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                          struct sqs_result *res, struct sqs_entry_result **ret_entries);
int sqs_change_visibility_batch_sync(struct sqs_client *c, const struct sqs_delete_entry *entries, size_t n,
                                     unsigned timeout_seconds, struct sqs_result *res,
                                     struct sqs_entry_result **ret_entries);
int sqs_change_visibility_sync(struct sqs_client *c, const char *receipt_handle, unsigned timeout_seconds,
                               struct sqs_result *res);
int sqs_get_attributes_sync(struct sqs_client *c, const char *const *names, struct sqs_result *res,
                            struct sqs_attribute **ret_attrs, size_t *ret_n);

/* SendMessageBatch (the JSON protocol, ten a call) of n bodies to queue_url, each delayed delay_seconds,
 * signed with creds, on loop l: what a sender puts in the queue (spotdrain itself never sends). 0 when
 * every body was queued, else a negative errno. */
struct aws_credentials;
struct loop;
int sqs_send_sync(struct loop *l, const char *queue_url, const struct aws_credentials *creds,
                  const char *const *bodies, size_t n, unsigned delay_seconds);
