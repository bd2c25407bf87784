/* The drain ledger: one PDB informer and one account of PDB slots for every executor of a process, so that
 * drains of nodes sharing a PDB neither race for its disruptions (each believing the whole budget is its
 * own, multiplying 429s) nor take them first-come: the earliest last safe moment goes first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/drain_internal.h"
#include "drain/ledger_internal.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/surge.h"

#define DEFAULT_FLOOR_USEC (200 * UINT64_C(1000))
/* How long a new member with an earlier deadline than others may take to state its first wants (its
 * informers list, its startup estimates come) before their pods get slots without it: a later-deadline pod
 * must not take a slot only because its drain started planning first. */
#define SETTLE_USEC (3 * UINT64_C(1000000))
/* Evictions granted and not yet answered, across every PDB: a burst of slots freeing at once must not
 * queue dozens of evictions in the client's rate limiter ahead of the cordons of nodes whose notice just
 * came (the client keeps one queue within its QPS budget). */
#define MAX_IN_FLIGHT 8
/* Mid-drain re-judgements (each a graded verdict: several joint plans) of every drain of the ledger get a
 * tenth of the time at most: after one that took d, the next waits 9 d. Each stop seen and each drain
 * joining asks every drain for one, and at 200 drains they used to keep the loop busy past the deadlines,
 * cordons and evictions waiting behind them. */
#define REJUDGE_SHARE 9

/* The pods lately evicted through this ledger's grants, by name, per PDB: their eviction leaves the status'
 * disruptedPods in the change that drops currentHealthy (the API writes the entry; the disruption
 * controller drops it as it recounts), after the grant was released. */
#define RECENT_EVICTED 32

static void waiter_clear(struct waiter *w)
{
        free(w->pod);
}

static void lpdb_clear(struct lpdb *p)
{
        for (size_t i = 0; i < p->n_waiters; i++)
                waiter_clear(&p->waiters[i]);
        for (size_t i = 0; i < p->n_grants; i++)
                free(p->grants[i].pod);
        for (size_t i = 0; i < p->n_losses; i++)
                free(p->losses[i].uid);
        for (size_t i = 0; p->evicted && i < RECENT_EVICTED; i++)
                free(p->evicted[i]);
        free(p->evicted);
        free(p->waiters);
        free(p->grants);
        free(p->losses);
        free(p->key);
}

/* ---- losses ---- */

static void loss_drop(struct lpdb *p, size_t i)
{
        free(p->losses[i].uid);
        memmove(&p->losses[i], &p->losses[i + 1], (p->n_losses - i - 1) * sizeof(*p->losses));
        p->n_losses--;
}

/* In time order; the oldest goes when the list is full. uid: once per starting pod. */
static int loss_add(struct lpdb *p, uint64_t at, const char *uid)
{
        if (uid)
                for (size_t i = 0; i < p->n_losses; i++)
                        if (streq_ptr(p->losses[i].uid, uid))
                                return 0;
        if (p->n_losses == MAX_LOSSES)
                loss_drop(p, 0);
        if (!p->losses && !(p->losses = calloc(MAX_LOSSES, sizeof(*p->losses))))
                return -ENOMEM;
        char *u = NULL;
        if (uid && !(u = strdup(uid)))
                return -ENOMEM;
        size_t i = p->n_losses;
        while (i > 0 && p->losses[i - 1].at > at)
                i--;
        memmove(&p->losses[i + 1], &p->losses[i], (p->n_losses - i) * sizeof(*p->losses));
        p->losses[i] = (struct loss){ .at = at, .uid = u };
        p->n_losses++;
        return 0;
}

static void note_evicted(struct lpdb *p, const char *pod)
{
        const char *slash = strchr(pod, '/');
        if (!p->evicted && !(p->evicted = calloc(RECENT_EVICTED, sizeof(*p->evicted))))
                return;
        char **e = &p->evicted[p->evicted_next];
        free(*e);
        *e = strdup(slash ? slash + 1 : pod);
        p->evicted_next = (p->evicted_next + 1) % RECENT_EVICTED;
}

static bool evicted_lately(const struct lpdb *p, const char *name)
{
        for (size_t i = 0; p && p->evicted && i < RECENT_EVICTED; i++)
                if (streq_ptr(p->evicted[i], name))
                        return true;
        return false;
}

