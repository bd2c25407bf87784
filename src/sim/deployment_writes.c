/* Deployments as clients change them: the scale subresource, PATCH and PUT of a Deployment (deployments.c
 * has the controller that carries the change out).
 *
 * Only spec.replicas, metadata.annotations and spec.template.metadata.annotations can be changed; a patch of
 * anything else is refused with 422 rather than silently dropped. A change of the template's annotations
 * (kubectl rollout restart) is a new template: a new ReplicaSet and a rolling update. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

struct deploy_edit {
        int replicas;
        cJSON *annotations, *tmpl_annotations;
        const char *rv; /* metadata.resourceVersion precondition, borrowed from the request */
        const char *error;
};

static void deploy_edit_done(struct deploy_edit *e)
{
        cJSON_Delete(e->annotations);
        cJSON_Delete(e->tmpl_annotations);
}

static int deploy_edit_begin(const struct sim_workload *w, struct deploy_edit *e)
{
        *e = (struct deploy_edit){ .replicas = w->replicas };
        if (!(e->annotations = cJSON_Duplicate(w->annotations, true)) ||
            !(e->tmpl_annotations = cJSON_Duplicate(w->tmpl_annotations, true)))
                return -ENOMEM;
        return 0;
}

static int set_replicas(const cJSON *v, struct deploy_edit *e)
{
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble) {
                e->error = "spec.replicas: Invalid value: must be an integer";
                return -EINVAL;
        }
        if (v->valuedouble < 0 || v->valuedouble > 100000) {
                e->error = v->valuedouble < 0
                               ? "spec.replicas: Invalid value: must be greater than or equal to 0"
                               : "spec.replicas: Invalid value: the simulator runs at most 100000";
                return -EINVAL;
        }
        e->replicas = (int)v->valuedouble;
        return 0;
}

static int merge_annotations(cJSON *dst, const cJSON *patch, struct deploy_edit *e)
{
        return sim_merge_string_map(dst, patch, &e->error);
}

