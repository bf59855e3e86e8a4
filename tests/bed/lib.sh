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