/* The pods this ledger evicted that left disruptedPods between the two statuses. */
static int evicted_left(const struct lpdb *p, const cJSON *old_obj, const cJSON *obj)
{
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(old_obj, "status"), "disruptedPods");
        const cJSON *is = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "status"),
                                                           "disruptedPods");
        const cJSON *e;
        int n = 0;
        cJSON_ArrayForEach (e, was)
                if (e->string && !cJSON_GetObjectItemCaseSensitive(is, e->string) &&
                    evicted_lately(p, e->string))
                        n++;
        return n;
}

static int status_int(const cJSON *obj, const char *field)
{
        const cJSON *v =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "status"), field);
        return cJSON_IsNumber(v) ? v->valueint : 0;
}

static struct lpdb *lpdb_get(struct drain_ledger *l, const char *key)
{
        bool found;
        size_t at = lpdb_position(l, key, &found);
        if (found)
                return &l->pdbs[l->by_key[at]];
        struct lpdb *a = realloc(l->pdbs, (l->n_pdbs + 1) * sizeof(*a));
        if (!a)
                return NULL;
        l->pdbs = a;
        size_t *b = realloc(l->by_key, (l->n_pdbs + 1) * sizeof(*b));
        if (!b)
                return NULL;
        l->by_key = b;
        char *k = strdup(key);
        if (!k)
                return NULL;
        l->pdbs[l->n_pdbs] = (struct lpdb){ .key = k };
        memmove(&l->by_key[at + 1], &l->by_key[at], (l->n_pdbs - at) * sizeof(*l->by_key));
        l->by_key[at] = l->n_pdbs;
        return &l->pdbs[l->n_pdbs++];
}

/* The disruptions the PDB's latest status allows; 0 when unknown or the status is behind its spec (the
 * eviction API refuses then too). */
static int status_allowed(const struct drain_ledger *l, const char *key)
{
        const char *slash = strchr(key, '/');
        if (!slash)
                return 0;
        _cleanup_free_ char *ns = strndup(key, (size_t)(slash - key));
        if (!ns)
                return 0;
        const cJSON *o = kube_informer_get(l->inf, ns, slash + 1);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(md, "generation");
        const cJSON *obs = cJSON_GetObjectItemCaseSensitive(st, "observedGeneration");
        const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(st, "disruptionsAllowed");
        if (!cJSON_IsNumber(allowed))
                return 0;
        if (cJSON_IsNumber(gen) && (!cJSON_IsNumber(obs) || obs->valuedouble < gen->valuedouble))
                return 0;
        return allowed->valueint;
}

static struct member *member_find(const struct drain_ledger *l, const void *userdata)
{
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].userdata == userdata)
                        return &l->members[i];
        return NULL;
}

/* Whether a member that joined a moment ago, ahead of member's node (drain_nodes_before()), has yet to say
 * what it wants. (Under a flood of notices with one budget, newcomers have later deadlines and hold nobody
 * up.) */
static bool unsettled_before(const struct drain_ledger *l, const void *member, uint64_t now)
{
        const struct member *m = member_find(l, member);
        for (size_t i = 0; m && i < l->n_members; i++) {
                const struct member *o = &l->members[i];
                if (!o->stated && o != m && now < o->joined_at + SETTLE_USEC &&
                    drain_nodes_before(o->deadline, o->node, m->deadline, m->node))
                        return true;
        }
        return false;
}

static size_t in_flight(const struct drain_ledger *l)
{
        size_t n = 0;
        for (size_t i = 0; i < l->n_pdbs; i++)
                for (size_t j = 0; j < l->pdbs[i].n_grants; j++)
                        n += !l->pdbs[i].grants[j].answered;
        return n;
}

static int lpdb_free_slots(const struct drain_ledger *l, struct lpdb *p)
{
        if (p->stale)
                return 0;
        if (!p->allowed_known) {
                p->allowed = status_allowed(l, p->key);
                p->allowed_known = true;
        }
        int n = p->allowed - (int)p->n_grants;
        return n > 0 ? n : 0;
}

static bool waiter_before(const struct waiter *a, const struct waiter *b)
{
        if (a->last_safe != b->last_safe)
                return a->last_safe < b->last_safe;
        if (a->member != b->member && (a->deadline != b->deadline || !streq(a->node, b->node)))
                return drain_nodes_before(a->deadline, a->node, b->deadline, b->node);
        return a->seq < b->seq;
}

