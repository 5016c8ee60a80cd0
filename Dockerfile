# syntax=docker/dockerfile:1
# Multi-stage build: a static, pure-Go binary (SQLite is modernc.org/sqlite,
# no cgo) on a distroless base, running as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/gateway /app/gateway
COPY --from=build --chown=nonroot:nonroot /out/data /app/data
COPY config.yaml /app/config.yaml
USER nonroot:nonroot
# Inside a container the gateway must listen on every interface. Give it a
# gateway key (GATEWAY_KEY, or keys in a config file): without one, whoever
# reaches the published port can read and plant any user's memory, and
# start-up logs a warning saying so. docker-compose.yml requires one.
ENV GATEWAY_LISTEN=:8080 \
    GATEWAY_SQLITE_PATH=/app/data/memgate.db
EXPOSE 8080
ENTRYPOINT ["/app/gateway"]
CMD ["serve"]
