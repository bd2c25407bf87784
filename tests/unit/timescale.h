/* The pace of the scaled engine clock (core.h clk_set_scale) and the simulator in the tests that run a
 * drain or a controller against the in-process simulator. Header-only (static functions), so it is not
 * linked into the other tests. */
#pragma once

#include <stdint.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#if defined(__SANITIZE_ADDRESS__) /* gcc */
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

/* How many times slower than the plain build the code runs: valgrind 20-50, ASan 2-3. */
static inline double test_slowdown(void)
{
        if (RUNNING_ON_VALGRIND)
                return 20;
        return TEST_UNDER_ASAN ? 2 : 1;
}

/* Scenario time runs at NOMINAL times real time, whatever the build: under a slower build the real-time
 * slack a test leaves between what it waits for and its deadlines (a lease, a notice, a pod's shutdown)
 * would be eaten by the slowdown, and the test would assert on timing instead of on behaviour. So scenario
 * time slows down by the same factor, but not below real time (that would only make the test longer). The
 * assertions are in scenario time and stay the same. */
static inline double test_time_scale(double nominal)
{
        double s = nominal / test_slowdown();

        if (nominal <= 1)
                return nominal;
        return s > 1 ? s : 1;
}

/* A real-time bound on a wait (a safety net: no test comes near it in the plain build), stretched by the
 * same slowdown. */
static inline uint64_t test_real_bound(uint64_t usec)
{
        return (uint64_t)((double)usec * test_slowdown());
}
