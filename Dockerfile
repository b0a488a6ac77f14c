# The Outreach service as a container: a static Go build on a small base
# (wget in it serves the health check).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X outreach/server/version.Version=${VERSION}" -o /out/outreach ./cmd/outreach

FROM alpine:3.22
RUN adduser -D -H -u 10001 outreach && mkdir /data && chown outreach /data
COPY --from=build /out/outreach /usr/local/bin/outreach
USER outreach
# Without MONGODB_URI the service runs on the embedded store in /data.
ENV OUTREACH_ADDR=0.0.0.0:8080 OUTREACH_DATA=/data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["outreach"]
CMD ["serve"]
