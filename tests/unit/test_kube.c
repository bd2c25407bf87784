/* The Kubernetes API client against a scripted fake API server (kube_fake.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_fake.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

#define WAIT_USEC (10ULL * 1000 * 1000)
#define USEC      (1000ULL * 1000)

struct fx {
        struct loop *loop;
        struct kfake *fake;
        struct kube_config *cfg;
        struct kube_client *client;
        char token_path[64];
};

static void write_token(const char *path, const char *token)
{
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(token, f);
        fclose(f);
}

static int fx_setup_opts(void **state, const struct kube_client_options *opts)
{
        struct fx *fx = calloc(1, sizeof(*fx));
        assert_non_null(fx);
        assert_int_equal(loop_new(&fx->loop), 0);
        assert_int_equal(kfake_start(&fx->fake), 0);
        snprintf(fx->token_path, sizeof(fx->token_path), "/tmp/spotdrain-kube-token-XXXXXX");
        int fd = mkstemp(fx->token_path);
        assert_true(fd >= 0);
        close(fd);
        write_token(fx->token_path, "tok-1");
        fx->cfg = calloc(1, sizeof(*fx->cfg));
        assert_non_null(fx->cfg);
        fx->cfg->server = strdup(kfake_url(fx->fake));
        fx->cfg->token_file = strdup(fx->token_path);
        assert_non_null(fx->cfg->server);
        assert_non_null(fx->cfg->token_file);
        assert_int_equal(kube_client_new(fx->loop, fx->cfg, opts, &fx->client), 0);
        *state = fx;
        return 0;
}

static int fx_setup(void **state)
{
        /* Unlimited rate and quick retries, unless a test says otherwise. */
        struct kube_client_options o = { .qps = -1, .backoff_base_usec = 1000, .backoff_max_usec = 5000 };
        return fx_setup_opts(state, &o);
}

static int fx_teardown(void **state)
{
        struct fx *fx = *state;
        kube_client_free(fx->client);
        kfake_stop(fx->fake);
        kube_config_free(fx->cfg);
        unlink(fx->token_path);
        loop_free(fx->loop);
        free(fx);
        return 0;
}

static cJSON *parse(const char *s)
{
        cJSON *j = cJSON_Parse(s);
        assert_non_null(j);
        return j;
}

static const struct kfake_request *req(struct fx *fx, size_t i)
{
        const struct kfake_request *r = kfake_request(fx->fake, i);
        assert_non_null(r);
        return r;
}

/* A (re)list: the GET of path with a page size answers 200 with body. */
static void add_list(struct fx *fx, const char *path, const char *body)
{
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = path, .query_contains = "limit=", .status = 200, .body = body });
}

/* A watch stream: the GET of path whose query contains query answers 200 in these chunks (NULL-ended). */
static void add_stream(struct fx *fx, const char *path, const char *query, const char *const *chunks)
{
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = path, .query_contains = query, .status = 200, .chunks = chunks });
}

/* ---- list ---- */

static void test_list_pages_and_selectors(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake,
                  &(struct kfake_script){
                      .method = "GET",
                      .path = "/api/v1/pods",
                      .status = 200,
                      .body = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"120\","
                              "\"continue\":\"tok/1+=\"},\"items\":[{\"metadata\":{\"name\":\"p1\"}},"
                              "{\"metadata\":{\"name\":\"p2\"}}]}",
                  });
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET",
                                .path = "/api/v1/pods",
                                .query_contains = "continue=",
                                .status = 200,
                                .body = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"120\"},"
                                        "\"items\":[{\"metadata\":{\"name\":\"p3\"}}]}",
                            });
        struct kube_list_options o = {
                .label_selector = "app=web,tier notin (a,b)",
                .field_selector = "spec.nodeName=node1",
                .limit = 2,
        };
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_list(fx->client, "/api/v1/pods", &o, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);

        cJSON *items = kube_list_items(s.result.object);
        assert_int_equal(cJSON_GetArraySize(items), 3);
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(items, 0), "metadata.name"), "p1");
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(items, 2), "metadata.name"), "p3");
        assert_string_equal(kube_object_rv(s.result.object), "120");

        assert_int_equal(kfake_count(fx->fake), 2);
        assert_string_equal(req(fx, 0)->query, "labelSelector=app%3Dweb%2Ctier%20notin%20%28a%2Cb%29&"
                                               "fieldSelector=spec.nodeName%3Dnode1&limit=2");
        assert_non_null(strstr(req(fx, 1)->query, "&continue=tok%2F1%2B%3D"));
        assert_non_null(strstr(req(fx, 1)->query, "labelSelector=app%3Dweb"));
        kube_result_clear(&s.result);
}

static void test_get_retries_5xx(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 503, "{\"kind\":\"Status\",\"code\":503}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(fx->client, "/api/v1/nodes/n1", kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        assert_string_equal(kube_object_str(s.result.object, "metadata.name"), "n1");
        assert_int_equal(kfake_count(fx->fake), 2);
        kube_result_clear(&s.result);
}

/* ---- watch ---- */

struct watch_log {
        int added, modified, deleted, relisted, errors;
        char last_name[64];
        char relist_rv[32];
        int relist_items;
        int want_events;
        bool done;
};

static void wl_event(void *userdata, enum kube_event_type type, const cJSON *obj)
{
        struct watch_log *wl = userdata;
        if (type == KUBE_EVENT_ADDED)
                wl->added++;
        else if (type == KUBE_EVENT_MODIFIED)
                wl->modified++;
        else
                wl->deleted++;
        const char *n = kube_object_str(obj, "metadata.name");
        snprintf(wl->last_name, sizeof(wl->last_name), "%s", n ? n : "");
        if (wl->added + wl->modified + wl->deleted >= wl->want_events)
                wl->done = true;
}

static void wl_relisted(void *userdata, const cJSON *items, const char *rv)
{
        struct watch_log *wl = userdata;
        wl->relisted++;
        wl->relist_items = cJSON_GetArraySize(items);
        snprintf(wl->relist_rv, sizeof(wl->relist_rv), "%s", rv ? rv : "");
}

static void wl_error(void *userdata, const struct kube_result *r)
{
        struct watch_log *wl = userdata;
        wl->errors++;
}

static const struct kube_watch_ops wl_ops = {
        .event = wl_event,
        .relisted = wl_relisted,
        .error = wl_error,
};

static void expect_events(const struct watch_log *wl, int added, int modified, int deleted, const char *last)
{
        assert_int_equal(wl->added, added);
        assert_int_equal(wl->modified, modified);
        assert_int_equal(wl->deleted, deleted);
        assert_string_equal(wl->last_name, last);
}

static void test_watch_chunks_and_bookmark(void **state)
{
        struct fx *fx = *state;
        /* One event split in the middle of its type, one chunk with an event and a bookmark. */
        const char *const first[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}"
                "\n{\"ty",
                "pe\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",",
                "\"resourceVersion\":\"12\"}}}\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{"
                "\"resourceVersion\":"
                "\"15\"}}}\n",
                NULL,
        };
        const char *const second[] = {
                "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"16\"}}"
                "}\n",
                NULL,
        };
        add_stream(fx, "/api/v1/pods", "resourceVersion=10", first);
        add_stream(fx, "/api/v1/pods", "resourceVersion=15", second);
        struct watch_log wl = { .want_events = 3 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods",
                                        .resource_version = "10",
                                        .timeout_seconds = 60 };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        expect_events(&wl, 1, 1, 1, "b");
        assert_string_equal(kube_watch_rv(w), "16");
        assert_int_equal(wl.relisted, 0);
        kube_watch_stop(w);

        const char *q = req(fx, 0)->query;
        assert_non_null(strstr(q, "watch=true"));
        assert_non_null(strstr(q, "allowWatchBookmarks=true"));
        assert_non_null(strstr(q, "resourceVersion=10"));
        assert_non_null(strstr(q, "timeoutSeconds=60"));
        /* the bookmark moved the resume point */
        assert_non_null(strstr(req(fx, 1)->query, "resourceVersion=15"));
}

/* CRLF lines, trailing spaces, an empty line and an unknown type (ignored), an event split across chunks;
 * the stream's last line comes without its newline, first an event, then the Status of a refused watch. */
static void test_watch_crlf_and_last_line(void **state)
{
        struct fx *fx = *state;
        const char *const first[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}"
                "\r\n  "
                "\r\n{\"type\":\"PATCHED\",\"object\":{\"metadata\":{\"name\":\"x\",\"resourceVersion\":"
                "\"99\"}}}\n{\"type\":\"MODIFIED\",\"object\":{\"metadata\":",
                "{\"name\":\"a\",\"resourceVersion\":\"12\"}}}  \r\n{\"type\":\"DELETED\",\"object\":{"
                "\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"13\"}}}",
                NULL,
        };
        const char *const refused[] = { "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}", NULL };
        const char *const after[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"21\"}}}"
                "\r\n",
                NULL,
        };
        add_stream(fx, "/api/v1/pods", "resourceVersion=10&", first);
        add_stream(fx, "/api/v1/pods", "resourceVersion=13&", refused);
        add_list(fx, "/api/v1/pods", "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[]}");
        add_stream(fx, "/api/v1/pods", "resourceVersion=20&", after);
        struct watch_log wl = { .want_events = 3 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods", .resource_version = "10" };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        expect_events(&wl, 1, 1, 1, "b");
        assert_string_equal(kube_watch_rv(w), "13");
        assert_int_equal(wl.relisted, 0);
        /* The next stream is refused with 410: a relist at once, not an error. */
        wl.done = false;
        wl.want_events = 4;
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        assert_int_equal(wl.relisted, 1);
        assert_int_equal(wl.errors, 0);
        assert_string_equal(wl.last_name, "c");
        assert_string_equal(kube_watch_rv(w), "21");
        kube_watch_stop(w);
}

