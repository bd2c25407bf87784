/* The instance type catalog: the shipped JSON file, its parsing and writing, and kubelet allocatable. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/provision.h"

#define CATALOG_MAX_BYTES (8u * 1024u * 1024u)

int prov_max_pods(int enis, int ipv4_per_eni)
{
        if (enis <= 0 || ipv4_per_eni <= 1)
                return 0;
        /* Each ENI keeps its primary address for itself; +2 for the host-network pods (aws-node,
         * kube-proxy). */
        return enis * (ipv4_per_eni - 1) + 2;
}

struct prov_catalog *prov_catalog_free(struct prov_catalog *c)
{
        if (!c)
                return NULL;
        free(c->types);
        free(c);
        return NULL;
}

/* Takes msg (NULL on ENOMEM is fine: the caller then has no explanation). */
static int fail(char **ret_error, char *msg)
{
        if (ret_error)
                *ret_error = msg;
        else
                free(msg);
        return -EBADMSG;
}

static bool split_name(const char *name, char family[PROV_NAME_SIZE], char size[PROV_NAME_SIZE])
{
        const char *dot = strchr(name, '.');
        size_t fl;

        if (!dot || dot == name || !dot[1] || strlen(name) >= PROV_NAME_SIZE)
                return false;
        fl = (size_t)(dot - name);
        memcpy(family, name, fl);
        family[fl] = 0;
        snprintf(size, PROV_NAME_SIZE, "%s", dot + 1);
        return true;
}

int prov_catalog_add(struct prov_catalog *c, const struct prov_itype *t)
{
        struct prov_itype n = *t;
        struct prov_itype *v;

        if (!split_name(t->name, n.family, n.size) || t->vcpu <= 0 || t->memory_mib <= 0)
                return -EINVAL;
        if (n.max_pods <= 0)
                n.max_pods = prov_max_pods(n.max_enis, n.ipv4_per_eni);
        if (n.max_pods <= 0)
                n.max_pods = 110; /* the kubelet default when nothing better is known */
        if (!n.arch[0])
                snprintf(n.arch, sizeof(n.arch), "x86_64");
        for (size_t i = 0; i < c->n; i++)
                if (streq(c->types[i].name, n.name)) {
                        c->types[i] = n;
                        return 0;
                }
        v = realloc(c->types, (c->n + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        c->types = v;
        c->types[c->n++] = n;
        return 0;
}

const struct prov_itype *prov_catalog_find(const struct prov_catalog *c, const char *name)
{
        for (size_t i = 0; c && i < c->n; i++)
                if (streq(c->types[i].name, name))
                        return &c->types[i];
        return NULL;
}

static bool get_int(const cJSON *o, const char *key, bool required, int64_t lo, int64_t hi, int64_t *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!v)
                return !required;
        if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
            v->valuedouble != (double)(int64_t)v->valuedouble)
                return false;
        *ret = (int64_t)v->valuedouble;
        return true;
}

int prov_catalog_parse(const char *json, size_t len, struct prov_catalog **ret, char **ret_error)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = NULL;
        cJSON *doc = NULL;
        const cJSON *list, *it;
        size_t i = 0;
        int r = 0;

        doc = cJSON_ParseWithLength(json, len);
        if (!doc)
                return fail(ret_error, strdup("not valid JSON"));
        list = cJSON_GetObjectItemCaseSensitive(doc, "instance_types");
        if (!cJSON_IsArray(list)) {
                cJSON_Delete(doc);
                return fail(ret_error, strdup("instance_types: must be a list"));
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                cJSON_Delete(doc);
                return -ENOMEM;
        }
        cJSON_ArrayForEach (it, list) {
                struct prov_itype t = {};
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
                const cJSON *arch = cJSON_GetObjectItemCaseSensitive(it, "architecture");
                int64_t vcpu = 0, mem = 0, pods = 0, enis = 0, ips = 0;

                if (!cJSON_IsString(name) || strlen(name->valuestring) >= PROV_NAME_SIZE ||
                    (arch && (!cJSON_IsString(arch) || strlen(arch->valuestring) >= PROV_NAME_SIZE)) ||
                    !get_int(it, "vcpu", true, 1, 100000, &vcpu) ||
                    !get_int(it, "memory_mib", true, 1, INT64_C(1) << 40, &mem) ||
                    !get_int(it, "max_pods", false, 1, 100000, &pods) ||
                    !get_int(it, "max_enis", false, 0, 1000, &enis) ||
                    !get_int(it, "ipv4_per_eni", false, 0, 1000, &ips)) {
                        r = fail(
                            ret_error,
                            strprintf("instance_types[%zu]: bad or missing name, vcpu or memory_mib", i));
                        break;
                }
                snprintf(t.name, sizeof(t.name), "%s", name->valuestring);
                if (arch)
                        snprintf(t.arch, sizeof(t.arch), "%s", arch->valuestring);
                t.vcpu = (int)vcpu;
                t.memory_mib = mem;
                t.max_pods = (int)pods;
                t.max_enis = (int)enis;
                t.ipv4_per_eni = (int)ips;
                r = prov_catalog_add(c, &t);
                if (r == -EINVAL)
                        r = fail(ret_error, strprintf("instance_types[%zu]: bad name %s", i, t.name));
                if (r < 0)
                        break;
                i++;
        }
        cJSON_Delete(doc);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int prov_catalog_load(const char *path, struct prov_catalog **ret, char **ret_error)
{
        static const char *const defaults[] = { "/usr/local/share/spotdrain/instance-types.json",
                                                "/usr/share/spotdrain/instance-types.json",
                                                "data/instance-types.json", NULL };
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = -ENOENT;

        if (!path)
                path = getenv("SPOTDRAIN_CATALOG");
        if (path)
                r = read_file_full(path, CATALOG_MAX_BYTES, &data, &len);
        else
                for (size_t i = 0; defaults[i] && r == -ENOENT; i++) {
                        r = read_file_full(defaults[i], CATALOG_MAX_BYTES, &data, &len);
                        path = defaults[i];
                }
        if (r < 0) {
                if (ret_error)
                        *ret_error = strprintf("%s: %s", path ? path : "instance-types.json", strerror(-r));
                return r;
        }
        _cleanup_free_ char *why = NULL;
        r = prov_catalog_parse(data, len, ret, &why);
        if (r < 0 && ret_error)
                *ret_error = strprintf("%s: %s", path, why ? why : strerror(-r));
        return r;
}

