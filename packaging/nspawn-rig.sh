# The container rig of packaging/test-systemd and packaging/test-apt, sourced by both: a
# debootstrap Debian 12 root with systemd and dbus (its base cached as a tarball in $CACHE), the
# .deb installed with apt, booted with systemd as PID 1 of a systemd-nspawn container sharing the
# host's network (a server on 127.0.0.1 outside is reachable), entered with nsenter. Needs root.

rig_deb() {
    local deb=${1:-$(ls -t dist/org-example-downloads_*.deb 2>/dev/null | head -1)}
    [ -f "$deb" ] || { echo "$0: no .deb (packaging/build-deb first)" >&2; exit 2; }
    echo "$deb"
}

rig_tools() {
    [ "$(id -u)" = 0 ] || { echo "$0: run as root (debootstrap, systemd-nspawn)" >&2; exit 2; }
    command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap systemd-container
}

# The host's own Debian mirror (deb822 sources first, then sources.list).
rig_mirror() {
    local mirror
    mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    echo "${mirror:-http://deb.debian.org/debian}"
}

# rig_make_root ROOT DEB: a clean root from the cached base, the .deb installed with apt.
rig_make_root() {
    local root=$1 deb=$2 cache=${CACHE:-/var/cache/org-example-downloads-test-install} mirror
    mirror=$(rig_mirror)
    mkdir -p "$cache"
    local tarball=$cache/bookworm-systemd.tgz
    if [ ! -f "$tarball" ]; then
        echo "== debootstrap with systemd and dbus (first run: cached in $tarball)"
        debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd \
            --make-tarball="$tarball" bookworm "$root.tmp" "$mirror"
        rm -rf "$root.tmp"
    fi
    echo "== clean root, the .deb installed with apt"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd \
        --unpack-tarball="$tarball" bookworm "$root" "$mirror" >/dev/null
    chmod 755 "$root"
    cp "$deb" "$root/root/"   # nspawn mounts a tmpfs on /tmp
    echo downloads-test > "$root/etc/hostname"
    rig_in_root "$root" apt-get update -qq
    rig_in_root "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "/root/$(basename "$deb")" >/dev/null
}

# rig_in_root ROOT COMMAND…: runs a command in the root before it boots.
rig_in_root() {
    local root=$1
    shift
    systemd-nspawn -q -D "$root" --resolv-conf=copy-host --register=no --keep-unit \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}

# rig_boot ROOT LOG: boots it; sets $container (the nspawn process) and $leader (its systemd,
# as the host sees it), and waits until systemd says it is up.
rig_boot() {
    local root=$1 log=$2
    echo "== boot"
    systemd-nspawn --boot --register=no --keep-unit --console=passive -D "$root" >"$log" 2>&1 &
    container=$!
    # The container's PID 1 is the nspawn process's child.
    leader=""
    for _ in $(seq 150); do
        leader=$(pgrep -P "$container" -x systemd || true)
        [ -n "$leader" ] && break
        sleep 0.2
    done
    [ -n "$leader" ] || { echo "FAIL: the container did not boot" >&2; cat "$log" >&2; exit 1; }
    # systemctl answers only once systemd's own socket is there: asked again until it does.
    local state=""
    for _ in $(seq 150); do
        state=$(inside systemctl is-system-running --wait 2>/dev/null || true)
        [ -n "$state" ] && break
        sleep 0.2
    done
    [ -n "$state" ] || { echo "FAIL: systemd in the container does not answer" >&2; cat "$log" >&2; exit 1; }
    echo "systemd (pid $leader on the host) is $state"
}

# inside COMMAND…: runs a command in the booted container.
inside() { nsenter --target "$leader" --all --root --wd=/ env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# rig_power_off: nspawn powers the container off on SIGTERM; killed if it does not.
rig_power_off() {
    [ -n "${container:-}" ] || return 0
    kill -TERM "$container" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$container" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$container" 2>/dev/null
    container=""
}