static void test_watch_gone_relists(void **state)
{
        struct fx *fx = *state;
        const char *const gone[] = {
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                "\"Failure\","
                "\"message\":\"too old resource version: 5 (100)\",\"reason\":\"Expired\",\"code\":410}}\n",
                NULL,
        };
        const char *const after[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"y\",\"resourceVersion\":\"101\"}}}"
                "\n",
                NULL,
        };
        add_stream(fx, "/api/v1/pods", "watch=true&allowWatchBookmarks=true&resourceVersion=5&", gone);
        kfake_add(fx->fake,
                  &(struct kfake_script){
                      .method = "GET",
                      .path = "/api/v1/pods",
                      .query_contains = "labelSelector=app%3Dweb&limit=",
                      .status = 200,
                      .body = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\"},"
                              "\"items\":[{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"90\"}}]}",
                  });
        add_stream(fx, "/api/v1/pods", "resourceVersion=100", after);
        struct watch_log wl = { .want_events = 1 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods",
                                        .label_selector = "app=web",
                                        .resource_version = "5" };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        assert_int_equal(wl.relisted, 1);
        assert_int_equal(wl.relist_items, 1);
        assert_string_equal(wl.relist_rv, "100");
        assert_string_equal(wl.last_name, "y");
        assert_int_equal(kube_watch_relists(w), 1);
        assert_int_equal(wl.errors, 0);
        kube_watch_stop(w);
        /* watch, list, watch again with the selector kept */
        assert_non_null(strstr(req(fx, 2)->query, "labelSelector=app%3Dweb"));
        assert_non_null(strstr(req(fx, 2)->query, "watch=true"));
}

static void ignore_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        *(int *)userdata = r->error;
}

static int fx_setup_idle(void **state)
{
        /* A request's idle limit of 300 ms, so that a stall is seen at once. */
        struct kube_client_options o = { .qps = -1,
                                         .backoff_base_usec = 1000,
                                         .backoff_max_usec = 5000,
                                         .idle_timeout_usec = 300 * 1000 };
        return fx_setup_opts(state, &o);
}

/* A patient watch's stream may be silent for the minute between bookmarks while its resource is quiet; a
 * request that gets no answer at all within its idle limit says the connection may have stopped passing
 * bytes: the watch resumes from its resourceVersion then, not a minute later. */
static void test_watch_resumes_after_stall(void **state)
{
        struct fx *fx = *state;
        const char *const quiet[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}"
                "\n",
                NULL,
        };
        const char *const after[] = {
                "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"12\"}}"
                "}\n",
                NULL,
        };
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/pods",
                                                    .query_contains = "resourceVersion=10",
                                                    .status = 200,
                                                    .chunks = quiet,
                                                    .hold_open = true });
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/pods",
                                                    .query_contains = "resourceVersion=11",
                                                    .status = 200,
                                                    .chunks = after,
                                                    .hold_open = true });
        kfake_add(fx->fake,
                  &(struct kfake_script){
                      .method = "GET", .path = "/api/v1/nodes/n1", .hold_open = true, .sticky = true });

        struct watch_log wl = { .want_events = 1 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods", .resource_version = "10", .patient = true };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        expect_events(&wl, 1, 0, 0, "a");

        /* The stream stays open and silent; a GET gets no answer. */
        int got = 1;
        wl.done = false;
        wl.want_events = 2;
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n1", ignore_done, &got, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        expect_events(&wl, 1, 0, 1, "a");
        assert_int_equal(wl.relisted, 0);
        long second = kfake_find(fx->fake, "GET", "/api/v1/pods", 1);
        assert_true(second > 0);
        assert_non_null(strstr(req(fx, (size_t)second)->query, "resourceVersion=11"));
        kube_watch_stop(w);
}

/* Its owner resumes a silent patient watch (kube_watch_resume): a new stream at once, from the last
 * resourceVersion; the time of the last byte heard moves with it. */
static void test_watch_resume_by_owner(void **state)
{
        struct fx *fx = *state;
        const char *const quiet[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"21\"}}}"
                "\n",
                NULL,
        };
        const char *const after[] = {
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"22\"}"
                "}}\n",
                NULL,
        };
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/pods",
                                                    .query_contains = "resourceVersion=20",
                                                    .status = 200,
                                                    .chunks = quiet,
                                                    .hold_open = true });
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/pods",
                                                    .query_contains = "resourceVersion=21",
                                                    .status = 200,
                                                    .chunks = after,
                                                    .hold_open = true });
        struct watch_log wl = { .want_events = 1 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods", .resource_version = "20", .patient = true };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        uint64_t heard = kube_watch_heard_at(w);
        assert_true(heard > 0);

        wl.done = false;
        wl.want_events = 2;
        kube_watch_resume(w);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        expect_events(&wl, 1, 1, 0, "a");
        assert_int_equal(wl.relisted, 0);
        assert_int_equal(wl.errors, 0);
        assert_true(kube_watch_heard_at(w) > heard);
        long second = kfake_find(fx->fake, "GET", "/api/v1/pods", 1);
        assert_true(second > 0);
        assert_non_null(strstr(req(fx, (size_t)second)->query, "resourceVersion=21"));
        kube_watch_stop(w);
}

/* A resumed watch that gets at once the events its old stream never passed on says that stream's connection
 * had stopped: the client's other watch streams, patient ones too, resume then, rather than each at its own
 * idle limit (a minute for a patient watch). A resumed watch whose first line is a bookmark (nothing was
 * missed: a kubelet late, not a dead connection) leaves the others alone. */
static void answered_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        *(bool *)userdata = true;
}

static void owner_resume(struct fx *fx, bool missed)
{
        const char *const pods_first[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
                "\"21\"}}}\n",
                NULL,
        };
        const char *const pods_missed[] = {
                "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
                "\"23\"}}}\n",
                NULL,
        };
        const char *const pods_nothing[] = {
                "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"23\"}}}\n",
                NULL,
        };
        const char *const pdbs_first[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":"
                "\"22\"}}}\n",
                NULL,
        };
        const char *const pdbs_missed[] = {
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\","
                "\"resourceVersion\":"
                "\"24\"}}}\n",
                NULL,
        };
        const struct kfake_script streams[] = {
                { .path = "/api/v1/pods", .query_contains = "resourceVersion=20", .chunks = pods_first },
                { .path = "/api/v1/pods",
                  .query_contains = "resourceVersion=21",
                  .chunks = missed ? pods_missed : pods_nothing },
                { .path = "/apis/policy/v1/poddisruptionbudgets",
                  .query_contains = "resourceVersion=20",
                  .chunks = pdbs_first },
                { .path = "/apis/policy/v1/poddisruptionbudgets",
                  .query_contains = "resourceVersion=22",
                  .chunks = pdbs_missed },
        };
        for (size_t i = 0; i < sizeof(streams) / sizeof(*streams); i++) {
                struct kfake_script sc = streams[i];
                sc.method = "GET";
                sc.status = 200;
                sc.hold_open = true;
                kfake_add(fx->fake, &sc);
        }
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/n1",
                                                    .status = 200,
                                                    .body = "{\"metadata\":{\"name\":\"n1\"}}" });
        struct watch_log pods = { .want_events = 1 }, pdbs = { .want_events = 1 };
        struct kube_watch *wp = NULL, *wb = NULL;
        struct kube_watch_options op = { .path = "/api/v1/pods", .resource_version = "20", .patient = true };
        struct kube_watch_options ob = { .path = "/apis/policy/v1/poddisruptionbudgets",
                                         .resource_version = "20",
                                         .patient = true };
        assert_int_equal(kube_watch_start(fx->client, &op, &wl_ops, &pods, &wp), 0);
        assert_int_equal(kube_watch_start(fx->client, &ob, &wl_ops, &pdbs, &wb), 0);
        assert_int_equal(loop_run_until(fx->loop, &pods.done, WAIT_USEC), 0);
        assert_int_equal(loop_run_until(fx->loop, &pdbs.done, WAIT_USEC), 0);

        pods.done = pdbs.done = false;
        pods.want_events = pdbs.want_events = 2;
        kube_watch_resume(wp);
        if (missed) {
                /* The PDBs' watch resumes from its resourceVersion and gets its own missed event. */
                assert_int_equal(loop_run_until(fx->loop, &pods.done, WAIT_USEC), 0);
                assert_int_equal(loop_run_until(fx->loop, &pdbs.done, WAIT_USEC), 0);
                expect_events(&pdbs, 1, 1, 0, "b");
                long first = kfake_find(fx->fake, "GET", "/apis/policy/v1/poddisruptionbudgets", 0);
                assert_true(first >= 0);
                long second =
                    kfake_find(fx->fake, "GET", "/apis/policy/v1/poddisruptionbudgets", (size_t)first + 1);
                assert_true(second > first);
                assert_non_null(strstr(req(fx, (size_t)second)->query, "resourceVersion=22"));
        } else {
                /* The bookmark came (its resourceVersion is the watch's); then a GET is answered, after
                 * the turn a resume would have taken: the PDBs' watch kept its stream. */
                for (int i = 0; i < 1000 && !streq_ptr(kube_watch_rv(wp), "23"); i++)
                        loop_run_until(fx->loop, &pods.done, 10 * 1000);
                assert_string_equal(kube_watch_rv(wp), "23");
                bool answered = false;
                assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n1", answered_done, &answered, NULL),
                                 0);
                assert_int_equal(loop_run_until(fx->loop, &answered, WAIT_USEC), 0);
                long first = kfake_find(fx->fake, "GET", "/apis/policy/v1/poddisruptionbudgets", 0);
                assert_true(first >= 0);
                assert_int_equal(
                    kfake_find(fx->fake, "GET", "/apis/policy/v1/poddisruptionbudgets", (size_t)first + 1),
                    -1);
                expect_events(&pdbs, 1, 0, 0, "b");
        }
        kube_watch_stop(wp);
        kube_watch_stop(wb);
}

static void test_owner_resume_finds_stall(void **state)
{
        owner_resume(*state, true);
}

static void test_owner_resume_nothing_missed(void **state)
{
        owner_resume(*state, false);
}

struct inf_log {
        int added, modified, deleted;
        bool synced;
        bool done;
        char old_rv[16], new_rv[16], deleted_rv[16]; /* of the last modified and deleted */
};

static void il_added(void *userdata, const cJSON *obj)
{
        ((struct inf_log *)userdata)->added++;
}

static void il_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        struct inf_log *il = userdata;
        il->modified++;
        snprintf(il->old_rv, sizeof(il->old_rv), "%s",
                 kube_object_rv(old_obj) ? kube_object_rv(old_obj) : "");
        snprintf(il->new_rv, sizeof(il->new_rv), "%s", kube_object_rv(obj) ? kube_object_rv(obj) : "");
}

static void il_deleted(void *userdata, const cJSON *obj)
{
        struct inf_log *il = userdata;
        il->deleted++;
        snprintf(il->deleted_rv, sizeof(il->deleted_rv), "%s",
                 kube_object_rv(obj) ? kube_object_rv(obj) : "");
        il->done = true;
}

static void il_synced(void *userdata)
{
        ((struct inf_log *)userdata)->synced = true;
}

/* compact: the store keeps text, parsed when read (kube_watch_options.compact); what every reader sees is
 * the same. */
