#!/bin/sh
# The MariaDB image's entrypoint (tests/bed/images.sh), with the official image's contract as the
# quickstart uses it: at the first start (no /var/lib/mysql/mysql), the data directory is made,
# then the database MARIADB_DATABASE and the user MARIADB_USER (from anywhere, password
# MARIADB_PASSWORD, every right on that database); root@localhost gets MARIADB_ROOT_PASSWORD, or a
# random password (never printed) when MARIADB_RANDOM_ROOT_PASSWORD is set; one of them is required,
# as in the official image. As there, each of the three may come from a file instead
# (MARIADB_PASSWORD_FILE, ...: a mounted Secret, never in the environment). Then mariadbd runs in
# the foreground with the container's arguments.
set -eu
[ "${1:-}" = mariadbd ] || exec "$@"
for v in MARIADB_DATABASE MARIADB_USER MARIADB_PASSWORD MARIADB_ROOT_PASSWORD; do
  eval "f=\${${v}_FILE:-}"
  if [ -n "$f" ]; then
    eval "[ -z \"\${$v:-}\" ]" || { echo "entrypoint: set $v or ${v}_FILE, not both"; exit 1; }
    eval "$v=\$(cat \"\$f\")" || { echo "entrypoint: ${v}_FILE: cannot read $f"; exit 1; }
  fi
done
DATA=/var/lib/mysql
if [ ! -d "$DATA/mysql" ]; then
  : "${MARIADB_DATABASE:?set MARIADB_DATABASE}" "${MARIADB_USER:?set MARIADB_USER}" "${MARIADB_PASSWORD:?set MARIADB_PASSWORD}"
  [ -n "${MARIADB_ROOT_PASSWORD:-}${MARIADB_RANDOM_ROOT_PASSWORD:-}" ] \
    || { echo "entrypoint: set MARIADB_ROOT_PASSWORD or MARIADB_RANDOM_ROOT_PASSWORD"; exit 1; }
  echo "entrypoint: first start, initializing $DATA"
  mariadb-install-db --datadir="$DATA" --skip-test-db --auth-root-authentication-method=normal \
    --skip-name-resolve > /tmp/install-db.log 2>&1 || { cat /tmp/install-db.log; exit 1; }
  mariadbd --datadir="$DATA" --skip-networking --socket=/run/mysqld/init.sock &
  pid=$!
  i=0
  until mariadb --socket=/run/mysqld/init.sock -uroot -e 'SELECT 1' > /dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 120 ] || { echo "entrypoint: mariadbd did not start"; exit 1; }
    sleep 0.5
  done
  quote() { printf '%s' "$1" | sed "s/\\\\/\\\\\\\\/g; s/'/\\\\'/g"; }
  root_pass=${MARIADB_ROOT_PASSWORD:-}
  [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ] && root_pass=$(pwgen -s 32 1)
  mariadb --socket=/run/mysqld/init.sock -uroot <<SQL
CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;
CREATE USER '$(quote "$MARIADB_USER")'@'%' IDENTIFIED BY '$(quote "$MARIADB_PASSWORD")';
GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$(quote "$MARIADB_USER")'@'%';
ALTER USER 'root'@'localhost' IDENTIFIED BY '$(quote "$root_pass")';
FLUSH PRIVILEGES;
SQL
  kill "$pid"; wait "$pid" || true
  echo "entrypoint: database $MARIADB_DATABASE and user $MARIADB_USER made"
fi
exec "$@"
