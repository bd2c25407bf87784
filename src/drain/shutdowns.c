/* The times a drain goes by: startup estimates measured from sibling pods (drain_startups_measure), and the
 * memory of shutdowns and startups observed per owner (struct drain_shutdowns: medians of recent samples,
 * kept across restarts as JSON and merged between processes); with the owner key they are filed under. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/inputs_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"

#define USEC_PER_SEC UINT64_C(1000000)

/* Grows *array (of elem bytes, holding n) so that index n fits. Arrays only ever grow one element at a time
 * through here, so the capacity is the power of two above n: doubled when n reaches it. (One realloc per
 * element made every plan quadratic in the pods of all the drains planned together.) */
int drain_grow(void **array, size_t n, size_t elem)
{
        if (n > 0 && (n & (n - 1)) != 0)
                return 0;
        size_t cap = n ? 2 * n : 1;
        if (cap > SIZE_MAX / elem)
                return -ENOMEM;
        void *p = realloc(*array, cap * elem);
        if (!p)
                return -ENOMEM;
        *array = p;
        return 0;
}

char *drain_owner_key(const struct kube_pod *p)
{
        if (!p->owner_kind || !p->owner_name)
                return NULL;
        /* A Deployment's ReplicaSet is named after it and its pod template's hash: a rollout makes a new
         * one, whose pods stop and start as the old ones did. The Deployment is the owner that lasts. */
        const char *hash = kube_kv_get(p->labels, p->n_labels, "pod-template-hash");
        size_t n = strlen(p->owner_name), h = hash ? strlen(hash) : 0;
        if (streq(p->owner_kind, "ReplicaSet") && h > 0 && n > h + 1 && p->owner_name[n - h - 1] == '-' &&
            streq(p->owner_name + n - h, hash))
                return strprintf("%s/Deployment/%.*s", p->namespace ? p->namespace : "", (int)(n - h - 1),
                                 p->owner_name);
        return strprintf("%s/%s/%s", p->namespace ? p->namespace : "", p->owner_kind, p->owner_name);
}

/* Labels that differ between siblings, so a selector on them would find only the pod itself. */
static bool label_is_per_pod(const char *key)
{
        static const char *const keys[] = {
                "statefulset.kubernetes.io/pod-name",
                "apps.kubernetes.io/pod-index",
                "batch.kubernetes.io/job-completion-index",
        };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (streq(key, keys[i]))
                        return true;
        return false;
}

char *drain_sibling_selector(const struct kube_pod *p)
{
        _cleanup_(buf_free) struct buf b = { 0 };
        for (size_t i = 0; i < p->n_labels; i++) {
                if (label_is_per_pod(p->labels[i].key))
                        continue;
                if (buf_printf(&b, "%s%s=%s", b.len ? "," : "", p->labels[i].key,
                               p->labels[i].value ? p->labels[i].value : "") < 0)
                        return NULL;
        }
        if (b.len == 0)
                return NULL;
        return TAKE_PTR(b.data);
}

static int sample_cmp(const void *a, const void *b)
{
        const struct sample *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c != 0)
                return c;
        return x->usec < y->usec ? -1 : x->usec > y->usec;
}

void drain_startups_free(struct drain_startup *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free((char *)s[i].owner_key);
        free(s);
}

struct samples {
        struct sample *s;
        size_t n;
};

static void samples_done(struct samples *ss)
{
        for (size_t i = 0; i < ss->n; i++)
                free(ss->s[i].key);
        free(ss->s);
}

struct startups {
        struct drain_startup *s;
        size_t n;
};

static void startups_done(struct startups *st)
{
        drain_startups_free(st->s, st->n);
}

