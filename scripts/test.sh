#!/usr/bin/env bash
# The whole test suite: unit tests, the runtime's fault catalog, the end-to-end suites against a
# real local control plane (built from the Kubernetes Go modules on first use), the examples'
# table tests in every language, and the Python and JS SDKs' own tests. Ends with one line:
# "N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

LOG="$(mktemp -t kubewasm-test.XXXXXX)"
status=0
run() {
    step "$*"
    "$@" 2>&1 | tee -a "$LOG" || status=1
}

run cargo test --no-fail-fast
if [ -f plugins/python/pyproject.toml ]; then
    run python -m pytest -q plugins/python
fi
if [ -f plugins/js/package.json ]; then
    run node --test plugins/js/test/
fi

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
    elif m := re.match(r"^# (pass|fail) (\d+)$", line.strip()):                  # node --test
        if m[1] == "pass": passed += int(m[2])
        else: failed += int(m[2])
if sys.argv[2] != "0" and failed == 0:
    failed = 1  # a runner failed without reporting a test failure (build error, crash)
print(f"{passed} passed, {failed} failed")
PY
rm -f "$LOG"
exit "$status"
