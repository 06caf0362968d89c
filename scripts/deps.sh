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
TOCK_PACKAGES=(g++ cmake make libboost1.81-dev libboost-test1.81-dev)
