#!/bin/bash
# The login image's entrypoint (tests/bed/images.sh), with the contract of Slinky's login image
# (../shared/anchors/slinky-containers: login-entrypoint.sh and its supervisord programs), which
# the login pods slurmops renders rely on: the pod sets no command, only SACKD_OPTIONS (the
# configless `--conf-server`), and mounts slurm.key at /etc/slurm, an sssd.conf at /etc/sssd and
# root's authorized_keys at /root/.ssh when cluster.yaml names them. Runs sssd (when the pod
# mounts its configuration), sackd (Slurm's client daemon: it fetches the configuration from
# slurmctld and authenticates the users' commands) and sshd in front; SSSD_OPTIONS and
# SSHD_OPTIONS pass more arguments, as in Slinky's image. The container ends when one of them
# does, so the kubelet restarts it rather than leaving half a login node Ready.
set -euo pipefail
: "${SACKD_OPTIONS:=}" "${SSHD_OPTIONS:=}" "${SSSD_OPTIONS:=}"

mkdir -p /run/sshd /run/slurm
chmod 0755 /run/sshd
# Host keys are made at each start (the image holds none, as Slinky's removes them).
ssh-keygen -A >/dev/null

if [ -f /etc/sssd/sssd.conf ] && command -v sssd >/dev/null; then
  # shellcheck disable=SC2086 # options are words, as the image's contract passes them
  sssd -i --logger=stderr $SSSD_OPTIONS &
fi
# shellcheck disable=SC2086
(cd /run/slurm && exec sackd -D $SACKD_OPTIONS) &
# shellcheck disable=SC2086
/usr/sbin/sshd -D -e $SSHD_OPTIONS &
# The kubelet's stop: each daemon gets the signal, the container ends when they have.
trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 0' TERM INT
wait -n
status=$?
echo "login-entrypoint: a daemon ended (status $status); stopping the others" >&2
kill -TERM $(jobs -p) 2>/dev/null || true
wait
exit "$status"