static void informer_run(struct fx *fx, bool compact)
{
        const char *const events[] = {
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"namespace\":\"d\",\"name\":\"a\","
                "\"resourceVersion\":\"8\"}}}\n",
                "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"namespace\":\"d\",\"name\":\"b\","
                "\"resourceVersion\":\"9\"}}}\n",
                NULL,
        };
        add_list(fx, "/api/v1/pods",
                 "{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":["
                 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"a\",\"resourceVersion\":\"3\"}},"
                 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"b\",\"resourceVersion\":\"4\"}}]}");
        add_stream(fx, "/api/v1/pods", "resourceVersion=7", events);
        static const struct kube_informer_ops ops = {
                .added = il_added,
                .modified = il_modified,
                .deleted = il_deleted,
                .synced = il_synced,
        };
        struct inf_log il = { 0 };
        struct kube_informer *inf = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods", .compact = compact };
        assert_int_equal(kube_informer_start(fx->client, &o, &ops, &il, &inf), 0);
        assert_int_equal(loop_run_until(fx->loop, &il.done, WAIT_USEC), 0);
        assert_true(il.synced);
        assert_true(kube_informer_synced(inf));
        assert_int_equal(il.added, 2);
        assert_int_equal(il.modified, 1);
        /* The old object as stored (a compact store's text, parsed again), the new one as it came. */
        assert_string_equal(il.old_rv, "3");
        assert_string_equal(il.new_rv, "8");
        assert_int_equal(il.deleted, 1);
        assert_string_equal(il.deleted_rv, "4");
        assert_int_equal(kube_informer_size(inf), 1);
        assert_string_equal(kube_object_rv(kube_informer_get(inf, "d", "a")), "8");
        /* Within one turn of the loop a compact store parses an object once: what a reader was given stays
         * valid while it reads others. */
        assert_ptr_equal(kube_informer_get(inf, "d", "a"), kube_informer_at(inf, 0));
        assert_string_equal(kube_informer_rv(inf, "d", "a"), "8");
        assert_string_equal(kube_object_str(kube_informer_at(inf, 0), "metadata.name"), "a");
        assert_null(kube_informer_get(inf, "d", "b"));
        assert_null(kube_informer_rv(inf, "d", "b"));

        /* The resume point expires; the relist no longer has "a" but has "c": the store catches up. */
        const char *const gone[] = {
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}"
                "\n",
                NULL,
        };
        add_stream(fx, "/api/v1/pods", "resourceVersion=9", gone);
        add_list(fx, "/api/v1/pods",
                 "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
                 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"c\",\"resourceVersion\":\"19\"}}]}");
        il.done = false;
        assert_int_equal(loop_run_until(fx->loop, &il.done, WAIT_USEC), 0);
        assert_int_equal(il.deleted, 2);
        assert_int_equal(il.added, 3);
        assert_int_equal(kube_informer_size(inf), 1);
        assert_string_equal(kube_object_rv(kube_informer_get(inf, "d", "c")), "19");
        assert_string_equal(kube_informer_rv(inf, "d", "c"), "19");
        assert_string_equal(kube_object_str(kube_informer_at(inf, 0), "metadata.name"), "c");
        kube_informer_stop(inf);
}

static void test_informer(void **state)
{
        informer_run(*state, false);
}

static void test_informer_compact(void **state)
{
        informer_run(*state, true);
}

static void test_get_429_retry_after(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/n1",
                                                    .status = 429,
                                                    .retry_after = "0",
                                                    .body = "{\"kind\":\"Status\",\"code\":429}" });
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        /* without Retry-After a 429 is the caller's business */
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n2", 429, "{\"kind\":\"Status\",\"code\":429}");
        cJSON *obj = NULL;
        char *err = NULL;
        assert_int_equal(kube_get_sync(fx->client, "/api/v1/nodes/n1", WAIT_USEC, &obj, &err), 0);
        assert_string_equal(kube_object_str(obj, "metadata.name"), "n1");
        cJSON_Delete(obj);
        assert_int_equal(kube_get_sync(fx->client, "/api/v1/nodes/n2", WAIT_USEC, NULL, &err), -EBUSY);
        assert_non_null(strstr(err, "429"));
        free(err);
        assert_int_equal(kfake_count(fx->fake), 3);
}

static void test_transport_errors_retried(void **state)
{
        struct fx *fx = *state;
        /* Nothing listens on port 1: every try is refused. */
        free(fx->cfg->server);
        fx->cfg->server = strdup("http://127.0.0.1:1");
        assert_non_null(fx->cfg->server);
        char *err = NULL;
        int r = kube_get_sync(fx->client, "/api/v1/nodes/n1", WAIT_USEC, NULL, &err);
        assert_true(r < 0);
        assert_non_null(strstr(err, "GET /api/v1/nodes/n1"));
        free(err);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.sent, 4); /* the first try and the default 3 retries */
        assert_int_equal(st.in_flight, 0);
}

static void test_bad_json_answer(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200, "<html>proxy says hi</html>");
        char *err = NULL;
        assert_int_equal(kube_get_sync(fx->client, "/api/v1/nodes/n1", WAIT_USEC, NULL, &err), -EBADMSG);
        free(err);
}

static void test_list_continue_expired(void **state)
{
        struct fx *fx = *state;
        const char *page1 = "{\"metadata\":{\"resourceVersion\":\"50\",\"continue\":\"c1\"},"
                            "\"items\":[{\"metadata\":{\"name\":\"p1\"}}]}";
        kfake_answer(fx->fake, "GET", "/api/v1/pods", 200, page1);
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/pods",
                                                    .query_contains = "continue=c1",
                                                    .status = 410,
                                                    .body = "{\"kind\":\"Status\",\"reason\":\"Expired\","
                                                            "\"code\":410}" });
        kfake_answer(fx->fake, "GET", "/api/v1/pods", 200, page1);
        kfake_add(fx->fake,
                  &(struct kfake_script){ .method = "GET",
                                          .path = "/api/v1/pods",
                                          .query_contains = "continue=c1",
                                          .status = 200,
                                          .body = "{\"metadata\":{\"resourceVersion\":\"50\"},"
                                                  "\"items\":[{\"metadata\":{\"name\":\"p2\"}}]}" });
        cJSON *list = NULL;
        assert_int_equal(kube_list_sync(fx->client, "/api/v1/pods", NULL, WAIT_USEC, &list, NULL), 0);
        /* the first attempt's page is not kept twice */
        assert_int_equal(cJSON_GetArraySize(kube_list_items(list)), 2);
        assert_int_equal(kfake_count(fx->fake), 4);
        assert_string_equal(req(fx, 0)->query, "limit=500");
        cJSON_Delete(list);
}

struct stopper {
        struct kube_watch *w;
        int events;
        bool done;
};

static void stop_on_first(void *userdata, enum kube_event_type type, const cJSON *obj)
{
        struct stopper *st = userdata;
        st->events++;
        st->w = kube_watch_stop(st->w);
        st->done = true;
}

static void test_watch_stop_inside_callback(void **state)
{
        struct fx *fx = *state;
        const char *const chunks[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n"
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"3\"}}}"
                "\n",
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"4\"}}}"
                "\n",
                NULL,
        };
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1/nodes", .status = 200, .chunks = chunks });
        static const struct kube_watch_ops ops = { .event = stop_on_first };
        struct stopper st = { 0 };
        struct kube_watch_options o = { .path = "/api/v1/nodes", .resource_version = "1" };
        assert_int_equal(kube_watch_start(fx->client, &o, &ops, &st, &st.w), 0);
        assert_int_equal(loop_run_until(fx->loop, &st.done, WAIT_USEC), 0);
        assert_null(st.w);
        /* nothing more arrives after the stop, even from the rest of the same chunk */
        assert_int_equal(st.events, 1);
}

static void test_watch_failure_reports_and_relists(void **state)
{
        struct fx *fx = *state;
        const char *const after[] = {
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"z\",\"resourceVersion\":\"31\"}}}"
                "\n",
                NULL,
        };
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/apis/policy/v1/poddisruptionbudgets",
                                                    .query_contains = "resourceVersion=20",
                                                    .status = 500,
                                                    .body = "{\"kind\":\"Status\",\"code\":500}" });
        add_list(fx, "/apis/policy/v1/poddisruptionbudgets",
                 "{\"metadata\":{\"resourceVersion\":\"30\"},"
                 "\"items\":[]}");
        add_stream(fx, "/apis/policy/v1/poddisruptionbudgets", "resourceVersion=30", after);
        struct watch_log wl = { .want_events = 1 };
        struct kube_watch *w = NULL;
        struct kube_watch_options o = { .path = "/apis/policy/v1/poddisruptionbudgets",
                                        .resource_version = "20" };
        assert_int_equal(kube_watch_start(fx->client, &o, &wl_ops, &wl, &w), 0);
        assert_int_equal(loop_run_until(fx->loop, &wl.done, WAIT_USEC), 0);
        assert_int_equal(wl.errors, 1);
        assert_int_equal(wl.relisted, 1);
        assert_string_equal(wl.last_name, "z");
        kube_watch_stop(w);
}

struct many_log {
        int added, deleted, want_deleted;
        bool done;
};

static void ml_added(void *userdata, const cJSON *obj)
{
        ((struct many_log *)userdata)->added++;
}

static void ml_deleted(void *userdata, const cJSON *obj)
{
        struct many_log *ml = userdata;
        if (++ml->deleted >= ml->want_deleted)
                ml->done = true;
}

static char *pod_list(int n, int step, const char *rv)
{
        struct buf b = { 0 };
        assert_true(buf_printf(&b, "{\"metadata\":{\"resourceVersion\":\"%s\"},\"items\":[", rv) >= 0);
        for (int i = 0; i < n; i += step)
                assert_true(buf_printf(&b,
                                       "%s{\"metadata\":{\"namespace\":\"ns%d\",\"name\":\"pod-%d\","
                                       "\"resourceVersion\":\"%d\"}}",
                                       i ? "," : "", i % 7, i, i) >= 0);
        assert_true(buf_printf(&b, "]}") >= 0);
        return b.data;
}

