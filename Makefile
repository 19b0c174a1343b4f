# The two set-up commands of the README. Each installs what it needs (Rust's wasm target,
# componentize-py, componentize-js, kubectl, the Go modules of the local control plane).

.PHONY: demo test

demo:
	@scripts/demo.sh

test:
	@scripts/test.sh
