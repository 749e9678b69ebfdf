#!/bin/sh
# Installs what kubechain needs from Debian (etcd) and, with --test, what its
# tests need (the Python kubernetes client, curl, openssl). Safe to run repeatedly.
set -eu
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_install() {
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    echo "installing etcd (Debian etcd-server, etcd-client)..."
    apt_install etcd-server etcd-client
fi
# Debian starts an etcd service on :2379 when the package is installed; the
# cluster runs its own etcd, so stop the system one if it is running.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
    $sudo systemctl stop etcd || true
fi
if [ "${1:-}" = "--test" ]; then
    command -v curl >/dev/null 2>&1 || apt_install curl
    command -v openssl >/dev/null 2>&1 || apt_install openssl
    if ! python3 -c "import kubernetes" >/dev/null 2>&1; then
        echo "installing the Python kubernetes client..."
        python3 -m pip install --quiet kubernetes 2>/dev/null || python3 -m pip install --quiet --break-system-packages kubernetes
    fi
fi
