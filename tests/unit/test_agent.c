/* The agent's poll loop and actions against a tiny fault-injecting fake IMDS (500s, timeouts, a hung
 * connection, garbage JSON, token expiry, unreachable at start), and end to end against the simulator's
 * IMDS and Kubernetes surfaces with the Kubernetes actions. Every notice must be acted on exactly once. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/imds.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/yaml.h"

#define BOUND_USEC (15ULL * 1000000ULL)
#define POLL_USEC  (20ULL * 1000ULL)
#define INSTANCE   "i-0abcd1234ef567890"
#define HOSTNAME   "ip-10-0-1-23.ec2.internal"

enum {
        DOC_ACTION,
        DOC_REBALANCE,
        DOC_SCHEDULED,
        DOC_LIFECYCLE,
        DOC_HISTORY,
        _DOC_MAX,
};
static const char *const doc_paths[_DOC_MAX] = {
        "/latest/meta-data/spot/instance-action",
        "/latest/meta-data/events/recommendations/rebalance",
        "/latest/meta-data/events/maintenance/scheduled",
        "/latest/meta-data/autoscaling/target-lifecycle-state",
        "/latest/meta-data/events/maintenance/history",
};

/* ---- the fake IMDS ---- */

struct fake {
        struct MHD_Daemon *daemon;
        uint16_t port;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stopping;
        unsigned token_seq;
        char *docs[_DOC_MAX]; /* NULL: 404 */
        unsigned fail_500, hang, garbage;
        unsigned requests, unauthorized;
};

static struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static enum MHD_Result fake_reply(struct MHD_Connection *c, unsigned status, const char *body)
{
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;
        if (!r)
                return MHD_NO;
        ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result fake_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
        static int marker;
        char token[32], body[1024];
        const char *sent;
        unsigned status = 404;

        if (!*con_cls) {
                *con_cls = &marker;
                return MHD_YES;
        }
        if (*upload_data_size) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        pthread_mutex_lock(&fake.lock);
        fake.requests++;
        if (fake.hang > 0) {
                struct timespec ts;
                fake.hang--;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 3;
                /* Bounded: ends after 3 s or when the fake stops. */
                while (!fake.stopping && pthread_cond_timedwait(&fake.cond, &fake.lock, &ts) == 0)
                        ;
                pthread_mutex_unlock(&fake.lock);
                return MHD_NO;
        }
        if (fake.fail_500 > 0) {
                fake.fail_500--;
                pthread_mutex_unlock(&fake.lock);
                return fake_reply(c, 500, "boom");
        }
        snprintf(token, sizeof(token), "tok-%u", fake.token_seq);
        if (streq(method, "PUT") && streq(url, "/latest/api/token")) {
                pthread_mutex_unlock(&fake.lock);
                if (!MHD_lookup_connection_value(c, MHD_HEADER_KIND, IMDS_TOKEN_TTL_HEADER))
                        return fake_reply(c, 400, "no ttl");
                return fake_reply(c, 200, token);
        }
        sent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, IMDS_TOKEN_HEADER);
        if (!streq(sent, token)) {
                fake.unauthorized++;
                pthread_mutex_unlock(&fake.lock);
                return fake_reply(c, 401, "unauthorized");
        }
        body[0] = '\0';
        if (streq(url, "/latest/meta-data/instance-id")) {
                status = 200;
                snprintf(body, sizeof(body), INSTANCE);
        } else if (streq(url, "/latest/meta-data/local-hostname")) {
                status = 200;
                snprintf(body, sizeof(body), HOSTNAME);
        } else if (streq(url, "/latest/meta-data/placement/region")) {
                status = 200;
                snprintf(body, sizeof(body), "us-east-1");
        } else
                for (unsigned i = 0; i < _DOC_MAX; i++)
                        if (streq(url, doc_paths[i]) && fake.docs[i]) {
                                status = 200;
                                if (fake.garbage > 0) {
                                        fake.garbage--;
                                        snprintf(body, sizeof(body), "{\"action\": [tru");
                                } else
                                        snprintf(body, sizeof(body), "%s", fake.docs[i]);
                        }
        pthread_mutex_unlock(&fake.lock);
        return fake_reply(c, status, status == 404 ? "<html>404 - Not Found</html>" : body);
}

