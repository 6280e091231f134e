# Sourced by the provisioning scripts (ensure-*): what to do when a part cannot be provisioned.
# A strict run -- CI's (CI=true) or one the user asks for (`make test STRICT=1`, which sets
# NULLBROKER_STRICT=1) -- fails at once, naming what it could not provision: a green run must
# mean every part ran. Elsewhere the script says why and exits 0, and the tests that need the
# part skip with the reason (a laptop without root still runs the rest). tests/support/skip_gate.py
# applies the same rule to the skips themselves. The sourcing script defines say().

strict_run() {
  local value
  for value in "${CI:-}" "${NULLBROKER_STRICT:-}"; do
    case "${value,,}" in
      1 | true | yes | on) return 0 ;;
    esac
  done
  return 1
}

# cannot_provision WHAT CONSEQUENCE: in a strict run say WHAT and that the run stops, exit 1;
# elsewhere say WHAT and CONSEQUENCE (which tests skip), exit 0.
cannot_provision() {
  if strict_run; then
    say "$1; a strict run (CI=${CI:-} NULLBROKER_STRICT=${NULLBROKER_STRICT:-}) stops here"
    exit 1
  fi
  say "$1; $2"
  exit 0
}
