#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the end-to-end
# tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet and kube-proxy built from source (hack/build-controlplane.sh node),
# containerd, runc and the CNI plugins from Debian, an image registry (on
# loopback for containerd, and on the bridge address for pods that pull
# images themselves, such as OLM v1's controllers), and CoreDNS.
#
#   node.sh up      clear what an earlier run left, then start the node
#   node.sh down    stop everything `up` started and remove its traces
#   node.sh check   fail if anything of the node is left on the machine
#   node.sh leaks   print the containment guard's leak counter (packets)
#
# Containment: before anything starts, an nftables guard lets traffic go
# only to loopback, the node's bridge (its pods) and the machine's DNS
# resolver; everything else in the private ranges is refused, and pods never
# leave the node. A counter in the guard proves that nothing leaked.
#
# Everything lives under $NODE_DIR (default /var/lib/capmg-node); every
# process is started with a pid file there and stopped by PID.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
D=${NODE_DIR:-/var/lib/capmg-node}
NODE_NAME=capmg-node
BRIDGE=cni0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
API_PORT=16443
ETCD_PORT=23790
REGISTRY=127.0.0.1:5000
# The same registry (same storage) for pods: they cannot reach loopback.
POD_REGISTRY=$NODE_IP:5000
GUARD_TABLE=capmg_guard
# Published registry names the manifests use; containerd resolves each of
# them to the loopback registry, so the manifests under test are the
# published ones.
MIRRORED_REGISTRIES=(docker.io ghcr.io quay.io registry.k8s.io gcr.io)
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:v1.14.7
PAUSE_IMAGE=registry.k8s.io/pause:3.10

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'node.sh: %s\n' "$*" >&2; exit 1; }

# wait_for DESCRIPTION SECONDS COMMAND...: run COMMAND every half second until
# it succeeds, at most SECONDS.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${secs}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# start NAME COMMAND...: run COMMAND in its own session, logging to
# $D/logs/NAME.log, and record its PID.
start() {
  local name=$1; shift
  setsid "$@" >"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$D/pids/$name.pid"
}

# stop_pid NAME: SIGTERM the recorded process group, SIGKILL it after 20 s.
stop_pid() {
  local f="$D/pids/$1.pid" pid i
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

resolver() { awk '/^nameserver/ {print $2; exit}' /etc/resolv.conf; }

# --- containment -------------------------------------------------------------

guard_up() {
  local ns; ns=$(resolver)
  [[ $ns =~ ^[0-9.]+$ ]] || die "no IPv4 nameserver in /etc/resolv.conf"
  nft -f - <<EOF
table inet $GUARD_TABLE {
  set priv4 { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 } }
  chain output {
    type filter hook output priority filter; policy accept;
    oifname { "lo", "$BRIDGE" } accept
    # The output hook routes before kube-proxy's DNAT: a ClusterIP that was
    # translated to a pod or the node is checked again in postrouting.
    ct status dnat accept
    ip daddr $ns meta l4proto { tcp, udp } th dport 53 accept
    ip daddr @priv4 meta l4proto tcp reject with tcp reset
    ip daddr @priv4 reject with icmpx type admin-prohibited
  }
  chain postrouting {
    type filter hook postrouting priority 500; policy accept;
    oifname { "lo", "$BRIDGE" } accept
    ip daddr $ns meta l4proto { tcp, udp } th dport 53 accept
    ip daddr @priv4 drop
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "$BRIDGE" oifname != "$BRIDGE" reject with icmpx type admin-prohibited
    oifname != { "lo", "$BRIDGE" } ip daddr @priv4 reject with icmpx type admin-prohibited
  }
  chain leaks {
    type filter hook postrouting priority 1000; policy accept;
    oifname != { "lo", "$BRIDGE" } ip daddr @priv4 ip daddr != $ns counter
  }
}
EOF
}

leaks() {
  nft list chain inet "$GUARD_TABLE" leaks 2>/dev/null | awk '/counter/ {for (i = 1; i <= NF; i++) if ($i == "packets") {print $(i+1); exit}}'
}

