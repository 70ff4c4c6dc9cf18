#!/usr/bin/env bash
# The image docker/Dockerfile builds FROM, on a machine that may reach no image registry.
#
#   docker/base_image.sh            # prints the image to pass as --build-arg BASE=...
#
# 1. The Dockerfile's own base (its `ARG BASE=` default, python:3.11.7-slim-bookworm) when it is
#    stored locally or can be pulled.
# 2. Otherwise (no registry answers, as on the course machines) a stand-in made here: Debian 12
#    from the Debian mirror apt uses (debootstrap), imported as course-base:bookworm-debootstrap,
#    with the tag's Python where the host has that exact version (the course machines' python3 is
#    3.11.7): its interpreter and standard library, without its site-packages, go to /usr/local as
#    in the official image, with the Debian libraries its modules link to. Otherwise Debian's own
#    python3 (3.11.2): it works, but JupyterLab marks every handout modified when it is opened
#    (their metadata records the image's 3.11.7) and the references' provenance names another
#    Python. Made once and reused; COURSE_BASE_REMAKE=1 remakes it.
# 3. On top of either, when the host has extra CA certificates (/usr/local/share/ca-certificates,
#    e.g. an intercepting proxy's), a layer holding them (course-base:host-ca): without it every
#    HTTPS request of the build fails CERTIFICATE_VERIFY_FAILED.
#
# Needs a Docker engine (docker/engine.sh start) and, for 2., root (debootstrap; installed if absent).
# Messages go to stderr; stdout is only the image's name.
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKER="${COURSE_DOCKER:-/usr/bin/docker}"
LOCAL=course-base:bookworm-debootstrap
HOST_CA=course-base:host-ca
CA_DIR=/usr/local/share/ca-certificates

say() { echo "base_image.sh: $*" >&2; }
die() { say "$*"; exit 1; }

has_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

dockerfile_base() {
    sed -n 's/^ARG BASE=\([^ ]*\).*/\1/p' docker/Dockerfile | head -n 1
}

# The Debian mirror apt uses here (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
    if [ -n "${COURSE_DEBIAN_MIRROR:-}" ]; then echo "$COURSE_DEBIAN_MIRROR"; return; fi
    local found
    found="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" {print $2}' | grep -v security | grep '/debian/\?$' | head -n 1 || true)"
    [ -n "$found" ] || found="$(grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' | grep -v security | grep '/debian/\?$' | head -n 1 || true)"
    echo "${found:-http://deb.debian.org/debian}"
}

# The prefix of a host Python whose version is exactly $1 (python3, then python3.11 on PATH), or nothing.
host_python() {
    local candidate
    for candidate in python3 python3.11; do
        command -v "$candidate" >/dev/null || continue
        "$candidate" -c "import sys; v = '%d.%d.%d' % sys.version_info[:3]; sys.exit(v != '$1' or sys.prefix != sys.base_prefix)" 2>/dev/null \
            && { "$candidate" -c 'import sys; print(sys.base_prefix)'; return; }
    done
    return 0
}

