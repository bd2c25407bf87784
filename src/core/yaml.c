/* YAML document → ynode tree, with positions, depth and size limits. */
#include "spotdrain/yaml.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "spotdrain/util.h"

struct yparse {
        yaml_parser_t parser;
        const char *name;
        char *error;
        size_t nodes;
};

static void ynode_clear(struct ynode *n)
{
        free(n->key);
        free(n->value);
        for (size_t i = 0; i < n->n_children; i++)
                ynode_clear(&n->children[i]);
        free(n->children);
}

struct ynode *ynode_free(struct ynode *n)
{
        if (!n)
                return NULL;
        ynode_clear(n);
        free(n);
        return NULL;
}

static int yfail(struct yparse *p, unsigned line, unsigned col, const char *why)
{
        if (!p->error)
                p->error = strprintf("%s:%u:%u: %s", p->name, line, col, why);
        return -EINVAL;
}

static int next_event(struct yparse *p, yaml_event_t *ev)
{
        if (!yaml_parser_parse(&p->parser, ev)) {
                const char *what = p->parser.problem ? p->parser.problem : "malformed YAML";
                return yfail(p, (unsigned)p->parser.problem_mark.line + 1,
                             (unsigned)p->parser.problem_mark.column + 1, what);
        }
        return 0;
}

static int add_child(struct ynode *parent, struct ynode **ret)
{
        if (parent->n_children % 8 == 0) {
                struct ynode *c = realloc(parent->children, (parent->n_children + 8) * sizeof(*c));
                if (!c)
                        return -ENOMEM;
                parent->children = c;
        }
        *ret = &parent->children[parent->n_children++];
        memset(*ret, 0, sizeof(**ret));
        return 0;
}

/* Fills *n from the event ev (already read) and what follows it. */
static int parse_node(struct yparse *p, yaml_event_t *ev, struct ynode *n, unsigned depth)
{
        n->line = (unsigned)ev->start_mark.line + 1;
        n->column = (unsigned)ev->start_mark.column + 1;
        if (++p->nodes > YAML_MAX_NODES)
                return yfail(p, n->line, n->column, "document too large");
        if (depth > YAML_MAX_DEPTH)
                return yfail(p, n->line, n->column, "nesting too deep");

        switch (ev->type) {
        case YAML_SCALAR_EVENT:
                n->type = YNODE_SCALAR;
                n->value = strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
                if (!n->value)
                        return -ENOMEM;
                n->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                            ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
                            ev->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
                            ev->data.scalar.style == YAML_FOLDED_SCALAR_STYLE;
                return 0;
        case YAML_ALIAS_EVENT:
                return yfail(p, n->line, n->column, "YAML aliases are not supported");
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
                bool map = ev->type == YAML_MAPPING_START_EVENT;
                n->type = map ? YNODE_MAP : YNODE_SEQ;
                for (;;) {
                        yaml_event_t e;
                        int r = next_event(p, &e);
                        if (r < 0)
                                return r;
                        if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
                                yaml_event_delete(&e);
                                return 0;
                        }
                        char *key = NULL;
                        unsigned kline = (unsigned)e.start_mark.line + 1,
                                 kcol = (unsigned)e.start_mark.column + 1;
                        if (map) {
                                if (e.type != YAML_SCALAR_EVENT) {
                                        yaml_event_delete(&e);
                                        return yfail(p, kline, kcol, "map keys must be scalars");
                                }
                                key = strndup((const char *)e.data.scalar.value, e.data.scalar.length);
                                yaml_event_delete(&e);
                                if (!key)
                                        return -ENOMEM;
                                if (ynode_get(n, key)) {
                                        _cleanup_free_ char *msg = strprintf("duplicate key '%s'", key);
                                        free(key);
                                        return yfail(p, kline, kcol, msg ? msg : "duplicate key");
                                }
                                r = next_event(p, &e);
                                if (r < 0) {
                                        free(key);
                                        return r;
                                }
                        }
                        struct ynode *c;
                        r = add_child(n, &c);
                        if (r < 0) {
                                free(key);
                                yaml_event_delete(&e);
                                return r;
                        }
                        r = parse_node(p, &e, c, depth + 1);
                        yaml_event_delete(&e);
                        c->key = key;
                        if (map) {
                                c->line = kline;
                                c->column = kcol;
                        }
                        if (r < 0)
                                return r;
                }
        }
        default:
                return yfail(p, n->line, n->column, "unexpected YAML event");
        }
}