# --- certificates --------------------------------------------------------------

# cert NAME SUBJECT SANS USAGE: an ECDSA key and a certificate signed by the
# node's CA.
cert() {
  local name=$1 subj=$2 sans=$3 usage=$4 ext
  ext="extendedKeyUsage=$usage"
  [[ -n $sans ]] && ext+=$'\n'"subjectAltName=$sans"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subj" \
    -keyout "$D/pki/$name.key" -out "$D/pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$D/pki/$name.csr" -CA "$D/pki/ca.crt" -CAkey "$D/pki/ca.key" -CAcreateserial \
    -days 2 -extfile <(printf '%s\n' "$ext") -out "$D/pki/$name.crt" 2>/dev/null
}

# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
  cat >"$D/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $NODE_NAME
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority: $D/pki/ca.crt
users:
- name: $1
  user:
    client-certificate: $D/pki/$1.crt
    client-key: $D/pki/$1.key
contexts:
- name: $1@$NODE_NAME
  context: {cluster: $NODE_NAME, user: $1}
current-context: $1@$NODE_NAME
EOF
}

pki() {
  mkdir -p "$D/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$NODE_NAME-ca" \
    -keyout "$D/pki/ca.key" -out "$D/pki/ca.crt" 2>/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/pki/sa.key" 2>/dev/null
  openssl pkey -in "$D/pki/sa.key" -pubout -out "$D/pki/sa.pub"
  cert apiserver "/CN=kube-apiserver" \
    "IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
    serverAuth
  cert admin "/O=system:masters/CN=kubernetes-admin" "" clientAuth
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "" clientAuth
  cert front-proxy-client "/CN=front-proxy-client" "" clientAuth
  cert kube-controller-manager "/CN=system:kube-controller-manager" "" clientAuth
  cert kube-scheduler "/CN=system:kube-scheduler" "" clientAuth
  cert kube-proxy "/CN=system:kube-proxy" "" clientAuth
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "" clientAuth
  for n in admin kube-controller-manager kube-scheduler kube-proxy kubelet; do kubeconfig "$n"; done
}

# --- configuration files -------------------------------------------------------

configs() {
  mkdir -p "$D/cni/net.d" "$D/containerd/certs.d"
  cat >"$D/cni/net.d/10-$NODE_NAME.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NODE_NAME",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$D/cni/ipam",
             "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
EOF
  local r
  for r in "${MIRRORED_REGISTRIES[@]}"; do
    mkdir -p "$D/containerd/certs.d/$r"
    cat >"$D/containerd/certs.d/$r/hosts.toml" <<EOF
server = "https://$r"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  done
  # The registry under its own name too (the release commands push there, as
  # a maintainer pushes to theirs), over plain HTTP.
  mkdir -p "$D/containerd/certs.d/$REGISTRY"
  cat >"$D/containerd/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
EOF
  cat >"$D/containerd/config.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$D/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox lacks CAP_SYS_RESOURCE: without this every pod fails in runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$D/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$D/containerd/certs.d"
EOF
  cat >"$D/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $D/pki/ca.crt}
authorization: {mode: Webhook}
# The host is on cgroup v1.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$D/containerd.sock
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
# Pods get no upstream resolver: it is off the node.
resolvConf: ""
podLogsDir: $D/pod-logs
port: 20250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 20248
# The disk is often well under the default free-space thresholds.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
EOF
  cat >"$D/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $D/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: nftables
clusterCIDR: $POD_CIDR
nodePortAddresses: [primary]
metricsBindAddress: 127.0.0.1:20249
healthzBindAddress: 127.0.0.1:20256
# No sysctl writes: the sandbox does not allow them.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  cat >"$D/registry.yaml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $D/registry}
  delete: {enabled: true}
http: {addr: $REGISTRY}
EOF
  sed "s#addr: $REGISTRY#addr: $POD_REGISTRY#" "$D/registry.yaml" >"$D/registry-pods.yaml"
}

