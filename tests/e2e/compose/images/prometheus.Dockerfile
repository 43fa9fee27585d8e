# Stand-in for the public `prom/prometheus` image in the compose test: Debian's
# prometheus on the locally made Debian base, with the public image's
# entrypoint (the compose file gives only flags), a writable /prometheus and
# wget for the health check.
ARG BASE_IMAGE=saintpipe-test/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus wget \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
WORKDIR /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