static int itype_cmp(const void *a, const void *b)
{
        const struct prov_itype *x = a, *y = b;
        int c = strcmp(x->family, y->family);
        if (c)
                return c;
        if (x->vcpu != y->vcpu)
                return x->vcpu < y->vcpu ? -1 : 1;
        if (x->memory_mib != y->memory_mib)
                return x->memory_mib < y->memory_mib ? -1 : 1;
        return strcmp(x->name, y->name);
}

int prov_catalog_format_json(struct prov_catalog *c, char **ret)
{
        cJSON *doc = cJSON_CreateObject(), *list = NULL;
        char *s;

        if (!doc)
                return -ENOMEM;
        if (c->n > 0)
                qsort(c->types, c->n, sizeof(*c->types), itype_cmp);
        if (!cJSON_AddStringToObject(doc, "source", "spotdrain catalog") ||
            !(list = cJSON_AddArrayToObject(doc, "instance_types")))
                goto oom;
        for (size_t i = 0; i < c->n; i++) {
                const struct prov_itype *t = &c->types[i];
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(list, o) || !cJSON_AddStringToObject(o, "name", t->name) ||
                    !cJSON_AddNumberToObject(o, "vcpu", t->vcpu) ||
                    !cJSON_AddNumberToObject(o, "memory_mib", (double)t->memory_mib) ||
                    !cJSON_AddStringToObject(o, "architecture", t->arch) ||
                    (t->max_enis > 0 && !cJSON_AddNumberToObject(o, "max_enis", t->max_enis)) ||
                    (t->ipv4_per_eni > 0 && !cJSON_AddNumberToObject(o, "ipv4_per_eni", t->ipv4_per_eni)) ||
                    !cJSON_AddNumberToObject(o, "max_pods", t->max_pods))
                        goto oom;
        }
        s = cJSON_Print(doc);
        cJSON_Delete(doc);
        if (!s)
                return -ENOMEM;
        *ret = strprintf("%s\n", s);
        cJSON_free(s);
        return *ret ? 0 : -ENOMEM;
oom:
        cJSON_Delete(doc);
        return -ENOMEM;
}

void prov_itype_allocatable(const struct prov_itype *t, int64_t *ret_cpu_millis, int64_t *ret_memory_bytes)
{
        int64_t cores = t->vcpu, reserved = 0;

        /* The EKS AMI's kube-reserved CPU ladder, in millicores. */
        reserved += cores >= 1 ? 60 : 0;
        reserved += cores >= 2 ? 10 : 0;
        reserved += cores >= 3 ? 5 * ((cores >= 4 ? 4 : cores) - 2) : 0;
        reserved += cores > 4 ? (cores - 4) * 5 / 2 : 0;
        *ret_cpu_millis = cores * 1000 - reserved;
        int64_t mem_mib = t->memory_mib - (11 * (int64_t)t->max_pods + 255) - 100;
        *ret_memory_bytes = (mem_mib > 0 ? mem_mib : 0) * 1024 * 1024;
}
