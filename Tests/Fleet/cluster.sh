#!/usr/bin/env bash
# A RabbitMQ cluster (Debian's rabbitmq-server, MQTT plugin) and mosquitto edge brokers bridged to
# it, all on 127.0.0.1, all state under DIR, for the fleet-mode tests (Tests/Fleet/README.md).
#
#   cluster.sh start   DIR [N]                 N nodes (default 3) joined into one cluster
#   cluster.sh stop    DIR                     stops every node, edge and the epmd it started
#   cluster.sh kill    DIR I                   SIGKILLs node I
#   cluster.sh restart DIR I                   starts node I again and waits until it is back in the cluster
#   cluster.sh edge    DIR NAME PORT UPSTREAM_PORT...   a mosquitto on 127.0.0.1:PORT bridged to the cluster
#   cluster.sh edge-stop DIR NAME              stops that edge
#   cluster.sh status  DIR                     one line per node: up/down and its ports
#
# Ports, from FLEET_PORT_BASE (default 18830), node I of 1..9: MQTT BASE+I, AMQP BASE+10+I,
# Erlang distribution BASE+20+I; the CLI tools' distribution ports BASE+30..BASE+39; a private
# epmd on BASE+40. None of them is a port of a system rabbitmq-server (5672, 25672, 4369,
# 35672-35682, 1883), which this script never uses, reads or stops. MQTT login: anonymous,
# mapped to the user guest (guest may only log in over loopback, RabbitMQ's default).
# DIR/cluster.env records the ports for other scripts (cluster-facts.sh sources it).
set -euo pipefail

RABBIT_BIN=${RABBIT_BIN:-/usr/lib/rabbitmq/bin}
BASE=${FLEET_PORT_BASE:-18830}
EPMD_PORT=$((BASE + 40))
START_TIMEOUT=${FLEET_START_TIMEOUT:-120}

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

usage() { sed -n '5,11p' "$0" | sed 's/^# //' >&2; exit 2; }

mqtt_port() { echo $((BASE + $1)); }
amqp_port() { echo $((BASE + 10 + $1)); }
dist_port() { echo $((BASE + 20 + $1)); }
node_name() { echo "fleet$1@localhost"; }

# True when something listens on 127.0.0.1:PORT (bash's /dev/tcp, no extra tool).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# True when PID is alive and is one of ours: its environment carries FLEET_CLUSTER_DIR=DIR.
ours() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/environ" ] || return 1
  { tr '\0' '\n' < "/proc/$pid/environ"; } 2> /dev/null | grep -qxF "FLEET_CLUSTER_DIR=$DIR"
}

pid_of() { cat "$1" 2>/dev/null || true; }

# The environment of node I for rabbitmq-server and the CLI tools (rabbitmqctl, rabbitmq-plugins).
node_env() {
  local i=$1
  export FLEET_CLUSTER_DIR=$DIR
  export HOME=$DIR # the Erlang cookie is $HOME/.erlang.cookie, for the nodes and the CLI alike
  export ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=$EPMD_PORT
  export RABBITMQ_CONF_ENV_FILE=$DIR/rabbitmq-env.conf # empty: /etc/rabbitmq/rabbitmq-env.conf is not read
  export RABBITMQ_NODENAME
  RABBITMQ_NODENAME=$(node_name "$i")
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT
  RABBITMQ_NODE_PORT=$(amqp_port "$i")
  export RABBITMQ_DIST_PORT
  RABBITMQ_DIST_PORT=$(dist_port "$i")
  export RABBITMQ_CONFIG_FILE=$DIR/node$i/rabbitmq.conf
  export RABBITMQ_ADVANCED_CONFIG_FILE=$DIR/node$i/advanced.config
  export RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins
  export RABBITMQ_MNESIA_BASE=$DIR/node$i/mnesia
  export RABBITMQ_LOG_BASE=$DIR/node$i/log
  export RABBITMQ_PID_FILE=$DIR/node$i/pid
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_CTL_DIST_PORT_MIN=$((BASE + 30)) RABBITMQ_CTL_DIST_PORT_MAX=$((BASE + 39))
}

# rabbitmqctl against node I, in a subshell so the environment does not leak.
ctl() {
  local i=$1
  shift
  (node_env "$i" && "$RABBIT_BIN/rabbitmqctl" -n "$(node_name "$i")" "$@")
}

