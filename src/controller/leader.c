/* controller/leader: leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.
 *
 * A candidate reads the lease every retry period. It takes the lease when nobody holds it or when the
 * record (holder, renewTime) has not changed for leaseDurationSeconds as seen by this replica's own clock:
 * the holder's timestamps are never compared with the local clock, so clock skew between machines does not
 * matter. The leader renews every renew period, and gives up (before anyone else may take over) when no
 * renewal succeeded for the renew deadline. Writes carry the read resourceVersion, so two candidates can
 * never both win: the second PUT gets 409. One call is in flight at a time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"

#define SEC UINT64_C(1000000)

struct leader {
        struct loop *loop;
        struct kube_client *kube;
        struct leader_options o;
        char *namespace, *name, *identity;

        struct timer *timer;
        struct kube_call *call;
        struct kube_lease lease; /* the latest record read or written */
        bool have_lease;

        /* what this replica saw last, and when (engine clock) it saw it change */
        char *observed_holder;
        uint64_t observed_renew, observed_at;

        bool leader, running, released;
        uint64_t last_renewed;
        unsigned transitions;
};

static void schedule(struct leader *le, uint64_t after);

static void lose(struct leader *le, const char *why)
{
        if (!le->leader)
                return;
        le->leader = false;
        log_warning("lost the leader lease %s/%s: %s", le->namespace, le->name, why);
        if (le->o.stopped)
                le->o.stopped(le->o.userdata);
}

static void check_renew_deadline(struct leader *le, const char *why)
{
        if (le->leader && clk_now() - le->last_renewed > le->o.renew_deadline_usec)
                lose(le, why);
}

static int observe(struct leader *le, const struct kube_lease *l)
{
        if (le->observed_at && streq_ptr(le->observed_holder, l->holder_identity) &&
            le->observed_renew == l->renew_time_usec)
                return 0;
        if (free_and_strdup(&le->observed_holder, l->holder_identity) < 0)
                return -ENOMEM;
        le->observed_renew = l->renew_time_usec;
        le->observed_at = clk_now();
        return 0;
}

static void on_write(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct leader *le = userdata;
        struct kube_lease l = {};

        le->call = NULL;
        if (r->error < 0 || kube_lease_parse(r->object, &l) < 0) {
                /* 409: someone else wrote first; read again after the retry period. */
                log_debug_reason(r->error, r->message, "leader: lease write failed");
                check_renew_deadline(le, "could not renew it in time");
                schedule(le, le->o.retry_period_usec);
                return;
        }
        kube_lease_clear(&le->lease);
        le->lease = l;
        le->have_lease = true;
        (void)observe(le, &l);
        le->last_renewed = clk_now();
        if (!le->leader) {
                le->leader = true;
                le->transitions++;
                log_notice("became the leader (lease %s/%s, identity %s)", le->namespace, le->name,
                           le->identity);
                if (le->o.started)
                        le->o.started(le->o.userdata);
        }
        if (le->running)
                schedule(le, le->o.renew_period_usec);
}

static int write_lease(struct leader *le, bool create, bool acquire)
{
        uint64_t now = now_realtime_usec();
        struct kube_lease l = {
                .namespace = le->namespace,
                .name = le->name,
                .resource_version = create ? NULL : le->lease.resource_version,
                .holder_identity = le->identity,
                .lease_duration_seconds = (int)((le->o.lease_duration_usec + SEC - 1) / SEC),
                .acquire_time_usec = acquire ? now : le->lease.acquire_time_usec,
                .renew_time_usec = now,
                .lease_transitions = create ? 0 : le->lease.lease_transitions + (acquire ? 1 : 0),
        };
        return create ? kube_lease_create(le->kube, &l, on_write, le, &le->call)
                      : kube_lease_update(le->kube, &l, on_write, le, &le->call);
}

static void on_get(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct leader *le = userdata;
        struct kube_lease l = {};
        uint64_t duration;
        int w;

        le->call = NULL;
        if (r->error == -ENOENT) {
                w = write_lease(le, true, true);
                if (w >= 0)
                        return;
                log_debug_errno(w, "leader: cannot create the lease");
        } else if (r->error < 0 || kube_lease_parse(r->object, &l) < 0) {
                log_debug_reason(r->error, r->message, "leader: cannot read the lease");
                check_renew_deadline(le, "could not read it in time");
        } else {
                bool mine = streq(l.holder_identity, le->identity);
                (void)observe(le, &l);
                duration = l.lease_duration_seconds > 0 ? (uint64_t)l.lease_duration_seconds * SEC
                                                        : le->o.lease_duration_usec;
                kube_lease_clear(&le->lease);
                le->lease = l;
                le->have_lease = true;
                if (mine || isempty(l.holder_identity) || clk_now() >= le->observed_at + duration) {
                        w = write_lease(le, false, !mine);
                        if (w >= 0)
                                return;
                        log_debug_errno(w, "leader: cannot write the lease");
                } else
                        lose(le, "another replica holds it");
        }
        schedule(le, le->o.retry_period_usec);
}

