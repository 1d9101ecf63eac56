# shellcheck shell=bash
# Common helpers for kernel/{build,test,bench,ci,check-apply}.  Sourced, not run.
set -euo pipefail

# Pinned kernel source: Debian 12 (bookworm) security archive.
PAYGO_LINUX_PKG=linux-source-6.12
PAYGO_LINUX_VERSION=6.12.117-1~deb12u1
PAYGO_LINUX_TARBALL=/usr/src/linux-source-6.12.tar.xz

KERNEL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# One work folder per checkout, named after the checkout's path, so that
# two checkouts (or two CI runs in different clones) on one machine never
# share or overwrite each other's trees, builds and logs.
paygo_default_workdir() {
	local repo
	repo=$(cd "$KERNEL_DIR/.." && pwd -P)
	printf '/var/tmp/paygo-kernel/%s-%s\n' "$(basename "$repo")" \
		"$(printf '%s' "$repo" | sha256sum | cut -c1-12)"
}
KERNEL_WORKDIR=${KERNEL_WORKDIR:-$(paygo_default_workdir)}
mkdir -p "$KERNEL_WORKDIR"
JOBS=${JOBS:-$(nproc)}
# Builds are niced (the machine is shared) and cached with ccache, whose
# cache lives in the work folder; kunit.py gets the same compiler through
# KUNIT_MAKE_OPTS.
NICE=${NICE:-nice -n 19}
export CCACHE_DIR=${CCACHE_DIR:-$KERNEL_WORKDIR/ccache}
export CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime,time_macros
export CCACHE_NOHASHDIR=1
export DEBIAN_FRONTEND=noninteractive

log() { printf '[kernel %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# install_deps [extra packages...]
install_deps() {
	local pkgs=(bc bison flex libelf-dev libssl-dev gcc make perl python3
		    xz-utils git cpio kmod ccache "$@")
	local missing=() p have
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	have=$(dpkg-query -W -f='${Version}' "$PAYGO_LINUX_PKG" 2>/dev/null || true)
	if [ "$have" != "$PAYGO_LINUX_VERSION" ] || [ ! -f "$PAYGO_LINUX_TARBALL" ]; then
		missing+=("$PAYGO_LINUX_PKG=$PAYGO_LINUX_VERSION")
	fi
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	as_root apt-get update -qq
	if ! as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null; then
		# The security archive may have dropped the pinned version.
		log "WARNING: pinned $PAYGO_LINUX_PKG=$PAYGO_LINUX_VERSION not installable; trying the candidate version"
		missing=("${missing[@]/#$PAYGO_LINUX_PKG=*/$PAYGO_LINUX_PKG}")
		as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
	fi
	have=$(dpkg-query -W -f='${Version}' "$PAYGO_LINUX_PKG")
	[ "$have" = "$PAYGO_LINUX_VERSION" ] ||
		log "WARNING: using $PAYGO_LINUX_PKG $have, series was made against $PAYGO_LINUX_VERSION"
}

# unpack_tree DIR: fresh, unpatched source tree in DIR
unpack_tree() {
	local dir=$1 tmp
	rm -rf "$dir" "$dir.tmp"
	mkdir -p "$dir.tmp"
	log "unpacking $PAYGO_LINUX_TARBALL into $dir"
	tar -C "$dir.tmp" -xf "$PAYGO_LINUX_TARBALL"
	tmp=$(echo "$dir.tmp"/linux-source-*)
	mv "$tmp" "$dir"
	rmdir "$dir.tmp"
}

# apply_series DIR [N]: apply the first N patches (default all) of patches/
apply_series() {
	local dir=$1 n=${2:-999} i=0 p
	for p in "$KERNEL_DIR"/patches/*.patch; do
		[ -e "$p" ] || continue
		i=$((i + 1))
		[ $i -le "$n" ] || break
		log "applying $(basename "$p")"
		# git apply works on a plain directory, like patch -p1, but
		# refuses fuzz and reports the failing hunk.
		(cd "$dir" && git apply --whitespace=nowarn "$p")
	done
}

# kunit_py DIR SUBCOMMAND ARGS...: kunit.py of the tree in DIR, niced, with
# ccache as the compiler
kunit_py() {
	local dir=$1; shift
	(cd "$dir" && $NICE python3 tools/testing/kunit/kunit.py "$@" \
		--make_options "CC=ccache gcc")
}

# kmake ARGS...: make for a kernel build, niced, with ccache
kmake() {
	$NICE make CC="ccache gcc" "$@"
}

# prepare_tree DIR [N]: unpack and apply, reusing DIR if it already holds
# exactly this series (stamp = hash of the patches).
prepare_tree() {
	local dir=$1 n=${2:-999} stamp
	stamp=$( (echo "$PAYGO_LINUX_VERSION $n"; cat "$KERNEL_DIR"/patches/*.patch) | sha256sum | cut -c1-16)
	if [ -f "$dir/.paygo-stamp" ] && [ "$(cat "$dir/.paygo-stamp")" = "$stamp" ]; then
		log "reusing $dir"
		return 0
	fi
	unpack_tree "$dir"
	apply_series "$dir" "$n"
	echo "$stamp" > "$dir/.paygo-stamp"
}
