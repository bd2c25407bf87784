/* The one retry policy: exponential growth with full jitter (AWS Architecture Blog, "Exponential Backoff And
 * Jitter"), so that many clients retrying the same server spread out instead of retrying in lockstep. */
#include <sys/random.h>
#include <unistd.h>

#include "spotdrain/core.h"

/* xoshiro256** per thread, seeded once from getrandom(); jitter needs no cryptographic strength, only
 * independence between processes and threads. */
static _Thread_local uint64_t rng_state[4];
static _Thread_local bool rng_seeded;

static uint64_t rotl(uint64_t x, int k)
{
        return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
        uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static void rng_seed(void)
{
        uint64_t seed;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
                /* No entropy yet (early boot): mix time and pid, still distinct per process. */
                seed = now_realtime_usec() ^ ((uint64_t)getpid() << 32) ^ now_monotonic_usec();
        for (size_t i = 0; i < ARRAY_SIZE(rng_state); i++)
                rng_state[i] = splitmix64(&seed);
        rng_seeded = true;
}

static uint64_t rng_next(void)
{
        if (!rng_seeded)
                rng_seed();
        uint64_t *s = rng_state;
        uint64_t result = rotl(s[1] * 5, 7) * 9;
        uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return result;
}

uint64_t backoff_next(struct backoff *b)
{
        if (b->base_usec == 0)
                return 0;

        /* max_usec 0 means "no cap" (bounded only by overflow). */
        uint64_t max = b->max_usec > 0 ? b->max_usec : UINT64_MAX;
        uint64_t cap;
        if (b->attempt >= 63 || b->base_usec > (max >> b->attempt))
                cap = max;
        else
                cap = b->base_usec << b->attempt;
        if (cap > max)
                cap = max;

        if (b->attempt < 64)
                b->attempt++;

        /* Uniform in [0, cap]; the modulo bias is below 2^-40 for any realistic cap. */
        uint64_t delay = cap == UINT64_MAX ? rng_next() : rng_next() % (cap + 1);

        /* Floor at base/4 (at least 1 usec): a zero delay would turn a retry loop into a busy loop, and a
         * quarter of the base still keeps most of the jitter's spread. */
        uint64_t floor = b->base_usec / 4 > 0 ? b->base_usec / 4 : 1;
        if (floor > cap)
                floor = cap;
        return delay < floor ? floor : delay;
}

void backoff_reset(struct backoff *b)
{
        b->attempt = 0;
}
