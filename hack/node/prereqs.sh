#!/usr/bin/env bash
# The test node's runtime pieces, from Debian: containerd, runc and the CNI
# plugins run its pods; the registry holds its images, buildah builds them
# (busybox is the builder stand-in's shell); nftables/iptables/conntrack/
# iproute2 for its network. Installs the missing ones (it needs root and
# apt), or says what is missing and why it cannot install it. Used by
# .ci/run and by the node targets (make e2e, e2e-olmv1, demo-olm).
set -euo pipefail

packages=(containerd runc containernetworking-plugins docker-registry buildah busybox-static
  nftables iptables conntrack iproute2 openssl curl ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "The test node needs root and these Debian packages, which are missing: ${missing[*]}." >&2
  echo "Run as root on Debian or Ubuntu (the node targets install them), or install them yourself." >&2
  exit 1
fi
echo "==> installing the test node's packages (once): ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
