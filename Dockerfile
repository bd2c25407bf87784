# spotdrain container image: built on Debian 12 with the distribution's -dev packages, shipped on
# debian:12-slim with only the runtime libraries, as a non-root user.
#   docker build -t spotdrain .
#   docker run --rm spotdrain version

FROM debian:12 AS build
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

FROM debian:12-slim
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
