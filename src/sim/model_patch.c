/* The simulator's API operations: node patch (merge, strategic merge, JSON patch) and replace. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/keys.h"
#include "spotdrain/util.h"

/* ---- nodes: patch and replace ---- */
struct node_edit {
        cJSON *labels, *annotations, *taints;
        bool unschedulable;
        const char *error; /* why the patch is invalid */
        const char *rv;    /* resourceVersion precondition */
};

static void node_edit_done(struct node_edit *e)
{
        cJSON_Delete(e->labels);
        cJSON_Delete(e->annotations);
        cJSON_Delete(e->taints);
}

static int valid_taints(struct sim *s, cJSON *taints, struct node_edit *e)
{
        cJSON *t;
        if (!cJSON_IsArray(taints)) {
                e->error = "spec.taints: must be a list";
                return -EINVAL;
        }
        cJSON_ArrayForEach (t, taints) {
                const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "key"));
                const char *effect = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "effect"));
                if (isempty(key)) {
                        e->error = "spec.taints.key: Required value";
                        return -EINVAL;
                }
                if (!streq(effect, "NoSchedule") && !streq(effect, "PreferNoSchedule") &&
                    !streq(effect, "NoExecute")) {
                        e->error =
                            "spec.taints.effect: Unsupported value: supported values: \"NoSchedule\", "
                            "\"PreferNoSchedule\", \"NoExecute\"";
                        return -EINVAL;
                }
                if (streq(effect, "NoExecute") && !cJSON_GetObjectItemCaseSensitive(t, "timeAdded")) {
                        char buf[32];
                        if (!cJSON_AddStringToObject(t, "timeAdded", sim_timestamp(s, s->t, buf)))
                                return -ENOMEM;
                }
        }
        return 0;
}

static int merge_strings(cJSON *dst, const cJSON *patch, struct node_edit *e)
{
        return sim_merge_string_map(dst, patch, &e->error);
}

static int set_unschedulable(const cJSON *v, struct node_edit *e)
{
        if (cJSON_IsNull(v) || !v)
                e->unschedulable = false;
        else if (cJSON_IsBool(v))
                e->unschedulable = cJSON_IsTrue(v);
        else {
                e->error = "spec.unschedulable: must be a boolean";
                return -EINVAL;
        }
        return 0;
}

static int set_taints(struct sim *s, const cJSON *v, struct node_edit *e)
{
        cJSON_Delete(e->taints);
        e->taints = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        e->taints = cJSON_Duplicate(v, true);
        if (!e->taints)
                return -ENOMEM;
        return valid_taints(s, e->taints, e);
}

