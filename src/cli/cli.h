/* The command-line front end: one function per verb, dispatched from main.c's table. */
#pragma once

#include <stdbool.h>

/* Common options (docs/contracts.md §1); each verb parses those it takes with its own getopt loop. */
struct cli_common {
        const char *config;
        const char *kubeconfig;
        bool json;
        bool dry_run;
        const char *log_format;
        const char *log_level;
};

/* Takes the value of a common option whose getopt_long value is its short letter: 'c' --config,
 * 'k' --kubeconfig, 'j' --json, 'F' --log-format, 'L' --log-level. False for any other c. */
bool cli_common_option(struct cli_common *common, int c, const char *arg);
/* Sets up logging from --log-level (else default_level) and --log-format. Returns -1 to go on, else
 * EXIT_USAGE, having said why on stderr ("spotdrain VERB: ..."). */
int cli_common_log_setup(const struct cli_common *common, const char *verb, int default_level);

/* Exit codes (docs/contracts.md §1). */
enum {
        EXIT_OK = 0,
        EXIT_ERROR = 1,
        EXIT_USAGE = 2,
        EXIT_DEADLINE_MISSED = 3,
        EXIT_INFEASIBLE = 4,
        EXIT_DATAERR = 65,
};

int cmd_audit(int argc, char **argv);
int cmd_catalog(int argc, char **argv);
int cmd_drain(int argc, char **argv);
int cmd_agent(int argc, char **argv);
/* The idle agent's heap without glibc's per-thread cache of freed chunks (up to seven of each small size,
 * kept out of the free lists): after start-up they pin some 70 KiB of dirty pages that malloc_trim()
 * cannot give back, where an agent that idles for hours at a few hundred KiB of heap gains nothing from
 * them. Only a tunable read at a process's start turns it off: main() of `agent` execs the binary once
 * more with GLIBC_TUNABLES set (not when GLIBC_TUNABLES is set already: the operator's choice stands), and
 * unsets it in the process execed, for its children. argv: main's. */
void agent_malloc_tunables(char **argv);
int cmd_controller(int argc, char **argv);
int cmd_admission(int argc, char **argv);
int cmd_event(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
