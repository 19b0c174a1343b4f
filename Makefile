# The set-up commands of the README. Each installs what it needs (Rust's wasm and musl targets,
# componentize-py, componentize-js, kubectl, the Go modules of the local control plane).

.PHONY: demo test image

demo:
	@scripts/demo.sh

test:
	@scripts/test.sh

# The container image as an OCI layout in target/image (no container engine needed).
image:
	@scripts/image.sh
