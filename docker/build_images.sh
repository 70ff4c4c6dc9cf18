#!/usr/bin/env bash
# Build the course's two images on a Debian/Ubuntu machine that may reach no image registry, only
# the package mirrors (docs/images.md says what was measured):
#
#   docker/build_images.sh                  # both images; stops the engine afterwards if it started it
#   docker/build_images.sh --keep-engine    # leave it running (then: docker/engine.sh stop)
#   docker/build_images.sh --deps-only      # only the shared package stage
#
# 1. The engine (docker/engine.sh): installed and started when none answers.
# 2. The base (docker/base_image.sh): the Dockerfile's python:3.11.7-slim-bookworm, or a stand-in made
#    with debootstrap when it cannot be pulled, plus the host's extra CA certificates.
# 3. The host's pip settings (docker/host_pip.py): pip.conf files and $PIP_* as build arguments;
#    local wheel folders and indexes are served on 127.0.0.1 for the build (--network host).
# 4. BuildKit builds, with Debian's /usr/bin/docker (another docker on PATH may have no BuildKit):
#    the shared `deps` stage once (the pinned packages), then the student image from the students'
#    copy (`python -m grader release`, run in that stage, into build/images/student-copy) and the
#    grader image from this repository. The host needs no Python packages (nor a .venv). Each image's size and build time are printed and written to
#    build/artifacts/images.txt; the builds' logs go to build/artifacts/images/.
#
# Image names: $COURSE_STUDENT_IMAGE (ml-cost-course:student), $COURSE_GRADER_IMAGE
# (ml-cost-course:grader). The student image's user has UID and GID 1000 (the Dockerfile's default):
# a build as root must not pass --build-arg UID=$(id -u), which would make a second root account.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

KEEP_ENGINE=""
DEPS_ONLY=""
for arg in "$@"; do
    case "$arg" in
        --keep-engine) KEEP_ENGINE=1 ;;
        --deps-only) DEPS_ONLY=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_images.sh: unknown option $arg (expected --keep-engine, --deps-only)" >&2; exit 2 ;;
    esac
done

export DOCKER_BUILDKIT=1 COURSE_DOCKER="${COURSE_DOCKER:-/usr/bin/docker}"
DOCKER="$COURSE_DOCKER"
STUDENT="${COURSE_STUDENT_IMAGE:-ml-cost-course:student}"
GRADER="${COURSE_GRADER_IMAGE:-ml-cost-course:grader}"
DEPS="${STUDENT%%:*}:deps"
ARTIFACTS="$REPO/build/artifacts"
LOGS="$ARTIFACTS/images"
COPY_DIR="$REPO/build/images/student-copy"
PIP_PORT="${COURSE_PIP_PORT:-38417}"
STATE="${COURSE_ENGINE_STATE:-/var/tmp/course-docker-engine}"
mkdir -p "$LOGS" "$REPO/build/images"

say() { echo "build_images.sh: $*" >&2; }
die() { say "$*"; exit 1; }
clock() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

SERVER_PID=""
STARTED_ENGINE=""
cleanup() {
    local rc=$?
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    if [ -n "$STARTED_ENGINE" ] && [ -z "$KEEP_ENGINE" ]; then docker/engine.sh stop || rc=1; fi
    exit "$rc"
}
trap cleanup EXIT

# ---------------------------------------------------------------- 1. engine
had_pid="$( [ -f "$STATE/dockerd.pid" ] && echo 1 || true)"
docker/engine.sh start
if [ -z "$had_pid" ] && [ -f "$STATE/dockerd.pid" ]; then STARTED_ENGINE=1; fi
client="$("$DOCKER" version -f '{{.Client.Version}}')"
if [ "${client%%.*}" -ge 23 ] && ! "$DOCKER" buildx version >/dev/null 2>&1; then
    die "$DOCKER is Docker $client, whose BuildKit builds need the buildx plugin: install docker-buildx (apt-get install docker-buildx), or set COURSE_DOCKER to a client that has it"
fi

# ---------------------------------------------------------------- 2. base
BASE="$(docker/base_image.sh)"

# ---------------------------------------------------------------- 3. the host's pip settings
build_args=(--build-arg "BASE=$BASE")
settings_text="$(python3 docker/host_pip.py args --port "$PIP_PORT")" || die "the host's pip settings cannot be carried (see above)"
pip_settings=()
if [ -n "$settings_text" ]; then mapfile -t pip_settings <<< "$settings_text"; fi
for setting in "${pip_settings[@]}"; do build_args+=(--build-arg "$setting"); done
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do   # Docker's predefined ones
    if [ -n "${!name:-}" ]; then build_args+=(--build-arg "$name=${!name}"); fi
