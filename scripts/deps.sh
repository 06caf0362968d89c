# shellcheck shell=bash
# Sourced by the other scripts: ensure_packages PKG... installs the Debian packages that are missing.
ensure_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    echo "installing: ${missing[*]}"
    local sudo=()
    [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && sudo=(sudo)
    "${sudo[@]}" apt-get update </dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
}

# shellcheck disable=SC2034 # used by the scripts that source this file
TOCK_PACKAGES=(g++ cmake make libboost1.81-dev libboost-test1.81-dev pkgconf) # pkgconf: the consumer_pkgconfig test

# wait_for_port PID FILE: prints the port of the example server PID once FILE (its stdout) has its first line
# `listening on 127.0.0.1:PORT`; up to 10 s. Prints nothing if the server died or never said it.
wait_for_port() {
    local pid=$1 file=$2 port=
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$file")
        [[ -n $port ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "$port"
}
