#!/usr/bin/env bash
# The whole test suite: the linters, unit tests, the runtime's fault catalog, the end-to-end suites against a
# real local control plane (built from the Kubernetes Go modules on first use), the examples in
# every language (table tests, the cross-language end-to-end suite, `kubewasm new`), and the
# Python, JS, Go and C tests: the SDKs' own and the examples' unit tests. Ends with one line:
# "N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

LOG="$(mktemp -t kubewasm-test.XXXXXX)"
status=0

# The Go programs the end-to-end suites need (the control plane, the OCI registry, crane, helm)
# are built by the test harness when a suite first asks (tests/src/build.rs), which on a cold
# machine leaves the Rust build's idle moments unused and then stalls the suites for minutes.
# Download their modules and compile their packages into Go's build cache now, at the lowest
# priority, beside the Rust build: the harness's `go build` then mostly links. The flags are the
# harness's (CGO_ENABLED=0, -trimpath), so the cache entries are the ones it looks up; a failure
# here costs nothing but the head start (the harness reports the real error).
warm_go() {
    local module package
    while read -r module package; do
        (cd "$ROOT/tests/$module" && CGO_ENABLED=0 nice -n 19 go build -trimpath -o /dev/null "$package") || true
    done <<'TOOLS'
controlplane .
tools ./registry
tools github.com/google/go-containerregistry/cmd/crane
tools helm.sh/helm/v4/cmd/helm
TOOLS
}
GO_WARM_LOG="$(mktemp -t kubewasm-go-warm.XXXXXX)"
warm_go >"$GO_WARM_LOG" 2>&1 &
GO_WARM=$!
run() {
    step "$*"
    "$@" 2>&1 | tee -a "$LOG" || status=1
}

# Runs a command in a directory (for the runners that look for their tests where they start).
in_dir() {
    local dir="$1"
    shift
    (cd "$dir" && "$@")
}

# The linters first: they take seconds (clippy a minute or two on a cold machine). Each is one
# entry of the closing count: "lint passed" when it finds nothing, "lint failed" (and a failed
# run) when it finds something. rustfmt and clippy for the Rust code; Ruff for the
# Python SDK, the Python examples and the conformance plugin (ruff.toml); Biome for the JS ones
# (biome.jsonc); go vet for the Go SDK and the Go plugins, as built for the SDK's unit tests and
# as built into a component (GOOS=wasip1). Vet's unsafeptr check is off: it flags every address
# the bindings wit-bindgen generates turn into a pointer (guest memory, by design), and vet
# reports on them wherever they are imported; no hand-written package imports unsafe.
lint() {
    step "lint: $*"
    if "$@" 2>&1 | tee -a "$LOG"; then
        echo "lint passed: $*" | tee -a "$LOG"
    else
        echo "lint failed: $*" | tee -a "$LOG"
        status=1
    fi
}
go_vet() {
    go vet -unsafeptr=false ./... && GOOS=wasip1 GOARCH=wasm go vet -unsafeptr=false ./...
}
# The house's Rust style: rustfmt at the house width (rustfmt.toml), clippy with every warning
# an error, for every crate and target of the workspace.
lint cargo fmt --all --check
lint cargo clippy --workspace --all-targets -- -D warnings
PYTHON_SOURCES=(plugins/python examples tests/conformance)
lint ruff check "${PYTHON_SOURCES[@]}"
lint ruff format --check "${PYTHON_SOURCES[@]}"
lint plugins/js/node_modules/.bin/biome ci --colors=off plugins/js examples tests/conformance
# The C SDK compiles warning-free for wasm32-wasi (-Wall -Wextra -Werror).
lint make -C plugins/c/test wasm
for dir in plugins/go examples/*/go tests/conformance/go; do
    if [ -f "$dir/go.mod" ]; then
        lint in_dir "$dir" go_vet
    fi
done

# The Rust tests: built first, then the unit tests and the end-to-end suites in two lanes at once,
# each suite a process of its own (with its own control plane; the Go tools are built once, under
# a file lock). Most suites spend their time waiting on the API server; the ones that build a lot
# (the chart's and the image suite's container image, the examples' Python, JS and Go plugins) run
# in one lane, everything else in the other, so two cores serve both (BENCHMARKS.md "CI"). The
# suites that measure time against bounds (the hostile sieges: a neighbour's reconcile within its
# deadline, its creates within seconds) run alone afterwards, on an otherwise quiet machine. The
# second lane is every test target of the workspace's default members that the others do not
# name, so a new suite always runs.
BUILDING_SUITES=(chart image examples)
ALONE_SUITES=(hostile)
step "building the tests"
cargo test --no-fail-fast --no-run 2>&1 | tee -a "$LOG" || status=1
# Runs a command as one lane: its output prefixed with the lane's name, into the log.
lane() {
    local name="$1"
    shift
    "$@" 2>&1 | sed -u "s/^/[$name] /" | tee -a "$LOG"
    return "${PIPESTATUS[0]}"
}
mapfile -t TEST_TARGETS < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
m = json.load(sys.stdin)
default = set(m["workspace_default_members"])
for p in m["packages"]:
    if p["id"] in default:
        print("\n".join(t["name"] for t in p["targets"] if "test" in t["kind"]))
')
building=()
waiting=()
alone=()
for target in "${TEST_TARGETS[@]}"; do
    [[ -n "$target" ]] || continue
    if [[ " ${BUILDING_SUITES[*]} " == *" $target "* ]]; then
        building+=(--test "$target")
    elif [[ " ${ALONE_SUITES[*]} " == *" $target "* ]]; then
        alone+=(--test "$target")
    else
        waiting+=(--test "$target")
    fi
done
step "the suites that build: ${building[*]}; beside them the unit tests and the other suites"
lane building cargo test --no-fail-fast "${building[@]}" &
BUILDING=$!
lane waiting cargo test --no-fail-fast --lib --bins "${waiting[@]}" || status=1
run cargo test --no-fail-fast --doc
wait "$BUILDING" || status=1
run cargo test --no-fail-fast "${alone[@]}"

# The Python SDK's tests, then the Python examples' unit tests (one run per directory: each
# imports its controller module from its own directory).
if [ -f plugins/python/pyproject.toml ]; then
    run python -m pytest -q plugins/python
fi
for dir in examples/*/python; do
    if compgen -G "$dir/test_*.py" >/dev/null; then
        run python -m pytest -q "$dir"
    fi
