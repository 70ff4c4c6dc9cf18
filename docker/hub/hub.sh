#!/usr/bin/env bash
# The class server: JupyterHub with the course's student image, one container and one volume per student
# (docs/hub.md). One command starts it on a machine with Docker:
#
#   docker/hub/hub.sh start --roster roster.csv [--admin NAME] [--port 8000] [--bind 127.0.0.1]
#   docker/hub/hub.sh links [--hub https://hub.example.edu]   # each lab's nbgitpuller link, for the students
#   docker/hub/hub.sh publish           # publish the handouts again (a course update); students re-open a link
#   docker/hub/hub.sh status            # the hub, the students' servers, the address
#   docker/hub/hub.sh stop [--purge]    # stop the hub and every student's server; --purge: also their volumes
#                                       # and the hub's folder (accounts, hand-ins): everything is gone
#   docker/hub/hub.sh build [--no-cache]  # only build the images (start builds them when absent); --no-cache:
#                                       # from scratch, e.g. for the packages' security updates
#
# start does, in order (each step is skipped when already done):
# 1. the engine (docker/engine.sh start) and the two images of docker/hub/Dockerfile: the hub
#    ($COURSE_HUB_HUB_IMAGE, ml-cost-course:hub) and the student image as a single-user server
#    ($COURSE_HUB_IMAGE, ml-cost-course:hub-student), on the student image docker/build_images.sh built, with the
#    build arguments it used (build/images/build_args);
# 2. the hub's folder ($COURSE_HUB_STATE, build/hub): the roster (checked), the handouts published into
#    handouts.git (python -m grader publish, run in the student image with this repository mounted), collection/;
# 3. the students' network: internal (no route out), no traffic between students' containers, and firewall
#    rules on the host so that the containers reach only the hub's API and the hand-in receiver. An internal
#    network alone leaves every port the host opens on 0.0.0.0 reachable from them (measured);
# 4. the hub's container, on the host's network, with the Docker socket (it starts the students' containers).
#    It answers on http://BIND:PORT; put TLS in front of it for a class (docs/hub.md).
#
# Settings ($VAR, default): COURSE_HUB_NAME (course-hub: the container, network and volume names; at most 12
# characters), COURSE_HUB_SUBNET (172.31.77.0/24), COURSE_HUB_PORT (8000), COURSE_HUB_BIND (127.0.0.1),
# COURSE_HUB_MEM (4G) and COURSE_HUB_CPUS (1) per student, COURSE_HUB_CULL (3600 s idle, then stopped; 0
# never), COURSE_HUB_STATE (build/hub), COURSE_STUDENT_IMAGE (ml-cost-course:student), COURSE_DOCKER;
# COURSE_HUB_START_TIMEOUT (300 s: each part of the hub's start-up, sized for a loaded machine; start says which
# part did not answer and what to do), COURSE_HUB_START_TRIES (2: a hub that stops during its start is started
# again), COURSE_HUB_SPAWN_TIMEOUT (180 s: a student's server starting, then answering).
# Needs root (or a Docker user allowed to run iptables) and the student image (docker/build_images.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$PWD"

DOCKER="${COURSE_DOCKER:-/usr/bin/docker}"
NAME="${COURSE_HUB_NAME:-course-hub}"
SUBNET="${COURSE_HUB_SUBNET:-172.31.77.0/24}"
PORT="${COURSE_HUB_PORT:-8000}"
BIND="${COURSE_HUB_BIND:-127.0.0.1}"
STATE="${COURSE_HUB_STATE:-$REPO/build/hub}"
STUDENT="${COURSE_STUDENT_IMAGE:-ml-cost-course:student}"
HUB_IMAGE="${COURSE_HUB_HUB_IMAGE:-ml-cost-course:hub}"
SINGLEUSER="${COURSE_HUB_IMAGE:-ml-cost-course:hub-student}"
HANDIN_PORT=8082
PIP_PORT="${COURSE_PIP_PORT:-38417}"
BRIDGE="br-$NAME"
LOGS="$REPO/build/artifacts/hub"

say() { echo "hub.sh: $*" >&2; }
die() { say "$*"; exit 1; }
has_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