# --- up ------------------------------------------------------------------------

k() { "$K8S/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@"; }

up() {
  down
  K8S=$("$root/hack/build-controlplane.sh" node)
  local t0=$SECONDS
  mkdir -p "$D/logs" "$D/pids"
  echo "$K8S" >"$D/k8s-bin"

  log "installing the containment guard (nft table inet $GUARD_TABLE)"
  guard_up
  log "creating bridge $BRIDGE ($NODE_IP/24)"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  cat /proc/sys/net/ipv4/ip_forward >"$D/ip_forward.orig"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  pki
  configs

  log "starting the registry, etcd and kube-apiserver"
  start registry docker-registry serve "$D/registry.yaml"
  start registry-pods docker-registry serve "$D/registry-pods.yaml"
  start etcd "$K8S/etcd" --name "$NODE_NAME" --data-dir "$D/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:23800"
  start kube-apiserver "$K8S/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --tls-cert-file "$D/pki/apiserver.crt" --tls-private-key-file "$D/pki/apiserver.key" \
    --client-ca-file "$D/pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$D/pki/sa.pub" --service-account-signing-key-file "$D/pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "$D/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$D/pki/apiserver-kubelet-client.key" \
    --requestheader-client-ca-file "$D/pki/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$D/pki/front-proxy-client.crt" --proxy-client-key-file "$D/pki/front-proxy-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --enable-aggregator-routing=true --profiling=false
  wait_for "kube-apiserver" 90 k get --raw /readyz

  log "starting kube-controller-manager, kube-scheduler, containerd, kubelet and kube-proxy"
  start kube-controller-manager "$K8S/kube-controller-manager" \
    --kubeconfig "$D/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$D/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$D/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 20257 --leader-elect=false \
    --service-account-private-key-file "$D/pki/sa.key" --root-ca-file "$D/pki/ca.crt" \
    --cluster-signing-cert-file "$D/pki/ca.crt" --cluster-signing-key-file "$D/pki/ca.key" \
    --use-service-account-credentials --service-cluster-ip-range "$SERVICE_CIDR"
  start kube-scheduler "$K8S/kube-scheduler" \
    --kubeconfig "$D/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$D/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$D/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 20259 --leader-elect=false
  start containerd containerd --config "$D/containerd/config.toml"
  wait_for "containerd" 30 test -S "$D/containerd.sock"
  start kubelet "$K8S/kubelet" --config "$D/kubelet.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
    --root-dir "$D/kubelet" --cert-dir "$D/kubelet-pki" --node-ip "$NODE_IP" --hostname-override "$NODE_NAME"
  start kube-proxy "$K8S/kube-proxy" --config "$D/kube-proxy.yaml"
  wait_for "node $NODE_NAME to be Ready" 90 k wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
  log "node Ready after $((SECONDS - t0))s"

  log "pushing the pause and CoreDNS images and starting CoreDNS"
  "$root/hack/images.sh" node-images "$REGISTRY"
  coredns | k apply -f - >/dev/null
  wait_for "CoreDNS" 120 k -n kube-system wait --for=condition=Available deploy/coredns --timeout=1s
  log "node up in $((SECONDS - t0))s; kubeconfig: $D/admin.kubeconfig"
}

# coredns prints the manifest of the cluster DNS: CoreDNS serving the
# cluster domain only (no upstream: it is off the node), non-root on :1053.
coredns() {
  cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_SERVICE_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
EOF
}

# --- down ------------------------------------------------------------------------

