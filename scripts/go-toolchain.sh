# Sourced by the scripts that build Go code (ensure-kfake, ensure-kgo-suite): where go is,
# and installing it when it is not. The sourcing script defines say() for its messages.
#
# The go on PATH, else /usr/local/go/bin/go, else Debian's golang-go (needs root or
# passwordless sudo); an older go fetches the toolchain a go.mod names from the module proxy.

find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  fi
}

install_go() {
  local sudo
  if [ "$(id -u)" -eq 0 ]; then
    sudo=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    say "go is missing and this user cannot install it (needs root)"
    return 1
  fi
  say "installing golang-go from Debian's packages"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go >/dev/null
}

# The go to build with, installing it if need be; nothing (and status 1) without one.
go_or_install() {
  local go
  go="$(find_go)"
  if [ -z "$go" ]; then
    install_go || return 1
    go="$(find_go)"
  fi
  [ -n "$go" ] && echo "$go"
}