int drain_startups_measure(const cJSON *items, struct drain_startup **ret, size_t *ret_n)
{
        _cleanup_(samples_done) struct samples ss = { 0 };
        _cleanup_(startups_done) struct startups out = { 0 };
        const cJSON *obj;

        cJSON_ArrayForEach (obj, items) {
                _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
                if (kube_pod_parse(obj, &p) < 0)
                        continue;
                if (!p.ready || !p.creation_usec || p.ready_transition_usec <= p.creation_usec)
                        continue;
                _cleanup_free_ char *key = drain_owner_key(&p);
                if (!key && p.owner_kind)
                        return -ENOMEM;
                if (!key) /* a bare pod: nothing else starts like it */
                        continue;
                if (drain_grow((void **)&ss.s, ss.n, sizeof(*ss.s)) < 0)
                        return -ENOMEM;
                ss.s[ss.n++] = (struct sample){ .key = TAKE_PTR(key),
                                                .usec = p.ready_transition_usec - p.creation_usec };
        }
        if (ss.n > 0)
                qsort(ss.s, ss.n, sizeof(*ss.s), sample_cmp);
        for (size_t i = 0, j; i < ss.n; i = j) {
                for (j = i; j < ss.n && streq(ss.s[j].key, ss.s[i].key); j++)
                        ;
                if (drain_grow((void **)&out.s, out.n, sizeof(*out.s)) < 0)
                        return -ENOMEM;
                /* Median of [i, j): the lower middle for an even count, an observed value. */
                out.s[out.n++] = (struct drain_startup){ .owner_key = TAKE_PTR(ss.s[i].key),
                                                         .startup_usec = ss.s[i + (j - i - 1) / 2].usec };
        }
        *ret = TAKE_PTR(out.s);
        *ret_n = out.n;
        out.n = 0;
        return 0;
}

/* ---- observed shutdowns ---- */

/* The latest stops kept per owner: enough for a median, bounded however long the process runs. */
#define SHUTDOWN_SAMPLES 16

/* Pods whose stop or start was counted, the latest of them: a pod seen by the learner and by a drain (or
 * twice by one) counts once. */
#define SEEN_PODS 256

/* One kind of sample of one owner: the latest SHUTDOWN_SAMPLES, a ring once full. A sample is known by its
 * value, when it was seen (whole seconds of the engine clock) and its pod (a hash of the UID; 0 unknown):
 * what two processes merge is the union of their samples, each counted once however often it goes back
 * and forth through the ConfigMap, and two pods that stopped alike in one second count twice. */
struct kept_samples {
        uint64_t usec[SHUTDOWN_SAMPLES];
        uint32_t at[SHUTDOWN_SAMPLES];
        uint32_t pod[SHUTDOWN_SAMPLES];
        size_t n, next; /* samples held; where the next one goes */
        unsigned seen;  /* ever, also beyond the samples held */
};

struct shutdown_owner {
        char *owner_key;
        struct kept_samples stops, startups;
        uint64_t updated_usec; /* the latest sample's time (engine clock); 0 unknown */
        bool local;            /* a sample was seen by this process, not only read */
};

struct drain_shutdowns {
        struct shutdown_owner *owners;
        size_t n_owners;
        /* Indexes of owners in the order of their keys: every pod of every plan looks its owner up, and a
         * cluster has hundreds of owners with long common prefixes. */
        size_t *by_key;
        unsigned generation;
        unsigned changes;
        char *seen[SEEN_PODS];
        size_t next_seen;
};

int drain_shutdowns_new(struct drain_shutdowns **ret)
{
        struct drain_shutdowns *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

struct drain_shutdowns *drain_shutdowns_free(struct drain_shutdowns *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_owners; i++)
                free(s->owners[i].owner_key);
        free(s->owners);
        free(s->by_key);
        for (size_t i = 0; i < SEEN_PODS; i++)
                free(s->seen[i]);
        free(s);
        return NULL;
}

size_t drain_bisect(size_t n, const char *key, const char *(*key_at)(const void *userdata, size_t i),
                    const void *userdata, bool *found)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(key_at(userdata, mid), key);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static const char *owner_key_at(const void *userdata, size_t i)
{
        const struct drain_shutdowns *s = userdata;
        return s->owners[s->by_key[i]].owner_key;
}

/* Where key is in by_key (*found), or would go. */
static size_t shutdown_owner_position(const struct drain_shutdowns *s, const char *key, bool *found)
{
        return drain_bisect(s->n_owners, key, owner_key_at, s, found);
}

static const struct shutdown_owner *shutdown_owner_find(const struct drain_shutdowns *s, const char *key)
{
        bool found;
        if (!s || !key)
                return NULL;
        size_t at = shutdown_owner_position(s, key, &found);
        return found ? &s->owners[s->by_key[at]] : NULL;
}

