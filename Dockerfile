# oncehook as a container: the static binary on an empty base, as a
# non-root user, with /data the working directory (the SQLite file, and
# ./oncehook.yaml if you mount one there) and no other file needed.
#
#   docker build -t oncehook .
#   docker run -p 8080:8080 -p 127.0.0.1:8081:8081 -v oncehook-data:/data oncehook serve --demo --listen 0.0.0.0:8080
#   docker run -p 8080:8080 -v oncehook-data:/data -v $PWD/oncehook.yaml:/data/oncehook.yaml:ro oncehook
#
# A config in a container must listen on 0.0.0.0 (listen: 0.0.0.0:8080);
# ONCEHOOK_CONFIG names it elsewhere. cmd/oncehook/deploy_test.go checks
# that the build below is the README's and that the binary runs in this
# layout.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/oncehook ./cmd/oncehook
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
