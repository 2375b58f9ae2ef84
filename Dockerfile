# cascade's container image: `make image` builds it with podman (any OCI builder works).
#
# There is no builder stage on purpose. The binary is built by `make image-binary` on the host
# (bin/image/ARCH/cascade, for TARGETARCH, which podman and buildx set from --platform; `make
# release` builds linux/amd64 and linux/arm64 this way, without emulation since nothing runs):
# static (CGO_ENABLED=0, so the image needs no libc), stripped, -trimpath, with the version and
# commit stamped in (-ldflags -X main.version, main.commit). A builder stage would download every
# module and compile client-go from nothing on each build, in a container that sees neither the
# host's module cache nor its build cache; on the host, the same build takes seconds once those
# caches are warm, and it needs no base image to pull. Build by hand with:
#
#	make image-binary && podman build -t ghcr.io/cascade-gc/cascade:dev .
#	make image-binary IMAGE_ARCH=arm64 && podman build --platform linux/arm64 -t ghcr.io/cascade-gc/cascade:dev-arm64 .
#
# The final image is the binary and nothing else: no shell, no package manager, no CA bundle
# (in a cluster the API server's CA is the mounted service-account ca.crt). It runs as a numeric
# non-root user, so that runAsNonRoot can verify it without an /etc/passwd, and it writes
# nothing to its filesystem, so it runs with a read-only root filesystem.
FROM scratch

ARG VERSION=dev
ARG COMMIT=unknown
ARG TARGETARCH
LABEL org.opencontainers.image.title="cascade" \
      org.opencontainers.image.description="Out-of-tree garbage collector for Kubernetes" \
      org.opencontainers.image.source="https://github.com/cascade-gc/cascade" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"

COPY bin/image/${TARGETARCH}/cascade /cascade
USER 65532:65532
# The metrics and health ports of the defaults (--metrics-bind-address, --health-probe-bind-address).
EXPOSE 8443 8081
ENTRYPOINT ["/cascade"]
