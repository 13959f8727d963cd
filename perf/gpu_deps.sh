#!/usr/bin/env bash
# Prepares, on a machine that reaches Debian's archive, what a GPU machine without network needs
# to build terse: the Debian packages such a machine (CUDA, CMake, a compiler and PyTorch, none of
# terse's libraries) lacks, downloaded with `apt-get download` and unpacked with `dpkg -x` into a
# relocatable prefix, plus nccl.h (2.28, from this machine's CUDA) and, when given, a nccl-tests
# source tree. perf/gpu_check.sh then builds and runs against it there.
#
# Usage: perf/gpu_deps.sh [--max-mib N]
#   NCCL_TESTS_SRC=dir   a nccl-tests checkout to take along (default ./nccl-tests if present)
#   CUDA_HOME=dir        where nccl.h is taken from (default /usr/local/cuda)
#
# Writes (all under the git-ignored .gpu-deps/ of the repository):
#   .gpu-deps/debs/                     the downloaded .deb files
#   .gpu-deps/prefix/                   the unpacked prefix: usr/..., nccl/include/nccl.h,
#                                       src/nccl-tests, env.sh (source it: sets CMAKE_PREFIX_PATH,
#                                       PKG_CONFIG_PATH, LD_LIBRARY_PATH, TERSE_DEPS_PREFIX)
#   .gpu-deps/carry/terse-gpu-deps.tar.xz   the prefix packed: copy `.gpu-deps/carry` into the
#                                       GPU machine's checkout; perf/gpu_check.sh unpacks it
set -euo pipefail

max_mib=50
while [ $# -gt 0 ]; do
  case "$1" in
    --max-mib) max_mib="${2:?--max-mib needs a number}"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_deps.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/.gpu-deps"
prefix="$out/prefix"
cuda="${CUDA_HOME:-/usr/local/cuda}"
multiarch=x86_64-linux-gnu

if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "gpu_deps.sh: needs apt-get and dpkg (a Debian machine that reaches the archive)" >&2
  exit 1
fi
[ "$(dpkg --print-architecture)" = amd64 ] \
  || { echo "gpu_deps.sh: the GPU machines are x86-64; this machine is $(dpkg --print-architecture)" >&2; exit 1; }

# What terse's CMake looks for (CMakeLists.txt: pkg-config ucx hwloc libibverbs openblas re2 libzstd;
# find_package yaml-cpp OpenSSL GTest), and pkg-config itself, which a CUDA image may lack.
wanted=(libucx-dev libhwloc-dev libibverbs-dev libopenblas-dev libre2-dev libyaml-cpp-dev
        libzstd-dev zlib1g-dev libssl-dev libgtest-dev pkgconf)

# What a GPU image with CUDA, CMake, a compiler and PyTorch already has: the essential packages
# and the compiler (build-essential), with everything they depend on. What the wanted packages
# need beyond that is downloaded.
baseline=(build-essential base-files base-passwd bash bsdutils coreutils dash debconf debianutils
          diffutils dpkg findutils grep gzip hostname init-system-helpers libc-bin login
          ncurses-base ncurses-bin perl-base sed sysvinit-utils tar util-linux mount passwd
          adduser xz-utils)
# Such an image nearly always has libssl3, libudev1, libzstd1 and zlib1g too (the baseline pulls
# them in), but if it does not, the -dev packages' link symlinks would dangle: they are carried
# in a fallback folder that env.sh uses only when the system lacks the library.
fallback_packages=(libssl3 libudev1 libzstd1 zlib1g)
# Dependencies of the -dev packages that a build never uses (libhwloc-dev's autotools, the
# GoogleTest sources beside Debian's prebuilt libgtest.a): not downloaded.
unused_packages=(autoconf automake autotools-dev m4 googletest libltdl-dev)

mkdir -p "$out/debs" "$out/carry"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The resolver: apt-get in simulation, first against an empty dpkg status to close the baseline
# over its dependencies, then against a status holding that closure, so the answer is what such
# a machine would install, dependencies of dependencies included.
if ! apt-cache show --no-all-versions libucx-dev >/dev/null 2>&1; then
  echo "gpu_deps.sh: apt has no package lists yet; running apt-get update"
  apt-get update -qq
