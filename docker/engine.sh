#!/usr/bin/env bash
# The Docker engine the course's images are built and tested with: start it where none answers,
# stop it afterwards, and undo what dockerd changed on the host. Measured on the course machines
# (docs/images.md): Debian 12's docker.io (20.10) runs with its defaults once dockerd is started;
# there is no systemd there, so installing the package does not start it.
#
#   docker/engine.sh start     # install docker.io if absent, start dockerd if no engine answers
#   docker/engine.sh stop      # stop only the dockerd that `start` started, then undo its host changes
#   docker/engine.sh status    # does an engine answer, and who started it
#
# `start` records in $COURSE_ENGINE_STATE (default /var/tmp/course-docker-engine) what it found
# (ip_forward, the iptables FORWARD policy, the network links) and the pid of the dockerd it
# started. dockerd leaves behind, when it stops: ip_forward set to 1, FORWARD's policy set to
# DROP, its DOCKER* chains and rules (filter and nat), the docker0 bridge (and br-* ones for
# Compose networks), a mount at /run/docker/netns/default and the folders /run/docker,
# /run/containerd (its containerd's shim sockets) and /run/runc. `stop` puts
# each back as recorded. Docker's data (/var/lib/docker: the images) stays.
# An engine that was already running (a systemd service, someone else's dockerd) is left alone.
# Packages it installed stay installed (apt-get purge docker.io containerd runc tini removes them).
#
# Needs root (it installs packages and starts a daemon). The client it uses is Debian's
# /usr/bin/docker ($COURSE_DOCKER overrides): another docker on PATH may lack BuildKit.
set -euo pipefail

STATE="${COURSE_ENGINE_STATE:-/var/tmp/course-docker-engine}"
DOCKER="${COURSE_DOCKER:-/usr/bin/docker}"
START_TIMEOUT="${COURSE_ENGINE_TIMEOUT:-60}"

say() { echo "engine.sh: $*" >&2; }
die() { say "$*"; exit 1; }

answers() { [ -x "$DOCKER" ] && "$DOCKER" info >/dev/null 2>&1; }

links() { ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }

forward_policy() { iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}'; }

install_engine() {
    [ "$(id -u)" = 0 ] || die "docker.io is not installed and this is not root: run as root, or install it (apt-get install docker.io)"
    command -v apt-get >/dev/null || die "no $DOCKER and no apt-get: install Docker Engine for this system, then run again"
    say "installing docker.io (Debian's Docker Engine) with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends docker.io >/dev/null
    mkdir -p "$STATE" && echo docker.io >> "$STATE/installed"
}

start() {
    mkdir -p "$STATE"
    if [ ! -x "$DOCKER" ] || ! command -v dockerd >/dev/null; then
        install_engine
    fi
    if answers; then
        [ -f "$STATE/dockerd.pid" ] || say "an engine already answers ($("$DOCKER" version -f '{{.Server.Version}}')); using it, and 'stop' will leave it running"
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "no Docker engine answers and only root can start dockerd: run as root, or start your engine"
    # What dockerd will change, as it is now (iptables comes with docker.io).
    sysctl -n net.ipv4.ip_forward > "$STATE/ip_forward"
    forward_policy > "$STATE/forward_policy"
    links > "$STATE/links"
    for dir in docker containerd runc; do
        if [ -d "/run/$dir" ]; then : > "$STATE/run_${dir}_existed"; else rm -f "$STATE/run_${dir}_existed"; fi
    done
    setsid nohup dockerd > "$STATE/dockerd.log" 2>&1 < /dev/null &
    echo $! > "$STATE/dockerd.pid"
    local waited=0
    until answers; do
        if ! kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null; then
            rm -f "$STATE/dockerd.pid"
            die "dockerd exited at start; the end of its log ($STATE/dockerd.log):
$(tail -n 15 "$STATE/dockerd.log")"
        fi
        [ "$waited" -lt $((START_TIMEOUT * 2)) ] || die "dockerd did not answer within ${START_TIMEOUT} s (log: $STATE/dockerd.log); stop it with: docker/engine.sh stop"
        sleep 0.5; waited=$((waited + 1))
    done
    say "started dockerd (pid $(cat "$STATE/dockerd.pid"), $("$DOCKER" version -f '{{.Server.Version}}')); stop it with: docker/engine.sh stop"
}

