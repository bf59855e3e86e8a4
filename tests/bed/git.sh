#!/usr/bin/env bash
# Serves the test bed's git repositories on 127.0.0.1 over every transport slurmops fetches from:
#   git://   git daemon                          port $SLURMOPS_GIT_PORT   (19418)
#   http://  smart HTTP (git-http.py → http-backend) port $SLURMOPS_GIT_HTTP_PORT (18080)
#   ssh://   OpenSSH sshd, key-only, git-shell   port $SLURMOPS_GIT_SSH_PORT (12222)
# Repositories live in $SLURMOPS_BED_RUN/git/repos (tests create bare repositories there).
#   git.sh prepare   install openssh-server if missing
#   git.sh up        start the three servers (idempotent); print env lines
#   git.sh down      stop them by PID
# The SSH host key is generated once per bed; its known_hosts line is written to
# $RUN/known_hosts, so clients pin it (StrictHostKeyChecking=yes).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}/git
GIT_PORT=${SLURMOPS_GIT_PORT:-19418}
HTTP_PORT=${SLURMOPS_GIT_HTTP_PORT:-18080}
SSH_PORT=${SLURMOPS_GIT_SSH_PORT:-12222}
log() { echo "[git] $*" >&2; }
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  for _ in $(seq 1 100); do listening "$1" && return 0; alive "$2" || break; sleep 0.1; done
  log "FAILED: $2 did not listen on 127.0.0.1:$1; its log:"; tail -20 "$RUN/$2.log" >&2; exit 1
}
kill_pidfile() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  kill "$p" 2>/dev/null && for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  rm -f "$f"
}

prepare() {
  [ -x /usr/sbin/sshd ] && return 0
  log "installing openssh-server"
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server >&2; }; } ||
    { rm -f /usr/sbin/policy-rc.d; log "FAILED: apt-get install openssh-server"; exit 1; }
  rm -f /usr/sbin/policy-rc.d
}

up() {
  prepare
  mkdir -p "$RUN/repos" "$RUN/ssh"
  if ! alive git-daemon; then
    git daemon --export-all --enable=receive-pack --reuseaddr --base-path="$RUN/repos" \
      --listen=127.0.0.1 --port="$GIT_PORT" "$RUN/repos" > "$RUN/git-daemon.log" 2>&1 < /dev/null &
    echo $! > "$RUN/git-daemon.pid"
  fi
  wait_port "$GIT_PORT" git-daemon
  if ! alive git-http; then
    /usr/bin/python3 "$HERE/git-http.py" "$RUN/repos" "$HTTP_PORT" > "$RUN/git-http.log" 2>&1 < /dev/null &
    echo $! > "$RUN/git-http.pid"
  fi
  wait_port "$HTTP_PORT" git-http
  local S=$RUN/ssh
  [ -s "$S/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C bed-host -f "$S/host_ed25519"
  [ -s "$S/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C bed-client -f "$S/client_ed25519"
  echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$S/host_ed25519.pub")" | put "$RUN/known_hosts"
  # Only git commands, whatever the client asks for.
  echo "restrict,command=\"git-shell -c \\\"\$SSH_ORIGINAL_COMMAND\\\"\" $(cat "$S/client_ed25519.pub")" | put "$S/authorized_keys"
  chmod 600 "$S/host_ed25519" "$S/client_ed25519"
  put "$S/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey $S/host_ed25519
PidFile $S/sshd.pid
AuthorizedKeysFile $S/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $(id -un)
UsePAM no
StrictModes no
SetEnv PATH=$(dirname "$(command -v git)"):/usr/bin:/bin
CONF
  mkdir -p /run/sshd
  if ! alive sshd; then
    /usr/sbin/sshd -D -e -f "$S/sshd_config" > "$RUN/sshd.log" 2>&1 < /dev/null &
    echo $! > "$RUN/sshd.pid"
  fi
  wait_port "$SSH_PORT" sshd
  echo "GIT_ROOT=$RUN/repos"
  echo "GIT_DAEMON_URL=git://127.0.0.1:$GIT_PORT"
  echo "GIT_HTTP_URL=http://127.0.0.1:$HTTP_PORT"
  echo "GIT_SSH_URL=ssh://$(id -un)@127.0.0.1:$SSH_PORT$RUN/repos"
  echo "GIT_SSH_KEY=$S/client_ed25519"
  echo "GIT_KNOWN_HOSTS=$RUN/known_hosts"
}

case "${1:-}" in
  prepare) prepare ;;
  up) up ;;
  down) for c in sshd git-http git-daemon; do kill_pidfile "$RUN/$c.pid"; done ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
