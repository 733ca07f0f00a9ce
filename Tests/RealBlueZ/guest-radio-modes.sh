#!/bin/bash
# In the VM: the D-Bus path and the management path, both active (bluetoothd's discovery), then
# the management path in scan_mode passive, one run each at each rate of RBZ_RADIO_RATES, for the
# whole system's CPU per report (BENCHMARKS.md, "Both advertisement paths on the real kernel" and
# "Passive scanning"; `make bench SUITES=radio` runs it). Results in out/radio/dbus-R, mgmt-R and
# mgmt-passive-R. In passive mode no discovery runs: bluetoothd gets the
# kernel's reports only as Advertisement Monitor events, which it ignores without -E, and signals
# nothing; gattway reads the kernel's reports alone.
#   guest-radio-modes.sh BIN-DIR   (with run-vm.sh; RBZ_RADIO_RATES, RBZ_RADIO_SECONDS, RBZ_RADIO_DEVICES)
HERE=$(cd "$(dirname "$0")" && pwd)
RBZ_RADIO_PATHS="dbus mgmt" "$HERE/guest-radio.sh" "$1"
RBZ_RADIO_PATHS=mgmt RBZ_RADIO_SCAN_MODE=passive "$HERE/guest-radio.sh" "$1"
