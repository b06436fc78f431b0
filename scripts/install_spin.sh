#!/usr/bin/env bash
# SPIN, the model checker tests/model/ runs the protocol models with
# (model/*.pml), from Debian's `spin` package. Installs it only when
# missing; needs root or sudo then. The models compile with the system C
# compiler, which the Python build already needs.
set -euo pipefail
command -v spin >/dev/null && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian package: spin" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends spin >/dev/null
