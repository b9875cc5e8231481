#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln builds against (README, "Dependencies"), but only
# those that are missing. Safe to run any number of times: when everything is present it
# changes nothing and does not touch the network.
set -euo pipefail

PACKAGES=(
  cmake
  ninja-build
  g++
  libtbb-dev
  libspdlog-dev
  libfmt-dev
  doctest-dev
  libasmjit-dev
  llvm-19-dev
  libprotobuf-dev
  libonnx-dev
  libonnx-testdata
  clang
  libclang-rt-14-dev
)
# Optional: installed where the distribution has them, never required (without them, the
# tests that need them skip): HIPRTC, for the GPU source printer's HIP compile tests.
OPTIONAL_PACKAGES=(
  libamdhip64-dev
)

is_installed() {
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install_deps.sh: dpkg-query not found; this script supports Debian 12 (bookworm) only." >&2
  echo "Install these packages (or their equivalents) yourself: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! is_installed "$pkg"; then
    missing+=("$pkg")
  fi
done

optional_missing=()
for pkg in "${OPTIONAL_PACKAGES[@]}"; do
  if ! is_installed "$pkg"; then
    optional_missing+=("$pkg")
  fi
done

# Tries the optional packages; a failure is only reported.
install_optional() {
  [[ ${#optional_missing[@]} -eq 0 ]] && return 0
  if "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${optional_missing[@]}"; then
    echo "install_deps.sh: installed the optional ${optional_missing[*]}"
  else
    echo "install_deps.sh: the optional ${optional_missing[*]} could not be installed (the tests that need them will skip)"
  fi
}

if [[ ${#missing[@]} -eq 0 && ${#optional_missing[@]} -eq 0 ]]; then
  echo "install_deps.sh: all dependencies present"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  elif [[ ${#missing[@]} -eq 0 ]]; then
    echo "install_deps.sh: all dependencies present (not root: the optional ${optional_missing[*]} stay missing)"
    exit 0
  else
    echo "install_deps.sh: missing packages (${missing[*]}) and not root, and sudo is not available." >&2
    exit 1
  fi
fi

# Only optional packages are missing: try them where the package lists know them (no
# network otherwise).
if [[ ${#missing[@]} -eq 0 ]]; then
  known=()
  for pkg in "${optional_missing[@]}"; do
    if apt-cache show "$pkg" >/dev/null 2>&1; then
      known+=("$pkg")
    fi
  done
  if [[ ${#known[@]} -eq 0 ]]; then
    echo "install_deps.sh: all dependencies present (the optional ${optional_missing[*]} are not in the package lists)"
    exit 0
  fi
  optional_missing=("${known[@]}")
  install_optional
  exit 0
fi

echo "install_deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
install_optional

# Check that the installation really happened (a held or broken package would otherwise
# surface later as a confusing CMake error).
still_missing=()
for pkg in "${missing[@]}"; do
  if ! is_installed "$pkg"; then
    still_missing+=("$pkg")
  fi
done
if [[ ${#still_missing[@]} -ne 0 ]]; then
  echo "install_deps.sh: failed to install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install_deps.sh: installed ${missing[*]}"
