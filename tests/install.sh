#!/usr/bin/env bash
# install.sh [MAKE [BUILD [PREFIX]]] - `make install` and `make uninstall` into a scratch
# DESTDIR, and an installed kevo that reads its run-time data from PREFIX/share/kevo, not
# from the source tree it was built in (make test runs it; no GPU, no network).
#
# What it proves:
# - install puts the binary, the man page and the data files where they belong, and
#   `kevo version` of the installed binary names PREFIX/share/kevo, found beside it;
# - an offline LLM search (kevo run --offline, CPU backend) of a task from the installed
#   suite, started outside the source tree, builds its prompts from the installed
#   templates and playbook: a marker written only into the installed copies is in the
#   prompts `kevo llm pending` prints; with the installed prompts/ removed, the run fails
#   naming the installed path (the source tree's prompts/ are not a silent fallback);
# - every read of the source tree's data goes through kevo_data_dir (src/ctl/datadir.c):
#   no other file of src/ or cli/ names KEVO_SOURCE_DIR;
# - uninstall leaves no file behind.
set -eu
make=${1:-make}
build=${2:-build}
prefix=${3:-/usr/local}
root=$(cd "$(dirname "$0")/.." && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kevo-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
bin=$dest$prefix/bin/kevo
share=$dest$prefix/share/kevo
marker="kevo-install-test: read from share/kevo"

fail() {
    echo "install test: $*" >&2
    exit 1
}

# the environment that would point kevo elsewhere is not the test's
unset KEVO_DATA_DIR KEVO_PROMPTS KEVO_PRICES KEVO_CONFIG KEVO_ARCHIVE KEVO_WORKER_EXE
export KEVO_KEY_FILE=$tmp/no-keys

# ---- install ----
$make -C "$root" --no-print-directory BUILD="$build" PREFIX="$prefix" DESTDIR="$dest" \
    install >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install failed"; }
for f in "$bin" "$dest$prefix/share/man/man1/kevo.1" "$share/prompts/system.md" \
         "$share/prompts/improve.md" "$share/docs/playbook/README.md" "$share/prices.json" \
         "$share/tasks/cpu/cpu_saxpy.c" "$share/examples/seeds/cpu_matmul.c"; do
    [ -f "$f" ] || fail "make install did not install ${f#"$dest"}"
done
[ -x "$bin" ] || fail "the installed kevo is not executable"
if command -v groff >/dev/null; then
    warn=$(groff -man -Tutf8 -ww -z "$dest$prefix/share/man/man1/kevo.1" 2>&1)
    [ -z "$warn" ] || fail "kevo.1: $warn"
fi

# ---- the installed kevo finds share/kevo ----
real_share=$(cd "$share" && pwd -P)
ver=$("$bin" version)
echo "$ver" | grep -qF "data: $real_share (beside the executable" ||
    fail "kevo version does not name the installed data directory: $ver"
case $build in
/*) built=$build/kevo ;;
*) built=$root/$build/kevo ;;
esac
case $(cd "$(dirname "$built")" && pwd -P)/ in
"$root"/*)   # a build dir in the checkout (not make BUILD=/elsewhere)
    ver=$("$built" version)
    echo "$ver" | grep -qF "data: $root (the source tree the executable lies in)" ||
        fail "the build in the checkout does not read the checkout: $ver" ;;
esac
ver=$(KEVO_DATA_DIR=$tmp/elsewhere "$bin" version)
echo "$ver" | grep -qF "data: $tmp/elsewhere (\$KEVO_DATA_DIR) [missing]" ||
    fail "KEVO_DATA_DIR is not the data directory: $ver"

# ---- an LLM search from outside the tree, with the installed templates ----
# the marker is only in the installed copies: a prompt that has it came from share/kevo
echo "$marker (system)" >>"$share/prompts/system.md"
for n in "$share"/docs/playbook/*.md; do
    echo "$marker (playbook)" >>"$n"
done
mkdir "$tmp/work"
cp "$share/tasks/cpu/cpu_saxpy.c" "$tmp/work/"
search() {   # search ARCHIVE: an offline search that records the LLM calls it wants
    (cd "$tmp/work" && "$bin" run cpu_saxpy.c --backend cpu --model openai:gpt-5 --offline \
        --budget 1 --time-cap 0.1 --archive "$1") >"$tmp/run.log" 2>&1
}
search "$tmp/a.db" || { cat "$tmp/run.log"; fail "the offline search failed"; }
grep -q "LLM call(s) wait for a reply" "$tmp/run.log" ||
    { cat "$tmp/run.log"; fail "the offline search recorded no LLM call"; }
(cd "$tmp/work" && "$bin" llm pending 1 --archive "$tmp/a.db" >"$tmp/pending.jsonl") ||
    fail "kevo llm pending failed"
grep -qF "$marker (system)" "$tmp/pending.jsonl" ||
    fail "the prompts did not come from $share/prompts"
grep -qF "$marker (playbook)" "$tmp/pending.jsonl" ||
    fail "the prompts' playbook notes did not come from $share/docs/playbook"

# without the installed templates the search fails, naming them: the source tree's are
# not read instead
mv "$share/prompts" "$tmp/prompts.away"
if search "$tmp/b.db"; then
    cat "$tmp/run.log"
    fail "the search ran without $share/prompts"
fi
grep -qF "$real_share/prompts/system.md: cannot read the prompt template" "$tmp/run.log" ||
    { cat "$tmp/run.log"; fail "the failure does not name the installed templates"; }
mv "$tmp/prompts.away" "$share/prompts"

# ---- one lookup: no other file of src/ or cli/ reads the source tree ----
others=$(grep -rlw KEVO_SOURCE_DIR "$root/src" "$root/cli" | grep -vxF "$root/src/ctl/datadir.c" ||
         true)
[ -z "$others" ] || fail "files that read the source tree without kevo_data_dir: $others"

# ---- uninstall ----
$make -C "$root" --no-print-directory BUILD="$build" PREFIX="$prefix" DESTDIR="$dest" \
    uninstall >"$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log"; fail "make uninstall failed"; }
left=$(find "$dest" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
[ ! -e "$share" ] || fail "make uninstall left the directory ${share#"$dest"}"
echo "install test: ok (installed, searched from share/kevo, uninstalled)"
