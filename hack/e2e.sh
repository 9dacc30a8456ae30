#!/usr/bin/env bash
# make e2e: the user's path, for real. Brings up the single-node test
# cluster (hack/node/node.sh), builds OLM's images with buildah, releases
# the operator twice (0.1.0, and 0.1.1 replacing it) with the release
# commands of docs/install-olm.md, run as they are written with buildah into
# the node's registry, runs test/e2e against the node, and tears the node
# down. It fails if the containment guard counted a leaked packet or if
# teardown left anything behind.
#
# E2E_OLM=v1 (make e2e-olmv1) runs the same path with OLM v1 instead
# (catalogd and operator-controller as pods, TestInstallWithOLMv1) in
# bin/e2e-olmv1, then, on the same node, installs with clusterctl
# (TestInstallWithClusterctl): Cluster API's controllers as pods from images
# built here, the provider from the artifacts docs/install-clusterctl.md's
# command writes for both releases.
#
# E2E_KEEP_NODE=1 leaves the node running afterwards (node.sh down stops it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/node/prereqs.sh
node=hack/node/node.sh
registry=127.0.0.1:5000
# The Mailgun fake listens on the node's bridge, where pods reach it.
MAILGUN_FAKE_ADDR=10.244.0.1:0
: "${PACKAGE:?}"
# The maintainer's registry the release commands push to: the node's
# registry under its own name. The node's containerd resolves ghcr.io/<path>
# to the same registry's <path>, so ghcr.io/capi-mailgun names the same
# images, as the shipped config/olmv1/clustercatalog.yaml does.
release_registry=$registry/capi-mailgun
IMAGE_TAG_BASE=$release_registry/$PACKAGE
olm=${E2E_OLM:-v0}
case $olm in
  v0) work=$root/bin/e2e ;;
  v1) work=$root/bin/e2e-olmv1 ;;
  *) echo "e2e.sh: E2E_OLM is v0 or v1, not $olm" >&2; exit 1 ;;
esac
logs=$work/logs
v1=0.1.0 v2=0.1.1
olm_version=$(cd hack/olm && go list -m -f '{{.Version}}' github.com/operator-framework/operator-lifecycle-manager)
opm_version=$(cd hack/opm && go list -m -f '{{.Version}}' github.com/operator-framework/operator-registry)
olm_image=quay.io/operator-framework/olm:$olm_version
opm_image=quay.io/operator-framework/opm:$opm_version
olmv1_mod=github.com/operator-framework/operator-controller
olmv1_version=$(cd hack/olmv1 && go list -m -f '{{.Version}}' $olmv1_mod)
catalogd_image=quay.io/operator-framework/catalogd:$olmv1_version
opcon_image=quay.io/operator-framework/operator-controller:$olmv1_version

t0=$SECONDS
timing() { printf 'TIMING %s: %ss\n' "$1" "$((SECONDS - t0))"; }

finish() {
  local rc=$?
  if [[ -d /var/lib/capmg-node ]]; then
    local leaked
    leaked=$($node leaks || echo unknown)
    echo "==> containment guard: $leaked leaked packets"
    [[ $leaked == 0 ]] || { echo "FAIL: traffic left the node's containment" >&2; rc=1; }
    free -m | awk '/^Mem:/ {print "==> memory in use with the node up: " $3 " MiB"}'
    if [[ -n "${E2E_KEEP_NODE:-}" && $rc == 0 ]]; then
      echo "==> node left running: KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig; stop it with make node-down"
      exit 0
    fi
    $node down
    $node check || { echo "FAIL: node teardown left something behind" >&2; rc=1; }
  fi
  exit $rc
}
trap finish EXIT

rm -rf "$work" && mkdir -p "$logs"
$node up
# The node's kubectl runs the docs' sh blocks in test/e2e.
kubectl=$(hack/build-controlplane.sh node)/kubectl
timing "node up"