static struct shutdown_owner *shutdown_owner_get(struct drain_shutdowns *s, const char *owner_key)
{
        bool found;
        size_t at = shutdown_owner_position(s, owner_key, &found);
        if (found)
                return &s->owners[s->by_key[at]];
        _cleanup_free_ char *key = strdup(owner_key);
        if (!key || drain_grow((void **)&s->owners, s->n_owners, sizeof(*s->owners)) < 0 ||
            drain_grow((void **)&s->by_key, s->n_owners, sizeof(*s->by_key)) < 0)
                return NULL;
        memmove(&s->by_key[at + 1], &s->by_key[at], (s->n_owners - at) * sizeof(*s->by_key));
        s->by_key[at] = s->n_owners;
        struct shutdown_owner *o = &s->owners[s->n_owners++];
        *o = (struct shutdown_owner){ .owner_key = TAKE_PTR(key) };
        return o;
}

static void ring_put(struct kept_samples *r, uint64_t usec, uint32_t at, uint32_t pod)
{
        r->usec[r->next] = usec;
        r->at[r->next] = at;
        r->pod[r->next] = pod;
        r->next = (r->next + 1) % SHUTDOWN_SAMPLES;
        if (r->n < SHUTDOWN_SAMPLES)
                r->n++;
}

/* FNV-1a of the pod's UID, never 0 (0: no UID). */
static uint32_t pod_hash(const char *uid)
{
        uint32_t h = 2166136261u;
        if (!uid)
                return 0;
        for (const unsigned char *c = (const unsigned char *)uid; *c; c++)
                h = (h ^ *c) * 16777619u;
        return h ? h : 1;
}

/* One sample seen here into one of the owner's rings. */
static void sample_push(struct drain_shutdowns *s, struct shutdown_owner *o, struct kept_samples *r,
                        uint64_t usec, const char *uid)
{
        s->changes++;
        o->updated_usec = clk_now();
        o->local = true;
        /* Milliseconds, as kept: a sample read back is the same sample. */
        ring_put(r, usec / 1000 * 1000, (uint32_t)(o->updated_usec / USEC_PER_SEC), pod_hash(uid));
        r->seen++;
}

static int observe_stop(struct drain_shutdowns *s, const char *owner_key, const char *uid, uint64_t usec,
                        uint64_t unseen_usec)
{
        uint64_t before = unseen_usec, after = 0;
        if (!s || !owner_key)
                return -EINVAL;
        (void)drain_shutdowns_get(s, owner_key, &before, NULL);
        struct shutdown_owner *o = shutdown_owner_get(s, owner_key);
        if (!o)
                return -ENOMEM;
        sample_push(s, o, &o->stops, usec, uid);
        if (drain_shutdowns_get(s, owner_key, &after, NULL) && after > before)
                s->generation++;
        return 0;
}

int drain_shutdowns_observe(struct drain_shutdowns *s, const char *owner_key, uint64_t usec,
                            uint64_t unseen_usec)
{
        return observe_stop(s, owner_key, NULL, usec, unseen_usec);
}

static int usec_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static uint64_t median_of(const struct kept_samples *r)
{
        uint64_t v[SHUTDOWN_SAMPLES];
        memcpy(v, r->usec, r->n * sizeof(*v));
        qsort(v, r->n, sizeof(*v), usec_cmp);
        /* The lower middle for an even count: a value that was observed. */
        return v[(r->n - 1) / 2];
}

bool drain_shutdowns_get(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median,
                         uint64_t *ret_max)
{
        const struct shutdown_owner *o = shutdown_owner_find(s, owner_key);
        if (!o || o->stops.n == 0)
                return false;
        if (ret_median)
                *ret_median = median_of(&o->stops);
        if (ret_max) {
                uint64_t m = 0;
                for (size_t k = 0; k < o->stops.n; k++)
                        m = o->stops.usec[k] > m ? o->stops.usec[k] : m;
                *ret_max = m;
        }
        return true;
}

unsigned drain_shutdowns_generation(const struct drain_shutdowns *s)
{
        return s ? s->generation : 0;
}

int drain_shutdowns_observe_stop(struct drain_shutdowns *s, const struct kube_pod *kp, const char *owner_key,
                                 uint64_t start, int64_t forced_grace, uint64_t deadline_usec,
                                 double expected_fraction)
{
        uint64_t now = clk_now();
        int64_t grace = kube_pod_stop_grace(kp);
        if (!start)
                start = kp->deleted_usec; /* deleted by someone else */
        /* Not a graceful stop's length: a pod gone with its instance, forced out, or cut short by a
         * shortened grace. */
        if (!start || now <= start || now + USEC_PER_SEC >= deadline_usec ||
            kube_pod_force_deleted(kp, now) || (kp->stopped_usec && kp->stopped_usec < start))
                return 0;
        uint64_t took = now - start;
        if (grace < kp->grace_seconds && took + USEC_PER_SEC >= (uint64_t)grace * USEC_PER_SEC)
                return 0;
        if (forced_grace > 0 && forced_grace < kp->grace_seconds &&
            took + USEC_PER_SEC >= (uint64_t)forced_grace * USEC_PER_SEC)
                return 0;
        uint64_t unseen = (uint64_t)((double)kp->grace_seconds * 1e6 * expected_fraction);
        return drain_shutdowns_observe_pod(s, owner_key, kp->uid, took, unseen);
}

