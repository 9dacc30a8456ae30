#!/usr/bin/env bash
# Builds with buildah what the test node and the release commands need
# that is not this project's own: OLM's and the node's images (pushed to a
# registry), and stand-ins for the Dockerfile's public base images (kept
# local). The operator, bundle and catalog images are built by the
# Makefile's release targets (hack/e2e.sh runs them).
#
#   images.sh buildah-env REGISTRY  prints the environment (export lines)
#                                    under which a plain `buildah`, as the
#                                    Makefile runs it, uses this script's
#                                    storage, chroot isolation and REGISTRY
#                                    over plain HTTP
#   images.sh stand-ins              Dockerfile's two base images, under the
#                                    names it gives as defaults
#   images.sh node-images REGISTRY   the test node's pause and CoreDNS images
#   images.sh olm REGISTRY OLM_IMAGE OPM_IMAGE  OLM v0's image (olm, catalog,
#                                    package-server, copy-content, cpb, cp) and
#                                    opm's (opm, grpc_health_probe)
#   images.sh opm REGISTRY OPM_IMAGE           opm's image alone
#   images.sh olmv1 REGISTRY POD_REGISTRY CATALOGD_IMAGE OPERATOR_CONTROLLER_IMAGE
#                                    OLM v1's two images; both pull images
#                                    themselves, from POD_REGISTRY
#   images.sh capi REGISTRY VERSION  Cluster API's core, kubeadm bootstrap
#                                    and kubeadm control-plane images
#                                    (hack/capi's module), on the stand-in
#                                    base (run stand-ins first)
#   images.sh sizes IMAGE...                  print the images' sizes
#
# IMAGE is the published name (e.g. quay.io/operator-framework/opm:v1.61.0);
# it is pushed to REGISTRY under the same repository path, which is where
# the test node's containerd mirrors resolve the published registries to.
#
# Public base images cannot be pulled here, so local stand-ins built from
# what the machine has take the names the Dockerfile defaults to, as a
# company's mirror would: a static non-root base with CA certificates
# (gcr.io/distroless/static:nonroot), and a Go builder (golang) with this
# machine's Go toolchain that downloads modules from this machine's
# GOPROXY.
#
# STAND_IN_EXTRA_CA (optional): a PEM file of CA certificates added to the
# stand-in base's trust bundle, which images built on it (the manager's)
# trust as their system CAs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/images"
# buildah keeps its storage in bin/ (a cache, git-ignored): vfs works in this
# sandbox, and chroot isolation needs no user namespaces.
# The name starts with a dot: Go's ./... skips it, and the stand-in builder
# and the cache mounts hold Go source (GOROOT, modules) that is not ours.
store=$root/bin/.buildah
# One description of the store, which this script's buildah and, through
# buildah-env, the Makefile's plain one both read.
mkdir -p "$store"
cat >"$store/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$store/root"
runroot = "$store/run"
EOF
export CONTAINERS_STORAGE_CONF=$store/storage.conf
# The Dockerfile's defaults, fully qualified as buildah stores them.
dockerfile_arg() { sed -n "s/^ARG $1=//p" "$root/Dockerfile"; }
qualify() { case $1 in */*) echo "$1" ;; *) echo "docker.io/library/$1" ;; esac; }
BASE_IMAGE=$(qualify "$(dockerfile_arg BASE_IMAGE)")
BUILDER_IMAGE=$(qualify "$(dockerfile_arg BUILDER_IMAGE)")

log() { printf '==> %s\n' "$*" >&2; }

# push LOCAL PUBLISHED REGISTRY: push LOCAL to REGISTRY under PUBLISHED's
# repository path (the registry host is dropped).
push() {
  local repo=${2#*/}
  buildah push --tls-verify=false --quiet "$1" "docker://$3/$repo" >/dev/null
  log "pushed $2 (as $3/$repo)"
}

# go_build DIR PKG OUT [TAGS]: a static binary from the module in DIR.
go_build() {
  mkdir -p "$(dirname "$3")"
  (cd "$1" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -tags "${4:-}" -o "$3" "$2")
}

# scratch_image NAME USER ENTRYPOINT_JSON FILE=PATH...: an image FROM scratch
# with the given files, user and entrypoint, and PATH=/bin.
scratch_image() {
  local name=$1 user=$2 entrypoint=$3; shift 3
  local c f
  c=$(buildah from scratch)
  for f in "$@"; do buildah copy --quiet "$c" "${f%%=*}" "${f#*=}" >/dev/null; done
  buildah config --user "$user" --workingdir / --env PATH=/bin --entrypoint "$entrypoint" "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
}

