/* Shadow mode: the one switch the write paths (the Kubernetes client, the AWS request layer) consult. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "spotdrain/core.h"

static struct {
        bool on;
        dry_run_count_fn count;
        void *userdata;
} dry_run;

void dry_run_enable(dry_run_count_fn count, void *userdata)
{
        dry_run.on = true;
        dry_run.count = count;
        dry_run.userdata = userdata;
}

void dry_run_disable(void)
{
        dry_run.on = false;
        dry_run.count = NULL;
        dry_run.userdata = NULL;
}

bool dry_run_enabled(void)
{
        return dry_run.on;
}

void dry_run_would(const char *action, const char *fmt, ...)
{
        _cleanup_free_ char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        va_end(ap);
        const char *fields[] = { "dry_run", action, NULL };
        log_full(LOG_NOTICE, 0, fields, "would %s", text ? text : action);
        if (dry_run.count)
                dry_run.count(action, dry_run.userdata);
}
