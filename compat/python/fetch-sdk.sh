#!/usr/bin/env bash
# Makes the official Python SDK, azure-cosmos 4.x with azure-core, importable
# without the Python package index: both ship as plain Python inside Debian's
# python3-azure package, which this script downloads with a private apt state
# (the system's sources and package database are read, not changed) and
# unpacks into a cache folder.
#
# It takes the newest python3-azure of Debian unstable, which tracks the
# SDK's releases (unstable keeps only its newest version, so no version is
# pinned); should that one not carry azure-cosmos 4.x, it takes Debian
# stable's, which stays for the release's life. A folder fetched before is
# used again without asking the network while it imports azure-cosmos 4.x.
#
# Prints that folder: put it on PYTHONPATH.
#   PYTHONPATH="$(compat/python/fetch-sdk.sh)" python3 compat/python/sdk4.py
# azure-core needs requests and typing-extensions: on Debian stable,
#   apt-get install python3-requests python3-typing-extensions
# (.ci/run installs them).
#
# Environment: ORRERY_PYTHON_SDK_CACHE (default: the user's cache folder,
# orrery-python-sdk); ORRERY_PYTHON_SDK_DEB, a python3-azure version to take
# instead; ORRERY_PYTHON_SDK_REFRESH=1 fetches again even when the cached
# folder works.
set -euo pipefail

cache=${ORRERY_PYTHON_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orrery-python-sdk}
src=$cache/src
pinned=${ORRERY_PYTHON_SDK_DEB:-}

# cosmos4 DIR: DIR imports azure-cosmos 4.x (and prints its version).
cosmos4() {
	PYTHONPATH=$1 python3 -c "import sys, azure.cosmos._version as v; print(v.VERSION); sys.exit(0 if v.VERSION.split('.')[0] == '4' else 1)" 2>/dev/null
}

if [ -f "$src/.version" ] && [ -z "${ORRERY_PYTHON_SDK_REFRESH:-}" ] &&
	{ [ -z "$pinned" ] || [ "$(cat "$src/.version")" = "$pinned" ]; } &&
	cosmos4 "$src" >/dev/null; then
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
printf 'deb %s sid main\ndeb %s stable main\n' "$mirror" "$mirror" >"$apt/etc/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::status=/var/lib/dpkg/status
	-o APT::Sandbox::User="$(id -un)" -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
	-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false -o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false)
apt-get "${opts[@]}" -q update >&2

# The versions to try, newest (unstable's) first.
if [ -n "$pinned" ]; then
	versions=$pinned
else
	versions=$(apt-cache "${opts[@]}" madison python3-azure | awk -F'|' '{gsub(/ /, "", $2); print $2}' | awk '!seen[$0]++')
fi
if [ -z "$versions" ]; then
	echo "fetch-sdk.sh: Debian's indexes list no python3-azure" >&2
	exit 1
fi

unpacked=$cache/unpacked
found=""
for version in $versions; do
	rm -f "$apt/debs"/python3-azure_*.deb
	if ! (cd "$apt/debs" && apt-get "${opts[@]}" -q download "python3-azure=$version" >&2); then
		echo "fetch-sdk.sh: python3-azure $version could not be downloaded" >&2
		continue
	fi
	rm -rf "$unpacked" "$src.new"
	mkdir -p "$unpacked" "$src.new/azure"
	dpkg-deb -x "$apt/debs"/python3-azure_*_all.deb "$unpacked"
	site=$unpacked/usr/lib/python3/dist-packages
	if [ -f "$site/azure/__init__.py" ]; then cp "$site/azure/__init__.py" "$src.new/azure/"; fi
	cp -a "$site/azure/core" "$site/azure/cosmos" "$src.new/azure/"
	cp -a "$site"/azure_core-*.dist-info "$site"/azure_cosmos-*.dist-info "$src.new/" 2>/dev/null || true
	if cosmos=$(cosmos4 "$src.new"); then
		echo "$version" >"$src.new/.version"
		rm -rf "$src"
		mv "$src.new" "$src"
		echo "fetch-sdk.sh: azure-cosmos $cosmos from python3-azure $version" >&2
		found=yes
		break
	fi
	echo "fetch-sdk.sh: python3-azure $version carries no importable azure-cosmos 4.x (${cosmos:-none}); trying the next" >&2
done
# Only src is kept: the package and the indexes are 45 MB together.
rm -rf "$unpacked" "$src.new" "$apt"
if [ -z "$found" ]; then
	echo "fetch-sdk.sh: no python3-azure in Debian unstable or stable carries azure-cosmos 4.x" >&2
	exit 1
fi
echo "$src"