done

# The JS SDK's tests (`npm test`), then the JS examples' unit tests (`node --test` finds the
# *.test.js files of the directory it runs in).
if [ -f plugins/js/package.json ]; then
    run in_dir plugins/js npm test
fi
for dir in examples/*/js; do
    if compgen -G "$dir/*.test.js" >/dev/null; then
        run in_dir "$dir" node --test
    fi
done

# The Go SDK's tests, then the Go examples' unit tests (`go test -v`: the closing line counts its
# `--- PASS` and `--- FAIL` lines).
if [ -f plugins/go/go.mod ]; then
    run in_dir plugins/go go test -count=1 -v ./...
fi
for dir in examples/*/go; do
    if compgen -G "$dir/*_test.go" >/dev/null; then
        run in_dir "$dir" go test -count=1 -v ./...
    fi
done

# The C SDK's native unit tests (its JSON values), then the C examples' (the CronJob's cron
# parser), under ASan and UBSan; each closes with a line of cargo's form.
for dir in plugins/c/test examples/*/c/test; do
    if [ -f "$dir/Makefile" ]; then
        run make -C "$dir"
    fi
done

wait "$GO_WARM" || true
rm -f "$GO_WARM_LOG"

# One closing line CI can read, summed over every runner above.
python3 - "$LOG" "$status" <<'PY'
import re, sys
passed = failed = 0
for line in open(sys.argv[1], errors="replace"):
    if m := re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line):   # cargo test
        passed += int(m[1]); failed += int(m[2])
    elif re.search(r"\d+ (passed|failed)\b.* in [\d.]+s", line):              # pytest
        passed += sum(int(n) for n in re.findall(r"(\d+) passed", line))
        failed += sum(int(n) for n in re.findall(r"(\d+) (?:failed|error)", line))
    elif m := re.match(r"^(?:#|\u2139) (pass|fail) (\d+)$", line.strip()):       # node --test (tap, spec)
        if m[1] == "pass": passed += int(m[2])
        else: failed += int(m[2])
    elif m := re.match(r"^--- (PASS|FAIL): ", line):                              # go test -v (top-level tests)
        if m[1] == "PASS": passed += 1
        else: failed += 1
    elif m := re.match(r"^lint (passed|failed): ", line):                         # the linters above
        if m[1] == "passed": passed += 1
        else: failed += 1
# The failures by name, each with where it panicked and the message's first line, just above the
# closing line: CI may keep only the log's tail.
names, panics, after, current = [], {}, None, None
for line in open(sys.argv[1], errors="replace"):
    line = re.sub(r"^\[\w+\] ", "", line.rstrip("\n"))
    if after:
        panics.setdefault(after[0], f"{after[1]}: {line.strip()[:300]}")
        after = None
    if m := re.match(r"^test (\S+) \.\.\. FAILED", line):
        names.append(m[1])
    elif m := re.match(r"^---- (\S+) stdout ----$", line):
        current = m[1]
    elif current and line.startswith("Error: "):        # a test that returned an error
        panics.setdefault(current, line[:300])
        current = None
    elif m := re.match(r"^thread '([^']+)' \(?\d*\)? ?panicked at (\S+?):?$", line):
        after = (m[1], m[2])
    elif m := re.match(r"^(--- FAIL: \S+|lint failed: .*)", line):
        names.append(m[1])
for name in dict.fromkeys(names):
    print(f"FAILED {name}" + (f"  ({panics[name]})" if name in panics else ""))
if sys.argv[2] != "0" and failed == 0:
    failed = 1  # a runner failed without reporting a test failure (build error, crash)
print(f"{passed} passed, {failed} failed")
PY
rm -f "$LOG"
exit "$status"