done
network=()
if [ -n "$(python3 docker/host_pip.py folders --port "$PIP_PORT")" ]; then
    python3 docker/host_pip.py serve --port "$PIP_PORT" 2> "$LOGS/pip_server.log" &
    SERVER_PID=$!
    for _ in $(seq 50); do
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $PIP_PORT), 1)" 2>/dev/null; then break; fi
        kill -0 "$SERVER_PID" 2>/dev/null || die "the local pip folders could not be served: $(cat "$LOGS/pip_server.log")"
        sleep 0.1
    done
    network=(--network host)   # the build's RUN reaches the folders on the host's 127.0.0.1
fi
say "pip settings carried into the build: ${pip_settings[*]:-none}"
# The same arguments rebuild from the cache (tests/test_images.py builds a target with them).
printf '%s\n' "${network[@]}" "${build_args[@]}" > "$REPO/build/images/build_args"

# ---------------------------------------------------------------- 4. builds
# build NAME CONTEXT TARGET TAG: a BuildKit build, its log in $LOGS/NAME.log; sets SECONDS_TAKEN.
build() {
    local name="$1" context="$2" target="$3" tag="$4" started=$SECONDS
    say "building $tag (target $target, context $context; log: $LOGS/$name.log)"
    if ! "$DOCKER" build --progress=plain "${network[@]}" "${build_args[@]}" -f "$REPO/docker/Dockerfile" \
            --target "$target" -t "$tag" "$context" > "$LOGS/$name.log" 2>&1; then
        die "building $tag failed; the end of its log ($LOGS/$name.log):
$(tail -n 25 "$LOGS/$name.log")"
    fi
    SECONDS_TAKEN=$((SECONDS - started))
}

bytes() { "$DOCKER" image inspect -f '{{.Size}}' "$1"; }
size() { bytes "$1" | awk '{printf "%.2f GB", $1 / 1e9}'; }
# What an image adds to the shared stage, in MB.
own() { echo "$(( ($(bytes "$1") - $(bytes "$DEPS")) / 1000000 )) MB"; }

report() {
    local line="$1"
    say "$line"
    echo "$line" >> "$ARTIFACTS/images.txt"
}

: > "$ARTIFACTS/images.txt"
build deps "$REPO" deps "$DEPS"
report "$DEPS (shared package stage, both images are built on it): $(size "$DEPS"), built in $(clock "$SECONDS_TAKEN")"
if [ -n "$DEPS_ONLY" ]; then exit 0; fi

# The students' copy, written by the shared stage's Python (it has the course's packages; the host
# needs no .venv): this repository mounted read-only, the copy written as the caller.
rm -rf "$COPY_DIR"
mkdir -p "$(dirname "$COPY_DIR")"
"$DOCKER" run --rm --user "$(id -u):$(id -g)" -e HOME=/tmp -v "$REPO:/src:ro" -v "$(dirname "$COPY_DIR"):/out" \
    -w /src "$DEPS" python -m grader release "/out/$(basename "$COPY_DIR")" >&2 \
    || die "python -m grader release failed in $DEPS (see above)"

build student "$COPY_DIR" student "$STUDENT"
report "$STUDENT: $(size "$STUDENT") ($(own "$STUDENT") of its own), built in $(clock "$SECONDS_TAKEN") on the shared stage"
build grader "$REPO" grader "$GRADER"
report "$GRADER: $(size "$GRADER") ($(own "$GRADER") of its own), built in $(clock "$SECONDS_TAKEN") on the shared stage"
for image in "$STUDENT" "$GRADER"; do   # built on the shared stage: its layers are theirs, stored once
    layers="$("$DOCKER" image inspect -f '{{range .RootFS.Layers}}{{.}} {{end}}' "$image")"
    case "$layers" in
        "$("$DOCKER" image inspect -f '{{range .RootFS.Layers}}{{.}} {{end}}' "$DEPS")"*) ;;
        *) die "$image is not built on $DEPS's layers: the shared stage was built twice (docker/Dockerfile changed?)" ;;
    esac
done
report "both images are built on $DEPS's layers, stored once: $(size "$DEPS") + $(own "$STUDENT") + $(own "$GRADER") on disk"
