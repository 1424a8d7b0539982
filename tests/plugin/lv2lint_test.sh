#!/bin/sh
# lv2lint 0.17.71 (the checker x42's and Open Music Kontrollers' plugins are held to) on the
# built bundle, two builds of it from the tarball in ../shared/tools:
#  - stock: runs instantiate(), activate(), run(), deactivate(), cleanup() each in a clone()d
#    child and waits for that child to exit, which never happens while a thread the plugin
#    started is alive; a plugin that starts threads before it needs them hangs it (time limit);
#  - in-process: the ENABLE_WRAP_TESTS block of lv2lint_wrap() disabled, as ../shared/HOSTS.md
#    describes, so the same calls run in lv2lint's own process.
# Both must finish, with no FAIL and no WARN, on both plugins and the UI.
# Usage: lv2lint_test.sh TARBALL WORKDIR BUNDLE_DIR
# Exit 77 (skip) when the tarball or a build dependency is missing, with the reason.
set -u
tarball="$1"; work="$2"; bundle="$3"
if [ ! -f "$tarball" ]; then
	echo "SKIP: no lv2lint source at $tarball (../shared/tools is not beside this clone)"
	exit 77
fi
for dep in lilv-0 libelf; do
	if ! pkg-config --exists "$dep"; then
		echo "SKIP: lv2lint needs $dep (apt-get install liblilv-dev libelf-dev)"
		exit 77
	fi
done
mkdir -p "$work"
build_one() { # name patch
	dir="$work/$1"
	if [ -x "$dir/src/build/lv2lint.bin" ]; then
		return 0
	fi
	rm -rf "$dir" && mkdir -p "$dir" && tar xzf "$tarball" -C "$dir" || return 1
	mv "$dir"/lv2lint-* "$dir/src" || return 1
	if [ "$2" = inprocess ]; then
		# lv2lint_wrap(): run the call in-process instead of in a clone()d child
		python3 - "$dir/src/src/lv2lint.c" <<'PY' || return 1
import sys
p = sys.argv[1]
s = open(p).read()
head = "lv2lint_wrap(app_t *app, wrap_t wrap, void *data)\n{\n#ifdef ENABLE_WRAP_TESTS"
assert head in s, "lv2lint_wrap not found where expected"
s = s.replace(head, "lv2lint_wrap(app_t *app, wrap_t wrap, void *data)\n{\n#if 0")
open(p, "w").write(s)
PY
	fi
	(cd "$dir/src" && CFLAGS=-fcommon meson setup build -Delf-tests=enabled \
		-Donline-tests=disabled > "$dir/setup.log" 2>&1 && ninja -C build > "$dir/build.log" 2>&1) ||
		{ echo "lv2lint ($1) did not build:"; tail -20 "$dir/setup.log" "$dir/build.log"; return 1; }
}
failed=0
for variant in stock inprocess; do
	build_one $variant $variant || { failed=1; continue; }
	bin="$work/$variant/src/build"
	for plugin in mono stereo; do
		log="$work/$variant-$plugin.txt"
		# lv2lint leaves a shared memory object named after its process (/dev/shm/lv2lint.PID):
		# its pid is kept so that the object goes with it
		timeout 120 sh -c 'echo $$ > "$0.pid"; exec "$@"' "$log" \
			env LD_PRELOAD="$bin/lv2lint.so" "$bin/lv2lint.bin" -Snote -E warn -I "$bundle/" \
			-u https://stembridge.org/lv2/stembridge#ui \
			"https://stembridge.org/lv2/stembridge#$plugin" > "$log" 2>&1
		rc=$?
		lint_pid=$(cat "$log.pid" 2>/dev/null)
		[ -n "$lint_pid" ] && rm -f "/dev/shm/lv2lint.$lint_pid"
		rm -f "$log.pid"
		fails=$(grep -c '\[FAIL\]' "$log")
		warns=$(grep -c '\[WARN\]' "$log")
		notes=$(grep -c '\[NOTE\]' "$log")
		if [ $rc -eq 124 ]; then
			echo "FAIL lv2lint ($variant) did not finish on the $plugin plugin in 120 s"
			failed=1
		elif [ $rc -ne 0 ] || [ "$fails" -ne 0 ] || [ "$warns" -ne 0 ]; then
			echo "FAIL lv2lint ($variant) on the $plugin plugin: exit $rc, $fails FAIL, $warns WARN"
			grep -A3 '\[FAIL\]\|\[WARN\]' "$log"
			failed=1
		else
			echo "ok lv2lint ($variant) on the $plugin plugin: 0 FAIL, 0 WARN, $notes NOTE"
		fi
	done
done
exit $failed
