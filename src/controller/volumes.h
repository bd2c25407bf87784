/* controller/volumes: before an ASG termination lifecycle action is completed (the instance then
 * terminates at once), the node's VolumeAttachments (storage.k8s.io/v1) must be gone: a volume still
 * attached to a terminating instance keeps its pod's replacement waiting for a forced detach. The wait
 * lists the attachments every VOLUME_WAIT_POLL_USEC until none names the node, or until a deadline (the
 * action's time), and then lets the completion go either way. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct kube_client;
struct volume_wait;

/* left: the node's attachments when it ended (0: all gone); timed_out: the deadline came first. */
typedef void (*volume_wait_fn)(struct volume_wait *w, unsigned left, bool timed_out, void *userdata);

/* Starts waiting for node's attachments to be gone, until until_usec (engine clock). done runs once, from
 * the loop (never from within this call); it may free w. */
int volume_wait_start(struct kube_client *c, const char *node, uint64_t until_usec, volume_wait_fn done,
                      void *userdata, struct volume_wait **ret);
/* No callback after this. NULL-safe; returns NULL. */
struct volume_wait *volume_wait_free(struct volume_wait *w);
/* The node's attachments in a VolumeAttachment list's items. */
unsigned volume_attachments_on(const cJSON *items, const char *node);
