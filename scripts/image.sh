#!/usr/bin/env bash
# `make image`: the kubewasm container image without a container engine. Builds a static
# `kubewasm` for x86_64-unknown-linux-musl and writes an OCI image layout (default target/image,
# or $IMAGE_DIR) that runs it as user 65532 on an empty root — no shell, no libc. Push it with any
# OCI tool: `crane push target/image REGISTRY/kubewasm:TAG`, `skopeo copy oci:target/image ...`.
#
# Needs Rust (rustup), a C compiler as `cc` (which Rust's linker already needs) and Python 3.11.
# The C compiler is the host's on purpose: the only C and assembly in the build (ring's crypto,
# psm's stack switching) uses no libc beyond memset, so no musl-gcc is needed; the Rust musl
# target brings musl's libc and start files itself.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${KUBEWASM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubewasm}"
TARGET=x86_64-unknown-linux-musl
# Its own target directory: never waits for (or invalidates) the test build's.
TARGET_DIR="$CACHE/image-target"
# `release`, or `image-test` (Cargo.toml: unoptimized, what the test suite builds).
PROFILE="${IMAGE_PROFILE:-release}"
OUT="${IMAGE_DIR:-$ROOT/target/image}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

step() { printf '\n==> %s\n' "$*" >&2; }

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    step "adding the $TARGET Rust target"
    rustup target add "$TARGET"
fi
[ -f "$CA_BUNDLE" ] || { echo "error: no CA bundle at $CA_BUNDLE (set CA_BUNDLE)" >&2; exit 1; }

step "building a static kubewasm ($TARGET, profile $PROFILE) in $TARGET_DIR"
CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-cc}" \
    cargo build --manifest-path "$ROOT/Cargo.toml" --locked -p kubewasm --bin kubewasm \
    --target "$TARGET" --profile "$PROFILE" --target-dir "$TARGET_DIR"
BIN="$TARGET_DIR/$TARGET/$PROFILE/kubewasm"

step "writing the OCI image layout to $OUT"
VERSION="$(cargo pkgid --manifest-path "$ROOT/Cargo.toml" -p kubewasm | sed 's/.*[@#]//')"
REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)"
python3 "$ROOT/scripts/oci_image.py" --binary "$BIN" --ca-bundle "$CA_BUNDLE" \
    --version "$VERSION" ${REVISION:+--revision "$REVISION"} "$OUT"
