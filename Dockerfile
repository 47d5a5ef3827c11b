# The Stevedore scheduler image for those who build with a container engine: a static binary on distroless,
# non-root. `make image` builds the same image (the same binary, user, entrypoint, layout) without one, for amd64
# and arm64; both build the binary with `make image-binary`.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.2.0-dev
ARG TARGETARCH=amd64
RUN make image-binary VERSION=${VERSION} IMAGE_ARCH=${TARGETARCH} IMAGE_BINARY=/out/scheduler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/scheduler /scheduler
USER 65532:65532
ENTRYPOINT ["/scheduler"]
