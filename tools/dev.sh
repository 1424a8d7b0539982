#!/usr/bin/env bash
# Stembridge's two entry points on a fresh Debian 12 machine (README.md):
#   tools/dev.sh demo   install what is missing, build, separate a short clip with the
#                       built-in model on the auto device
#   tools/dev.sh test   install what is missing, build, run every test (also what CI runs);
#                       the last line is "N passed, N failed" counted from meson's test logs,
#                       after one line per skipped test with its reason
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-demo}

build_pkgs="build-essential meson ninja-build pkg-config libsndfile1-dev libfftw3-dev
  ocl-icd-opencl-dev opencl-headers ocl-icd-libopencl1 libjansson-dev libsamplerate0-dev lv2-dev
  zlib1g-dev libcurl4-openssl-dev libssl-dev libyaml-dev
  libdnnl2 libclblast-dev libcairo2-dev libx11-dev liblilv-dev lilv-utils
  pocl-opencl-icd clinfo sox python3"
# ardour: the headless and GUI host tests; python3-torch: checkpoints for the converter's test;
# clang and its runtime: the fuzz targets under libFuzzer; clang with libclc-14: the kernels
# built for AMD and NVIDIA GPUs (tools/cl_kernels.sh); libelf-dev: lv2lint (built from
# ../shared/tools when it is there); slurm and munge: the batch test's single-node cluster;
# debhelper, lintian and mmdebstrap: the Debian package (tools/deb_test.sh); groff-base: the man
# pages' check; jalv, jackd2 and x11-utils: the plugin's window in a real host (gui_jalv)
test_pkgs="sordi xvfb xdotool imagemagick libsuil-dev ardour python3-torch clang libclang-rt-14-dev
  libclc-14 libelf-dev groff-base jalv jackd2 x11-utils
  slurmctld slurmd slurm-client munge debhelper lintian mmdebstrap"

install_missing() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "Installing: ${missing[*]}"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}"
}

case "$mode" in
demo)
	# shellcheck disable=SC2086
	install_missing $build_pkgs
	[ -d build ] || meson setup build -Dtests=false
	ninja -C build
	mkdir -p demo
	tools/make_demo_clip.sh demo/clip.wav
	build/tools/cli/stembridge devices
	build/tools/cli/stembridge separate demo/clip.wav -o demo/stems --device auto --model builtin \
		--overwrite
	echo "Stems and manifest: $(pwd)/demo/stems/clip/"
	echo "For Demucs quality (about 9 dB SDR where the built-in model gives a few):"
	echo "  build/tools/cli/stembridge models install htdemucs   # 84 MB, checked and converted"
	echo "  build/tools/cli/stembridge separate demo/clip.wav -o demo/stems-htdemucs  # auto: htdemucs"
	;;
test)
	# shellcheck disable=SC2086
	install_missing $build_pkgs $test_pkgs
	werror=""
	[ "${CI:-}" = true ] && werror="--werror"
	[ -d build-test ] || meson setup build-test $werror
	ninja -C build-test
	rc=0
	meson test -C build-test --print-errorlogs --num-processes 2 || rc=1
	# The engine's threads under ThreadSanitizer (jobs and OpenCL scheduling).
	[ -d build-tsan ] || meson setup build-tsan -Db_sanitize=thread -Db_lundef=false \
		-Dgui=disabled -Dbuildtype=debugoptimized
	ninja -C build-tsan
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(pwd)/tests/jobs/tsan.supp" \
		meson test -C build-tsan --suite jobs --print-errorlogs --num-processes 1 || rc=1
	# A third backend (the CPU registered again as "toy", without the built-in model's group):
	# listed, chosen, saved and restored by the plugin, sharing a song, the per-operation test;
	# and a test model family whose optional operation group the CPU alone has
	[ -d build-toy ] || meson setup build-toy -Dtoy_backend=true -Dtoy_family=true -Dgui=disabled
	ninja -C build-toy
	meson test -C build-toy --suite toy --print-errorlogs --num-processes 2 || rc=1
	# A machine without an OpenCL loader (-Dopencl=disabled): the CPU path alone configures,
	# builds, and separates a clip
	[ -d build-cpu ] || meson setup build-cpu -Dopencl=disabled -Dgui=disabled -Dtests=false
	ninja -C build-cpu
	tools/make_demo_clip.sh build-cpu/clip.wav >/dev/null
	build-cpu/tools/cli/stembridge separate build-cpu/clip.wav -o build-cpu/out --model builtin \
		--overwrite -q || rc=1
	# Every parser a user or a download reaches, under libFuzzer with ASan and UBSan, for a
	# fixed number of inputs from its seed corpus (tools/fuzz.sh runs them longer).
	[ -d build-fuzz ] || CC=clang meson setup build-fuzz -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false -Dgui=disabled -Dtests=false \
		-Dbuildtype=debugoptimized
	ninja -C build-fuzz
	meson test -C build-fuzz --suite fuzz --print-errorlogs --num-processes 2 || rc=1
	# The Debian package, built from a clean copy of the tree, linted, installed, used and
	# purged (one result per step in build-deb/testlog.json). Last: while it is installed, its
	# bundle in /usr/lib/lv2 is on the plugin tests' LV2_PATH.
	bash tools/deb_test.sh build-deb || rc=1
	python3 tools/count_tests.py build-test/meson-logs/testlog.json \
		build-tsan/meson-logs/testlog.json build-toy/meson-logs/testlog.json \
		build-fuzz/meson-logs/testlog.json build-deb/testlog.json
	exit $rc
	;;
*)
	echo "usage: tools/dev.sh demo|test" >&2
	exit 2
	;;
esac
