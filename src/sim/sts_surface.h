/* The simulator's STS surface: one libmicrohttpd listener answering sts:AssumeRoleWithWebIdentity in the
 * query protocol (form POST, or GET with the parameters in the query), as the real service does for IRSA
 * (docs/contracts.md §5, fixtures/sts): the XML answer with fresh temporary credentials, or an
 * ErrorResponse (400 InvalidIdentityToken for an empty or unparsable token, 400 ExpiredTokenException when
 * the JWT's exp has passed, 400 ValidationError / MissingParameter for bad parameters, 400 InvalidAction
 * for other actions, 403 AccessDenied and 500 InternalFailure as faults).
 *
 * The token is a JWT whose signature is not checked (the simulator trusts any issuer); its sub, aud and iss
 * claims fill SubjectFromWebIdentityToken, Audience and Provider. The call is unsigned, as on AWS; a signed
 * one is answered the same but counted (sim_sts_stats.signed_requests).
 *
 * Issued credentials (ASIA... key ids) expire after DurationSeconds (900..43200, default 3600) of wall-clock
 * time — scenario time through sim_wall_usec() when the surface has a model. sim_sts_secret_lookup() lets
 * the other simulated AWS surfaces verify SigV4 signatures made with them (sim_sqs_set_secret_lookup()); it
 * also knows the scenario's long-term key SIM_STS_ACCESS_KEY_ID / SIM_STS_SECRET_ACCESS_KEY. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim;
struct sim_sts;

#define SIM_STS_ACCOUNT           "123456789012"
#define SIM_STS_ACCESS_KEY_ID     "AKIDEXAMPLE"
#define SIM_STS_SECRET_ACCESS_KEY "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

/* Starts the listener on host (an address to bind, port chosen by the kernel; NULL = "127.0.0.1"). s may be
 * NULL (a standalone STS on the real clock); else it must outlive the surface. */
int sim_sts_start(struct sim *s, const char *host, struct sim_sts **ret);
/* NULL-safe; returns NULL. */
struct sim_sts *sim_sts_stop(struct sim_sts *t);
/* "http://127.0.0.1:PORT" (the endpoint URL for AWS_ENDPOINT_URL_STS / --endpoint-url). */
const char *sim_sts_url(const struct sim_sts *t);

/* A sigv4_secret_lookup_fn (userdata = the struct sim_sts *): the secret of a live credential this surface
 * issued, or of the long-term key; NULL otherwise. Thread-safe; the string stays valid until sim_sts_stop.
 */
const char *sim_sts_secret_lookup(const char *access_key_id, void *userdata);
/* Whether token is the session token issued with access_key_id (long-term keys: token must be NULL/""). */
bool sim_sts_session_token_valid(struct sim_sts *t, const char *access_key_id, const char *token);

struct sim_sts_fault {
        bool access_denied; /* every call answers AccessDenied (403), as with a broken trust policy */
        unsigned error_500; /* the next N calls answer InternalFailure (500) */
        unsigned
            duration_cap; /* seconds: credentials live at most this long (0 = as asked), for refresh tests */
};
int sim_sts_set_fault(struct sim_sts *t, const struct sim_sts_fault *f);

struct sim_sts_stats {
        uint64_t requests;        /* every request answered */
        uint64_t issued;          /* credentials issued */
        uint64_t signed_requests; /* requests that carried an Authorization header or X-Amz-Signature */
        uint64_t errors;          /* error answers */
};
void sim_sts_stats(struct sim_sts *t, struct sim_sts_stats *ret);
