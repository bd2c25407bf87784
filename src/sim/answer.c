/* The simulator's API answers as kube-apiserver words them (Status objects: not found, conflict, invalid),
 * and the checks every resource's write shares (a stale resourceVersion, a labels or annotations patch). On
 * their own so that the resources' files (deployments.c, model_api.c) share them without calling each
 * other. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

int sim_answer_status(struct sim_answer *ret, int code, const char *reason, const char *message,
                      const char *name, const char *kind)
{
        bool ok = code < 300;
        cJSON *body = sim_render_status(code, ok ? "Success" : "Failure", reason, message);
        if (!body)
                return -ENOMEM;
        if (name) {
                cJSON *d = cJSON_AddObjectToObject(body, "details");
                if (!d || !cJSON_AddStringToObject(d, "name", name) ||
                    (kind && !cJSON_AddStringToObject(d, "kind", kind))) {
                        cJSON_Delete(body);
                        return -ENOMEM;
                }
        }
        *ret = (struct sim_answer){ .status = code, .body = body };
        return 0;
}

int sim_answer_not_found(struct sim_answer *ret, const char *resource, const char *name)
{
        _cleanup_free_ char *msg = strprintf("%s \"%s\" not found", resource, name);
        if (!msg)
                return -ENOMEM;
        /* details.kind is the resource (without group), as kube-apiserver fills it */
        _cleanup_free_ char *kind = strndup(resource, strcspn(resource, "."));
        if (!kind)
                return -ENOMEM;
        return sim_answer_status(ret, 404, "NotFound", msg, name, kind);
}

int sim_answer_conflict(struct sim_answer *ret, const char *resource, const char *name)
{
        _cleanup_free_ char *msg =
            strprintf("Operation cannot be fulfilled on %s \"%s\": the object has been "
                      "modified; please apply your changes to the latest version and try again",
                      resource, name);
        _cleanup_free_ char *kind = strndup(resource, strcspn(resource, "."));
        if (!msg || !kind)
                return -ENOMEM;
        return sim_answer_status(ret, 409, "Conflict", msg, name, kind);
}

int sim_answer_invalid(struct sim_answer *ret, const char *kind, const char *name, const char *why)
{
        _cleanup_free_ char *msg = strprintf("%s \"%s\" is invalid: %s", kind, name, why);
        if (!msg)
                return -ENOMEM;
        return sim_answer_status(ret, 422, "Invalid", msg, name, kind);
}

int sim_merge_string_map(cJSON *dst, const cJSON *patch, const char **ret_error)
{
        static const char bad[] = "metadata: labels and annotations must be maps of strings";
        const cJSON *kv;
        if (cJSON_IsNull(patch)) {
                while (dst->child)
                        cJSON_DeleteItemFromObjectCaseSensitive(dst, dst->child->string);
                return 0;
        }
        if (!cJSON_IsObject(patch)) {
                *ret_error = bad;
                return -EINVAL;
        }
        cJSON_ArrayForEach (kv, patch) {
                if (cJSON_IsNull(kv)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(dst, kv->string);
                        continue;
                }
                if (!cJSON_IsString(kv)) {
                        *ret_error = bad;
                        return -EINVAL;
                }
                cJSON *v = cJSON_CreateString(kv->valuestring);
                if (!v)
                        return -ENOMEM;
                if (cJSON_GetObjectItemCaseSensitive(dst, kv->string))
                        cJSON_ReplaceItemInObjectCaseSensitive(dst, kv->string, v);
                else if (!cJSON_AddItemToObject(dst, kv->string, v)) {
                        cJSON_Delete(v);
                        return -ENOMEM;
                }
        }
        return 0;
}

bool sim_rv_stale(const char *rv, uint64_t current)
{
        if (isempty(rv))
                return false;
        char buf[32];
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)current);
        return !streq(rv, buf);
}
