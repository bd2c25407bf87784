/* A YAML document read into a tree that remembers where each node stood (libyaml underneath). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ynode_type {
        YNODE_SCALAR,
        YNODE_MAP,
        YNODE_SEQ,
};

struct ynode {
        enum ynode_type type;
        char *key;   /* the key, when this node is a value in a map */
        char *value; /* scalar text */
        bool quoted; /* scalar was quoted: never null, never a number */
        struct ynode *children;
        size_t n_children;
        unsigned line, column; /* 1-based, of the value (for map values: of the key) */
};

/* A leaf has no children array: stop before computing NULL + 0, which C leaves undefined. */
#define YNODE_FOREACH(child, parent)                                           \
        for (const struct ynode *child = (parent) ? (parent)->children : NULL; \
             child && child < (parent)->children + (parent)->n_children; child++)

#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 1000000

/* Parses the first document. On error returns negative errno and, if ret_error, a message "NAME:LINE:COL:
 * why". */
int yaml_load_string(const char *text, size_t len, const char *name, struct ynode **ret, char **ret_error);
int yaml_load_file(const char *path, size_t max_bytes, struct ynode **ret, char **ret_error);
struct ynode *ynode_free(struct ynode *n);
static inline void ynode_freep(struct ynode **n)
{
        ynode_free(*n);
}

const struct ynode *ynode_get(const struct ynode *map, const char *key);
const char *ynode_str(const struct ynode *n); /* scalar text, or NULL for a non-scalar or null */
bool ynode_is_null(const struct ynode *n);    /* absent, ~, null, or empty unquoted */
int ynode_int(const struct ynode *n, int64_t *ret);
int ynode_double(const struct ynode *n, double *ret);
int ynode_bool(const struct ynode *n, bool *ret);
