/* Scenario files' parsers for each other: scenario.c the file, its nodes and small sections;
 * scenario_workloads.c and scenario_events.c their sections; scenario_fields.c what they all use. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim/model_internal.h"
#include "spotdrain/yaml.h"

#define SCENARIO_MAX_BYTES (16u * 1024u * 1024u)
#define PATH_MAX_LEN       256

struct sctx {
        const char *file;
        char **error;
};

int sim_sc_fail(struct sctx *c, const struct ynode *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Bounds on a world the simulator builds (sim_new grows with the pods): a small file must not ask for
 * millions of pods, e.g. many DaemonSets on many nodes. */
#define SIM_MAX_NODES 10000
#define SIM_MAX_PODS  200000

/* scenario_fields.c */
void sim_sc_sub(char out[static PATH_MAX_LEN], const char *path, const char *key);
int sim_sc_check_map(struct sctx *c, const struct ynode *n, const char *path, const char *const *allowed);
int sim_sc_get_str(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool required,
                   char **ret);
int sim_sc_get_int(struct sctx *c, const struct ynode *map, const char *key, const char *path, int64_t min,
                   int64_t max, int64_t *ret);
int sim_sc_get_double(struct sctx *c, const struct ynode *map, const char *key, const char *path, double min,
                      double max, double *ret);
int sim_sc_get_bool(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool *ret);
int sim_sc_get_quantity(struct sctx *c, const struct ynode *map, const char *key, const char *path, bool cpu,
                        char **ret_text, int64_t *ret);
int sim_sc_get_seq(struct sctx *c, const struct ynode *map, const char *key, const struct ynode **ret);
bool sim_sc_valid_name(const char *s);
bool sim_sc_valid_instance_id(const char *s);
char *sim_sc_derive_instance_id(const char *name);
ssize_t sim_sc_find_node(const struct sim_scenario *sc, const char *name);

/* scenario_workloads.c, scenario_events.c: their sections of the file */
int sim_sc_parse_workloads(struct sctx *c, const struct ynode *root, struct sim_scenario *sc);
int sim_sc_parse_events(struct sctx *c, const struct ynode *root, struct sim_scenario *sc);
