#!/usr/bin/env bash
# A one-machine Ceph RADOS Gateway for `make test-rgw`: one monitor, one OSD
# on memstore (RAM only, nothing on disk but logs), radosgw with the beast
# frontend on 127.0.0.1, and one S3 user made with radosgw-admin. Everything
# lives in one state folder; nothing is registered with systemd.
#
#   scripts/ceph_rgw.sh start [DIR]   install (when missing), start, print env lines
#   scripts/ceph_rgw.sh env [DIR]     print the env lines of the running gateway
#   scripts/ceph_rgw.sh stop [DIR]    stop the daemons and remove DIR
#
# DIR defaults to $CEPH_RGW_DIR, else /tmp/epochgc-ceph-rgw. Ports come from
# CEPH_RGW_PORT (default 7480) and CEPH_MON_PORT (default 6789). The env
# lines (EPOCHGC_RGW_ENDPOINT, EPOCHGC_RGW_ACCESS_KEY_ID,
# EPOCHGC_RGW_SECRET_ACCESS_KEY, and EPOCHGC_RGW_CEPH_CONF for the
# radosgw-admin that makes one user per role) are what tests/rgw/ reads.
set -euo pipefail

cmd="${1:-}"
dir="${2:-${CEPH_RGW_DIR:-/tmp/epochgc-ceph-rgw}}"
rgw_port="${CEPH_RGW_PORT:-7480}"
mon_port="${CEPH_MON_PORT:-6789}"
access_key="epochgc-rgw-access"
secret_key="epochgc-rgw-secret"
conf="$dir/ceph.conf"

say() { echo "ceph_rgw: $*" >&2; }
die() {
    say "$*"
    [ "${show_logs:-}" = 1 ] || exit 1
    local log
    for log in "$dir"/log/*.log; do
        [ -f "$log" ] || continue
        say "last lines of $log:"
        tail -5 "$log" >&2
    done
    exit 1
}

install_packages() {
    local missing=()
    command -v ceph-mon >/dev/null || missing+=(ceph-mon)
    command -v ceph-osd >/dev/null || missing+=(ceph-osd)
    command -v radosgw >/dev/null || missing+=(radosgw)
    command -v ceph >/dev/null || missing+=(ceph-common)
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

print_env() {
    echo "EPOCHGC_RGW_ENDPOINT=http://127.0.0.1:$rgw_port"
    echo "EPOCHGC_RGW_ACCESS_KEY_ID=$access_key"
    echo "EPOCHGC_RGW_SECRET_ACCESS_KEY=$secret_key"
    echo "EPOCHGC_RGW_CEPH_CONF=$conf"
}

# Wait until "$@" succeeds, at most $1 seconds.
wait_for() {
    local seconds="$1" what="$2"
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || die "$what did not come up within ${seconds}s (logs in $dir/log)"
        sleep 0.5
    done
}

rgw_answers() { curl -sf -o /dev/null "http://127.0.0.1:$rgw_port/"; }
osd_is_up() { ceph -c "$conf" osd stat 2>/dev/null | grep -q "1 up"; }

write_conf() {
    local fsid="$1"
    cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
mon initial members = a
ms bind msgr2 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
[mon.a]
mon data = $dir/mon/a
[osd.0]
osd data = $dir/osd/0
osd objectstore = memstore
memstore device bytes = 536870912
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
EOF
}

start() {
    if [ -f "$dir/started" ] && rgw_answers; then
        say "already running in $dir"
        print_env
        return 0
    fi
    install_packages
    rm -rf "$dir"
    mkdir -p "$dir"/{run,log,mon/a,osd/0,rgw}
    local fsid osd_uuid
    fsid="$(uuidgen)"
    write_conf "$fsid"
    # One keyring for every daemon and client; ceph-mon --mkfs imports all
    # of its keys. (With auth none, a client's or the OSD's first command
    # could reach the monitor before the monmap and be refused: "wrong fsid".)
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool "$dir/keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$dir/keyring" --gen-key -n osd.0 \
        --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null
    ceph-authtool "$dir/keyring" --gen-key -n client.rgw.a \
        --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null
    monmaptool --create --addv a "[v1:127.0.0.1:$mon_port]" --fsid "$fsid" "$dir/monmap" >/dev/null
    ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >"$dir/log/mkfs-mon.out" 2>&1 \
        || die "ceph-mon --mkfs failed: $(tail -1 "$dir/log/mkfs-mon.out")"
    ceph-mon -c "$conf" -i a 2>>"$dir/log/start.err" || die "ceph-mon did not start (see $dir/log)"
    wait_for 30 "ceph-mon" ceph -c "$conf" mon stat
    osd_uuid="$(uuidgen)"
    local osd_id
    osd_id="$(ceph -c "$conf" osd new "$osd_uuid")"
    [ "$osd_id" = "0" ] || die "expected osd id 0, got $osd_id"
    ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >"$dir/log/mkfs-osd.out" 2>&1 \
        || die "ceph-osd --mkfs failed: $(tail -1 "$dir/log/mkfs-osd.out")"
    ceph-osd -c "$conf" -i 0 2>>"$dir/log/start.err" || die "ceph-osd did not start (see $dir/log)"
    wait_for 60 "ceph-osd" osd_is_up
    radosgw -c "$conf" -n client.rgw.a 2>>"$dir/log/start.err" || die "radosgw did not start (see $dir/log)"
    wait_for 120 "radosgw" rgw_answers
    radosgw-admin -c "$conf" user create --uid=epochgc --display-name=epochgc \
        --access-key="$access_key" --secret="$secret_key" >"$dir/log/user.out" 2>&1 \
        || die "radosgw-admin user create failed: $(tail -1 "$dir/log/user.out")"
    touch "$dir/started"
    say "RADOS Gateway on http://127.0.0.1:$rgw_port (state in $dir)"
    print_env
}

stop() {
    [ -d "$dir" ] || return 0
    local pidfile pid
    for pidfile in "$dir"/run/*.pid; do
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
    done
    for pidfile in "$dir"/run/*.pid; do
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        for _ in $(seq 1 40); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$dir"
    say "stopped"
}

case "$cmd" in
start)
    show_logs=1
    start
    ;;
stop) stop ;;
env)
    [ -f "$dir/started" ] || die "no gateway started in $dir (run: $0 start)"
    print_env
    ;;
*) die "usage: $0 start|stop|env [DIR]" ;;
esac