write_node_config() {
  local i=$1
  mkdir -p "$DIR/node$i/mnesia" "$DIR/node$i/log"
  cat > "$DIR/node$i/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$(amqp_port "$i")
mqtt.listeners.tcp.default = 127.0.0.1:$(mqtt_port "$i")
mqtt.allow_anonymous = true
mqtt.default_user = guest
mqtt.default_pass = guest
mqtt.vhost = /
mqtt.exchange = amq.topic
mqtt.durable_queue_type = ${FLEET_MQTT_DURABLE_QUEUE_TYPE:-classic}
log.console = false
log.file.level = info
EOF
  printf '[].\n' > "$DIR/node$i/advanced.config"
}

start_node() {
  local i=$1
  (
    node_env "$i"
    cd "$DIR/node$i"
    setsid "$RABBIT_BIN/rabbitmq-server" < /dev/null > "$DIR/node$i/log/stdout.log" 2>&1 &
  )
}

# Waits until node I has booted (its pid file and the rabbit application).
await_node() {
  local i=$1
  local pidfile=$DIR/node$i/pid deadline=$((SECONDS + START_TIMEOUT))
  while [ ! -s "$pidfile" ]; do
    [ $SECONDS -lt $deadline ] || die "node $i wrote no pid file in ${START_TIMEOUT}s (see $DIR/node$i/log)"
    sleep 0.2
  done
  ctl "$i" -q wait "$pidfile" --timeout "$START_TIMEOUT" > /dev/null \
    || die "node $i did not start (see $DIR/node$i/log)"
}

# Waits until node I reports all N nodes running and its MQTT listener accepts an MQTT session.
await_clustered() {
  local i=$1 n=$2 deadline=$((SECONDS + START_TIMEOUT)) running
  while :; do
    running=$(ctl "$i" -q cluster_status --formatter json 2>/dev/null \
      | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["running_nodes"]))' 2>/dev/null || echo 0)
    [ "$running" = "$n" ] && break
    [ $SECONDS -lt $deadline ] || die "node $i sees $running of $n nodes running after ${START_TIMEOUT}s"
    sleep 1
  done
  while ! mosquitto_pub -h 127.0.0.1 -p "$(mqtt_port "$i")" -i "fleet-probe-$i" -q 1 -t fleet/probe -n 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || die "node $i: MQTT port $(mqtt_port "$i") takes no session after ${START_TIMEOUT}s"
    sleep 0.5
  done
}

load_env() {
  [ -f "$DIR/cluster.env" ] || die "$DIR/cluster.env missing: no cluster was started in $DIR"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
}

cmd_start() {
  local n=${1:-3} t0=$SECONDS i
  [[ $n =~ ^[1-9]$ ]] || die "N must be 1..9"
  case ${FLEET_MQTT_DURABLE_QUEUE_TYPE:-classic} in classic | quorum) ;; *) die "FLEET_MQTT_DURABLE_QUEUE_TYPE: classic or quorum" ;; esac
  command -v mosquitto_pub > /dev/null || die "mosquitto_pub missing (apt-get install mosquitto-clients)"
  [ -x "$RABBIT_BIN/rabbitmq-server" ] || die "$RABBIT_BIN/rabbitmq-server missing (apt-get install rabbitmq-server)"
  [ ! -f "$DIR/cluster.env" ] || die "$DIR already holds a cluster: cluster.sh stop $DIR, or use a new DIR"
  for p in "$EPMD_PORT" $(for i in $(seq "$n"); do mqtt_port "$i"; amqp_port "$i"; dist_port "$i"; done); do
    ! port_open "$p" || die "127.0.0.1:$p is in use"
  done
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  umask 077
  : > "$DIR/rabbitmq-env.conf"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 'a-f' 'A-F' > "$DIR/.erlang.cookie"
  chmod 400 "$DIR/.erlang.cookie"
  printf '[rabbitmq_mqtt].\n' > "$DIR/enabled_plugins"
  umask 022
  {
    echo "FLEET_N=$n"
    echo "FLEET_PORT_BASE=$BASE"
    echo "FLEET_EPMD_PORT=$EPMD_PORT"
    echo "FLEET_MQTT_DURABLE_QUEUE_TYPE=${FLEET_MQTT_DURABLE_QUEUE_TYPE:-classic}"
    echo "FLEET_MQTT_PORTS=\"$(for i in $(seq "$n"); do mqtt_port "$i"; done | xargs)\""
    echo "FLEET_NODES=\"$(for i in $(seq "$n"); do node_name "$i"; done | xargs)\""
  } > "$DIR/cluster.env"

  # Our own epmd, on loopback and on our port, so a system epmd (4369) is neither used nor needed.
  (
    # shellcheck disable=SC2030 # exported in this subshell on purpose: only epmd carries our mark
    export FLEET_CLUSTER_DIR=$DIR
    setsid epmd -address 127.0.0.1 -port "$EPMD_PORT" < /dev/null > "$DIR/epmd.log" 2>&1 &
    echo $! > "$DIR/epmd.pid"
  )
  for _ in $(seq 50); do port_open "$EPMD_PORT" && break; sleep 0.1; done
  port_open "$EPMD_PORT" || die "epmd did not listen on 127.0.0.1:$EPMD_PORT"

  for i in $(seq "$n"); do write_node_config "$i"; start_node "$i"; done
  for i in $(seq "$n"); do await_node "$i"; done
  log "$n nodes booted after $((SECONDS - t0))s; joining"
  for i in $(seq 2 "$n"); do
    for step in stop_app "join_cluster $(node_name 1)" start_app; do
      # shellcheck disable=SC2086 # the step is a command and its argument
      ctl "$i" -q $step >> "$DIR/ctl.log" 2>&1 || { tail -20 "$DIR/ctl.log" >&2; die "node $i: $step failed"; }
    done
  done
  for i in $(seq "$n"); do await_clustered "$i" "$n"; done
  for i in $(seq "$n"); do
    echo "node $i $(node_name "$i") mqtt 127.0.0.1:$(mqtt_port "$i") amqp $(amqp_port "$i") dist $(dist_port "$i") pid $(pid_of "$DIR/node$i/pid")"
  done
  echo "epmd 127.0.0.1:$EPMD_PORT; cluster of $n ready in $((SECONDS - t0))s"
}

