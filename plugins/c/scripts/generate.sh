#!/usr/bin/env bash
# Regenerates the C SDK's WIT bindings (src/controller.c, src/controller.h) from the repository's
# wit/ with wit-bindgen-cli 0.63.0's `c` generator, and records what they were generated from
# (wit.sha256: the digest of wit/ that `build::c`'s unit test recomputes). The output is
# committed: building a C plugin never runs this script.
#
#   plugins/c/scripts/generate.sh           # regenerate
#   plugins/c/scripts/generate.sh --check   # fail if the committed bindings are out of date
#
# Needs wit-bindgen-cli 0.63.0 with the c generator (about 3 minutes to compile):
#   cargo install wit-bindgen-cli --version 0.63.0 --locked --no-default-features --features c \
#       --root ~/.cache/kubewasm/tools
# ($WIT_BINDGEN names another binary.)
#
# `--no-object-file`: `kubewasm build` embeds the world's type information itself (the SDK
# defines the symbol the bindings reference for wit-bindgen's object file).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${KUBEWASM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubewasm}"
WIT_BINDGEN="${WIT_BINDGEN:-$CACHE/tools/bin/wit-bindgen}"
VERSION="0.63.0"

check=false
[ "${1:-}" = "--check" ] && check=true

if ! "$WIT_BINDGEN" --version 2>/dev/null | grep -qx "wit-bindgen-cli $VERSION"; then
    echo "error: wit-bindgen-cli $VERSION with the c generator is needed at $WIT_BINDGEN (or set \$WIT_BINDGEN):" >&2
    echo "  cargo install wit-bindgen-cli --version $VERSION --locked --no-default-features --features c --root $CACHE/tools" >&2
    exit 1
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
if ! "$WIT_BINDGEN" c --no-object-file -w controller --out-dir "$OUT" "$ROOT/wit" >"$OUT/log" 2>&1; then
    cat "$OUT/log" >&2
    exit 1
fi
# The digest of wit/ without comments, whitespace collapsed (what the bindings depend on); the
# same as the Go SDK's.
python3 - "$ROOT/wit" >"$OUT/wit.sha256" <<'PY'
import hashlib, pathlib, re, sys
h = hashlib.sha256()
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.wit")):
    body = re.sub(r"\s+", " ", re.sub(r"//[^\n]*", "", f.read_text())).strip()
    h.update(f"{f.name}\0{body}\0".encode())
print(h.hexdigest())
PY

if $check; then
    if cmp -s "$OUT/controller.c" "$HERE/src/controller.c" && cmp -s "$OUT/controller.h" "$HERE/src/controller.h" && cmp -s "$OUT/wit.sha256" "$HERE/wit.sha256"; then
        echo "the C bindings are up to date"
        exit 0
    fi
    echo "the C bindings are out of date: run plugins/c/scripts/generate.sh" >&2
    exit 1
fi
cp "$OUT/controller.c" "$OUT/controller.h" "$HERE/src/"
cp "$OUT/wit.sha256" "$HERE/wit.sha256"
echo "regenerated $HERE/src/controller.c and controller.h from $ROOT/wit"