int yaml_load_string(const char *text, size_t len, const char *name, struct ynode **ret, char **ret_error)
{
        struct yparse p = { .name = name ? name : "<input>" };
        struct ynode *root = calloc(1, sizeof(*root));
        int r = 0;

        if (!root)
                return -ENOMEM;
        if (!yaml_parser_initialize(&p.parser)) {
                free(root);
                return -ENOMEM;
        }
        yaml_parser_set_input_string(&p.parser, (const unsigned char *)text, len);

        bool have_doc = false;
        for (;;) {
                yaml_event_t e;
                r = next_event(&p, &e);
                if (r < 0)
                        break;
                yaml_event_type_t t = e.type;
                if (t == YAML_STREAM_END_EVENT) {
                        yaml_event_delete(&e);
                        break;
                }
                if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT ||
                    t == YAML_MAPPING_START_EVENT || t == YAML_ALIAS_EVENT) {
                        r = parse_node(&p, &e, root, 0);
                        yaml_event_delete(&e);
                        have_doc = true;
                        break;
                }
                yaml_event_delete(&e);
        }
        yaml_parser_delete(&p.parser);
        if (r == 0 && !have_doc) {
                /* An empty document is an empty map. */
                root->type = YNODE_MAP;
                root->line = root->column = 1;
        }
        if (r < 0) {
                ynode_free(root);
                if (ret_error)
                        *ret_error = TAKE_PTR(p.error);
                free(p.error);
                return r;
        }
        free(p.error);
        *ret = root;
        return 0;
}

int yaml_load_file(const char *path, size_t max_bytes, struct ynode **ret, char **ret_error)
{
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r = read_file_full(path, max_bytes, &text, &len);
        if (r < 0) {
                if (ret_error)
                        *ret_error =
                            strprintf("%s: %s", path, r == -EFBIG ? "file too large" : strerror(-r));
                return r;
        }
        return yaml_load_string(text, len, path, ret, ret_error);
}

const struct ynode *ynode_get(const struct ynode *map, const char *key)
{
        if (!map || map->type != YNODE_MAP)
                return NULL;
        YNODE_FOREACH (c, map)
                if (streq(c->key, key))
                        return c;
        return NULL;
}

bool ynode_is_null(const struct ynode *n)
{
        if (!n)
                return true;
        if (n->type != YNODE_SCALAR || n->quoted)
                return false;
        return isempty(n->value) || streq(n->value, "~") || streq(n->value, "null") ||
               streq(n->value, "Null") || streq(n->value, "NULL");
}

const char *ynode_str(const struct ynode *n)
{
        if (!n || n->type != YNODE_SCALAR || ynode_is_null(n))
                return NULL;
        return n->value;
}

int ynode_int(const struct ynode *n, int64_t *ret)
{
        const char *s = ynode_str(n);
        if (!s || n->quoted)
                return -EINVAL;
        char *e = NULL;
        errno = 0;
        long long v = strtoll(s, &e, 0);
        if (errno || e == s || *e)
                return -EINVAL;
        *ret = v;
        return 0;
}

int ynode_double(const struct ynode *n, double *ret)
{
        const char *s = ynode_str(n);
        if (!s || n->quoted)
                return -EINVAL;
        char *e = NULL;
        errno = 0;
        double v = strtod(s, &e);
        if (errno || e == s || *e || !isfinite(v))
                return -EINVAL;
        *ret = v;
        return 0;
}

int ynode_bool(const struct ynode *n, bool *ret)
{
        const char *s = ynode_str(n);
        if (!s || n->quoted)
                return -EINVAL;
        if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
                *ret = true;
                return 0;
        }
        if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) {
                *ret = false;
                return 0;
        }
        return -EINVAL;
}
