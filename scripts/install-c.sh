#!/usr/bin/env bash
# Installs one of the workspace's C libraries, as cargo-c's `cargo cinstall` would:
#
#   scripts/install-c.sh [--prefix DIR] [--libdir DIR] [--from DIR] paygo|pagecache
#
# into $DESTDIR$PREFIX (PREFIX from --prefix, an absolute path; /usr/local by default), the
# libraries and the pkg-config file into $DESTDIR$LIBDIR (LIBDIR from --libdir, an absolute
# path; PREFIX/lib by default, shown as lib/ here; /usr/lib/x86_64-linux-gnu or /usr/lib64 where
# a distribution keeps its libraries there):
#
#   lib/libLIB.so.VERSION            the shared library (its SONAME is set by the crate's build.rs)
#   lib/libLIB.so.0.MINOR -> ...     the SONAME link (libLIB.so.MAJOR for a version >= 1)
#   lib/libLIB.so -> ...             the link a program is linked through (-lLIB)
#   lib/libLIB.a                     the static library
#   include/LIB.h                    the header (and, for pagecache, paygo.h: libpagecache
#                                    exports paygo.h's functions too)
#   lib/pkgconfig/LIB.pc             for `pkg-config --cflags --libs LIB` (`--static` adds the
#                                    system libraries the static library needs); its libdir is
#                                    ${exec_prefix}/lib, or LIBDIR where --libdir names one
#
# DESTDIR only stages the install: the paths written into LIB.pc are PREFIX's and LIBDIR's.
# Installed without DESTDIR into a folder the dynamic linker searches (/usr/lib, or one that
# /etc/ld.so.conf lists, as Debian's /usr/local/lib), the script ends with a reminder to run
# `ldconfig` as root, which rebuilds the dynamic linker's cache of SONAMEs; it does not run it.
#
# The libraries are built with `cargo build --release -p PACKAGE --lib` (into $CARGO_TARGET_DIR,
# else the workspace's target/), or taken from the folder --from names, where they are already
# built. The installed libraries are stripped of their debug information (the release profile
# builds them with `debug = 1`): `strip --strip-unneeded` for the shared library,
# `strip --strip-debug` for the static one, with $STRIP if set, else `strip`; where there is no
# such command they are installed as built, and the script says so. Bad arguments, or a prefix
# or libdir that cannot be written, exit 2 with a message.
set -euo pipefail

usage() {
	echo "usage: $0 [--prefix DIR] [--libdir DIR] [--from DIR] paygo|pagecache" >&2
	echo "  --prefix DIR  where to install (absolute; /usr/local by default); \$DESTDIR stages it" >&2
	echo "  --libdir DIR  the libraries and pkgconfig/ (absolute; PREFIX/lib by default)" >&2
	echo "  --from DIR    take libLIB.so and libLIB.a built in DIR instead of building them" >&2
}
die() {
	echo "install-c.sh: $*" >&2
	exit 2
}

prefix=/usr/local
libdir=
from=
lib=
extra_headers=()
while [ $# -gt 0 ]; do
	case $1 in
	--prefix | --libdir | --from)
		[ $# -ge 2 ] && [ -n "$2" ] || { usage; die "$1 needs a value"; }
		case $1 in
		--prefix) prefix=$2 ;;
		--libdir) libdir=$2 ;;
		*) from=$2 ;;
		esac
		shift 2
		;;
	--prefix=* | --libdir=* | --from=*)
		value=${1#*=}
		[ -n "$value" ] || { usage; die "${1%%=*} needs a value"; }
		case ${1%%=*} in
		--prefix) prefix=$value ;;
		--libdir) libdir=$value ;;
		*) from=$value ;;
		esac
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*)
		usage
		die "unknown option $1"
		;;
	*)
		[ -z "$lib" ] || { usage; die "one library at a time (got $lib and $1)"; }
		lib=$1
		shift
		;;
	esac
done

cargo=${CARGO:-cargo}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case $lib in
paygo)
	package=paygo-c
	crate_dir=$root/crates/paygo-c
	description="PAYGO's C API: scalable reference counting"
	;;
pagecache)
	package=paygo-pagecache-c
	crate_dir=$root/crates/pagecache-c
	# libpagecache exports paygo.h's functions as well (a program that needs both links
	# libpagecache alone, as pagecache.h says): its header comes with it.
	extra_headers=("$root/crates/paygo-c/include/paygo.h")
	description="A page cache whose frames are reference counted by PAYGO or its peers"
	;;