# Delete every rule of `table` that jumps to a DOCKER* chain or names a bridge dockerd made, then its chains.
undo_table() {
    local table="$1" rule bridges
    bridges="$(comm -13 "$STATE/links" <(links) | grep -E '^(docker0|br-)' | paste -sd'|' || true)"
    iptables -t "$table" -S | grep -E -- '^-A ' | grep -E -- "-j DOCKER|-g DOCKER|^-A DOCKER${bridges:+| ($bridges)( |$)}" \
        | tac | while read -r rule; do
            # shellcheck disable=SC2086  # the rule's words, as iptables -S printed them
            eval iptables -t "$table" -D "${rule#-A }" || true
        done
    for chain in $(iptables -t "$table" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
        iptables -t "$table" -F "$chain"
    done
    for chain in $(iptables -t "$table" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
        iptables -t "$table" -X "$chain"
    done
}

stop() {
    if [ ! -f "$STATE/dockerd.pid" ]; then
        say "no dockerd started by 'engine.sh start' (no $STATE/dockerd.pid): nothing to stop"
        return 0
    fi
    local pid waited=0
    pid="$(cat "$STATE/dockerd.pid")"
    if kill -0 "$pid" 2>/dev/null; then
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || die "pid $pid is not dockerd any more (it is $(cat "/proc/$pid/comm" 2>/dev/null)); not stopping it. Remove $STATE/dockerd.pid once you have checked"
        kill -TERM "$pid"
        while kill -0 "$pid" 2>/dev/null; do
            [ "$waited" -lt 60 ] || die "dockerd (pid $pid) did not stop within 30 s of SIGTERM; look at $STATE/dockerd.log"
            sleep 0.5; waited=$((waited + 1))
        done
    fi
    rm -f "$STATE/dockerd.pid"
    # What dockerd leaves behind, undone in the order it made it.
    local policy=""
    if command -v iptables >/dev/null; then
        undo_table filter
        undo_table nat
        policy="$(cat "$STATE/forward_policy" 2>/dev/null || true)"
        iptables -P FORWARD "${policy:-ACCEPT}"
    fi
    for link in $(comm -13 "$STATE/links" <(links) | grep -E '^(docker0|br-|veth)' || true); do
        ip link delete "$link" 2>/dev/null || true
    done
    if mountpoint -q /run/docker/netns/default 2>/dev/null; then umount /run/docker/netns/default; fi
    # its runtime folders (sockets, pid files; /run/containerd/s: its containerd's shims), when it made them
    # (and /run/runc, runc's default state folder), and nothing is mounted there any more
    for dir in docker containerd runc; do
        if [ ! -f "$STATE/run_${dir}_existed" ] && [ -d "/run/$dir" ] && ! grep -q " /run/$dir" /proc/mounts; then
            rm -rf "/run/${dir:?}"
        fi
    done
    sysctl -q -w "net.ipv4.ip_forward=$(cat "$STATE/ip_forward")"
    local chains
    chains="$( (iptables -S; iptables -t nat -S) 2>/dev/null | grep -c -- '^-N DOCKER' || true)"
    say "stopped dockerd (pid $pid); ip_forward $(sysctl -n net.ipv4.ip_forward) (was $(cat "$STATE/ip_forward")), FORWARD policy $(forward_policy) (was ${policy:-ACCEPT}), DOCKER chains left: $chains, docker0 $(ip link show docker0 >/dev/null 2>&1 && echo left || echo gone)"
}

status() {
    if answers; then
        local who="someone else (engine.sh stop leaves it)"
        [ -f "$STATE/dockerd.pid" ] && who="engine.sh start (pid $(cat "$STATE/dockerd.pid"))"
        echo "an engine answers: $("$DOCKER" version -f '{{.Server.Version}}'), started by $who"
    else
        echo "no Docker engine answers ($DOCKER info failed)"
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: docker/engine.sh start|stop|status" >&2; exit 2 ;;
esac