/* Whether fewer than slots waiters of p go before w (counting no further than needed). While w's member
 * states its wants (between drain_ledger_begin() and drain_ledger_end()), its own pods not stated yet in
 * this pass do not count: their last safe moments are from the previous pass, and when estimates moved (a
 * stop observed) each pod stated with its new moment would rank behind its siblings' stale ones, and no pod
 * of the node would ever get the slot. */
static bool waiter_within(const struct lpdb *p, const struct waiter *w, size_t slots)
{
        uint64_t now = clk_now();
        size_t n = 0;
        for (size_t i = 0; i < p->n_waiters && n < slots; i++) {
                const struct waiter *o = &p->waiters[i];
                /* A peer's pod waits no longer once its last safe moment has come: its own drain forces it
                 * then (or it is gone with its node). A peer that stopped working holds nobody up for long.
                 */
                if (o->remote && o->last_safe <= now)
                        continue;
                if (o != w && (o->seen || o->member != w->member) && waiter_before(o, w))
                        n++;
        }
        return n < slots;
}

void ledger_wake_member(struct drain_ledger *l, void *member)
{
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].userdata == member) {
                        l->members[i].ops->wake(member);
                        return;
                }
}

static void wake_all(struct drain_ledger *l, const void *except)
{
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].userdata != except)
                        l->members[i].ops->wake(l->members[i].userdata);
}

/* Wakes the members whose waiting pods now rank within the free slots of their PDB. */
static void dispatch_fire(void *userdata)
{
        struct drain_ledger *l = userdata;
        l->dispatch = NULL; /* released by the loop as it fired */
        /* No slot goes out while the evictions under way are at the cap: woken now, the waiters would only
         * ask again and be told to wait (hundreds of drains, over and over). An answer dispatches again. */
        if (in_flight(l) >= MAX_IN_FLIGHT)
                return;
        for (size_t i = 0; i < l->n_pdbs; i++) {
                struct lpdb *p = &l->pdbs[i];
                size_t slots = (size_t)lpdb_free_slots(l, p);
                for (size_t j = 0; j < p->n_waiters && slots > 0; j++)
                        if (waiter_within(p, &p->waiters[j], slots))
                                ledger_wake_member(l, p->waiters[j].member);
        }
}

static void schedule_dispatch(struct drain_ledger *l)
{
        if (l->dispatch)
                return;
        if (timer_start_in(l->loop, 0, dispatch_fire, l, &l->dispatch) < 0)
                dispatch_fire(l); /* no timer (ENOMEM): now rather than never */
}

