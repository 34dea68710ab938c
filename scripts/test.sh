#!/bin/sh
# Builds dlsim with AddressSanitizer + UndefinedBehaviorSanitizer (warnings are errors) and runs
# the Criterion suite. SimGrid runs its actors on threads here: ASan understands thread stacks.
# Before it, every README example (the slow ones too, which the suite skips) is rerun on an
# optimised build and must print what the README shows. A sanitizer report from a test's own
# process (Criterion runs each test in a worker whose exit status does not fail the test) fails
# the run too.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDLSIM_TESTS=OFF >/dev/null
cmake --build build/release -j2 --target dlsim
./scripts/readme-examples.sh --check --dlsim build/release/dlsim
cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Debug -DDLSIM_SANITIZE=ON -DDLSIM_WERROR=ON >/dev/null
cmake --build build/test -j2
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
log=build/test/suite.log
status=0
DLSIM_SIMGRID_CONTEXTS=thread ./build/test/dlsim_tests -j2 >"$log" 2>&1 || status=$?
cat "$log"
if grep -q -e "ERROR: LeakSanitizer" -e "ERROR: AddressSanitizer" -e "runtime error:" "$log"; then
  echo "test.sh: a sanitizer reported an error above" >&2
  exit 1
fi
exit "$status"
