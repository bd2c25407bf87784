/* The ledger's startup estimates: one per owner (Deployment, StatefulSet...), shared by every drain of the
 * ledger; the one list of an owner's siblings asked once and awaited by the others; and how long a pod
 * stopped lately stays a ghost in the plans, by its owner's estimate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/ledger_internal.h"

/* How long a gone pod stays in the plans after its replacement should have been Ready. Until the PDB counts
 * the replacement, the planner expects it back a second from now (an overdue return, capped by what the
 * status shows missing); without the pod it would see a PDB short of a pod for good, and judge a drain that
 * only waits for a slow replacement infeasible. */
#define GHOST_OVERDUE_USEC (30 * UINT64_C(1000000))

bool drain_ledger_startup(const struct drain_ledger *l, const char *owner_key, uint64_t *ret_usec)
{
        for (size_t i = 0; l && owner_key && i < l->n_startups; i++)
                if (streq(l->startups[i].owner_key, owner_key)) {
                        *ret_usec = l->startups[i].startup_usec;
                        return true;
                }
        return false;
}

int drain_ledger_add_startups(struct drain_ledger *l, const struct drain_startup *s, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                uint64_t known;
                if (drain_ledger_startup(l, s[i].owner_key, &known))
                        continue;
                struct drain_startup *v = realloc(l->startups, (l->n_startups + 1) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->startups = v;
                char *key = strdup(s[i].owner_key);
                if (!key)
                        return -ENOMEM;
                l->startups[l->n_startups++] =
                    (struct drain_startup){ .owner_key = key, .startup_usec = s[i].startup_usec };
                l->startups_gen++;
                ledger_set_dirty(l);
        }
        return 0;
}

bool drain_ledger_startups_planned(const struct drain_ledger *l, const struct drain_joint *j)
{
        return l && j && j->startups_gen == l->startups_gen;
}

struct drain_surge_reads *drain_ledger_surge_reads(struct drain_ledger *l)
{
        if (l && !l->surge_reads && drain_surge_reads_new(l->c, &l->surge_reads) < 0)
                log_debug("out of memory sharing the drains' Deployment reads");
        return l ? l->surge_reads : NULL;
}

static struct startup_ask *ask_find(const struct drain_ledger *l, const char *owner_key)
{
        for (size_t i = 0; l && owner_key && i < l->n_asks; i++)
                if (streq(l->asks[i].owner_key, owner_key))
                        return &l->asks[i];
        return NULL;
}

int drain_ledger_startup_asking(struct drain_ledger *l, const char *owner_key)
{
        if (!l || !owner_key)
                return -EINVAL;
        if (ask_find(l, owner_key))
                return 0;
        struct startup_ask *v = realloc(l->asks, (l->n_asks + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        l->asks = v;
        char *key = strdup(owner_key);
        if (!key)
                return -ENOMEM;
        l->asks[l->n_asks++] = (struct startup_ask){ .owner_key = key };
        return 0;
}

bool drain_ledger_startup_wait(struct drain_ledger *l, void *member, const char *owner_key)
{
        struct startup_ask *a = ask_find(l, owner_key);
        if (!a)
                return false;
        for (size_t i = 0; i < a->n_waiters; i++)
                if (a->waiters[i] == member)
                        return true;
        void **v = realloc(a->waiters, (a->n_waiters + 1) * sizeof(*v));
        if (!v)
                return true; /* waits the first plan's bound, not woken early */
        a->waiters = v;
        a->waiters[a->n_waiters++] = member;
        return true;
}

bool drain_ledger_startup_awaited(const struct drain_ledger *l, const void *member)
{
        for (size_t i = 0; l && i < l->n_asks; i++)
                for (size_t j = 0; j < l->asks[i].n_waiters; j++)
                        if (l->asks[i].waiters[j] == member)
                                return true;
        return false;
}

void drain_ledger_startup_answered(struct drain_ledger *l, const char *owner_key)
{
        struct startup_ask *a = ask_find(l, owner_key);
        if (!a)
                return;
        struct startup_ask done = *a;
        *a = l->asks[--l->n_asks];
        for (size_t i = 0; i < done.n_waiters; i++)
                ledger_wake_member(l, done.waiters[i]);
        free(done.owner_key);
        free(done.waiters);
}

uint64_t drain_ledger_ghost_until(const struct drain_ledger *l, const struct kube_pod *kp,
                                  const char *owner_key, uint64_t default_startup_usec)
{
        uint64_t startup;
        if (!drain_ledger_startup(l, owner_key, &startup))
                startup = default_startup_usec;
        /* Scheduling and image pulls come on top of the measured startup: as much again, and a second. */
        return kp->deleted_usec + 2 * startup + UINT64_C(1000000) + GHOST_OVERDUE_USEC;
}
