/* aws/xml: a small reader for the XML answers of AWS query-protocol services (STS, EC2, Auto Scaling, SQS
 * query) and their error documents, on libexpat. The document becomes a tree of elements by local name
 * (namespace prefixes and xmlns are ignored: AWS answers carry a default namespace that varies by service
 * and version); each element keeps its text (character data directly inside it, entities decoded,
 * surrounding whitespace trimmed). AWS does not guarantee element order, so look elements up by name. Pure:
 * no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "spotdrain/util.h"

struct awsxml;      /* a parsed document */
struct awsxml_node; /* an element, owned by its document */

#define AWSXML_MAX_DEPTH 64 /* deeper documents are refused (-E2BIG) */

/* Parses a whole document. -EBADMSG for malformed XML (ret_error, if given, says where and why: "line 3,
 * column 7: mismatched tag"), -E2BIG past AWSXML_MAX_DEPTH, -ENOMEM. */
int awsxml_parse(const char *data, size_t len, struct awsxml **ret, char **ret_error);
struct awsxml *awsxml_free(struct awsxml *x); /* NULL-safe; returns NULL */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct awsxml *, awsxml_free);

const struct awsxml_node *awsxml_root(const struct awsxml *x);
const char *awsxml_name(const struct awsxml_node *n); /* local name */
const char *awsxml_text(const struct awsxml_node *n); /* "" for none; NULL-safe (NULL for NULL) */

/* The first child named name (NULL = any), and the next sibling with the same rule, for iterating repeated
 * elements such as EC2's <item>. */
const struct awsxml_node *awsxml_child(const struct awsxml_node *n, const char *name);
const struct awsxml_node *awsxml_next(const struct awsxml_node *n, const char *name);
#define AWSXML_FOREACH(c, parent, name) \
        for (const struct awsxml_node *c = awsxml_child((parent), (name)); c; c = awsxml_next(c, (name)))

/* Follows a "/"-separated path of child names from n ("AssumeRoleWithWebIdentityResult/Credentials"); a
 * leading "/" starts at the document root, whose own name is then the first step. NULL when absent. */
const struct awsxml_node *awsxml_find(const struct awsxml_node *n, const char *path);
/* The text at awsxml_find(), or NULL when the element is absent. */
const char *awsxml_find_text(const struct awsxml_node *n, const char *path);
/* The first element named name anywhere below n (depth first, document order). */
const struct awsxml_node *awsxml_descendant(const struct awsxml_node *n, const char *name);

/* An AWS error document: ErrorResponse/Error/{Type,Code,Message} + RequestId (query services: STS, SQS,
 * Auto Scaling) or Response/Errors/Error/{Code,Message} + RequestID (EC2). */
struct aws_error {
        char *code;       /* "InvalidIdentityToken", "UnauthorizedOperation", ... */
        char *message;    /* may be NULL */
        char *type;       /* "Sender" / "Receiver" (query services), else NULL */
        char *request_id; /* may be NULL */
};
/* 0 and the fields when the document is an error document; -ENOMSG when it is well-formed XML but not one;
 * awsxml_parse()'s errors otherwise. */
int aws_error_parse(const char *data, size_t len, struct aws_error *ret);
void aws_error_clear(struct aws_error *e);
