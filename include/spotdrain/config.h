/* The configuration: each module declares its keys in a table {key, type, default, offset, description}
 * (a struct config_section in its own src/MODULE/settings.c) with the values in a struct of its own; the
 * parser here walks the list of sections. Values come from the defaults, then a YAML file, then SPOTDRAIN_*
 * environment variables, then --set KEY=VALUE, each overriding the one before. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum config_type {
        CONFIG_STRING,   /* char *, NULL when unset */
        CONFIG_INT,      /* int64_t */
        CONFIG_DOUBLE,   /* double */
        CONFIG_BOOL,     /* bool */
        CONFIG_DURATION, /* uint64_t microseconds; written as a number in the key's unit, or "500ms", "2m" */
        CONFIG_ENUM,     /* int: the value of the chosen name */
        CONFIG_STRV,     /* char **, NULL-terminated (never NULL once loaded); a YAML list or "a,b,c" */
};

struct config_enum_value {
        const char *name;
        int value;
};

struct config_item {
        const char *key; /* dotted path, e.g. "drain.safety_margin_seconds" */
        enum config_type type;
        const char *def; /* default in the same text form as the environment uses; NULL = unset */
        size_t offset;   /* into the module's struct */
        const char *description;
        const struct config_enum_value *enum_values; /* CONFIG_ENUM: terminated by a NULL name */
        uint64_t unit_usec;                          /* CONFIG_DURATION: the unit of a bare number */
        double min, max; /* CONFIG_INT / DOUBLE / DURATION (in units); min > max = none */
        bool secret;     /* config_dump hides the value */
        /* CONFIG_STRING: NULL when text is a good value, else why not ("KEY: " is put before it). */
        const char *(*check)(const char *text);
        /* The name the key had before it moved to its module's section: still read (file, environment,
         * --set), with a warning that names the new one. NULL: none. */
        const char *old_key;
};

/* The unit of a CONFIG_DURATION written as a bare number, and "no range", for the tables. */
#define CONFIG_SECONDS      UINT64_C(1000000)
#define CONFIG_MILLISECONDS UINT64_C(1000)
#define CONFIG_NO_RANGE     .min = 1, .max = 0

/* One module's keys, in dump order. Keys of one dotted prefix stay together (config_dump nests them under
 * one heading); a module may declare several sections. */
struct config_section {
        const char *name;
        const struct config_item *items;
        size_t n_items;
};

/* Every module's configuration in one struct: defined by src/service (service.h), which knows every
 * module; the parser here knows none and reaches each value through config_sections' offsets. */
struct spotdrain_config;

/* Every section in dump order (the order of `spotdrain check-config`), with the offset of its module's
 * struct in struct spotdrain_config (src/service/config_sections.c). */
struct config_section_ref {
        const struct config_section *section;
        size_t offset;
};
extern const struct config_section_ref config_sections[];
extern const size_t config_n_sections;
/* sizeof(struct spotdrain_config), for the parser that does not see its definition. */
extern const size_t config_struct_size;

/* The key's table entry, NULL when no module declares it. */
const struct config_item *config_find(const char *key);

/* A configuration holding the defaults. */
int config_new(struct spotdrain_config **ret);
struct spotdrain_config *config_free(struct spotdrain_config *c);
static inline void config_freep(struct spotdrain_config **c)
{
        config_free(*c);
}

/* Applies a YAML file: nested maps are dotted keys. Errors: "FILE:LINE: unknown key 'drain.foo'",
 * "FILE:LINE: drain.budget_seconds: expected a duration in seconds, got 'x'"; every error of the file, one
 * a line (a YAML syntax error ends the reading, so is told alone). On error c is unchanged. */
int config_load_file(struct spotdrain_config *c, const char *path, char **ret_error);
/* Applies SPOTDRAIN_<KEY> variables (key upper-cased, '.' → '_', e.g.
 * SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS). Unknown SPOTDRAIN_* variables are left alone (other tools may
 * share the prefix). */
int config_load_env(struct spotdrain_config *c, char **ret_error);
/* Applies one "KEY=VALUE" (the CLI's --set). */
int config_set(struct spotdrain_config *c, const char *assignment, char **ret_error);
/* Sets one key from its text form ("" or "null" unsets a string). */
int config_set_value(struct spotdrain_config *c, const char *key, const char *value, char **ret_error);
/* Everything in order: defaults, the file (path may be NULL), the environment, then each of sets (NULL or
 * NULL-terminated "KEY=VALUE" strings). */
int config_load(const char *path, char *const *sets, struct spotdrain_config **ret, char **ret_error);

/* The effective values as YAML that config_load_file reads back (secrets shown as "<hidden>"). */
int config_dump(const struct spotdrain_config *c, char **ret);
/* The environment variable name of a key (malloc'ed). */
char *config_env_name(const char *key);
