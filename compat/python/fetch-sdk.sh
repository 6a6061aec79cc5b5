#!/usr/bin/env bash
# Makes the official Python SDK, azure-cosmos 4.x with azure-core, importable
# without the Python package index: both ship as plain Python inside Debian
# unstable's python3-azure package, which this script downloads with a
# private apt state (the system's sources and package database are read, not
# changed) and unpacks into a cache folder.
#
# Prints that folder: put it on PYTHONPATH.
#   PYTHONPATH="$(compat/python/fetch-sdk.sh)" python3 compat/python/sdk4.py
# azure-core needs requests and typing-extensions: on Debian stable,
#   apt-get install python3-requests python3-typing-extensions
# (.ci/run installs them).
#
# Environment: ORRERY_PYTHON_SDK_CACHE (default: the user's cache folder,
# orrery-python-sdk); ORRERY_PYTHON_SDK_DEB, the python3-azure version.
set -euo pipefail

cache=${ORRERY_PYTHON_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orrery-python-sdk}
version=${ORRERY_PYTHON_SDK_DEB:-20260602+git-1}
src=$cache/src

if [ -f "$src/.version" ] && [ "$(cat "$src/.version")" = "$version" ] &&
	PYTHONPATH=$src python3 -c "import azure.cosmos" 2>/dev/null; then
	echo "$src"
	exit 0
fi

# The Debian mirror the system uses, from its deb822 or one-line sources.
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources | head -1)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
	mirror=$(sed -n 's/^deb  *\(\[[^]]*\]  *\)\{0,1\}\([^ ]*\/debian\)\/*  *.*/\2/p' /etc/apt/sources.list | head -1)
fi
if [ -z "$mirror" ]; then
	echo "fetch-sdk.sh: no Debian mirror found in the system's apt sources" >&2
	exit 1
fi

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc" "$apt/debs"
printf 'deb %s sid main\n' "$mirror" >"$apt/etc/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::status=/var/lib/dpkg/status
	-o APT::Sandbox::User="$(id -un)")
apt-get "${opts[@]}" -q update >&2
rm -f "$apt/debs"/python3-azure_*.deb
(cd "$apt/debs" && apt-get "${opts[@]}" -q download "python3-azure=$version" >&2)

unpacked=$cache/unpacked
rm -rf "$unpacked"
mkdir -p "$unpacked"
dpkg-deb -x "$apt/debs"/python3-azure_*_all.deb "$unpacked"
site=$unpacked/usr/lib/python3/dist-packages
rm -rf "$src"
mkdir -p "$src/azure"
cp "$site/azure/__init__.py" "$src/azure/"
cp -a "$site/azure/core" "$site/azure/cosmos" "$src/azure/"
cp -a "$site"/azure_core-*.dist-info "$site"/azure_cosmos-*.dist-info "$src/"
# Only src is kept: the package and the unstable index are 45 MB together.
rm -rf "$unpacked" "$apt"
echo "$version" >"$src/.version"
PYTHONPATH=$src python3 -c "import azure.cosmos._version as v; print('azure-cosmos', v.VERSION)" >&2
echo "$src"
