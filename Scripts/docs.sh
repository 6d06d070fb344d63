#!/usr/bin/env bash
# Builds the documentation site: the symbol graphs of what `import SharedStore` brings, and the
# catalog Sources/SharedStore/SharedStore.docc, converted by the toolchain's own docc into a
# static site in .build/docs-site; then opens it in a real browser (headless chromium) and checks
# what it renders (Scripts/lib/docs_check.py). A link to a symbol or article that does not exist,
# in the catalog or in a doc comment, fails the build (docc --warnings-as-errors).
#   Scripts/docs.sh              build and check
#   Scripts/docs.sh --no-check   build only
# Serve the site with: python3 -m http.server --bind 127.0.0.1 --directory .build/docs-site 8000
# and open http://127.0.0.1:8000/documentation/sharedstore/ (DocC loads its pages with fetch:
# opening the files directly does not work).
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
case "${1:-}" in
    "") check=1 ;;
    --no-check) check=0 ;;
    *) echo "error: unknown argument '$1' (use --no-check)" >&2; exit 2 ;;
esac

build=.build/docs          # a build of its own: the everyday build is not rebuilt with these flags
graphs=.build/docs-graphs  # every module's symbol graphs, as the compiler emits them
kept=.build/docs-symbols   # the ones docc reads
site=.build/docs-site
docc="$(dirname "$(readlink -f "$(command -v swift)")")/docc"
[ -x "$docc" ] || { echo "error: no docc beside $(command -v swift); the Swift toolchain ships one" >&2; exit 1; }

echo "docs: symbol graphs of SharedStore (swift build -emit-symbol-graph)"
# SharedStore re-exports its layers (@_exported), and its own graph holds their symbols as
# SharedStore's: the one module users import, with every public type at
# documentation/sharedstore/<type>. The compiler writes a module's graph only when it emits the
# module, so SharedStore's module (one small file) is removed to be emitted again each time: its
# graph then reads the current doc comments of the modules below it.
bin="$(swift build --build-path "$build" --show-bin-path)"
rm -rf "$graphs" "$kept" "$bin"/Modules/SharedStore.*
mkdir -p "$graphs" "$kept"
set +e
swift build --build-path "$build" --target SharedStore \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" 2>&1 \
    | grep -vE '^\[[0-9]+/[0-9]+\]'
build_status=${PIPESTATUS[0]}
set -e
[ "$build_status" -eq 0 ] || { echo "error: the build for the symbol graphs failed" >&2; exit 1; }
# SharedStore.symbols.json, and SharedStore@Swift/@FoundationEssentials for its extensions of
# the standard library's and Foundation's types.
cp "$graphs"/SharedStore.symbols.json "$graphs"/SharedStore@*.symbols.json "$kept"/ 2>/dev/null || true
[ -s "$kept/SharedStore.symbols.json" ] || { echo "error: no symbol graph for SharedStore in $graphs" >&2; exit 1; }

echo "docs: docc convert (a broken link is an error)"
rm -rf "$site"
"$docc" convert Sources/SharedStore/SharedStore.docc \
    --additional-symbol-graph-dir "$kept" \
    --fallback-display-name SharedStore \
    --fallback-bundle-identifier org.sharedstore.SharedStore \
    --fallback-default-module-kind Library \
    --transform-for-static-hosting \
    --warnings-as-errors \
    --output-path "$site"
pages=$(find "$site/data/documentation" -name '*.json' | wc -l)
echo "docs: $pages pages in $site"

if [ "$check" -eq 1 ]; then
    python3 Scripts/lib/docs_check.py "$site"
fi
