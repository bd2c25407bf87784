/* Table-driven configuration: one parser per type, used alike for defaults, YAML, environment and --set, so
 * that every source accepts the same text and config_dump's output reads back. */
#include "spotdrain/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define CONFIG_FILE_MAX (1024u * 1024u)
#define USEC_PER_SEC    1000000ULL
#define USEC_PER_MSEC   1000ULL

/* A key: its table entry and where its section's values lie in struct spotdrain_config. */
struct key {
        const struct config_item *it;
        size_t base;
};

/* Walks every key of every section in dump order. */
#define FOREACH_KEY(k)                                                                         \
        for (size_t s_ = 0, i_ = 0; s_ < config_n_sections; s_++, i_ = 0)                      \
                for (struct key k; i_ < config_sections[s_].section->n_items &&                \
                                   (k = (struct key){ &config_sections[s_].section->items[i_], \
                                                      config_sections[s_].offset },            \
                                   true);                                                      \
                     i_++)

union config_value {
        char *s;
        int64_t i;
        double d;
        bool b;
        uint64_t u;
        int e;
        char **v;
};

static char *mfree_str(char *s)
{
        free(s);
        return NULL;
}

/* The edit distance of a and b, letters' case aside (their first 127 bytes), for a did-you-mean. */
static size_t edit_distance(const char *a, const char *b)
{
        size_t la = strnlen(a, 127), lb = strnlen(b, 127), row[128];
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best =
                            diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
                        if (up + 1 < best)
                                best = up + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

static char *key_name(const char *key, bool env)
{
        return env ? config_env_name(key) : strdup(key);
}

/* The key (its environment variable's name when env) that name is most likely a typo of: the closest by
 * edit distance within a third of its length, or one it begins (being half of it at least) or one that
 * begins it; NULL: none. */
static char *key_suggest(const char *name, bool env)
{
        /* A variable's prefix is every variable's: only what follows it tells them apart. */
        size_t skip = env && startswith(name, "SPOTDRAIN_") ? strlen("SPOTDRAIN_") : 0;
        size_t best = SIZE_MAX, len = strlen(name + skip);
        char *found = NULL;
        FOREACH_KEY(k)
        {
                char *cand = key_name(k.it->key, env);
                if (!cand)
                        return mfree_str(found);
                size_t d = edit_distance(name + skip, cand + skip), lc = strlen(cand + skip);
                /* A key cut short or one with more after it, not a section named alone ("drain"). */
                if ((startswith(cand, name) && 2 * len >= lc) || startswith(name, cand))
                        d = d < 2 ? d : 2;
                if (d < best && d <= (len / 3 > 2 ? len / 3 : 2)) {
                        best = d;
                        free(found);
                        found = cand;
                } else
                        free(cand);
        }
        return found;
}

static bool key_find(const char *name, struct key *ret)
{
        FOREACH_KEY(k)
        if (streq(k.it->key, name)) {
                *ret = k;
                return true;
        }
        return false;
}

/* A key by the name it had before it moved (config_item.old_key). */
static bool key_find_old(const char *name, struct key *ret)
{
        FOREACH_KEY(k)
        if (k.it->old_key && streq(k.it->old_key, name)) {
                *ret = k;
                return true;
        }
        return false;
}

static void warn_old_name(const char *where, const char *old, const char *now)
{
        log_warning("%s%s%s is now %s: the old name is still read, but give the new one", where ? where : "",
                    where ? ": " : "", old, now);
}

const struct config_item *config_find(const char *key)
{
        struct key k;
        return key_find(key, &k) ? k.it : NULL;
}

/* True when some key lies below the dotted prefix. */
static bool config_has_section(const char *prefix)
{
        size_t l = strlen(prefix);
        FOREACH_KEY(k)
        if (!strncmp(k.it->key, prefix, l) && k.it->key[l] == '.')
                return true;
        return false;
}

static void value_clear(const struct config_item *it, union config_value *v)
{
        if (it->type == CONFIG_STRING)
                free(v->s);
        else if (it->type == CONFIG_STRV)
                strv_free(v->v);
        memset(v, 0, sizeof(*v));
}

static void *field(struct spotdrain_config *c, struct key k)
{
        return (char *)c + k.base + k.it->offset;
}

static const void *cfield(const struct spotdrain_config *c, struct key k)
{
        return (const char *)c + k.base + k.it->offset;
}

/* Moves v into the field, freeing what was there. */
static void value_store(struct spotdrain_config *c, struct key k, union config_value *v)
{
        void *f = field(c, k);
        switch (k.it->type) {
        case CONFIG_STRING:
                free(*(char **)f);
                *(char **)f = TAKE_PTR(v->s);
                break;
        case CONFIG_STRV:
                strv_free(*(char ***)f);
                *(char ***)f = TAKE_PTR(v->v);
                break;
        case CONFIG_INT:
                *(int64_t *)f = v->i;
                break;
        case CONFIG_DOUBLE:
                *(double *)f = v->d;
                break;
        case CONFIG_BOOL:
                *(bool *)f = v->b;
                break;
        case CONFIG_DURATION:
                *(uint64_t *)f = v->u;
                break;
        case CONFIG_ENUM:
                *(int *)f = v->e;
                break;
        }
}

static const char *unit_name(const struct config_item *it)
{
        return it->unit_usec == USEC_PER_MSEC ? "milliseconds" : "seconds";
}

/* What a value of the item's type looks like, for messages. */
static char *expected(const struct config_item *it)
{
        switch (it->type) {
        case CONFIG_STRING:
                return strdup("a string");
        case CONFIG_INT:
                return strdup("an integer");
        case CONFIG_DOUBLE:
                return strdup("a number");
        case CONFIG_BOOL:
                return strdup("true or false");
        case CONFIG_DURATION:
                return strprintf("a duration in %s", unit_name(it));
        case CONFIG_STRV:
                return strdup("a list of strings");
        case CONFIG_ENUM: {
                struct buf b = { 0 };
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (buf_printf(&b, "%s%s", e == it->enum_values ? "one of " : ", ", e->name) < 0) {
                                buf_free(&b);
                                return NULL;
                        }
                return b.data;
        }
        }
        return NULL;
}

static bool in_range(const struct config_item *it, double x)
{
        return it->min > it->max || (x >= it->min && x <= it->max);
}

static char *range_error(const struct config_item *it, const char *text)
{
        return strprintf("%s: '%s' is out of range [%g, %g]", it->key, text, it->min, it->max);
}

static int split_list(const char *text, char ***ret)
{
        size_t n = 0;
        char **v = calloc(1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        const char *p = text;
        while (*p) {
                size_t l = strcspn(p, ",");
                const char *s = p, *e = p + l;
                while (s < e && isspace((unsigned char)*s))
                        s++;
                while (e > s && isspace((unsigned char)e[-1]))
                        e--;
                if (e > s) {
                        char **nv = realloc(v, (n + 2) * sizeof(char *));
                        if (!nv) {
                                strv_free(v);
                                return -ENOMEM;
                        }
                        v = nv;
                        v[n] = strndup(s, (size_t)(e - s));
                        if (!v[n]) {
                                strv_free(v);
                                return -ENOMEM;
                        }
                        v[++n] = NULL;
                }
                p += l;
                if (*p == ',')
                        p++;
        }
        *ret = v;
        return 0;
}

/* Parses text (NULL = unset) as the item's type. On a bad value returns -EINVAL with *ret_why "KEY: ...". */
static int value_parse(const struct config_item *it, const char *text, union config_value *ret,
                       char **ret_why)
{
        union config_value v = { 0 };
        bool unset = !text || !*text || streq(text, "null") || streq(text, "~");
        if (unset) {
                if (it->type == CONFIG_STRING) {
                        *ret = v;
                        return 0;
                }
                if (it->type == CONFIG_STRV) {
                        v.v = calloc(1, sizeof(char *));
                        if (!v.v)
                                return -ENOMEM;
                        *ret = v;
                        return 0;
                }
                _cleanup_free_ char *exp = expected(it);
                *ret_why = strprintf("%s: missing value (expected %s)", it->key, exp ? exp : "a value");
                return -EINVAL;
        }
        char *end = NULL;
        bool ok = false;
        switch (it->type) {
        case CONFIG_STRING: {
                const char *why = it->check ? it->check(text) : NULL;
                if (why) {
                        *ret_why = strprintf("%s: %s", it->key, why);
                        return -EINVAL;
                }
                v.s = strdup(text);
                if (!v.s)
                        return -ENOMEM;
                ok = true;
                break;
        }
        case CONFIG_STRV:
                if (split_list(text, &v.v) < 0)
                        return -ENOMEM;
                ok = true;
                break;
        case CONFIG_INT: {
                errno = 0;
                long long x = strtoll(text, &end, 10);
                ok = !errno && end != text && !*end;
                if (ok && !in_range(it, (double)x)) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.i = x;
                break;
        }
        case CONFIG_DOUBLE: {
                errno = 0;
                double x = strtod(text, &end);
                ok = !errno && end != text && !*end && isfinite(x);
                if (ok && !in_range(it, x)) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.d = x;
                break;
        }
        case CONFIG_BOOL:
                if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") ||
                    streq(text, "1")) {
                        v.b = true;
                        ok = true;
                } else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") ||
                           !strcasecmp(text, "off") || streq(text, "0")) {
                        v.b = false;
                        ok = true;
                }
                break;
        case CONFIG_DURATION: {
                errno = 0;
                double x = strtod(text, &end);
                uint64_t unit = it->unit_usec;
                if (!errno && end != text && isfinite(x)) {
                        if (streq(end, "ms"))
                                unit = USEC_PER_MSEC;
                        else if (streq(end, "s"))
                                unit = USEC_PER_SEC;
                        else if (streq(end, "m") || streq(end, "min"))
                                unit = 60 * USEC_PER_SEC;
                        else if (streq(end, "h"))
                                unit = 3600 * USEC_PER_SEC;
                        else if (*end)
                                break;
                        ok = x >= 0;
                }
                if (!ok)
                        break;
                double usec = x * (double)unit;
                if (!in_range(it, usec / (double)it->unit_usec) || usec > 1e15) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.u = (uint64_t)llround(usec);
                break;
        }
        case CONFIG_ENUM:
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (streq(e->name, text)) {
                                v.e = e->value;
                                ok = true;
                        }
                break;
        }
        if (!ok) {
                _cleanup_free_ char *exp = expected(it);
                *ret_why =
                    strprintf("%s: expected %s, got '%s'", it->key, exp ? exp : "another value", text);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int config_assign(struct spotdrain_config *c, struct key k, const char *text, char **ret_why)
{
        union config_value v;
        int r = value_parse(k.it, text, &v, ret_why);
        if (r < 0)
                return r;
        value_store(c, k, &v);
        return 0;
}

struct spotdrain_config *config_free(struct spotdrain_config *c)
{
        if (!c)
                return NULL;
        FOREACH_KEY(k)
        {
                if (k.it->type == CONFIG_STRING)
                        free(*(char **)field(c, k));
                else if (k.it->type == CONFIG_STRV)
                        strv_free(*(char ***)field(c, k));
        }
        free(c);
        return NULL;
}

int config_new(struct spotdrain_config **ret)
{
        _cleanup_(config_freep) struct spotdrain_config *c = calloc(1, config_struct_size);
        if (!c)
                return -ENOMEM;
        FOREACH_KEY(k)
        {
                char *why = NULL;
                int r = config_assign(c, k, k.it->def, &why);
                /* the defaults are the modules' own: a failure here is a bug in a table */
                free(why);
                if (r < 0)
                        return r == -ENOMEM ? r : -EINVAL;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static int strv_copy(char **src, char ***ret)
{
        size_t n = 0;
        while (src && src[n])
                n++;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v[i] = strdup(src[i]);
                if (!v[i]) {
                        strv_free(v);
                        return -ENOMEM;
                }
        }
        *ret = v;
        return 0;
}

static int config_copy(const struct spotdrain_config *src, struct spotdrain_config **ret)
{
        _cleanup_(config_freep) struct spotdrain_config *c = calloc(1, config_struct_size);
        if (!c)
                return -ENOMEM;
        /* scalars bytewise; the pointers are cleared first so that a failure half way frees only copies */
        memcpy(c, src, config_struct_size);
        FOREACH_KEY(k)
        if (k.it->type == CONFIG_STRING || k.it->type == CONFIG_STRV)
                memset(field(c, k), 0, sizeof(void *));
        FOREACH_KEY(k)
        {
                if (k.it->type == CONFIG_STRING) {
                        const char *str = *(char *const *)cfield(src, k);
                        if (str && !(*(char **)field(c, k) = strdup(str)))
                                return -ENOMEM;
                } else if (k.it->type == CONFIG_STRV) {
                        if (strv_copy(*(char **const *)cfield(src, k), (char ***)field(c, k)) < 0)
                                return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* Replaces dst's contents with src's and frees src. */
static void config_move(struct spotdrain_config *dst, struct spotdrain_config *src)
{
        unsigned char *a = (unsigned char *)dst, *b = (unsigned char *)src;
        for (size_t i = 0; i < config_struct_size; i++) {
                unsigned char t = a[i];
                a[i] = b[i];
                b[i] = t;
        }
        config_free(src);
}

static int fail(char **ret_error, int r, char *msg)
{
        if (ret_error && msg)
                *ret_error = msg;
        else
                free(msg);
        return r;
}

/* ---- YAML ---- */

struct cfile {
        const char *path;
        char *error; /* every error of the file, one "path:line: why" a line */
};

/* Adds one error to the file's list: a file is read whole, so that all of its errors are told at once. */
static int cfile_fail(struct cfile *f, const struct ynode *at, char *msg)
{
        if (!msg)
                return -ENOMEM;
        char *all = f->error ? strprintf("%s\n%s:%u: %s", f->error, f->path, at->line, msg)
                             : strprintf("%s:%u: %s", f->path, at->line, msg);
        free(msg);
        if (!all)
                return -ENOMEM;
        free(f->error);
        f->error = all;
        return -EINVAL;
}

static int cfile_apply_value(struct cfile *f, struct spotdrain_config *c, struct key k,
                             const struct ynode *n)
{
        const struct config_item *it = k.it;
        union config_value v = { 0 };
        char *why = NULL;
        int r;
        if (n->type == YNODE_SEQ) {
                if (it->type != CONFIG_STRV) {
                        _cleanup_free_ char *exp = expected(it);
                        return cfile_fail(
                            f, n, strprintf("%s: expected %s, got a list", it->key, exp ? exp : "a scalar"));
                }
                size_t j = 0;
                v.v = calloc(n->n_children + 1, sizeof(char *));
                if (!v.v)
                        return -ENOMEM;
                YNODE_FOREACH (e, n) {
                        const char *s = ynode_str(e);
                        if (e->type != YNODE_SCALAR || !s) {
                                value_clear(it, &v);
                                return cfile_fail(f, e,
                                                  strprintf("%s: expected a list of strings", it->key));
                        }
                        v.v[j] = strdup(s);
                        if (!v.v[j++]) {
                                value_clear(it, &v);
                                return -ENOMEM;
                        }
                }
                value_store(c, k, &v);
                return 0;
        }
        if (n->type == YNODE_MAP) {
                _cleanup_free_ char *exp = expected(it);
                return cfile_fail(f, n,
                                  strprintf("%s: expected %s, got a map", it->key, exp ? exp : "a scalar"));
        }
        if (it->type == CONFIG_STRV && !ynode_is_null(n))
                /* a single string would be split on commas; a YAML file says lists as lists */
                return cfile_fail(f, n,
                                  strprintf("%s: expected a list of strings, got '%s'", it->key, n->value));
        r = value_parse(it, ynode_str(n), &v, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return cfile_fail(f, n, why);
        value_store(c, k, &v);
        return 0;
}

/* Applies every key of map it can; an error is noted (cfile_fail) and the next key read. Returns the first
 * error, -ENOMEM at once. */
static int cfile_apply_map(struct cfile *f, struct spotdrain_config *c, const struct ynode *map,
                           const char *prefix)
{
        int first = 0;
        YNODE_FOREACH (n, map) {
                _cleanup_free_ char *key = prefix ? strprintf("%s.%s", prefix, n->key) : strdup(n->key);
                if (!key)
                        return -ENOMEM;
                struct key k;
                int r;
                if (key_find(key, &k))
                        r = cfile_apply_value(f, c, k, n);
                else if (key_find_old(key, &k)) {
                        _cleanup_free_ char *where = strprintf("%s:%u", f->path, n->line);
                        warn_old_name(where, key, k.it->key);
                        r = cfile_apply_value(f, c, k, n);
                } else if (n->type == YNODE_MAP && config_has_section(key))
                        r = cfile_apply_map(f, c, n, key);
                else {
                        _cleanup_free_ char *hint = key_suggest(key, false);
                        r = cfile_fail(f, n,
                                       hint ? strprintf("unknown key '%s' (did you mean '%s'?)", key, hint)
                                            : strprintf("unknown key '%s'", key));
                }
                if (r == -ENOMEM)
                        return r;
                if (r < 0 && first == 0)
                        first = r;
        }
        return first;
}

int config_load_file(struct spotdrain_config *c, const char *path, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *root = NULL;
        char *err = NULL;
        int r = yaml_load_file(path, CONFIG_FILE_MAX, &root, &err);
        if (r < 0)
                return fail(ret_error, r, err);
        struct cfile f = { .path = path };
        if (root->type != YNODE_MAP)
                return fail(ret_error, -EINVAL,
                            strprintf("%s:%u: expected a map of settings", path, root->line));
        struct spotdrain_config *copy = NULL;
        r = config_copy(c, &copy);
        if (r < 0)
                return r;
        r = cfile_apply_map(&f, copy, root, NULL);
        if (r < 0) {
                config_free(copy);
                if (r == -ENOMEM) {
                        free(f.error);
                        return r;
                }
                return fail(ret_error, r, f.error);
        }
        config_move(c, copy);
        return 0;
}

/* ---- environment and --set ---- */

char *config_env_name(const char *key)
{
        char *s = strprintf("SPOTDRAIN_%s", key);
        if (!s)
                return NULL;
        for (char *p = s; *p; p++)
                *p = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
        return s;
}

/* A SPOTDRAIN_ variable that is no key's is a typo that would pass unseen (its key keeps its default): it is
 * warned about, as an unknown key of a file is refused, with the name it most likely meant. */
static void env_warn_unknown(void)
{
        extern char **environ;
        for (char **e = environ; e && *e; e++) {
                if (!startswith(*e, "SPOTDRAIN_"))
                        continue;
                _cleanup_free_ char *name = strndup(*e, strcspn(*e, "="));
                bool known =
                    !name || streq(name, "SPOTDRAIN_CATALOG"); /* the instance type catalog's file */
                FOREACH_KEY(k)
                {
                        _cleanup_free_ char *env = known ? NULL : config_env_name(k.it->key);
                        known = known || !env || streq(env, name);
                        _cleanup_free_ char *old =
                            known || !k.it->old_key ? NULL : config_env_name(k.it->old_key);
                        known = known || (old && streq(old, name));
                }
                if (known)
                        continue;
                _cleanup_free_ char *hint = key_suggest(name, true);
                if (hint)
                        log_warning("unknown environment variable %s is ignored: did you mean %s?", name,
                                    hint);
                else
                        log_warning(
                            "unknown environment variable %s is ignored: spotdrain reads SPOTDRAIN_ and a "
                            "configuration key, dots as underscores (spotdrain check-config lists them)",
                            name);
        }
}

int config_load_env(struct spotdrain_config *c, char **ret_error)
{
        /* every value is checked before any is applied, so a bad variable leaves c as it was */
        struct spotdrain_config *copy = NULL;
        int r = config_copy(c, &copy);
        if (r < 0)
                return r;
        FOREACH_KEY(k)
        {
                _cleanup_free_ char *name = config_env_name(k.it->key);
                if (!name) {
                        config_free(copy);
                        return -ENOMEM;
                }
                const char *v = getenv(name);
                _cleanup_free_ char *old = !v && k.it->old_key ? config_env_name(k.it->old_key) : NULL;
                if (!v && old && (v = getenv(old))) {
                        _cleanup_free_ char *now = config_env_name(k.it->key);
                        warn_old_name(NULL, old, now ? now : k.it->key);
                }
                if (!v)
                        continue;
                char *why = NULL;
                r = config_assign(copy, k, v, &why);
                if (r < 0) {
                        config_free(copy);
                        if (!why)
                                return r;
                        char *msg = strprintf("%s: %s", name, why);
                        free(why);
                        return fail(ret_error, r, msg);
                }
        }
        config_move(c, copy);
        env_warn_unknown();
        return 0;
}

int config_set_value(struct spotdrain_config *c, const char *key, const char *value, char **ret_error)
{
        struct key k;
        if (!key_find(key, &k) && !key_find_old(key, &k))
                return fail(ret_error, -ENOENT, strprintf("unknown key '%s'", key));
        if (!streq(key, k.it->key))
                warn_old_name(NULL, key, k.it->key);
        char *why = NULL;
        int r = config_assign(c, k, value, &why);
        if (r < 0)
                return fail(ret_error, r, why);
        return 0;
}

int config_set(struct spotdrain_config *c, const char *assignment, char **ret_error)
{
        const char *eq = strchr(assignment, '=');
        if (!eq)
                return fail(ret_error, -EINVAL, strprintf("--set %s: expected KEY=VALUE", assignment));
        _cleanup_free_ char *key = strndup(assignment, (size_t)(eq - assignment));
        if (!key)
                return -ENOMEM;
        char *why = NULL;
        int r = config_set_value(c, key, eq + 1, &why);
        if (r < 0) {
                char *msg = why ? strprintf("--set %s", why) : NULL;
                free(why);
                return fail(ret_error, r, msg);
        }
        return 0;
}

int config_load(const char *path, char *const *sets, struct spotdrain_config **ret, char **ret_error)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        int r = config_new(&c);
        if (r < 0)
                return fail(ret_error, r, strprintf("configuration defaults: %s", strerror(-r)));
        if (path) {
                r = config_load_file(c, path, ret_error);
                if (r < 0)
                        return r;
        }
        r = config_load_env(c, ret_error);
        if (r < 0)
                return r;
        for (char *const *s = sets; s && *s; s++) {
                r = config_set(c, *s, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- dump ---- */

static int dump_string(struct buf *b, const char *s)
{
        if (!s)
                return buf_printf(b, "null");
        if (buf_append(b, "\"", 1) < 0)
                return -ENOMEM;
        for (const char *p = s; *p; p++) {
                unsigned char ch = (unsigned char)*p;
                int r;
                if (ch == '"' || ch == '\\')
                        r = buf_printf(b, "\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        r = buf_printf(b, "\\x%02x", ch);
                else
                        r = buf_append(b, p, 1);
                if (r < 0)
                        return -ENOMEM;
        }
        return buf_append(b, "\"", 1);
}

static int dump_value(struct buf *b, const struct spotdrain_config *c, struct key k)
{
        const struct config_item *it = k.it;
        const void *f = cfield(c, k);
        switch (it->type) {
        case CONFIG_STRING: {
                const char *s = *(char *const *)f;
                return dump_string(b, it->secret && s ? "<hidden>" : s);
        }
        case CONFIG_INT:
                return buf_printf(b, "%" PRId64, *(const int64_t *)f);
        case CONFIG_DOUBLE:
                return buf_printf(b, "%.17g", *(const double *)f);
        case CONFIG_BOOL:
                return buf_printf(b, "%s", *(const bool *)f ? "true" : "false");
        case CONFIG_DURATION: {
                uint64_t u = *(const uint64_t *)f;
                if (u % it->unit_usec == 0)
                        return buf_printf(b, "%" PRIu64, u / it->unit_usec);
                return buf_printf(b, "%.17g", (double)u / (double)it->unit_usec);
        }
        case CONFIG_ENUM:
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (e->value == *(const int *)f)
                                return buf_printf(b, "%s", e->name);
                return buf_printf(b, "null");
        case CONFIG_STRV: {
                char *const *v = *(char **const *)f;
                if (buf_append(b, "[", 1) < 0)
                        return -ENOMEM;
                for (size_t i = 0; v && v[i]; i++)
                        if ((i > 0 && buf_append(b, ", ", 2) < 0) || dump_string(b, v[i]) < 0)
                                return -ENOMEM;
                return buf_append(b, "]", 1);
        }
        }
        return -EINVAL;
}

int config_dump(const struct spotdrain_config *c, char **ret)
{
        struct buf b = { 0 };
        const char *section = NULL;
        size_t section_len = 0;
        FOREACH_KEY(k)
        {
                const struct config_item *it = k.it;
                const char *dot = strchr(it->key, '.');
                size_t sl = dot ? (size_t)(dot - it->key) : 0;
                int r = 0;
                if (sl > 0 && !(section && section_len == sl && !strncmp(section, it->key, sl)))
                        r = buf_printf(&b, "%.*s:\n", (int)sl, it->key);
                section = sl > 0 ? it->key : NULL;
                section_len = sl;
                if (r >= 0)
                        r = buf_printf(&b, "%s%s: ", sl > 0 ? "  " : "", sl > 0 ? dot + 1 : it->key);
                if (r >= 0)
                        r = dump_value(&b, c, k);
                if (r >= 0)
                        r = buf_printf(&b, "  # %s\n", it->description);
                if (r < 0) {
                        buf_free(&b);
                        return -ENOMEM;
                }
        }
        if (buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}