static void test_informer_many(void **state)
{
        struct fx *fx = *state;
        const char *const gone[] = { "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n",
                                     NULL };
        char *all = pod_list(300, 1, "1000"), *even = pod_list(300, 2, "2000");
        add_list(fx, "/api/v1/pods", all);
        add_stream(fx, "/api/v1/pods", "resourceVersion=1000", gone);
        add_list(fx, "/api/v1/pods", even);
        free(all);
        free(even);
        static const struct kube_informer_ops ops = { .added = ml_added, .deleted = ml_deleted };
        struct many_log ml = { .want_deleted = 150 };
        struct kube_informer *inf = NULL;
        struct kube_watch_options o = { .path = "/api/v1/pods" };
        assert_int_equal(kube_informer_start(fx->client, &o, &ops, &ml, &inf), 0);
        assert_int_equal(loop_run_until(fx->loop, &ml.done, WAIT_USEC), 0);
        assert_int_equal(ml.added, 300);
        assert_int_equal(kube_informer_size(inf), 150);
        char ns[16], name[32];
        for (int i = 0; i < 300; i++) {
                snprintf(ns, sizeof(ns), "ns%d", i % 7);
                snprintf(name, sizeof(name), "pod-%d", i);
                const cJSON *obj = kube_informer_get(inf, ns, name);
                if (i % 2)
                        assert_null(obj);
                else {
                        assert_non_null(obj);
                        assert_string_equal(kube_object_str(obj, "metadata.name"), name);
                }
        }
        assert_null(kube_informer_get(inf, "ns1", "pod-0"));
        kube_informer_stop(inf);
}

/* ---- nodes ---- */

static void test_cordon(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_node_cordon(fx->client, "n1", true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);
        s = (struct kube_sync){ 0 };
        r = kube_node_cordon(fx->client, "n1", false, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        assert_string_equal(req(fx, 0)->method, "PATCH");
        assert_string_equal(req(fx, 0)->content_type, "application/strategic-merge-patch+json");
        assert_string_equal(req(fx, 0)->body, "{\"spec\":{\"unschedulable\":true}}");
        assert_string_equal(req(fx, 1)->body, "{\"spec\":{\"unschedulable\":null}}");
        assert_string_equal(req(fx, 0)->authorization, "Bearer tok-1");
}

static void test_taint_conflict_retry(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"taints\":[{\"key\":\"other\",\"effect\":\"NoSchedule\"}]}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 409,
                     "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409,"
                     "\"message\":\"the object has been modified\"}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"2\"},"
                     "\"spec\":{\"taints\":[{\"key\":\"other\",\"effect\":\"NoSchedule\"},"
                     "{\"key\":\"late\",\"value\":\"x\",\"effect\":\"NoExecute\"}]}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");

        struct kube_taint t = { .key = (char *)"spotdrain.io/draining",
                                .value = (char *)"true",
                                .effect = (char *)"NoSchedule" };
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_node_taint(fx->client, "n1", &t, true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        assert_int_equal(kfake_count(fx->fake), 4);
        assert_string_equal(req(fx, 1)->method, "PATCH");
        assert_string_equal(req(fx, 2)->method, "GET");
        const struct kfake_request *last = req(fx, 3);
        assert_string_equal(last->content_type, "application/strategic-merge-patch+json");
        cJSON *body = parse(last->body);
        assert_string_equal(kube_object_rv(body), "2");
        cJSON *taints = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "spec"), "taints");
        assert_int_equal(cJSON_GetArraySize(taints), 3);
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(taints, 1), "key"), "late");
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(taints, 2), "key"), "spotdrain.io/draining");
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(taints, 2), "effect"), "NoSchedule");
        cJSON_Delete(body);
}

static void test_taint_remove_and_labels(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"5\"},"
                     "\"spec\":{\"taints\":[{\"key\":\"spotdrain.io/draining\",\"effect\":\"NoSchedule\"},"
                     "{\"key\":\"keep\",\"effect\":\"NoSchedule\"}]}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        struct kube_taint t = { .key = (char *)"spotdrain.io/draining" };
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_node_taint(fx->client, "n1", &t, false, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);
        cJSON *body = parse(req(fx, 1)->body);
        cJSON *taints = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "spec"), "taints");
        assert_int_equal(cJSON_GetArraySize(taints), 1);
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(taints, 0), "key"), "keep");
        cJSON_Delete(body);

        const char *keys[] = { "spotdrain.io/state", "old" };
        const char *values[] = { "draining", NULL };
        s = (struct kube_sync){ 0 };
        r = kube_node_set_meta(fx->client, "n1", false, keys, values, 2, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);
        assert_string_equal(req(fx, 2)->content_type, "application/merge-patch+json");
        assert_string_equal(
            req(fx, 2)->body,
            "{\"metadata\":{\"labels\":{\"spotdrain.io/state\":\"draining\",\"old\":null}}}");
}

/* The exclude label is set only where absent and removed only while it has our value. */
static void test_label_owned(void **state)
{
        struct fx *fx = *state;
        static const char *const key = "node.kubernetes.io/exclude-from-external-load-balancers";
        /* 1: absent → set, with the resourceVersion read; 2: someone else's → left; 3: ours → removed;
         * 4: someone else's → not removed. */
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\"}}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"labels\":{"
                     "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"ops\"}}}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"9\",\"labels\":{"
                     "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"spotdrain\"}}}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"labels\":{"
                     "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"ops\"}}}");
        static const bool adds[] = { true, true, false, false };
        for (size_t i = 0; i < 4; i++) {
                struct kube_sync s = { 0 };
                struct kube_call *call = NULL;
                int r = kube_node_label_owned(fx->client, "n1", key, "spotdrain", adds[i], kube_sync_done,
                                              &s, &call);
                assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
                kube_result_clear(&s.result);
        }
        assert_int_equal(kfake_count(fx->fake), 6);
        assert_string_equal(req(fx, 1)->method, "PATCH");
        assert_string_equal(req(fx, 1)->content_type, "application/merge-patch+json");
        assert_string_equal(
            req(fx, 1)->body,
            "{\"metadata\":{\"labels\":{\"node.kubernetes.io/"
            "exclude-from-external-load-balancers\":\"spotdrain\"},\"resourceVersion\":\"7\"}}");
        assert_string_equal(req(fx, 2)->method, "GET");
        assert_string_equal(req(fx, 3)->method, "GET");
        assert_string_equal(req(fx, 4)->body, "{\"metadata\":{\"labels\":{\"node.kubernetes.io/"
                                              "exclude-from-external-load-balancers\":null},"
                                              "\"resourceVersion\":\"9\"}}");
        assert_string_equal(req(fx, 5)->method, "GET");
}

/* ---- eviction and delete ---- */

#define DISCOVERY_V1                                                                               \
        "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[{\"name\":\"pods\"," \
        "\"namespaced\":true,\"kind\":\"Pod\"},{\"name\":\"pods/eviction\",\"namespaced\":true,"   \
        "\"group\":\"policy\",\"version\":\"v1\",\"kind\":\"Eviction\"}]}"

static struct kube_sync evict(struct fx *fx, const char *name, int64_t grace)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_evict(fx->client, "shop", name, NULL, grace, kube_sync_done, &s, &call);
        (void)kube_sync_wait(fx->client, r, call, &s, WAIT_USEC);
        assert_true(s.done);
        return s;
}

static void test_evict_outcomes(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/shop/pods/a/eviction", 201,
                     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\",\"code\":201}");
        kfake_answer(
            fx->fake, "POST", "/api/v1/namespaces/shop/pods/b/eviction", 429,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"Cannot evict "
            "pod as it would violate the pod's disruption budget.\",\"reason\":\"TooManyRequests\","
            "\"details\":{\"causes\":[{\"reason\":\"DisruptionBudget\",\"message\":\"The disruption budget "
            "web-pdb needs 2 healthy pods and has 2 currently\"}]},\"code\":429}");
        kfake_answer(
            fx->fake, "POST", "/api/v1/namespaces/shop/pods/c/eviction", 500,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"This pod has "
            "more than one PodDisruptionBudget, which the eviction subresource does not support.\","
            "\"code\":500}");
        kfake_answer(
            fx->fake, "POST", "/api/v1/namespaces/shop/pods/d/eviction", 404,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"NotFound\","
            "\"code\":404}");

        struct kube_sync s = evict(fx, "a", 10);
        assert_int_equal(s.result.error, 0);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_EVICTED);
        assert_string_equal(kube_eviction_version(fx->client), "policy/v1");
        kube_result_clear(&s.result);

        s = evict(fx, "b", -1);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_BLOCKED);
        assert_int_equal(s.result.error, -EBUSY);
        assert_string_equal(s.result.pdb_name, "web-pdb");
        assert_string_equal(s.result.message,
                            "The disruption budget web-pdb needs 2 healthy pods and has 2 currently");
        assert_string_equal(s.result.reason, "TooManyRequests");
        kube_result_clear(&s.result);

        s = evict(fx, "c", -1);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_MULTIPLE);
        assert_non_null(strstr(s.result.message, "more than one PodDisruptionBudget"));
        kube_result_clear(&s.result);

        s = evict(fx, "d", -1);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_GONE);
        kube_result_clear(&s.result);

        /* discovery once, each eviction once (429 and 500 are not retried) */
        assert_int_equal(kfake_count(fx->fake), 5);
        assert_string_equal(req(fx, 0)->path, "/api/v1");
        cJSON *body = parse(req(fx, 1)->body);
        assert_string_equal(kube_object_str(body, "apiVersion"), "policy/v1");
        assert_string_equal(kube_object_str(body, "kind"), "Eviction");
        assert_string_equal(kube_object_str(body, "metadata.name"), "a");
        assert_string_equal(kube_object_str(body, "metadata.namespace"), "shop");
        assert_int_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(body, "deleteOptions"), "gracePeriodSeconds")->valueint,
            10);
        cJSON_Delete(body);
        body = parse(req(fx, 2)->body);
        assert_null(cJSON_GetObjectItem(body, "deleteOptions"));
        cJSON_Delete(body);
}

static void test_evict_v1beta1_fallback(void **state)
{
        struct fx *fx = *state;
        kfake_answer(
            fx->fake, "GET", "/api/v1", 200,
            "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[{\"name\":\"pods/"
            "eviction\","
            "\"namespaced\":true,\"group\":\"policy\",\"version\":\"v1beta1\",\"kind\":\"Eviction\"}]}");
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/shop/pods/a/eviction", 201,
                     "{\"kind\":\"Status\"}");
        struct kube_sync s = evict(fx, "a", -1);
        assert_int_equal(s.result.error, 0);
        kube_result_clear(&s.result);
        assert_string_equal(kube_eviction_version(fx->client), "policy/v1beta1");
        cJSON *body = parse(req(fx, 1)->body);
        assert_string_equal(kube_object_str(body, "apiVersion"), "policy/v1beta1");
        cJSON_Delete(body);
}

