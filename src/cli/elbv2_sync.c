/* cli/elbv2_sync: the deregistration delays of target groups, asked once and waited for (audit). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/elbv2_sync.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/core.h"
#include "spotdrain/elbv2.h"

#define ELBV2_SYNC_USEC (30 * 1000000ULL)

struct sync {
        struct aws_credentials creds;
        bool have_creds, done;
        int error;
        char *message;
        size_t left;
        long *delays;
        const char *const *arns;
};

static void got_creds(int error, const struct aws_credentials *c, const char *message, void *userdata)
{
        struct sync *s = userdata;
        s->done = true;
        s->error = error;
        if (error >= 0)
                s->error = aws_credentials_copy(&s->creds, c);
        s->have_creds = s->error >= 0;
        if (error < 0 && message)
                s->message = strdup(message);
}

static const struct aws_credentials *creds(void *userdata)
{
        struct sync *s = userdata;
        return s->have_creds ? &s->creds : NULL;
}

struct one {
        struct sync *s;
        size_t i;
};

static void got_delay(int error, const char *message, unsigned seconds, void *userdata)
{
        struct one *o = userdata;
        if (error >= 0)
                o->s->delays[o->i] = (long)seconds;
        else if (error != -ECANCELED)
                log_warning("cannot read the deregistration delay of target group %s (%s)", o->s->arns[o->i],
                            message ? message : strerror(-error));
        if (--o->s->left == 0)
                o->s->done = true;
}

/* arn:aws:elasticloadbalancing:REGION:ACCOUNT:targetgroup/...: its REGION. */
static char *arn_region(const char *arn)
{
        const char *p = arn;
        for (int i = 0; i < 3 && p; i++)
                p = (p = strchr(p, ':')) ? p + 1 : NULL;
        const char *e = p ? strchr(p, ':') : NULL;
        return e && e > p ? strndup(p, (size_t)(e - p)) : NULL;
}

int elbv2_sync_delays(struct loop *l, const char *region, const char *const *arns, size_t n, long *delays)
{
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        _cleanup_(elbv2_client_freep) struct elbv2_client *c = NULL;
        _cleanup_free_ char *from_arn = NULL;
        _cleanup_free_ struct one *ones = NULL;
        struct sync s = { .delays = delays, .arns = arns };
        int r;

        for (size_t i = 0; i < n; i++)
                delays[i] = -1;
        if (n == 0)
                return 0;
        if (isempty(region))
                region = aws_env_region(NULL);
        if (isempty(region))
                region = from_arn = arn_region(arns[0]);
        r = aws_creds_provider_new(l, &(struct aws_creds_options){ 0 }, &p);
        if (r >= 0)
                r = aws_creds_get(p, got_creds, &s);
        if (r >= 0)
                r = loop_run_until(l, &s.done, ELBV2_SYNC_USEC);
        if (r >= 0 && s.error < 0)
                r = s.error;
        if (r < 0) {
                log_warning("no AWS credentials to ask ELBv2 about target groups (%s)",
                            s.message ? s.message : strerror(-r));
                goto out;
        }
        r = elbv2_client_new(l, NULL, region, creds, &s, &c);
        if (r < 0) {
                log_warning_errno(r, "no ELBv2 client for region %s", region ? region : "(none)");
                goto out;
        }
        ones = calloc(n, sizeof(*ones));
        if (!ones) {
                r = -ENOMEM;
                goto out;
        }
        s.done = false;
        for (size_t i = 0; i < n; i++) {
                ones[i] = (struct one){ &s, i };
                if (elbv2_describe_delay(c, arns[i], got_delay, &ones[i]) >= 0)
                        s.left++;
        }
        if (s.left > 0)
                (void)loop_run_until(l, &s.done, ELBV2_SYNC_USEC);
        c = elbv2_client_free(c); /* calls still out end now, before ones goes */
        r = 0;
out:
        aws_credentials_clear(&s.creds);
        free(s.message);
        return r;
}
