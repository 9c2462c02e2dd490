#!/usr/bin/env bash
# Builds BMv2 (simple_switch_grpc, with PI and Thrift) and p4c (the BMv2 back end, p4c-bm2-ss)
# from pinned sources, for Debian 12 (bookworm), where p4lang publishes no packages.
#
#   sudo ./scripts/install-bmv2.sh --from-source [--prefix DIR] [--src DIR] [--jobs N]
#   ./scripts/install-bmv2.sh --from-source --dry-run      the pins, URLs and steps; changes nothing
#   ./scripts/install-bmv2.sh --from-source --fetch-only   clone, check out and patch the sources only
#
# Needs internet access (github.com, Debian's archive), root (apt, make install), about 6 GiB of
# disk under --src, and time: on 2 cores PI builds in about 6 min, BMv2 in 10, p4c in 13.
# Steps: the Debian build packages; PI, BMv2 and p4c (and the p4runtime protos p4c compiles in)
# at the commits below; three small patches to p4c (scripts/bmv2-patches/: Debian 12's Abseil
# 20220623 is older than the one p4c v1.2.4.11 was written against); build and install PI, then
# BMv2 against it, then p4c against Debian's Abseil and Protobuf; BMv2's Python runtime on the
# system Python's path (without PI's generated `google` package, which would hide protobuf);
# a check that the tools run and compile the project's P4 program.
#
# MRC_GIT_BASE=<url or dir> clones from a mirror laid out as <base>/<owner>/<repo> instead of
# https://github.com (submodules too). Exit status: 0 built (or --dry-run/--fetch-only done),
# 1 an error (the step and its log are named).
set -euo pipefail

# -- pins (checked against the upstream repositories) ---------------------------------------------
PI_COMMIT=f96af95e090619491e3abf2df69df340c2c9cb46     # p4lang/PI
BMV2_COMMIT=9674187f610c81878e3586f9a1746dcc7f903114   # p4lang/behavioral-model, VERSION 1.15.5
P4C_TAG=v1.2.4.11                                      # p4lang/p4c
P4C_COMMIT=5a7eeeedb4be7d38590b1db39470f11728e4bc45
P4RUNTIME_COMMIT=1e771c4e05c4e7e250df00212b3ca02ee3202d71  # the one p4c's CMakeLists.txt pins
# PI's submodules at PI_COMMIT: proto/p4runtime, proto/openconfig/gnmi, third_party/uthash and
# third_party/googletest (its configure checks for it); openconfig/public holds YANG models only.
PI_SUBMODULES=(proto/p4runtime proto/openconfig/gnmi third_party/uthash third_party/googletest)

