# Sourced by the scripts: installs (idempotently) what building and testing kubewasm needs on a
# fresh machine, and sets up the environment. Only package registries are needed: crates.io,
# PyPI, npm and the Go module proxy. Builds are cached outside the clone when possible
# (~/.cache/kubewasm), never relied upon.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${KUBEWASM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubewasm}"
mkdir -p "$CACHE"
export KUBEWASM_CACHE_DIR="$CACHE"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"

step() { printf '\n==> %s\n' "$*" >&2; }

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "error: $1 is required ($2)" >&2; exit 1; }
}
need cargo "install Rust with rustup"
need go "install Go 1.26"
need python3 "install Python 3.11"
need node "install Node.js 20"
need npm "install Node.js 20"

# C plugins: clang for wasm32-wasi with wasi-libc, from Debian's packages (what `kubewasm build
# --lang c` runs). Installed when the compiler or the WebAssembly C library is missing.
if ! command -v clang-16 >/dev/null 2>&1 || [ ! -f /usr/include/wasm32-wasi/stdlib.h ] || [ ! -f /usr/lib/llvm-16/lib/clang/16/lib/wasi/libclang_rt.builtins-wasm32.a ]; then
    step "installing clang-16 and wasi-libc for C plugins"
    C_PACKAGES=(clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32)
    SUDO=()
    [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${C_PACKAGES[@]}" >/dev/null ||
        { "${SUDO[@]}" apt-get update >/dev/null && "${SUDO[@]}" apt-get install -y --no-install-recommends "${C_PACKAGES[@]}" >/dev/null; }
fi

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    step "adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
fi

# Python tools (componentize-py, kubectl, pytest) and the Python SDK, in a venv kept in the cache.
# One venv per checkout: the SDK is installed editable, so a venv shared by two clones would point
# one of them at the other's sources.
VENV="$CACHE/venv-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
if [ ! -x "$VENV/bin/python" ]; then
    step "creating a Python venv in $VENV"
    python3 -m venv "$VENV"
fi
export PATH="$VENV/bin:$PATH"
PY_STAMP="$VENV/.kubewasm-$(cat "$ROOT/scripts/requirements.txt" "$ROOT"/plugins/python/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)"
if [ ! -e "$PY_STAMP" ]; then
    step "installing Python packages"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/scripts/requirements.txt"
    if [ -f "$ROOT/plugins/python/pyproject.toml" ]; then
        "$VENV/bin/pip" install --quiet --disable-pip-version-check -e "$ROOT/plugins/python"
    fi
    touch "$PY_STAMP"
fi

# The JS SDK's tools (componentize-js, esbuild).
if [ -f "$ROOT/plugins/js/package.json" ]; then
    JS_STAMP="$ROOT/plugins/js/node_modules/.kubewasm-$(sha256sum "$ROOT/plugins/js/package.json" | cut -c1-16)"
    if [ ! -e "$JS_STAMP" ]; then
        step "installing npm packages for the JS SDK"
        (cd "$ROOT/plugins/js" && npm install --no-audit --no-fund --loglevel=error)
        touch "$JS_STAMP"
    fi
fi

# The JS examples depend on the SDK as a local package (file:../../../plugins/js): link it into
# each example's node_modules (their unit tests import @kubewasm/sdk).
for example in "$ROOT"/examples/*/js; do
    [ -f "$example/package.json" ] || continue
    EXAMPLE_STAMP="$example/node_modules/.kubewasm-$(cat "$example/package.json" "$ROOT/plugins/js/package.json" | sha256sum | cut -c1-16)"
    if [ ! -e "$EXAMPLE_STAMP" ]; then
        step "installing npm packages for ${example#"$ROOT"/}"
        (cd "$example" && npm install --no-audit --no-fund --loglevel=error)
        touch "$EXAMPLE_STAMP"
    fi
done

export KUBECTL="$VENV/bin/kubectl"
