/* Shared by the planner's input (inputs.c) and the shutdown and startup times it goes by (shutdowns.c). Not
 * part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drain/drain_internal.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

struct sample {
        char *key;
        uint64_t usec;
};

/* shutdowns.c: startup and shutdown times, owner keys, and the array growth inputs.c shares. */
int drain_grow(void **array, size_t n, size_t elem);
