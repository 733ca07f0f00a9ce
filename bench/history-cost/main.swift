// The readings history's cost per reading (BENCHMARKS.md, "The readings history"): `devices`
// devices of three numeric readings each (as a BTHome or ATC frame), each once a second for
// `seconds` seconds of wall time, timed on the monotonic clock.
import Glibc

func monotonic() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let devices = arguments.first ?? 200
let seconds = arguments.dropFirst().first ?? 3000
let history = ReadingHistory()
let names = ["temperature", "humidity", "battery"]
var frames = (0..<devices).map { device in
    names.map { Reading(name: $0, value: .number(Double(device % 37))) }
}
let start = monotonic()
for second in 0..<seconds {
    for device in 0..<devices {
        frames[device][0].value = .number(Double(second % 50) + 0.01 * Double(device))
        history.record(
            DeviceID(slot: Int32(device)), frames[device],
            wall: 1_796_000_000 + Double(second) + Double(device) / Double(devices))
    }
}
let elapsed = monotonic() - start
let calls = Double(devices * seconds)
print(
    "\(devices) devices × \(seconds) s: \(history.seriesCount) series kept, \(history.refused) refused; "
        + "\(Int(elapsed / calls * 1e9)) ns per frame of 3 readings, \(Int(elapsed / calls / 3 * 1e9)) ns per reading")
