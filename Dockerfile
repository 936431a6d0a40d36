# The sink as a container image: a static Go binary on a small base, run as a
# non-root user. Build: docker build --build-arg VERSION=$(git describe --always) .
# Configuration is mounted at /etc/sink/config.yaml (see docker-compose.yml).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so editing code does not re-download modules.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO off: a static binary that runs on any base image.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sink ./cmd/sink

FROM alpine:3.22
# ca-certificates for TLS to Kafka/ClickHouse; tzdata for time zone names in configs.
RUN apk add --no-cache ca-certificates tzdata \
    && addgroup -S -g 10001 sink \
    && adduser -S -D -H -u 10001 -G sink sink
COPY --from=build /out/sink /usr/local/bin/sink
USER 10001:10001
# http.listen in the config: health, readiness and metrics.
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sink"]
CMD ["run", "--config", "/etc/sink/config.yaml"]