static void fake_start(uint16_t port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fake.stopping = false;
        fake.daemon =
            MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL,
                             fake_handler, NULL, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
        assert_non_null(fake.daemon);
        fake.port = MHD_get_daemon_info(fake.daemon, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void fake_stop(void)
{
        pthread_mutex_lock(&fake.lock);
        fake.stopping = true;
        pthread_cond_broadcast(&fake.cond);
        pthread_mutex_unlock(&fake.lock);
        if (fake.daemon)
                MHD_stop_daemon(fake.daemon);
        fake.daemon = NULL;
}

static void fake_set(unsigned doc, const char *body)
{
        pthread_mutex_lock(&fake.lock);
        free(fake.docs[doc]);
        fake.docs[doc] = body ? strdup(body) : NULL;
        pthread_mutex_unlock(&fake.lock);
}

static void fake_reset(void)
{
        for (unsigned i = 0; i < _DOC_MAX; i++)
                fake_set(i, NULL);
        pthread_mutex_lock(&fake.lock);
        fake.fail_500 = fake.hang = fake.garbage = 0;
        fake.requests = fake.unauthorized = 0;
        fake.token_seq++;
        pthread_mutex_unlock(&fake.lock);
}

/* ---- recording actions ---- */

struct rec {
        unsigned drains, soft_add, soft_remove, replacements, uncordons, seen;
        enum notice_kind drain_kind;
        uint64_t drain_deadline;
        char self_name[64];
        char node[128];
};

static int rec_drain(void *userdata, const struct agent_drain_request *req)
{
        struct rec *r = userdata;
        r->drains++;
        r->drain_kind = req->notice->kind;
        r->drain_deadline = req->deadline_usec;
        snprintf(r->self_name, sizeof(r->self_name), "%s", req->self_name ? req->self_name : "");
        snprintf(r->node, sizeof(r->node), "%s", req->node);
        return 0;
}

static int rec_soft_taint(void *userdata, const char *node, bool add)
{
        struct rec *r = userdata;
        if (add)
                r->soft_add++;
        else
                r->soft_remove++;
        return 0;
}

static int rec_replacement(void *userdata, const char *node, const struct notice *n)
{
        ((struct rec *)userdata)->replacements++;
        return 0;
}

static int rec_uncordon(void *userdata, const char *node)
{
        ((struct rec *)userdata)->uncordons++;
        return 0;
}

static void rec_seen(void *userdata, const char *node, const struct notice *n)
{
        ((struct rec *)userdata)->seen++;
}

static const struct agent_actions rec_actions = {
        .drain = rec_drain,
        .soft_taint = rec_soft_taint,
        .replacement_request = rec_replacement,
        .uncordon = rec_uncordon,
        .notice_seen = rec_seen,
};

/* ---- harness ---- */

struct fixture {
        struct loop *loop;
        struct imds_client *imds;
        struct agent *agent;
        struct rec rec;
};

/* Runs the loop until pred(f) holds, checking every 5 ms, at most BOUND_USEC. */
struct waiter {
        struct fixture *f;
        bool (*pred)(struct fixture *f);
        bool done;
        struct timer *timer;
};

static void waiter_check(void *userdata)
{
        struct waiter *w = userdata;
        w->timer = NULL;
        if (w->pred(w->f)) {
                w->done = true;
                return;
        }
        assert_int_equal(timer_start_in(w->f->loop, 5000, waiter_check, w, &w->timer), 0);
}

static void run_until(struct fixture *f, bool (*pred)(struct fixture *f))
{
        struct waiter w = { .f = f, .pred = pred };
        assert_int_equal(timer_start_in(f->loop, 0, waiter_check, &w, &w.timer), 0);
        assert_int_equal(loop_run_until(f->loop, &w.done, BOUND_USEC), 0);
        timer_cancel(w.timer);
}

static uint64_t tick_target;
static bool ticks_reached(struct fixture *f)
{
        struct agent_stats st;
        agent_stats(f->agent, &st);
        return st.ticks >= tick_target;
}

/* Lets n more polls happen. */
static void run_ticks(struct fixture *f, unsigned n)
{
        struct agent_stats st;
        agent_stats(f->agent, &st);
        tick_target = st.ticks + n;
        run_until(f, ticks_reached);
}

static bool drained(struct fixture *f)
{
        return f->rec.drains > 0;
}

static bool ready(struct fixture *f)
{
        return agent_ready(f->agent);
}

static void start_agent(struct fixture *f, const struct agent_options *extra, uint64_t timeout_usec)
{
        struct agent_options o = extra ? *extra : (struct agent_options){};
        _cleanup_free_ char *url = strprintf("http://127.0.0.1:%u", fake.port);

        if (!o.poll_interval_usec)
                o.poll_interval_usec = POLL_USEC;
        if (!o.backoff_max_usec)
                o.backoff_max_usec = 100000;
        assert_int_equal(imds_client_new(f->loop,
                                         &(struct imds_options){ .endpoint = url,
                                                                 .timeout_usec = timeout_usec,
                                                                 .backoff_base_usec = 10000,
                                                                 .backoff_max_usec = 50000 },
                                         &f->imds),
                         0);
        assert_int_equal(agent_new(f->loop, f->imds, NULL, &o, &rec_actions, &f->rec, &f->agent), 0);
        assert_int_equal(agent_start(f->agent), 0);
}

static void stop_agent(struct fixture *f)
{
        f->agent = agent_free(f->agent);
        f->imds = imds_client_free(f->imds);
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        fake_reset();
        fake_start(0);
        assert_int_equal(loop_new(&f->loop), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        stop_agent(f);
        loop_free(f->loop);
        fake_stop();
        fake_reset();
        free(f);
        return 0;
}

static char *instance_action(uint64_t at)
{
        char t[32];
        assert_int_equal(format_rfc3339(at, t, sizeof(t)), 0);
        return strprintf("{\"action\": \"terminate\", \"time\": \"%s\"}", t);
}

static char *scheduled(uint64_t start, const char *state)
{
        static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
        time_t t = (time_t)(start / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        return strprintf(
            "[ {\"NotBefore\" : \"%02d %s %04d %02d:%02d:%02d GMT\", \"Code\" : \"system-reboot\", "
            "\"Description\" : \"scheduled reboot\", \"EventId\" : "
            "\"instance-event-0d59937288b749b32\", \"NotAfter\" : \"%02d %s %04d 23:59:59 GMT\", "
            "\"State\" : \"%s\"} ]",
            tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_mday,
            months[tm.tm_mon], tm.tm_year + 1900, state);
}

/* ---- tests ---- */

static void test_interruption_once(void **state)
{
        struct fixture *f = *state;
        uint64_t at = (clk_now() / 1000000 + 120) * 1000000;
        _cleanup_free_ char *doc = instance_action(at);
        struct agent_stats st;

        start_agent(f,
                    &(struct agent_options){ .node_name = "node-1",
                                             .self_namespace = "kube-system",
                                             .self_name = "spotdrain-agent-x" },
                    0);
        run_until(f, ready);
        assert_int_equal(f->rec.drains, 0);
        assert_string_equal(agent_node_name(f->agent), "node-1");
        assert_string_equal(agent_instance_id(f->agent), INSTANCE);

        fake_set(DOC_ACTION, doc);
        run_until(f, drained);
        run_ticks(f, 10);
        /* Seen on every poll, acted on once. */
        assert_int_equal(f->rec.drains, 1);
        assert_int_equal(f->rec.seen, 1);
        assert_int_equal(f->rec.drain_kind, NOTICE_SPOT_INTERRUPTION);
        assert_int_equal(f->rec.drain_deadline, at);
        assert_string_equal(f->rec.node, "node-1");
        assert_string_equal(f->rec.self_name, "spotdrain-agent-x");
        agent_stats(f->agent, &st);
        assert_true(st.duplicates >= 9);
        assert_int_equal(st.notices, 1);
        assert_int_equal(st.notice_counts[NOTICE_SPOT_INTERRUPTION], 1);

        /* A restarted agent sees the notice again and drains again (the drain is idempotent). */
        stop_agent(f);
        memset(&f->rec, 0, sizeof(f->rec));
        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, drained);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
}

static void test_identity_from_imds(void **state)
{
        struct fixture *f = *state;
        unsetenv("NODE_NAME");
        start_agent(f, NULL, 0);
        run_until(f, ready);
        assert_string_equal(agent_node_name(f->agent), HOSTNAME);
        assert_string_equal(agent_instance_id(f->agent), INSTANCE);

        stop_agent(f);
        setenv("NODE_NAME", "from-env", 1);
        start_agent(f, NULL, 0);
        run_until(f, ready);
        assert_string_equal(agent_node_name(f->agent), "from-env");
        unsetenv("NODE_NAME");
}

static bool soft_removed(struct fixture *f)
{
        return f->rec.soft_remove > 0;
}

static void test_rebalance_reverted(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = NULL;
        char t[32];

        assert_int_equal(format_rfc3339(clk_now(), t, sizeof(t)), 0);
        doc = strprintf("{\"noticeTime\": \"%s\"}", t);
        fake_set(DOC_REBALANCE, doc);
        start_agent(
            f, &(struct agent_options){ .node_name = "node-1", .dispatch.rebalance_revert_usec = 3000000 },
            0);
        run_until(f, ready);
        assert_int_equal(f->rec.soft_add, 1);
        assert_int_equal(f->rec.replacements, 1);
        assert_int_equal(f->rec.soft_remove, 0);
        /* No interruption within the revert time: the taint goes, and the document still in IMDS does not
         * bring it back. */
        run_until(f, soft_removed);
        run_ticks(f, 5);
        assert_int_equal(f->rec.soft_add, 1);
        assert_int_equal(f->rec.soft_remove, 1);
        assert_int_equal(f->rec.drains, 0);
}

static void test_rebalance_then_interruption(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = NULL, *action = instance_action(clk_now() + 120000000);
        char t[32];

        assert_int_equal(format_rfc3339(clk_now(), t, sizeof(t)), 0);
        doc = strprintf("{\"noticeTime\": \"%s\"}", t);
        fake_set(DOC_REBALANCE, doc);
        start_agent(
            f, &(struct agent_options){ .node_name = "node-1", .dispatch.rebalance_revert_usec = 3000000 },
            0);
        run_until(f, ready);
        assert_int_equal(f->rec.soft_add, 1);
        fake_set(DOC_ACTION, action);
        run_until(f, drained);
        /* Past the revert time: the soft taint stays on a node that is going. */
        uint64_t until = clk_now() + 3500000;
        while (clk_now() < until)
                run_ticks(f, 5);
        assert_int_equal(f->rec.soft_remove, 0);
        assert_int_equal(f->rec.drains, 1);
}

static bool uncordoned(struct fixture *f)
{
        return f->rec.uncordons > 0;
}

static void test_maintenance(void **state)
{
        struct fixture *f = *state;
        uint64_t start = (clk_now() / 1000000 + 3600) * 1000000;
        _cleanup_free_ char *active = scheduled(start, "active"), *canceled = scheduled(start, "canceled");

        /* An hour ahead with a 2 h lead: drain now, by the start. */
        fake_set(DOC_SCHEDULED, active);
        start_agent(f,
                    &(struct agent_options){ .node_name = "node-1",
                                             .dispatch.maintenance_lead_usec = 7200ULL * 1000000 },
                    0);
        run_until(f, drained);
        assert_int_equal(f->rec.drain_kind, NOTICE_SCHEDULED_CHANGE);
        assert_int_equal(f->rec.drain_deadline, start);
        fake_set(DOC_SCHEDULED, canceled);
        run_until(f, uncordoned);
        run_ticks(f, 5);
        assert_int_equal(f->rec.uncordons, 1);
        assert_int_equal(f->rec.drains, 1);

        /* With the default 10 min lead, an event an hour away is only remembered; its cancellation has
         * nothing to undo. */
        stop_agent(f);
        memset(&f->rec, 0, sizeof(f->rec));
        fake_set(DOC_SCHEDULED, active);
        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        run_ticks(f, 5);
        assert_int_equal(f->rec.drains, 0);
        assert_int_equal(f->rec.seen, 1);
        fake_set(DOC_SCHEDULED, canceled);
        run_ticks(f, 5);
        assert_int_equal(f->rec.seen, 2);
        assert_int_equal(f->rec.uncordons, 0);
        assert_int_equal(f->rec.drains, 0);
        fake_set(DOC_SCHEDULED, "[]");
        run_ticks(f, 3);
}

/* IMDS history: a canceled event there is not told again at every start; a completed reboot is (it is waited
 * on, to uncordon the node). */
static void test_history(void **state)
{
        struct fixture *f = *state;
        uint64_t start = (clk_now() / 1000000 - 600) * 1000000;
        _cleanup_free_ char *canceled = scheduled(start, "canceled"),
                            *completed = scheduled(start, "completed");

        fake_set(DOC_HISTORY, canceled);
        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        run_ticks(f, 5);
        assert_int_equal(f->rec.seen, 0);
        fake_set(DOC_HISTORY, completed);
        run_ticks(f, 5);
        assert_int_equal(f->rec.seen, 1);
        assert_int_equal(f->rec.drains, 0);
        assert_int_equal(f->rec.uncordons, 0);
}

static void test_asg_terminated(void **state)
{
        struct fixture *f = *state;

        fake_set(DOC_LIFECYCLE, "InService");
        start_agent(f, &(struct agent_options){ .node_name = "node-1", .asg_deadline_usec = 120000000 }, 0);
        run_until(f, ready);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 0);
        fake_set(DOC_LIFECYCLE, "Terminated");
        uint64_t seen = clk_now();
        run_until(f, drained);
        run_ticks(f, 5);
        assert_int_equal(f->rec.drains, 1);
        assert_int_equal(f->rec.drain_kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        /* The configured hook timeout from when the state was seen, not the 1 h default. */
        assert_true(f->rec.drain_deadline >= seen + 120000000);
        assert_true(f->rec.drain_deadline < clk_now() + 120000000);
}

static void test_fault_500(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        struct agent_stats st;

        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        pthread_mutex_lock(&fake.lock);
        fake.fail_500 = 30;
        pthread_mutex_unlock(&fake.lock);
        fake_set(DOC_ACTION, doc);
        run_until(f, drained);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
        agent_stats(f->agent, &st);
        assert_true(st.path_errors > 0);
}

static void test_fault_hang_and_timeout(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        struct agent_stats st;

        /* A 200 ms request timeout against answers that never come. */
        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 200000);
        run_until(f, ready);
        pthread_mutex_lock(&fake.lock);
        fake.hang = 6;
        pthread_mutex_unlock(&fake.lock);
        fake_set(DOC_ACTION, doc);
        run_until(f, drained);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
        agent_stats(f->agent, &st);
        assert_true(st.path_errors > 0);
}

static void test_fault_garbage(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        struct agent_stats st;

        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        pthread_mutex_lock(&fake.lock);
        fake.garbage = 5;
        pthread_mutex_unlock(&fake.lock);
        fake_set(DOC_ACTION, doc);
        run_until(f, drained);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
        agent_stats(f->agent, &st);
        assert_int_equal(st.parse_errors, 5);
}

static void test_fault_token_expiry(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        struct imds_stats st;

        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        /* Every token issued so far stops working, and the notice appears at the same moment. */
        pthread_mutex_lock(&fake.lock);
        fake.token_seq++;
        pthread_mutex_unlock(&fake.lock);
        fake_set(DOC_ACTION, doc);
        run_until(f, drained);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
        imds_client_stats(f->imds, &st);
        assert_true(st.unauthorized >= 1);
        assert_int_equal(st.tokens, 2);
}

static bool token_failed_twice(struct fixture *f)
{
        struct imds_stats st;
        imds_client_stats(f->imds, &st);
        return st.token_failures >= 2;
}

static void test_unreachable_at_start(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        uint16_t port = fake.port;

        /* IMDS is down when the agent starts (nothing listens on its port), and comes up later. */
        fake_stop();
        start_agent(f, NULL, 0);
        run_until(f, token_failed_twice);
        assert_null(agent_node_name(f->agent));
        assert_false(agent_ready(f->agent));
        fake_set(DOC_ACTION, doc);
        fake_start(port);
        run_until(f, drained);
        assert_string_equal(agent_node_name(f->agent), HOSTNAME);
        run_ticks(f, 3);
        assert_int_equal(f->rec.drains, 1);
}

static bool three_tick_errors(struct fixture *f)
{
        struct agent_stats st;
        agent_stats(f->agent, &st);
        return st.tick_errors >= 3;
}

static void test_imds_down_mid_run(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *doc = instance_action(clk_now() + 120000000);
        uint16_t port = fake.port;

        start_agent(f, &(struct agent_options){ .node_name = "node-1" }, 0);
        run_until(f, ready);
        fake_stop();
        /* Every poll that starts after the stop fails (one already under way may have had its answers):
         * the agent keeps polling, with errors, until IMDS is back. */
        run_until(f, three_tick_errors);
        assert_int_equal(f->rec.drains, 0);
        fake_set(DOC_ACTION, doc);
        fake_start(port);
        run_until(f, drained);
        assert_int_equal(f->rec.drains, 1);
}

/* ---- end to end: simulator IMDS + Kubernetes surfaces, Kubernetes actions ---- */

static const char e2e_yaml[] = "name: agent-e2e\n"
                               "budget_seconds: 120\n"
                               "nodes:\n"
                               "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a}\n"
                               "  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b}\n"
                               "events:\n"
                               "  - {at: 10, type: rebalance-recommendation, node: spot-a}\n"
                               "  - {at: 20, type: spot-interruption, node: spot-a}\n";

struct e2e {
        struct sim_fixture sf;
        struct kube_client *kube;
        struct sim_imds *imds;
};
static struct e2e e2e;

/* The simulator (Kubernetes and IMDS surfaces) for yaml, and a Kubernetes client on f's loop. */
static void e2e_start(struct fixture *f, const char *yaml, bool manual_clock)
{
        sim_fixture_start(&e2e.sf, yaml, &(struct sim_fixture_options){ .manual_clock = manual_clock });
        assert_int_equal(sim_imds_start(e2e.sf.sim, NULL, &e2e.imds), 0);
        assert_int_equal(kube_client_new(f->loop, e2e.sf.kcfg, NULL, &e2e.kube), 0);
}

static void e2e_stop(struct fixture *f)
{
        stop_agent(f);
        kube_client_free(e2e.kube);
        sim_imds_stop(e2e.imds);
        sim_fixture_stop(&e2e.sf);
        memset(&e2e, 0, sizeof(e2e));
}

static cJSON *node_spec(cJSON **ret_node)
{
        sim_lock(e2e.sf.sim);
        assert_int_equal(sim_get(e2e.sf.sim, SIM_NODE, NULL, "spot-a", ret_node), 0);
        sim_unlock(e2e.sf.sim);
        return cJSON_GetObjectItem(*ret_node, "spec");
}

static bool node_taint(const char *effect)
{
        cJSON *n = NULL;
        const cJSON *taints, *t;
        bool found = false;

        taints = cJSON_GetObjectItem(node_spec(&n), "taints");
        cJSON_ArrayForEach (t, taints)
                if (streq(cJSON_GetStringValue(cJSON_GetObjectItem(t, "effect")), effect))
                        found = true;
        cJSON_Delete(n);
        return found;
}

static bool node_unschedulable(void)
{
        cJSON *n = NULL;
        bool u = cJSON_IsTrue(cJSON_GetObjectItem(node_spec(&n), "unschedulable"));
        cJSON_Delete(n);
        return u;
}

/* The value of the node's exclude-from-external-load-balancers label, NULL when it has none. */
static bool lb_label_is(const char *value)
{
        cJSON *n = NULL;
        node_spec(&n);
        const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "labels");
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(labels, SPOTDRAIN_LABEL_EXCLUDE_LB));
        bool is = value ? streq_ptr(v, value) : !v;
        cJSON_Delete(n);
        return is;
}