static void test_delete_grace_uid(void **state)
{
        struct fx *fx = *state;
        kfake_answer(fx->fake, "DELETE", "/api/v1/namespaces/shop/pods/a", 200, "{\"kind\":\"Pod\"}");
        kfake_answer(
            fx->fake, "DELETE", "/api/v1/namespaces/shop/pods/b", 409,
            "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409,\"message\":\"Precondition failed: "
            "UID in precondition: u-2, UID in object meta: u-3\"}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_pod_delete(fx->client, "shop", "a", "u-1", 5, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);
        cJSON *body = parse(req(fx, 0)->body);
        assert_string_equal(req(fx, 0)->method, "DELETE");
        assert_int_equal(cJSON_GetObjectItem(body, "gracePeriodSeconds")->valueint, 5);
        assert_string_equal(kube_object_str(body, "preconditions.uid"), "u-1");
        assert_string_equal(kube_object_str(body, "kind"), "DeleteOptions");
        cJSON_Delete(body);

        s = (struct kube_sync){ 0 };
        r = kube_pod_delete(fx->client, "shop", "b", "u-2", 0, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -ESTALE);
        assert_int_equal(s.result.http_status, 409);
        assert_non_null(strstr(s.result.message, "Precondition failed"));
        kube_result_clear(&s.result);
}

/* ---- auth and errors ---- */

static void rotate_hook(const struct kfake_request *r, void *userdata)
{
        struct fx *fx = userdata;
        if (r->authorization && strcmp(r->authorization, "Bearer tok-1") == 0)
                write_token(fx->token_path, "tok-2");
}

static void test_401_rereads_token(void **state)
{
        struct fx *fx = *state;
        kfake_set_hook(fx->fake, rotate_hook, fx);
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 401,
                     "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200, "{\"metadata\":{\"name\":\"n1\"}}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(fx->client, "/api/v1/nodes/n1", kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);
        assert_int_equal(kfake_count(fx->fake), 2);
        assert_string_equal(req(fx, 0)->authorization, "Bearer tok-1");
        assert_string_equal(req(fx, 1)->authorization, "Bearer tok-2");
}

static void test_401_twice_fails(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/n1",
                                                    .status = 401,
                                                    .body = "{\"kind\":\"Status\",\"code\":401}",
                                                    .sticky = true });
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(fx->client, "/api/v1/nodes/n1", kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -EACCES);
        kube_result_clear(&s.result);
        assert_int_equal(kfake_count(fx->fake), 2);
}

static void test_403_names_verb_and_resource(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_answer(
            fx->fake, "POST", "/api/v1/namespaces/shop/pods/a/eviction", 403,
            "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\",\"code\":403,"
            "\"message\":\"pods \\\"a\\\" is forbidden: User \\\"system:serviceaccount:kube-system:"
            "spotdrain\\\" cannot create resource \\\"pods/eviction\\\" in API group \\\"\\\" in the "
            "namespace \\\"shop\\\"\"}");
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/n1", 403, "{\"kind\":\"Status\",\"code\":403}");
        struct kube_sync s = evict(fx, "a", -1);
        assert_int_equal(s.result.error, -EPERM);
        assert_string_equal(s.result.message,
                            "forbidden: cannot create pods/eviction in namespace shop \u2014 RBAC "
                            "needs verb create on pods/eviction");
        kube_result_clear(&s.result);

        s = (struct kube_sync){ 0 };
        struct kube_call *call = NULL;
        int r = kube_node_cordon(fx->client, "n1", true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -EPERM);
        assert_string_equal(
            s.result.message,
            "forbidden: cannot patch nodes (cluster-scoped) \u2014 RBAC needs verb patch on nodes");
        kube_result_clear(&s.result);
}

/* A 403 from admission (here kube-apiserver's words for a ValidatingAdmissionPolicy) is not an RBAC
 * gap: the message quotes the server, which names the policy and why, instead of asking for a verb. */
static void test_403_by_admission_quotes_the_server(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_answer(
            fx->fake, "PATCH", "/api/v1/nodes/n1", 403,
            "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":403,"
            "\"message\":\"nodes \\\"n1\\\" is forbidden: ValidatingAdmissionPolicy 'spotdrain-nodes' "
            "with binding 'spotdrain-nodes' denied request: only the drain taint\"}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_node_cordon(fx->client, "n1", true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -EPERM);
        assert_string_equal(
            s.result.message,
            "forbidden: PATCH /api/v1/nodes/n1: nodes \"n1\" is forbidden: ValidatingAdmissionPolicy "
            "'spotdrain-nodes' with binding 'spotdrain-nodes' denied request: only the drain taint");
        assert_null(strstr(s.result.message, "RBAC"));
        kube_result_clear(&s.result);
}

/* ---- rate limiter ---- */

struct count {
        int done, ok, want;
        bool reached;
};

static void count_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct count *n = userdata;
        n->done++;
        if (r->error == 0)
                n->ok++;
        if (n->done >= n->want)
                n->reached = true;
}

static int ignore_data(const char *data, size_t len, void *userdata)
{
        return 0;
}

static void test_rate_limiter_queues(void **state)
{
        struct fx *fx = *state;
        char path[64];
        for (int i = 0; i < 5; i++) {
                snprintf(path, sizeof(path), "/api/v1/namespaces/d/pods/p%d", i);
                kfake_answer(fx->fake, "GET", path, 200, "{}");
        }
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/d/pods/hi/eviction", 201, "{}");
        /* A bucket of 3 that practically never refills. */
        kube_client_set_rate(fx->client, 0.001, 3);
        struct count n = { .want = 3 };
        for (int i = 0; i < 5; i++) {
                snprintf(path, sizeof(path), "/api/v1/namespaces/d/pods/p%d", i);
                assert_int_equal(kube_request(fx->client, "GET", path, NULL, NULL, 0, count_done, &n, NULL),
                                 0);
        }
        assert_int_equal(kube_request(fx->client, "POST", "/api/v1/namespaces/d/pods/hi/eviction",
                                      "application/json", "{}", KUBE_REQ_PRIORITY, count_done, &n, NULL),
                         0);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.queued, 6);

        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.sent, 3);
        assert_int_equal(st.queued, 3);
        assert_int_equal(kfake_count(fx->fake), 3);
        /* The priority request went first even though it was queued last. */
        assert_true(kfake_find(fx->fake, "POST", "/api/v1/namespaces/d/pods/hi/eviction", 0) >= 0);

        /* One more token: the oldest ordinary request goes next. */
        n.want = 4;
        n.reached = false;
        kube_client_set_rate(fx->client, 0.001, 1);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_int_equal(kfake_count(fx->fake), 4);
        assert_string_equal(req(fx, 3)->path, "/api/v1/namespaces/d/pods/p2");

        /* Nothing is dropped: lifting the limit lets the rest through. */
        n.want = 6;
        n.reached = false;
        kube_client_set_rate(fx->client, -1, 0);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_int_equal(n.ok, 6);
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.sent, 6);
        assert_int_equal(st.queued, 0);
}

/* Waiting requests go out earliest deadline key first: urgent ones before everything, then the
 * priority class: what watches see by first (a stream and a list queued after the evictions), then by key,
 * its calls without a key after those, ordinary ones last. A key set on a call already queued moves it. */
static void test_queue_by_deadline(void **state)
{
        struct fx *fx = *state;
        static const char *const names[] = { "k30", "k10", "k20", "nokey", "k40" };
        char path[64];
        struct kube_call *calls[5];
        uint64_t now = clk_now();
        const uint64_t keys[] = { now + 30 * USEC, now + 10 * USEC, now + 20 * USEC, 0, now + 40 * USEC };

        kube_client_set_rate(fx->client, 0.001, 1);
        /* Takes the bucket's one token: everything below waits. */
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/first", 200, "{}");
        struct count n = { .want = 1 };
        assert_int_equal(
            kube_request(fx->client, "GET", "/api/v1/nodes/first", NULL, NULL, 0, count_done, &n, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);

        kfake_answer(fx->fake, "GET", "/api/v1/nodes/ordinary", 200, "{}");
        assert_int_equal(
            kube_request(fx->client, "GET", "/api/v1/nodes/ordinary", NULL, NULL, 0, count_done, &n, NULL),
            0);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                snprintf(path, sizeof(path), "/api/v1/namespaces/d/pods/%s/eviction", names[i]);
                kfake_answer(fx->fake, "POST", path, 201, "{}");
                assert_int_equal(kube_request(fx->client, "POST", path, "application/json", "{}",
                                              KUBE_REQ_PRIORITY, count_done, &n, &calls[i]),
                                 0);
                kube_call_set_deadline(calls[i], keys[i]);
        }
        static const char *const events[] = { "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{"
                                              "\"resourceVersion\":\"7\"}}}\n",
                                              NULL };
        add_stream(fx, "/api/v1/pods", "watch=true", events);
        assert_int_equal(kube_request_stream(fx->client, "/api/v1/pods?watch=true",
                                             KUBE_REQ_PATIENT | KUBE_REQ_SIGHT, ignore_data, count_done, &n,
                                             NULL),
                         0);
        kfake_answer(fx->fake, "GET", "/api/v1/namespaces/d/pods", 200, "{\"items\":[]}");
        assert_int_equal(kube_list(fx->client, "/api/v1/namespaces/d/pods",
                                   &(struct kube_list_options){ .priority = true, .sight = true },
                                   count_done, &n, NULL),
                         0);
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/cordon", 200, "{}");
        assert_int_equal(kube_request(fx->client, "PATCH", "/api/v1/nodes/cordon", "application/json", "{}",
                                      KUBE_REQ_URGENT, count_done, &n, NULL),
                         0);
        /* k40 jumps ahead of k10 once given an earlier key while queued. */
        kube_call_set_deadline(calls[4], now + 5 * USEC);

        static const char *const want[] = {
                "/api/v1/nodes/cordon",
                "/api/v1/pods",
                "/api/v1/namespaces/d/pods",
                "/api/v1/namespaces/d/pods/k40/eviction",
                "/api/v1/namespaces/d/pods/k10/eviction",
                "/api/v1/namespaces/d/pods/k20/eviction",
                "/api/v1/namespaces/d/pods/k30/eviction",
                "/api/v1/namespaces/d/pods/nokey/eviction",
                "/api/v1/nodes/ordinary",
        };
        /* One token at a time, so that the server sees them in the order they left. */
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                n.want = (int)i + 2;
                n.reached = false;
                kube_client_set_rate(fx->client, 0.001, 1);
                assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
                assert_int_equal(kfake_count(fx->fake), i + 2);
                assert_string_equal(req(fx, i + 1)->path, want[i]);
        }
        assert_int_equal(n.ok, 10);
}

/* The text/plain 429 kube-apiserver's priority and fairness sends (filters/priority-and-fairness.go). */
#define APF_429 "Too many requests, please try again later.\n"

