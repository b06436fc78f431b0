#!/usr/bin/env bash
# Builds the two container images of deploy/containers/ on this machine,
# without an image registry: a Debian bookworm base made with mmdebstrap
# from Debian's packages (one with Python, one with Python and Java 17),
# the wheels built on the host (the build itself fetches nothing), then
# `podman build`. `make test-image` runs it; docs/operating.md, "Container
# images", explains it and how to build from another base.
#
# Prints the image names as KEY=VALUE lines on stdout (progress on stderr):
#   EPOCHGC_IMAGE=localhost/epochgc:<version>
#   EPOCHGC_SPARK_IMAGE=localhost/epochgc-spark:<version>
#   CONTAINERS_CONF=<the podman settings used>
#
# Settings (environment):
#   IMAGE_CACHE   where the base root filesystems are kept between runs
#                 (default /var/tmp/epochgc-images); one older than
#                 BASE_MAX_AGE_DAYS (default 7) is made again, so that
#                 Debian's updates reach the images.
#   PYTHON        the host Python that builds the wheels (default
#                 .venv/bin/python); its version must be the base's (3.11).
#   WHEELS_DIR    where the wheels go (default dist/images).
# podman, mmdebstrap and runc are installed from Debian when missing (as
# root, or with sudo).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

IMAGE_CACHE=${IMAGE_CACHE:-/var/tmp/epochgc-images}
BASE_MAX_AGE_DAYS=${BASE_MAX_AGE_DAYS:-7}
PYTHON=${PYTHON:-.venv/bin/python}
WHEELS_DIR=${WHEELS_DIR:-dist/images}
SUITE=bookworm
say() { echo "build_images: $*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v runc >/dev/null || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

$sudo mkdir -p "$IMAGE_CACHE"
# runc with cgroupfs and no default ulimits: what works in an unprivileged
# VM or container as well as on an ordinary host (crun there fails to set
# RLIMIT_NOFILE and to use hybrid cgroups). An existing CONTAINERS_CONF wins.
if [ -z "${CONTAINERS_CONF:-}" ]; then
    CONTAINERS_CONF=$IMAGE_CACHE/containers.conf
    printf '%s\n' '[containers]' 'default_ulimits = []' '' '[engine]' \
        'runtime = "runc"' 'cgroup_manager = "cgroupfs"' | $sudo tee "$CONTAINERS_CONF" >/dev/null
fi
export CONTAINERS_CONF
podman() { $sudo env CONTAINERS_CONF="$CONTAINERS_CONF" podman "$@"; }

# One base image per package set; the tarball is kept and made again when
# older than BASE_MAX_AGE_DAYS or when the package set changes (its name).
base_image() {
    local name=$1 packages=$2
    local tar=$IMAGE_CACHE/$name-$SUITE.tar image=localhost/$name:$SUITE
    if [ ! -f "$tar" ] || [ -n "$(find "$tar" -mtime "+$BASE_MAX_AGE_DAYS")" ]; then
        say "making $tar ($packages) with mmdebstrap"
        $sudo mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" "$SUITE" "$tar.part" >&2
        $sudo mv "$tar.part" "$tar"
        podman rmi --force "$image" >/dev/null 2>&1 || true
    fi
    if ! podman image exists "$image"; then
        say "importing $tar as $image"
        podman import --quiet "$tar" "$image" >/dev/null
    fi
    echo "$image"
}
BASE=$(base_image epochgc-base python3,python3-venv)
JAVA_BASE=$(base_image epochgc-base-java python3,python3-venv,openjdk-17-jre-headless)

# The wheels: built by the host's pip, for the base's Python.
base_python=$(podman run --rm "$BASE" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
host_python=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$base_python" != "$host_python" ]; then
    say "the base has Python $base_python, $PYTHON is $host_python: wheels would not fit"
    exit 1
fi
VERSION=$("$PYTHON" -c 'import re, pathlib; print(re.search(r"__version__ = \"([^\"]+)\"", pathlib.Path("epochgc/__init__.py").read_text())[1])')
rm -rf "$WHEELS_DIR/base" "$WHEELS_DIR/spark"
say "building wheels into $WHEELS_DIR (base: epochgc[embedded], spark: epochgc[spark])"
"$PYTHON" -m pip wheel -qq --wheel-dir "$WHEELS_DIR/base" '.[embedded]' >&2
"$PYTHON" -m pip wheel -qq --wheel-dir "$WHEELS_DIR/spark" '.[spark]' >&2

# Builds one image; the one the tag named before, now untagged, is removed
# (unless a container still uses it).
build() {
    local image=$1 containerfile=$2 base=$3 context=$4 old
    old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    say "building $image from $base"
    podman build --quiet --layers=false --file "$containerfile" --build-arg BASE_IMAGE="$base" \
        --tag "$image" "$context" >/dev/null
    if [ -n "$old" ] && [ "$old" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
        podman rmi "$old" >/dev/null 2>&1 || true
    fi
}
IMAGE=localhost/epochgc:$VERSION
SPARK_IMAGE=localhost/epochgc-spark:$VERSION
build "$IMAGE" deploy/containers/Containerfile "$BASE" "$WHEELS_DIR/base"
build "$SPARK_IMAGE" deploy/containers/Containerfile.spark "$JAVA_BASE" "$WHEELS_DIR/spark"
# The wheels are in the images now (half a gigabyte, pyspark's).
rm -rf "$WHEELS_DIR/base" "$WHEELS_DIR/spark"

echo "EPOCHGC_IMAGE=$IMAGE"
echo "EPOCHGC_SPARK_IMAGE=$SPARK_IMAGE"
echo "CONTAINERS_CONF=$CONTAINERS_CONF"