static bool lb_label_gone(struct fixture *f)
{
        return lb_label_is(NULL);
}

static bool soft_tainted(struct fixture *f)
{
        return node_taint("PreferNoSchedule");
}

static bool soft_untainted(struct fixture *f)
{
        return !node_taint("PreferNoSchedule");
}

static bool cordoned(struct fixture *f)
{
        return node_taint("NoSchedule") && node_unschedulable();
}

static bool schedulable(struct fixture *f)
{
        return !node_taint("NoSchedule") && !node_unschedulable();
}

/* The agent as node spot-a of the simulator's cluster, reading the IMDS at imds_url, acting through
 * Kubernetes. */
static void start_agent_kube(struct fixture *f, const char *imds_url)
{
        assert_int_equal(imds_client_new(f->loop, &(struct imds_options){ .endpoint = imds_url }, &f->imds),
                         0);
        assert_int_equal(
            agent_new(f->loop, f->imds, e2e.kube,
                      &(struct agent_options){ .node_name = "spot-a", .poll_interval_usec = POLL_USEC },
                      &agent_kube_actions, e2e.kube, &f->agent),
            0);
        assert_int_equal(agent_start(f->agent), 0);
}

static void test_end_to_end(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *logbuf = NULL;
        size_t loglen = 0;
        FILE *logf;

        e2e_start(f, e2e_yaml, true);

        /* The node is named after IMDS local-hostname; its providerID matches. */
        logf = open_memstream(&logbuf, &loglen);
        assert_non_null(logf);
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        log_set_output(logf);
        assert_int_equal(imds_client_new(f->loop,
                                         &(struct imds_options){ .endpoint = sim_imds_url(e2e.imds, 0) },
                                         &f->imds),
                         0);
        assert_int_equal(agent_new(f->loop, f->imds, e2e.kube,
                                   &(struct agent_options){ .poll_interval_usec = POLL_USEC },
                                   &agent_kube_actions, e2e.kube, &f->agent),
                         0);
        assert_int_equal(agent_start(f->agent), 0);
        run_until(f, ready);
        assert_string_equal(agent_node_name(f->agent), "spot-a");
        assert_string_equal(agent_instance_id(f->agent), "i-0a00000000000000a");
        run_ticks(f, 3);

        sim_lock(e2e.sf.sim);
        sim_set_now(e2e.sf.sim, 11);
        sim_unlock(e2e.sf.sim);
        run_until(f, soft_tainted);
        assert_false(cordoned(f));

        sim_lock(e2e.sf.sim);
        sim_set_now(e2e.sf.sim, 21);
        sim_unlock(e2e.sf.sim);
        run_until(f, cordoned);
        run_ticks(f, 3);
        fflush(logf);
        assert_null(strstr(logbuf, "providerID"));

        /* The Kubernetes-side undo pieces: soft taint removed, node uncordoned and its interruption taint
         * gone. */
        stop_agent(f);
        /* A rebalance's revert also takes off the load balancers' label an earlier drain left. */
        cJSON *patch = cJSON_Parse("{\"metadata\":{\"labels\":{\"" SPOTDRAIN_LABEL_EXCLUDE_LB
                                   "\":\"" SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE "\"}}}");
        struct sim_answer a = { 0 };
        sim_lock(e2e.sf.sim);
        assert_int_equal(
            sim_patch(e2e.sf.sim, SIM_NODE, NULL, "spot-a", "application/merge-patch+json", patch, &a), 0);
        sim_unlock(e2e.sf.sim);
        cJSON_Delete(a.body);
        cJSON_Delete(patch);
        assert_true(lb_label_is(SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE));
        assert_int_equal(agent_kube_actions.soft_taint(e2e.kube, "spot-a", false), 0);
        run_until(f, soft_untainted);
        run_until(f, lb_label_gone);
        assert_int_equal(agent_kube_actions.uncordon(e2e.kube, "spot-a"), 0);
        run_until(f, schedulable);

        /* Reading node B's IMDS while claiming to be node A: the providerID check warns. */
        stop_agent(f);
        start_agent_kube(f, sim_imds_url(e2e.imds, 1));
        run_until(f, ready);
        run_ticks(f, 5);
        fflush(logf);
        assert_non_null(strstr(logbuf, "providerID"));
        log_set_output(NULL);
        log_setup(LOG_FORMAT_TEXT, LOG_ERR);
        fclose(logf);
        e2e_stop(f);
}

