# shellcheck shell=bash
# Helpers of the guest scripts (sourced): RESULTS must be set first.
t() { cut -d' ' -f1 /proc/uptime; }  # guest uptime, s
result() { echo "$*" | tee -a "$RESULTS"; }
until_true() {  # until_true SECONDS COMMAND...: COMMAND every 0.1 s until it succeeds or SECONDS pass
  local deadline=$(( $(date +%s) + $1 ))
  shift
  until "$@"; do [ "$(date +%s)" -lt "$deadline" ] || return 1; sleep 0.1; done
}
start_broker() {  # start_broker DIR PORT: a mosquitto on 127.0.0.1:PORT (config and log in DIR); sets BROKER
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$2" > "$1/mosquitto.conf"
  mosquitto -c "$1/mosquitto.conf" > "$1/mosquitto.log" 2>&1 &
  # shellcheck disable=SC2034 # read by the scripts that source this file
  BROKER=$!
  for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$1/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
}