static const cJSON *item(const cJSON *o, const char *key)
{
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* The fields of a Deployment (or a Scale) a merge or strategic merge patch sets. */
static int merge_patch(const cJSON *patch, bool scale, struct deploy_edit *e)
{
        const cJSON *md = item(patch, "metadata"), *spec = item(patch, "spec"), *v;
        int r;
        if (!cJSON_IsObject(patch)) {
                e->error = "the patch must be a JSON object";
                return -EINVAL;
        }
        e->rv = cJSON_GetStringValue(item(md, "resourceVersion"));
        if ((v = item(spec, "replicas")) && (r = set_replicas(v, e)) < 0)
                return r;
        if (scale)
                return 0;
        if ((v = item(md, "annotations")) && (r = merge_annotations(e->annotations, v, e)) < 0)
                return r;
        v = item(item(item(spec, "template"), "metadata"), "annotations");
        if (v && (r = merge_annotations(e->tmpl_annotations, v, e)) < 0)
                return r;
        /* Everything else the simulator does not model: refused, not dropped. */
        const cJSON *k;
        cJSON_ArrayForEach (k, spec)
                if (!streq(k->string, "replicas") && !streq(k->string, "template") && k->string[0] != '$') {
                        e->error = "the simulator changes only spec.replicas and the annotations of a "
                                   "Deployment and of its template";
                        return -EINVAL;
                }
        return 0;
}

/* A JSON pointer's last token, unescaped (~1 is '/', ~0 is '~'), when path is prefix + "/" + token. */
static char *pointer_key(const char *path, const char *prefix)
{
        size_t n = strlen(prefix);
        if (strncmp(path, prefix, n) != 0 || path[n] != '/' || !path[n + 1] || strchr(path + n + 1, '/'))
                return NULL;
        char *out = malloc(strlen(path + n + 1) + 1), *o = out;
        if (!out)
                return NULL;
        for (const char *c = path + n + 1; *c; c++) {
                if (c[0] == '~' && (c[1] == '0' || c[1] == '1')) {
                        *o++ = c[1] == '0' ? '~' : '/';
                        c++;
                } else
                        *o++ = *c;
        }
        *o = 0;
        return out;
}

static int json_patch_one(const cJSON *op, bool scale, struct deploy_edit *e)
{
        const char *verb = cJSON_GetStringValue(item(op, "op")),
                   *path = cJSON_GetStringValue(item(op, "path"));
        const cJSON *value = item(op, "value");
        bool rm = streq_ptr(verb, "remove");
        if (!verb || !path || (!rm && !streq(verb, "add") && !streq(verb, "replace"))) {
                e->error = "the simulator applies add, replace and remove operations with a path";
                return -EINVAL;
        }
        if (streq(path, "/spec/replicas")) {
                if (rm) {
                        e->error = "spec.replicas: Required value";
                        return -EINVAL;
                }
                return set_replicas(value, e);
        }
        static const char *const maps[] = { "/metadata/annotations", "/spec/template/metadata/annotations" };
        for (size_t i = 0; !scale && i < ARRAY_SIZE(maps); i++) {
                cJSON *dst = i == 0 ? e->annotations : e->tmpl_annotations;
                if (streq(path, maps[i])) {
                        if (!rm && !cJSON_IsObject(value)) {
                                e->error = "metadata.annotations: Invalid value: must be a map of strings";
                                return -EINVAL;
                        }
                        while (dst->child)
                                cJSON_DeleteItemFromObjectCaseSensitive(dst, dst->child->string);
                        return rm ? 0 : merge_annotations(dst, value, e);
                }
                _cleanup_free_ char *key = pointer_key(path, maps[i]);
                if (!key)
                        continue;
                cJSON_DeleteItemFromObjectCaseSensitive(dst, key);
                if (rm)
                        return 0;
                if (!cJSON_IsString(value)) {
                        e->error = "metadata.annotations: Invalid value: must be a string";
                        return -EINVAL;
                }
                return cJSON_AddStringToObject(dst, key, value->valuestring) ? 0 : -ENOMEM;
        }
        e->error = scale ? "the simulator patches only /spec/replicas of a Scale"
                         : "the simulator patches only /spec/replicas and the annotations of a Deployment "
                           "and of its template";
        return -EINVAL;
}

static int json_patch(const cJSON *patch, bool scale, struct deploy_edit *e)
{
        const cJSON *op;
        int r;
        if (!cJSON_IsArray(patch)) {
                e->error = "a JSON patch is an array of operations";
                return -EINVAL;
        }
        cJSON_ArrayForEach (op, patch)
                if ((r = json_patch_one(op, scale, e)) < 0)
                        return r;
        return 0;
}

/* A new template: the current ReplicaSet becomes an old one, a new one takes over. */
static int new_revision(struct sim *s, struct sim_workload *w)
{
        struct sim_old_rs *o = realloc(w->old_rs, (w->n_old_rs + 1) * sizeof(*o));
        char hash[11];
        if (!o)
                return -ENOMEM;
        w->old_rs = o;
        do {
                sim_rand_suffix(s, hash);
                sim_rand_suffix(s, hash + 5);
        } while (streq(hash, w->hash));
        _cleanup_free_ char *name = strprintf("%s-%s", w->sc->name, hash), *uid = sim_new_uid(s),
                            *h = strdup(hash);
        if (!name || !uid || !h)
                return -ENOMEM;
        cJSON *label = cJSON_CreateString(hash);
        if (!label || !cJSON_ReplaceItemInObjectCaseSensitive(w->tmpl_labels, "pod-template-hash", label)) {
                cJSON_Delete(label);
                return -ENOMEM;
        }
        w->old_rs[w->n_old_rs++] =
            (struct sim_old_rs){ .hash = w->hash, .name = w->rs_name, .uid = w->rs_uid };
        w->hash = TAKE_PTR(h);
        w->rs_name = TAKE_PTR(name);
        w->rs_uid = TAKE_PTR(uid);
        return sim_emit(s, SIM_REPLICASET, "ADDED", w);
}

static int deploy_edit_commit(struct sim *s, struct sim_workload *w, struct deploy_edit *e, bool scale,
                              struct sim_answer *ret)
{
        bool replicas = e->replicas != w->replicas;
        bool tmpl = !cJSON_Compare(e->tmpl_annotations, w->tmpl_annotations, true);
        bool ann = !cJSON_Compare(e->annotations, w->annotations, true);
        int r;
        if (replicas || tmpl || ann) {
                if (replicas || tmpl)
                        w->generation++;
                w->replicas = e->replicas;
                cJSON *t = w->annotations;
                w->annotations = e->annotations;
                e->annotations = t;
                t = w->tmpl_annotations;
                w->tmpl_annotations = e->tmpl_annotations;
                e->tmpl_annotations = t;
                if (tmpl && (r = new_revision(s, w)) < 0)
                        return r;
                w->dirty = true;
                s->dirty = true;
                if ((r = sim_emit(s, SIM_DEPLOYMENT, "MODIFIED", w)) < 0 ||
                    (replicas && !tmpl && (r = sim_emit(s, SIM_REPLICASET, "MODIFIED", w)) < 0))
                        return r;
                /* The controllers act on it at once, not at the next request. */
                sim_settle(s);
        }
        ret->status = 200;
        ret->body = scale ? sim_render_scale(s, w) : sim_render_workload(s, w, SIM_DEPLOYMENT);
        return ret->body ? 0 : -ENOMEM;
}

static int deploy_write(struct sim *s, const char *ns, const char *name, const char *content_type,
                        const cJSON *body, bool scale, bool replace, struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_workload *w = sim_find_deployment(s, ns, name);
        if (!w)
                return sim_answer_not_found(ret, "deployments.apps", name);
        _cleanup_(deploy_edit_done) struct deploy_edit e;
        int r = deploy_edit_begin(w, &e);
        if (r < 0)
                return r;
        const char *kind = scale ? "Scale" : "Deployment";
        if (replace) {
                const cJSON *md = item(body, "metadata");
                const char *bname = cJSON_GetStringValue(item(md, "name"));
                if (!cJSON_IsObject(body))
                        return sim_answer_invalid(ret, kind, name, "the body must be a JSON object");
                if (bname && !streq(bname, name))
                        return sim_answer_status(ret, 400, "BadRequest",
                                                 "the name of the object does not match the name on the URL",
                                                 NULL, NULL);
                if (!item(item(body, "spec"), "replicas") && scale)
                        e.replicas = 0; /* a Scale without spec.replicas asks for none */
                if (!scale) {
                        /* PUT replaces: annotations the body lacks are gone. */
                        cJSON_Delete(e.annotations);
                        cJSON_Delete(e.tmpl_annotations);
                        if (!(e.annotations = cJSON_CreateObject()) ||
                            !(e.tmpl_annotations = cJSON_CreateObject()))
                                return -ENOMEM;
                }
                r = merge_patch(body, scale, &e);
                if (r >= 0 && !scale) {
                        /* The revision annotation is the controller's, not the client's. */
                        cJSON_DeleteItemFromObjectCaseSensitive(e.annotations,
                                                                "deployment.kubernetes.io/revision");
                }
        } else if (content_type && strstr(content_type, "json-patch"))
                r = json_patch(body, scale, &e);
        else
                r = merge_patch(body, scale, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return sim_answer_invalid(ret, kind, name, e.error ?: "malformed request");
        cJSON_DeleteItemFromObjectCaseSensitive(e.annotations, "deployment.kubernetes.io/revision");
        if (sim_rv_stale(e.rv, w->rv))
                return sim_answer_conflict(ret, "deployments.apps", name);
        return deploy_edit_commit(s, w, &e, scale, ret);
}

int sim_deployment_patch(struct sim *s, const char *ns, const char *name, const char *content_type,
                         const cJSON *patch, struct sim_answer *ret)
{
        return deploy_write(s, ns, name, content_type, patch, false, false, ret);
}

int sim_deployment_replace(struct sim *s, const char *ns, const char *name, const cJSON *obj,
                           struct sim_answer *ret)
{
        return deploy_write(s, ns, name, NULL, obj, false, true, ret);
}

int sim_scale_get(struct sim *s, const char *ns, const char *name, struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_workload *w = sim_find_deployment(s, ns, name);
        if (!w)
                return sim_answer_not_found(ret, "deployments.apps", name);
        ret->status = 200;
        ret->body = sim_render_scale(s, w);
        return ret->body ? 0 : -ENOMEM;
}

int sim_scale_write(struct sim *s, const char *ns, const char *name, const char *content_type,
                    const cJSON *body, struct sim_answer *ret)
{
        return deploy_write(s, ns, name, content_type, body, true, !content_type, ret);
}
