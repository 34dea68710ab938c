#!/bin/sh
# Reruns the README's examples and writes their output back, so the README shows what dlsim
# prints today. An example is an indented block of "$ dlsim ..." commands (a trailing "\"
# continues one on the next line) right after a line "<!-- example -->"; its output lines are
# replaced by the command's stdout and stderr, run from the repository root with "dlsim" meaning
# the binary. "<!-- example: slow -->" marks one that takes seconds: --fast leaves it as it is.
#
#   scripts/readme-examples.sh [--check] [--fast] [--dlsim BINARY]
#
# --check rewrites nothing: it prints the diff and exits 1 when the README differs from what
# the binary prints (the test suite runs it). The binary defaults to build/release/dlsim.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dlsim="$root/build/release/dlsim"
check=0
fast=0
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --fast) fast=1 ;;
    --dlsim) [ $# -ge 2 ] || { echo "readme-examples.sh: --dlsim needs a path" >&2; exit 2; }
             dlsim="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "readme-examples.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$dlsim" in /*) ;; *) dlsim="$(pwd)/$dlsim" ;; esac
[ -x "$dlsim" ] || { echo "readme-examples.sh: no dlsim binary at $dlsim (build it, or --dlsim PATH)" >&2; exit 2; }

cd "$root"
new=$(mktemp)
trap 'rm -f "$new"' EXIT INT TERM
export DLSIM_DATA_DIR="$root"
DLSIM_BIN="$dlsim" FAST="$fast" awk '
# A sanitized build (the test suite'"'"'s) warns on stderr each time SimGrid switches stacks: not
# dlsim'"'"'s output, so not the README'"'"'s.
function asan_notice(line) {
  return line ~ /ASan is ignoring requested __asan_handle_no_return/ ||
         line == "False positive error reports may follow" ||
         line == "For details see https://github.com/google/sanitizers/issues/189"
}
function run(cmd,    line, full) {
  sub(/^dlsim /, ENVIRON["DLSIM_BIN"] " ", cmd)
  full = "(" cmd ") 2>&1"
  while ((full | getline line) > 0)
    if (!asan_notice(line))
      print (line == "" ? "" : "    " line)
  close(full)
}
function finish(    i) {
  if (cmd != "")
    run(cmd)
  cmd = ""
  for (i = 0; i < blanks; i++)
    print ""
  blanks = 0
  state = 0
}
function start(line) {
  if (cmd != "")
    run(cmd)
  print line
  cmd = substr(line, 7)
  more = sub(/\\$/, "", cmd)
}
# state 0: prose; 1: after a marker, before its block; 2: in the block
/^<!-- example -->$/ || (/^<!-- example: slow -->$/ && ENVIRON["FAST"] != "1") {
  if (state == 2) finish()
  print; state = 1; next
}
state == 1 && /^    \$ / { state = 2; cmd = ""; blanks = 0; start($0); next }
state == 1 && /^$/ { print; next }
state == 1 { state = 0 }
state == 2 && more && /^    / {
  print
  line = $0
  sub(/^ +/, "", line)
  more = sub(/\\$/, "", line)
  cmd = cmd " " line
  next
}
state == 2 && /^    \$ / { blanks = 0; start($0); next }
state == 2 && /^    / { blanks = 0; next }
state == 2 && /^$/ { blanks++; next }
state == 2 { finish() }
{ print }
END { if (state == 2) finish() }
' README.md >"$new"

if [ "$check" = 1 ]; then
  if ! diff -u README.md "$new"; then
    echo "readme-examples.sh: README.md differs from what $dlsim prints; run scripts/readme-examples.sh" >&2
    exit 1
  fi
else
  cat "$new" >README.md
fi