BUILD_PKGS=(
  build-essential git ca-certificates pkg-config autoconf automake libtool libtool-bin cmake
  bison flex libfl-dev file zstd python3 python3-dev python3-thrift python3-six
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libprotoc-dev
  libthrift-dev thrift-compiler libnanomsg-dev libabsl-dev libgc-dev libgmp-dev libpcap-dev
  libjudy-dev libreadline-dev libssl-dev libevent-dev libffi-dev libjsoncpp-dev libxxhash-dev
  libboost-dev libboost-system-dev libboost-filesystem-dev libboost-thread-dev
  libboost-program-options-dev libboost-iostreams-dev libboost-graph-dev libboost-test-dev
)

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
patches="$here/bmv2-patches"
prefix=/usr/local
src=/usr/local/src/mrc-bmv2
jobs=$(nproc 2>/dev/null || echo 2)
mode=build
git_base=${MRC_GIT_BASE:-https://github.com}

while [ $# -gt 0 ]; do
  case "$1" in
    --from-source) ;;
    --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
    --src) src=${2:?--src needs a directory}; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    --dry-run) mode=dry-run ;;
    --fetch-only) mode=fetch ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-bmv2 --from-source: unknown option ${1:0:40} (see --help)" >&2; exit 1 ;;
  esac
  shift
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "install-bmv2: --jobs must be a positive number" >&2; exit 1; }
case "$prefix" in /*) ;; *) echo "install-bmv2: --prefix must be an absolute path" >&2; exit 1 ;; esac
log="$src/build.log"

say() { echo "install-bmv2: $*"; }
die() { echo "install-bmv2: $*" >&2; exit 1; }
# A step runs in a background subshell, where `set -e` holds (inside `if !` or `||` bash would
# ignore it and go on after a failed command); its output goes to the log, its tail on failure.
step() {
  local what=$1
  shift
  say "$what"
  ("$@") >>"$log" 2>&1 &
  if ! wait $!; then
    tail -n 30 "$log" >&2
    die "failed: $what (whole log: $log)"
  fi
}

if [ "$mode" = dry-run ]; then
  say "from source into $prefix, sources in $src, $jobs jobs, clones from $git_base"
  say "PI $PI_COMMIT (submodules ${PI_SUBMODULES[*]})"
  say "BMv2 $BMV2_COMMIT; p4c $P4C_TAG ($P4C_COMMIT) +" "$(cd "$patches" && echo p4c-*.patch)"
  say "p4runtime for p4c $P4RUNTIME_COMMIT"
  say "Debian packages: ${BUILD_PKGS[*]}"
  say "dry run: nothing changed"
  exit 0
fi

# shellcheck disable=SC1091
. /etc/os-release 2>/dev/null || true
if [ "${ID:-}" != debian ] || [ "${VERSION_ID:-}" != 12 ]; then
  say "warning: written and checked for Debian 12; this is ${PRETTY_NAME:-unknown} (on Ubuntu, p4lang's packages: sudo ./scripts/install-bmv2.sh)"
fi

# -- fetch: sources at their pins, patched ----------------------------------------------------------
# clone_at <owner/repo> <dir> <commit>: a full clone checked out at <commit> (verified)
clone_at() {
  local name=$1 dir=$2 commit=$3
  if [ ! -d "$dir/.git" ]; then
    git clone -q --no-checkout "$git_base/$name" "$dir"
  fi
  git -C "$dir" -c advice.detachedHead=false checkout -q --force "$commit"
  [ "$(git -C "$dir" rev-parse HEAD)" = "$commit" ] || die "$name is not at $commit"
}

fetch() {
  local rewrite=()
  if [ "$git_base" != https://github.com ]; then
    rewrite=(-c "url.$git_base/.insteadOf=https://github.com/")
    # a mirror on this machine: git refuses local submodule clones unless told
    case "$git_base" in /* | file:*) rewrite+=(-c protocol.file.allow=always) ;; esac
  fi
  clone_at p4lang/PI "$src/PI" "$PI_COMMIT"
  git "${rewrite[@]}" -C "$src/PI" submodule --quiet update --init -- "${PI_SUBMODULES[@]}"
  clone_at p4lang/behavioral-model "$src/behavioral-model" "$BMV2_COMMIT"
  if [ ! -d "$src/p4c/.git" ]; then
    git clone -q --no-checkout "$git_base/p4lang/p4c" "$src/p4c"
    # the build needs no slide decks (and a partial mirror may lack their blobs)
    git -C "$src/p4c" sparse-checkout set --no-cone '/*' '!/docs/*.pptx'
  fi
  git -C "$src/p4c" -c advice.detachedHead=false checkout -q --force "$P4C_TAG"
  [ "$(git -C "$src/p4c" rev-parse HEAD)" = "$P4C_COMMIT" ] || die "p4c $P4C_TAG is not $P4C_COMMIT"
  for p in "$patches"/p4c-*.patch; do
    git -C "$src/p4c" apply "$p"
  done
  # p4c compiles p4runtime's protos in; it would fetch them at configure time, this pins them here
  clone_at p4lang/p4runtime "$src/p4runtime-for-p4c" "$P4RUNTIME_COMMIT"
}

mkdir -p "$src"
src=$(cd "$src" && pwd)
log="$src/build.log"
: >"$log"
say "sources in $src (log: $log)"
if [ "$mode" = fetch ]; then
  step "fetching PI, BMv2, p4c and p4runtime at their pins; patching p4c" fetch
  say "fetched and patched (--fetch-only): nothing built or installed"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "needs root (apt-get, make install); run it with sudo"
export DEBIAN_FRONTEND=noninteractive
step "installing the Debian build packages" apt-get install -y -qq --no-install-recommends "${BUILD_PKGS[@]}"
step "fetching PI, BMv2, p4c and p4runtime at their pins; patching p4c" fetch

# Debian's /usr/bin/python3 for autotools and cmake, not whichever python3 comes first on PATH
export PYTHON=/usr/bin/python3
rpath="-Wl,-rpath,$prefix/lib"

build_pi() {
  cd "$src/PI"
  ./autogen.sh
  ./configure --prefix="$prefix" --with-proto --without-internal-rpc --without-cli --without-bmv2 \
    --disable-static CXXFLAGS="-O2 -g0" CFLAGS="-O2 -g0" LDFLAGS="$rpath"
  make -j"$jobs"
  make install
}

build_bmv2() {
  cd "$src/behavioral-model"
  ./autogen.sh
  ./configure --prefix="$prefix" --with-pi --with-thrift --disable-static \
    PKG_CONFIG_PATH="$prefix/lib/pkgconfig" CPPFLAGS="-I$prefix/include" \
    CXXFLAGS="-O2 -g0" CFLAGS="-O2 -g0" LDFLAGS="-L$prefix/lib $rpath"
  make -j"$jobs"
  make install
}

build_p4c() {
  mkdir -p "$src/p4c/build"
  cd "$src/p4c/build"
  # Debian's Abseil and Protobuf instead of the versions the tag downloads; only the BMv2 back end
  cmake .. -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DENABLE_BMV2=ON -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF \
    -DENABLE_GTESTS=OFF -DENABLE_P4TEST=OFF -DENABLE_DOCS=OFF -DENABLE_GC=OFF \
    -DENABLE_P4C_GRAPHS=OFF -DENABLE_TEST_TOOLS=OFF \
    -DP4C_USE_PREINSTALLED_ABSEIL=ON -DENABLE_ABSEIL_STATIC=OFF \
    -DP4C_USE_PREINSTALLED_PROTOBUF=ON -DENABLE_PROTOBUF_STATIC=OFF \
    -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$src/p4runtime-for-p4c" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_INSTALL_RPATH="$prefix/lib" -DPYTHON_EXECUTABLE=/usr/bin/python3
  make -j"$jobs"
  make install
}

# BMv2's Python runtime (bm_runtime, sswitch_runtime, the CLI modules) sits in the prefix's
# site-packages next to PI's generated p4/google/gnmi packages. The system Python (and a venv
# made from it with --system-site-packages, as `make setup` makes) gets a .pth to a directory
# holding only BMv2's modules: PI's `google` package would hide the venv's google.protobuf.
python_path() {
  local site shim pth
  site=$(find "$prefix/lib" -maxdepth 3 -type d -path "*/python3*/site-packages" | head -n1)
  if [ -z "$site" ] || [ ! -d "$site/bm_runtime" ]; then
    echo "no bm_runtime under $prefix/lib" >&2
    return 1
  fi
  shim="$prefix/lib/mrc-bmv2-python"
  rm -rf "$shim" && mkdir -p "$shim"
  for entry in "$site"/*; do
    case "$(basename "$entry")" in p4 | google | gnmi | *.dist-info | *.egg-info) continue ;; esac
    ln -s "$entry" "$shim/"
  done
  pth=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  mkdir -p "$pth" && echo "$shim" >"$pth/mrc-bmv2.pth"
}

check() {
  ldconfig
  "$prefix/bin/simple_switch_grpc" --version
  "$prefix/bin/p4c-bm2-ss" --version
  /usr/bin/python3 -c "import bm_runtime, sswitch_runtime"
  local out
  out=$(mktemp -d)
  "$prefix/bin/p4c-bm2-ss" --arch v1model --std p4-16 -o "$out/mrc_switch.json" \
    --p4runtime-files "$out/mrc_switch.p4info.txtpb" "$repo/p4src/mrc_switch.p4"
  cmp "$out/mrc_switch.p4info.txtpb" "$repo/p4src/mrc_switch.p4info.txtpb"
  rm -rf "$out"
}

step "building and installing PI ($PI_COMMIT)" build_pi
step "building and installing BMv2 ($BMV2_COMMIT)" build_bmv2
step "building and installing p4c $P4C_TAG (BMv2 back end)" build_p4c
step "putting BMv2's Python runtime on the system Python's path" python_path
step "checking: versions, the Python runtime, the project's P4 program and its P4Info" check
say "installed in $prefix: $("$prefix/bin/simple_switch_grpc" --version), $("$prefix/bin/p4c-bm2-ss" --version | head -n1)"
case ":$PATH:" in *":$prefix/bin:"*) ;; *) say "add $prefix/bin to PATH" ;; esac