[ "${#NAME}" -le 12 ] && [[ "$NAME" =~ ^[a-z0-9][a-z0-9-]*$ ]] \
    || die "COURSE_HUB_NAME=$NAME: use at most 12 lower-case letters, digits and -, (its bridge is br-$NAME, 15 at most)"
[[ "$SUBNET" =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.0/24$ ]] || die "COURSE_HUB_SUBNET=$SUBNET: give a /24, e.g. 172.31.77.0/24"
GATEWAY="${BASH_REMATCH[1]}.1"
STATE="$(mkdir -p "$STATE" && cd "$STATE" && pwd)"

# ---------------------------------------------------------------- images
SERVER_PID=""
stop_pip_server() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; }
trap stop_pip_server EXIT

build() {
    local cache=()
    [ "${1:-}" = --no-cache ] && cache=(--no-cache)
    has_image "$STUDENT" || die "no $STUDENT: build the course's images first (docker/build_images.sh --keep-engine)"
    local args_file="$REPO/build/images/build_args" args=() started=$SECONDS
    [ -f "$args_file" ] || die "no $args_file (the arguments docker/build_images.sh built with): run docker/build_images.sh"
    mapfile -t args < "$args_file"
    if grep -q "127.0.0.1:$PIP_PORT" "$args_file"; then   # the host's local pip folders, served as for the course's build
        mkdir -p "$LOGS"
        python3 docker/host_pip.py serve --port "$PIP_PORT" 2> "$LOGS/pip_server.log" &
        SERVER_PID=$!
        for _ in $(seq 50); do
            python3 -c "import socket; socket.create_connection(('127.0.0.1', $PIP_PORT), 1)" 2>/dev/null && break
            kill -0 "$SERVER_PID" 2>/dev/null || die "the local pip folders could not be served: $(cat "$LOGS/pip_server.log")"
            sleep 0.1
        done
    fi
    if command -v npm >/dev/null; then args+=(--build-arg "NPM_CONFIG_REGISTRY=$(npm config get registry)"); fi
    mkdir -p "$LOGS"
    local target tag
    for target in hub singleuser; do
        tag="$HUB_IMAGE"; [ "$target" = singleuser ] && tag="$SINGLEUSER"
        say "building $tag (target $target of docker/hub/Dockerfile; log: $LOGS/$target.log)"
        DOCKER_BUILDKIT=1 "$DOCKER" build --progress=plain "${cache[@]}" "${args[@]}" --build-arg "STUDENT=$STUDENT" \
            --target "$target" -t "$tag" docker/hub > "$LOGS/$target.log" 2>&1 \
            || die "building $tag failed; the end of its log ($LOGS/$target.log):
$(tail -n 25 "$LOGS/$target.log")"
    done
    stop_pip_server; SERVER_PID=""
    local own=$(( ($("$DOCKER" image inspect -f '{{.Size}}' "$SINGLEUSER") - $("$DOCKER" image inspect -f '{{.Size}}' "$STUDENT")) / 1000000 ))
    say "built $HUB_IMAGE ($(( $("$DOCKER" image inspect -f '{{.Size}}' "$HUB_IMAGE") / 1000000 )) MB) and $SINGLEUSER ($own MB on $STUDENT) in $((SECONDS - started)) s"
}

# ---------------------------------------------------------------- the course's commands, in the student image
# `python -m grader ARGS` from this repository (mounted read-only), with the student image's Python and git, as
# the caller; the hub's folder is mounted at its own path.
course() {
    "$DOCKER" run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -v "$REPO:/src:ro" -v "$STATE:$STATE" \
        -w /src "$SINGLEUSER" python -m grader "$@"
}

publish() {
    say "publishing the handouts into $STATE/handouts.git"
    course publish "$STATE/handouts.git" "$@"
}

# ---------------------------------------------------------------- network and firewall
rule() {   # rule -I|-D N ARGS: insert (when absent) or delete (when present) one INPUT rule
    local action="$1"; shift
    if [ "$action" = -D ]; then
        while iptables -C INPUT "$@" 2>/dev/null; do iptables -D INPUT "$@"; done
    elif ! iptables -C INPUT "$@" 2>/dev/null; then
        iptables -I INPUT "$RULE_AT" "$@"
    fi
    RULE_AT=$((RULE_AT + 1))
}

