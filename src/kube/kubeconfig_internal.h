/* Shared by the two halves of the kubeconfig module: kubeconfig.c (files, in-cluster, static and file
 * tokens) and exec_plugin.c (exec credential plugins). Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "spotdrain/kubeconfig.h"

/* The largest kubeconfig, or file it names (a CA bundle), that is read. */
#define KC_FILE_MAX (4u * 1024u * 1024u)

/* Hands msg to *ret_error when the caller wants one (else frees it); returns r. Inline: both halves use it,
 * and exec_plugin.c calls nothing of kubeconfig.c. */
static inline int kc_set_error(char **ret_error, int r, char *msg)
{
        if (ret_error && msg)
                *ret_error = msg;
        else
                free(msg);
        return r;
}

/* exec_plugin.c: */
struct exec_state;
/* Drops the runs and waits of kube_config_token_async (NULL allowed). */
void kc_exec_state_free(struct exec_state *st);
/* The cached exec credential can be handed out at now (CLOCK_MONOTONIC). */
bool kc_exec_cache_valid(const struct kube_config *c, uint64_t now);
/* Runs the plugin on a private event loop and caches its answer. */
int kc_exec_run_sync(struct kube_config *c, char **ret_error);
/* kube_config_token_async() of a kubeconfig with an exec plugin (c->exec). */
int kc_exec_token_async(struct kube_config *c, struct loop *l, const char **ret_token, kube_token_fn fn,
                        void *userdata, struct kube_token_wait **ret_wait, char **ret_error);