/* Polls the client's stats every 10 ms until ready() holds (bounded by the caller's loop_run_until). */
struct stats_wait {
        struct fx *fx;
        bool (*ready)(const struct kube_client_stats *st, const struct stats_wait *w);
        double rate;
        bool reached;
        struct timer *timer;
};

static void stats_poll(void *userdata)
{
        struct stats_wait *w = userdata;
        struct kube_client_stats st;
        w->timer = NULL;
        kube_client_stats(w->fx->client, &st);
        if (w->ready(&st, w)) {
                w->reached = true;
                return;
        }
        assert_int_equal(timer_start_in(w->fx->loop, 10 * 1000, stats_poll, w, &w->timer), 0);
}

static bool rate_reached(const struct kube_client_stats *st, const struct stats_wait *w)
{
        return st->rate >= w->rate;
}

static bool was_throttled(const struct kube_client_stats *st, const struct stats_wait *w)
{
        return st->throttled > 0;
}

/* A 429 with Retry-After that is not a PDB's refusal is the server throttling: the request is sent again
 * once the Retry-After is over, whatever its verb; the whole client waits that long and goes slower, then
 * climbs back to its cap. */
static void test_apf_slows_and_recovers(void **state)
{
        struct fx *fx = *state;
        kube_client_set_rate(fx->client, 50, 50);
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_add(fx->fake, &(struct kfake_script){ .method = "POST",
                                                    .path = "/api/v1/namespaces/shop/pods/a/eviction",
                                                    .status = 429,
                                                    .retry_after = "1",
                                                    .body = APF_429 });
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/shop/pods/a/eviction", 201, "{}");

        uint64_t t0 = clk_now();
        struct kube_sync s = evict(fx, "a", -1);
        uint64_t t1 = clk_now();
        assert_int_equal(s.result.error, 0);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_EVICTED);
        kube_result_clear(&s.result);
        /* discovery, the throttled POST, the POST again after the pause */
        assert_int_equal(kfake_count(fx->fake), 3);
        assert_true(t1 - t0 >= USEC);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.throttled, 1);
        assert_true(st.rate > 0 && st.rate <= 25);

        /* A second 429 within the pause does not halve the rate again. */
        double slowed = st.rate;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/b",
                                                    .status = 429,
                                                    .retry_after = "0",
                                                    .body = APF_429 });
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/b", 200, "{}");
        cJSON *obj = NULL;
        char *err = NULL;
        assert_int_equal(kube_get_sync(fx->client, "/api/v1/nodes/b", WAIT_USEC, &obj, &err), 0);
        cJSON_Delete(obj);
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.throttled, 2);
        assert_true(st.rate >= slowed);

        /* Without more 429s the rate climbs back to the cap (the clock ten times faster for it). */
        clk_set_scale(20);
        struct stats_wait w = { .fx = fx, .ready = rate_reached, .rate = 50 };
        stats_poll(&w);
        int r = loop_run_until(fx->loop, &w.reached, WAIT_USEC);
        timer_cancel(w.timer);
        clk_set_scale(1);
        assert_int_equal(r, 0);
        assert_true(w.reached);
        kube_client_stats(fx->client, &st);
        assert_true(st.rate == 50);
        assert_false(st.paused);
}

/* During a throttling pause the cordon (urgent) still goes; the others wait it out. */
static void test_apf_pause_lets_urgent_through(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/x",
                                                    .status = 429,
                                                    .retry_after = "30",
                                                    .body = APF_429 });
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/x", 200, "{}");
        struct count waiting = { .want = 1 }, urgent = { .want = 1 };
        struct kube_call *get = NULL;
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/x", count_done, &waiting, &get), 0);
        struct stats_wait w = { .fx = fx, .ready = was_throttled };
        stats_poll(&w);
        assert_int_equal(loop_run_until(fx->loop, &w.reached, WAIT_USEC), 0);
        timer_cancel(w.timer);
        assert_int_equal(kube_request(fx->client, "PATCH", "/api/v1/nodes/x", "application/json", "{}",
                                      KUBE_REQ_URGENT, count_done, &urgent, NULL),
                         0);
        assert_int_equal(loop_run_until(fx->loop, &urgent.reached, WAIT_USEC), 0);
        assert_int_equal(urgent.ok, 1);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_true(st.paused);
        assert_int_equal(st.queued, 0); /* the throttled GET waits for the pause to end, not in the queue */
        assert_false(waiting.reached);
        kube_call_cancel(get);
}

/* A throttled urgent call is sent again only once the Retry-After is over: sent at once into the server's
 * refusal, it would use up its retries in a moment. */
static void test_apf_urgent_retry_waits(void **state)
{
        struct fx *fx = *state;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "PATCH",
                                                    .path = "/api/v1/nodes/c",
                                                    .status = 429,
                                                    .retry_after = "1",
                                                    .body = APF_429 });
        kfake_answer(fx->fake, "PATCH", "/api/v1/nodes/c", 200, "{}");
        struct count n = { .want = 1 };
        uint64_t t0 = clk_now();
        assert_int_equal(kube_request(fx->client, "PATCH", "/api/v1/nodes/c", "application/json", "{}",
                                      KUBE_REQ_URGENT, count_done, &n, NULL),
                         0);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_int_equal(n.ok, 1);
        assert_int_equal(kfake_count(fx->fake), 2);
        assert_true(clk_now() - t0 >= USEC);
}

/* Holds every request in the fake server until opened; counts those that arrived. */
struct gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool open;
        atomic_uint arrived;
};

static void gate_hook(const struct kfake_request *req, void *userdata)
{
        struct gate *g = userdata;
        atomic_fetch_add(&g->arrived, 1);
        pthread_mutex_lock(&g->lock);
        while (!g->open)
                pthread_cond_wait(&g->cond, &g->lock);
        pthread_mutex_unlock(&g->lock);
}

static bool in_flight_full(const struct kube_client_stats *st, const struct stats_wait *w)
{
        return st->in_flight >= (unsigned)w->rate;
}

/* No more than KUBE_MAX_IN_FLIGHT requests are under way at once, whatever the rate allows; an urgent one
 * goes beyond it, and each answer lets the next go. */
static void test_in_flight_cap(void **state)
{
        struct fx *fx = *state;
        struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = "/api/v1/nodes/n", .status = 200, .body = "{}", .sticky = true });
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "PATCH", .path = "/api/v1/nodes/n", .status = 200, .body = "{}", .sticky = true });
        kfake_set_hook(fx->fake, gate_hook, &g);
        struct count n = { .want = 101 };
        for (int i = 0; i < 100; i++)
                assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n", count_done, &n, NULL), 0);
        struct stats_wait w = { .fx = fx, .ready = in_flight_full, .rate = 64 };
        stats_poll(&w);
        assert_int_equal(loop_run_until(fx->loop, &w.reached, WAIT_USEC), 0);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.in_flight, 64);
        assert_int_equal(st.queued, 36);
        assert_int_equal(kube_request(fx->client, "PATCH", "/api/v1/nodes/n", "application/json", "{}",
                                      KUBE_REQ_URGENT, count_done, &n, NULL),
                         0);
        w = (struct stats_wait){ .fx = fx, .ready = in_flight_full, .rate = 65 };
        stats_poll(&w);
        assert_int_equal(loop_run_until(fx->loop, &w.reached, WAIT_USEC), 0);
        pthread_mutex_lock(&g.lock);
        g.open = true;
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_int_equal(n.ok, 101);
        kfake_set_hook(fx->fake, NULL, NULL);
        kube_client_stats(fx->client, &st);
        assert_true(st.max_in_flight <= 65);
        assert_int_equal(atomic_load(&g.arrived), 101);
}

/* An eviction refused by its PDB (a Status with a DisruptionBudget cause, even with Retry-After, as
 * kube-apiserver sends while the PDB is being processed) is the caller's business: not sent again, and
 * the client does not slow down. */
static void test_pdb_429_does_not_slow(void **state)
{
        struct fx *fx = *state;
        kube_client_set_rate(fx->client, 50, 50);
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_add(fx->fake,
                  &(struct kfake_script){
                      .method = "POST",
                      .path = "/api/v1/namespaces/shop/pods/b/eviction",
                      .status = 429,
                      .retry_after = "10",
                      .body =
                          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
                          "\"Cannot evict pod as it would violate the pod's disruption budget.\","
                          "\"reason\":\"TooManyRequests\",\"details\":{\"causes\":[{\"reason\":"
                          "\"DisruptionBudget\",\"message\":\"The disruption budget web-pdb is still "
                          "being processed by the server.\"}],\"retryAfterSeconds\":10},\"code\":429}" });
        struct kube_sync s = evict(fx, "b", -1);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_BLOCKED);
        assert_string_equal(s.result.pdb_name, "web-pdb");
        kube_result_clear(&s.result);
        assert_int_equal(kfake_count(fx->fake), 2);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.throttled, 0);
        assert_true(st.rate == 50);
        assert_false(st.paused);
}

/* ---- events and leases ---- */

static void test_event_create_and_repeat(void **state)
{
        struct fx *fx = *state;
        kfake_answer(
            fx->fake, "POST", "/api/v1/namespaces/default/events", 201,
            "{\"kind\":\"Event\",\"metadata\":{\"name\":\"n1.abc\",\"namespace\":\"default\"},\"count\":1}");
        kfake_answer(
            fx->fake, "PATCH", "/api/v1/namespaces/default/events/n1.abc", 200,
            "{\"kind\":\"Event\",\"metadata\":{\"name\":\"n1.abc\",\"namespace\":\"default\"},\"count\":2}");
        struct kube_event_spec e = {
                .involved_kind = "Node",
                .involved_api_version = "v1",
                .involved_name = "n1",
                .involved_uid = "uid-n1",
                .reason = "SpotInterruption",
                .message = "drain started, deadline in 120 s",
                .warning = true,
        };
        for (int i = 0; i < 2; i++) {
                struct kube_sync s = { 0 };
                struct kube_call *call = NULL;
                int r = kube_event_create(fx->client, &e, kube_sync_done, &s, &call);
                assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
                kube_result_clear(&s.result);
        }
        assert_int_equal(kfake_count(fx->fake), 2);
        cJSON *body = parse(req(fx, 0)->body);
        assert_string_equal(kube_object_str(body, "kind"), "Event");
        assert_string_equal(kube_object_str(body, "metadata.namespace"), "default");
        assert_string_equal(kube_object_str(body, "involvedObject.kind"), "Node");
        assert_string_equal(kube_object_str(body, "involvedObject.name"), "n1");
        assert_string_equal(kube_object_str(body, "involvedObject.uid"), "uid-n1");
        assert_string_equal(kube_object_str(body, "reason"), "SpotInterruption");
        assert_string_equal(kube_object_str(body, "message"), "drain started, deadline in 120 s");
        assert_string_equal(kube_object_str(body, "type"), "Warning");
        assert_string_equal(kube_object_str(body, "reportingComponent"), "spotdrain");
        assert_string_equal(kube_object_str(body, "source.component"), "spotdrain");
        assert_int_equal(cJSON_GetObjectItem(body, "count")->valueint, 1);
        assert_non_null(kube_object_str(body, "firstTimestamp"));
        cJSON_Delete(body);
        assert_string_equal(req(fx, 1)->method, "PATCH");
        assert_string_equal(req(fx, 1)->content_type, "application/merge-patch+json");
        body = parse(req(fx, 1)->body);
        assert_int_equal(cJSON_GetObjectItem(body, "count")->valueint, 2);
        cJSON_Delete(body);
}