firewall() {   # the students' containers reach the host on the hub's API and the hand-in receiver only
    command -v iptables >/dev/null || die "no iptables: the students' containers would reach every port of this host"
    RULE_AT=1
    rule "$1" -i "$BRIDGE" -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT   # replies to the hub and proxy
    rule "$1" -i "$BRIDGE" -d "$GATEWAY" -p tcp --dport 8081 -j ACCEPT
    rule "$1" -i "$BRIDGE" -d "$GATEWAY" -p tcp --dport "$HANDIN_PORT" -j ACCEPT
    rule "$1" -i "$BRIDGE" -j REJECT
}

network() {
    if ! "$DOCKER" network inspect "$NAME" >/dev/null 2>&1; then
        "$DOCKER" network create --internal --subnet "$SUBNET" --gateway "$GATEWAY" \
            -o com.docker.network.bridge.name="$BRIDGE" -o com.docker.network.bridge.enable_icc=false \
            --label ml-cost-course.hub=network "$NAME" >/dev/null \
            || die "could not create the network $NAME on $SUBNET (taken? set COURSE_HUB_SUBNET)"
    fi
    firewall -I
}

# ---------------------------------------------------------------- start, stop, status
hub_url() { echo "http://$BIND:$PORT"; }

START_TIMEOUT="${COURSE_HUB_START_TIMEOUT:-300}"
START_TRIES="${COURSE_HUB_START_TRIES:-2}"

run_hub() {   # the hub's container, started afresh
    "$DOCKER" rm -f "$NAME" >/dev/null 2>&1 || true
    rm -f "$STATE/jupyterhub-proxy.pid"   # its proxy went with its container; a pid in another namespace means nothing
    # No restart policy: after a reboot or an engine restart the firewall rules are gone (engine.sh stop deletes
    # them with the bridge's), so the hub comes back only through this function, which makes them first.
    "$DOCKER" run -d --name "$NAME" --network host --label ml-cost-course.hub=hub \
        -v /var/run/docker.sock:/var/run/docker.sock -v "$STATE:$STATE" \
        -e COURSE_HUB_STATE="$STATE" -e COURSE_HUB_NAME="$NAME" -e COURSE_HUB_IMAGE="$SINGLEUSER" \
        -e COURSE_HUB_NETWORK="$NAME" -e COURSE_HUB_IP="$GATEWAY" -e COURSE_HUB_BIND="$BIND" -e COURSE_HUB_PORT="$PORT" \
        -e COURSE_HUB_HANDIN_PORT="$HANDIN_PORT" -e COURSE_HUB_MEM="${COURSE_HUB_MEM:-4G}" \
        -e COURSE_HUB_CPUS="${COURSE_HUB_CPUS:-1}" -e COURSE_HUB_CULL="${COURSE_HUB_CULL:-3600}" \
        -e COURSE_HUB_START_TIMEOUT="$START_TIMEOUT" -e COURSE_HUB_SPAWN_TIMEOUT="${COURSE_HUB_SPAWN_TIMEOUT:-180}" \
        -e COURSE_HUB_ADMINS="$1" -e COURSE_HUB_SINGLEUSER_ARGS="${COURSE_HUB_SINGLEUSER_ARGS:-}" \
        "$HUB_IMAGE" >/dev/null
}

wait_for_hub() {   # each part of the hub answering (docker/hub/hub_ready.py); exit 3: its container stopped first
    python3 docker/hub/hub_ready.py --public "$(hub_url)" --api "http://$GATEWAY:8081" \
        --handin "http://$GATEWAY:$HANDIN_PORT" --timeout "$START_TIMEOUT" \
        --state-cmd "$DOCKER inspect -f {{.State.Status}} $NAME" --logs-cmd "$DOCKER logs --tail 200 $NAME"
}