# release runs the release commands of docs/install-olm.md (section 1, its
# sh blocks in one shell, as a maintainer types them) in a copy of the
# source tree, with two changes: <registry> is the node's registry, and the
# container tool is buildah, one of those the block offers. The Dockerfile's
# public base images are local stand-ins under their names (images.sh).
release() {
  local src=$work/src script=$work/release.sh img
  rm -rf "$src" && mkdir -p "$src"
  # Tracked and untracked files, so that uncommitted work is what runs;
  # --ignore-failed-read skips files deleted but not yet staged.
  git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -cf - -T - | tar -xf - -C "$src"
  go run ./hack/docblock docs/install-olm.md "## 1. Build and publish the images (maintainers)" sh |
    sed -e "s#<registry>#$release_registry#g" -e 's#CONTAINER_TOOL=docker #CONTAINER_TOOL=buildah #' >"$script"
  grep -q 'CONTAINER_TOOL=buildah ' "$script" || {
    echo "e2e.sh: the release block no longer sets CONTAINER_TOOL=docker, which this script changes to buildah" >&2
    exit 1
  }
  echo "==> releasing $v1 and $v2 with docs/install-olm.md's commands (log: $logs/release.log)"
  # The tools (opm, controller-gen, kustomize) are the checkout's; the
  # registry serves plain HTTP, which make catalog is told. buildah keeps
  # the Dockerfile's cache mounts under TMPDIR: with its storage (images.sh).
  # Nothing of the make that runs this script, or of the caller's
  # environment, may set the image names or versions in place of the
  # block's own: command-line variables reach a sub-make through MAKEFLAGS,
  # and an environment variable beats the Makefile's ?= defaults.
  mkdir -p "$root/bin/.buildah/tmp"
  if ! (cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u IMG -u BUNDLE_IMG -u CATALOG_IMG -u REPLACES \
    -u CATALOG_VERSIONS -u IMAGE_TAG_BASE -u VERSION -u CONTAINER_TOOL \
    LOCALBIN="$root/bin" CATALOG_USE_HTTP=true TMPDIR="$root/bin/.buildah/tmp" \
    bash -euo pipefail -x "$script") >"$logs/release.log" 2>&1; then
    tail -40 "$logs/release.log" >&2
    echo "FAIL: the documented release commands failed" >&2
    exit 1
  fi
  grep -E '^\+ make ' "$logs/release.log" | sed 's/^+ /==> ran: /'
  # What the rest of the run installs; if the doc stops releasing these
  # versions under <registry>/$PACKAGE, say so here rather than as an
  # image pull that never succeeds.
  local repo
  for img in "$IMAGE_TAG_BASE:v$v2" "$IMAGE_TAG_BASE-catalog:v$v1" "$IMAGE_TAG_BASE-catalog:v$v2"; do
    repo=${img#"$registry"/}
    curl -fsS -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
      "http://$registry/v2/${repo%:*}/manifests/${repo##*:}" || {
      echo "FAIL: the documented release commands pushed no $img" >&2
      exit 1
    }
  done
}

# clusterctl_artifacts writes clusterctl's provider artifacts for both
# releases with the command of docs/install-clusterctl.md ("Provider
# artifacts"), <registry> being the release's registry, into a local
# clusterctl repository (<provider>/<version>/, as clusterctl reads it), in
# the source tree release() copied. The components must name the image
# release() pushed.
clusterctl_artifacts() {
  local src=$work/src script=$work/release-clusterctl.sh v dir
  go run ./hack/docblock docs/install-clusterctl.md "## Provider artifacts" sh |
    sed -e "s#<registry>#$release_registry#g" >"$script"
  grep -qF ":v$v1" "$script" || {
    echo "e2e.sh: docs/install-clusterctl.md's artifacts block no longer names v$v1, which this script changes per release" >&2
    exit 1
  }
  for v in "$v1" "$v2"; do
    sed -i "s#:v[0-9][0-9.]*#:v$v#g" "$script"
    dir=$work/clusterctl/repo/infrastructure-mailgun/v$v
    (cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u IMG LOCALBIN="$root/bin" \
      RELEASE_DIR="$dir" bash -euo pipefail -x "$script") >>"$logs/release.log" 2>&1 || {
      tail -20 "$logs/release.log" >&2
      echo "FAIL: docs/install-clusterctl.md's artifacts command failed for v$v" >&2
      exit 1
    }
    grep -qF "image: $IMAGE_TAG_BASE:v$v" "$dir/infrastructure-components.yaml" || {
      echo "FAIL: docs/install-clusterctl.md's artifacts for v$v do not name the released image $IMAGE_TAG_BASE:v$v" >&2
      exit 1
    }
  done
  echo "==> clusterctl artifacts of v$v1 and v$v2 in $work/clusterctl/repo (docs/install-clusterctl.md's command)"
}

echo "==> images (buildah)"
# Apart from eval, whose argument's failure set -e would not see.
buildah_env=$(hack/images.sh buildah-env "$registry")
eval "$buildah_env"
if [[ $olm == v0 ]]; then
  hack/images.sh olm "$registry" "$olm_image" "$opm_image"
  hack/images.sh stand-ins
else
  # opm's image is the catalog images' base.
  hack/images.sh opm "$registry" "$opm_image"
  hack/images.sh olmv1 "$registry" 10.244.0.1:5000 "$catalogd_image" "$opcon_image"
  # A ClusterExtension cannot give the operator's pod an environment or a
  # volume, so the operator cannot be told to trust the Mailgun fake's CA
  # the way the OLM v0 test does (SSL_CERT_FILE through the Subscription).
  # The fake's CA goes into the system trust bundle of the stand-in base
  # image instead, as a company adds its own CA to its base images; the
  # operator's rules (https, system CAs) stay as they are.
  fake_pki=$work/mailgun-fake
  mkdir -p "$fake_pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=e2e Mailgun fake CA" \
    -keyout "$fake_pki/ca.key" -out "$fake_pki/ca.crt" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${MAILGUN_FAKE_ADDR%:*}" \
    -keyout "$fake_pki/tls.key" -out "$fake_pki/tls.csr" 2>/dev/null
  openssl x509 -req -in "$fake_pki/tls.csr" -CA "$fake_pki/ca.crt" -CAkey "$fake_pki/ca.key" -CAcreateserial -days 1 \
    -extfile <(printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "${MAILGUN_FAKE_ADDR%:*}") \
    -out "$fake_pki/tls.crt" 2>/dev/null
  STAND_IN_EXTRA_CA=$fake_pki/ca.crt hack/images.sh stand-ins
  # Cluster API and clusterctl for TestInstallWithClusterctl.
  capi_version=$(cd hack/capi && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  hack/images.sh capi "$registry" "$capi_version"
  (cd hack/capi && go build -o "$work/clusterctl/bin/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl)
fi
timing "OLM's (and with OLM v1 Cluster API's) images and the stand-ins built"
release
if [[ $olm == v1 ]]; then
  clusterctl_artifacts
fi
timing "released"
if [[ $olm == v1 ]]; then
  hack/images.sh sizes "$IMAGE_TAG_BASE:v$v1" "$IMAGE_TAG_BASE-catalog:v$v2" "$catalogd_image" "$opcon_image"
  timing "images built and pushed"
  KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig KUBECTL=$kubectl \
  OLMV1_DIR=$(cd hack/olmv1 && go list -m -f '{{.Dir}}' $olmv1_mod) \
  CATALOGD_IMAGE=$catalogd_image OPERATOR_CONTROLLER_IMAGE=$opcon_image \
  CATALOG_IMAGE_V1=$IMAGE_TAG_BASE-catalog:v$v1 CATALOG_IMAGE_V2=$IMAGE_TAG_BASE-catalog:v$v2 \
  OPERATOR_IMAGE_V2=$IMAGE_TAG_BASE:v$v2 \
  MAILGUN_FAKE_ADDR=$MAILGUN_FAKE_ADDR MAILGUN_FAKE_CERT=$fake_pki/tls.crt MAILGUN_FAKE_KEY=$fake_pki/tls.key \
  E2E_LOG_DIR=$logs \
    go test -tags e2e ./test/e2e/ -run '^TestInstallWithOLMv1$' -count=1 -v -timeout 20m
  timing "e2e test passed"
  mkdir -p "$logs/clusterctl"
  KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig KUBECTL=$kubectl \
  CLUSTERCTL=$work/clusterctl/bin/clusterctl CLUSTERCTL_REPOSITORY=$work/clusterctl/repo \
  CAPI_DIR=$(cd hack/capi && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api) CAPI_VERSION=$capi_version \
  CERT_MANAGER_CRDS=$(cd hack/capi && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds \
  MAILGUN_FAKE_ADDR=$MAILGUN_FAKE_ADDR MAILGUN_FAKE_CERT=$fake_pki/tls.crt MAILGUN_FAKE_KEY=$fake_pki/tls.key \
  E2E_LOG_DIR=$logs/clusterctl \
    go test -tags e2e ./test/e2e/ -run '^TestInstallWithClusterctl$' -count=1 -v -timeout 20m
  timing "clusterctl e2e test passed"
  exit 0
fi
hack/images.sh sizes "$IMAGE_TAG_BASE:v$v1" "$IMAGE_TAG_BASE-bundle:v$v1" "$IMAGE_TAG_BASE-catalog:v$v2" "$olm_image" "$opm_image"
timing "images built and pushed"

KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig KUBECTL=$kubectl \
OLM_DIR=$(cd hack/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager) \
OLM_CRDS=$(cd hack/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/api)/crds \
OLM_IMAGE=$olm_image OPM_IMAGE=$opm_image \
CATALOG_IMAGE_V1=$IMAGE_TAG_BASE-catalog:v$v1 CATALOG_IMAGE_V2=$IMAGE_TAG_BASE-catalog:v$v2 \
OPERATOR_IMAGE_V2=$IMAGE_TAG_BASE:v$v2 \
MAILGUN_FAKE_ADDR=$MAILGUN_FAKE_ADDR E2E_LOG_DIR=$logs \
  go test -tags e2e ./test/e2e/ -run '^TestInstallFromCatalogImage$' -count=1 -v -timeout 30m
timing "e2e test passed"
