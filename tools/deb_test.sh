#!/usr/bin/env bash
# The Debian package as a user gets it (README "Debian package"), for tools/dev.sh test: built
# from a clean copy of the tree with dpkg-buildpackage (nocheck: dev.sh has run the tests),
# checked by lintian (no error, no warning), built again with its unit tests in a fresh Debian
# chroot that has debian/control's Build-Depends and nothing else, installed with apt-get, used
# (lv2ls and lv2info find both plugins and the presets, the commands and man pages work, the
# Ardour script is where Ardour 7 looks), purged, and checked gone. Each step is one result in
# OUT/testlog.json, meson's format, so tools/count_tests.py counts it with the rest; the .deb
# and each step's output (NAME.log; the build log is deb_build.log) stay in OUT.
#
# Run it after the other tests: while the package is installed, /usr/lib/lv2/stembridge.lv2 is
# on the plugin tests' LV2_PATH and /usr/share/stembridge/catalog.json among the engine's data
# folders. It never replaces a stembridge someone installed: the install steps skip, saying why.
#
#   usage: tools/deb_test.sh OUT [SRC]   (SRC: the tree to package, default this checkout)
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: tools/deb_test.sh OUT [SRC]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
src=$(cd "${2:-$(dirname "$0")/..}" && pwd) || exit 2
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out"/*.log "$out"/lintian.txt
log=$out/testlog.json
: > "$log"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
work=$(mktemp -d "${TMPDIR:-/tmp}/stembridge-deb.XXXXXX")
chmod 755 "$work" # apt's _apt user reads the .deb from here
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
deb=$work/stembridge_${version}_$(dpkg --print-architecture).deb
installed_here=0
rc=0

cleanup() {
	if [ $installed_here = 1 ]; then
		echo "deb_test: purging the package left installed"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -q stembridge >/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# record NAME OK|FAIL|SKIP SECONDS FILE: one line of meson's testlog.json
record() {
	python3 - "$@" >> "$log" <<'EOF'
import json, sys
name, result, secs, path = sys.argv[1:5]
text = open(path, encoding="utf-8", errors="replace").read()
print(json.dumps({"name": name, "result": result, "duration": float(secs),
                  "stdout": text[-30000:]}))
EOF
}

# step NAME FUNCTION: runs it, shows what it printed, records the result
step() {
	local name=$1 t0=$SECONDS res
	echo "== $name"
	if "$2" > "$out/$name.log" 2>&1; then res=OK; else res=FAIL; rc=1; fi
	cat "$out/$name.log"
	echo "== $name: $res ($((SECONDS - t0)) s)"
	record "$name" $res $((SECONDS - t0)) "$out/$name.log"
	[ $res = OK ]
}

skip() { # NAME REASON
	echo "$2: skipped" > "$out/$1.log"
	echo "== $1: SKIP ($2)"
	record "$1" SKIP 0 "$out/$1.log"
}

# Tracked and untracked files that git does not ignore, as they are in the work tree: no build
# folder, no package built in the tree before.
build() {
	local tree=$work/stembridge-$version
	if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$src" && git ls-files -z -co --exclude-standard |
			tar --null -T - --ignore-failed-read -cf "$work/src.tar") || return 1
	else
		tar -C "$src" --exclude='./build*' --exclude='./obj-*' --exclude='./debian/stembridge' \
			--exclude='./debian/.debhelper' -cf "$work/src.tar" . || return 1
	fi
	mkdir -p "$tree" && tar -xf "$work/src.tar" -C "$tree" || return 1
	(cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b) || return 1
	cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out/"
}

lint() {
	local st
	lintian --fail-on error,warning --display-info "$work"/stembridge_*.changes \
		> "$out/lintian.txt" 2>&1
	st=$?
	grep -v '^running with root privileges' "$out/lintian.txt" || echo "lintian: no tags"
	return $st
}

