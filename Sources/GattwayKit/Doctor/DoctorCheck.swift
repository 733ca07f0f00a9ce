import JSON

/// One line of `gattway doctor`: what was checked, how it went, what was found and what to do.
struct DoctorCheck: Sendable, Equatable {
    /// How a check went. Only ``fail`` makes `gattway doctor` exit non-zero.
    enum Status: String, Sendable, Comparable {
        case ok, warn, fail

        static func < (lhs: Status, rhs: Status) -> Bool { lhs.rank < rhs.rank }
        private var rank: Int {
            switch self {
            case .ok: 0
            case .warn: 1
            case .fail: 2
            }
        }
    }

    /// A short name for the area checked: `config`, `bus`, `bluez`, `adapter`, `broker`…
    var name: String
    var status: Status
    /// What was found, e.g. `hci0 (00:AA:01:00:00:00) is powered off`.
    var found: String
    /// What to do about it; empty when nothing needs doing.
    var fix: String = ""
    /// Set on the checks of an invalid configuration, so the exit code is 78.
    var configProblem = false

    static func ok(_ name: String, _ found: String) -> DoctorCheck {
        DoctorCheck(name: name, status: .ok, found: found)
    }

    static func warn(_ name: String, _ found: String, _ fix: String = "") -> DoctorCheck {
        DoctorCheck(name: name, status: .warn, found: found, fix: fix)
    }

    static func fail(_ name: String, _ found: String, _ fix: String = "") -> DoctorCheck {
        DoctorCheck(name: name, status: .fail, found: found, fix: fix)
    }

    /// `fail  adapter   hci0 is powered off — bluetoothctl power on`.
    var line: String {
        let head = status.rawValue.padding(to: 6) + name.padding(to: 10)
        return head + found + (fix.isEmpty ? "" : " — " + fix)
    }

    var json: JSONValue {
        .object([
            (key: "check", value: .string(name)), (key: "status", value: .string(status.rawValue)),
            (key: "found", value: .string(found)), (key: "fix", value: fix.isEmpty ? .null : .string(fix)),
        ])
    }
}