static bool drain_recorded(void)
{
        cJSON *n = NULL;
        sim_lock(e2e.sf.sim);
        assert_int_equal(sim_get(e2e.sf.sim, SIM_NODE, NULL, "spot-a", &n), 0);
        sim_unlock(e2e.sf.sim);
        bool has =
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "annotations"),
                                SPOTDRAIN_ANNOTATION_DRAIN) != NULL;
        cJSON_Delete(n);
        return has;
}

/* The node as a drain for a maintenance left it before the reboot: cordoned, tainted, its record naming
 * the event. */
static void leave_drained(struct fixture *f, const char *event_id)
{
        struct kube_taint t = { .key = (char *)SPOTDRAIN_TAINT_INTERRUPTION,
                                .value = (char *)"scheduled-change",
                                .effect = (char *)"NoSchedule" };
        _cleanup_free_ char *rec = drain_record_format("scheduled-change", clk_now(), clk_now(),
                                                       "i-0a00000000000000a", event_id, false);
        const char *keys[] = { SPOTDRAIN_ANNOTATION_DRAIN }, *values[] = { rec };
        struct kube_sync s[3] = {};
        struct kube_call *call = NULL;

        assert_int_equal(
            kube_sync_wait(e2e.kube,
                           kube_node_cordon(e2e.kube, "spot-a", true, kube_sync_done, &s[0], &call), call,
                           &s[0], BOUND_USEC),
            0);
        assert_int_equal(
            kube_sync_wait(e2e.kube,
                           kube_node_taint(e2e.kube, "spot-a", &t, true, kube_sync_done, &s[1], &call), call,
                           &s[1], BOUND_USEC),
            0);
        assert_int_equal(kube_sync_wait(e2e.kube,
                                        kube_node_set_meta(e2e.kube, "spot-a", true, keys, values, 1,
                                                           kube_sync_done, &s[2], &call),
                                        call, &s[2], BOUND_USEC),
                         0);
        for (size_t i = 0; i < 3; i++)
                kube_result_clear(&s[i].result);
        assert_true(cordoned(f));
}

