#!/usr/bin/env bash
# The demo: a local Kubernetes control plane (built from the official Go modules on first run —
# that takes a while once), the kubewasm host, and example plugins in Rust, Python, JavaScript,
# Go and C reconciling real objects. Ctrl-C stops everything.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

DEMO="${KUBEWASM_DEMO_DIR:-${TMPDIR:-/tmp}/kubewasm-demo}"
rm -rf "$DEMO"
mkdir -p "$DEMO/plugins"
export KUBECONFIG="$DEMO/kubeconfig"
kubectl() { "$KUBECTL" "$@"; }
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

pids=()
cleanup() {
    say "stopping"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "building the host and the control plane"
cargo build -q -p kubewasm -p kubewasm-tests --bins
BIN="$CARGO_TARGET_DIR/debug"

step "starting a local control plane (kube-apiserver, etcd, garbage collector) in $DEMO"
"$BIN/controlplane" --data-dir "$DEMO/controlplane" --kubeconfig "$KUBECONFIG" >"$DEMO/controlplane.out" 2>&1 &
pids+=($!)
until grep -qx ready "$DEMO/controlplane.out" 2>/dev/null; do
    kill -0 "${pids[0]}" 2>/dev/null || { cat "$DEMO/controlplane.out"; exit 1; }
    sleep 1
done

step "building the example plugins: sample-controller in Rust, reboot-coordinator in Python, scaffolded starters in JavaScript, Go and C"
cargo build -q --release --target wasm32-wasip2 -p sample-controller
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/sample_controller.wasm" "$DEMO/plugins/sample-controller.wasm"
kubewasm-py build examples/reboot-coordinator/python/reboot_coordinator.py -o "$DEMO/reboot-coordinator.wasm"
printf 'maxUnavailable = 1\n' >"$DEMO/plugins/reboot-coordinator.toml"
mv "$DEMO/reboot-coordinator.wasm" "$DEMO/plugins/"
if "$BIN/kubewasm" new --lang js hello-js --dir "$DEMO/hello-js" >/dev/null 2>&1; then
    (cd "$DEMO/hello-js" && npm install --no-audit --no-fund --loglevel=error >/dev/null && npm run --silent build >/dev/null) &&
        cp "$DEMO/hello-js/hello-js.wasm" "$DEMO/plugins/" || echo "(the JavaScript starter did not build; going on without it)"
fi
if "$BIN/kubewasm" new --lang go hello-go --dir "$DEMO/hello-go" >/dev/null 2>&1; then
    (cd "$DEMO/hello-go" && make --silent KUBEWASM="$BIN/kubewasm" >/dev/null) &&
        cp "$DEMO/hello-go/hello-go.wasm" "$DEMO/plugins/" || echo "(the Go starter did not build; going on without it)"
fi
if "$BIN/kubewasm" new --lang c hello-c --dir "$DEMO/hello-c" >/dev/null 2>&1; then
    (cd "$DEMO/hello-c" && make --silent KUBEWASM="$BIN/kubewasm" >/dev/null) &&
        cp "$DEMO/hello-c/hello-c.wasm" "$DEMO/plugins/" || echo "(the C starter did not build; going on without it)"
fi
for plugin in "$DEMO"/plugins/*.wasm; do "$BIN/kubewasm" check "$plugin" | head -2; done

step "installing the Foo custom resource"
kubectl apply -f examples/sample-controller/manifests/crd.yaml
kubectl wait --for=condition=Established crd/foos.samplecontroller.k8s.io

step "per-plugin identities: each plugin gets its own ServiceAccount and exactly the RBAC its manifest declares (kubewasm rbac | kubectl apply)"
"$BIN/kubewasm" rbac --plugins "$DEMO/plugins" >"$DEMO/rbac.yaml"
kubectl apply -f "$DEMO/rbac.yaml"

step "running the host: kubewasm run --plugins $DEMO/plugins (each plugin acts as its own ServiceAccount)"
"$BIN/kubewasm" run --plugins "$DEMO/plugins" --kubeconfig "$KUBECONFIG" \
    --metrics-addr 127.0.0.1:18080 --health-addr 127.0.0.1:18081 2>&1 | sed -u 's/^/  host | /' &
pids+=($!)
until curl -sf 127.0.0.1:18081/readyz >/dev/null; do sleep 1; done

say "1. The sample-controller: a Foo gets a Deployment it owns"
kubectl apply -f examples/sample-controller/manifests/foo.yaml
sleep 3
kubectl get foo,deployment -o wide
kubectl get foo example-foo -o jsonpath='{"Foo status: "}{.status}{"\n"}'

say "2. A Deployment the Foo does not own is left alone, with a Warning Event"
kubectl create deployment squatter --image=nginx
kubectl apply -f - <<YAML
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: wants-squatter}
spec: {deploymentName: squatter, replicas: 1}
YAML
sleep 3
kubectl get events --field-selector involvedObject.name=wants-squatter

say "3. Deleting the Foo deletes its Deployment (garbage collection through the owner reference)"
kubectl delete foo example-foo
sleep 4
kubectl get deployments

say "4. The reboot coordinator (Python): three Nodes need a reboot, maxUnavailable = 1"
for n in 1 2 3; do
    kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata:
  name: demo-node-$n
  annotations: {reboot.kubewasm.io/reboot-needed: "true"}
YAML
    kubectl patch node "demo-node-$n" --subresource=status --type=merge -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Demo","message":"simulated"}]}}' >/dev/null
done
# The node agent's side, simulated: reboot a Node told to, then clear its annotations.
for round in 1 2 3; do
    sleep 2
    node=$(kubectl get nodes -o jsonpath='{range .items[?(@.metadata.annotations.reboot\.kubewasm\.io/reboot-now)]}{.metadata.name}{"\n"}{end}' | head -1)
    [ -n "$node" ] || continue
    echo "agent: rebooting $node"
    kubectl annotate node "$node" reboot.kubewasm.io/reboot-now- reboot.kubewasm.io/reboot-needed- >/dev/null
done
sleep 2
kubectl get nodes -o custom-columns='NAME:.metadata.name,REBOOT-NEEDED:.metadata.annotations.reboot\.kubewasm\.io/reboot-needed,REBOOT-NOW:.metadata.annotations.reboot\.kubewasm\.io/reboot-now'

if [ -f "$DEMO/plugins/hello-js.wasm" ]; then
    say "5. The scaffolded JavaScript starter (kubewasm new --lang js hello-js): a labelled ConfigMap gets a summary it owns"
    kubectl create configmap settings --from-literal=color=blue --from-literal=size=large
    kubectl label configmap settings hello-js.example.com/enabled=true
    sleep 3
    kubectl get configmap settings-summary -o jsonpath='{"settings-summary: "}{.data}{"\n"}'
fi

if [ -f "$DEMO/plugins/hello-go.wasm" ]; then
    say "5b. The scaffolded Go starter (kubewasm new --lang go hello-go; standard Go, built by kubewasm build --lang go): the same, in Go"
    kubectl create configmap go-settings --from-literal=region=eu --from-literal=tier=gold
    kubectl label configmap go-settings hello-go.example.com/enabled=true
    sleep 3
    kubectl get configmap go-settings-summary -o jsonpath='{"go-settings-summary: "}{.data}{"\n"}'
fi

if [ -f "$DEMO/plugins/hello-c.wasm" ]; then
    say "5c. The scaffolded C starter (kubewasm new --lang c hello-c; clang and wasi-libc, built by kubewasm build --lang c): the same, in C"
    kubectl create configmap c-settings --from-literal=os=linux --from-literal=arch=amd64
    kubectl label configmap c-settings hello-c.example.com/enabled=true
    sleep 3
    kubectl get configmap c-settings-summary -o jsonpath='{"c-settings-summary: "}{.data}{"\n"}'
fi
say "6. Who may do what: the API server authorizes each plugin's requests as its own ServiceAccount"
for check in "sample-controller create deployments.apps" "sample-controller delete nodes" "reboot-coordinator patch nodes" "reboot-coordinator create deployments.apps"; do
    set -- $check
    printf '  %-20s %-6s %-18s %s\n' "$1" "$2" "$3" "$(kubectl auth can-i "$2" "$3" --as "system:serviceaccount:default:kubewasm-plugin-$1" 2>/dev/null || true)"
done

say "7. The host's plugins, metrics and health"
kubectl get configmap kubewasm-plugins -o jsonpath='{.data}{"\n"}'
curl -s 127.0.0.1:18080/metrics | grep -E '^(controller_runtime_reconcile_total|kubewasm_plugin_instances)' | head -12
curl -s 127.0.0.1:18081/readyz; echo

say "Explore it yourself:"
cat <<TXT
  export KUBECONFIG=$KUBECONFIG
  $KUBECTL get foos,deployments,events
  # hot reload: copy a new version of a plugin into $DEMO/plugins (atomically: cp to a temp name, then mv)
  curl -s 127.0.0.1:18080/metrics
Press Ctrl-C to stop the host and the control plane.
TXT
wait
