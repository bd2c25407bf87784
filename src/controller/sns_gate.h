/* controller/sns_gate: with controller.verify_sns_signature, an SNS-wrapped message is taken only when SNS's
 * signature over it verifies (aws/sns.h). The signing certificate is fetched from the region's SNS endpoint
 * over HTTPS on first use and kept for a day; a message waiting for it is parked and handed back. */
#pragma once

#include <stddef.h>

#include "spotdrain/sqs.h"

struct loop;
struct sns_gate;

/* region: the cluster's (the endpoint is https://sns.REGION.amazonaws.com, or $AWS_ENDPOINT_URL_SNS). */
int sns_gate_new(struct loop *l, const char *region, struct sns_gate **ret);
struct sns_gate *sns_gate_free(struct sns_gate *g);

/* Called for a parked message once its certificate came (error 0: check it again) or could not be had
 * (error < 0, why says why). The message is the callee's to clear. */
typedef void (*sns_gate_resume_fn)(void *userdata, struct sqs_message *m, int error, const char *why);

enum sns_gate_verdict {
        SNS_GATE_PASS,   /* not SNS, or SNS with a signature that verifies */
        SNS_GATE_PARKED, /* *msg was taken (moved out): resume comes later */
        SNS_GATE_REFUSE, /* SNS whose signature does not verify, or cannot be checked: why says why */
};

enum sns_gate_verdict sns_gate_check(struct sns_gate *g, struct sqs_message *msg, sns_gate_resume_fn resume,
                                     void *userdata, char *why, size_t why_size);
