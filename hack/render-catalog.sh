#!/usr/bin/env bash
# Renders this operator's file-based catalog (olm.package, one olm.channel,
# an olm.bundle per version) from its bundle images, validates it with opm,
# and writes the catalog's Dockerfile next to it.
#
# Bundles are rendered from their images, so every entry carries the bundle's
# `image:` and `olm.csv.metadata` instead of inline objects: OLM v0 unpacks
# the bundle image with a Job, and OLM v1 and OperatorHub's tooling accept
# the catalog. The bundle images must be pushed first (make bundle-build
# bundle-push). Each version replaces the one before it in the channel.
#
# CATALOG_USE_HTTP=true pulls the bundle images over plain HTTP, for a
# registry without TLS (the test node's).
#
# Usage: render-catalog.sh OPM PACKAGE CHANNEL OUTPUT_DIR BUNDLE_REPO VERSION...
#   e.g. render-catalog.sh bin/opm my-operator stable catalog ghcr.io/me/my-operator-bundle 0.1.0 0.1.1
set -euo pipefail

opm=$1 package=$2 channel=$3 out=$4 bundle_repo=$5
shift 5
(($# > 0)) || { echo "render-catalog.sh: no versions" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
opm_version=$(cd "$root/hack/opm" && go list -m -f "{{.Version}}" github.com/operator-framework/operator-registry)

pull_flags=()
case "${CATALOG_USE_HTTP:-}" in
  true) pull_flags=(--use-http) ;;
  "" | false) ;;
  *) echo "render-catalog.sh: CATALOG_USE_HTTP is true or false, not $CATALOG_USE_HTTP" >&2; exit 1 ;;
esac

template=$(mktemp)
trap 'rm -f "$template"' EXIT
{
  echo "schema: olm.template.basic"
  echo "entries:"
  echo "- schema: olm.channel"
  echo "  package: $package"
  echo "  name: $channel"
  echo "  entries:"
  prev=
  for v in "$@"; do
    echo "  - name: $package.v$v"
    [[ -n $prev ]] && echo "    replaces: $package.v$prev"
    prev=$v
  done
  for v in "$@"; do
    echo "- schema: olm.bundle"
    echo "  image: $bundle_repo:v$v"
  done
} >"$template"

rm -rf "$out"
mkdir -p "$out/$package"
{
  "$opm" init "$package" --default-channel="$channel" \
    --icon="$root/docs/images/icon.svg" --description="$root/docs/package-description.md" --output=yaml
  echo "---"
  "$opm" alpha render-template basic "$template" "${pull_flags[@]}" \
    --migrate-level=bundle-object-to-csv-metadata --output=yaml
} >"$out/$package/index.yaml"

if grep -q 'olm.bundle.object' "$out/$package/index.yaml"; then
  echo "render-catalog.sh: the catalog carries inline bundle objects" >&2
  exit 1
fi
"$opm" validate "$out"
rm -f "$out.Dockerfile"
"$opm" generate dockerfile "$out" \
  --builder-image "quay.io/operator-framework/opm:$opm_version" --base-image "quay.io/operator-framework/opm:$opm_version"
echo "catalog written to $out/ and $out.Dockerfile; opm validate passed" >&2
