#!/usr/bin/env bash
# The course's one set-up path: the README's quickstart, CI (.ci/run) and both Docker images
# (docker/Dockerfile) all run this script, so they install exactly the same thing.
#
#   docker/setup.sh [VENV]                        # default VENV: .venv in the repository root
#   docker/setup.sh --requirements-only [VENV]    # the first half: the pinned packages only
#   docker/setup.sh --hub VENV                    # the class server's Python (docker/hub/requirements.txt)
#
# Creates a virtual environment with the Python found as `python3` (3.11), unless VENV already
# is one, then installs the pinned requirements and this repository (editable, so `util` and
# `grader` import from here). The images run the first half once, in a stage both are built on
# (it needs only requirements.txt), and the whole script in each image, where the packages are
# already there. Nothing is downloaded at run time afterwards: models are built from code with
# weights=None.
set -euo pipefail
cd "$(dirname "$0")/.."

ONLY_REQUIREMENTS=""
HUB=""
if [ "${1:-}" = "--requirements-only" ]; then ONLY_REQUIREMENTS=1; shift; fi
if [ "${1:-}" = "--hub" ]; then
    HUB=1; shift
    # never into the course's own environment: the hub's pins are not the course's
    if [ -z "${1:-}" ]; then echo "setup.sh: --hub needs a VENV of its own, e.g. build/hubvenv" >&2; exit 2; fi
fi
VENV="${1:-.venv}"
version="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$version" != "3.11" ]; then
    echo "setup.sh: python3 is Python $version; the course pins Python 3.11 (see README)" >&2
    exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if [ -n "$HUB" ]; then
    # JupyterHub and its pinned companions, apart from the course's packages (CI's tests/test_hub_lti.py runs a
    # real hub with it; docker/hub/Dockerfile installs the same file the same way): every package is pinned, so
    # --no-deps, then pip check that nothing is missing
    "$VENV/bin/python" -m pip install --progress-bar off --no-deps -r docker/hub/requirements.txt
    "$VENV/bin/python" -m pip check
    exit 0
fi
if [ -n "$ONLY_REQUIREMENTS" ]; then
    "$VENV/bin/python" -m pip install --progress-bar off -r requirements.txt
    exit 0
fi
"$VENV/bin/python" -m pip install --progress-bar off -r requirements.txt -e .
# the course panel in JupyterLab: its prebuilt extension and its server extension, into the environment
"$VENV/bin/python" -m grader.panel.install "$VENV"
"$VENV/bin/python" -c "import torch, torchvision, onnxruntime, util, grader; print('set up:', 'torch', torch.__version__, '| CUDA available:', torch.cuda.is_available())"
