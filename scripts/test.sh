#!/bin/sh
# Builds dlsim with AddressSanitizer + UndefinedBehaviorSanitizer (warnings are errors) and runs
# the Criterion suite. SimGrid runs its actors on threads here: ASan understands thread stacks.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Debug -DDLSIM_SANITIZE=ON -DDLSIM_WERROR=ON >/dev/null
cmake --build build/test -j2
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
DLSIM_SIMGRID_CONTEXTS=thread ./build/test/dlsim_tests -j2