static uint64_t jitter(uint64_t range)
{
        uint32_t v = 0;
        if (range == 0 || getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
                return 0;
        return v % range;
}

static void arm_recheck(struct drain_ledger *l);

static void recheck_fire(void *userdata)
{
        struct drain_ledger *l = userdata;
        uint64_t now = clk_now();
        l->recheck = NULL; /* released by the loop as it fired */
        l->recheck_at = 0;
        l->stats.rechecks++;
        for (size_t i = 0; i < l->n_pdbs; i++)
                if (l->pdbs[i].stale && now >= l->pdbs[i].stale_until)
                        l->pdbs[i].stale = false;
        arm_recheck(l);
        dispatch_fire(l);
}

/* The next moment slots may free with nothing heard: a status distrusted after a 429 is trusted again after
 * the floor (the safety net), and a new member that stays silent is waited for no longer. */
static void arm_recheck(struct drain_ledger *l)
{
        uint64_t at = UINT64_MAX, now = clk_now();
        for (size_t i = 0; i < l->n_pdbs; i++)
                if (l->pdbs[i].stale && l->pdbs[i].stale_until < at)
                        at = l->pdbs[i].stale_until;
        /* A newcomer silent past its settle time holds nobody up any more (unsettled_before()): waiting for
         * that moment again would fire at once, over and over, until it speaks, which under a flood of
         * notices (its pods listed behind a hundred others) takes seconds. */
        for (size_t i = 0; i < l->n_members; i++) {
                uint64_t settled = l->members[i].joined_at + SETTLE_USEC;
                if (!l->members[i].stated && settled > now && settled < at)
                        at = settled;
        }
        if (l->recheck && l->recheck_at == at)
                return;
        l->recheck = timer_cancel(l->recheck);
        l->recheck_at = 0;
        if (at != UINT64_MAX && timer_start(l->loop, at, recheck_fire, l, &l->recheck) >= 0)
                l->recheck_at = at;
}

/* ---- the informer ---- */

/* Healthy pods the new status misses that the old one counted, beyond the evictions granted here
 * (explained), are losses from outside; pods coming back settle the oldest. */
static void note_losses(struct drain_ledger *l, const char *key, const cJSON *old_obj, const cJSON *obj,
                        int explained)
{
        int before = status_int(old_obj, "currentHealthy"), after = status_int(obj, "currentHealthy");
        int shortfall = status_int(obj, "expectedPods") - after;
        struct lpdb *p = after < before - explained && shortfall > 0 ? lpdb_get(l, key) : lpdb_find(l, key);
        if (!p)
                return;
        if (shortfall <= 0) {
                while (p->n_losses > 0)
                        loss_drop(p, p->n_losses - 1);
                return;
        }
        if (after > before)
                for (int i = before; i < after && p->n_losses > 0; i++)
                        loss_drop(p, 0);
        uint64_t now = clk_now();
        for (int i = after; i < before - explained; i++)
                if (loss_add(p, now, NULL) < 0)
                        log_debug("out of memory noting a PDB's lost pod");
}

static void pdb_status_moved(struct drain_ledger *l, const cJSON *old_obj, const cJSON *obj)
{
        const char *ns = kube_object_str(obj, "metadata.namespace");
        const char *name = kube_object_str(obj, "metadata.name");
        _cleanup_free_ char *key = name ? strprintf("%s/%s", ns ? ns : "", name) : NULL;
        struct lpdb *p = key ? lpdb_find(l, key) : NULL;
        int explained = 0;
        if (p) {
                /* What the status now misses may be an eviction granted here, answered or not, or one
                 * whose grant an earlier status released: only a drop beyond them all is a loss from
                 * outside. */
                explained = (int)p->n_grants + (old_obj ? evicted_left(p, old_obj, obj) : 0);
                /* The new status includes every eviction answered before it came (the eviction API
                 * updates the PDB before it answers); those still unanswered stay spent. */
                for (size_t i = 0; i < p->n_grants;)
                        if (p->grants[i].answered) {
                                free(p->grants[i].pod);
                                p->grants[i] = p->grants[--p->n_grants];
                        } else
                                i++;
                p->stale = false;
                p->allowed_known = false;
                p->status_seq++;
                arm_recheck(l);
                /* A slot may be free for the members waiting for one (or holding one: theirs may now be
                 * reflected). The others see the new status in the next joint plan, which wakes those whose
                 * schedule it changes. */
                for (size_t i = 0; i < p->n_waiters; i++)
                        ledger_wake_member(l, p->waiters[i].member);
                for (size_t i = 0; i < p->n_grants; i++)
                        if (p->grants[i].member)
                                ledger_wake_member(l, p->grants[i].member);
        }
        /* (p may move: lpdb_get() can grow the array.) */
        if (key && old_obj)
                note_losses(l, key, old_obj, obj, explained);
        ledger_set_dirty(l);
}

static void pdbs_added(void *userdata, const cJSON *obj)
{
        pdb_status_moved(userdata, NULL, obj);
}

static bool status_differs(const cJSON *a, const cJSON *b)
{
        return !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "status"),
                              cJSON_GetObjectItemCaseSensitive(b, "status"), true) ||
               !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "spec"),
                              cJSON_GetObjectItemCaseSensitive(b, "spec"), true);
}

static void pdbs_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        if (!old_obj || status_differs(old_obj, obj))
                pdb_status_moved(userdata, old_obj, obj);
}

static void pdbs_deleted(void *userdata, const cJSON *obj)
{
        struct drain_ledger *l = userdata;
        const char *ns = kube_object_str(obj, "metadata.namespace");
        const char *name = kube_object_str(obj, "metadata.name");
        _cleanup_free_ char *key = name ? strprintf("%s/%s", ns ? ns : "", name) : NULL;
        struct lpdb *p = key ? lpdb_find(l, key) : NULL;
        if (p) {
                p->allowed_known = false;
                while (p->n_losses > 0)
                        loss_drop(p, p->n_losses - 1);
        }
        ledger_set_dirty(l);
}

static void pdbs_synced(void *userdata)
{
        struct drain_ledger *l = userdata;
        ledger_set_dirty(l);
        /* They wait for the PDBs before their first plan. */
        wake_all(l, NULL);
}

