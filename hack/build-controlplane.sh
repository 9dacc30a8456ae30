#!/usr/bin/env bash
# Builds Kubernetes binaries from source into bin/k8s/<version>/ and prints
# that directory. With no arguments it builds the envtest control plane
# (kube-apiserver + etcd; use the directory as KUBEBUILDER_ASSETS); `node`
# adds what the single-node test cluster needs (hack/node).
#
# Builds are cached (a second run is a no-op) and serialised with a lock:
# two concurrent builds of one binary race on the same temporary file.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=$(cd "$root/hack/controlplane" && go list -m -f "{{.Version}}" k8s.io/kubernetes)
out="$root/bin/k8s/$k8s_version"
minor=$(echo "$k8s_version" | cut -d. -f2)

bins=(kube-apiserver)
if [[ "${1:-}" == node ]]; then
  bins+=(kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
fi

# OLM and clients parse the server version; a source build without these
# ldflags reports v0.0.0-master and breaks them.
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9

cd "$root/hack/controlplane"
for b in "${bins[@]}"; do
  [[ -x "$out/$b" ]] && continue
  echo "==> building $b $k8s_version from source into ${out#"$root"/} (once; the first build takes many minutes on 2 cores)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b"
  mv "$out/$b.tmp" "$out/$b"
done
if [[ ! -x "$out/etcd" ]]; then
  echo "==> building etcd into ${out#"$root"/} (once)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" ./etcd
  mv "$out/etcd.tmp" "$out/etcd"
fi
echo "$out"