# opm_image REGISTRY IMAGE: opm's image. opm serves catalogs and extracts
# bundles; catalog images build FROM it.
opm_image() {
  go_build "$root/hack/opm" github.com/operator-framework/operator-registry/cmd/opm "$out/opm/bin/opm" "json1 containers_image_openpgp"
  # OLM's catalog pods probe opm with it, as the published opm image has.
  go_build "$root/hack/node" github.com/grpc-ecosystem/grpc-health-probe "$out/opm/bin/grpc_health_probe"
  mkdir -p "$out/opm/tmp" && chmod 1777 "$out/opm/tmp"
  scratch_image "$2" 1001:0 '["/bin/opm"]' "$out/opm=/"
  push "$2" "$2" "$1"
}

# stand_in_base builds the Dockerfile's base image (and the base of OLM v1's
# images).
stand_in_base() {
  mkdir -p "$out/base/etc/ssl/certs" "$out/base/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/base/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/base/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$out/base/etc/ssl/certs/"
  if [[ -n "${STAND_IN_EXTRA_CA:-}" ]]; then
    cat "$STAND_IN_EXTRA_CA" >>"$out/base/etc/ssl/certs/ca-certificates.crt"
    log "stand-in base trusts the CAs of $STAND_IN_EXTRA_CA as well"
  fi
  chmod 1777 "$out/base/tmp"
  scratch_image "$BASE_IMAGE" 65532:65532 '[]' "$out/base=/"
  log "stand-in $BASE_IMAGE built"
}

# stand_in_builder builds the Dockerfile's builder image: a shell (busybox)
# and this machine's Go toolchain are all its RUN lines use; modules come
# from this machine's GOPROXY, through its trusted CAs.
stand_in_builder() {
  mkdir -p "$out/builder/bin" "$out/builder/etc/ssl/certs" "$out/builder/tmp"
  chmod 1777 "$out/builder/tmp"
  cp /bin/busybox "$out/builder/bin/busybox"
  cp /etc/ssl/certs/ca-certificates.crt "$out/builder/etc/ssl/certs/"
  local a
  for a in sh env mkdir cp rm ls cat; do ln -sf busybox "$out/builder/bin/$a"; done
  local c
  c=$(buildah from scratch)
  buildah copy --quiet "$c" "$out/builder" / >/dev/null
  # Straight from GOROOT: a copy under bin/ would be in this module's ./...
  buildah copy --quiet "$c" "$(go env GOROOT)" /usr/local/go >/dev/null
  buildah config --env PATH=/usr/local/go/bin:/go/bin:/bin --env GOPATH=/go --env HOME=/root \
    --env GOTOOLCHAIN=local --env "GOPROXY=$(go env GOPROXY)" --env "GOSUMDB=$(go env GOSUMDB)" \
    --env "GONOSUMDB=$(go env GONOSUMDB)" "$c"
  buildah commit --quiet --rm "$c" "$BUILDER_IMAGE" >/dev/null
  log "stand-in $BUILDER_IMAGE built ($(go env GOVERSION))"
}

case "${1:-}" in
  buildah-env)
    registry=$2
    # Short names (the Dockerfile's golang) resolve to docker.io, as with
    # Docker; REGISTRY is reached over plain HTTP.
    cat >"$store/registries.conf" <<EOF
