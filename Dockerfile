# The kubewasm image for those who have Docker (or another BuildKit/Buildah builder):
#   docker build -t kubewasm .
# NOT TESTED HERE: the machines this project is built and tested on have no container engine.
# The tested way is `make image` (scripts/image.sh), which writes the same kind of image — a
# static musl binary run as user 65532 with no shell — as an OCI layout, without an engine.
# x86_64 only, like `make image`.

FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# The system gcc compiles ring's and psm's C and assembly for the musl target: they use no libc
# beyond memset, so no musl-gcc is needed (see scripts/image.sh).
RUN CC_x86_64_unknown_linux_musl=cc cargo build --locked --release -p kubewasm --bin kubewasm \
        --target x86_64-unknown-linux-musl \
    && cp target/x86_64-unknown-linux-musl/release/kubewasm /kubewasm

# CA certificates, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kubewasm /usr/local/bin/kubewasm
USER 65532:65532
LABEL org.opencontainers.image.source="https://github.com/kubewasm/kubewasm" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/kubewasm"]
