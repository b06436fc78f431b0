#!/usr/bin/env bash
# The peer deletion tools bench_sweep measures epochgc against, from Debian:
# s3cmd, awscli (aws s3 rm) and rclone. Installs only the missing ones; needs
# root or sudo then. Exits non-zero (and says why on stderr) when a tool is
# still missing afterwards, so the benchmark reports "skipped: <why>" and
# fails instead of passing without that peer.
set -euo pipefail
declare -A package=([s3cmd]=s3cmd [aws]=awscli [rclone]=rclone)
missing=()
for tool in "$@"; do
  [ -n "${package[$tool]:-}" ] || { echo "unknown tool: $tool" >&2; exit 2; }
  command -v "$tool" >/dev/null || missing+=("${package[$tool]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "not root and no sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo -n"
fi
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for tool in "$@"; do
  command -v "$tool" >/dev/null || { echo "$tool still missing after apt-get install" >&2; exit 1; }
done
