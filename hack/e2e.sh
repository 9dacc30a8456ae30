#!/usr/bin/env bash
# make e2e: the user's path, for real. Brings up the single-node test
# cluster (hack/node/node.sh), builds the operator, bundle and catalog
# images of two releases (0.1.0, and 0.1.1 replacing it) and OLM's images
# with buildah, pushes them to the node's registry under their published
# names, runs test/e2e against the node, and tears the node down. It fails
# if the containment guard counted a leaked packet or if teardown left
# anything behind.
#
# E2E_KEEP_NODE=1 leaves the node running afterwards (node.sh down stops it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
node=hack/node/node.sh
registry=127.0.0.1:5000
: "${IMAGE_TAG_BASE:?}" "${PACKAGE:?}" "${OPM:?}"
work=$root/bin/e2e
logs=$work/logs
v1=0.1.0 v2=0.1.1
olm_version=$(cd hack/olm && go list -m -f '{{.Version}}' github.com/operator-framework/operator-lifecycle-manager)
opm_version=$(cd hack/opm && go list -m -f '{{.Version}}' github.com/operator-framework/operator-registry)
olm_image=quay.io/operator-framework/olm:$olm_version
opm_image=quay.io/operator-framework/opm:$opm_version

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
timing "node up"

echo "==> images (buildah)"
hack/images.sh olm "$registry" "$olm_image" "$opm_image"
hack/images.sh operator "$registry" "$IMAGE_TAG_BASE:v$v1"
# 0.1.1 is the same code under the next version's name: what the upgrade
# tests is OLM's path from one release to the next.
hack/images.sh retag "$registry" "$IMAGE_TAG_BASE:v$v1" "$IMAGE_TAG_BASE:v$v2"
hack/images.sh bundle "$registry" "$IMAGE_TAG_BASE-bundle:v$v1"
go run ./hack/bundle --version "$v2" --replaces "$PACKAGE.v$v1" --image "$IMAGE_TAG_BASE:v$v2" \
  --output-dir "$work/v$v2/bundle" >/dev/null
hack/images.sh bundle "$registry" "$IMAGE_TAG_BASE-bundle:v$v2" "$work/v$v2"
CATALOG_PULL_REGISTRY=$registry hack/render-catalog.sh "$OPM" "$PACKAGE" stable "$work/catalog-v$v1/catalog" "$IMAGE_TAG_BASE-bundle" "$v1"
CATALOG_PULL_REGISTRY=$registry hack/render-catalog.sh "$OPM" "$PACKAGE" stable "$work/catalog-v$v2/catalog" "$IMAGE_TAG_BASE-bundle" "$v1" "$v2"
hack/images.sh catalog "$registry" "$IMAGE_TAG_BASE-catalog:v$v1" "$work/catalog-v$v1/catalog"
hack/images.sh catalog "$registry" "$IMAGE_TAG_BASE-catalog:v$v2" "$work/catalog-v$v2/catalog"
hack/images.sh sizes "$IMAGE_TAG_BASE:v$v1" "$IMAGE_TAG_BASE-bundle:v$v1" "$IMAGE_TAG_BASE-catalog:v$v2" "$olm_image" "$opm_image"
timing "images built and pushed"

KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig \
OLM_DIR=$(cd hack/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager) \
OLM_CRDS=$(cd hack/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/api)/crds \
OLM_IMAGE=$olm_image OPM_IMAGE=$opm_image \
CATALOG_IMAGE_V1=$IMAGE_TAG_BASE-catalog:v$v1 CATALOG_IMAGE_V2=$IMAGE_TAG_BASE-catalog:v$v2 \
OPERATOR_IMAGE_V2=$IMAGE_TAG_BASE:v$v2 \
MAILGUN_FAKE_ADDR=10.244.0.1:0 E2E_LOG_DIR=$logs \
  go test -tags e2e ./test/e2e/ -count=1 -v -timeout 30m
timing "e2e test passed"