fi
simulate() {  # simulate STATUS_FILE PACKAGE...: prints the packages apt would install
  local status="$1"
  shift
  apt-get -s -qq -o Dir::State::status="$status" -o APT::Install-Recommends=0 \
    -o APT::Install-Suggests=0 install "$@" >"$work/plan" 2>&1 \
    || { echo "gpu_deps.sh: apt could not resolve $*:" >&2; cat "$work/plan" >&2; return 1; }
  sed -n 's/^Inst \([^ ]*\) .*/\1/p' "$work/plan" | sort -u
}
: >"$work/empty"
mapfile -t closure < <(simulate "$work/empty" "${baseline[@]}")
[ ${#closure[@]} -gt 0 ] || exit 1
apt-cache show --no-all-versions "${closure[@]}" \
  | awk '/^Package:/{print; print "Status: install ok installed"; next} {print}' >"$work/status"
mapfile -t packages < <(
  simulate "$work/status" "${wanted[@]}"
  printf '%s\n' "${fallback_packages[@]}")
[ ${#packages[@]} -gt ${#fallback_packages[@]} ] || exit 1
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u \
                        | grep -vxF -f <(printf '%s\n' "${unused_packages[@]}"))
echo "gpu_deps.sh: ${#packages[@]} packages: ${packages[*]}"

# Download only what is not already here (re-runs cost nothing); drop debs of older runs.
(
  cd "$out/debs"
  rm -f ./*.deb.partial
  missing=()
  for package in "${packages[@]}"; do
    ls "${package%%:*}"_*.deb >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # apt's _apt user may not write here; the warning it prints about that is harmless.
    apt-get download -qq "${missing[@]}" 2>&1 | grep -v 'couldn.t be accessed by user' || true
  fi
  for package in "${packages[@]}"; do
    ls "${package%%:*}"_*.deb >/dev/null 2>&1 \
      || { echo "gpu_deps.sh: download of $package failed" >&2; exit 1; }
  done
)

newest_deb() {  # the newest download of a package when several were made over time
  find "$out/debs" -name "$1_*.deb" -printf '%T@ %p\n' | sort -rn | head -1 | cut -d' ' -f2-
}
rm -rf "$prefix"
mkdir -p "$prefix"
for package in "${packages[@]}"; do
  deb="$(newest_deb "${package%%:*}")"
  dpkg -x "$deb" "$prefix"
done

libdir="$prefix/usr/lib/$multiarch"
# Some packages still install into /lib (before Debian's merged /usr): one lib folder for all.
if [ -d "$prefix/lib" ]; then
  cp -a "$prefix/lib/." "$prefix/usr/lib/"
  rm -rf "${prefix:?}/lib"
fi

# Fallback libraries: the image's own copy wins (env.sh adds this folder only for libraries the
# system lacks), and the -dev link symlinks point here.
mkdir -p "$libdir/fallback"
for package in "${fallback_packages[@]}"; do
  deb="$(newest_deb "$package")"
  while read -r file; do
    case "$file" in
      ./usr/lib/$multiarch/*.so.* | ./lib/$multiarch/*.so.*)
        mv "$libdir/$(basename "$file")" "$libdir/fallback/" ;;
    esac
  done < <(dpkg-deb -c "$deb" | awk '{print $6}')
done
rm -rf "$libdir/engines-3" "$libdir/ossl-modules"
# (zlib1g still installs into /lib, so its link names another folder, one that exists on this
# machine: match by file name, whatever the link's folder.)
for link in "$libdir"/*.so; do
  if [ -L "$link" ] && [ ! -e "$libdir/$(basename "$(readlink "$link")")" ] \
     && [ -e "$libdir/fallback/$(basename "$(readlink "$link")")" ]; then
    ln -sf "fallback/$(basename "$(readlink "$link")")" "$link"
  fi
done

# Keep it small: no documentation, manuals, locales, static archives (GoogleTest's excepted:
# Debian ships it static only), LAPACK, or programs other than pkg-config.
rm -rf "$prefix"/usr/share/{doc,doc-base,man,info,locale,lintian,bug,bash-completion} "${prefix:?}/etc" \
  "$prefix/usr/src"
find "$prefix" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
rm -f "$libdir"/openblas-pthread/liblapack* "$libdir"/openblas-pthread/pkgconfig/lapack*
find "$prefix/usr/bin" -mindepth 1 ! -name 'pkgconf' ! -name 'pkg-config' -delete 2>/dev/null || true
[ -e "$prefix/usr/bin/pkgconf" ] && ln -sf pkgconf "$prefix/usr/bin/pkg-config"

# Absolute symlinks would point into the GPU machine's own /usr: make them relative.
while read -r link; do
  target="$(readlink "$link")"
  rel="$(realpath -m --relative-to="$(dirname "$link")" "$prefix$target")"
  ln -sfn "$rel" "$link"
done < <(find "$prefix" -type l -lname '/*')

# openblas.pc lives in its own folder (Debian picks it through alternatives): put it beside the
# others, a copy rather than a link, since ${pcfiledir} is where the file is found.
[ -e "$libdir/openblas-pthread/pkgconfig/openblas.pc" ] \
  && mv "$libdir/openblas-pthread/pkgconfig/openblas.pc" "$libdir/pkgconfig/openblas.pc"
# pkg-config files name /usr: make every path relative to the file itself (${pcfiledir}), so the
# prefix works wherever it is unpacked.
while read -r pc; do
  up="$(realpath -m --relative-to="$(dirname "$pc")" "$prefix")"
  sed -i -e "s#^\([A-Za-z_]*[[:space:]]*=[[:space:]]*\)/usr\([/[:space:]]\|\$\)#\1\${pcfiledir}/$up/usr\2#" \
         -e "s#\([[:space:]]-[IL]\)/usr/#\1\${pcfiledir}/$up/usr/#g" "$pc"
done < <(find "$prefix" -name '*.pc')
if grep -l '=[[:space:]]*/usr' "$prefix"/usr/lib/$multiarch/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc 2>/dev/null; then
  echo "gpu_deps.sh: the .pc files above still name /usr" >&2
  exit 1
fi

# nccl.h is terse's API; a CUDA image need not have it, or may have an older one.
if [ -f "$cuda/include/nccl.h" ]; then
  mkdir -p "$prefix/nccl/include"
  cp "$cuda/include/nccl.h" "$prefix/nccl/include/"
else
  echo "gpu_deps.sh: no nccl.h under $cuda/include; the GPU machine must then have its own" >&2
fi

# nccl-tests sources, when given: gpu_check.sh builds its all_reduce_perf there.
tests_src="${NCCL_TESTS_SRC:-$repo/nccl-tests}"
if [ -f "$tests_src/src/all_reduce.cu" ]; then
  mkdir -p "$prefix/src"
  (cd "$tests_src" && tar --exclude=.git --exclude=build -cf - .) \
    | (mkdir -p "$prefix/src/nccl-tests" && cd "$prefix/src/nccl-tests" && tar -xf -)
  echo "gpu_deps.sh: nccl-tests from $tests_src"
else
  echo "gpu_deps.sh: no nccl-tests sources (NCCL_TESTS_SRC or ./nccl-tests); gpu_check.sh will skip nccl-tests"
fi

cat >"$prefix/env.sh" <<EOF
# Source this file (bash): points CMake, pkg-config and the loader at this prefix, wherever it is.
# Written by perf/gpu_deps.sh from: ${packages[*]}
_terse_deps="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
_terse_lib="\$_terse_deps/usr/lib/$multiarch"
export TERSE_DEPS_PREFIX="\$_terse_deps"
export CMAKE_PREFIX_PATH="\$_terse_deps/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="\$_terse_lib/pkgconfig:\$_terse_deps/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
_terse_ld="\$_terse_lib:\$_terse_lib/openblas-pthread"
# The fallback folder only for libraries this system does not have (see gpu_deps.sh).
for _terse_so in "\$_terse_lib"/fallback/*.so.[0-9]; do
  [ -e "\$_terse_so" ] || continue
  if ! { command -v ldconfig >/dev/null && ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q "\$(basename "\$_terse_so") "; then
    _terse_ld="\$_terse_ld:\$_terse_lib/fallback"
    break
  fi
done
export LD_LIBRARY_PATH="\$_terse_ld\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
command -v pkg-config >/dev/null 2>&1 || export PATH="\$PATH:\$_terse_deps/usr/bin"
unset _terse_deps _terse_lib _terse_ld _terse_so
EOF

# Check: every module terse asks pkg-config for resolves inside the prefix.
(
  # shellcheck source=/dev/null
  source "$prefix/env.sh"
  pc="$(command -v pkg-config || echo "$prefix/usr/bin/pkgconf")"
  for module in ucx hwloc libibverbs openblas re2 libzstd zlib yaml-cpp openssl gtest; do
    flags="$(PKG_CONFIG_LIBDIR="$libdir/pkgconfig:$prefix/usr/share/pkgconfig" "$pc" --cflags --libs "$module")" \
      || { echo "gpu_deps.sh: pkg-config cannot resolve $module in the prefix" >&2; exit 1; }
    for flag in $flags; do
      case "$flag" in
        -I*|-L*) [ -d "${flag:2}" ] || { echo "gpu_deps.sh: $module: $flag is no folder" >&2; exit 1; }
                 case "$(realpath "${flag:2}")" in
                   "$(realpath "$prefix")"/*) ;;
                   *) echo "gpu_deps.sh: $module: $flag is outside the prefix" >&2; exit 1 ;;
                 esac ;;
      esac
    done
  done
)
dangling="$(find "$prefix" -xtype l)"
[ -z "$dangling" ] || { echo "gpu_deps.sh: dangling links: $dangling" >&2; exit 1; }

rm -f "$out/carry"/*.tar.xz
tar -C "$out" -cf - prefix | xz -T0 -6 >"$out/carry/terse-gpu-deps.tar.xz"
prefix_kib="$(du -sk "$prefix" | cut -f1)"
packed_kib="$(du -sk "$out/carry" | cut -f1)"
echo "gpu_deps.sh: prefix $((prefix_kib / 1024)) MiB unpacked, .gpu-deps/carry $((packed_kib / 1024)) MiB packed"
if [ $((packed_kib / 1024)) -ge "$max_mib" ]; then
  echo "gpu_deps.sh: .gpu-deps/carry is over $max_mib MiB: too large to carry" >&2
  exit 1
fi
echo "gpu_deps.sh: copy .gpu-deps/carry into the GPU machine's checkout and run bash perf/gpu_check.sh there"