/* Whether the pod (by UID) was counted before; counts it now. NULL: never counted. */
static bool seen_before(struct drain_shutdowns *s, const char *uid, const char *what)
{
        if (!uid)
                return false;
        _cleanup_free_ char *key = strprintf("%s:%s", what, uid);
        for (size_t i = 0; key && i < SEEN_PODS; i++)
                if (s->seen[i] && streq(s->seen[i], key))
                        return true;
        if (key) {
                free(s->seen[s->next_seen]);
                s->seen[s->next_seen] = TAKE_PTR(key);
                s->next_seen = (s->next_seen + 1) % SEEN_PODS;
        }
        return false;
}

int drain_shutdowns_observe_pod(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                uint64_t usec, uint64_t unseen_usec)
{
        if (!s || !owner_key)
                return -EINVAL;
        if (seen_before(s, uid, "stop"))
                return 0;
        return observe_stop(s, owner_key, uid, usec, unseen_usec);
}

int drain_shutdowns_observe_startup(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                    uint64_t usec)
{
        if (!s || !owner_key)
                return -EINVAL;
        if (seen_before(s, uid, "start"))
                return 0;
        struct shutdown_owner *o = shutdown_owner_get(s, owner_key);
        if (!o)
                return -ENOMEM;
        sample_push(s, o, &o->startups, usec, uid);
        return 0;
}

bool drain_shutdowns_startup(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median)
{
        const struct shutdown_owner *o = shutdown_owner_find(s, owner_key);
        if (!o || o->startups.n == 0)
                return false;
        *ret_median = median_of(&o->startups);
        return true;
}

int drain_shutdowns_startups(const struct drain_shutdowns *s, struct drain_startup **ret, size_t *ret_n)
{
        _cleanup_(startups_done) struct startups out = { 0 };
        for (size_t i = 0; s && i < s->n_owners; i++) {
                const struct shutdown_owner *o = &s->owners[i];
                if (o->startups.n == 0)
                        continue;
                char *key = strdup(o->owner_key);
                if (!key || drain_grow((void **)&out.s, out.n, sizeof(*out.s)) < 0) {
                        free(key);
                        return -ENOMEM;
                }
                out.s[out.n++] =
                    (struct drain_startup){ .owner_key = key, .startup_usec = median_of(&o->startups) };
        }
        *ret = TAKE_PTR(out.s);
        *ret_n = out.n;
        out.n = 0;
        return 0;
}

unsigned drain_shutdowns_changes(const struct drain_shutdowns *s)
{
        return s ? s->changes : 0;
}

void drain_shutdowns_forget_foreign(struct drain_shutdowns *s)
{
        if (!s || s->n_owners == 0)
                return;
        /* by_key indexes owners: it keeps its order, renumbered for the owners kept. Without memory for
         * that, nothing is forgotten (the foreign owners only cost their room). */
        _cleanup_free_ size_t *to = malloc(s->n_owners * sizeof(*to));
        size_t kept = 0, n_index = 0;
        if (!to)
                return;
        for (size_t i = 0; i < s->n_owners; i++) {
                if (s->owners[i].local) {
                        to[i] = kept;
                        s->owners[kept++] = s->owners[i];
                } else {
                        to[i] = SIZE_MAX;
                        free(s->owners[i].owner_key);
                }
        }
        for (size_t j = 0; j < s->n_owners; j++)
                if (to[s->by_key[j]] != SIZE_MAX)
                        s->by_key[n_index++] = to[s->by_key[j]];
        s->n_owners = kept;
}

size_t drain_shutdowns_owners(const struct drain_shutdowns *s)
{
        return s ? s->n_owners : 0;
}

/* ---- the estimates as JSON (what is kept across restarts and shared) ---- */

