#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image; `python -m grader
# gradescope` puts it at the root of the autograder zip as setup.sh.
#
# It installs what grading needs and a Python 3.11 virtual environment at $COURSE_VENV (default
# /autograder/venv) holding the course's pinned requirements; run_autograder grades with that
# environment's python. The image's own python3 is left alone (Gradescope's harness runs on it):
# Ubuntu 22.04, Gradescope's default base image, ships Python 3.10; 24.04 ships 3.12 and refuses
# system-wide pip installs (PEP 668); the course's pins are made for 3.11.
#
# Python 3.11 comes from the first of: a python3.11 (or a python3 that is 3.11) already on PATH;
# the distribution's python3.11 and python3.11-venv packages (Ubuntu 22.04's universe, Debian 12);
# the deadsnakes archive on Ubuntu (24.04 has no python3.11 package). Every failure stops the
# build with a line starting "setup.sh: FAILED" that says what failed and what to do, so Gradescope
# shows the build as failed instead of grading with the wrong Python.
set -euo pipefail
cd "$(dirname "$0")"

VENV="${COURSE_VENV:-/autograder/venv}"
OS_RELEASE="${COURSE_OS_RELEASE:-/etc/os-release}"
export DEBIAN_FRONTEND=noninteractive

fail() { echo "setup.sh: FAILED: $*" >&2; exit 1; }
step() { echo "setup.sh: $*"; }

python311() {  # the path of the first Python 3.11 on PATH that can make a virtual environment
    local candidate
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c \
            'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

step "system packages: bubblewrap (the sandbox), g++ cmake make (C++ labs)"
apt-get update -q || fail "apt-get update: the image build needs the network to install packages"
apt-get install -y -q --no-install-recommends bubblewrap g++ cmake make ca-certificates \
    || fail "apt-get install bubblewrap g++ cmake make: see the messages above"

PYTHON="$(python311)" || {
    step "no Python 3.11 on PATH: installing the distribution's python3.11 and python3.11-venv"
    apt-get install -y -q --no-install-recommends python3.11 python3.11-venv || true
    PYTHON="$(python311)"
} || {
    if grep -qi '^ID=ubuntu' "$OS_RELEASE" 2>/dev/null; then
        step "no python3.11 package in this Ubuntu: adding the deadsnakes archive (ppa:deadsnakes/ppa)"
        { apt-get install -y -q --no-install-recommends software-properties-common gpg-agent \
            && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update -q \
            && apt-get install -y -q --no-install-recommends python3.11 python3.11-venv; } || true
    fi
    PYTHON="$(python311)"
} || fail "no Python 3.11 could be found or installed (tried python3.11 and python3 on PATH, the \
distribution's python3.11 package and, on Ubuntu, ppa:deadsnakes/ppa). Choose Gradescope's Ubuntu 22.04 \
base image, or an image that has python3.11 with its venv module."

step "Python 3.11: $PYTHON; virtual environment: $VENV"
"$PYTHON" -m venv "$VENV" || fail "$PYTHON -m venv $VENV"
"$VENV/bin/python" -m pip install --no-cache-dir --progress-bar off -r requirements.txt \
    || fail "pip install -r requirements.txt into $VENV: see pip's messages above"
"$VENV/bin/python" -c "import torch, torchvision, onnxruntime, nbclient, grader, util" \
    || fail "the installed packages do not import with $VENV/bin/python"
step "ready: $("$VENV/bin/python" -m grader --version)"
