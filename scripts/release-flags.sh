#!/usr/bin/env bash
# Prints the `swift build` arguments of the build that users install (deploy/install.sh), that
# `make release` makes and that `make bench` measures — one place, so the three stay the same.
#
#   -c release --static-swift-stdlib   no Swift runtime to install on the Pi
#   -function-sections + lld --symbol-ordering-file=deploy/gattway.order
#                                      the functions `gattway run` executes (a profile, made by
#                                      `make order-file`) sit together at the start of .text, so the
#                                      kernel's 64 KB fault-around maps few pages of code that never
#                                      runs; the CLI, simulator and demo code stays on disk.
#                                      deploy/gattway.ld groups the functions the compiler emits
#                                      without a symbol (closure-context destructors and the like),
#                                      which the order file cannot name
#   --no-export-dynamic                the static runtime's link line exports every symbol of the
#                                      executable; nothing looks them up, and exported symbols are
#                                      kept alive, so the linker could not drop unused code
#   -z pack-relative-relocs            (glibc >= 2.36 only: the binary needs it where it runs, and
#                                      install.sh builds on that machine) 8 kB of relocations
#                                      instead of 1 MB read at every start
#   libstdc++ linked statically        the Swift runtime uses a sliver of it (operator new, a few
#                                      helpers); the shared library costs ~1 MB resident for its
#                                      relocations and locale tables. `-lstdc++` comes from the
#                                      runtime's own link line, so a directory holding only
#                                      libstdc++.a (.build/static-libstdc++) is searched first.
#                                      GCC's runtime library exception allows static linking.
# Without the toolchain's lld the ordering and packing are left out (plain release build).
# BENCHMARKS.md, "Resident memory", has what each one is worth.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}

flags=(-c release --static-swift-stdlib)
toolchain_bin=$(dirname "$(readlink -f "$(command -v "$swift" || echo /nonexistent)")")
if [ -x "$toolchain_bin/ld.lld" ] || command -v ld.lld >/dev/null 2>&1; then
  flags+=(-Xswiftc -Xfrontend -Xswiftc -function-sections -Xswiftc -use-ld=lld)
  flags+=(-Xlinker --no-export-dynamic)
  if [ -s "$repo/deploy/gattway.order" ]; then
    flags+=(-Xlinker "--symbol-ordering-file=$repo/deploy/gattway.order" -Xlinker --no-warn-symbol-ordering)
  fi
  flags+=(-Xlinker -T -Xlinker "$repo/deploy/gattway.ld")
  archive=$(gcc -print-file-name=libstdc++.a 2>/dev/null || true)
  if [ -f "$archive" ]; then
    mkdir -p "$repo/.build/static-libstdc++"
    ln -sfn "$archive" "$repo/.build/static-libstdc++/libstdc++.a"
    flags+=(-Xlinker "-L$repo/.build/static-libstdc++")
  fi
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [ -n "$glibc" ] && [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = "2.36" ]; then
    flags+=(-Xlinker -z -Xlinker pack-relative-relocs)
  fi
fi
printf '%s\n' "${flags[@]}"