# The same tree built in a fresh Debian system (mmdebstrap: a minimal buildd chroot that gets
# debian/control's Build-Depends through apt-get build-dep and nothing else), with the build's
# own tests, by an ordinary user: a dependency that meson needs and debian/control lacks fails
# here rather than on a user's machine (this machine has every package dev.sh installs).
clean_build() {
	local suite
	suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
	$sudo mmdebstrap --variant=buildd --quiet \
		--customize-hook='mkdir -p "$1/build/src"' \
		--customize-hook="tar-in $work/src.tar /build/src" \
		--customize-hook='chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q \
			-o Dpkg::Use-Pty=0 /build/src' \
		--customize-hook='chroot "$1" useradd -m builder && chroot "$1" chown -R builder /build' \
		--customize-hook='chroot "$1" runuser -u builder -- sh -c "cd /build/src &&
			DEB_BUILD_OPTIONS=parallel=2 dpkg-buildpackage -us -uc -b"' \
		"$suite" /dev/null
}

# What the package holds that was not on the machine before: all of it must go with a purge.
new_paths() {
	dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||' | grep -v '^/\?$' |
		while read -r p; do [ -e "$p" ] || [ -L "$p" ] || echo "$p"; done
}

install_deb() {
	new_paths > "$work/new-paths.txt"
	installed_here=1
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 "$deb" ||
		return 1
	dpkg -L stembridge | tee "$work/dpkg-L.txt"
}

# As a user: a fresh HOME, no LV2_PATH, so the default search path has to find the bundles.
as_user() {
	env -u LV2_PATH -u XDG_DATA_HOME -u XDG_DATA_DIRS -u XDG_CACHE_HOME -u STEMBRIDGE_CATALOG \
		HOME="$work/home" "$@"
}

use_plugin() {
	mkdir -p "$work/home"
	local ok=0 uri=https://stembridge.org/lv2/stembridge
	as_user lv2ls | grep -i stembridge | tee "$work/lv2ls.txt"
	for p in mono stereo; do
		grep -qx "$uri#$p" "$work/lv2ls.txt" || { echo "FAIL: lv2ls does not list $uri#$p"; ok=1; }
	done
	as_user lv2info "$uri#stereo" > "$work/lv2info.txt" || { echo "FAIL: lv2info exited $?"; ok=1; }
	sed -n '/Port 0:/q;p' "$work/lv2info.txt" # the plugin, its UI and presets; not every port
	grep -q 'file:///usr/lib/lv2/stembridge.lv2/stembridge.so' "$work/lv2info.txt" ||
		{ echo "FAIL: lv2info shows no binary in /usr/lib/lv2/stembridge.lv2"; ok=1; }
	grep -q 'stembridge_ui.so' "$work/lv2info.txt" || { echo "FAIL: lv2info shows no UI"; ok=1; }
	grep -q 'CPU only' "$work/lv2info.txt" || { echo "FAIL: lv2info shows no presets"; ok=1; }
	return $ok
}

use_commands() {
	mkdir -p "$work/home"
	local ok=0
	[ "$(command -v stembridge)" = /usr/bin/stembridge ] ||
		{ echo "FAIL: stembridge is not /usr/bin's"; ok=1; }
	as_user stembridge --version || ok=1
	as_user stembridge devices || { echo "FAIL: stembridge devices exited $?"; ok=1; }
	as_user stembridge models > "$work/models.txt" ||
		{ echo "FAIL: stembridge models exited $?"; ok=1; }
	cat "$work/models.txt"
	grep -q '^Catalogue: /usr/share/stembridge/\+catalog.json' "$work/models.txt" ||
		{ echo "FAIL: the installed catalogue is not the one read"; ok=1; }
	as_user stembridge-convert --help > /dev/null || { echo "FAIL: stembridge-convert --help"; ok=1; }
	# two seconds of two tones, separated by the built-in model on the CPU: four stems
	python3 - "$work/chord.wav" <<'EOF'
import math, struct, sys, wave
w = wave.open(sys.argv[1], "wb")
w.setnchannels(2), w.setsampwidth(2), w.setframerate(44100)
w.writeframes(b"".join(struct.pack("<hh", int(8000 * math.sin(i * 0.0157)),
                                   int(8000 * math.sin(i * 0.0627))) for i in range(88200)))
EOF
	as_user stembridge separate "$work/chord.wav" -o "$work/stems" --model builtin --device cpu ||
		{ echo "FAIL: stembridge separate exited $?"; ok=1; }
	for s in vocals drums bass other; do
		[ -s "$work/stems/chord/$s.wav" ] || { echo "FAIL: no $s stem"; ok=1; }
	done
	for m in stembridge stembridge-convert; do
		[ -s "/usr/share/man/man1/$m.1.gz" ] || { echo "FAIL: no man page for $m"; ok=1; }
	done
	return $ok
}

