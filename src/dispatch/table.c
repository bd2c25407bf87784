/* dispatch/table: the dispatcher's bookkeeping of nodes: the instance → node index, the node entries (one
 * drain per node, the tickets and lifecycle actions it holds) and the notices already seen (dedupe). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "spotdrain/keys.h"

/* A finished or rebalanced node is remembered this long, so that late duplicates and state changes of the
 * instance are recognized as such. */
#define NODE_KEEP_USEC (3600 * SEC)

/* ---- providerID index ---- */

const char *dispatch_instance_from_provider_id(const char *provider_id)
{
        const char *slash;

        /* aws:///ZONE/i-..., also aws:///i-... and the rarer aws://ZONE/i-... */
        if (!startswith(provider_id, "aws://"))
                return NULL;
        slash = strrchr(provider_id, '/');
        if (!slash || !notice_instance_id_valid(slash + 1))
                return NULL;
        return slash + 1;
}

struct index_entry *index_find_node(struct dispatch *d, const char *node)
{
        for (size_t i = 0; i < d->n_index; i++)
                if (streq(d->index[i].node, node))
                        return &d->index[i];
        return NULL;
}

void index_remove(struct dispatch *d, struct index_entry *e)
{
        size_t i = (size_t)(e - d->index);
        free(e->node);
        d->index[i] = d->index[--d->n_index];
}

const char *dispatch_node_for_instance(const struct dispatch *d, const char *instance_id)
{
        for (size_t i = 0; i < d->n_index; i++)
                if (streq(d->index[i].instance, instance_id))
                        return d->index[i].node;
        return NULL;
}

/* ---- node entries ---- */

struct dnode *dnode_find(struct dispatch *d, const char *name)
{
        for (size_t i = 0; i < d->n_nodes; i++)
                if (streq(d->nodes[i]->name, name))
                        return d->nodes[i];
        return NULL;
}

static void dnode_free(struct dnode *n)
{
        if (!n)
                return;
        timer_cancel(n->heartbeat);
        timer_cancel(n->revert);
        free(n->name);
        free(n->tickets);
        free(n->asg);
        free(n);
}

void dnode_remove(struct dispatch *d, struct dnode *n)
{
        for (size_t i = 0; i < d->n_nodes; i++)
                if (d->nodes[i] == n) {
                        d->nodes[i] = d->nodes[--d->n_nodes];
                        break;
                }
        dnode_free(n);
}

struct dnode *dnode_add(struct dispatch *d, const char *name)
{
        struct dnode **v, *n;

        v = realloc(d->nodes, (d->n_nodes + 1) * sizeof(*v));
        if (!v)
                return NULL;
        d->nodes = v;
        n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->d = d;
        n->name = strdup(name);
        if (!n->name) {
                free(n);
                return NULL;
        }
        d->nodes[d->n_nodes++] = n;
        return n;
}

/* Forgets finished and rebalanced nodes that are old enough. */
void dnode_purge(struct dispatch *d)
{
        uint64_t now = clk_now();
        for (size_t i = 0; i < d->n_nodes;) {
                struct dnode *n = d->nodes[i];
                if (n->state != DNODE_DRAINING && !n->revert && now - n->since > NODE_KEEP_USEC)
                        dnode_remove(d, n);
                else
                        i++;
        }
}

int dnode_add_ticket(struct dnode *n, uint64_t ticket)
{
        uint64_t *v;

        if (ticket == DISPATCH_NO_TICKET)
                return 0;
        v = realloc(n->tickets, (n->n_tickets + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        n->tickets = v;
        n->tickets[n->n_tickets++] = ticket;
        return 0;
}

/* ---- dedupe ---- */

void dedupe_key(const struct notice *n, char key[static DEDUPE_KEY_SIZE])
{
        snprintf(key, DEDUPE_KEY_SIZE, "%s|%s|%s", n->event_id, n->instance_id,
                 n->kind == NOTICE_SCHEDULED_CHANGE ? n->state : "");
}

bool dedupe_seen(const struct dispatch *d, const char *key)
{
        for (size_t i = 0; i < d->n_dedupe; i++)
                if (streq(d->dedupe[i], key))
                        return true;
        return false;
}

void dedupe_add(struct dispatch *d, const char *key)
{
        snprintf(d->dedupe[d->dedupe_next], DEDUPE_KEY_SIZE, "%s", key);
        d->dedupe_next = (d->dedupe_next + 1) % d->o.dedupe_max;
        if (d->n_dedupe < d->o.dedupe_max)
                d->n_dedupe++;
}
