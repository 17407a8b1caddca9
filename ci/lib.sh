# Shared helpers for the ci/ scripts. Source it; don't run it.

# Where heavy artifacts are cached (kernel packages, built images, the kube-apiserver build,
# cargo's target directory), keyed by their recipe so reruns are fast.
RACKPROOF_CACHE="${RACKPROOF_CACHE:-$HOME/.cache/rackproof}"
export RACKPROOF_CACHE

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# apt_install PKG...: installs the Debian packages that are missing, refreshing the package lists
# once per run, and does nothing (no network) when everything is there already.
apt_install() {
    local missing=()
    local pkg
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    log "installing Debian packages: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    if [ -z "${RACKPROOF_APT_UPDATED:-}" ]; then
        "${sudo[@]}" apt-get update -qq
        RACKPROOF_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
