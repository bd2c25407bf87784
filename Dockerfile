# spotdrain container image: built on Debian 12 with the distribution's -dev packages, shipped on
# debian:12-slim with only the runtime libraries, as a non-root user.
#   docker build -t spotdrain --build-arg DEBIAN_SHA256=HEX --build-arg DEBIAN_SLIM_SHA256=HEX .
#   docker run --rm spotdrain version
# HEX: the 64 hex digits of the tag's index digest, the "Digest: sha256:..." line of
# `docker buildx imagetools inspect debian:12` (and of debian:12-slim).
#
# Both base images are pinned by digest (issue #15): a tag such as debian:12 moves with every point release
# and every rebuild, and whoever can push it decides what the next image holds. The digests are build
# arguments without defaults, so a build that is not told which bytes to start from fails instead of taking
# whatever the tag points to today. None is written here: this repository is built on machines that cannot
# reach a registry, so no digest could be checked when this was written; record the ones a release was
# built from with the release. tests/integration/dockerfile_pins.sh checks every FROM for @sha256.
ARG DEBIAN_SHA256
ARG DEBIAN_SLIM_SHA256

FROM debian:12@sha256:${DEBIAN_SHA256} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config \
      libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev libsystemd-dev libexpat1-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The Makefile installs the test tools (clang, valgrind, kubectl, ...) when it misses them; the image needs
# only the library build, whose packages are above: mark the dependencies as checked.
RUN mkdir -p build \
 && touch build/.deps-ok \
 && make -j"$(nproc)" build/spotdrain build/spotdrain-agent \
 && install -D -m 0755 build/spotdrain /out/usr/local/bin/spotdrain \
 && install -D -m 0755 build/spotdrain-agent /out/usr/local/bin/spotdrain-agent

FROM debian:12-slim@sha256:${DEBIAN_SLIM_SHA256}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates libcurl4 libcjson1 libyaml-0-2 libssl3 libsystemd0 libexpat1 libmicrohttpd12 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
COPY systemd/spotdrain.yaml /usr/local/share/doc/spotdrain/spotdrain.yaml.example
# The Helm chart's runAsUser; no home, no shell, nothing writable needed (readOnlyRootFilesystem).
USER 65532:65532
EXPOSE 9464
# The DaemonSet runs /usr/local/bin/spotdrain-agent (the agent without the simulator: a smaller footprint
# on every spot node); the controller and the other verbs run spotdrain.
ENTRYPOINT ["/usr/local/bin/spotdrain"]
CMD ["version"]
