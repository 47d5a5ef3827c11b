# The Stevedore scheduler image for those who build with a container engine: a static binary on distroless,
# non-root. `make image` builds the same image (user, entrypoint, layout) without one, for amd64 and arm64.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-dev
RUN CGO_ENABLED=0 make build VERSION=${VERSION} BIN=/out

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/scheduler /scheduler
USER 65532:65532
ENTRYPOINT ["/scheduler"]
