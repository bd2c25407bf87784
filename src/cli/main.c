/* spotdrain: spot-interruption handler and deadline-aware drain agent for Kubernetes on AWS. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/core.h"

struct command {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
};

/* spotdrain-agent (SPOTDRAIN_AGENT_ONLY) is the same program with the DaemonSet's verbs only: the linker
 * leaves the simulator's code out of it, though not libmicrohttpd (its /metrics) nor GnuTLS (which Debian's
 * libcurl and libmicrohttpd bring; docs/agent.md, "Memory"). */
#ifdef SPOTDRAIN_AGENT_ONLY
#define PROGRAM "spotdrain-agent"
#else
#define PROGRAM "spotdrain"
#endif

static const struct command commands[] = {
        { "agent", cmd_agent, "DaemonSet mode: poll this instance's IMDS for notices and drain this node" },
#ifndef SPOTDRAIN_AGENT_ONLY
        { "controller", cmd_controller,
          "queue mode: long-poll SQS for EventBridge/ASG notices, drain any node" },
        { "admission", cmd_admission,
          "the eviction webhook alone: an agent may evict only its own node's pods" },
        { "drain", cmd_drain, "drain NODE [--budget S | --deadline T]: deadline-aware drain of a node" },
        { "plan", cmd_plan, "plan NODE [--budget S]: predict the drain of a node, change nothing" },
        { "audit", cmd_audit, "audit [--budget S]: PDBs whose pods on one node could not drain in time" },
#endif
        { "event", cmd_event, "event parse [FILE|-]: normalize one SQS/EventBridge/SNS/IMDS notice body" },
#ifndef SPOTDRAIN_AGENT_ONLY
        { "simulate", cmd_simulate, "simulate SCENARIO: replay a scenario, the real engine acting on it" },
        { "sim", cmd_sim,
          "sim serve SCENARIO: serve the simulator to kubectl, the aws CLI or another spotdrain" },
        { "catalog", cmd_catalog, "catalog show|refresh: the instance types replacements are chosen from" },
#endif
        { "check-config", cmd_check_config,
          "check-config [--config FILE]: validate the configuration, print it" },
        { "version", cmd_version, "print the version" },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: " PROGRAM " COMMAND [OPTIONS]\n\ncommands:\n");
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fprintf(f, "\ncommon options: --config FILE --kubeconfig FILE --json --log-format json|text "
                   "--log-level LEVEL --dry-run --help --version\n"
                   "'" PROGRAM " help COMMAND' (or COMMAND --help) describes a command's options, with "
                   "defaults and examples;\nthe manuals are spotdrain(1) and spotdrain.yaml(5).\n");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (streq(argv[1], "help") && argc >= 3) {
                /* Help only of the commands this binary has (spotdrain-agent has few). */
                bool known = argv[2][0] == '-';
                for (size_t i = 0; !known && i < ARRAY_SIZE(commands); i++)
                        known = streq(argv[2], commands[i].name);
                if (!known) {
                        fprintf(stderr, PROGRAM " help: no command '%s' (" PROGRAM " --help lists them)\n",
                                argv[2]);
                        return EXIT_USAGE;
                }
                return cli_help_main(argc - 1, argv + 1);
        }
        if (streq(argv[1], "--help") || streq(argv[1], "-h") || streq(argv[1], "help")) {
                usage(stdout);
                return EXIT_OK;
        }
        if (streq(argv[1], "--version"))
                return cmd_version(argc - 1, argv + 1);
        if (streq(argv[1], "agent"))
                agent_malloc_tunables(argv);
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                if (streq(argv[1], commands[i].name))
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, PROGRAM ": unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return EXIT_USAGE;
}
