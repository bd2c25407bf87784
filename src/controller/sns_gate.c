/* SNS signatures at the controller's door: see sns_gate.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sns_gate.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "spotdrain/sns.h"

#define CERT_KEEP_USEC (UINT64_C(86400) * 1000000)
#define CERT_SLOTS     8
#define CERT_MAX_BODY  (64u * 1024u)
#define FETCH_TIMEOUT  (UINT64_C(10) * 1000000)
#define PARKED_MAX     256

struct cert {
        char *url, *pem;
        size_t len;
        uint64_t fetched; /* CLOCK_MONOTONIC usec */
};

struct parked {
        struct sqs_message msg;
        char *url;
        sns_gate_resume_fn resume;
        void *userdata;
};

struct fetch {
        struct sns_gate *g;
        char *url;
        struct http_call *call;
};

struct sns_gate {
        struct loop *loop;
        char *endpoint;
        struct cert certs[CERT_SLOTS];
        struct parked *parked;
        size_t n_parked;
        struct fetch *fetches[CERT_SLOTS];
};

int sns_gate_new(struct loop *l, const char *region, struct sns_gate **ret)
{
        struct sns_gate *g = calloc(1, sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        g->loop = l;
        r = aws_endpoint_resolve(
            &(struct aws_endpoint_query){ .service_id = "SNS", .host = "sns", .region = region },
            &g->endpoint);
        if (r < 0) {
                free(g);
                return r;
        }
        *ret = g;
        return 0;
}

static void cert_clear(struct cert *c)
{
        free(c->url);
        free(c->pem);
        *c = (struct cert){ 0 };
}

struct sns_gate *sns_gate_free(struct sns_gate *g)
{
        if (!g)
                return NULL;
        for (size_t i = 0; i < CERT_SLOTS; i++) {
                cert_clear(&g->certs[i]);
                if (g->fetches[i]) {
                        http_cancel(g->fetches[i]->call);
                        free(g->fetches[i]->url);
                        free(g->fetches[i]);
                }
        }
        for (size_t i = 0; i < g->n_parked; i++) {
                sqs_message_clear(&g->parked[i].msg);
                free(g->parked[i].url);
        }
        free(g->parked);
        free(g->endpoint);
        free(g);
        return NULL;
}

static const struct cert *cert_find(struct sns_gate *g, const char *url)
{
        uint64_t now = now_monotonic_usec();
        for (size_t i = 0; i < CERT_SLOTS; i++)
                if (g->certs[i].url && streq(g->certs[i].url, url) &&
                    now - g->certs[i].fetched < CERT_KEEP_USEC)
                        return &g->certs[i];
        return NULL;
}

static void cert_store(struct sns_gate *g, const char *url, const char *pem, size_t len)
{
        struct cert *slot = &g->certs[0];
        for (size_t i = 0; i < CERT_SLOTS; i++) {
                if (!g->certs[i].url || streq(g->certs[i].url, url)) {
                        slot = &g->certs[i];
                        break;
                }
                if (g->certs[i].fetched < slot->fetched)
                        slot = &g->certs[i];
        }
        cert_clear(slot);
        slot->url = strdup(url);
        slot->pem = malloc(len + 1);
        if (!slot->url || !slot->pem) {
                cert_clear(slot);
                return;
        }
        memcpy(slot->pem, pem, len);
        slot->pem[len] = 0;
        slot->len = len;
        slot->fetched = now_monotonic_usec();
}

/* Hands the messages parked on url back, with error. */
static void unpark(struct sns_gate *g, const char *url, int error, const char *why)
{
        for (size_t i = 0; i < g->n_parked;) {
                struct parked p = g->parked[i];
                if (!streq(p.url, url)) {
                        i++;
                        continue;
                }
                g->parked[i] = g->parked[--g->n_parked];
                free(p.url);
                p.resume(p.userdata, &p.msg, error, why);
        }
}

static void on_fetched(const struct http_response *resp, void *userdata)
{
        struct fetch *f = userdata;
        struct sns_gate *g = f->g;
        char why[320];
        int error = 0;

        for (size_t i = 0; i < CERT_SLOTS; i++)
                if (g->fetches[i] == f)
                        g->fetches[i] = NULL;
        if (resp->error < 0 || resp->status != 200 || !resp->body) {
                error = resp->error < 0 ? resp->error : -EIO;
                snprintf(why, sizeof(why), "cannot fetch the SNS signing certificate %s: %s", f->url,
                         resp->error < 0 ? resp->errbuf : "not answered with 200");
                log_warning("%s", why);
        } else
                cert_store(g, f->url, resp->body, resp->body_len);
        unpark(g, f->url, error, error ? why : NULL);
        free(f->url);
        free(f);
}

static int fetch_start(struct sns_gate *g, const char *url)
{
        size_t slot = CERT_SLOTS;
        for (size_t i = 0; i < CERT_SLOTS; i++) {
                if (g->fetches[i] && streq(g->fetches[i]->url, url))
                        return 0; /* in flight already */
                if (!g->fetches[i] && slot == CERT_SLOTS)
                        slot = i;
        }
        if (slot == CERT_SLOTS)
                return -EBUSY;
        struct fetch *f = calloc(1, sizeof(*f));
        if (!f || !(f->url = strdup(url))) {
                free(f);
                return -ENOMEM;
        }
        f->g = g;
        int r = http_send(
            g->loop,
            &(struct http_request){ .url = url, .timeout_usec = FETCH_TIMEOUT, .max_body = CERT_MAX_BODY },
            on_fetched, f, &f->call);
        if (r < 0) {
                free(f->url);
                free(f);
                return r;
        }
        g->fetches[slot] = f;
        return 0;
}

enum sns_gate_verdict sns_gate_check(struct sns_gate *g, struct sqs_message *msg, sns_gate_resume_fn resume,
                                     void *userdata, char *why, size_t why_size)
{
        struct sns_envelope e;
        int r = sns_envelope_parse(msg->body, msg->body_len, &e, why, why_size);

        if (r == -ENOENT)
                return SNS_GATE_PASS;
        if (r < 0)
                return SNS_GATE_REFUSE;
        if (!sns_cert_url_allowed(e.signing_cert_url, g->endpoint)) {
                snprintf(why, why_size, "its SigningCertURL %s is not a .pem of %s", e.signing_cert_url,
                         g->endpoint);
                sns_envelope_clear(&e);
                return SNS_GATE_REFUSE;
        }
        const struct cert *c = cert_find(g, e.signing_cert_url);
        if (c) {
                r = sns_verify(&e, c->pem, c->len, why, why_size);
                sns_envelope_clear(&e);
                return r < 0 ? SNS_GATE_REFUSE : SNS_GATE_PASS;
        }
        /* Parked until the certificate comes: the message stays hidden meanwhile (its receive's timeout). */
        struct parked *v =
            g->n_parked < PARKED_MAX ? realloc(g->parked, (g->n_parked + 1) * sizeof(*v)) : NULL;
        r = v ? fetch_start(g, e.signing_cert_url) : -ENOMEM;
        if (v)
                g->parked = v;
        if (r < 0) {
                snprintf(why, why_size, "cannot fetch the SNS signing certificate %s: %s",
                         e.signing_cert_url, strerror(-r));
                sns_envelope_clear(&e);
                return SNS_GATE_REFUSE;
        }
        g->parked[g->n_parked++] = (struct parked){
                .msg = *msg, .url = TAKE_PTR(e.signing_cert_url), .resume = resume, .userdata = userdata
        };
        *msg = (struct sqs_message){ 0 };
        sns_envelope_clear(&e);
        return SNS_GATE_PARKED;
}
