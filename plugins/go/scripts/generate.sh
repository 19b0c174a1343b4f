#!/usr/bin/env bash
# Regenerates the Go SDK's WIT bindings (internal/wit) from the repository's wit/, and refreshes
# the copy of the bindings' runtime package (internal/witpkg), with wit-bindgen-cli 0.63.0's `go`
# generator. The output is committed: building or testing a Go plugin never runs this script.
#
#   plugins/go/scripts/generate.sh           # regenerate
#   plugins/go/scripts/generate.sh --check   # fail if the committed bindings are out of date
#
# Needs wit-bindgen-cli 0.63.0 built with the go generator (about 9 minutes to compile):
#   cargo install wit-bindgen-cli --version 0.63.0 --locked --no-default-features --features go \
#       --root ~/.cache/kubewasm/tools
# ($WIT_BINDGEN names another binary.)
#
# What it changes in the generator's output, and why:
# - The runtime package the bindings import, go.bytecodealliance.org/pkg, is not served by the Go
#   module proxy; the copy inside the wit-bindgen-go 0.63.0 crate (src/pkg, Apache-2.0) is kept
#   in internal/witpkg and the bindings import it from there. No `replace` line is needed, in the
#   SDK or in a plugin.
# - The generator's export stubs are not used: exports/export_*/ are the SDK's own dispatchers
#   (hand-written, kept as they are).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MODULE="$(cd "$HERE" && go list -m)"
CACHE="${KUBEWASM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubewasm}"
WIT_BINDGEN="${WIT_BINDGEN:-$CACHE/tools/bin/wit-bindgen}"
VERSION="0.63.0"

check=false
[ "${1:-}" = "--check" ] && check=true

if ! "$WIT_BINDGEN" --version 2>/dev/null | grep -qx "wit-bindgen-cli $VERSION"; then
    echo "error: wit-bindgen-cli $VERSION with the go generator is needed at $WIT_BINDGEN (or set \$WIT_BINDGEN):" >&2
    echo "  cargo install wit-bindgen-cli --version $VERSION --locked --no-default-features --features go --root $CACHE/tools" >&2
    exit 1
fi
# The crate's source holds the runtime package; cargo install downloaded it.
PKG="$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "wit-bindgen-go-$VERSION" | head -n1)/src/pkg"
if [ ! -f "$PKG/wit/runtime/runtime.go" ]; then
    echo "error: the wit-bindgen-go $VERSION crate's sources are not in the cargo registry (run the cargo install above)" >&2
    exit 1
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
if ! "$WIT_BINDGEN" go --quiet -w controller --pkg-name "$MODULE/internal/wit" --out-dir "$OUT/wit" "$ROOT/wit" >"$OUT/log" 2>&1; then
    cat "$OUT/log" >&2
    exit 1
fi
mkdir -p "$OUT/witpkg"
cp -r "$PKG/wit/runtime" "$PKG/wit/types" "$PKG/wit/async" "$OUT/witpkg/"
cp "$PKG/LICENSE" "$OUT/witpkg/LICENSE"
cat > "$OUT/witpkg/README.md" <<MD
# witpkg

A copy of \`go.bytecodealliance.org/pkg/wit\` (runtime, types, async) as bundled in the
wit-bindgen-go $VERSION crate (\`src/pkg\`, Apache-2.0, see LICENSE), imported by the generated
bindings in ../wit. Kept here because that module is not on the Go module proxy. Written by
../../scripts/generate.sh; do not edit.
MD
# Import the runtime package from inside the SDK.
find "$OUT" -name '*.go' -exec sed -i "s#\"go.bytecodealliance.org/pkg/wit/#\"$MODULE/internal/witpkg/#" {} +
gofmt -w "$OUT"

if $check; then
    status=0
    diff -r "$OUT/wit/imports" "$HERE/internal/wit/imports" >/dev/null || status=1
    diff -r "$OUT/wit/exports/wit_exports" "$HERE/internal/wit/exports/wit_exports" >/dev/null || status=1
    diff -r "$OUT/witpkg" "$HERE/internal/witpkg" >/dev/null || status=1
    (cd "$HERE/internal/wit" && go test -count=1 -run TestBindingsMatchTheWIT . >/dev/null) || status=1
    if [ $status -ne 0 ]; then
        echo "the Go bindings are out of date: run plugins/go/scripts/generate.sh" >&2
    else
        echo "the Go bindings are up to date"
    fi
    exit $status
fi

rm -rf "$HERE/internal/wit/imports" "$HERE/internal/wit/exports/wit_exports" "$HERE/internal/witpkg"
mkdir -p "$HERE/internal/wit/exports"
cp -r "$OUT/wit/imports" "$HERE/internal/wit/imports"
cp -r "$OUT/wit/exports/wit_exports" "$HERE/internal/wit/exports/wit_exports"
cp -r "$OUT/witpkg" "$HERE/internal/witpkg"
# Record what the bindings were generated from (TestBindingsMatchTheWIT checks it).
(cd "$HERE/internal/wit" && go test -count=1 -run TestBindingsMatchTheWIT . -args -update >/dev/null)
echo "regenerated $HERE/internal/wit and $HERE/internal/witpkg from $ROOT/wit"
