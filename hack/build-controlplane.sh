#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver + etcd) from source into
# bin/k8s/<version>/ and prints that directory (use it as KUBEBUILDER_ASSETS).
# Builds are cached: a second run with the same version is a no-op.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=$(cd "$root/hack/controlplane" && go list -m -f "{{.Version}}" k8s.io/kubernetes)
out="$root/bin/k8s/$k8s_version"
minor=$(echo "$k8s_version" | cut -d. -f2)

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
cd "$root/hack/controlplane"
if [[ ! -x "$out/kube-apiserver" ]]; then
  echo "building kube-apiserver $k8s_version (takes a few minutes)..." >&2
  go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi
if [[ ! -x "$out/etcd" ]]; then
  echo "building etcd..." >&2
  go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" ./etcd
  mv "$out/etcd.tmp" "$out/etcd"
fi
echo "$out"
