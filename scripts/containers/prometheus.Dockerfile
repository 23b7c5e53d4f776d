# Prometheus from Debian's package on the locally built base (no registry needed).
# Stands in for prom/prometheus: same entrypoint style, default flags, config path,
# data dir (/prometheus) and port (9090), so docker-compose.yml's `command:` works with both.
#   podman build --format docker -f scripts/containers/prometheus.Dockerfile \
#                -t localhost/swarm-prometheus scripts/containers
FROM localhost/bookworm-py
ENV DEBIAN_FRONTEND=noninteractive
# policy-rc.d: never start the service from postinst inside the build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
 && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER prometheus
WORKDIR /prometheus
EXPOSE 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", \
     "--web.console.libraries=/usr/share/prometheus/console_libraries", \
     "--web.console.templates=/usr/share/prometheus/consoles"]
