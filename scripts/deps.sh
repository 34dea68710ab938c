#!/bin/sh
# Installs dlsim's build dependencies from Debian packages when any is missing.
# Sourced by setup-and-run.sh and test.sh; needs root (or sudo) only if something is missing.
DLSIM_PACKAGES="build-essential cmake pkg-config libsimgrid-dev libglib2.0-dev libyaml-dev libcjson-dev libjemalloc-dev libprotobuf-c-dev protobuf-c-compiler libcriterion-dev libplplot-dev libopenmpi-dev openmpi-bin groff-base"
dlsim_missing=""
for pkg in $DLSIM_PACKAGES; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || dlsim_missing="$dlsim_missing $pkg"
done
if [ -n "$dlsim_missing" ]; then
  echo "dlsim: installing$dlsim_missing"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "dlsim: missing packages:$dlsim_missing (run as root or install them)" >&2; exit 2
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $dlsim_missing
fi
