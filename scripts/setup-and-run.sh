#!/bin/sh
# Fresh Debian machine -> dependencies, an optimised build, and a real simulation:
# the Horovod ResNet-50 step on two V100 nodes, then `dlsim validate` (predicted vs measured).
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDLSIM_TESTS=OFF >/dev/null
cmake --build build/release -j2
./build/release/dlsim run -c v100-edr -w resnet50-horovod
echo
./build/release/dlsim validate
