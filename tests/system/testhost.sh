#!/usr/bin/env bash
# testhost.sh up|down|info|ssh CMD -- a real systemd + journald + sshd host for specsweep's system tests.
#
# systemd-nspawn boots this machine's own / through an overlay (tmpfs upper layer, so every write vanishes at
# `down`) inside a private network namespace reached over a veth pair. Needs root, systemd-container and
# openssh-server (installed on demand with apt-get when missing). Idempotent: `up` on a running host is a no-op,
# `down` on a missing one too.
#
# Several hosts can run side by side (parallel test sessions, a host pool): everything derives from
# TESTHOST_INDEX (0..99, default 0):
#   lab dir   ${TESTHOST_ROOT:-/tmp/specsweep-testhost}/<index>
#   machine   specsweep-th<index>       netns   specsweep-th<index>      veth   ssth<index>h / ssth<index>g
#   subnet    10.231.<100+index>.0/24   controller .1, guest .2
# The pytest fixture (conftest.py) picks a free index with a lock file; by hand, pick one nobody uses.
# TESTHOST_BIND: extra directories bound read-write into the guest, space-separated SRC[:DST] (a directory
# several hosts share, e.g. a Slurm cluster's shared file system).
# Guest: root@<guest ip>, key <lab>/id_ed25519, its freshly made host key in <lab>/known_hosts. Two unprivileged
# logins take the same key: specsweep-sudo (passwordless sudo) and specsweep-nosudo (no sudo at all).
set -euo pipefail

INDEX=${TESTHOST_INDEX:-0}
[[ $INDEX =~ ^[0-9]+$ ]] && ((INDEX < 100)) || { echo "TESTHOST_INDEX must be 0..99" >&2; exit 2; }
LAB=${TESTHOST_ROOT:-/tmp/specsweep-testhost}/$INDEX
NAME=specsweep-th$INDEX
NETNS=specsweep-th$INDEX
VETH_HOST=ssth${INDEX}h
VETH_GUEST=ssth${INDEX}g
SUBNET=10.231.$((100 + INDEX))
HOST_IP=$SUBNET.1
GUEST_IP=$SUBNET.2
ROOT=$LAB/merged
CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OVL=$LAB/ovl
KEY=$LAB/id_ed25519
KNOWN_HOSTS=$LAB/known_hosts
PIDF=$LAB/nspawn.pid
LEADER=$LAB/leader.pid
LOG=$LAB/nspawn.log
CGROUP=specsweep-th$INDEX   # each container in its own cgroup, so two never share payload/supervisor
# The admin channel multiplexes one connection (tests call it often); `down` ends the master.
SSH_OPTS=(-i "$KEY" -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$KNOWN_HOSTS"
  -o LogLevel=ERROR -o ConnectTimeout=3 -o ControlMaster=auto -o ControlPath="$LAB/ssh-control"
  -o ControlPersist=120)

log() { printf '[testhost %s %(%T)T] %s\n' "$INDEX" -1 "$*" >&2; }
alive() { [[ -s $1 ]] && grep -qs '^State:.*[RSD]' /proc/"$(cat "$1")"/status; } # running, not a zombie
hssh() { # only while our veth exists: otherwise the address would route off this machine
  ip link show "$VETH_HOST" >/dev/null 2>&1 || { echo "testhost $INDEX is not up" >&2; return 255; }
  ssh "${SSH_OPTS[@]}" root@"$GUEST_IP" "$@"
}

