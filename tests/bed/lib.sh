# Helpers shared by the bed scripts (sourced, never run).
# Every test process runs `bed.sh up`, so a file the bed serves is rewritten while others read it:
# `put FILE` writes stdin to FILE only if it differs, through a rename, so a reader sees the old
# file or the new one, never an empty one (ssh read an empty known_hosts in CI: "No ED25519 host
# key is known").
put() {
  local f=$1 tmp
  tmp=$(mktemp "$f.XXXXXX")
  cat > "$tmp"
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else chmod 644 "$tmp"; mv -f "$tmp" "$f"; fi
}

# `kill_pidfile FILE`: stops the process whose PID FILE holds (TERM, up to 10 s, then KILL) and
# removes FILE; nothing when FILE is absent.
kill_pidfile() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if kill "$p" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$f"
}
