#!/bin/sh
# Run a command in a new network namespace that has only loopback (127.0.0.1), with Ray's
# usage stats off. Ray probes cloud metadata addresses whenever it starts; in here those
# probes fail at once and nothing leaves the machine.
#
#   aklab/batch/netns_run.sh .venv/bin/python my_ray_batch.py
#
# How the namespace is made, first that works: as root (or with CAP_SYS_ADMIN), `unshare
# --net`; else in a user namespace mapping this user to root inside it (`unshare --user
# --map-root-user --net`, where the kernel allows unprivileged user namespaces); else through
# `sudo -n` (no password), dropping back to this user (setpriv) for the command. Needs `ip`
# (iproute2). Exit code 97: no namespace could be made (the caller may skip); otherwise the
# command's own exit code.
set -eu
if [ "$#" -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi
if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "netns_run: needs unshare (util-linux) and ip (iproute2)" >&2
    exit 97
fi
# What runs inside the namespace: loopback up, Ray told to stay quiet, then the command.
inside='ip link set lo up || exit 97
export RAY_USAGE_STATS_ENABLED=0
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
exec "$@"'
if unshare --net true 2>/dev/null; then
    exec unshare --net -- sh -c "$inside" netns_run "$@"
fi
if unshare --user --map-root-user --net true 2>/dev/null; then
    exec unshare --user --map-root-user --net -- sh -c "$inside" netns_run "$@"
fi
if command -v sudo >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 && sudo -n -E true 2>/dev/null; then
    AKLAB_NETNS_UID=$(id -u)
    AKLAB_NETNS_GID=$(id -g)
    export AKLAB_NETNS_UID AKLAB_NETNS_GID
    exec sudo -n -E env PATH="$PATH" unshare --net -- sh -c '
        ip link set lo up || exit 97
        export RAY_USAGE_STATS_ENABLED=0
        export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
        exec setpriv --reuid="$AKLAB_NETNS_UID" --regid="$AKLAB_NETNS_GID" --init-groups -- "$@"
    ' netns_run "$@"
fi
echo "netns_run: cannot make a network namespace here (needs root, unprivileged user namespaces, or sudo -n)" >&2
exit 97
