# The Stevedore scheduler image: a static binary on distroless, non-root. `make image` prints the build command
# (this project's CI machines have no container engine).
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