static void json_freep(cJSON **j)
{
        cJSON_Delete(*j);
}

enum ring_field {
        RING_MS,  /* the values, whole milliseconds */
        RING_AT,  /* when each was seen, whole seconds */
        RING_POD, /* the pod's hash */
};

/* One field of a ring's samples, oldest first, so that a reload keeps the ring's order. */
static cJSON *ring_array(const struct kept_samples *r, enum ring_field f)
{
        cJSON *a = cJSON_CreateArray();
        size_t first = r->n < SHUTDOWN_SAMPLES ? 0 : r->next;
        for (size_t k = 0; a && k < r->n; k++) {
                size_t i = (first + k) % SHUTDOWN_SAMPLES;
                cJSON *v = cJSON_CreateNumber(f == RING_AT    ? (double)r->at[i]
                                              : f == RING_POD ? (double)r->pod[i]
                                                              : (double)(r->usec[i] / 1000));
                if (!v || !cJSON_AddItemToArray(a, v)) {
                        cJSON_Delete(v);
                        cJSON_Delete(a);
                        return NULL;
                }
        }
        return a;
}

int drain_shutdowns_to_json(const struct drain_shutdowns *s, cJSON **ret)
{
        _cleanup_(json_freep) cJSON *root = cJSON_CreateObject();
        cJSON *owners = root ? cJSON_AddObjectToObject(root, "owners") : NULL;
        if (!owners || !cJSON_AddNumberToObject(root, "version", 1))
                return -ENOMEM;
        for (size_t i = 0; s && i < s->n_owners; i++) {
                const struct shutdown_owner *o = &s->owners[i];
                char updated[64] = "";
                cJSON *e = cJSON_AddObjectToObject(owners, o->owner_key);
                if (!e || !cJSON_AddItemToObject(e, "stops_ms", ring_array(&o->stops, RING_MS)) ||
                    !cJSON_AddItemToObject(e, "stops_at", ring_array(&o->stops, RING_AT)) ||
                    !cJSON_AddItemToObject(e, "stops_pod", ring_array(&o->stops, RING_POD)) ||
                    !cJSON_AddItemToObject(e, "startups_ms", ring_array(&o->startups, RING_MS)) ||
                    !cJSON_AddItemToObject(e, "startups_at", ring_array(&o->startups, RING_AT)) ||
                    !cJSON_AddItemToObject(e, "startups_pod", ring_array(&o->startups, RING_POD)) ||
                    !cJSON_AddNumberToObject(e, "stops_seen", o->stops.seen) ||
                    !cJSON_AddNumberToObject(e, "startups_seen", o->startups.seen))
                        return -ENOMEM;
                if (o->updated_usec && format_rfc3339(o->updated_usec, updated, sizeof(updated)) >= 0 &&
                    !cJSON_AddStringToObject(e, "updated", updated))
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(root);
        return 0;
}

/* Item k of a parallel array of whole numbers in [0, 2^32): true with it (absent array: fallback). */
static bool parallel_u32(const cJSON *a, size_t k, uint32_t fallback, uint32_t *ret)
{
        const cJSON *t = a ? cJSON_GetArrayItem(a, (int)k) : NULL;
        if (!a) {
                *ret = fallback;
                return true;
        }
        if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 4294967295.0)
                return false;
        *ret = (uint32_t)t->valuedouble;
        return true;
}

/* Up to SHUTDOWN_SAMPLES whole non-negative milliseconds (KIND_ms) with the seconds they were seen (KIND_at;
 * absent, as a document of an earlier spotdrain has them: the entry's updated time) and their pods
 * (KIND_pod; absent: 0) into a ring, the latest kept; -EINVAL for anything else. */
static int load_ring(const cJSON *e, const char *kind, uint32_t updated, struct kept_samples *r)
{
        char key[32];
        const cJSON *v, *times, *pods, *values;
        size_t k = 0;
        snprintf(key, sizeof(key), "%s_ms", kind);
        if (!(values = cJSON_GetObjectItemCaseSensitive(e, key)))
                return 0;
        snprintf(key, sizeof(key), "%s_at", kind);
        times = cJSON_GetObjectItemCaseSensitive(e, key);
        snprintf(key, sizeof(key), "%s_pod", kind);
        pods = cJSON_GetObjectItemCaseSensitive(e, key);
        if (!cJSON_IsArray(values) || (times && !cJSON_IsArray(times)) || (pods && !cJSON_IsArray(pods)))
                return -EINVAL;
        cJSON_ArrayForEach (v, values) {
                uint32_t at, pod;
                if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 ||
                    !parallel_u32(times, k, updated, &at) || !parallel_u32(pods, k, 0, &pod))
                        return -EINVAL;
                ring_put(r, (uint64_t)v->valuedouble * 1000, at, pod);
                k++;
        }
        return 0;
}

