/* The ledger's joint plan: one plan of every drain of the ledger (drain_joint), made from their inputs, the
 * PDBs as the ledger counts them and the ghosts of pods stopped lately, again at most every so often once
 * something changed (ledger_set_dirty), and the members woken when it is new; with the lookup of a PDB by
 * its key, which the plan and the slots share. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drain/ledger_internal.h"

/* A joint plan older than this is made anew even when nothing was heard: estimates of pods stopping right
 * now grow with time, and kept ghosts expire. */
#define PLAN_MAX_AGE_USEC (1000 * UINT64_C(1000))
/* A new joint plan comes at most every PLAN_GAP_FACTOR times what the last one took (engine clock): a
 * burst of changes across hundreds of drains costs a few plans, and planning at most a fifth of the loop,
 * which the cordons of new notices need. */
#define PLAN_GAP_FACTOR   4
#define PLAN_GAP_MAX_USEC (500 * UINT64_C(1000))

/* The position of key in by_key: where it is (*found) or would go. Every eviction asks, for every pod. */
static const char *lpdb_key_at(const void *userdata, size_t i)
{
        const struct drain_ledger *l = userdata;
        return l->pdbs[l->by_key[i]].key;
}

size_t lpdb_position(const struct drain_ledger *l, const char *key, bool *found)
{
        return drain_bisect(l->n_pdbs, key, lpdb_key_at, l, found);
}

struct lpdb *lpdb_find(struct drain_ledger *l, const char *key)
{
        bool found;
        size_t at = lpdb_position(l, key, &found);
        return found ? &l->pdbs[l->by_key[at]] : NULL;
}

void kept_ghost_clear(struct kept_ghost *g)
{
        free(g->node);
        drain_pod_memo_unref(g->memo);
}

int drain_ledger_keep_ghost(struct drain_ledger *l, const char *node, uint64_t deadline_usec,
                            uint64_t margin_usec, struct drain_pod_memo *pod, uint64_t gone_usec,
                            uint64_t until_usec)
{
        struct kept_ghost g = { .deadline = deadline_usec,
                                .margin = margin_usec,
                                .gone_at = gone_usec,
                                .until = until_usec,
                                .node = strdup(node),
                                .memo = pod };
        struct kept_ghost *a = g.node && g.memo ? realloc(l->ghosts, (l->n_ghosts + 1) * sizeof(*a)) : NULL;
        if (!a) {
                kept_ghost_clear(&g);
                return -ENOMEM;
        }
        l->ghosts = a;
        l->ghosts[l->n_ghosts++] = g;
        ledger_set_dirty(l);
        return 0;
}

/* The kept ghosts still due, each node of theirs once. */
static int add_ghosts(struct drain_ledger *l, struct drain_inputs *di)
{
        uint64_t now = drain_inputs_now(di);
        for (size_t i = 0; i < l->n_ghosts;)
                if (l->ghosts[i].until <= now) {
                        kept_ghost_clear(&l->ghosts[i]);
                        l->ghosts[i] = l->ghosts[--l->n_ghosts];
                } else
                        i++;
        for (size_t i = 0; i < l->n_ghosts; i++) {
                struct kept_ghost *g = &l->ghosts[i];
                size_t node = 0, idx;
                int r = drain_inputs_find_node(di, g->node, &node)
                            ? 0
                            : drain_inputs_add_node(di, g->node, g->deadline, g->margin, &node);
                if (r < 0)
                        return r;
                r = drain_inputs_add_pod_memo(di, node, g->memo, &idx);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0)
                        (void)drain_inputs_set_gone(di, idx, g->gone_at);
        }
        return 0;
}

static int str_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every PDB of a namespace with pods to plan: a cluster may have thousands, and only these can select the
 * pods (a pod is matched against every PDB added). */
