#!/usr/bin/env bash
# Print the path of a Python interpreter:
#   find_python.sh 3.13    the command python3.13 if it runs, else one
#                          installed by pyenv;
#   find_python.sh supported
#                          a Python epochgc supports and tests (3.11 to
#                          3.13): python3 when it is one, else python3.11,
#                          python3.12 or python3.13 (pyenv's too), the
#                          first found.
# Exit 1, saying so, when there is none.
set -euo pipefail

supported() {  # $1: an interpreter; true when it runs and is 3.11 to 3.13
    "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null
}

exact() {  # $1: a version such as 3.13
    if command -v "python$1" >/dev/null 2>&1 && "python$1" -c '' 2>/dev/null; then
        command -v "python$1"
        return 0
    fi
    if command -v pyenv >/dev/null 2>&1; then
        for candidate in "$(pyenv root)"/versions/"$1"*/bin/python"$1"; do
            if [ -x "$candidate" ]; then
                echo "$candidate"
                return 0
            fi
        done
    fi
    return 1
}

if [ "${1:-}" = "supported" ]; then
    if command -v python3 >/dev/null 2>&1 && supported python3; then
        command -v python3
        exit 0
    fi
    for version in 3.11 3.12 3.13; do
        if found=$(exact "$version") && supported "$found"; then
            echo "$found"
            exit 0
        fi
    done
    echo "Python 3.11, 3.12 or 3.13 is required (none found; or give one: make PYTHON=/path/to/python)" >&2
    exit 1
fi

version="$1"
if exact "$version"; then
    exit 0
fi
echo "python$version is required (install it, or with pyenv: pyenv install $version)" >&2
exit 1
