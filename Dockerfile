# Orrery as a container image: one static binary on an empty base.
#
#   docker build -t orrery .
#   docker run --rm -p 8081:8081 -v orrery-data:/data orrery
#
# It listens on every interface of the container (ORRERY_ADDR=:8081), as the
# official emulator's image does, with the emulator's well-known key: set
# ORRERY_KEY for anything but local development. Data lives in the volume
# at /data. examples/compose/compose.yaml runs it beside an app.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# The modules first, so that a change of code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The build .ci/release makes for each platform: static (no cgo), without
# the build machine's paths, stripped.
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/orrery ./cmd/orrery
# The data directory, owned by the user the server runs as.
RUN mkdir -p /out/data && chown 65532:65532 /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/orrery /orrery
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV ORRERY_ADDR=:8081 ORRERY_DATA=/data
EXPOSE 8081
VOLUME /data
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 CMD ["/orrery", "health"]
ENTRYPOINT ["/orrery"]
CMD ["serve"]
