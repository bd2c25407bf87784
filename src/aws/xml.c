/* aws/xml: AWS query-protocol XML answers and errors as a tree of elements by local name (libexpat). */
#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awsxml.h"

struct awsxml_node {
        char *name;
        struct buf text;
        struct awsxml_node *parent, *first, *last, *next;
};

struct awsxml {
        struct awsxml_node *root;
        struct awsxml_node *cur; /* while parsing: the open element */
        unsigned depth;
        int error; /* first error a handler met */
        XML_Parser parser;
};

static void node_free(struct awsxml_node *n)
{
        while (n) {
                struct awsxml_node *next = n->next;
                node_free(n->first);
                free(n->name);
                buf_free(&n->text);
                free(n);
                n = next;
        }
}

struct awsxml *awsxml_free(struct awsxml *x)
{
        if (!x)
                return NULL;
        node_free(x->root);
        free(x);
        return NULL;
}

/* "prefix:name" → "name". */
static const char *local_name(const char *name)
{
        const char *c = strrchr(name, ':');
        return c ? c + 1 : name;
}

static void on_start(void *userdata, const XML_Char *name, const XML_Char **attrs)
{
        struct awsxml *x = userdata;
        struct awsxml_node *n;

        if (x->error)
                return;
        if (++x->depth > AWSXML_MAX_DEPTH) {
                x->error = -E2BIG;
                XML_StopParser(x->parser, XML_FALSE);
                return;
        }
        n = calloc(1, sizeof(*n));
        if (!n || !(n->name = strdup(local_name(name)))) {
                free(n);
                x->error = -ENOMEM;
                XML_StopParser(x->parser, XML_FALSE);
                return;
        }
        n->parent = x->cur;
        if (!x->cur)
                x->root = n;
        else {
                if (x->cur->last)
                        x->cur->last->next = n;
                else
                        x->cur->first = n;
                x->cur->last = n;
        }
        x->cur = n;
}

static void on_end(void *userdata, const XML_Char *name)
{
        struct awsxml *x = userdata;

        if (x->error || !x->cur)
                return;
        x->depth--;
        x->cur = x->cur->parent;
}

static void on_text(void *userdata, const XML_Char *s, int len)
{
        struct awsxml *x = userdata;

        if (x->error || !x->cur || len <= 0)
                return;
        if (buf_append(&x->cur->text, s, (size_t)len) < 0) {
                x->error = -ENOMEM;
                XML_StopParser(x->parser, XML_FALSE);
        }
}

static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* NUL-terminates every text, trimmed. */
static int finish_texts(struct awsxml_node *n)
{
        for (; n; n = n->next) {
                size_t start = 0, end = n->text.len;
                while (start < end && is_space(n->text.data[start]))
                        start++;
                while (end > start && is_space(n->text.data[end - 1]))
                        end--;
                if (start > 0 && end > start)
                        memmove(n->text.data, n->text.data + start, end - start);
                n->text.len = end > start ? end - start : 0;
                if (buf_append(&n->text, "", 1) < 0)
                        return -ENOMEM;
                int r = finish_texts(n->first);
                if (r < 0)
                        return r;
        }
        return 0;
}

int awsxml_parse(const char *data, size_t len, struct awsxml **ret, char **ret_error)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        XML_Parser p;
        int r = 0;

        if (!data || !ret || len > (size_t)INT32_MAX)
                return -EINVAL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        p = XML_ParserCreate("UTF-8");
        if (!p)
                return -ENOMEM;
        x->parser = p;
        XML_SetUserData(p, x);
        XML_SetElementHandler(p, on_start, on_end);
        XML_SetCharacterDataHandler(p, on_text);
        if (XML_Parse(p, data, (int)len, XML_TRUE) != XML_STATUS_OK) {
                r = x->error;
                if (r == 0) {
                        r = -EBADMSG;
                        if (ret_error)
                                *ret_error = strprintf("line %lu, column %lu: %s",
                                                       (unsigned long)XML_GetCurrentLineNumber(p),
                                                       (unsigned long)XML_GetCurrentColumnNumber(p),
                                                       XML_ErrorString(XML_GetErrorCode(p)));
                }
        } else if (x->error)
                r = x->error;
        else if (!x->root)
                r = -EBADMSG;
        XML_ParserFree(p);
        x->parser = NULL;
        if (r < 0)
                return r;
        r = finish_texts(x->root);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

