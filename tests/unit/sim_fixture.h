/* The simulator as the unit tests start it: a scenario (YAML text) loaded and started, served on a loopback
 * port, and a kubeconfig for it loaded. One place for what ten tests each wrote out. */
#pragma once

#include <stdbool.h>

struct kube_config;
struct sim;
struct sim_server;
struct ynode;

struct sim_fixture {
        char sc_path[64], kc_path[64]; /* the scenario and kubeconfig files, removed at the stop */
        struct ynode *tree;
        struct sim *sim;
        struct sim_server *srv;
        struct kube_config *kcfg;
        bool scaled; /* the engine clock was scaled: set back to 1 at the stop */
};

struct sim_fixture_options {
        double scale;       /* the model's time scale; 0 = 1 */
        bool manual_clock;  /* the test advances the model's clock itself */
        bool scale_engine;  /* the engine clock runs at the same scale (clk_set_scale) */
        bool faults;        /* the server takes the scenario's faults (sim_server_options_from_scenario) */
        bool no_kubeconfig; /* sim_fixture_kubeconfig() comes later (a relay in front of the server) */
        bool no_server;     /* the model alone: the test starts the surface it tests (IMDS, SQS, a server) */
};

/* Writes text to a new file from path_template (mkstemp's XXXXXX). */
void sim_fixture_write_file(char *path_template, const char *text);
/* Starts it all (the model, then its Kubernetes surface and a kubeconfig for it, unless o says otherwise);
 * fails the test when something does not start. o may be NULL. */
void sim_fixture_start(struct sim_fixture *f, const char *scenario, const struct sim_fixture_options *o);
/* The kubeconfig for url (NULL: the server's own), written and loaded into f->kcfg. */
void sim_fixture_kubeconfig(struct sim_fixture *f, const char *url);
/* Stops the server and frees the rest (a client on f->kcfg must be freed before). */
void sim_fixture_stop(struct sim_fixture *f);
