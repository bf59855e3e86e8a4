#!/usr/bin/env bash
# Builds (once) the Kubernetes 1.20.2 binaries the bed runs from Debian bookworm's own `kubernetes`
# source package (the full upstream tree with vendor/), with bookworm's Go 1.19, offline from the
# Debian archive: kube-apiserver and kube-controller-manager (every bed), kube-scheduler, kubelet and
# kube-proxy (the real node, node.sh), and the pause program of a pod sandbox (built static from the
# tree's build/pause/linux/pause.c: node.sh packs it as the node's pause image). Cached under
# $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script's content: only the first run on
# a machine pays the build (~9 min on 2 cores). Prints the bin directory.
# Needs root (apt). See ../shared/notes/real-kube-apiserver.md for why each step is there.
set -euo pipefail
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
key=$(sha256sum "$0" | cut -c1-12)
OUT="$CACHE/kube-1.20.2-$key"
log() { echo "[kube-build] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

packages="golang-1.19-go golang-github-modern-go-reflect2-dev etcd-server etcd-client make rsync dpkg-dev openssl ca-certificates"
need_apt() { for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || return 0; done; return 1; }

BINARIES="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy"
built() { for b in $BINARIES pause; do [ -x "$OUT/bin/$b" ] || return 1; done; }
if built && command -v etcd >/dev/null; then
  echo "$OUT/bin"; exit 0
fi
src_list=/etc/apt/sources.list.d/slurmops-bookworm-src.sources
if [ ! -f "$src_list" ]; then
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src_list"
  need_update=1
fi
if need_apt || [ -n "${need_update:-}" ]; then
  log "apt-get install $packages"
  apt-get update -q >&2 || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >&2 \
    || fail "apt-get install $packages"
fi
if built; then
  echo "$OUT/bin"; exit 0
fi
B="$OUT.build"
rm -rf "$B"; mkdir -p "$B"; cd "$B"
log "apt-get source kubernetes (bookworm) into $B"
apt-get source kubernetes > "$B/source.log" 2>&1 || { tail -20 "$B/source.log" >&2; fail "apt-get source kubernetes"; }
cd "$(find . -maxdepth 1 -type d -name 'kubernetes-1.20*' | head -1)" || fail "no kubernetes-1.20 source tree"
# The vendored reflect2 1.0.1 makes the apiserver segfault on writes with Go >= 1.18: use Debian's 1.0.2.
R=vendor/github.com/modern-go/reflect2
rm -rf "$R" && mkdir "$R"
cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$R/"
rm -f "$R"/*_test.go
export PATH=/usr/lib/go-1.19/bin:$PATH GOPATH=$PWD/.go GOCACHE=$B/gocache GOPROXY=off GOFLAGS=-mod=vendor CGO_ENABLED=0 HOME=$B
mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
export KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20 KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56
log "make $BINARIES (~9 min on 2 cores; log: $B/make.log)"
unset GOFLAGS
make WHAT="$(printf 'cmd/%s ' $BINARIES)" > "$B/make.log" 2>&1 || { tail -30 "$B/make.log" >&2; fail "make"; }
rm -rf "$OUT.tmp"; mkdir -p "$OUT.tmp/bin"
for b in $BINARIES; do cp "_output/bin/$b" "$OUT.tmp/bin/"; done
gcc -Os -static -o "$OUT.tmp/bin/pause" build/pause/linux/pause.c || fail "gcc build/pause/linux/pause.c"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
cd /; rm -rf "$B"
"$OUT/bin/kube-apiserver" --version >&2
echo "$OUT/bin"
