# shellcheck shell=bash
# Common helpers for kernel/{build,test,bench,ci,check-apply}.  Sourced, not run.
set -euo pipefail

# Pinned kernel source: Debian 12 (bookworm) security archive.
PAYGO_LINUX_PKG=linux-source-6.12
PAYGO_LINUX_VERSION=6.12.117-1~deb12u1
# (overridable only so that kernel/check-scripts can test the scripts' skip)
PAYGO_LINUX_TARBALL=${PAYGO_LINUX_TARBALL:-/usr/src/linux-source-6.12.tar.xz}

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
# Builds are niced (the machine is shared) and cached with ccache; kunit.py
# gets the same compiler through its make options. The cache is one for every
# checkout on the machine (ccache is made to be shared: a hit needs the same
# sources, headers and command line), and paths under the work folder are
# hashed relative to it (CCACHE_BASEDIR), so a fresh clone with the same
# series builds from the cache that another checkout filled.
NICE=${NICE:-nice -n 19}
export CCACHE_DIR=${CCACHE_DIR:-/var/tmp/paygo-kernel/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$KERNEL_WORKDIR}
export CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime,time_macros
export CCACHE_NOHASHDIR=1
export DEBIAN_FRONTEND=noninteractive

log() { printf '[kernel %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# skip REASON: this check cannot run here; say so the way the repository's
# other skipped tests do (a SKIPPED line, also appended to
# $SKIPPED_TESTS_LOG where that is set) and exit 0
skip() {
	local line
	line="SKIPPED: kernel/$(basename "$0"): $*"
	echo "$line"
	[ -z "${SKIPPED_TESTS_LOG:-}" ] || echo "$line" >> "$SKIPPED_TESTS_LOG"
	# the work folder made when this file was sourced, if still empty
	rmdir "$KERNEL_WORKDIR" 2>/dev/null || true
	exit 0
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# missing_pkgs PKG...: those of PKG that dpkg does not have installed
missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

# install_deps [extra packages...]: install what is missing; skip (above)
# if the kernel source tarball is not there afterwards, fail if a build
# dependency could not be installed
install_deps() {
	local pkgs=(bc bison flex libelf-dev libssl-dev gcc make perl python3
		    xz-utils git cpio kmod ccache "$@")
	local missing=() have
	mapfile -t missing < <(missing_pkgs "${pkgs[@]}")
	have=$(dpkg-query -W -f='${Version}' "$PAYGO_LINUX_PKG" 2>/dev/null || true)
	[ "$have" = "$PAYGO_LINUX_VERSION" ] ||
		missing+=("$PAYGO_LINUX_PKG=$PAYGO_LINUX_VERSION")
	# Never removes an installed package to make room (apt-get would, without
	# asking, with -y: Debian's qemu-system-x86 removes a backported
	# qemu-utils); PAYGO_APT_ALLOW_REMOVE=1 lets it.
	local apt=(apt-get install -y -qq --no-install-recommends)
	[ -n "${PAYGO_APT_ALLOW_REMOVE:-}" ] || apt+=(--no-remove)
	if [ ${#missing[@]} -gt 0 ]; then
		log "apt-get install ${missing[*]}"
		as_root apt-get update -qq || log "WARNING: apt-get update failed"
		if ! as_root "${apt[@]}" "${missing[@]}" </dev/null; then
			# The security archive may have dropped the pinned version.
			log "WARNING: apt-get install failed (the pinned $PAYGO_LINUX_PKG=$PAYGO_LINUX_VERSION may be gone); trying the candidate version"
			missing=("${missing[@]/#$PAYGO_LINUX_PKG=*/$PAYGO_LINUX_PKG}")
			as_root "${apt[@]}" "${missing[@]}" </dev/null ||
				log "WARNING: apt-get install failed"
		fi
	fi
	# The tarball is what the scripts use; dpkg may list the package
	# while the file is gone (then apt-get install --reinstall).
	[ -f "$PAYGO_LINUX_TARBALL" ] ||
		skip "the kernel source $PAYGO_LINUX_TARBALL is missing and $PAYGO_LINUX_PKG could not be installed (apt-get install $PAYGO_LINUX_PKG, or --reinstall if dpkg lists it)"
	mapfile -t missing < <(missing_pkgs "${pkgs[@]}")
	if [ ${#missing[@]} -gt 0 ]; then
		log "ERROR: could not install ${missing[*]} (apt-get's reason is above; where it would have to remove installed packages, install them yourself or set PAYGO_APT_ALLOW_REMOVE=1)"
		exit 1
	fi
	have=$(dpkg-query -W -f='${Version}' "$PAYGO_LINUX_PKG" 2>/dev/null || true)
	[ "$have" = "$PAYGO_LINUX_VERSION" ] ||
		log "WARNING: using $PAYGO_LINUX_PKG ${have:-(not installed)}, series was made against $PAYGO_LINUX_VERSION"
}

# unpack_tree DIR: fresh, unpatched source tree in DIR (what was there is
# removed), unpacked in a temporary folder of its own beside DIR; on
# failure nothing is left of DIR or of that temporary folder
unpack_tree() {
	local dir=$1 tmp src
	rm -rf "$dir"
	mkdir -p "$(dirname "$dir")"
	tmp=$(mktemp -d "$dir.tmp.XXXXXX")
	log "unpacking $PAYGO_LINUX_TARBALL into $dir"
	if ! tar -C "$tmp" -xf "$PAYGO_LINUX_TARBALL"; then
		rm -rf "$tmp"
		log "ERROR: cannot unpack $PAYGO_LINUX_TARBALL"
		exit 1
	fi
	src=$(echo "$tmp"/linux-source-*)
	if [ ! -d "$src" ]; then
		rm -rf "$tmp"
		log "ERROR: $PAYGO_LINUX_TARBALL has no linux-source-* folder"
		exit 1
	fi
	mv "$src" "$dir"
	rm -rf "$tmp"
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

# kernel_log_problems FILE: the lines of a kernel log that fail a check: a
# lockdep report, BUG, Oops or WARNING, but UML's own boot warning (virt-pci
# without a virtio device, at arch/um/), whose path is absolute or relative
# to the build folder (as ccache's CCACHE_BASEDIR makes it: ../linux/arch/um/).
# Succeeds if there is one.
kernel_log_problems() {
	grep -aE 'BUG:|WARNING:|Oops|possible (circular|recursive) locking|inconsistent lock state|INFO: lockdep' \
		"$1" | grep -avE 'WARNING: .* at ([^ ]*/)?arch/um/'
}

# ext4_clean IMG LOG: whether e2fsck finds the unmounted ext4 image IMG
# clean, checking everything (-f) and mending nothing (-n); its output goes
# to LOG. Not clean: e2fsck exits non-zero, or it asked to mend anything
# ("Fix? no", "Clear? no", ...), which it does with exit 0 for a summary
# count such as the superblock's free blocks.  Not asked: whether to make
# an extent tree shorter or narrower (-E no_optimize_extents), which is no
# damage: a file cut down to a few extents can keep its tree's depth
# (after a truncate or hole punch), and e2fsck offers that with exit 0.
ext4_clean() {
	local rc=0
	PATH=$PATH:/usr/sbin:/sbin e2fsck -fn -E no_optimize_extents "$1" > "$2" 2>&1 || rc=$?
	[ $rc -eq 0 ] && ! grep -aq '? no$' "$2"
}

# ext4_needs_recovery IMG: whether the ext4 image IMG has a journal to
# replay (the superblock's needs_recovery feature, which a read-write mount
# sets and an unmount clears: it was mounted and not unmounted).
ext4_needs_recovery() {
	# (grep reads to the end, not -q: dumpe2fs must not die of SIGPIPE,
	# which pipefail would take for the answer)
	PATH=$PATH:/usr/sbin:/sbin dumpe2fs -h "$1" 2>/dev/null |
		grep '^Filesystem features:.*needs_recovery' >/dev/null
}