static unsigned seen_count(const cJSON *o, const char *key, size_t at_least)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        double d = cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 4e9 ? v->valuedouble : 0;
        return d > (double)at_least ? (unsigned)d : (unsigned)at_least;
}

static bool ring_has(const struct kept_samples *r, uint64_t usec, uint32_t at, uint32_t pod)
{
        for (size_t k = 0; k < r->n; k++)
                if (r->usec[k] == usec && r->at[k] == at && r->pod[k] == pod)
                        return true;
        return false;
}

struct timed {
        uint64_t usec;
        uint32_t at, pod;
};

static int timed_cmp(const void *a, const void *b)
{
        const struct timed *x = a, *y = b;
        return x->at < y->at ? -1 : x->at > y->at;
}

/* The union of the samples held here and those read (in), the latest SHUTDOWN_SAMPLES of it, in the order
 * they were seen. Seen counts: what was read, and the samples only this side had on top (never less than
 * either side's). How many samples came in that were not held here. */
static size_t samples_union(struct kept_samples *have, const struct kept_samples *in, unsigned in_seen)
{
        struct timed all[2 * SHUTDOWN_SAMPLES];
        size_t n = 0, added = 0, only_here = 0;
        for (size_t k = 0; k < have->n; k++) {
                all[n++] = (struct timed){ have->usec[k], have->at[k], have->pod[k] };
                only_here += !ring_has(in, have->usec[k], have->at[k], have->pod[k]);
        }
        for (size_t k = 0; k < in->n; k++)
                if (!ring_has(have, in->usec[k], in->at[k], in->pod[k])) {
                        all[n++] = (struct timed){ in->usec[k], in->at[k], in->pod[k] };
                        added++;
                }
        if (added == 0)
                return 0;
        qsort(all, n, sizeof(*all), timed_cmp);
        unsigned seen = in_seen + (unsigned)only_here;
        if (seen < have->seen)
                seen = have->seen;
        *have = (struct kept_samples){ .seen = seen };
        for (size_t k = n > SHUTDOWN_SAMPLES ? n - SHUTDOWN_SAMPLES : 0; k < n; k++)
                ring_put(have, all[k].usec, all[k].at, all[k].pod);
        return added;
}

int drain_shutdowns_merge_json(struct drain_shutdowns *s, const cJSON *root, size_t *ret_taken)
{
        const cJSON *owners = cJSON_GetObjectItemCaseSensitive(root, "owners"), *e;
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        size_t taken = 0;
        if (!s || !cJSON_IsObject(owners) || !cJSON_IsNumber(version) || version->valuedouble != 1)
                return -EINVAL;
        cJSON_ArrayForEach (e, owners) {
                struct kept_samples stops = { 0 }, startups = { 0 };
                uint64_t updated = 0;
                const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "updated"));
                if (!e->string || !cJSON_IsObject(e) || (u && parse_rfc3339(u, &updated) < 0))
                        continue;
                uint32_t at = (uint32_t)(updated / USEC_PER_SEC);
                if (load_ring(e, "stops", at, &stops) < 0 || load_ring(e, "startups", at, &startups) < 0)
                        continue; /* one bad entry spoils no other */
                if (stops.n == 0 && startups.n == 0)
                        continue;
                uint64_t before = 0, after = 0;
                bool had = drain_shutdowns_get(s, e->string, &before, NULL);
                struct shutdown_owner *o = shutdown_owner_get(s, e->string);
                if (!o)
                        return -ENOMEM;
                size_t added =
                    samples_union(&o->stops, &stops, seen_count(e, "stops_seen", stops.n)) +
                    samples_union(&o->startups, &startups, seen_count(e, "startups_seen", startups.n));
                if (added == 0)
                        continue;
                if (updated > o->updated_usec)
                        o->updated_usec = updated;
                if (drain_shutdowns_get(s, e->string, &after, NULL) && (!had || after > before))
                        s->generation++;
                taken++;
        }
        if (ret_taken)
                *ret_taken = taken;
        return 0;
}
