# spotdrain — build, test, demo, install.  `make check` is the test command; `make demo` the main job.
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
BUILD ?= build
VERSION := 0.1.0

# libcurl makes every outbound HTTP call, libmicrohttpd serves every HTTP endpoint (ops and simulator).
PKGS := libcurl libcjson yaml-0.1 openssl libsystemd expat libmicrohttpd
# spotdrain-agent: the same library without the simulator's code (it serves /metrics on libmicrohttpd too).
AGENT_PKGS := $(PKGS)
TEST_PKGS := cmocka
DEPS_STAMP := $(BUILD)/.deps-ok

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -fno-strict-aliasing -Iinclude -Isrc \
	-DSPOTDRAIN_VERSION=\"$(VERSION)\"
OPT ?= -O2 -g
# Hardening of the shipped binaries (issue #15): stack canaries on functions with arrays or address-taken
# locals, glibc's checked variants of memcpy/snprintf/... where the size is known at compile time, and a GOT
# that is resolved at start and then read-only. _FORTIFY_SOURCE needs the optimizer (an -O0 build would only
# warn, and -Werror makes that fatal), and is undefined first in case a compiler predefines it. The sanitizer
# and fuzzing builds go without it: ASan intercepts memcpy & co. itself, and the __*_chk variants that
# _FORTIFY_SOURCE substitutes bypass those interceptors, so ASan would see less.
HARDEN_CFLAGS = -fstack-protector-strong $(if $(filter -O0,$(OPT)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -lpthread
AGENT_LIBS = $(shell pkg-config --libs $(AGENT_PKGS) 2>/dev/null) -lm -lpthread
CMOCKA_LIBS = $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)

# MODULES and TESTS narrow a build to some modules / test binaries (e.g. make unit MODULES="core sim" TESTS=test_yaml).
MODULES ?= $(notdir $(wildcard src/*))
LIB_SRC := $(sort $(filter-out src/cli/main.c,$(wildcard $(patsubst %,src/%/*.c,$(MODULES)))))
HDRS := $(wildcard include/spotdrain/*.h src/*/*.h)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
ifdef TESTS
TEST_SRC := $(filter $(patsubst %,tests/unit/%.c,$(TESTS)),$(TEST_SRC))
endif
TEST_HELPERS := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TEST_HDRS := $(wildcard tests/unit/*.h)

# $(1) = build dir, $(2) = extra flags (compile and link), $(3) = compiler, $(4) = extra link flags
define variant
$(1)/obj/%.o: %.c $(HDRS) $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$(3) $$(CFLAGS_BASE) $$(OPT) $(2) $$(PKG_CFLAGS) -c $$< -o $$@
$(1)/obj/tests/%.o: tests/%.c $(HDRS) $(TEST_HDRS) $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$(3) $$(CFLAGS_BASE) $$(OPT) $(2) $$(PKG_CFLAGS) -c $$< -o $$@
$(1)/libspotdrain.a: $$(patsubst %.c,$(1)/obj/%.o,$$(LIB_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/spotdrain: $(1)/obj/src/cli/main.o $(1)/libspotdrain.a
	$(3) $(2) $(4) -o $$@ $$^ $$(PKG_LIBS)
$(1)/obj/src/cli/main_agent.o: src/cli/main.c $(HDRS) $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$(3) $$(CFLAGS_BASE) $$(OPT) $(2) $$(PKG_CFLAGS) -DSPOTDRAIN_AGENT_ONLY -c $$< -o $$@
$(1)/spotdrain-agent: $(1)/obj/src/cli/main_agent.o $(1)/libspotdrain.a
	$(3) $(2) $(4) -o $$@ $$^ $$(AGENT_LIBS)
$(1)/tests/%: $(1)/obj/tests/unit/%.o $$(patsubst %.c,$(1)/obj/%.o,$$(TEST_HELPERS)) $(1)/libspotdrain.a
	@mkdir -p $$(dir $$@)
	$(3) $(2) $(4) -o $$@ $$^ $$(PKG_LIBS) $$(CMOCKA_LIBS)
endef

# The sanitizer tree is built by clang: its ASan runtime carries UBSan, so one log_path catches both
# reports (gcc's separate libubsan ignores log_path next to libasan), and its UBSan checks more (NULL + 0).
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_CC ?= clang
$(eval $(call variant,$(BUILD),$$(HARDEN_CFLAGS),$$(CC),$$(HARDEN_LDFLAGS)))
$(eval $(call variant,$(BUILD)/asan,$(SAN),$$(SAN_CC)))

UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
ASAN_BINS := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(TEST_SRC))

.PHONY: all check check-calls unit unit-asan unit-valgrind integration integration-asan test-times demo install format format-check clean deps fuzz fuzz-smoke
.DEFAULT_GOAL := all
all: $(BUILD)/spotdrain $(BUILD)/spotdrain-agent $(BUILD)/libspotdrain.a

# Installs missing Debian packages, and builds the pinned Helm into the real tier's cache (tests/realk8s/setup
# helm), only when a pkg-config or command check fails.
$(DEPS_STAMP): scripts/install-deps
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists $(PKGS) $(TEST_PKGS) \
	   || ! command -v clang >/dev/null 2>&1 || ! command -v valgrind >/dev/null 2>&1 \
	   || ! /usr/bin/python3 -c 'import yaml, botocore, kubernetes' >/dev/null 2>&1 \
	   || ! command -v kubectl >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1 \
	   || ! command -v yamllint >/dev/null 2>&1 || ! command -v nghttpd >/dev/null 2>&1 \
	   || ! command -v npm >/dev/null 2>&1 || ! command -v tmux >/dev/null 2>&1 \
	   || ! command -v chromium >/dev/null 2>&1 || ! command -v man >/dev/null 2>&1 \
	   || [ ! -x "$$(tests/realk8s/setup helm_path)" ]; then \
		echo "make: missing build or test dependencies; running scripts/install-deps"; \
		./scripts/install-deps; \
	fi
	@mkdir -p $(BUILD) && touch $@
deps: $(DEPS_STAMP)

# Each tier keeps each test's exit status, wall and CPU seconds under $(BUILD)/TIER/ (it, it-asan, unit,
# unit-asan, unit-valgrind); `make test-times` writes them into the table scripts/test-times, which the
# runners read to start the longest tests first. Run it after a run of the tiers (.ci/run runs them all).
unit: $(UNIT_BINS)
	@UNIT_LOGS=$(BUILD)/unit UNIT_TIER=unit scripts/run-tests $(UNIT_BINS)
unit-asan: $(ASAN_BINS)
	@UNIT_LOGS=$(BUILD)/unit-asan UNIT_TIER=unit-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		scripts/run-tests $(ASAN_BINS)
# memcheck: invalid accesses, uninitialised values, definite leaks. The tests on a scaled engine clock slow
# their scenario time down under valgrind and ASan (tests/unit/timescale.h) rather than lose their slack.
# Every binary, not only those ASan does not run: ASan (make check) finds the invalid accesses and the leaks,
# but not a read of an uninitialised value, which is what memcheck is here for. One binary per core (715 s on
# 2 cores, 226 s of CPU): most binaries wait on their scenario clock, 20 times slower under valgrind
# (timescale.h), and six at a time took 351 s, but test_executor's test_infeasible_alert_at_once, which runs
# in real time and wants the verdict within a second, then missed it (a run-tests: alone binary runs alone).
unit-valgrind: $(UNIT_BINS)
	@UNIT_JOBS=$${UNIT_JOBS:-$(NPROC)} UNIT_LOGS=$(BUILD)/unit-valgrind UNIT_TIER=unit-valgrind SPOTDRAIN_TEST_WRAPPER="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite" \
		scripts/run-tests $(UNIT_BINS)
# fuzz_smoke.sh is left to `make fuzz-smoke` (run by .ci/run after `make check`): it compiles the library
# once more with fuzzing instrumentation, which would double the time `make check` takes.
INTEGRATION_TESTS := $(filter-out %lib.sh tests/integration/fuzz_smoke.sh,$(wildcard tests/integration/*.sh))
integration: $(BUILD)/spotdrain $(BUILD)/spotdrain-agent
	@SPOTDRAIN=$(BUILD)/spotdrain IT_LOGS=$(BUILD)/it scripts/run-integration $(INTEGRATION_TESTS)
# integration-asan: the scripts whose processes run C that no unit test runs, against the ASan+UBSan binary.
# Every library module is already run in process by the unit tests, under ASan (make check) and valgrind
# (.ci/run), the drain engine, the agent, the controller and the leader against the in-process simulator
# included; what they do not reach is a process's own life and the servers facing clients we did not write:
#   the daemons' main loops, readiness, signal handling and stop (src/cli/cmd_agent.c, cmd_controller.c,
#     frontend.c): agent_sim controller_sim metrics_agent (/metrics over a whole drain) dry_run
#     (src/core/dryrun.c has no unit test) webhook_flush (the alert sink flushed at a front end's exit)
#   crash-resume, a process SIGKILLed and another reading what it left: controller_leader crash_resume_agent
#     crash_resume_controller surge_crash_controller
#   the simulator serving real clients (sim serve, cmd_sim.c; protobuf, tables, watches, paging, the SQS query
#     and JSON protocols, the EC2 and Auto Scaling query protocols, IMDSv2): kubectl_get python_client
#     aws_cli_sqs aws_cli_ec2 agent_botocore
#   the one-shot front ends and their error paths (cmd_drain.c, cmd_plan.c, cmd_audit.c, drain_cli.c, the
#     terminal view, a server that is closed, silent, refuses or speaks no TLS; cmd_simulate.c, cmd_config.c,
#     help.c, cmd_event.c, cmd_admission.c): drain_cli drain_live_view oneshot_errors simulate_cli
#     check_config help_man event_parse admission_webhook
#   the HTTP client's error paths on real sockets (frozen connections, injected resets, stalls, 5xx):
#     drain_frozen_api faults_sim
#   the signer over 1000 random requests, a tool compiled against the instrumented library: sigv4_botocore
# Left out: the scripts that go through `spotdrain simulate` (examples_acceptance, modes_parity,
# verdicts_sim, surge_sim, notice_actions, ordinary_life, provision_rebalance, simulate_launch,
# metrics_simulate, report_timeline): the engine against the in-process simulator, the unit tests' own
# setting; the daemons' behaviours whose code past the main loop the unit tests run (lifecycle_heartbeat,
# launch_hook, agent_lifecycle_hook: test_agent_hook, test_launch; asg_cluster_tag, managed_tag, trust_boundary,
# sns_signature: test_asg_owners, test_managed, test_trust, test_sns; agent_estimates, estimates_restart:
# test_estimates; controller_revert, reboot_uncordon, pod_postmortem, drain_optouts, provision_agent,
# eviction_webhook: test_dispatch, test_agent, test_executor, test_metrics, test_provision, test_admission); surfaces another kept script or a unit test reaches (kubectl_drain,
# kubectl_scale: kubectl_get; aws_cli_sts, aws_cli_sqs_throttle, apf_sim: test_sim_server, test_sqs_throttle,
# test_kube); and the checks that run no C of ours or only the plain binary (contracts_doc, docs_drift,
# dockerfile_pins, hardening, helm_lint, systemd_verify, admission_policy, free_port).
IT_ASAN_TESTS := $(patsubst %,tests/integration/%.sh,agent_sim controller_sim metrics_agent dry_run \
	webhook_flush controller_leader crash_resume_agent crash_resume_controller surge_crash_controller \
	kubectl_get python_client aws_cli_sqs aws_cli_ec2 agent_botocore drain_cli drain_live_view oneshot_errors \
	simulate_cli check_config help_man event_parse admission_webhook drain_frozen_api faults_sim sigv4_botocore)
# The test tools the scripts compile against the library are instrumented too ($CC). TIME_SCALE=2 for the scripts that take it: ASan's 2-3x
# slowdown would otherwise show up as scenario time (a late look at the cluster is a late plan or a late
# verdict). Two tests at a time: faults_sim alone runs 13 cases of two sanitized processes each, and beside
# five other sanitized tests a controller of it once took 57 s to start and missed its 60 s bound.
# Every sanitizer report goes to a file under $(BUILD)/it-asan/reports/TEST/ rather than to stderr, so that
# one written at the exit of a background server stopped by SIGTERM is noticed, not lost in a log nobody reads:
# run-integration fails a test that leaves a report. Leaks count: every process frees what it owns on exit.
# IT_ASAN_TESTS=all runs every script.
IT_ASAN_RUN = $(if $(filter all,$(IT_ASAN_TESTS)),$(INTEGRATION_TESTS),$(IT_ASAN_TESTS))
integration-asan: $(BUILD)/asan/spotdrain $(BUILD)/asan/spotdrain-agent $(BUILD)/asan/libspotdrain.a
	@SPOTDRAIN=$(BUILD)/asan/spotdrain IT_LOGS=$(BUILD)/it-asan SANITIZER_REPORTS=$(BUILD)/it-asan/reports \
		IT_TIER=it-asan CC="$(SAN_CC) $(SAN)" TIME_SCALE=2 ACCEPTANCE_JOBS=2 \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		INTEGRATION_JOBS=$${INTEGRATION_JOBS:-2} \
		scripts/run-integration $(IT_ASAN_RUN)
# The table of each test's seconds (scripts/test-times) from the last run of each tier in $(BUILD); the
# machine's description from TEST_TIMES_MACHINE (default: its cores and the date).
test-times:
	@scripts/update-test-times $(BUILD) "$(TEST_TIMES_MACHINE)"
	@echo "test-times: scripts/test-times written from $(BUILD)/{it,it-asan,unit,unit-asan,unit-valgrind}"
fuzz-smoke: $(BUILD)/spotdrain
	@SPOTDRAIN=$(BUILD)/spotdrain IT_LOGS=$(BUILD)/it scripts/run-integration tests/integration/fuzz_smoke.sh

# The stages report in order, so that a failure says where it is; the build itself may run in parallel (-j).
# The plain tree is built first. Its unit tests and the integration suite mostly wait on scaled clocks and
# servers, so the sanitizer tree builds beside them, its output in $(BUILD)/asan-build.log. While the plain
# tiers run, each compiler runs at the lowest CPU priority (nice 19: a test's process gets the CPU whenever it
# wants it, the compiler takes what is left); the compilers started after they end run at normal priority
# (scripts/yield-to-tests), so that a machine busy with other work does not starve the rest of the build.
# Then come the ASan unit tests and the format check.
NPROC := $(shell nproc 2>/dev/null || echo 2)
check:
	@$(MAKE) --no-print-directory -j$(NPROC) all $(UNIT_BINS)
	@$(MAKE) --no-print-directory check-calls
	@touch $(BUILD)/plain-tiers-running; \
	$(MAKE) --no-print-directory -j$(NPROC) SAN_CC="scripts/yield-to-tests $(BUILD)/plain-tiers-running $(SAN_CC)" \
		$(ASAN_BINS) >$(BUILD)/asan-build.log 2>&1 & asan=$$!; \
	rc=0; { $(MAKE) --no-print-directory unit && $(MAKE) --no-print-directory integration; } || rc=$$?; \
	rm -f $(BUILD)/plain-tiers-running; \
	if ! wait $$asan; then tail -n 40 $(BUILD)/asan-build.log; echo "check: the sanitizer build failed"; \
		exit 1; fi; \
	exit $$rc
	@$(MAKE) --no-print-directory unit-asan
	@$(MAKE) --no-print-directory format-check

# No two files of src/ call into each other, and nothing in src/agent, src/controller or src/drain calls into
# src/cli (issue #33), from `nm` of the library's objects; scripts/calls-allowed lists the cycles left. And no
# file of src/ is over 1,000 lines (issue #33: one concern each).
check-calls: $(BUILD)/libspotdrain.a
	@scripts/check-calls $(BUILD)/obj scripts/calls-allowed
	@long=$$(wc -l $(wildcard src/*/*.c src/*/*.h) | awk '$$2 != "total" && $$1 > 1000'); \
	if [ -n "$$long" ]; then echo "check-calls: files of src/ over 1,000 lines (split by concern):"; \
		echo "$$long"; exit 1; fi

demo: $(BUILD)/spotdrain
	@SPOTDRAIN=$(BUILD)/spotdrain scripts/demo

include mk/install.mk
include mk/realk8s.mk

# The manual pages and the bash completion are written by the binary from the same tables as its --help
# (src/cli/help.c) and its configuration keys (each module's settings.c), so they cannot drift from it.
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
GENERATED_DOCS := $(BUILD)/man/spotdrain.1 $(BUILD)/man/spotdrain.yaml.5 $(BUILD)/completion/spotdrain
$(BUILD)/man/spotdrain.1: $(BUILD)/spotdrain
	@mkdir -p $(dir $@)
	$(BUILD)/spotdrain help --man 1 >$@.tmp && mv $@.tmp $@
$(BUILD)/man/spotdrain.yaml.5: $(BUILD)/spotdrain
	@mkdir -p $(dir $@)
	$(BUILD)/spotdrain help --man 5 >$@.tmp && mv $@.tmp $@
$(BUILD)/completion/spotdrain: $(BUILD)/spotdrain
	@mkdir -p $(dir $@)
	$(BUILD)/spotdrain help --completion bash >$@.tmp && mv $@.tmp $@
.PHONY: man
man: $(GENERATED_DOCS)

install: $(BUILD)/spotdrain $(BUILD)/spotdrain-agent $(GENERATED_DOCS)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/spotdrain $(DESTDIR)$(PREFIX)/bin/spotdrain
	install -m 0755 $(BUILD)/spotdrain-agent $(DESTDIR)$(PREFIX)/bin/spotdrain-agent
	install -d $(DESTDIR)$(PREFIX)/share/spotdrain
	install -m 0644 data/instance-types.json $(DESTDIR)$(PREFIX)/share/spotdrain/instance-types.json
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(BASHCOMPDIR)
	install -m 0644 $(BUILD)/man/spotdrain.1 $(DESTDIR)$(MANDIR)/man1/spotdrain.1
	install -m 0644 $(BUILD)/man/spotdrain.yaml.5 $(DESTDIR)$(MANDIR)/man5/spotdrain.yaml.5
	install -m 0644 $(BUILD)/completion/spotdrain $(DESTDIR)$(BASHCOMPDIR)/spotdrain

format:
	clang-format -i $(wildcard src/*/*.c src/*/*.h include/spotdrain/*.h tests/unit/*.c tests/unit/*.h)
format-check:
	@out=$$(printf '%s\n' $(wildcard src/*/*.c src/*/*.h include/spotdrain/*.h tests/unit/*.c tests/unit/*.h) | \
		xargs -P$(NPROC) -n 16 sh -c 'for f; do clang-format --dry-run --Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done' sh); \
	if [ -n "$$out" ]; then echo "format-check: not clang-formatted (run make format):"; echo "$$out"; exit 1; fi; \
	echo "format-check: ok"

clean:
	rm -rf $(BUILD)
.SECONDARY:
.DELETE_ON_ERROR:

# Fuzzing (clang libFuzzer + ASan/UBSan): every fuzz/fuzz_*.c is a target, run for FUZZ_SECONDS each, seeded
# from fuzz/seeds/NAME/ (when present) and the shared fixtures.
FUZZ_SECONDS ?= 30
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_FIXTURES ?= $(wildcard ../shared/fixtures/eventbridge ../shared/fixtures/imds ../shared/fixtures/sqs)
$(BUILD)/fuzz/%: fuzz/%.c $(LIB_SRC) $(HDRS) $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -DSPOTDRAIN_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) \
		-fsanitize=fuzzer,address,undefined -o $@ $< $(LIB_SRC) $(PKG_LIBS)
fuzz: $(FUZZ_BINS)
	@for b in $(FUZZ_BINS); do n=$$(basename $$b); mkdir -p $(BUILD)/fuzz/corpus-$$n; \
		echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
		$$b -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/corpus-$$n \
			$$( [ -d fuzz/seeds/$$n ] && echo fuzz/seeds/$$n ) $(FUZZ_FIXTURES) 2>$(BUILD)/fuzz/$$n.log \
			|| { tail -n 40 $(BUILD)/fuzz/$$n.log; exit 1; }; done