static int add_pdbs(struct drain_ledger *l, struct drain_inputs *di)
{
        _cleanup_free_ const char **ns = NULL;
        size_t n = 0;
        int r;

        for (size_t i = 0; i < l->n_members; i++) {
                if (!l->members[i].ops->namespaces)
                        continue;
                r = l->members[i].ops->namespaces(l->members[i].userdata, &ns, &n);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < l->n_ghosts; i++) {
                const char **a = realloc(ns, (n + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                ns = a;
                const char *g = drain_pod_memo_pod(l->ghosts[i].memo)->namespace;
                ns[n++] = g ? g : "";
        }
        if (n > 1)
                qsort(ns, n, sizeof(*ns), str_cmp);
        for (size_t i = 0; i < kube_informer_size(l->inf); i++) {
                const cJSON *o = kube_informer_at(l->inf, i);
                const char *key = kube_object_str(o, "metadata.namespace");
                if (!key)
                        key = "";
                if (n == 0 || !bsearch(&key, ns, n, sizeof(*ns), str_cmp))
                        continue;
                r = drain_inputs_add_pdb(di, o);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        continue;
                const char *name = kube_object_str(o, "metadata.name");
                _cleanup_free_ char *pkey = name ? strprintf("%s/%s", key, name) : NULL;
                const struct lpdb *p = pkey ? lpdb_find(l, pkey) : NULL;
                if (!p || p->n_losses == 0)
                        continue;
                uint64_t at[MAX_LOSSES];
                for (size_t k = 0; k < p->n_losses; k++)
                        at[k] = p->losses[k].at;
                r = drain_inputs_set_pdb_lost(di, at, p->n_losses);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The input of every member's node and pods (in the order they joined), then the kept ghosts. keep: the
 * plan is to be acted on, each member records its slice. */
static int make_input(struct drain_ledger *l, const struct drain_inputs_options *o, bool keep,
                      struct drain_inputs **ret)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        int r = drain_inputs_new(o, &di);
        if (r < 0)
                return r;
        /* The joint's plans (its own and its grading plans) go with it, before its inputs. */
        drain_inputs_plans_borrow_names(di);
        r = add_pdbs(l, di);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l->n_members; i++) {
                struct member *m = &l->members[i];
                m->in_plan = false;
                if (!m->ops->add_inputs)
                        continue;
                m->slice = (struct drain_ledger_slice){ .first_pod = drain_inputs_n_pods(di) };
                size_t nodes = drain_inputs_n_nodes(di);
                r = m->ops->add_inputs(m->userdata, di, keep ? &m->slice : NULL);
                if (r < 0)
                        return r;
                m->in_plan = keep && drain_inputs_n_nodes(di) > nodes;
        }
        r = add_ghosts(l, di);
        if (r < 0)
                return r;
        r = drain_inputs_add_startups(di, l->startups, l->n_startups);
        if (r < 0)
                return r;
        /* Then the startups learnt from pods seen turning Ready: the planner takes an owner's first. */
        struct drain_startup *learnt = NULL;
        size_t n_learnt = 0;
        r = drain_shutdowns_startups(l->shutdowns, &learnt, &n_learnt);
        if (r >= 0)
                r = drain_inputs_add_startups(di, learnt, n_learnt);
        drain_startups_free(learnt, n_learnt);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(di);
        return 0;
}

struct drain_joint *drain_joint_ref(struct drain_joint *j)
{
        if (j)
                j->refs++;
        return j;
}

struct drain_joint *drain_joint_unref(struct drain_joint *j)
{
        if (!j || --j->refs > 0)
                return NULL;
        drain_plan_free(j->plan);
        drain_inputs_free(j->inputs);
        drain_inputs_free(j->expected_inputs);
        drain_grade_cache_free(j->grades);
        free(j);
        return NULL;
}

static int make_joint(struct drain_ledger *l, const struct drain_inputs_options *o)
{
        uint64_t started = clk_now();
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
        int r = make_input(l, o, true, &di);
        if (r >= 0)
                r = drain_plan_make(drain_inputs_get(di), &plan);
        if (r < 0)
                return r;
        struct drain_joint *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct drain_joint){
                .refs = 1,
                .inputs = TAKE_PTR(di),
                .plan = TAKE_PTR(plan),
                .made_usec = o->now_usec,
                .startups_gen = l->startups_gen,
        };
        drain_joint_unref(l->joint);
        l->joint = j;
        l->dirty = false;
        l->plan_made = clk_now();
        l->plan_cost = l->plan_made > started ? l->plan_made - started : 0;
        l->stats.plans++;
        for (size_t i = 0; i < l->n_members; i++) {
                struct member *m = &l->members[i];
                if (m->ops->planned)
                        m->ops->planned(m->userdata, j, m->in_plan ? &m->slice : NULL);
        }
        return 0;
}

/* Wakes the members that asked for a plan while one had to wait. */
static void wake_pending(struct drain_ledger *l)
{
        for (size_t i = 0; i < l->n_members; i++)
                if (l->members[i].pending) {
                        l->members[i].pending = false;
                        l->members[i].ops->wake(l->members[i].userdata);
                }
}

static uint64_t plan_gap(const struct drain_ledger *l)
{
        uint64_t gap = l->plan_cost * PLAN_GAP_FACTOR;
        return gap < PLAN_GAP_MAX_USEC ? gap : PLAN_GAP_MAX_USEC;
}

static void replan_fire(void *userdata)
{
        struct drain_ledger *l = userdata;
        l->replan = NULL; /* released by the loop as it fired */
        if (l->dirty && l->have_opts && l->n_members > 0) {
                struct drain_inputs_options o = l->opts;
                o.now_usec = clk_now();
                int r = make_joint(l, &o);
                if (r < 0)
                        log_debug_errno(r, "cannot plan the drains");
        }
        /* On the new plan, or (without one) to plan on their own turn: they must not wait for nothing. */
        wake_pending(l);
}

/* A new joint plan is due once the gap after the last one has passed. */
void ledger_set_dirty(struct drain_ledger *l)
{
        l->dirty = true;
        if (l->replan || !l->have_opts)
                return;
        uint64_t at = l->plan_made + plan_gap(l), now = clk_now();
        if (timer_start(l->loop, at > now ? at : now, replan_fire, l, &l->replan) < 0)
                l->replan = NULL;
}

void drain_ledger_touch(struct drain_ledger *l)
{
        if (l)
                ledger_set_dirty(l);
}

static int keep_options(struct drain_ledger *l, const struct drain_inputs_options *o)
{
        size_t n = o->critical_classes ? o->n_critical_classes : 0;
        for (size_t i = 0; i < l->n_critical; i++)
                free(l->critical[i]);
        free(l->critical);
        l->n_critical = 0;
        l->critical = n ? calloc(n, sizeof(*l->critical)) : NULL;
        if (n && !l->critical)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++, l->n_critical++)
                if (!(l->critical[i] = strdup(o->critical_classes[i])))
                        return -ENOMEM;
        l->opts = *o;
        l->opts.critical_classes = o->critical_classes ? (const char *const *)l->critical : NULL;
        l->have_opts = true;
        return 0;
}

