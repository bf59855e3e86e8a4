#!/usr/bin/env bash
# A real Kubernetes node, for the tests that deploy slurmops as a user does (tests/e2e/deployed.rs):
# containerd 1.6 and runc (Debian bookworm), kubelet and kube-scheduler 1.20.2 (kube-build.sh), on a
# control plane of its own (kube.sh on port 26443, data under $SLURMOPS_BED_RUN/real), so that the
# scheduler never places the pods other tests run under the test kubelet on the shared apiserver.
#   node.sh prepare         install containerd, runc, the CNI plugins and iptables when missing
#   node.sh up              start the control plane, containerd, the kubelet, the scheduler,
#                           kube-proxy and the cluster DNS (idempotent, under a lock); import the
#                           pause image; offer volumes; print env lines
#   node.sh import FILE     import an OCI image archive into the node's containerd
#   node.sh down            stop everything by PID; remove the bridge and the bed's NAT rules
#
# Pod network, inside this machine only: a CNI bridge `slurmops0` holding 10.231.0.1/24, pods get
# host-local addresses of 10.231.0.0/24 in namespaces the kubelet creates; their only other route is
# the Service range 10.0.0.0/24 through the bridge (no default route, no masquerade: nothing leaves
# the machine). Two NAT rules of the bed, on packets coming in from the bridge only: the `kubernetes`
# Service (10.0.0.1:443) goes to this control plane's apiserver on 127.0.0.1, and the bridge's own
# address 10.231.0.1 reaches the bed's loopback services on their ports (git servers, Slurm), so a
# pod uses `http://10.231.0.1:18080/...` where a test on the host uses 127.0.0.1. Packets from the
# bridge are forwarded only back to the bridge (a privileged pod that adds a route finds no way out).
#
# Services: kube-proxy 1.20.2 (iptables mode, no --masquerade-all: a pod reaching a Service keeps
# its own address, as on most CNIs; the answer from an endpoint on the same bridge is de-NATed
# because bridged frames pass iptables, br_netfilter; only a pod reaching itself through a Service
# is masqueraded, hairpin). Cluster DNS: Debian's
# dnsmasq on 127.0.0.1:$DNS_PORT, reached by pods at 10.231.0.1:53 (the kubelet's --cluster-dns),
# answering cluster.local from the records cluster-dns.py writes from the API (Service addresses,
# the hostnames of StatefulSet pods), nothing else (no upstream server). Storage: PersistentVolumes
# on host directories (0777, as a local-path provisioner makes them), bound by the
# persistentvolume-binder controller to claims that name no StorageClass. kube-proxy reads
# EndpointSlices, which kube.sh's endpointslice controller writes.
#
# containerd pulls nothing (its registry requests go to a proxy on loopback where nothing listens):
# every image a pod runs is built here and imported (`node.sh import`).
# This sandbox has no CAP_SYS_RESOURCE: containerd's CRI plugin must not set a negative
# oom_score_adj (restrict_oom_score_adj), or every sandbox fails to start (../shared/notes/real-node.md).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BASE=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}
RUN=$BASE/real/node
# kube.sh keeps this control plane under $BASE/real/kube.
KUBE=$BASE/real/kube
API_PORT=26443
ETCD_PORT=22379
NODE=bed-node-0
BRIDGE=slurmops0
SUBNET=10.231.0.0/24
GATEWAY=10.231.0.1
SERVICE_IP=10.0.0.1
PAUSE_IMAGE=registry.k8s.io/pause:3.2
DNS_PORT=20053
VOLUMES=8
mkdir -p "$RUN"
log() { echo "[node] $*" >&2; }
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
fail() { log "FAILED: $1; last lines of $RUN/$2.log:"; tail -25 "$RUN/$2.log" >&2; exit 1; }
ctr_() { ctr --address "$RUN/containerd.sock" -n k8s.io "$@"; }
kubectl_() { kubectl --kubeconfig "$KUBE/pki/admin.kubeconfig" "$@"; }

prepare() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
  command -v conntrack >/dev/null || need+=(conntrack)
  [ ${#need[@]} -eq 0 ] && return 0
  log "apt-get install ${need[*]}"
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2; }; } ||
    { log "FAILED: apt-get install ${need[*]}"; exit 1; }
}

