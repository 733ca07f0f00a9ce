#!/bin/bash
# In the VM: the management path in scan_mode passive beside the D-Bus path (active: bluetoothd's
# discovery), one run each at each rate of RBZ_RADIO_RATES, for the whole system's CPU per report
# (BENCHMARKS.md, "Passive scanning"). In passive mode no discovery runs: bluetoothd gets the
# kernel's reports only as Advertisement Monitor events, which it ignores without -E, and signals
# nothing; gattway reads the kernel's reports alone.
#   guest-radio-modes.sh BIN-DIR   (with run-vm.sh; RBZ_RADIO_RATES, RBZ_RADIO_SECONDS, RBZ_RADIO_DEVICES)
HERE=$(cd "$(dirname "$0")" && pwd)
RBZ_RADIO_PATHS=dbus "$HERE/guest-radio.sh" "$1"
RBZ_RADIO_PATHS=mgmt RBZ_RADIO_SCAN_MODE=passive "$HERE/guest-radio.sh" "$1"