down() {
  if [[ -f "$D/pids/kube-apiserver.pid" && -f "$D/k8s-bin" ]]; then
    K8S=$(<"$D/k8s-bin")
    log "deleting workloads"
    timeout 60 "$K8S/kubectl" --kubeconfig "$D/admin.kubeconfig" delete deploy,statefulset,daemonset,job,pod --all -A \
      --wait --timeout=45s >/dev/null 2>&1 || true
  fi
  stop_pid kubelet
  if [[ -S "$D/containerd.sock" ]]; then
    local ctr=(ctr --address "$D/containerd.sock" -n k8s.io) t
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
  fi
  local p
  for p in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd containerd registry registry-pods; do stop_pid "$p"; done
  # Shims outlive containerd; they were started for this node's containers.
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $D/containerd.sock" 2>/dev/null || true

  # Mounts under the node's directory, deepest first.
  awk -v d="$D/" '{gsub(/\\040/, " ", $2); if (index($2, d) == 1) print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  local ns
  for ns in /run/netns/cni-*; do
    [[ -e $ns ]] || continue
    ip netns delete "$(basename "$ns")" 2>/dev/null || { umount -l "$ns" 2>/dev/null; rm -f "$ns"; }
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  [[ -f "$D/ip_forward.orig" ]] && cat "$D/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward

  # kube-proxy's and kubelet's rules.
  nft delete table ip kube-proxy 2>/dev/null || true
  nft delete table ip6 kube-proxy 2>/dev/null || true
  local fam tbl chain
  for fam in iptables ip6tables; do
    for tbl in filter nat mangle; do
      for chain in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
        while "$fam" -t "$tbl" -S "$chain" 2>/dev/null | grep -q -- '-j KUBE-'; do
          "$fam" -t "$tbl" -S "$chain" | grep -- '-j KUBE-' | head -1 | sed 's/^-A/-D/' |
            xargs "$fam" -t "$tbl" 2>/dev/null || break
        done
      done
      "$fam" -t "$tbl" -S 2>/dev/null | awk '/^-N KUBE-/ {print $2}' | while read -r c; do
        "$fam" -t "$tbl" -F "$c" 2>/dev/null || true
      done
      "$fam" -t "$tbl" -S 2>/dev/null | awk '/^-N KUBE-/ {print $2}' | while read -r c; do
        "$fam" -t "$tbl" -X "$c" 2>/dev/null || true
      done
    done
  done

  # The pod cgroups kubelet made, deepest first.
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ -d "$h/kubepods" ]] && find "$h/kubepods" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d "$h/kubepods.slice" ]] && find "$h/kubepods.slice" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf /var/lib/kubelet/device-plugins/kubelet.sock /run/containerd/s
  nft delete table inet "$GUARD_TABLE" 2>/dev/null || true
  if [[ -d $D ]]; then
    # Keep the last run's logs for a post-mortem; remove everything else.
    rm -rf "$D.logs" && { [[ -d "$D/logs" ]] && mv "$D/logs" "$D.logs" || true; }
    rm -rf "$D"
  fi
}

# --- check -----------------------------------------------------------------------

# check fails, naming it, on anything of the node that is still there.
check() {
  local bad=0
  if pgrep -f "$D/" >/dev/null; then log "processes left: $(pgrep -af "$D/" | head -5)"; bad=1; fi
  if grep -q " $D/" /proc/mounts; then log "mounts left under $D"; bad=1; fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then log "bridge $BRIDGE left"; bad=1; fi
  if ls /run/netns/cni-* >/dev/null 2>&1; then log "network namespaces left: $(ls /run/netns)"; bad=1; fi
  if nft list tables 2>/dev/null | grep -Eq "inet $GUARD_TABLE|ip kube-proxy|ip6 kube-proxy"; then log "nft tables left: $(nft list tables)"; bad=1; fi
  if iptables-save 2>/dev/null | grep -q KUBE-; then log "iptables KUBE- chains left"; bad=1; fi
  if ls -d /sys/fs/cgroup/*/kubepods* >/dev/null 2>&1; then log "kubepods cgroups left"; bad=1; fi
  if [[ -e $D ]]; then log "$D left"; bad=1; fi
  return $bad
}

case "${1:-}" in
  up) up ;;
  down) down; log "node down" ;;
  check) check && log "nothing of the node is left" ;;
  leaks) leaks ;;
  *) die "usage: node.sh up|down|check|leaks" ;;
esac
