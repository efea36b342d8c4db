#!/usr/bin/env bash
# Build the one-folder app: dist/network-inspector/network-inspector (`make package`).
#
#   bash packaging/build.sh            # with .venv/bin/python, or $PYTHON when set
#   bash packaging/build.sh --clean    # forget PyInstaller's cache in build/ first
#
# Installs PyInstaller into that environment when it is missing, checks that the icons match
# their SVG, builds, then runs the frozen `network-inspector --help` and prints the size and
# build time. See packaging/README.md for Windows, macOS and CPU-only builds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
DIST="$ROOT/dist"
WORK="$ROOT/build/pyinstaller"
APP="network-inspector"

if [ ! -x "$PY" ] && ! command -v "$PY" >/dev/null; then
    echo "build.sh: no Python at $PY; run 'make' first or set PYTHON" >&2
    exit 1
fi
if ! "$PY" -c "import PyInstaller" 2>/dev/null; then
    echo "build.sh: installing PyInstaller into $("$PY" -c 'import sys; print(sys.prefix)')"
    "$PY" -m pip install "pyinstaller>=6.10"
fi

# The PNGs are committed; a stale set means someone edited the SVG and forgot to render.
"$PY" packaging/render_icons.py --check

extra=()
if [ "${1:-}" = "--clean" ]; then
    extra+=(--clean)
fi

start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --log-level WARN "${extra[@]}" \
    --distpath "$DIST" --workpath "$WORK" packaging/network_inspector.spec
end=$(date +%s)

case "$(uname -s)" in
    Darwin) exe="$DIST/Network Inspector.app/Contents/MacOS/$APP" ;;
    MINGW*|MSYS*|CYGWIN*) exe="$DIST/$APP/$APP.exe" ;;
    *) exe="$DIST/$APP/$APP" ;;
esac
# Proof that the bundle works without a display: the CLI starts, and the bundled demo model
# runs forward and backward with a Grad-CAM on a bundled sample (torch, torchvision's ops,
# the resources). The desktop window is checked by hand: see packaging/README.md.
"$exe" --help >/dev/null
sample="$(find "$DIST" -path "*resources/demo/samples/*.png" | sort | head -n 1)"
if [ -n "$sample" ]; then
    check="$(mktemp -d)"
    trap 'rm -rf "$check"' EXIT
    "$exe" analyse --model demo_shapes --quiet --no-tensorboard --out "$check" "$sample" \
        2> "$check/stderr.txt" || { cat "$check/stderr.txt" >&2; exit 1; }
    ls "$check"/*/*.npz >/dev/null
    # The compiled statistics kernel must be in the bundle: without it every run is slower.
    if grep -q "Statistics use torch reductions" "$check/stderr.txt"; then
        cat "$check/stderr.txt" >&2
        echo "build.sh: the frozen app lacks the compiled statistics kernel" >&2
        exit 1
    fi
    # A run that fails inside a torch op (a frozen build once lacked torchvision's compiled
    # ops and hung): one sentence naming the module, exit status 1, no hang, no traceback.
    status=0
    timeout 300 "$exe" analyse --model "$ROOT/tests/models/fails_mid_forward.py:build" --quiet \
        --no-tensorboard --out "$check/fails" "$sample" 2> "$check/fails.txt" || status=$?
    if [ "$status" != 1 ] || ! grep -q "in module 'mixer'" "$check/fails.txt" \
        || grep -q Traceback "$check/fails.txt"; then
        cat "$check/fails.txt" >&2
        echo "build.sh: a failing op was not reported as one sentence (exit $status)" >&2
        exit 1
    fi
fi

echo "built $DIST/$APP in $((end - start)) s; size $(du -sh "$DIST/$APP" | cut -f1)"
echo "run it: $exe [IMAGE ...]    (Linux menu entry: $exe --install-desktop)"
