# shellcheck shell=bash
# Helpers of the guest scripts (sourced): RESULTS must be set first.
t() { cut -d' ' -f1 /proc/uptime; }  # guest uptime, s
result() { echo "$*" | tee -a "$RESULTS"; }
until_true() {  # until_true SECONDS COMMAND...: COMMAND every 0.1 s until it succeeds or SECONDS pass
  local deadline=$(( $(date +%s) + $1 ))
  shift
  until "$@"; do [ "$(date +%s)" -lt "$deadline" ] || return 1; sleep 0.1; done
}
