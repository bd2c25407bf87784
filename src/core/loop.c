/* The one event loop: sd-event owns signals and timers; http.c runs its connections on it. */
#include <signal.h>
#include <systemd/sd-event.h>

#include "spotdrain/core.h"

struct timer {
        struct loop *loop; /* NULL once detached by loop_free() */
        sd_event_source *source;
        timer_fn fn;
        void *userdata;
        bool loop_owned;
        struct timer *prev, *next;
};

struct loop {
        sd_event *event;
        sd_event_source *sigterm, *sigint;
        bool stopping;
        loop_stop_fn stop_fn;
        void *stop_userdata;
        struct timer *timers;                 /* armed timers */
        void *http;                           /* http.c's per-loop state, created on first use */
        void (*http_cleanup)(struct loop *l); /* its teardown, which http.c hands over with it */
};

static void timer_unlink(struct timer *t)
{
        if (t->prev)
                t->prev->next = t->next;
        else
                t->loop->timers = t->next;
        if (t->next)
                t->next->prev = t->prev;
        t->prev = t->next = NULL;
        t->loop = NULL;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        struct loop *l = userdata;

        if (l->stopping || !l->stop_fn) {
                l->stopping = true;
                return sd_event_exit(l->event, 0);
        }
        l->stopping = true;
        l->stop_fn(l, l->stop_userdata);
        return 0;
}

int loop_new(struct loop **ret)
{
        _cleanup_(loop_freep) struct loop *l = calloc(1, sizeof(*l));
        sigset_t mask;
        int r;

        if (!l)
                return -ENOMEM;
        r = sd_event_new(&l->event);
        if (r < 0)
                return r;

        /* sd-event reads signals from a signalfd, which only sees blocked signals. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
                return -EINVAL;
        r = sd_event_add_signal(l->event, &l->sigterm, SIGTERM, on_signal, l);
        if (r < 0)
                return r;
        r = sd_event_add_signal(l->event, &l->sigint, SIGINT, on_signal, l);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(l);
        return 0;
}

struct loop *loop_free(struct loop *l)
{
        if (!l)
                return NULL;

        /* HTTP first: its teardown still needs the event loop to drop its I/O sources. */
        if (l->http_cleanup)
                l->http_cleanup(l);

        while (l->timers) {
                struct timer *t = l->timers;
                t->source = sd_event_source_disable_unref(t->source);
                bool owned = t->loop_owned;
                timer_unlink(t);
                if (owned)
                        free(t);
        }
        sd_event_source_disable_unref(l->sigterm);
        sd_event_source_disable_unref(l->sigint);
        sd_event_unref(l->event);
        free(l);
        return NULL;
}

sd_event *loop_event(struct loop *l)
{
        return l->event;
}

void **loop_http_state(struct loop *l, void (*cleanup)(struct loop *l))
{
        l->http_cleanup = cleanup;
        return &l->http;
}

int loop_run(struct loop *l)
{
        int code;

        if (sd_event_get_state(l->event) == SD_EVENT_FINISHED)
                return sd_event_get_exit_code(l->event, &code) < 0 ? 0 : code;
        return sd_event_loop(l->event);
}

void loop_exit(struct loop *l, int code)
{
        (void)sd_event_exit(l->event, code);
}

bool loop_stopping(struct loop *l)
{
        return l->stopping;
}

void loop_set_stop_handler(struct loop *l, loop_stop_fn fn, void *userdata)
{
        l->stop_fn = fn;
        l->stop_userdata = userdata;
}

int loop_run_until(struct loop *l, const bool *done, uint64_t timeout_usec)
{
        uint64_t start = now_monotonic_usec();
        uint64_t deadline = timeout_usec == UINT64_MAX || timeout_usec > UINT64_MAX - start
                                ? UINT64_MAX
                                : start + timeout_usec;

        while (!*done) {
                if (sd_event_get_state(l->event) == SD_EVENT_FINISHED)
                        return -ECANCELED;
                uint64_t now = now_monotonic_usec();
                if (now >= deadline)
                        return -ETIMEDOUT;
                int r = sd_event_run(l->event, deadline == UINT64_MAX ? UINT64_MAX : deadline - now);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct timer *t = userdata;
        timer_fn fn = t->fn;
        void *ud = t->userdata;

        /* Released before the callback, which may start new timers or free the object holding the handle. */
        t->source = sd_event_source_disable_unref(t->source);
        timer_unlink(t);
        free(t);
        fn(ud);
        return 0;
}

int timer_start(struct loop *l, uint64_t at_clk_usec, timer_fn fn, void *userdata, struct timer **ret)
{
        struct timer *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return -ENOMEM;
        /* 1 usec accuracy: no coalescing, because a scaled engine clock magnifies every delay. */
        r = sd_event_add_time(l->event, &t->source, CLOCK_MONOTONIC, clk_to_monotonic(at_clk_usec), 1,
                              on_timer, t);
        if (r < 0) {
                free(t);
                return r;
        }
        t->loop = l;
        t->fn = fn;
        t->userdata = userdata;
        t->loop_owned = !ret;
        t->next = l->timers;
        if (l->timers)
                l->timers->prev = t;
        l->timers = t;
        if (ret)
                *ret = t;
        return 0;
}

void timer_urgent(struct timer *t)
{
        if (t && t->source)
                (void)sd_event_source_set_priority(t->source, SD_EVENT_PRIORITY_IMPORTANT);
}

int timer_start_in(struct loop *l, uint64_t after_usec, timer_fn fn, void *userdata, struct timer **ret)
{
        uint64_t now = clk_now();
        return timer_start(l, after_usec > UINT64_MAX - now ? UINT64_MAX : now + after_usec, fn, userdata,
                           ret);
}

struct timer *timer_cancel(struct timer *t)
{
        if (!t)
                return NULL;
        t->source = sd_event_source_disable_unref(t->source);
        if (t->loop)
                timer_unlink(t);
        free(t);
        return NULL;
}
