# shellcheck shell=bash
# Helpers of the guest scripts (sourced): RESULTS must be set first; start_gateway needs BIN.
t() { cut -d' ' -f1 /proc/uptime; }  # guest uptime, s
result() { echo "$*" | tee -a "$RESULTS"; }
# until_true SECONDS COMMAND...: COMMAND every 0.1 s until it succeeds (status 0) or SECONDS of
# wall-clock time have passed (status 1). A count of tries is no bound here: each try forks, and
# under a loaded emulation one try took 0.65 s — a 600-try wait once lasted 395 s.
until_true() {
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
# start_gateway CONFIG LOG [PATTERN [SECONDS]]: `gattway run` in the background (sets GATEWAY),
# then waits until LOG has a line matching PATTERN (default "gateway started"; "" waits for
# nothing) or the gateway has exited, at most SECONDS (default 60). GATEWAY_ARGS: more arguments.
start_gateway() {
  # shellcheck disable=SC2086 # GATEWAY_ARGS: more arguments, split on spaces
  "$BIN/gattway" run --config "$1" ${GATEWAY_ARGS:-} > "$2" 2>&1 &
  GATEWAY=$!
  [ -n "${3-gateway started}" ] || return 0
  until_true "${4:-60}" gateway_said "$2" "${3-gateway started}"
}
gateway_said() { grep -qE -- "$2" "$1" || ! kill -0 "$GATEWAY" 2>/dev/null; }  # gateway_said LOG PATTERN (or exited)
stop_gateway() {  # SIGTERM to $GATEWAY, SIGKILL after 10 s
  kill -TERM "$GATEWAY" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$GATEWAY" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$GATEWAY" 2>/dev/null
}
