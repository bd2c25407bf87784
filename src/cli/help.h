/* cli/help: one table of every command, its flags (each with its default and what it does) and examples,
 * from which `spotdrain help COMMAND`, `COMMAND --help`, the manual pages spotdrain(1) and spotdrain.yaml(5)
 * (its keys from the modules' configuration tables) and the bash completion are all written, so that none
 * of them can say something the others do not. */
#pragma once

#include <stdio.h>

struct cli_flag {
        const char *name; /* without the dashes */
        const char *arg;  /* its value's name; NULL for a switch */
        /* The configuration key whose value applies when the flag is not given: the default shown is that
         * key's, from its table. NULL: def says it. */
        const char *key;
        const char *def;
        const char *text;
};

struct cli_help {
        const char *name;     /* "drain", "event parse" */
        const char *synopsis; /* after "spotdrain " */
        const char *summary;  /* one line */
        const char *description;
        const struct cli_flag *flags; /* terminated by a NULL name */
        const char *const *examples;  /* NULL-terminated command lines */
        const char *exit_status;
        /* The words its output uses, each with what it means: pairs, NULL-terminated; NULL for none. */
        const char *const *words;
};

extern const struct cli_help cli_helps[];
extern const size_t cli_n_helps;

/* The entry of a command ("event" finds "event parse", "sim" "sim serve"), NULL when none. */
const struct cli_help *cli_help_find(const char *command);
/* The default of a flag as help shows it ("120 (drain.budget_seconds)"); borrowed until the next call. */
const char *cli_flag_default(const struct cli_flag *f);
/* Prints the command's help; returns EXIT_OK, or EXIT_USAGE (having said so on stderr) for an unknown one.
 */
int cli_help(FILE *f, const char *command);
/* spotdrain(1) and spotdrain.yaml(5) in roff, and the bash completion script. 0 or a negative errno. */
int cli_help_man1(FILE *f);
int cli_help_man5(FILE *f);
int cli_help_bash_completion(FILE *f);
/* `spotdrain help COMMAND [SUBCOMMAND]`, `help --man 1|5`, `help --completion bash` (argv[0] is "help"). */
int cli_help_main(int argc, char **argv);
