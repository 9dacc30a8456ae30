#!/usr/bin/env bash
# Renders the file-based catalog (olm.package, olm.channel, olm.bundle) of
# this operator from bundle/, validates it with opm, and writes the
# catalog's Dockerfile next to it.
#
# The bundle is rendered from its directory, not from an image: its objects
# are carried inline (olm.bundle.object), so OLM needs no unpack job to
# install it. A catalog for a registry would render $BUNDLE_IMG instead.
#
# Usage: render-catalog.sh OPM PACKAGE DEFAULT_CHANNEL OUTPUT_DIR
set -euo pipefail

opm=$1 package=$2 channel=$3 out=$4
root=$(cd "$(dirname "$0")/.." && pwd)
csv="$root/bundle/manifests/$package.clusterserviceversion.yaml"
[[ -f "$csv" ]] || { echo "no $csv: run make bundle" >&2; exit 1; }

opm_version=$(cd "$root/hack/opm" && go list -m -f "{{.Version}}" github.com/operator-framework/operator-registry)
csv_name=$(awk '/^  name: /{print $2; exit}' "$csv")
replaces=$(awk '/^  replaces: /{print $2; exit}' "$csv")

mkdir -p "$out/$package"
{
  "$opm" init "$package" --default-channel="$channel" \
    --icon="$root/docs/images/icon.svg" --description="$root/docs/package-description.md" --output=yaml
  echo "---"
  echo "schema: olm.channel"
  echo "package: $package"
  echo "name: $channel"
  echo "entries:"
  echo "- name: $csv_name"
  if [[ -n "$replaces" ]]; then echo "  replaces: $replaces"; fi
  echo "---"
  "$opm" render "$root/bundle" --output=yaml
} > "$out/$package/index.yaml"

"$opm" validate "$out"
rm -f "$out.Dockerfile"
"$opm" generate dockerfile "$out" \
  --builder-image "quay.io/operator-framework/opm:$opm_version" --base-image "quay.io/operator-framework/opm:$opm_version"
echo "catalog written to $out/ and $out.Dockerfile; opm validate passed"
