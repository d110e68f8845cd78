#!/bin/sh
# Run a command in a new network namespace that has only loopback (127.0.0.1), with Ray's
# usage stats off. Ray probes cloud metadata addresses whenever it starts; in here those
# probes fail at once and nothing leaves the machine.
#
#   aklab/batch/netns_run.sh .venv/bin/python my_ray_batch.py
#
# Needs root (or CAP_SYS_ADMIN) for `unshare --net`, and `ip` (iproute2). Exit code 97: no
# namespace could be made (the caller may skip); otherwise the command's own exit code.
set -eu
if [ "$#" -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi
if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "netns_run: needs unshare (util-linux) and ip (iproute2)" >&2
    exit 97
fi
if ! unshare --net true 2>/dev/null; then
    echo "netns_run: cannot make a network namespace here (needs root or CAP_SYS_ADMIN)" >&2
    exit 97
fi
exec unshare --net -- sh -c '
    ip link set lo up || exit 97
    export RAY_USAGE_STATS_ENABLED=0
    export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
    exec "$@"
' netns_run "$@"
