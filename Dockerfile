# syntax=docker/dockerfile:1
# Tollgate's image for people with Docker: `docker build -t tollgate:dev .`
#
# `make image` builds the same image without Docker (tools/image, which
# writes an OCI layout and a docker tarball reproducibly); this file is kept
# consistent with it by hand and is not built in CI here. Both ship the same
# files: this build runs tools/image with -rootfs to collect them (binaries,
# CA bundle, passwd/group, licence notices) and copies that tree onto
# scratch. What differs: Docker's layer timestamps, so not the same digest.
# When you change the config below, change tools/image/build.go too.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY tools/image/go.mod tools/image/go.sum tools/image/
RUN cd tools/image && go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH go build -trimpath -ldflags '-s -w' \
		-o /out/bin/ ./cmd/controlplane ./cmd/executor ./cmd/approvectl
RUN cd tools/image && go run . -bin /out/bin -repo /src -arch $TARGETARCH -rootfs /out/rootfs

FROM scratch
ARG VERSION=dev
ARG REVISION=
COPY --from=build /out/rootfs/ /
LABEL org.opencontainers.image.title=tollgate \
	org.opencontainers.image.source=https://github.com/tollgate-dev/tollgate \
	org.opencontainers.image.version=$VERSION \
	org.opencontainers.image.revision=$REVISION
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /
USER 65532:65532
# API, executor listener, admin (/healthz, /metrics).
EXPOSE 7443/tcp 7444/tcp 9090/tcp
ENTRYPOINT ["/usr/local/bin/controlplane"]