/* Schedulable and without the drain record. node_undrain() sends the record's removal and the uncordon at
 * once, and the API server may take them in either order (seen under ASan beside stress -c 2: schedulable
 * while the record was still there): both must come, in any order. */
static bool undrained(struct fixture *f)
{
        return schedulable(f) && !drain_recorded();
}

/* NTH's reboot uncordon (issue #17): the agent restarted on a node rebooted for maintenance finds the
 * event completed in IMDS history and, the node Ready, uncordons it and drops the drain record, but only
 * when that record is of this event (spotdrain cordoned it for this reboot). */
static void test_reboot_uncordon(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *done = scheduled((clk_now() / 1000000 - 600) * 1000000, "completed"),
                            *url = strprintf("http://127.0.0.1:%u", fake.port);

        e2e_start(f, e2e_yaml, true);
        fake_set(DOC_HISTORY, done);
        /* Cordoned for another event (or by someone else): left cordoned. */
        leave_drained(f, "instance-event-0aaaaaaaaaaaaaaaa");
        start_agent_kube(f, url);
        run_until(f, ready);
        run_ticks(f, 20);
        assert_true(cordoned(f));
        assert_true(drain_recorded());

        stop_agent(f);
        leave_drained(f, "instance-event-0d59937288b749b32");
        start_agent_kube(f, url);
        run_until(f, undrained);
        e2e_stop(f);
}

