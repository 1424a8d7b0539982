#!/bin/sh
# Debian 13 (trixie), the current stable distribution, ships Ardour 8: its headless Ardour runs
# Stembridge's Ardour tests in a root of its own, built once with mmdebstrap and cached.
#
#   trixie.sh root           build the root if there is none, print its folder
#   trixie.sh run CMD ARG... run CMD inside the root, in a mount namespace of its own: /proc, /sys,
#                            /dev, a fresh /dev/shm, the host's /tmp, and this source tree and
#                            $SB_TRIXIE_BIND (a build folder) at the same paths as on the host,
#                            so that a test's paths mean the same inside; the environment is
#                            kept but for PATH. Every step execs the next: a signal to this
#                            process reaches CMD (the takes test kills Ardour with SIGKILL).
#
# The root holds Ardour 8 and the libraries the plugin and the command line link (the binaries
# are this build's: Debian 13 runs Debian 12's); it is cached in
# ${SB_TRIXIE_CACHE:-$HOME/.cache/stembridge}/trixie-<key> (not XDG_CACHE_HOME, which tests point
# at their build folder), where the key
# changes with the package list, and is built under a temporary name and renamed, so a failed
# build never leaves a half root. Building needs root (or sudo without a password) and the
# Debian archive; where either is missing, `root` and `run` exit 77 (meson's skip) saying why.
set -eu
PACKAGES="ardour libsndfile1 libfftw3-single3 ocl-icd-libopencl1 pocl-opencl-icd libjansson4
  libsamplerate0 libclblast1 zlib1g libyaml-0-2 libcurl4t64 libssl3t64 liblilv-0-0 sox procps"
MIRROR=${SB_TRIXIE_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${SB_TRIXIE_CACHE:-$HOME/.cache/stembridge}
key=$(printf '%s\n' "$PACKAGES" "$MIRROR" 1 | md5sum | cut -c1-12)
root=$cache/trixie-$key

skip() { echo "SKIP: $*"; exit 77; }

sudo=""
if [ "$(id -u)" != 0 ]; then
	sudo -n true 2>/dev/null || skip "the Debian 13 root needs root or sudo without a password"
	sudo="sudo -n -E"
fi

ensure_root() {
	[ -x "$root/usr/bin/ardour8-lua" ] && return 0
	command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed"
	mkdir -p "$cache"
	# one builder at a time; the others wait for its root
	exec 9> "$cache/trixie.lock"
	flock 9
	[ -x "$root/usr/bin/ardour8-lua" ] && return 0
	tmp="$root.tmp-$$"
	$sudo rm -rf "$tmp"
	echo "Building the Debian 13 root with Ardour 8 in $root (once; about a minute and 700 MB)" >&2
	if ! $sudo mmdebstrap --variant=apt --quiet --include="$(echo $PACKAGES | tr ' ' ,)" \
		trixie "$tmp" "$MIRROR" > "$cache/trixie-build.log" 2>&1; then
		$sudo rm -rf "$tmp"
		tail -3 "$cache/trixie-build.log" >&2
		skip "could not build the Debian 13 root (no network to $MIRROR?); see $cache/trixie-build.log"
	fi
	$sudo mv "$tmp" "$root"
}

case "${1:-}" in
root)
	ensure_root
	echo "$root"
	;;
run)
	shift
	[ $# -ge 1 ] || { echo "usage: trixie.sh run CMD [ARG...]" >&2; exit 2; }
	ensure_root
	bind=${SB_TRIXIE_BIND:-}
	# shellcheck disable=SC2016
	exec $sudo env SB_ROOT="$root" SB_SRC="$src" SB_BIND="$bind" unshare --mount --propagation private \
		sh -c '
		set -e
		m() { mkdir -p "$SB_ROOT$1" && mount --bind "$1" "$SB_ROOT$1"; }
		mount -t proc proc "$SB_ROOT/proc"
		mount --rbind /dev "$SB_ROOT/dev"
		mount --rbind /sys "$SB_ROOT/sys"
		mount -t tmpfs tmpfs "$SB_ROOT/dev/shm"
		m /tmp
		m "$SB_SRC"
		[ -z "$SB_BIND" ] || m "$SB_BIND"
		exec chroot "$SB_ROOT" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec /usr/bin/env PATH=/usr/local/bin:/usr/bin:/bin \"\$@\"" "$PWD" "$@"' sh "$@"
	;;
*)
	echo "usage: trixie.sh root | run CMD [ARG...]" >&2
	exit 2
	;;
esac
