#!/usr/bin/env bash
# The Debian packages the tests run real servers from (Prometheus, promtool,
# Pushgateway). Installs them only when missing; needs root or sudo then.
set -euo pipefail
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-pushgateway >/dev/null || missing+=(prometheus-pushgateway)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
