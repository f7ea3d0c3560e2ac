# oncehook as a container: the static binary on an empty base, as a
# non-root user, with /data the working directory (the SQLite file, and
# ./oncehook.yaml if you mount one there) and no other file needed.
#
#   docker build -t oncehook .
#   (a release's: docker pull ghcr.io/oncehook/oncehook:<version>)
#   docker run -p 8080:8080 -p 127.0.0.1:8081:8081 -v oncehook-data:/data oncehook serve --demo --listen 0.0.0.0:8080
#   docker run -p 8080:8080 -v oncehook-data:/data -v $PWD/oncehook.yaml:/data/oncehook.yaml:ro oncehook
#
# A config in a container must listen on 0.0.0.0 (listen: 0.0.0.0:8080);
# ONCEHOOK_CONFIG names it elsewhere. The binary is built by the release
# tool (internal/release), the one definition of a release binary;
# cmd/oncehook/deploy_test.go runs the build step below and checks that
# the binary is static, names its stamps and runs in this layout.

# The build runs on the builder's own platform and cross-compiles for the
# image's (BuildKit's TARGETOS and TARGETARCH): a multi-arch image needs
# no emulation. Its Go is go.mod's, as the release's binaries are built
# with, so the image's binary is the same as the release archive's.
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The stamps `oncehook version` prints; the release workflow passes
# `go run ./internal/release stamps`. The context has no .git, so a build
# without them says the commit is unknown.
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
ARG TARGETOS
ARG TARGETARCH
RUN go run ./internal/release binary -o /out/oncehook -goos "${TARGETOS}" -goarch "${TARGETARCH}" -version "${VERSION}" -commit "${COMMIT}" -date "${DATE}"
RUN mkdir -p /out/data

FROM scratch
# CA certificates, for destinations over HTTPS; nothing else from the
# build image.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/oncehook /oncehook
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
EXPOSE 8080 8081
# No shell in the image: the binary asks itself (GET /readyz on the
# config's listen address).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s CMD ["/oncehook", "health"]
ENTRYPOINT ["/oncehook"]
CMD ["serve"]