static const char engine_yaml[] =
    "name: agent-engine\n"
    "budget_seconds: 120\n"
    "nodes:\n"
    "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a,"
    " allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "  - {name: od-b, instance_id: i-0b00000000000000b, zone: us-east-1b, capacity_type: on-demand,"
    " allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 3, placement: {spot-a: 3},"
    " requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1,"
    " startup_seconds: 1, pdb: {max_unavailable: 1}}\n"
    "events:\n"
    "  - {at: 1, type: spot-interruption, node: spot-a}\n";

static struct agent_engine *engine;

static bool engine_finished(struct fixture *f)
{
        return agent_engine_finished(engine) > 0;
}

static void test_engine_end_to_end(void **state)
{
        struct fixture *f = *state;
        _cleanup_(alert_bus_freep) struct alert_bus *bus = NULL;
        _cleanup_(config_freep) struct spotdrain_config *cfg = NULL;
        const struct drain_exec_result *res;
        cJSON *pods = NULL, *p;
        unsigned left = 0;

        /* Real time: the pods take their scenario seconds to stop and start. */
        e2e_start(f, engine_yaml, false);
        assert_int_equal(alert_bus_new(&bus), 0);
        /* The defaults: drain.exclude_from_load_balancers on. */
        assert_int_equal(config_new(&cfg), 0);
        assert_int_equal(agent_engine_new(e2e.kube, bus, cfg, NULL, &engine), 0);
        assert_int_equal(imds_client_new(f->loop,
                                         &(struct imds_options){ .endpoint = sim_imds_url(e2e.imds, 0) },
                                         &f->imds),
                         0);
        assert_int_equal(agent_new(f->loop, f->imds, e2e.kube,
                                   &(struct agent_options){ .poll_interval_usec = POLL_USEC,
                                                            .self_namespace = "kube-system",
                                                            .self_name = "spotdrain-agent" },
                                   &agent_engine_actions, engine, &f->agent),
                         0);
        assert_int_equal(agent_start(f->agent), 0);
        run_until(f, engine_finished);
        run_ticks(f, 5);

        /* One drain, carried out by the engine; the notice raised notice-received once. */
        assert_int_equal(agent_engine_started(engine), 1);
        assert_int_equal(alert_bus_count(bus, ALERT_NOTICE_RECEIVED), 1);
        res = agent_engine_result(engine);
        assert_non_null(res);
        assert_int_equal(res->outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(res->evicted, 3);
        sim_lock(e2e.sf.sim);
        assert_int_equal(sim_list(e2e.sf.sim, SIM_POD, NULL, &pods), 0);
        sim_unlock(e2e.sf.sim);
        cJSON_ArrayForEach (p, pods)
                if (streq(kube_object_str(p, "spec.nodeName"), "spot-a"))
                        left++;
        cJSON_Delete(pods);
        assert_int_equal(left, 0);
        assert_true(cordoned(f));
        assert_true(lb_label_is(SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE));

        /* A canceled maintenance's undo through the engine: the engine's taint, the cordon and the load
         * balancers' label go. */
        stop_agent(f);
        assert_int_equal(agent_engine_actions.uncordon(engine, "spot-a"), 0);
        run_until(f, schedulable);
        run_until(f, lb_label_gone);

        engine = agent_engine_free(engine);
        e2e_stop(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_interruption_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_identity_from_imds, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_reverted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_then_interruption, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintenance, setup, teardown),
                cmocka_unit_test_setup_teardown(test_history, setup, teardown),
                cmocka_unit_test_setup_teardown(test_asg_terminated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fault_500, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fault_hang_and_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fault_garbage, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fault_token_expiry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreachable_at_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_imds_down_mid_run, setup, teardown),
                cmocka_unit_test_setup_teardown(test_end_to_end, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reboot_uncordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_engine_end_to_end, setup, teardown),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
