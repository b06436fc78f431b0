#!/usr/bin/env bash
# Print the path of a Python interpreter of version $1 (e.g. 3.13): the
# command python$1 if it runs, else one installed by pyenv. Exit 1, saying
# so, when there is none.
set -euo pipefail
version="$1"
if command -v "python$version" >/dev/null 2>&1 && "python$version" -c '' 2>/dev/null; then
    command -v "python$version"
    exit 0
fi
if command -v pyenv >/dev/null 2>&1; then
    for candidate in "$(pyenv root)"/versions/"$version"*/bin/python"$version"; do
        if [ -x "$candidate" ]; then
            echo "$candidate"
            exit 0
        fi
    done
fi
echo "python$version is required (install it, or with pyenv: pyenv install $version)" >&2
exit 1
