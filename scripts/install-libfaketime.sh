#!/usr/bin/env bash
# libfaketime for `make test-calendar` (docs/testing.md "The calendar"), built into DEST (default .tools/libfaketime,
# ignored by git) from Debian trixie's source of faketime: upstream 0.9.10 as of 2024-06-05 (git ba9ed5b2), the
# tarball pinned by its sha256. Not bookworm's binary package (0.9.10-2.1), which cannot move the wall clock alone:
# with the monotonic clock left real (--exclude-monotonic) Python's time.sleep fails with EINVAL, and with it moved
# too, threading's timed waits (sem_clockwait, which that build does not intercept) wait for the whole offset. Nor
# trixie's binary, which needs glibc 2.38. Built with only the wall clock's and file times' shims (FAKE_STAT,
# FAKE_UTIME): the calendar run moves the wall clock alone (--exclude-monotonic), and the default build's pthread,
# sleep and timer shims crashed the moto server's threads (a segmentation fault in one run of three) and made the run
# 3x slower. Needs curl, a C compiler and make; skips with a message without them.
set -euo pipefail
VERSION="0.9.10+2024-06-05+gba9ed5b2"
SHA256="879597d9b3469b062314dbac70b2dd3b393053086772999ed94401b8ddb412de"
URL="https://deb.debian.org/debian/pool/main/f/faketime/faketime_0.9.10%2B2024-06-05%2Bgba9ed5b2.orig.tar.xz"
DEST="$(realpath -m "${1:-.tools/libfaketime}")"
FLAGS="-DFAKE_STAT -DFAKE_UTIME"
STAMP="$VERSION $FLAGS $DEST"  # the wrapper finds the library by the absolute path it was built with

if [ -x "$DEST/bin/faketime" ] && [ "$(cat "$DEST/BUILT" 2>/dev/null)" = "$STAMP" ]; then
  exit 0
fi
for tool in curl cc make tar xz sha256sum; do
  if ! command -v "$tool" >/dev/null; then
    echo "libfaketime: skipped: no $tool here (make test-calendar skips without it)" >&2
    exit 0
  fi
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
curl -fsSL --proto '=https' --retry 3 -o "$work/faketime.tar.xz" "$URL"
echo "$SHA256  $work/faketime.tar.xz" | sha256sum --check --quiet -
tar -xJf "$work/faketime.tar.xz" -C "$work"
make -C "$work/faketime-$VERSION/src" PREFIX="$DEST" LIBDIRNAME=/lib \
  CFLAGS="-std=gnu99 -Wall -Wextra -fPIC -Wno-nonnull-compare $FLAGS -DPREFIX='\"$DEST\"' -DLIBDIRNAME='\"/lib\"'" \
  >/dev/null
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
cp "$work/faketime-$VERSION/src/faketime" "$DEST/bin/"
cp "$work/faketime-$VERSION/src/libfaketime.so.1" "$work/faketime-$VERSION/src/libfaketimeMT.so.1" "$DEST/lib/"
echo "$STAMP" > "$DEST/BUILT"