cmd_kill() {
  local i=${1:?node number} pid
  load_env
  pid=$(pid_of "$DIR/node$i/pid")
  ours "$pid" || die "node $i is not running"
  kill -KILL "$pid"
  for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  echo "node $i $(node_name "$i") killed (pid $pid)"
}

cmd_restart() {
  local i=${1:?node number} t0=$SECONDS
  load_env
  ! ours "$(pid_of "$DIR/node$i/pid")" || die "node $i is still running"
  rm -f "$DIR/node$i/pid"
  start_node "$i"
  await_node "$i"
  await_clustered "$i" "$FLEET_N"
  echo "node $i $(node_name "$i") back in the cluster after $((SECONDS - t0))s (pid $(pid_of "$DIR/node$i/pid"))"
}

# A mosquitto on 127.0.0.1:PORT with one bridge to the cluster (see Tests/Fleet/README.md for why
# each setting): every topic both ways at QoS 1, the upstream nodes tried in the order given.
cmd_edge() {
  local name=${1:?name} port=${2:?port} e user addresses=""
  shift 2
  [ $# -ge 1 ] || die "edge needs at least one upstream port"
  load_env
  [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || die "edge name: letters, digits, - and _ only"
  e=$DIR/edge-$name
  ! ours "$(pid_of "$e/pid")" || die "edge $name is already running"
  ! port_open "$port" || die "127.0.0.1:$port is in use"
  for p in "$@"; do addresses+=" 127.0.0.1:$p"; done
  mkdir -p "$e"
  rm -f "$e/mosquitto.log"
  user=$(id -un)
  cat > "$e/mosquitto.conf" <<EOF
user $user
listener $port 127.0.0.1
allow_anonymous true
persistence false
log_dest file $e/mosquitto.log
log_type error
log_type warning
log_type notice
log_type information
connection_messages true
log_timestamp_format %Y-%m-%dT%H:%M:%S

connection fleet-$name
address$addresses
round_robin ${FLEET_EDGE_ROUND_ROBIN:-true}
remote_clientid fleet-edge-$name
local_clientid fleet-edge-$name-local
bridge_protocol_version mqttv311
try_private ${FLEET_EDGE_TRY_PRIVATE:-false}
cleansession ${FLEET_EDGE_CLEANSESSION:-true}
local_cleansession ${FLEET_EDGE_LOCAL_CLEANSESSION:-false}
notifications false
keepalive_interval 10
restart_timeout 1 5
start_type automatic
EOF
  local spec
  IFS=';' read -ra specs <<< "${FLEET_EDGE_TOPICS:-# out 1;# in 0}"
  for spec in "${specs[@]}"; do echo "topic $spec" >> "$e/mosquitto.conf"; done
  (
    # shellcheck disable=SC2031 # exported in this subshell on purpose: only the edge broker carries our mark
    export FLEET_CLUSTER_DIR=$DIR
    setsid mosquitto -c "$e/mosquitto.conf" < /dev/null > "$e/stdout.log" 2>&1 &
    echo $! > "$e/pid"
  )
  local deadline=$((SECONDS + 20)) sub
  until port_open "$port"; do
    [ $SECONDS -lt $deadline ] || die "edge $name did not listen on $port (see $e/mosquitto.log)"
    sleep 0.1
  done
  # Ready when a message published on the cluster comes out of the edge: the bridge is connected
  # and subscribed (FLEET_EDGE_WAIT=0: do not wait).
  if [ "${FLEET_EDGE_WAIT:-1}" = 0 ]; then
    echo "edge $name 127.0.0.1:$port bridge to$addresses started (pid $(pid_of "$e/pid"))"
    return
  fi
  mosquitto_sub -h 127.0.0.1 -p "$port" -t "fleet/probe/edge-$name" -C 1 -W 20 > "$e/probe.out" 2>&1 &
  sub=$!
  while kill -0 "$sub" 2> /dev/null && [ $SECONDS -lt $deadline ]; do
    mosquitto_pub -h 127.0.0.1 -p "$1" -t "fleet/probe/edge-$name" -m ready 2> /dev/null || true
    sleep 0.3
  done
  wait "$sub" 2> /dev/null || die "edge $name: no message from the cluster through the bridge in 20s (see $e/mosquitto.log)"
  echo "edge $name 127.0.0.1:$port bridged to$addresses (pid $(pid_of "$e/pid"))"
}

cmd_edge_stop() {
  local name=${1:?name} pid
  pid=$(pid_of "$DIR/edge-$name/pid")
  ours "$pid" || die "edge $name is not running"
  kill -TERM "$pid"
  for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  echo "edge $name stopped"
}

cmd_stop() {
  local pid pids=() e i
  [ -d "$DIR" ] || die "$DIR missing"
  DIR=$(cd "$DIR" && pwd)
  for e in "$DIR"/edge-*/pid; do
    [ -f "$e" ] || continue
    pid=$(pid_of "$e")
    if ours "$pid"; then kill -TERM "$pid" && pids+=("$pid"); fi
  done
  for i in $(seq 9); do
    pid=$(pid_of "$DIR/node$i/pid")
    if ours "$pid"; then kill -TERM "$pid" && pids+=("$pid"); fi # RabbitMQ stops cleanly on SIGTERM
  done
  local deadline=$((SECONDS + 30))
  for pid in "${pids[@]}"; do
    while [ -d "/proc/$pid" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if ours "$pid"; then log "pid $pid still running after SIGTERM: SIGKILL"; kill -KILL "$pid" 2> /dev/null || true; fi
  done
  # What else a node started (erl_child_setup, inet_gethost) exits with it; sweep any left over.
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    case $(cat "/proc/$pid/comm" 2> /dev/null) in beam.smp | erl_child_setup | inet_gethost | rabbitmq-server | mosquitto) ;; *) continue ;; esac
    if ours "$pid"; then
      kill -KILL "$pid" 2> /dev/null || true
    fi
  done
  pid=$(pid_of "$DIR/epmd.pid")
  if ours "$pid"; then
    kill -TERM "$pid"
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  fi
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$pid" = $$ ] || ! ours "$pid" || log "left running: pid $pid $(cat "/proc/$pid/comm" 2> /dev/null)"
  done
  rm -f "$DIR/cluster.env"
  echo "stopped (${#pids[@]} brokers)"
}

cmd_status() {
  local i pid state
  load_env
  for i in $(seq "$FLEET_N"); do
    pid=$(pid_of "$DIR/node$i/pid")
    if ours "$pid"; then state="up pid $pid rss_kb $(awk '/VmRSS/ {print $2}' "/proc/$pid/status")"; else state=down; fi
    echo "node $i $(node_name "$i") mqtt $(mqtt_port "$i") $state"
  done
}

[ $# -ge 2 ] || usage
cmd=$1
DIR=$2
shift 2
case $cmd in
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  kill) DIR=$(cd "$DIR" && pwd); cmd_kill "$@" ;;
  restart) DIR=$(cd "$DIR" && pwd); cmd_restart "$@" ;;
  edge) DIR=$(cd "$DIR" && pwd); cmd_edge "$@" ;;
  edge-stop) DIR=$(cd "$DIR" && pwd); cmd_edge_stop "$@" ;;
  status) DIR=$(cd "$DIR" && pwd); cmd_status ;;
  *) usage ;;
esac
