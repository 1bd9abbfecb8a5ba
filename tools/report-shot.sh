#!/usr/bin/env bash
# report-shot.sh ARCHIVE RUN OUT.png     - kevo report of run RUN of ARCHIVE, as a browser
# report-shot.sh --bench FILE.json OUT.png  draws it, saved as a PNG of the whole page
# report-shot.sh --cpu OUT.png           - the same for a short CPU search made here first
#
# make report-shot (ARCHIVE=... RUN=... OUT=...) runs it; not part of make test. The page
# is rendered by headless Chromium (Debian: apt-get install -y chromium) in two passes: a
# copy of the page with one line of script measures its height, then the page itself,
# unchanged, is shot at that height. The PNG is checked to be a real picture: its width,
# its height and its size. KEVO names the kevo binary (default build/kevo); CHROMIUM the
# browser (default: chromium, chromium-browser or google-chrome on $PATH).
set -euo pipefail
kevo=${KEVO:-build/kevo}
width=1100

usage() {
    echo "usage: $0 ARCHIVE RUN OUT.png | $0 --bench FILE.json OUT.png | $0 --cpu OUT.png" >&2
    exit 2
}
[ $# -ge 2 ] || usage
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser ||
                      command -v google-chrome || true)}
if [ -z "$browser" ]; then
    echo "report-shot: no Chromium found: apt-get install -y chromium (or set CHROMIUM)" >&2
    exit 1
fi
tmp=$(mktemp -d /tmp/kevo-report-shot-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

case "$1" in
--bench)
    [ $# = 3 ] || usage
    "$kevo" report --bench "$2" --out "$tmp/page.html"
    out=$3 ;;
--cpu)
    [ $# = 2 ] || usage
    "$kevo" run tests/search/landscape.c --seed tests/search/landscape_seed.c --budget 16 \
        --time-cap 0.05 --archive "$tmp/cpu.db" >/dev/null
    "$kevo" report 1 --archive "$tmp/cpu.db" --out "$tmp/page.html"
    out=$2 ;;
*)
    [ $# = 3 ] || usage
    "$kevo" report "$2" --archive "$1" --out "$tmp/page.html"
    out=$3 ;;
esac

shoot() {   # shoot URL HEIGHT PNG
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --mute-audio \
        --no-first-run --window-size="$width,$2" --screenshot="$3" "$1" >/dev/null 2>&1
}
# pass 1: the height of the page, from a copy that says it in its title
sed 's|</body>|<script>document.title = "height:" + document.documentElement.scrollHeight;</script></body>|' \
    "$tmp/page.html" > "$tmp/measure.html"
height=$("$browser" --headless --no-sandbox --disable-gpu --window-size="$width,800" \
             --dump-dom "file://$tmp/measure.html" 2>/dev/null |
         sed -n 's|.*<title>height:\([0-9]*\)</title>.*|\1|p' | head -1)
height=${height:-4000}
# pass 2: the page as kevo wrote it
shoot "file://$tmp/page.html" "$((height + 20))" "$tmp/shot.png"
cp "$tmp/shot.png" "$out"

# a real picture: a PNG of the page's width and height, not an empty one
python3 - "$out" "$width" "$height" <<'EOF'
import struct, sys
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"report-shot: {path} is not a PNG")
w, h = struct.unpack(">II", data[16:24])
if w != want_w or h < min(want_h, 1000) or len(data) < 30000:
    sys.exit(f"report-shot: {path} looks empty: {w}x{h}, {len(data)} bytes")
print(f"report-shot: {path}: {w}x{h} pixels, {len(data) // 1024} KiB")
EOF