static void on_timer(void *userdata)
{
        struct leader *le = userdata;
        int r;

        le->timer = NULL;
        if (!le->running)
                return;
        r = kube_lease_get(le->kube, le->namespace, le->name, on_get, le, &le->call);
        if (r < 0) {
                log_debug_errno(r, "leader: cannot ask for the lease");
                check_renew_deadline(le, "could not ask for it");
                schedule(le, le->o.retry_period_usec);
        }
}

static void schedule(struct leader *le, uint64_t after)
{
        le->timer = timer_cancel(le->timer);
        if (timer_start_in(le->loop, after, on_timer, le, &le->timer) < 0)
                log_debug("leader: cannot arm the timer");
}

int leader_start(struct leader *le)
{
        if (le->running)
                return -EALREADY;
        le->running = true;
        le->released = false;
        return timer_start_in(le->loop, 0, on_timer, le, &le->timer);
}

static void on_released(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct leader *le = userdata;
        le->call = NULL;
        le->released = true;
        if (r->error < 0)
                log_debug_errno(r->error, "leader: releasing the lease failed");
}

void leader_stop(struct leader *le)
{
        bool was_leader = le->leader;

        le->running = false;
        le->leader = false;
        le->timer = timer_cancel(le->timer);
        le->call = kube_call_cancel(le->call);
        le->released = true;
        if (!was_leader || !le->have_lease)
                return;
        /* Released as client-go does: no holder, a lease of 1 s, so that a candidate takes over at its next
         * retry instead of waiting out the whole lease. */
        struct kube_lease l = {
                .namespace = le->namespace,
                .name = le->name,
                .resource_version = le->lease.resource_version,
                .lease_duration_seconds = 1,
                .acquire_time_usec = now_realtime_usec(),
                .renew_time_usec = now_realtime_usec(),
                .lease_transitions = le->lease.lease_transitions,
        };
        if (kube_lease_update(le->kube, &l, on_released, le, &le->call) >= 0)
                le->released = false;
}

bool leader_released(const struct leader *le)
{
        return le->released;
}

bool leader_is_leader(const struct leader *le)
{
        return le && le->leader;
}

const char *leader_identity(const struct leader *le)
{
        return le->identity;
}

const char *leader_observed_holder(const struct leader *le)
{
        return isempty(le->observed_holder) ? NULL : le->observed_holder;
}

unsigned leader_transitions(const struct leader *le)
{
        return le->transitions;
}

static char *default_identity(void)
{
        char host[256];
        const char *pod = getenv("POD_NAME");

        if (!isempty(pod))
                return strdup(pod);
        if (gethostname(host, sizeof(host)) < 0)
                snprintf(host, sizeof(host), "spotdrain");
        host[sizeof(host) - 1] = '\0';
        return strprintf("%s_%ld", host, (long)getpid());
}

int leader_new(struct kube_client *kube, const struct leader_options *o, struct leader **ret)
{
        struct leader *le;

        if (!kube || !o || isempty(o->namespace) || !ret)
                return -EINVAL;
        le = calloc(1, sizeof(*le));
        if (!le)
                return -ENOMEM;
        le->loop = kube_client_loop(kube);
        le->kube = kube;
        le->o = *o;
        if (!le->o.lease_duration_usec)
                le->o.lease_duration_usec = 15 * SEC;
        if (!le->o.renew_deadline_usec)
                le->o.renew_deadline_usec = 10 * SEC;
        if (!le->o.renew_period_usec)
                le->o.renew_period_usec = 5 * SEC;
        if (!le->o.retry_period_usec)
                le->o.retry_period_usec = 2 * SEC;
        le->namespace = strdup(o->namespace);
        le->name = strdup(o->name ? o->name : CONTROLLER_LEASE_NAME);
        le->identity = o->identity ? strdup(o->identity) : default_identity();
        le->released = true;
        if (!le->namespace || !le->name || !le->identity) {
                leader_free(le);
                return -ENOMEM;
        }
        le->o.namespace = le->o.name = le->o.identity = NULL;
        *ret = le;
        return 0;
}

struct leader *leader_free(struct leader *le)
{
        if (!le)
                return NULL;
        timer_cancel(le->timer);
        kube_call_cancel(le->call);
        kube_lease_clear(&le->lease);
        free(le->observed_holder);
        free(le->namespace);
        free(le->name);
        free(le->identity);
        free(le);
        return NULL;
}
