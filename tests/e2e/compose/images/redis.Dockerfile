# Stand-in for the public `redis` image in the compose test (no registry is
# reachable there): Debian's redis-server on the locally made Debian base.
# It behaves as the compose file expects of the public image: redis-server and
# redis-cli on PATH, a `redis` user, a writable /data, port 6379.
ARG BASE_IMAGE=saintpipe-test/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