/* ---- life cycle and members ---- */

int drain_ledger_new(struct kube_client *c, uint64_t retry_floor_usec, struct drain_ledger **ret)
{
        static const struct kube_informer_ops ops = {
                .added = pdbs_added,
                .modified = pdbs_modified,
                .deleted = pdbs_deleted,
                .synced = pdbs_synced,
        };
        _cleanup_(drain_ledger_freep) struct drain_ledger *l = NULL;
        int r;

        if (!c || !ret)
                return -EINVAL;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->c = c;
        l->loop = kube_client_loop(c);
        l->floor = retry_floor_usec ? retry_floor_usec : DEFAULT_FLOOR_USEC;
        r = drain_shutdowns_new(&l->own_shutdowns);
        l->shutdowns = l->own_shutdowns;
        if (r < 0)
                return r;
        /* Patient: the PDBs are quiet but while pods of theirs come and go, and a quiet resource's watch
         * that resumed at each idle limit would cost a request every 10 s for as long as the ledger lives
         * (a drain's, or a controller's from its first drain on). */
        struct kube_watch_options w = { .path = "/apis/policy/v1/poddisruptionbudgets", .patient = true };
        r = kube_informer_start(c, &w, &ops, l, &l->inf);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

struct drain_ledger *drain_ledger_free(struct drain_ledger *l)
{
        if (!l)
                return NULL;
        kube_informer_stop(l->inf);
        timer_cancel(l->dispatch);
        timer_cancel(l->recheck);
        timer_cancel(l->replan);
        drain_joint_unref(l->joint);
        for (size_t i = 0; i < l->n_critical; i++)
                free(l->critical[i]);
        free(l->critical);
        for (size_t i = 0; i < l->n_pdbs; i++)
                lpdb_clear(&l->pdbs[i]);
        free(l->pdbs);
        free(l->by_key);
        for (size_t i = 0; i < l->n_members; i++)
                free(l->members[i].node);
        free(l->members);
        drain_startups_free(l->startups, l->n_startups);
        for (size_t i = 0; i < l->n_asks; i++) {
                free(l->asks[i].owner_key);
                free(l->asks[i].waiters);
        }
        free(l->asks);
        drain_surge_reads_free(l->surge_reads);
        drain_shutdowns_free(l->own_shutdowns);
        for (size_t i = 0; i < l->n_ghosts; i++)
                kept_ghost_clear(&l->ghosts[i]);
        free(l->ghosts);
        free(l);
        return NULL;
}

int drain_ledger_join(struct drain_ledger *l, const struct drain_ledger_member_ops *ops, void *userdata,
                      const char *node, uint64_t deadline_usec)
{
        _cleanup_free_ char *copy = strdup(node ? node : "");
        if (!copy)
                return -ENOMEM;
        struct member *a = realloc(l->members, (l->n_members + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        l->members = a;
        l->members[l->n_members++] = (struct member){ .ops = ops,
                                                      .userdata = userdata,
                                                      .node = TAKE_PTR(copy),
                                                      .joined_at = clk_now(),
                                                      .deadline = deadline_usec };
        arm_recheck(l);
        /* The others now drain beside one more node: their plans change. */
        ledger_set_dirty(l);
        return 0;
}

void drain_ledger_leave(struct drain_ledger *l, void *userdata)
{
        bool found = false;
        if (!l)
                return;
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].userdata == userdata) {
                        free(l->members[i].node);
                        memmove(&l->members[i], &l->members[i + 1],
                                (l->n_members - i - 1) * sizeof(*l->members));
                        l->n_members--;
                        found = true;
                        break;
                }
        if (!found)
                return;
        for (size_t i = 0; i < l->n_asks; i++) {
                struct startup_ask *a = &l->asks[i];
                for (size_t j = 0; j < a->n_waiters;)
                        if (a->waiters[j] == userdata)
                                a->waiters[j] = a->waiters[--a->n_waiters];
                        else
                                j++;
        }
        for (size_t i = 0; i < l->n_pdbs; i++) {
                struct lpdb *p = &l->pdbs[i];
                for (size_t j = 0; j < p->n_waiters;)
                        if (p->waiters[j].member == userdata) {
                                waiter_clear(&p->waiters[j]);
                                p->waiters[j] = p->waiters[--p->n_waiters];
                        } else
                                j++;
                /* Its evictions under way may have gone through: spent until the status moves. */
                for (size_t j = 0; j < p->n_grants; j++)
                        if (p->grants[j].member == userdata) {
                                p->grants[j].member = NULL;
                                p->grants[j].answered = true;
                        }
        }
        arm_recheck(l);
        ledger_set_dirty(l);
        schedule_dispatch(l);
}

const struct kube_informer *drain_ledger_pdbs(const struct drain_ledger *l)
{
        return l->inf;
}

bool drain_ledger_synced(const struct drain_ledger *l)
{
        return kube_informer_synced(l->inf);
}

struct kube_client *drain_ledger_client(const struct drain_ledger *l)
{
        return l->c;
}

void drain_ledger_wake_all(struct drain_ledger *l)
{
        wake_all(l, NULL);
}

/* ---- slots ---- */

void drain_ledger_begin(struct drain_ledger *l, void *member)
{
        /* The same for every pod the member states now. */
        l->stating = member;
        l->stating_unsettled = unsettled_before(l, member, clk_now());
        for (size_t i = 0; i < l->n_pdbs; i++)
                for (size_t j = 0; j < l->pdbs[i].n_waiters; j++)
                        if (l->pdbs[i].waiters[j].member == member)
                                l->pdbs[i].waiters[j].seen = false;
}

void drain_ledger_end(struct drain_ledger *l, void *member)
{
        bool dropped = false;
        l->stating = NULL;
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].userdata == member && !l->members[i].stated) {
                        /* Its wants are known now: the slots may go out. */
                        l->members[i].stated = true;
                        arm_recheck(l);
                        dropped = true;
                }
        for (size_t i = 0; i < l->n_pdbs; i++) {
                struct lpdb *p = &l->pdbs[i];
                for (size_t j = 0; j < p->n_waiters;)
                        if (p->waiters[j].member == member && !p->waiters[j].seen) {
                                waiter_clear(&p->waiters[j]);
                                p->waiters[j] = p->waiters[--p->n_waiters];
                                dropped = true;
                        } else
                                j++;
        }
        /* A pod that stopped waiting may have been ahead of others. */
        if (dropped)
                schedule_dispatch(l);
}