install_pkgs() {
  local need=()
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  [[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
  command -v ssh >/dev/null || need+=(openssh-client)
  command -v sudo >/dev/null || need+=(sudo) # the guest overlays this machine's /: its sudo is this one
  ((${#need[@]})) || return 0
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

cgroup_dirs() { # the hierarchies nspawn creates its payload/supervisor groups in
  local c
  for c in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [[ -e $c/cgroup.procs ]] && echo "$c"
  done
  return 0
}

down() {
  [[ -S $LAB/ssh-control ]] && { ssh -o ControlPath="$LAB/ssh-control" -O exit root@"$GUEST_IP" 2>/dev/null || true; }
  rm -f "$LAB/ssh-control"
  if alive "$PIDF"; then
    local p
    p=$(cat "$PIDF")
    kill -TERM "$p" 2>/dev/null || true # nspawn turns SIGTERM into a clean poweroff
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null || true
  fi
  if alive "$LEADER"; then kill -KILL "$(cat "$LEADER")" 2>/dev/null || true; fi # orphaned container PID 1
  rm -f "$PIDF" "$LEADER"
  if [[ -d $ROOT ]]; then while mountpoint -q "$ROOT"; do umount -l "$ROOT"; done; fi
  if [[ -d $OVL ]]; then while mountpoint -q "$OVL"; do umount -l "$OVL"; done; fi
  ip netns del "$NETNS" 2>/dev/null || true
  ip link del "$VETH_HOST" 2>/dev/null || true
  local c
  for c in $(cgroup_dirs); do
    [[ -d $c/$CGROUP ]] && { find "$c/$CGROUP" -depth -type d -exec rmdir {} \; 2>/dev/null || true; }
  done
  return 0
}

build_root() {
  mkdir -p "$OVL" "$ROOT"
  mount -t tmpfs -o size=2G,mode=755 "specsweep-th$INDEX-upper" "$OVL"
  mkdir "$OVL"/upper "$OVL"/work
  mount -t overlay "specsweep-th$INDEX-root" \
    -o lowerdir=/,upperdir="$OVL"/upper,workdir="$OVL"/work "$ROOT"
  local E=$ROOT/etc
  systemd-id128 new >"$E"/machine-id
  echo "$NAME" >"$E"/hostname
  echo "127.0.1.1 $NAME" >>"$E"/hosts
  # No DNS in the namespace: fail fast instead of 2 x 5 s resolver timeouts.
  rm -f "$E"/resolv.conf
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$E"/resolv.conf
  [[ -f $KEY ]] || ssh-keygen -q -t ed25519 -N '' -C "specsweep-testhost" -f "$KEY"
  rm -rf "$ROOT"/root/.ssh
  install -d -m 700 "$ROOT"/root/.ssh
  install -m 600 "$KEY".pub "$ROOT"/root/.ssh/authorized_keys
  # The controller's ~/.bashrc may init pyenv and the like (+0.35 s per command): use the skeleton's.
  rm -f "$ROOT"/root/.bashrc "$ROOT"/root/.profile
  cp /etc/skel/.bashrc /etc/skel/.profile "$ROOT"/root/
  # A host key of its own (not the controller's), so known_hosts tests mean something.
  rm -f "$E"/ssh/ssh_host_*
  ssh-keygen -q -t ed25519 -N '' -C "$NAME" -f "$E"/ssh/ssh_host_ed25519_key
  echo "$GUEST_IP $(cut -d' ' -f1,2 "$E"/ssh/ssh_host_ed25519_key.pub)" >"$KNOWN_HOSTS"
  # The unprivileged logins of the sudo tests. Password '*': no password login, yet not "locked" (sshd without
  # PAM refuses even key logins to an account whose password starts with '!', which is useradd's default).
  local user
  for user in specsweep-sudo specsweep-nosudo; do
    chroot "$ROOT" useradd -m -s /bin/sh -p '*' "$user"
    chroot "$ROOT" install -d -m 700 -o "$user" -g "$user" /home/"$user"/.ssh
    install -m 600 "$KEY".pub "$ROOT"/home/"$user"/.ssh/authorized_keys
    chroot "$ROOT" chown "$user:$user" /home/"$user"/.ssh/authorized_keys
  done
  if [[ -d $E/sudoers.d ]]; then
    echo 'specsweep-sudo ALL=(ALL:ALL) NOPASSWD: ALL' >"$E"/sudoers.d/specsweep-sudo
    chmod 440 "$E"/sudoers.d/specsweep-sudo
  fi
  mkdir -p "$E"/ssh/sshd_config.d "$E"/systemd/system/multi-user.target.wants
  printf '%s\n' "ListenAddress $GUEST_IP" "HostKey /etc/ssh/ssh_host_ed25519_key" \
    "PermitRootLogin prohibit-password" "PasswordAuthentication no" "UseDNS no" "MaxStartups 50" "UsePAM no" \
    "MaxSessions 50" >"$E"/ssh/sshd_config.d/00-testhost.conf
  ln -sf /lib/systemd/system/ssh.service "$E"/systemd/system/multi-user.target.wants/ssh.service
  local u
  for u in postgresql.service docker.service containerd.service cron.service apt-daily.timer \
    apt-daily-upgrade.timer man-db.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer \
    systemd-timesyncd.service console-getty.service logrotate.timer \
    munge.service slurmctld.service slurmd.service; do # the Slurm tests' cluster unmasks these in its own hosts
    ln -sf /dev/null "$E"/systemd/system/"$u"
  done
  mkdir -p "$ROOT"/var/log/journal
}

up() {
  if alive "$PIDF" && hssh true 2>/dev/null; then
    log "already up: root@$GUEST_IP"
    return 0
  fi
  local t0=$SECONDS
  install_pkgs
  down
  mkdir -p "$LAB"
  build_root
  ip netns add "$NETNS"
  ip link add "$VETH_HOST" type veth peer name "$VETH_GUEST" netns "$NETNS"
  ip addr add "$HOST_IP"/24 dev "$VETH_HOST"
  ip link set "$VETH_HOST" up
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr add "$GUEST_IP"/24 dev "$VETH_GUEST"
  ip -n "$NETNS" link set "$VETH_GUEST" up
  (
    # Move this subshell into the host's own cgroup first: nspawn --keep-unit puts payload/supervisor below it.
    for c in $(cgroup_dirs); do
      mkdir -p "$c/$CGROUP"
      echo "$BASHPID" >"$c/$CGROUP/cgroup.procs"
    done
    # nspawn mounts a fresh tmpfs on the guest's /tmp: a checkout (and its .venv) under /tmp, as in a CI
    # clone, would be invisible there, so the checkout is bound in read-only at its own path.
    binds=()
    for b in ${TESTHOST_BIND:-}; do binds+=(--bind="$b"); done
    # The engines' cache (llama-server, the vLLM venv, their models) likewise, where it is under /tmp.
    cache=${SPECSWEEP_CACHE:-}
    if [[ -n $cache && -d $cache && $(cd "$cache" && pwd -P) == /tmp/* ]]; then
      binds+=(--bind-ro="$(cd "$cache" && pwd -P)")
    fi
    exec setsid systemd-nspawn -D "$ROOT" -M "$NAME" -b --console=passive --register=no --keep-unit \
      --link-journal=no --resolv-conf=off --network-namespace-path=/run/netns/"$NETNS" \
      --bind-ro="$CHECKOUT" "${binds[@]}" </dev/null >"$LOG" 2>&1
  ) &
  echo $! >"$PIDF"
  local st=
  for _ in $(seq 200); do
    alive "$PIDF" || {
      cat "$LOG" >&2
      log "nspawn died"
      return 1
    }
    [[ -s $LEADER ]] || pgrep -P "$(cat "$PIDF")" >"$LEADER" || true
    st=$(hssh 'systemctl is-system-running --wait' 2>/dev/null || true)
    [[ $st == running || $st == degraded ]] && break
    sleep 0.3
  done
  log "up in $((SECONDS - t0))s, state=$st: ssh -i $KEY root@$GUEST_IP"
  [[ $st == running || $st == degraded ]]
}

info() { # KEY=VALUE lines for the pytest fixture
  printf '%s\n' "index=$INDEX" "lab=$LAB" "name=$NAME" "netns=$NETNS" "host_ip=$HOST_IP" \
    "guest_ip=$GUEST_IP" "key=$KEY" "known_hosts=$KNOWN_HOSTS" "root=$ROOT" "nspawn_pid_file=$PIDF"
}

case ${1:-up} in
up) up ;;
down) down ;;
info) info ;;
ssh)
  shift
  hssh "$@"
  ;;
*)
  echo "usage: $0 up|down|info|ssh CMD" >&2
  exit 2
  ;;
esac