# Ardour looks for scripts in its data folders' scripts/ (ARDOUR_DATA_PATH: /usr/share/ardour7 on
# Debian 12, /usr/share/ardour8 on Debian 13, then ~/.config/ardourN): the split action and the
# importer have to be readable there, assembled (no "@include" line left, the installed
# command's folder filled in).
ardour_script() {
	local f ok=0
	for f in /usr/share/ardour{7,8}/scripts/stembridge_{split,import}.lua; do
		ls -lL "$f" && grep -q '"EditorAction"' "$f" || { echo "FAIL: $f"; ok=1; }
		if grep -q -e '^-- @include ' -e '@BINDIR@' "$f"; then echo "FAIL: $f is not assembled"; ok=1; fi
	done
	grep -q '"/usr/bin/stembridge"' /usr/share/ardour7/scripts/stembridge_split.lua ||
		{ echo "FAIL: the split action does not know /usr/bin/stembridge"; ok=1; }
	return $ok
}

purge() {
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -q -o Dpkg::Use-Pty=0 \
		stembridge || return 1
	installed_here=0
	local ok=0
	if dpkg-query -W -f='${Status}\n' stembridge 2>/dev/null | grep -q 'ok installed'; then
		echo "FAIL: still installed"
		ok=1
	fi
	while read -r p; do
		if [ -e "$p" ] || [ -L "$p" ]; then
			echo "FAIL: left behind: $p"
			ok=1
		fi
	done < "$work/new-paths.txt"
	[ $ok = 1 ] ||
		echo "nothing left behind: the $(wc -l < "$work/new-paths.txt") paths the package added are gone"
	return $ok
}

t0=$SECONDS
if step deb_build build; then
	step deb_lintian lint
	if ! command -v mmdebstrap >/dev/null; then
		skip deb_clean_build "mmdebstrap is not installed"
	elif [ -n "$sudo" ] && ! sudo -n true 2>/dev/null; then
		skip deb_clean_build "a fresh chroot needs root or sudo without a password"
	else
		step deb_clean_build clean_build
	fi
	if dpkg-query -W -f='${Status}\n' stembridge 2>/dev/null | grep -q 'ok installed'; then
		why="a stembridge package is installed already; not replacing it"
	elif [ -e /usr/lib/lv2/stembridge.lv2 ]; then
		why="/usr/lib/lv2/stembridge.lv2 exists (installed by hand?); not overwriting it"
	elif [ -n "$sudo" ] && ! sudo -n true 2>/dev/null; then
		why="installing needs root or sudo without a password"
	else
		why=""
	fi
	if [ -z "$why" ] && step deb_install install_deb; then
		step deb_plugin use_plugin
		step deb_commands use_commands
		step deb_ardour_script ardour_script
		step deb_purge purge
	else
		for t in deb_install deb_plugin deb_commands deb_ardour_script deb_purge; do
			[ -n "$why" ] || [ $t != deb_install ] || continue
			skip $t "${why:-the package did not install}"
		done
	fi
else
	for t in deb_lintian deb_clean_build deb_install deb_plugin deb_commands deb_ardour_script \
		deb_purge; do
		skip $t "the package did not build"
	done
fi
echo "deb_test: $((SECONDS - t0)) s"
exit $rc