static int merge_patch(struct sim *s, const cJSON *patch, struct node_edit *e)
{
        int r;
        if (!cJSON_IsObject(patch)) {
                e->error = "the patch must be a JSON object";
                return -EINVAL;
        }
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(patch, "metadata");
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(patch, "spec");
        e->rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(md, "labels")) && (r = merge_strings(e->labels, v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(md, "annotations")) &&
            (r = merge_strings(e->annotations, v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(spec, "unschedulable")) &&
            (r = set_unschedulable(v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(spec, "taints")) && (r = set_taints(s, v, e)) < 0)
                return r;
        return 0;
}

/* JSON pointer segment, ~1 → / and ~0 → ~. */
static char *pointer_unescape(const char *seg)
{
        char *out = strdup(seg), *w = out;
        if (!out)
                return NULL;
        for (const char *c = seg; *c; c++) {
                if (c[0] == '~' && c[1] == '1') {
                        *w++ = '/';
                        c++;
                } else if (c[0] == '~' && c[1] == '0') {
                        *w++ = '~';
                        c++;
                } else
                        *w++ = *c;
        }
        *w = 0;
        return out;
}

/* Sets o[k] to the string v, in place of any value it had. */
int sim_obj_set_string(cJSON *o, const char *k, const char *v)
{
        cJSON *item = cJSON_CreateString(v);
        if (!item)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(o, k);
        if (!cJSON_AddItemToObject(o, k, item)) {
                cJSON_Delete(item);
                return -ENOMEM;
        }
        return 0;
}

static int json_patch_map(cJSON *map, const char *op, const char *key, const cJSON *value,
                          struct node_edit *e)
{
        _cleanup_free_ char *k = pointer_unescape(key);
        if (!k)
                return -ENOMEM;
        if (streq(op, "remove")) {
                if (!cJSON_GetObjectItemCaseSensitive(map, k)) {
                        e->error = "remove: the key does not exist";
                        return -EINVAL;
                }
                cJSON_DeleteItemFromObjectCaseSensitive(map, k);
                return 0;
        }
        if (!cJSON_IsString(value)) {
                e->error = "metadata: labels and annotations must be strings";
                return -EINVAL;
        }
        return sim_obj_set_string(map, k, value->valuestring);
}

static int json_patch_taint(struct sim *s, const char *op, const char *idx, const cJSON *value,
                            struct node_edit *e)
{
        if (!e->taints && !(e->taints = cJSON_CreateArray()))
                return -ENOMEM;
        int n = cJSON_GetArraySize(e->taints);
        char *end = NULL;
        long i = streq(idx, "-") ? n : strtol(idx, &end, 10);
        if ((end && (*end || end == idx)) || i < 0 || i > n || (!streq(op, "add") && i == n)) {
                e->error = "spec.taints: index out of range";
                return -EINVAL;
        }
        if (streq(op, "remove")) {
                cJSON_DeleteItemFromArray(e->taints, (int)i);
                return 0;
        }
        cJSON *t = cJSON_Duplicate(value, true);
        if (!t)
                return -ENOMEM;
        if (streq(op, "add")) {
                if (i == n ? !cJSON_AddItemToArray(e->taints, t)
                           : !cJSON_InsertItemInArray(e->taints, (int)i, t)) {
                        cJSON_Delete(t);
                        return -ENOMEM;
                }
        } else if (!cJSON_ReplaceItemInArray(e->taints, (int)i, t)) {
                cJSON_Delete(t);
                return -ENOMEM;
        }
        return valid_taints(s, e->taints, e);
}

static int json_patch(struct sim *s, const cJSON *patch, struct node_edit *e)
{
        const cJSON *opj;
        int r;
        if (!cJSON_IsArray(patch)) {
                e->error = "a JSON patch must be a list of operations";
                return -EINVAL;
        }
        cJSON_ArrayForEach (opj, patch) {
                const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(opj, "op"));
                const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(opj, "path"));
                const cJSON *value = cJSON_GetObjectItemCaseSensitive(opj, "value");
                if (!path || !(streq(op, "add") || streq(op, "replace") || streq(op, "remove") ||
                               streq(op, "test"))) {
                        e->error = "unsupported JSON patch operation";
                        return -EINVAL;
                }
                bool rm = streq(op, "remove");
                if (streq(op, "test")) {
                        if (!streq(path, "/metadata/resourceVersion") || !cJSON_IsString(value)) {
                                e->error = "test is supported on /metadata/resourceVersion only";
                                return -EINVAL;
                        }
                        e->rv = value->valuestring;
                        continue;
                }
                if (!rm && !value) {
                        e->error = "missing value";
                        return -EINVAL;
                }
                if (streq(path, "/spec/unschedulable"))
                        r = set_unschedulable(rm ? NULL : value, e);
                else if (streq(path, "/spec/taints"))
                        r = set_taints(s, rm ? NULL : value, e);
                else if (startswith(path, "/spec/taints/"))
                        r = json_patch_taint(s, op, path + strlen("/spec/taints/"), value, e);
                else if (streq(path, "/metadata/labels") || streq(path, "/metadata/annotations")) {
                        cJSON *dst = streq(path, "/metadata/labels") ? e->labels : e->annotations;
                        cJSON *null = NULL;
                        if (rm && !(null = cJSON_CreateNull()))
                                return -ENOMEM;
                        while (!rm && dst->child)
                                cJSON_DeleteItemFromObjectCaseSensitive(dst, dst->child->string);
                        r = merge_strings(dst, rm ? null : value, e);
                        cJSON_Delete(null);
                } else if (startswith(path, "/metadata/labels/"))
                        r = json_patch_map(e->labels, op, path + strlen("/metadata/labels/"), value, e);
                else if (startswith(path, "/metadata/annotations/"))
                        r = json_patch_map(e->annotations, op, path + strlen("/metadata/annotations/"),
                                           value, e);
                else {
                        e->error = "unsupported path";
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int node_edit_begin(const struct sim_node *n, struct node_edit *e)
{
        *e = (struct node_edit){ .unschedulable = n->unschedulable };
        if (!(e->labels = cJSON_Duplicate(n->labels, true)) ||
            !(e->annotations = cJSON_Duplicate(n->annotations, true)) ||
            (n->taints && !(e->taints = cJSON_Duplicate(n->taints, true))))
                return -ENOMEM;
        return 0;
}

/* Applies the edit; a change that changes nothing keeps the resourceVersion, as kube-apiserver does. */
static int node_edit_commit(struct sim *s, struct sim_node *n, struct node_edit *e, struct sim_answer *ret)
{
        if (cJSON_GetArraySize(e->taints) == 0) {
                cJSON_Delete(e->taints);
                e->taints = NULL;
        }
        bool changed = e->unschedulable != n->unschedulable || !cJSON_Compare(e->labels, n->labels, true) ||
                       !cJSON_Compare(e->annotations, n->annotations, true) || (!e->taints != !n->taints) ||
                       (e->taints && !cJSON_Compare(e->taints, n->taints, true));
        if (changed) {
                bool cordon = e->unschedulable && !n->unschedulable;
                bool uncordon = !e->unschedulable && n->unschedulable;
                cJSON_Delete(n->labels);
                cJSON_Delete(n->annotations);
                cJSON_Delete(n->taints);
                n->labels = TAKE_PTR(e->labels);
                n->annotations = TAKE_PTR(e->annotations);
                n->taints = TAKE_PTR(e->taints);
                n->unschedulable = e->unschedulable;
                bool excluded = cJSON_HasObjectItem(n->labels, SPOTDRAIN_LABEL_EXCLUDE_LB);
                if (excluded && n->lb_excluded_at < 0)
                        n->lb_excluded_at = sim_now(s);
                else if (!excluded)
                        n->lb_excluded_at = -1;
                if (cordon)
                        sim_node_cordon_changed(s, n);
                if (uncordon)
                        sim_node_uncordoned(s, n);
                (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
                sim_settle(s);
        }
        return sim_answer_obj(ret, 200, sim_render_node(s, n));
}

int sim_patch(struct sim *s, enum sim_kind kind, const char *ns, const char *name, const char *content_type,
              const cJSON *patch, struct sim_answer *ret)
{
        if (kind == SIM_DEPLOYMENT)
                return sim_deployment_patch(s, ns, name, content_type, patch, ret);
        sim_begin(s);
        if (kind != SIM_NODE) {
                _cleanup_free_ char *msg =
                    strprintf("the simulator does not patch %s", sim_kind_resource(kind));
                if (!msg)
                        return -ENOMEM;
                return sim_answer_status(ret, 405, "MethodNotAllowed", msg, NULL, NULL);
        }
        struct sim_node *n = sim_find_node(s, name);
        if (!n)
                return sim_answer_not_found(ret, "nodes", name);
        _cleanup_(node_edit_done) struct node_edit e;
        int r = node_edit_begin(n, &e);
        if (r < 0)
                return r;
        bool jp = content_type && strstr(content_type, "json-patch");
        r = jp ? json_patch(s, patch, &e) : merge_patch(s, patch, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return sim_answer_invalid(ret, "Node", name, e.error ?: "malformed patch");
        if (sim_rv_stale(e.rv, n->rv))
                return sim_answer_conflict(ret, "nodes", name);
        return node_edit_commit(s, n, &e, ret);
}

int sim_node_replace(struct sim *s, const char *name, const cJSON *obj, struct sim_answer *ret)
{
        struct sim_node *n = sim_find_node(s, name);
        if (!n)
                return sim_answer_not_found(ret, "nodes", name);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        if (sim_md_renames(md, name))
                return sim_rename_refused(ret);
        _cleanup_(node_edit_done) struct node_edit e;
        int r = node_edit_begin(n, &e);
        if (r < 0)
                return r;
        e.rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
        /* PUT replaces: what the body lacks is gone. */
        cJSON_Delete(e.labels);
        cJSON_Delete(e.annotations);
        if (!(e.labels = cJSON_CreateObject()) || !(e.annotations = cJSON_CreateObject()))
                return -ENOMEM;
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
        const cJSON *v;
        if (((v = cJSON_GetObjectItemCaseSensitive(md, "labels")) &&
             (r = merge_strings(e.labels, v, &e)) < 0) ||
            ((v = cJSON_GetObjectItemCaseSensitive(md, "annotations")) &&
             (r = merge_strings(e.annotations, v, &e)) < 0) ||
            (r = set_unschedulable(cJSON_GetObjectItemCaseSensitive(spec, "unschedulable"), &e)) < 0 ||
            (r = set_taints(s, cJSON_GetObjectItemCaseSensitive(spec, "taints"), &e)) < 0) {
                if (r == -ENOMEM)
                        return r;
                return sim_answer_invalid(ret, "Node", name, e.error ?: "invalid object");
        }
        if (sim_rv_stale(e.rv, n->rv))
                return sim_answer_conflict(ret, "nodes", name);
        return node_edit_commit(s, n, &e, ret);
}
