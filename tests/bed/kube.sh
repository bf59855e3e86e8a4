#!/usr/bin/env bash
# Runs a real Kubernetes control plane on 127.0.0.1 for tests: etcd (Debian), kube-apiserver and
# kube-controller-manager v1.20.2 (built by kube-build.sh from Debian's source package).
#   kube.sh up      start etcd, apiserver (RBAC, static tokens), controller-manager; print env lines
#   kube.sh down    stop them by PID
#   kube.sh restart [SECS]  kill etcd and the apiserver (SIGKILL), wait SECS, start them again
#                   on etcd's data
# SLURMOPS_KUBE_MORE_CONTROLLERS adds controllers (node.sh: nodelifecycle, which a real kubelet's
# Node needs to lose its not-ready taint; the test kubelet's Nodes send no heartbeat, so the shared
# bed runs without it). The controller-manager may send 100 requests a second (its default, 20, makes the pods of a
# 10,000-worker scale run take a quarter of an hour). Two identities (static tokens):
# `slurmops-admin` (system:masters) and `slurmops-restricted` (no rights until a test binds a Role
# to it), so least-privilege RBAC can be tested.
# Output and data under $SLURMOPS_BED_RUN/kube (default /tmp/slurmops-bed/kube).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}/kube
API_PORT=${SLURMOPS_KUBE_PORT:-16443}
ETCD_PORT=${SLURMOPS_ETCD_PORT:-12379}
mkdir -p "$RUN"
log() { echo "[kube] $*" >&2; }

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
fail() { log "FAILED: $1; last lines of $RUN/$2.log:"; tail -25 "$RUN/$2.log" >&2; exit 1; }

pki() {
  local P=$RUN/pki
  [ -s "$P/tokens.csv" ] && return 0
  rm -rf "$P"; mkdir -p "$P"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" -days 3650 -subj "/CN=slurmops-test-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$P/apiserver.key" -out "$P/apiserver.csr" -subj "/CN=kube-apiserver" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n' > "$P/ext.cnf"
  openssl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -out "$P/apiserver.crt" -days 3650 -extfile "$P/ext.cnf" 2>/dev/null
  openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
  openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$P/admin.token"
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$P/restricted.token"
  {
    echo "$(cat "$P/admin.token"),slurmops-admin,1,\"system:masters\""
    echo "$(cat "$P/restricted.token"),slurmops-restricted,2"
  } > "$P/tokens.csv.tmp"
  kubeconfig admin > "$P/admin.kubeconfig"
  kubeconfig restricted > "$P/restricted.kubeconfig"
  mv "$P/tokens.csv.tmp" "$P/tokens.csv"
}

kubeconfig() {
  cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: bed
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$RUN/pki/ca.crt"}
users:
- name: $1
  user: {token: "$(cat "$RUN/pki/$1.token")"}
contexts:
- name: bed-$1
  context: {cluster: bed, user: $1}
current-context: bed-$1
KC
}

up() {
  local BIN
  BIN=$("$HERE/kube-build.sh") || { log "FAILED: building kube-apiserver (see above)"; exit 1; }
  pki
  if ! alive etcd; then
    [ -n "${SLURMOPS_ETCD_KEEP:-}" ] || rm -rf "$RUN/etcd-data"
    etcd --name bed --data-dir "$RUN/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) --initial-advertise-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) \
      --initial-cluster bed=http://127.0.0.1:$((ETCD_PORT + 1)) --listen-metrics-urls http://127.0.0.1:$((ETCD_PORT + 2)) \
      > "$RUN/etcd.log" 2>&1 < /dev/null &
    echo $! > "$RUN/etcd.pid"
    for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null && break; alive etcd || break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null || fail "etcd did not become healthy" etcd
  fi
  local auth=(-H "Authorization: Bearer $(cat "$RUN/pki/admin.token")" --cacert "$RUN/pki/ca.crt")
  if ! alive apiserver; then
    "$BIN/kube-apiserver" \
      --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
      --bind-address=127.0.0.1 --secure-port="$API_PORT" --insecure-port=0 --advertise-address=127.0.0.1 \
      --tls-cert-file="$RUN/pki/apiserver.crt" --tls-private-key-file="$RUN/pki/apiserver.key" \
      --client-ca-file="$RUN/pki/ca.crt" --token-auth-file="$RUN/pki/tokens.csv" \
      --authorization-mode=RBAC --allow-privileged=true \
      --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$RUN/pki/sa.pub" \
      --service-account-signing-key-file="$RUN/pki/sa.key" --api-audiences=https://kubernetes.default.svc \
      --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
      --enable-priority-and-fairness=false --profiling=false --kubelet-preferred-address-types=InternalIP \
      > "$RUN/apiserver.log" 2>&1 < /dev/null &
    echo $! > "$RUN/apiserver.pid"
  fi
  for _ in $(seq 1 600); do curl -sf "${auth[@]}" "https://127.0.0.1:$API_PORT/readyz" >/dev/null && break; alive apiserver || break; sleep 0.1; done
  curl -sf "${auth[@]}" "https://127.0.0.1:$API_PORT/readyz" >/dev/null || fail "kube-apiserver did not become ready" apiserver
  if ! alive kcm; then
    "$BIN/kube-controller-manager" --kubeconfig="$RUN/pki/admin.kubeconfig" \
      --controllers="namespace,garbagecollector,serviceaccount,serviceaccount-token,statefulset,deployment,replicaset,disruption,endpoint,endpointslice${SLURMOPS_KUBE_MORE_CONTROLLERS:+,$SLURMOPS_KUBE_MORE_CONTROLLERS}" \
      --service-account-private-key-file="$RUN/pki/sa.key" --root-ca-file="$RUN/pki/ca.crt" \
      --use-service-account-credentials=false --leader-elect=false \
      --kube-api-qps=100 --kube-api-burst=200 \
      --bind-address=127.0.0.1 --secure-port=$((API_PORT + 1)) --port=0 \
      > "$RUN/kcm.log" 2>&1 < /dev/null &
    echo $! > "$RUN/kcm.pid"
  fi
  for _ in $(seq 1 300); do curl -sfk "https://127.0.0.1:$((API_PORT + 1))/healthz" >/dev/null && break; alive kcm || break; sleep 0.1; done
  curl -sfk "https://127.0.0.1:$((API_PORT + 1))/healthz" >/dev/null || fail "kube-controller-manager did not become healthy" kcm
  echo "KUBE_URL=https://127.0.0.1:$API_PORT"
  echo "KUBE_CA=$RUN/pki/ca.crt"
  echo "KUBE_ADMIN_TOKEN_FILE=$RUN/pki/admin.token"
  echo "KUBE_RESTRICTED_TOKEN_FILE=$RUN/pki/restricted.token"
  echo "KUBECONFIG_ADMIN=$RUN/pki/admin.kubeconfig"
  echo "KUBECONFIG_RESTRICTED=$RUN/pki/restricted.kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down) for c in kcm apiserver etcd; do kill_pidfile "$RUN/$c.pid"; done ;;
  restart)
    # etcd and the apiserver crash (SIGKILL), stay down ${2:-0} s, and start again on etcd's data
    # (the controller-manager, not leader-elected, reconnects by itself).
    for c in apiserver etcd; do
      if alive "$c"; then
        p=$(cat "$RUN/$c.pid"); kill -9 "$p"
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
      fi
    done
    sleep "${2:-0}"
    SLURMOPS_ETCD_KEEP=1 up >/dev/null ;;
  *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