int drain_ledger_plan(struct drain_ledger *l, void *member, const struct drain_inputs_options *o)
{
        if (!l->have_opts) {
                int r = keep_options(l, o);
                if (r < 0)
                        return r;
        }
        if (l->joint && !l->dirty && o->now_usec < l->joint->made_usec + PLAN_MAX_AGE_USEC)
                return 0;
        if (l->joint && clk_now() < l->plan_made + plan_gap(l)) {
                for (size_t i = 0; i < l->n_members; i++)
                        if (l->members[i].userdata == member)
                                l->members[i].pending = true;
                ledger_set_dirty(l);
                return 0;
        }
        l->replan = timer_cancel(l->replan);
        int r = make_joint(l, o);
        wake_pending(l);
        return r;
}

int drain_ledger_expected(struct drain_ledger *l, const struct drain_inputs_options *o, const char *node,
                          const struct drain_input **ret, size_t *ret_node,
                          struct drain_grade_cache ***ret_grades)
{
        struct drain_joint *j = l->joint;
        if (!j)
                return -ENOENT;
        if (!j->expected_inputs) {
                /* The pods as they are now, so at the asker's now (not the joint plan's: a pod deleted
                 * since would be deleted in the future). */
                struct drain_inputs_options eo = *o;
                eo.shutdown_basis = DRAIN_SHUTDOWN_EXPECTED;
                int r = make_input(l, &eo, false, &j->expected_inputs);
                if (r < 0)
                        return r;
        }
        if (!drain_inputs_find_node(j->expected_inputs, node, ret_node))
                return -ENOENT;
        *ret = drain_inputs_get(j->expected_inputs);
        if (ret_grades)
                *ret_grades = &j->grades;
        return 0;
}