static void on_flag(void *userdata);

static const struct kube_event_spec shed_event = {
        .involved_kind = "Node", .involved_name = "n1", .reason = "SpotInterruption", .message = "draining"
};

static bool metric_says(struct metrics *m, const char *line)
{
        _cleanup_free_ char *text = NULL;
        assert_int_equal(metrics_render(m, &text), 0);
        return strstr(text, line) != NULL;
}

/* Events are the first to go when the API is short: while the server's priority and fairness slows the
 * client down no Event is sent (and the drains' requests are), an Event that waited 10 s behind the rate
 * is dropped when its turn comes, and none goes while the drains ask them to give way; each counted by
 * reason. */
static void test_events_shed_first(void **state)
{
        struct metrics *m = NULL;
        assert_int_equal(metrics_new(&m), 0);
        void *st = NULL;
        struct kube_client_options o = {
                .qps = -1, .backoff_base_usec = 1000, .backoff_max_usec = 5000, .metrics = m
        };
        fx_setup_opts(&st, &o);
        struct fx *fx = st;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "GET",
                                                    .path = "/api/v1/nodes/x",
                                                    .status = 429,
                                                    .retry_after = "1",
                                                    .body = APF_429 });
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/x", 200, "{}");
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/default/events", 201, "{}");
        struct count got = { .want = 1 };
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/x", count_done, &got, NULL), 0);
        struct stats_wait w = { .fx = fx, .ready = was_throttled };
        stats_poll(&w);
        assert_int_equal(loop_run_until(fx->loop, &w.reached, WAIT_USEC), 0);
        timer_cancel(w.timer);
        assert_int_equal(kube_event_create(fx->client, &shed_event, NULL, NULL, NULL), -EAGAIN);
        assert_true(metric_says(m, "spotdrain_kube_events_dropped_total{reason=\"throttled\"} 1"));
        /* The GET is sent again after the pause; no Event ever was. */
        assert_int_equal(loop_run_until(fx->loop, &got.reached, WAIT_USEC), 0);
        assert_int_equal(got.ok, 1);
        for (size_t i = 0; i < kfake_count(fx->fake); i++)
                assert_string_not_equal(req(fx, i)->method, "POST");
        fx_teardown(&st);

        /* A client at one request every 20 s: the Event queued behind a GET waits past 10 s, and goes. */
        o.qps = 0.05;
        o.burst = 1;
        fx_setup_opts(&st, &o);
        fx = st;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/y", 200, "{}");
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/default/events", 201, "{}");
        struct count first = { .want = 1 }, ev = { .want = 1 };
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/y", count_done, &first, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &first.reached, WAIT_USEC), 0);
        assert_int_equal(kube_event_create(fx->client, &shed_event, count_done, &ev, NULL), 0);
        clk_set_scale(20);
        int r = loop_run_until(fx->loop, &ev.reached, WAIT_USEC);
        clk_set_scale(1);
        assert_int_equal(r, 0);
        assert_int_equal(ev.ok, 0);
        assert_int_equal(kfake_count(fx->fake), 1); /* the GET alone */
        assert_true(metric_says(m, "spotdrain_kube_events_dropped_total{reason=\"backlog\"} 1"));
        fx_teardown(&st);

        /* The drains asked Events to give way (their evictions need the rate): none is sent until then, and
         * one is again after it. */
        o.qps = -1;
        fx_setup_opts(&st, &o);
        fx = st;
        kfake_add(fx->fake, &(struct kfake_script){ .method = "POST",
                                                    .path = "/api/v1/namespaces/default/events",
                                                    .status = 201,
                                                    .body = "{}",
                                                    .sticky = true });
        uint64_t until = clk_now() + 2 * USEC;
        kube_client_events_yield(fx->client, until);
        kube_client_events_yield(fx->client, until - USEC); /* earlier: changes nothing */
        assert_int_equal(kube_event_create(fx->client, &shed_event, NULL, NULL, NULL), -EAGAIN);
        assert_true(metric_says(m, "spotdrain_kube_events_dropped_total{reason=\"short\"} 1"));
        bool past = false;
        struct timer *t = NULL;
        assert_int_equal(timer_start_in(fx->loop, until - clk_now() + 1, on_flag, &past, &t), 0);
        assert_int_equal(loop_run_until(fx->loop, &past, WAIT_USEC), 0);
        struct count sent = { .want = 1 };
        assert_int_equal(kube_event_create(fx->client, &shed_event, count_done, &sent, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &sent.reached, WAIT_USEC), 0);
        assert_int_equal(sent.ok, 1);
        assert_int_equal(kfake_count(fx->fake), 1);
        fx_teardown(&st);
        metrics_free(m);
}

static void on_flag(void *userdata)
{
        *(bool *)userdata = true;
}

/* An Event that waits behind answers slow to come (every request slot taken, no rate limiting it) is sent
 * when a slot frees, however long that took: the API is not short then, the machine is (valgrind, a loaded
 * CI runner). Only time the queue was held by the rate counts towards "backlog". */
static void test_event_behind_slow_answers_kept(void **state)
{
        struct metrics *m = NULL;
        assert_int_equal(metrics_new(&m), 0);
        void *st = NULL;
        struct kube_client_options o = { .qps = -1,
                                         .backoff_base_usec = 1000,
                                         .backoff_max_usec = 5000,
                                         .idle_timeout_usec = 120 * USEC,
                                         .metrics = m };
        fx_setup_opts(&st, &o);
        struct fx *fx = st;
        struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = "/api/v1/nodes/n", .status = 200, .body = "{}", .sticky = true });
        kfake_answer(fx->fake, "POST", "/api/v1/namespaces/default/events", 201, "{}");
        kfake_set_hook(fx->fake, gate_hook, &g);
        struct count gets = { .want = 64 }, ev = { .want = 1 };
        for (int i = 0; i < 64; i++)
                assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n", count_done, &gets, NULL), 0);
        struct stats_wait w = { .fx = fx, .ready = in_flight_full, .rate = 64 };
        stats_poll(&w);
        assert_int_equal(loop_run_until(fx->loop, &w.reached, WAIT_USEC), 0);
        assert_int_equal(kube_event_create(fx->client, &shed_event, count_done, &ev, NULL), 0);
        /* 11 s of the engine's clock with the Event queued behind the 64 answers held back. */
        bool waited = false;
        struct timer *t = NULL;
        clk_set_scale(20);
        assert_int_equal(timer_start_in(fx->loop, 11 * USEC, on_flag, &waited, &t), 0);
        int r = loop_run_until(fx->loop, &waited, WAIT_USEC);
        clk_set_scale(1);
        assert_int_equal(r, 0);
        pthread_mutex_lock(&g.lock);
        g.open = true;
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        assert_int_equal(loop_run_until(fx->loop, &ev.reached, WAIT_USEC), 0);
        kfake_set_hook(fx->fake, NULL, NULL);
        assert_int_equal(ev.ok, 1);
        assert_true(kfake_find(fx->fake, "POST", "/api/v1/namespaces/default/events", 0) >= 0);
        assert_false(metric_says(m, "reason=\"backlog\""));
        assert_int_equal(loop_run_until(fx->loop, &gets.reached, WAIT_USEC), 0);
        fx_teardown(&st);
        metrics_free(m);
}