"")
	usage
	die "which library: paygo or pagecache"
	;;
*)
	usage
	die "unknown library $lib (paygo or pagecache)"
	;;
esac
case $prefix in
/*) ;;
*) die "the prefix must be an absolute path: $prefix" ;;
esac
# The .pc file's libdir: relative to its exec_prefix where it is the default.
if [ -z "$libdir" ]; then
	libdir=$prefix/lib
	pc_libdir='${exec_prefix}/lib'
else
	case $libdir in
	/*) ;;
	*) die "the libdir must be an absolute path: $libdir" ;;
	esac
	pc_libdir=$libdir
fi

# The package's version: `cargo pkgid` ends with `#VERSION` or `#NAME@VERSION`.
pkgid=$("$cargo" pkgid --manifest-path "$root/Cargo.toml" -p "$package") ||
	die "cannot read the version of $package"
version=${pkgid##*#}
version=${version##*@}
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then soname=lib$lib.so.0.$minor; else soname=lib$lib.so.$major; fi

if [ -z "$from" ]; then
	"$cargo" build --release --manifest-path "$root/Cargo.toml" -p "$package" --lib
	from=${CARGO_TARGET_DIR:-$root/target}/release
fi
for f in "lib$lib.so" "lib$lib.a"; do
	[ -f "$from/$f" ] || die "no $f in $from"
done

dest=${DESTDIR:-}$prefix
dest_lib=${DESTDIR:-}$libdir
mkdir -p "$dest/include" 2>/dev/null && [ -w "$dest/include" ] ||
	die "cannot write to the prefix $dest"
mkdir -p "$dest_lib/pkgconfig" 2>/dev/null && [ -w "$dest_lib" ] ||
	die "cannot write to the libdir $dest_lib"
install -m 0755 "$from/lib$lib.so" "$dest_lib/lib$lib.so.$version" ||
	die "cannot install into $dest_lib"
ln -sfn "lib$lib.so.$version" "$dest_lib/$soname"
ln -sfn "$soname" "$dest_lib/lib$lib.so"
install -m 0644 "$from/lib$lib.a" "$dest_lib/lib$lib.a"
install -m 0644 "$crate_dir/include/$lib.h" "$dest/include/$lib.h"
for h in ${extra_headers[@]+"${extra_headers[@]}"}; do
	install -m 0644 "$h" "$dest/include/${h##*/}"
done
# The release profile keeps line tables (`debug = 1`, for profiles of the benchmarks); the
# installed libraries go without them.
strip=${STRIP:-strip}
if command -v "$strip" >/dev/null 2>&1; then
	"$strip" --strip-unneeded "$dest_lib/lib$lib.so.$version" ||
		die "cannot strip $dest_lib/lib$lib.so.$version"
	"$strip" --strip-debug "$dest_lib/lib$lib.a" || die "cannot strip $dest_lib/lib$lib.a"
else
	echo "install-c.sh: no $strip: the libraries are installed with their debug information" >&2
fi
# Libs.private: the system libraries of the static library's link line, as the README lists
# them (`cargo rustc -p PACKAGE --lib -- --print native-static-libs` prints them and libc).
cat >"$dest_lib/pkgconfig/$lib.pc" <<PC
prefix=$prefix
exec_prefix=\${prefix}
libdir=$pc_libdir
includedir=\${prefix}/include

Name: $lib
Description: $description
Version: $version
Libs: -L\${libdir} -l$lib
Libs.private: -lpthread -ldl -lm -lrt -lgcc_s
Cflags: -I\${includedir}
PC
if [ "$dest_lib" = "$dest/lib" ]; then
	echo "installed lib$lib $version into $dest (SONAME $soname)"
else
	echo "installed lib$lib $version into $dest, the libraries into $dest_lib (SONAME $soname)"
fi
# A real install (no DESTDIR) into a folder the dynamic linker searches (a trusted one, or one
# that ld.so.conf lists): it finds the new SONAME there through its cache, once that is rebuilt.
if [ -z "${DESTDIR:-}" ]; then
	searched=${libdir%/}
	case $searched in
	/lib | /lib64 | /lib32 | /usr/lib | /usr/lib64 | /usr/lib32) ;;
	*) grep -qsxF "$searched" /etc/ld.so.conf /etc/ld.so.conf.d/*.conf || searched= ;;
	esac
	[ -z "$searched" ] ||
		echo "install-c.sh: run \`ldconfig\` as root so that the dynamic linker finds $soname in $libdir"
fi