# The pause image: the static pause program of the kubernetes tree as its only file.
pause_image() {
  local bin=$1 dir
  ctr_ images ls -q | grep -qx "$PAUSE_IMAGE" && return 0
  dir=$(mktemp -d)
  mkdir -p "$dir/rootfs"; cp "$bin/pause" "$dir/rootfs/pause"
  python3 "$HERE/../../scripts/image.py" rootfs "$dir/rootfs" --entrypoint /pause --user 65535:65535 \
    --tag "$PAUSE_IMAGE" --output "$dir/pause.tar" >&2 || { rm -rf "$dir"; log "FAILED: packing the pause image"; exit 1; }
  ctr_ images import "$dir/pause.tar" >&2 || { rm -rf "$dir"; log "FAILED: importing the pause image"; exit 1; }
  rm -rf "$dir"
}

network() {
  mkdir -p "$RUN/cni"
  # The bridge plugin creates the bridge and gives it the gateway address at the first pod; made
  # here so that the NAT rules and route_localnet apply before any pod starts.
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$GATEWAY/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
  fi
  sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
  # Frames bridged between two pods pass iptables, so that an answer to a pod that reached a
  # Service comes back through the conntrack entry of its DNAT (no masquerade needed).
  [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] \
    || sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null \
    || { log "FAILED: bridged frames do not pass iptables (net.bridge.bridge-nf-call-iptables: load br_netfilter)"; exit 1; }
  put "$RUN/cni/10-slurmops.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "slurmops-bed", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$RUN/cni-ipam", "ranges": [[{"subnet": "$SUBNET", "gateway": "$GATEWAY"}]],
            "routes": [{"dst": "10.0.0.0/24"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
JSON
  nat_rule() { iptables -t nat -C PREROUTING "$@" 2>/dev/null || iptables -t nat -A PREROUTING "$@"; }
  forward_rule() { iptables -C FORWARD "$@" 2>/dev/null || iptables -I FORWARD "$@"; }
  forward_rule -i "$BRIDGE" ! -o "$BRIDGE" -m comment --comment slurmops-bed -j DROP
  local proto
  for proto in udp tcp; do
    nat_rule -i "$BRIDGE" -d "$GATEWAY/32" -p $proto --dport 53 -m comment --comment slurmops-bed \
      -j DNAT --to-destination "127.0.0.1:$DNS_PORT"
  done
  nat_rule -i "$BRIDGE" -d "$SERVICE_IP/32" -p tcp --dport 443 -m comment --comment slurmops-bed \
    -j DNAT --to-destination "127.0.0.1:$API_PORT"
  nat_rule -i "$BRIDGE" -d "$GATEWAY/32" -p tcp -m comment --comment slurmops-bed -j DNAT --to-destination 127.0.0.1
}

containerd_up() {
  alive containerd && return 0
  mkdir -p "$RUN/containerd-root" "$RUN/containerd-state"
  containerd config default > "$RUN/containerd.default.toml"
  python3 - "$RUN" <<'PY' || { log "FAILED: writing containerd's config"; exit 1; }
import re, sys
run = sys.argv[1]
s = open(f"{run}/containerd.default.toml").read()
def set_key(key, value, text):
    new, n = re.subn(rf'(?m)^(\s*){re.escape(key)} = .*$', lambda m: f'{m.group(1)}{key} = {value}', text)
    if n == 0:
        sys.exit(f"containerd config has no key {key}")
    return new
s = set_key('root', f'"{run}/containerd-root"', s)
s = set_key('state', f'"{run}/containerd-state"', s)
s = re.sub(r'(?ms)^(\[grpc\]\s*\n\s*address = ).*?$', lambda m: f'{m.group(1)}"{run}/containerd.sock"', s, count=1)
s = re.sub(r'(?ms)^(\[ttrpc\]\s*\n\s*address = ).*?$', lambda m: f'{m.group(1)}"{run}/containerd.ttrpc.sock"', s, count=1)
s = set_key('restrict_oom_score_adj', 'true', s)
s = set_key('sandbox_image', '"registry.k8s.io/pause:3.2"', s)
s = set_key('conf_dir', f'"{run}/cni"', s)
s = set_key('bin_dir', '"/usr/lib/cni"', s)
s = set_key('SystemdCgroup', 'false', s)
# No metrics or debug listener on a TCP port.
s = re.sub(r'(?ms)^(\[metrics\]\s*\n\s*address = ).*?$', lambda m: m.group(1) + '""', s, count=1)
open(f"{run}/containerd.toml", "w").write(s)
PY
  # It pulls nothing: every registry request goes to a proxy on loopback where nothing listens, so
  # an image that was not imported fails at once (ErrImagePull) and no request leaves the machine.
  HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
    setsid containerd --config "$RUN/containerd.toml" > "$RUN/containerd.log" 2>&1 < /dev/null &
  echo $! > "$RUN/containerd.pid"
  for _ in $(seq 1 100); do ctr --address "$RUN/containerd.sock" version >/dev/null 2>&1 && return 0; alive containerd || break; sleep 0.1; done
  fail "containerd did not answer on $RUN/containerd.sock" containerd
}

kubelet_up() {
  local bin=$1
  alive kubelet && return 0
  mkdir -p "$RUN/kubelet" "$RUN/pods-logs"
  setsid "$bin/kubelet" --kubeconfig="$KUBE/pki/admin.kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint="unix://$RUN/containerd.sock" \
    --runtime-request-timeout=5m --cgroup-driver=cgroupfs --fail-swap-on=false \
    --pod-infra-container-image="$PAUSE_IMAGE" --hostname-override="$NODE" --node-ip="$GATEWAY" \
    --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet/pki" --address="$GATEWAY" --port=20250 \
    --read-only-port=0 --healthz-bind-address=127.0.0.1 --healthz-port=20248 \
    --authentication-token-webhook=false --authorization-mode=AlwaysAllow \
    --cluster-domain=cluster.local --cluster-dns="$GATEWAY" --resolv-conf=/etc/resolv.conf \
    --eviction-hard='memory.available<100Mi' --image-gc-high-threshold=100 \
    --serialize-image-pulls=false --node-status-update-frequency=4s \
    --pod-max-pids=-1 --max-pods=40 --v=1 \
    > "$RUN/kubelet.log" 2>&1 < /dev/null &
  echo $! > "$RUN/kubelet.pid"
  # Ready, and the not-ready taint it registers with removed (kube-controller-manager's
  # nodelifecycle controller), so that the scheduler places pods there.
  for _ in $(seq 1 600); do
    [ "$(kubectl_ get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}' 2>/dev/null)" = "True/" ] && return 0
    alive kubelet || break; sleep 0.2
  done
  fail "the kubelet's Node $NODE did not become Ready and untainted" kubelet
}

scheduler_up() {
  local bin=$1
  alive scheduler && return 0
  setsid "$bin/kube-scheduler" --kubeconfig="$KUBE/pki/admin.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=20259 --port=0 \
    > "$RUN/scheduler.log" 2>&1 < /dev/null &
  echo $! > "$RUN/scheduler.pid"
  for _ in $(seq 1 100); do curl -sfk https://127.0.0.1:20259/healthz >/dev/null && return 0; alive scheduler || break; sleep 0.1; done
  fail "kube-scheduler did not become healthy" scheduler
}

# Cluster DNS: dnsmasq answering cluster.local from the records cluster-dns.py keeps.
dns_up() {
  mkdir -p "$RUN/dns"
  [ -f "$RUN/dns/hosts" ] || : > "$RUN/dns/hosts"
  if ! alive dnsmasq; then
    setsid dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
      --user=root --listen-address=127.0.0.1 --bind-interfaces --port="$DNS_PORT" \
      --local=/cluster.local/ --no-negcache --addn-hosts="$RUN/dns/hosts" --log-facility=- \
      > "$RUN/dnsmasq.log" 2>&1 < /dev/null &
    echo $! > "$RUN/dnsmasq.pid"
  fi
  if ! alive cluster-dns; then
    setsid python3 "$HERE/cluster-dns.py" "https://127.0.0.1:$API_PORT" "$KUBE/pki/admin.token" \
      "$KUBE/pki/ca.crt" "$RUN/dns/hosts" "$RUN/dnsmasq.pid" > "$RUN/cluster-dns.log" 2>&1 < /dev/null &
    echo $! > "$RUN/cluster-dns.pid"
  fi
  # Up once the `kubernetes` Service's record is written and dnsmasq runs.
  for _ in $(seq 1 100); do
    grep -q ' kubernetes.default.svc.cluster.local$' "$RUN/dns/hosts" && alive dnsmasq && return 0
    alive dnsmasq || fail "dnsmasq stopped" dnsmasq
    alive cluster-dns || fail "cluster-dns.py stopped" cluster-dns
    sleep 0.1
  done
  fail "the cluster DNS did not answer kubernetes.default.svc.cluster.local" cluster-dns
}

proxy_up() {
  local bin=$1
  alive proxy && return 0
  # No conntrack table sizes or timeouts changed (0), no OOM score: this sandbox may refuse them.
  setsid "$bin/kube-proxy" --kubeconfig="$KUBE/pki/admin.kubeconfig" --proxy-mode=iptables \
    --cluster-cidr="$SUBNET" --hostname-override="$NODE" --bind-address=127.0.0.1 \
    --healthz-bind-address=127.0.0.1:20256 --metrics-bind-address=127.0.0.1:20249 \
    --conntrack-max-per-core=0 --conntrack-min=0 --conntrack-tcp-timeout-established=0 \
    --conntrack-tcp-timeout-close-wait=0 --oom-score-adj=0 --v=1 \
    > "$RUN/proxy.log" 2>&1 < /dev/null &
  echo $! > "$RUN/proxy.pid"
  echo "$bin/kube-proxy" > "$RUN/proxy.bin"
  for _ in $(seq 1 200); do curl -sf http://127.0.0.1:20256/healthz >/dev/null && return 0; alive proxy || break; sleep 0.1; done
  fail "kube-proxy did not become healthy" proxy
}

volumes() {
  local i docs=
  for i in $(seq 0 $((VOLUMES - 1))); do
    mkdir -p "$RUN/pv/$i"; chmod 0777 "$RUN/pv/$i"
    docs+="---
apiVersion: v1
kind: PersistentVolume
metadata: {name: bed-pv-$i}
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $RUN/pv/$i, type: Directory}
"
  done
  echo "$docs" | kubectl_ apply -f - > /dev/null || { log "FAILED: the PersistentVolumes"; exit 1; }
}

up() {
  local bin env
  bin=$("$HERE/kube-build.sh") || { log "FAILED: building the kube binaries (see above)"; exit 1; }
  env=$(SLURMOPS_BED_RUN=$BASE/real SLURMOPS_KUBE_PORT=$API_PORT SLURMOPS_ETCD_PORT=$ETCD_PORT \
    SLURMOPS_KUBE_MORE_CONTROLLERS=nodelifecycle,persistentvolume-binder,job,cronjob "$HERE/kube.sh" up) \
    || { log "FAILED: the real node's control plane (logs in $KUBE)"; exit 1; }
  network
  containerd_up
  pause_image "$bin"
  dns_up
  proxy_up "$bin"
  kubelet_up "$bin"
  scheduler_up "$bin"
  volumes
  echo "$env" | sed 's/^/REAL_/'
  echo "REAL_NODE=$NODE"
  echo "REAL_CONTAINERD_SOCK=$RUN/containerd.sock"
  echo "REAL_POD_GATEWAY=$GATEWAY"
  echo "REAL_KUBELET_LOG=$RUN/kubelet.log"
}

down() {
  local p
  kill_pidfile "$RUN/scheduler.pid"
  kill_pidfile "$RUN/kubelet.pid"
  kill_pidfile "$RUN/proxy.pid"
  kill_pidfile "$RUN/cluster-dns.pid"
  kill_pidfile "$RUN/dnsmasq.pid"
  # The pods' containers are children of containerd's shims, not of containerd: stop them first.
  if alive containerd; then
    for p in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$p" >/dev/null 2>&1 || true; done
  fi
  kill_pidfile "$RUN/containerd.pid"
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io -address $RUN/containerd.sock" 2>/dev/null || true
  # The kubelet's mounts (tmpfs of Secrets and tokens, containerd's overlays).
  grep -o " $RUN/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # kube-proxy's own chains and rules.
  [ -f "$RUN/proxy.bin" ] && { "$(cat "$RUN/proxy.bin")" --cleanup > /dev/null 2>&1 || true; }
  while iptables -S FORWARD 2>/dev/null | grep -q 'slurmops-bed'; do
    iptables -S FORWARD | grep 'slurmops-bed' | head -1 | sed 's/^-A/-D/' | xargs -r iptables || break
  done
  rm -rf "$RUN/pv" "$RUN/dns"
  while iptables -t nat -S PREROUTING 2>/dev/null | grep -q 'slurmops-bed'; do
    iptables -t nat -S PREROUTING | grep 'slurmops-bed' | head -1 | sed 's/^-A/-D/' | xargs -r iptables -t nat || break
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  SLURMOPS_BED_RUN=$BASE/real SLURMOPS_KUBE_PORT=$API_PORT SLURMOPS_ETCD_PORT=$ETCD_PORT "$HERE/kube.sh" down || true
}

case "${1:-}" in
  prepare) prepare ;;
  up) exec flock -o "$BASE/real.lock" "$0" up-locked ;;
  up-locked) up ;;
  import)
    [ -f "${2:-}" ] || { log "node.sh import FILE: no file ${2:-}"; exit 2; }
    ctr_ images import "$2" >&2 ;;
  down) down ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
