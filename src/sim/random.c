/* The simulator's randomness, deterministic from the scenario's seed: uids, generated name suffixes,
 * instance IDs. On its own so that every part of the model (volumes.c, deployments.c) draws from it without
 * calling into model.c. */
#include <stdint.h>
#include <stdio.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

uint64_t sim_splitmix64(uint64_t *state)
{
        uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

uint64_t sim_rng_next(struct sim *s)
{
        return sim_splitmix64(&s->rng);
}

char *sim_new_uid(struct sim *s)
{
        uint64_t a = sim_rng_next(s), b = sim_rng_next(s);
        return strprintf("%08x-%04x-4%03x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)((a >> 16) & 0xffff),
                         (unsigned)(a & 0xfff), (unsigned)(((b >> 48) & 0x3fff) | 0x8000),
                         (unsigned long long)(b & 0xffffffffffffULL));
}

/* The alphabet Kubernetes uses for generated name suffixes (no vowels, no confusable digits). */
static const char name_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

void sim_rand_chars(struct sim *s, char *out, size_t n)
{
        for (size_t i = 0; i < n; i++)
                out[i] = name_alphabet[sim_rng_next(s) % (sizeof(name_alphabet) - 1)];
        out[n] = 0;
}

void sim_rand_suffix(struct sim *s, char out[static 6])
{
        sim_rand_chars(s, out, 5);
}
