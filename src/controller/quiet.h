/* The log of messages left in the queue, kept short: at most one line per (reason, sender) a minute. The
 * lines held back are counted and told in one summary line per (reason, sender) when their minute ends, so
 * that a backlog of thousands of bad messages costs a few lines, not thousands. The metrics count every
 * message. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define QUIET_INTERVAL_USEC (UINT64_C(60) * 1000000)
#define QUIET_SLOTS         64

struct quiet_slot {
        char reason[32];
        char sender[128];
        uint64_t since; /* when the line of this minute was logged; 0 = a free slot */
        uint64_t held;  /* lines held back since */
};
struct quiet {
        struct quiet_slot slots[QUIET_SLOTS]; /* past QUIET_SLOTS pairs the oldest is forgotten */
};

/* True when the line for (reason, sender) may be logged now (and its minute starts); false when it is held
 * back and counted. */
bool quiet_allow(struct quiet *q, const char *reason, const char *sender, uint64_t now_usec);

typedef void (*quiet_fn)(const char *reason, const char *sender, uint64_t held, void *userdata);
/* Tells fn of every pair whose minute ended (all: every pair) with lines held back, and starts them
 * afresh. Returns the time the next minute with lines held back ends, 0 when none. */
uint64_t quiet_flush(struct quiet *q, uint64_t now_usec, bool all, quiet_fn fn, void *userdata);