unqualified-search-registries = ["docker.io"]
[[registry]]
location = "$registry"
insecure = true
EOF
    printf 'export CONTAINERS_STORAGE_CONF=%q CONTAINERS_REGISTRIES_CONF=%q BUILDAH_ISOLATION=chroot\n' \
      "$store/storage.conf" "$store/registries.conf"
    ;;
  stand-ins)
    stand_in_base
    stand_in_builder
    # Each run retags the names; the images they named before (one holds a
    # GOROOT) would otherwise pile up in bin/.buildah.
    buildah rmi --prune >/dev/null
    ;;
  node-images)
    registry=$2
    go_build "$root/hack/node" github.com/coredns/coredns "$out/coredns/coredns"
    go_build "$root/hack/node" ./pause "$out/pause/pause"
    scratch_image localhost/capmg-node/pause:3.10 65535:65535 '["/pause"]' "$out/pause/pause=/pause"
    scratch_image localhost/capmg-node/coredns:v1.14.7 65532:65532 '["/coredns"]' "$out/coredns/coredns=/coredns"
    push localhost/capmg-node/pause:3.10 registry.k8s.io/pause:3.10 "$registry"
    push localhost/capmg-node/coredns:v1.14.7 registry.k8s.io/coredns/coredns:v1.14.7 "$registry"
    ;;
  olm)
    registry=$2 olm_image=$3 opm_image=$4
    olm_mod=github.com/operator-framework/operator-lifecycle-manager
    for b in cmd/olm cmd/catalog cmd/package-server cmd/copy-content util/cpb; do
      go_build "$root/hack/olm" "$olm_mod/$b" "$out/olm/bin/${b#*/}"
    done
    # As upstream's image (distroless static:debug): bundle unpack Jobs run
    # /bin/cp from it, which busybox provides.
    mkdir -p "$out/olm/busybox"
    cp /bin/busybox "$out/olm/busybox/busybox"
    ln -sf busybox "$out/olm/busybox/cp"
    ln -sf /busybox/cp "$out/olm/bin/cp"
    mkdir -p "$out/olm/tmp" && chmod 1777 "$out/olm/tmp"
    scratch_image "$olm_image" 1001 '["/bin/olm"]' "$out/olm=/"
    push "$olm_image" "$olm_image" "$registry"
    opm_image "$registry" "$opm_image"
    ;;
  opm)
    opm_image "$2" "$3"
    ;;
  olmv1)
    registry=$2 pod_registry=$3 catalogd_image=$4 opcon_image=$5
    mod=github.com/operator-framework/operator-controller
    stand_in_base
    # The controllers pull catalog and bundle images with containers/image,
    # which reads /etc/containers/registries.conf: every registry name the
    # node mirrors (node.sh's MIRRORED_REGISTRIES), and REGISTRY itself,
    # which they cannot reach on loopback, is the node's registry, over
    # plain HTTP.
    mkdir -p "$out/olmv1/etc/containers"
    for r in docker.io ghcr.io quay.io registry.k8s.io gcr.io "$registry"; do
      printf '[[registry]]\nprefix = "%s"\nlocation = "%s"\ninsecure = true\n\n' "$r" "$pod_registry"
    done >"$out/olmv1/etc/containers/registries.conf"
    for b in catalogd:"$catalogd_image" operator-controller:"$opcon_image"; do
      name=${b%%:*} image=${b#*:}
      GONOSUMDB=$mod go_build "$root/hack/olmv1" "$mod/cmd/$name" "$out/olmv1/bin/$name" containers_image_openpgp
      # As upstream's images (distroless static:nonroot): the binary in /,
      # which is the working directory (catalogd's manifest runs ./catalogd).
      c=$(buildah from "$BASE_IMAGE")
      buildah copy --quiet "$c" "$out/olmv1/bin/$name" "/$name" >/dev/null
      buildah copy --quiet "$c" "$out/olmv1/etc" /etc >/dev/null
      buildah config --user 65532:65532 --workingdir / --entrypoint "[\"/$name\"]" "$c"
      buildah commit --quiet --rm "$c" "$image" >/dev/null
      push "$image" "$image" "$registry"
    done
    ;;
  capi)
    # Cluster API's three managers, as its release images are (the binary
    # as /manager on distroless static:nonroot), under the names its
    # release's components use.
    registry=$2 version=$3
    for b in core:cluster-api-controller bootstrap/kubeadm:kubeadm-bootstrap-controller \
      controlplane/kubeadm:kubeadm-control-plane-controller; do
      pkg=${b%%:*} image=registry.k8s.io/cluster-api/${b#*:}:$version
      go_build "$root/hack/capi" "sigs.k8s.io/cluster-api/$pkg" "$out/capi/${b#*:}/manager"
      c=$(buildah from "$BASE_IMAGE")
      buildah copy --quiet "$c" "$out/capi/${b#*:}/manager" /manager >/dev/null
      buildah config --user 65532:65532 --workingdir / --entrypoint '["/manager"]' "$c"
      buildah commit --quiet --rm "$c" "$image" >/dev/null
      push "$image" "$image" "$registry"
    done
    ;;
  sizes)
    shift
    for i in "$@"; do
      buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$i" | sed 's/^/==> image size: /'
    done
    ;;
  *)
    echo "usage: images.sh buildah-env|stand-ins|node-images|olm|opm|olmv1|capi|sizes ..." >&2
    exit 1
    ;;
esac