# The Debian packages holding the libraries that the modules of the Python at prefix $1 link to (not tkinter's).
python_libraries() {
    local lib real
    for lib in $(ldd $(ls "$1"/lib/python3.*/lib-dynload/*.so | grep -v _tkinter) | awk '/=>/ {print $3}' | sort -u); do
        real="$(readlink -f "$lib")"
        dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null \
            || die "no Debian package holds $lib (which the Python at $1 needs)"
    done | cut -d: -f1 | sort -u | paste -sd,
}

# Install the Python at prefix $1 into the root file system $2's /usr/local, as the official image has it:
# no site-packages (the host's own packages), no tests, no bytecode; found there through ldconfig.
install_python() {
    local prefix="$1" rootfs="$2" version
    version="$(basename "$(ls -d "$prefix"/lib/python3.*/)")"   # python3.11
    mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/local/lib" "$rootfs/usr/local/include"
    cp -a "$prefix/bin/$version" "$rootfs/usr/local/bin/"
    ln -sf "$version" "$rootfs/usr/local/bin/python3"; ln -sf python3 "$rootfs/usr/local/bin/python"
    cp -a "$prefix"/lib/libpython3* "$rootfs/usr/local/lib/"
    cp -a "$prefix/include/$version" "$rootfs/usr/local/include/"
    tar -C "$prefix/lib" --exclude="$version/site-packages/*" --exclude=test --exclude=tests --exclude=idle_test \
        --exclude=__pycache__ --exclude='*.pyc' -cf - "$version" | tar -C "$rootfs/usr/local/lib" -xf -
    chroot "$rootfs" ldconfig
    chroot "$rootfs" /usr/local/bin/python3 -c "import ssl, ctypes, sqlite3, bz2, lzma, readline, uuid, zlib, ensurepip, venv" \
        || die "the Python copied from $prefix does not run in the stand-in (see above)"
}

make_local() {
    [ "$(id -u)" = 0 ] || die "no registry gave $1 and making a stand-in needs root (debootstrap): run as root, or make $1 available"
    if ! command -v debootstrap >/dev/null; then
        say "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
    fi
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debian-archive-keyring >/dev/null
    local mirror rootfs started want prefix include
    want="$(echo "$1" | sed -n 's/^python:\([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p')"   # python:3.11.7-slim-bookworm -> 3.11.7
    prefix="$( [ -n "$want" ] && host_python "$want" || true)"
    if [ -n "$prefix" ]; then
        include="ca-certificates,netbase,$(python_libraries "$prefix")"
    else
        say "no Python ${want:-of $1} on this host: the stand-in gets Debian's python3 (3.11.2); JupyterLab will mark each handout modified when it is opened (docs/images.md)"
        include="ca-certificates,netbase,python3,python3-venv"
    fi
    mirror="$(debian_mirror)"; mirror="${mirror%/}"
    rootfs="$(mktemp -d /var/tmp/course-base-rootfs.XXXXXX)"
    started=$SECONDS
    local which="Debian 12 python3"
    if [ -n "$prefix" ]; then which="Python $want from $prefix"; fi
    say "making $LOCAL (Debian 12 + $which) with debootstrap from $mirror (about 90 s)"
    debootstrap --variant=minbase --include="$include" \
        bookworm "$rootfs" "$mirror" > "$rootfs.log" 2>&1 \
        || { rm -rf "$rootfs"; die "debootstrap failed; the end of its log ($rootfs.log):
$(tail -n 15 "$rootfs.log")"; }
    cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror}-security bookworm-security main
EOF
    if [ -n "$prefix" ]; then install_python "$prefix" "$rootfs"; fi
    # debootstrap copied the host's; Docker writes both into each container.
    rm -f "$rootfs/etc/hostname"; : > "$rootfs/etc/resolv.conf"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
    tar -C "$rootfs" -c . | "$DOCKER" import -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' - "$LOCAL" >/dev/null
    rm -rf "$rootfs" "$rootfs.log"
    say "made $LOCAL in $((SECONDS - started)) s ($("$DOCKER" run --rm "$LOCAL" python3 --version))"
}

base="$(dockerfile_base)"
[ -n "$base" ] || die "docker/Dockerfile has no 'ARG BASE=<image>' line; expected one before its first FROM"
if has_image "$base"; then
    chosen="$base"
elif timeout 120 "$DOCKER" pull -q "$base" >/dev/null 2>"${TMPDIR:-/tmp}/course-pull.err"; then
    chosen="$base"
else
    say "cannot pull $base ($(tail -n 1 "${TMPDIR:-/tmp}/course-pull.err")); using a stand-in made from the Debian mirror"
    if ! has_image "$LOCAL" || [ -n "${COURSE_BASE_REMAKE:-}" ]; then
        make_local "$base"
    fi
    chosen="$LOCAL"
fi
rm -f "${TMPDIR:-/tmp}/course-pull.err"

certs=()
if [ -d "$CA_DIR" ]; then mapfile -t certs < <(find "$CA_DIR" -type f -name '*.crt' | sort); fi
if [ "${#certs[@]}" -gt 0 ]; then
    context="$(mktemp -d)"
    cp "${certs[@]}" "$context/"
    printf 'FROM %s\nCOPY *.crt /usr/local/share/ca-certificates/course-host/\nRUN update-ca-certificates >/dev/null\n' \
        "$chosen" > "$context/Dockerfile"
    DOCKER_BUILDKIT=1 "$DOCKER" build -q -t "$HOST_CA" "$context" >/dev/null
    rm -rf "$context"
    say "added the host's ${#certs[@]} extra CA certificates ($CA_DIR) to $chosen: $HOST_CA"
    chosen="$HOST_CA"
fi
echo "$chosen"
