import Bluetooth
import DBus
import EventLoop

/// The advertising schedule: when each device of a scanning adapter sends its next report
/// (docs/simulator.md, "Advertising timing"). One loop timer for all devices, armed for the
/// earliest deadline; each device decides its own timing (``SimulatedDevice/firstEventDelay(wall:)``,
/// ``SimulatedDevice/takeAdvertisingEvent(due:now:wall:)``) and handles its report
/// (``SimulatedDevice/report(in:)``).
extension BlueZSimulator {
    /// Puts every advertising device of `adapter` on the schedule (a scan started).
    func startAdvertising(_ adapter: SimulatedAdapter) {
        let (now, wall) = AdvertisingClock.now()
        for path in deviceOrder {
            guard let device = devices[path], device.adapter === adapter, device.spec.interval > 0 else { continue }
            schedule(device, now: now, wall: wall)
        }
        armSchedule()
    }

    /// Takes the devices of `adapter` off the schedule (its scan stopped).
    func unschedule(_ adapter: SimulatedAdapter) {
        schedule.removeAll { devices[$0]?.adapter === adapter }
    }

    /// Puts a device that a scan starts to hear at `now` (`wall` is the same moment on the wall
    /// clock) on the schedule, at its first advertising event. The caller arms the schedule.
    func schedule(_ device: SimulatedDevice, now: UInt64, wall: Double) {
        schedule.insert(device.path, at: AdvertisingClock.later(now, by: device.firstEventDelay(wall: wall)))
    }

    func armSchedule() {
        guard let earliest = schedule.earliest else { return }
        if let scheduleTimer { loop.cancelTimer(scheduleTimer) }
        let now = EventLoop.now()
        let delay = earliest > now ? Double(earliest - now) / 1e9 : 0
        scheduleTimer = after(delay) { self.advertisingTick() }
    }

    func advertisingTick() {
        scheduleTimer = nil
        let (now, wall) = AdvertisingClock.now()
        var handled = 0
        while handled < 10_000, let (deadline, path) = schedule.popDue(now: now) {
            handled += 1
            guard let device = devices[path], isScanning(device.adapter), device.adapter.powered,
                device.spec.interval > 0
            else { continue }
            let next = device.takeAdvertisingEvent(due: deadline, now: now, wall: wall)
            // A report, unless the device is silent while connected; its times go to the
            // recording, if one runs.
            if device.spec.advertisesWhileConnected || !device.isConnected {
                device.report(in: self)
                reportTimes?.append(
                    ReportTime(address: device.spec.address, due: deadline, sent: now, sequence: device.reportsMade))
                device.reportsMade &+= 1
            }
            schedule.insert(path, at: next)
        }
        armSchedule()
    }
}