static void test_lease_get_and_conflict(void **state)
{
        struct fx *fx = *state;
        const char *path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/spotdrain";
        kfake_answer(
            fx->fake, "GET", path, 200,
            "{\"kind\":\"Lease\",\"metadata\":{\"name\":\"spotdrain\",\"namespace\":\"kube-system\","
            "\"resourceVersion\":\"77\"},\"spec\":{\"holderIdentity\":\"pod-a\",\"leaseDurationSeconds\":15,"
            "\"renewTime\":\"2026-11-30T06:00:00.500000Z\",\"leaseTransitions\":2}}");
        kfake_answer(fx->fake, "PUT", path, 409,
                     "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409,\"message\":\"modified\"}");
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_lease_get(fx->client, "kube-system", "spotdrain", kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        struct kube_lease l;
        assert_int_equal(kube_lease_parse(s.result.object, &l), 0);
        kube_result_clear(&s.result);
        assert_string_equal(l.holder_identity, "pod-a");
        assert_string_equal(l.resource_version, "77");
        assert_int_equal(l.lease_duration_seconds, 15);
        assert_int_equal(l.lease_transitions, 2);
        assert_int_equal(l.renew_time_usec % 1000000, 500000);

        free(l.holder_identity);
        l.holder_identity = strdup("pod-b");
        s = (struct kube_sync){ 0 };
        r = kube_lease_update(fx->client, &l, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -ESTALE);
        assert_int_equal(s.result.http_status, 409);
        kube_result_clear(&s.result);
        cJSON *body = parse(req(fx, 1)->body);
        assert_string_equal(kube_object_rv(body), "77");
        assert_string_equal(kube_object_str(body, "spec.holderIdentity"), "pod-b");
        assert_string_equal(kube_object_str(body, "spec.renewTime"), "2026-11-30T06:00:00.500000Z");
        cJSON_Delete(body);
        kube_lease_clear(&l);
}

static void test_cancel(void **state)
{
        struct fx *fx = *state;
        kube_client_set_rate(fx->client, 0.001, 1);
        struct count n = { .want = 1 };
        struct kube_call *a = NULL, *b = NULL;
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/a", 200, "{}");
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/a", count_done, &n, &a), 0);
        assert_int_equal(kube_get(fx->client, "/api/v1/nodes/b", count_done, &n, &b), 0);
        /* b waits for a token; cancelling it takes it out of the queue without a callback. */
        kube_call_cancel(b);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        struct kube_client_stats st;
        kube_client_stats(fx->client, &st);
        assert_int_equal(st.queued, 0);
        assert_int_equal(n.done, 1);
        assert_int_equal(kfake_count(fx->fake), 1);
}

/* ---- exec credential plugins (tests/unit/data/kubeconfig/exec-plugin.sh) ---- */

struct plugin_dir {
        char path[64];
};

/* Switches the fixture to an exec plugin whose state lives in a fresh directory. */
static void fx_use_exec(struct fx *fx, struct plugin_dir *d)
{
        strcpy(d->path, "/tmp/spotdrain-kube-exec-XXXXXX");
        assert_non_null(mkdtemp(d->path));
        assert_int_equal(setenv("PLUGIN_STATE_DIR", d->path, 1), 0);
        kube_client_free(fx->client);
        kube_config_free(fx->cfg);
        fx->cfg = NULL;
        assert_int_equal(
            kube_config_load_file("tests/unit/data/kubeconfig/exec-v1.yaml", NULL, &fx->cfg, NULL), 0);
        assert_int_equal(free_and_strdup(&fx->cfg->server, kfake_url(fx->fake)), 0);
        free(fx->cfg->ca_pem);
        fx->cfg->ca_pem = NULL;
        struct kube_client_options o = { .qps = -1, .backoff_base_usec = 1000, .backoff_max_usec = 5000 };
        assert_int_equal(kube_client_new(fx->loop, fx->cfg, &o, &fx->client), 0);
}

static int plugin_runs(const struct plugin_dir *d)
{
        char p[96];
        snprintf(p, sizeof(p), "%s/runs", d->path);
        _cleanup_free_ char *s = NULL;
        size_t len;
        assert_int_equal(read_file_full(p, 64, &s, &len), 0);
        return atoi(s);
}

static void plugin_dir_remove(struct plugin_dir *d)
{
        const char *names[] = { "runs", "exec-info.json", "go" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                char p[96];
                snprintf(p, sizeof(p), "%s/%s", d->path, names[i]);
                unlink(p);
        }
        assert_int_equal(rmdir(d->path), 0);
        unsetenv("PLUGIN_STATE_DIR");
        unsetenv("PLUGIN_WAIT_FOR");
        unsetenv("PLUGIN_EXIT");
}

struct go_file {
        const struct plugin_dir *d;
        const struct count *n;
        bool fired_before_answers;
};

static void go_file_create(void *userdata)
{
        struct go_file *g = userdata;
        g->fired_before_answers = g->n->done == 0;
        char p[96];
        snprintf(p, sizeof(p), "%s/go", g->d->path);
        assert_int_equal(write_file_atomic(p, "", 0, 0600), 0);
}

static void test_exec_plugin_one_run_loop_free(void **state)
{
        struct fx *fx = *state;
        struct plugin_dir d;
        fx_use_exec(fx, &d);
        /* the plugin answers once a loop timer has created its file: the loop must keep running meanwhile */
        assert_int_equal(setenv("PLUGIN_WAIT_FOR", "go", 1), 0);
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = "/api/v1/nodes/n1", .status = 200, .body = "{}", .sticky = true });
        struct count n = { .want = 3 };
        for (int i = 0; i < 3; i++)
                assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n1", count_done, &n, NULL), 0);
        struct go_file g = { .d = &d, .n = &n };
        assert_int_equal(timer_start_in(fx->loop, 1000, go_file_create, &g, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_true(g.fired_before_answers);
        assert_int_equal(n.ok, 3);
        assert_int_equal(plugin_runs(&d), 1);
        assert_int_equal(kfake_count(fx->fake), 3);
        for (size_t i = 0; i < 3; i++)
                assert_string_equal(req(fx, i)->authorization, "Bearer hello-1");
        plugin_dir_remove(&d);
}

static void test_exec_plugin_401_reruns_once(void **state)
{
        struct fx *fx = *state;
        struct plugin_dir d;
        fx_use_exec(fx, &d);
        const char *unauthorized = "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}";
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 401, unauthorized);
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 401, unauthorized);
        kfake_add(
            fx->fake,
            &(struct kfake_script){
                .method = "GET", .path = "/api/v1/nodes/n1", .status = 200, .body = "{}", .sticky = true });
        /* both go out with hello-1 and come back 401: the first forgets it, the second (about the same
         * credential) does not make the plugin run a third time */
        struct count n = { .want = 2 };
        for (int i = 0; i < 2; i++)
                assert_int_equal(kube_get(fx->client, "/api/v1/nodes/n1", count_done, &n, NULL), 0);
        assert_int_equal(loop_run_until(fx->loop, &n.reached, WAIT_USEC), 0);
        assert_int_equal(n.ok, 2);
        assert_int_equal(plugin_runs(&d), 2);
        assert_int_equal(kfake_count(fx->fake), 4);
        assert_string_equal(req(fx, 0)->authorization, "Bearer hello-1");
        assert_string_equal(req(fx, 1)->authorization, "Bearer hello-1");
        assert_string_equal(req(fx, 2)->authorization, "Bearer hello-2");
        assert_string_equal(req(fx, 3)->authorization, "Bearer hello-2");
        plugin_dir_remove(&d);
}

static void test_exec_plugin_failure_fails_calls(void **state)
{
        struct fx *fx = *state;
        struct plugin_dir d;
        fx_use_exec(fx, &d);
        assert_int_equal(setenv("PLUGIN_EXIT", "3", 1), 0);
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(fx->client, "/api/v1/nodes/n1", kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), -EIO);
        if (!strstr(s.result.message, "GET /api/v1/nodes/n1: no credentials: exec plugin ") ||
            !strstr(s.result.message,
                    "exec-plugin.sh: exited with status 3 (stderr: exec-plugin.sh: failing on "
                    "purpose)"))
                fail_msg("message: %s", s.result.message);
        kube_result_clear(&s.result);
        assert_int_equal(kfake_count(fx->fake), 0);
        plugin_dir_remove(&d);
}

/* ---- shadow mode ---- */

struct dry_counts {
        char seen[512];
};

static void count_action(const char *action, void *userdata)
{
        struct dry_counts *d = userdata;
        size_t used = strlen(d->seen);
        snprintf(d->seen + used, sizeof(d->seen) - used, "%s;", action);
}

/* --dry-run: every write is kept back where requests leave the client, said ("would ...") and counted,
 * and answered as accepted; reads go out (the taint's read-modify-write reads the node). */
static void test_dry_run_sends_no_write(void **state)
{
        struct fx *fx = *state;
        struct dry_counts counts = { { 0 } };
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r;

        assert_non_null(out);
        kfake_add(fx->fake, &(struct kfake_script){
                                .method = "GET", .path = "/api/v1", .status = 200, .body = DISCOVERY_V1 });
        kfake_answer(fx->fake, "GET", "/api/v1/nodes/n1", 200,
                     "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"1\"},\"spec\":{}}");
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        log_set_output(out);
        dry_run_enable(count_action, &counts);

        s = evict(fx, "a", -1);
        assert_int_equal(s.result.error, 0);
        assert_int_equal(kube_evict_outcome(&s.result), KUBE_EVICT_EVICTED);
        kube_result_clear(&s.result);

        s = (struct kube_sync){ 0 };
        r = kube_node_cordon(fx->client, "n1", true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        s = (struct kube_sync){ 0 };
        r = kube_pod_delete(fx->client, "shop", "b", "uid-b", 5, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        struct kube_taint t = { .key = (char *)"k", .value = (char *)"v", .effect = (char *)"NoSchedule" };
        s = (struct kube_sync){ 0 };
        r = kube_node_taint(fx->client, "n1", &t, true, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        struct kube_event_spec e = { .involved_kind = "Pod",
                                     .involved_namespace = "shop",
                                     .involved_name = "a",
                                     .reason = "Evicted",
                                     .message = "m" };
        s = (struct kube_sync){ 0 };
        r = kube_event_create(fx->client, &e, kube_sync_done, &s, &call);
        assert_int_equal(kube_sync_wait(fx->client, r, call, &s, WAIT_USEC), 0);
        kube_result_clear(&s.result);

        dry_run_disable();
        log_set_output(NULL);
        fclose(out);

        /* Only the reads reached the server. */
        assert_int_equal(kfake_count(fx->fake), 2);
        for (size_t i = 0; i < kfake_count(fx->fake); i++)
                assert_string_equal(req(fx, i)->method, "GET");
        assert_string_equal(counts.seen, "evict pod;cordon node;delete pod;patch nodes;create events;");
        assert_non_null(
            strstr(text, "would evict pod shop/a (POST /api/v1/namespaces/shop/pods/a/eviction)"));
        assert_non_null(strstr(text, "would cordon node n1"));
        assert_non_null(strstr(text, "would delete pod shop/b"));
        assert_non_null(strstr(text, "would create events in shop"));
        free(text);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_list_pages_and_selectors, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_get_retries_5xx, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_dry_run_sends_no_write, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_chunks_and_bookmark, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_crlf_and_last_line, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_gone_relists, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_resumes_after_stall, fx_setup_idle, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_resume_by_owner, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_owner_resume_finds_stall, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_owner_resume_nothing_missed, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_informer_compact, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_informer, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_get_429_retry_after, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_transport_errors_retried, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_bad_json_answer, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_list_continue_expired, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_stop_inside_callback, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_watch_failure_reports_and_relists, fx_setup,
                                                fx_teardown),
                cmocka_unit_test_setup_teardown(test_informer_many, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_cordon, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_taint_conflict_retry, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_label_owned, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_taint_remove_and_labels, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_evict_outcomes, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_evict_v1beta1_fallback, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_delete_grace_uid, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_401_rereads_token, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_401_twice_fails, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_403_names_verb_and_resource, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_403_by_admission_quotes_the_server, fx_setup,
                                                fx_teardown),
                cmocka_unit_test_setup_teardown(test_rate_limiter_queues, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_queue_by_deadline, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_apf_slows_and_recovers, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_apf_pause_lets_urgent_through, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_apf_urgent_retry_waits, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_in_flight_cap, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_pdb_429_does_not_slow, fx_setup, fx_teardown),
                cmocka_unit_test(test_event_behind_slow_answers_kept),
                cmocka_unit_test_setup_teardown(test_event_create_and_repeat, fx_setup, fx_teardown),
                cmocka_unit_test(test_events_shed_first),
                cmocka_unit_test_setup_teardown(test_lease_get_and_conflict, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_cancel, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_exec_plugin_one_run_loop_free, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_exec_plugin_401_reruns_once, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_exec_plugin_failure_fails_calls, fx_setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