int drain_ledger_want(struct drain_ledger *l, void *member, const char *pdb, const char *pod,
                      uint64_t last_safe_usec)
{
        struct lpdb *p = lpdb_get(l, pdb);
        const struct member *m = member_find(l, member);
        struct waiter *w = NULL;
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_waiters && !w; i++)
                if (p->waiters[i].member == member && streq(p->waiters[i].pod, pod))
                        w = &p->waiters[i];
        if (!w) {
                struct waiter *a = realloc(p->waiters, (p->n_waiters + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                p->waiters = a;
                char *copy = strdup(pod);
                if (!copy)
                        return -ENOMEM;
                w = &p->waiters[p->n_waiters++];
                /* A member that did not join (the ledger's own tests) ranks after every node. */
                *w = (struct waiter){ .member = member,
                                      .pod = copy,
                                      .deadline = m ? m->deadline : UINT64_MAX,
                                      .node = m ? m->node : "",
                                      .seq = l->seq++,
                                      .remote = m && m->ops->remote };
        }
        w->seen = true;
        /* Its moment moved (the estimates did): the order among every member's waiters may have changed,
         * and a pod of another member that now ranks within the free slots is woken, or it would wait
         * behind this one's old moment while this one waits behind its. */
        if (w->last_safe != last_safe_usec && w->last_safe != 0)
                schedule_dispatch(l);
        w->last_safe = last_safe_usec;
        if (w->remote)
                return 0; /* stated to rank the others' pods, granted by its own process */

        /* Cheapest first: most wants find no slot free. */
        size_t slots = (size_t)lpdb_free_slots(l, p);
        if (slots == 0 || !waiter_within(p, w, slots))
                return 0;
        bool unsettled =
            l->stating == member ? l->stating_unsettled : unsettled_before(l, member, clk_now());
        if (unsettled || in_flight(l) >= MAX_IN_FLIGHT)
                return 0;
        struct grant *g = realloc(p->grants, (p->n_grants + 1) * sizeof(*g));
        if (!g)
                return -ENOMEM;
        p->grants = g;
        p->grants[p->n_grants++] =
            (struct grant){ .member = member, .pod = TAKE_PTR(w->pod), .status_seq = p->status_seq };
        *w = p->waiters[--p->n_waiters];
        l->stats.granted++;
        return 1;
}

void drain_ledger_answer(struct drain_ledger *l, void *member, const char *pdb, const char *pod,
                         enum drain_ledger_answer a)
{
        struct lpdb *p = lpdb_find(l, pdb);
        if (!p)
                return;
        for (size_t i = 0; i < p->n_grants; i++) {
                struct grant *g = &p->grants[i];
                if (g->member != member || g->answered || !streq(g->pod, pod))
                        continue;
                /* A status that came between the grant and the answer may already count this eviction
                 * (the API writes the PDB before it answers, and the watch can be quicker than the
                 * answer): then keeping the grant would spend the slot twice, until the next status
                 * change, which may be a whole startup away. Dropping it instead risks one 429, which
                 * costs the floor. */
                if (a == DRAIN_LEDGER_ACCEPTED)
                        note_evicted(p, pod);
                if (a == DRAIN_LEDGER_ACCEPTED && g->status_seq == p->status_seq) {
                        g->answered = true;
                        /* One eviction less under way: the next may go. */
                        schedule_dispatch(l);
                        return;
                }
                free(g->pod);
                *g = p->grants[--p->n_grants];
                if (a == DRAIN_LEDGER_ACCEPTED) {
                        schedule_dispatch(l);
                        return;
                }
                if (a == DRAIN_LEDGER_REFUSED) {
                        l->stats.refused++;
                        p->stale = true;
                        p->stale_until = clk_now() + l->floor + jitter(l->floor / 2 + 1);
                        arm_recheck(l);
                }
                schedule_dispatch(l);
                return;
        }
}

void drain_ledger_stats(const struct drain_ledger *l, struct drain_ledger_stats *ret)
{
        *ret = l->stats;
        ret->waiting = ret->losses = 0;
        for (size_t i = 0; i < l->n_pdbs; i++) {
                ret->waiting += (unsigned)l->pdbs[i].n_waiters;
                ret->losses += (unsigned)l->pdbs[i].n_losses;
        }
}

void drain_ledger_note_starting(struct drain_ledger *l, const cJSON *items)
{
        const cJSON *obj;
        bool noted = false;
        cJSON_ArrayForEach (obj, items) {
                _cleanup_(kube_pod_clear) struct kube_pod pod = { 0 };
                /* Scheduled (one still Pending for room may wait for a node for long), not Ready, not
                 * going. */
                if (kube_pod_parse(obj, &pod) < 0 || pod.ready || pod.deletion_usec || !pod.creation_usec ||
                    isempty(pod.node_name) || !pod.uid ||
                    !(streq_ptr(pod.phase, "Pending") || streq_ptr(pod.phase, "Running")))
                        continue;
                for (size_t i = 0; i < kube_informer_size(l->inf); i++) {
                        const cJSON *o = kube_informer_at(l->inf, i);
                        if (!streq_ptr(kube_object_str(o, "metadata.namespace"), pod.namespace))
                                continue;
                        _cleanup_(kube_pdb_clear) struct kube_pdb pdb = { 0 };
                        if (kube_pdb_parse(o, &pdb) < 0 || !kube_pdb_matches_pod(&pdb, &pod) ||
                            pdb.expected_pods <= pdb.current_healthy)
                                continue;
                        _cleanup_free_ char *key =
                            strprintf("%s/%s", pdb.namespace ? pdb.namespace : "", pdb.name ? pdb.name : "");
                        struct lpdb *p = key ? lpdb_get(l, key) : NULL;
                        if (!p || loss_add(p, pod.creation_usec, pod.uid) < 0) {
                                log_debug("out of memory noting a starting pod");
                                continue;
                        }
                        noted = true;
                }
        }
        if (noted)
                ledger_set_dirty(l);
}

uint64_t drain_ledger_rejudge_at(const struct drain_ledger *l)
{
        return l ? l->rejudge_after : 0;
}

void drain_ledger_rejudged(struct drain_ledger *l, uint64_t start, uint64_t end)
{
        if (l && end > start)
                l->rejudge_after = end + REJUDGE_SHARE * (end - start);
}

void drain_ledger_use_shutdowns(struct drain_ledger *l, struct drain_shutdowns *s)
{
        if (l && s)
                l->shutdowns = s;
}

struct drain_shutdowns *drain_ledger_shutdowns(const struct drain_ledger *l)
{
        return l ? l->shutdowns : NULL;
}