const struct awsxml_node *awsxml_root(const struct awsxml *x)
{
        return x ? x->root : NULL;
}

const char *awsxml_name(const struct awsxml_node *n)
{
        return n ? n->name : NULL;
}

const char *awsxml_text(const struct awsxml_node *n)
{
        if (!n)
                return NULL;
        return n->text.data ? n->text.data : "";
}

static const struct awsxml_node *match_from(const struct awsxml_node *c, const char *name, size_t len)
{
        for (; c; c = c->next)
                if (!name || (strlen(c->name) == len && strncmp(c->name, name, len) == 0))
                        return c;
        return NULL;
}

const struct awsxml_node *awsxml_child(const struct awsxml_node *n, const char *name)
{
        return n ? match_from(n->first, name, name ? strlen(name) : 0) : NULL;
}

const struct awsxml_node *awsxml_next(const struct awsxml_node *n, const char *name)
{
        return n ? match_from(n->next, name, name ? strlen(name) : 0) : NULL;
}

const struct awsxml_node *awsxml_find(const struct awsxml_node *n, const char *path)
{
        if (!n || !path)
                return NULL;
        if (*path == '/') {
                while (n->parent)
                        n = n->parent;
                path++;
                size_t l = strcspn(path, "/");
                if (strlen(n->name) != l || strncmp(n->name, path, l) != 0)
                        return NULL;
                path += l;
                if (*path == '/')
                        path++;
        }
        while (n && *path) {
                size_t l = strcspn(path, "/");
                n = match_from(n->first, path, l);
                path += l;
                if (*path == '/')
                        path++;
        }
        return n;
}

const char *awsxml_find_text(const struct awsxml_node *n, const char *path)
{
        return awsxml_text(awsxml_find(n, path));
}

const struct awsxml_node *awsxml_descendant(const struct awsxml_node *n, const char *name)
{
        if (!n || !name)
                return NULL;
        for (const struct awsxml_node *c = n->first; c; c = c->next) {
                if (streq(c->name, name))
                        return c;
                const struct awsxml_node *d = awsxml_descendant(c, name);
                if (d)
                        return d;
        }
        return NULL;
}

void aws_error_clear(struct aws_error *e)
{
        if (!e)
                return;
        free(e->code);
        free(e->message);
        free(e->type);
        free(e->request_id);
        *e = (struct aws_error){ 0 };
}

static int dup_opt(const char *s, char **ret)
{
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int aws_error_parse(const char *data, size_t len, struct aws_error *ret)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        const struct awsxml_node *root, *err;
        struct aws_error e = { 0 };
        int r;

        if (!ret)
                return -EINVAL;
        r = awsxml_parse(data, len, &x, NULL);
        if (r < 0)
                return r;
        root = awsxml_root(x);
        /* ErrorResponse/Error as the query protocol documents it; ErrorResponse/Errors/Error as moto sends
         * its signature and key errors, which botocore reads too. */
        if (streq(awsxml_name(root), "ErrorResponse"))
                err = awsxml_child(root, "Error") ?: awsxml_find(root, "Errors/Error");
        else if (streq(awsxml_name(root), "Response"))
                err = awsxml_find(root, "Errors/Error");
        else
                return -ENOMSG;
        if (!err || isempty(awsxml_find_text(err, "Code")))
                return -ENOMSG;
        const char *rid = awsxml_find_text(root, "RequestId") ?: awsxml_find_text(root, "RequestID");
        if ((r = dup_opt(awsxml_find_text(err, "Code"), &e.code)) < 0 ||
            (r = dup_opt(awsxml_find_text(err, "Message"), &e.message)) < 0 ||
            (r = dup_opt(awsxml_find_text(err, "Type"), &e.type)) < 0 ||
            (r = dup_opt(rid, &e.request_id)) < 0) {
                aws_error_clear(&e);
                return r;
        }
        *ret = e;
        return 0;
}