start() {
    local roster="" admins=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --roster) roster="$2"; shift 2 ;;
            --admin) admins="${admins:+$admins,}$2"; shift 2 ;;
            --port) PORT="$2"; shift 2 ;;
            --bind) BIND="$2"; shift 2 ;;
            *) die "start: unknown option $1 (expected --roster CSV, --admin NAME, --port N, --bind ADDRESS)" ;;
        esac
    done
    docker/engine.sh start
    if ! has_image "$HUB_IMAGE" || ! has_image "$SINGLEUSER"; then build; fi
    if [ -n "$roster" ]; then
        "$DOCKER" run --rm --network none -v "$(cd "$(dirname "$roster")" && pwd)/$(basename "$roster"):/roster.csv:ro" \
            "$HUB_IMAGE" python3 /srv/hub/roster.py /roster.csv >&2 || die "the roster $roster cannot be used (see above)"
        cp "$roster" "$STATE/roster.csv"
    fi
    [ -f "$STATE/roster.csv" ] || die "no roster: start --roster roster.csv (the course's roster: student_id,name,email,...)"
    mkdir -p "$STATE/collection"
    [ -d "$STATE/handouts.git" ] || publish
    network
    if [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" = true ]; then
        say "the hub is running; restarting it to read the roster and settings again (students' servers keep running)"
    fi
    # On a busy machine each part of the hub is given COURSE_HUB_START_TIMEOUT seconds; a hub whose container
    # stopped during its start (its log says why) is started again, COURSE_HUB_START_TRIES times in all.
    local try=1 ready=0
    while :; do
        run_hub "$admins"
        wait_for_hub || ready=$?
        [ "$ready" = 0 ] && break
        if [ "$ready" != 3 ] || [ "$try" -ge "$START_TRIES" ]; then
            die "the hub did not come up (try $try of $START_TRIES, load average $(cut -d' ' -f1 /proc/loadavg)); see above, and its whole log: $DOCKER logs $NAME"
        fi
        say "the hub's container stopped during its start (try $try of $START_TRIES, load average $(cut -d' ' -f1 /proc/loadavg)): starting it again"
        try=$((try + 1)); ready=0
    done
    say "the hub answers on $(hub_url) (students sign up there with their student_id from the roster); hand-ins go to $STATE/collection"
    say "each lab's link: docker/hub/hub.sh links --hub $(hub_url)   (the address students use, if another)"
}

stop() {
    local purge=""
    [ "${1:-}" = --purge ] && purge=1
    "$DOCKER" info >/dev/null 2>&1 || { say "no Docker engine answers: nothing to stop"; return 0; }
    "$DOCKER" rm -f "$NAME" >/dev/null 2>&1 && say "stopped the hub ($NAME)" || true
    local servers
    servers="$("$DOCKER" ps -aq --filter label=ml-cost-course.hub=student --filter "network=$NAME")"
    if [ -n "$servers" ]; then
        "$DOCKER" rm -f $servers >/dev/null
        say "stopped $(echo "$servers" | wc -w) student servers"
    fi
    if command -v iptables >/dev/null; then firewall -D; fi
    "$DOCKER" network rm "$NAME" >/dev/null 2>&1 || true
    if [ -n "$purge" ]; then
        local volumes
        volumes="$("$DOCKER" volume ls -q --filter "name=^$NAME-user-")"
        if [ -n "$volumes" ]; then "$DOCKER" volume rm $volumes >/dev/null; fi
        rm -rf "$STATE"
        say "removed $(echo "$volumes" | wc -w) student volumes and $STATE (accounts, handouts, hand-ins)"
    fi
}

status() {
    if [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" != true ]; then
        echo "the hub ($NAME) is not running"
        return 1
    fi
    echo "the hub ($NAME) runs on $(hub_url); its folder: $STATE"
    "$DOCKER" ps --filter label=ml-cost-course.hub=student --filter "network=$NAME" \
        --format '  {{.Label "ml-cost-course.user"}}: {{.Status}}'
}

case "${1:-}" in
    build) shift; build "$@" ;;
    start) shift; start "$@" ;;
    publish) shift; publish "$@" ;;
    links) shift; has_image "$SINGLEUSER" || build; course links --hub "$(hub_url)" "$@" ;;
    stop) shift; stop "$@" ;;
    status) status ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) echo "usage: docker/hub/hub.sh start|links|publish|status|stop|build (--help says more)" >&2; exit 2 ;;
esac
