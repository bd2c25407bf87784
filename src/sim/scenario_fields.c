/* Scenario files: what every section's parser uses (errors that name file, line and path; typed keys;
 * names and instance ids). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "sim/scenario_internal.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

int sim_sc_fail(struct sctx *c, const struct ynode *n, const char *path, const char *fmt, ...)
{
        if (c->error) {
                char why[512];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(why, sizeof(why), fmt, ap);
                va_end(ap);
                free(*c->error);
                *c->error = strprintf("%s:%u: %s: %s", c->file, n ? n->line : 1, path, why);
        }
        return -EINVAL;
}

/* Appends a key to a path ("workloads[1].pdb" + "max_unavailable"); over-long paths are cut short. */
void sim_sc_sub(char out[static PATH_MAX_LEN], const char *path, const char *key)
{
        int n = isempty(path) ? snprintf(out, PATH_MAX_LEN, "%s", key)
                              : snprintf(out, PATH_MAX_LEN, "%s.%s", path, key);
        if (n < 0 || n >= PATH_MAX_LEN)
                out[PATH_MAX_LEN - 1] = 0;
}

int sim_sc_check_map(struct sctx *c, const struct ynode *n, const char *path, const char *const *allowed)
{
        if (!n || n->type != YNODE_MAP)
                return sim_sc_fail(c, n, isempty(path) ? "scenario" : path, "must be a map");
        YNODE_FOREACH (k, n) {
                bool ok = false;
                for (size_t i = 0; allowed[i]; i++)
                        if (streq(k->key, allowed[i]))
                                ok = true;
                char p[PATH_MAX_LEN];
                sim_sc_sub(p, path, k->key);
                if (!ok)
                        return sim_sc_fail(c, k, p, "unknown key");
                YNODE_FOREACH (k2, n) {
                        if (k2 >= k)
                                break;
                        if (streq(k2->key, k->key))
                                return sim_sc_fail(c, k, p, "duplicate key");
                }
        }
        return 0;
}

/* A scalar string; *ret stays as is when the key is absent. */
int sim_sc_get_str(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool required,
                   char **ret)
{
        const struct ynode *n = ynode_get(map, key);
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, key);
        if (!n || ynode_is_null(n)) {
                if (required)
                        return sim_sc_fail(c, n ? n : map, p, "required");
                return 0;
        }
        if (n->type != YNODE_SCALAR)
                return sim_sc_fail(c, n, p, "must be a string");
        char *v = strdup(n->value);
        if (!v)
                return -ENOMEM;
        free(*ret);
        *ret = v;
        return 0;
}

int sim_sc_get_int(struct sctx *c, const struct ynode *map, const char *key, const char *path, int64_t min,
                   int64_t max, int64_t *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, key);
        int64_t v;
        if (ynode_int(n, &v) < 0)
                return sim_sc_fail(c, n, p, "must be an integer");
        if (v < min || v > max)
                return sim_sc_fail(c, n, p, "must be between %lld and %lld", (long long)min, (long long)max);
        *ret = v;
        return 0;
}

int sim_sc_get_double(struct sctx *c, const struct ynode *map, const char *key, const char *path, double min,
                      double max, double *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, key);
        double v;
        if (ynode_double(n, &v) < 0)
                return sim_sc_fail(c, n, p, "must be a number");
        if (v < min || v > max)
                return sim_sc_fail(c, n, p, "must be between %g and %g", min, max);
        *ret = v;
        return 0;
}

int sim_sc_get_bool(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, key);
        if (ynode_bool(n, ret) < 0)
                return sim_sc_fail(c, n, p, "must be true or false");
        return 0;
}

int sim_sc_get_quantity(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool cpu,
                        char **ret_text, int64_t *ret)
{
        const struct ynode *n = ynode_get(map, key);
        if (!n)
                return 0;
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, key);
        const char *s = ynode_str(n);
        int64_t v;
        if (!s || (cpu ? parse_cpu_millis(s, &v) : parse_bytes(s, &v)) < 0 || v < 0)
                return sim_sc_fail(c, n, p, "must be a %s quantity", cpu ? "CPU" : "memory");
        if (free_and_strdup(ret_text, s) < 0)
                return -ENOMEM;
        *ret = v;
        return 0;
}

int sim_sc_get_seq(struct sctx *c, const struct ynode *map, const char *key, const struct ynode **ret)
{
        const struct ynode *n = ynode_get(map, key);
        *ret = NULL;
        if (!n || ynode_is_null(n))
                return 0;
        if (n->type != YNODE_SEQ)
                return sim_sc_fail(c, n, key, "must be a list");
        *ret = n;
        return 0;
}

bool sim_sc_valid_name(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
                        return false;
        }
        return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

bool sim_sc_valid_instance_id(const char *s)
{
        if (!startswith(s, "i-"))
                return false;
        size_t n = strlen(s + 2);
        if (n != 8 && n != 17)
                return false;
        for (size_t i = 2; s[i]; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Deterministic default: "i-0" followed by 16 hex digits of an FNV-1a hash of the node name. */
char *sim_sc_derive_instance_id(const char *name)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = name; *p; p++) {
                h ^= (unsigned char)*p;
                h *= 1099511628211ULL;
        }
        return strprintf("i-0%016llx", (unsigned long long)h);
}

ssize_t sim_sc_find_node(const struct sim_scenario *sc, const char *name)
{
        for (size_t i = 0; i < sc->n_nodes; i++)
                if (streq(sc->nodes[i].name, name))
                        return (ssize_t)i;
        return -1;
}
