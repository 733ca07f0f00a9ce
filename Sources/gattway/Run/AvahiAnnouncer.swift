import DBus
import ESPHomeAPI
import EventLoop

/// Announces the Bluetooth proxy as `_esphomelib._tcp` through Avahi's D-Bus API on the system bus
/// (org.freedesktop.Avahi: `Server.EntryGroupNew`, then `EntryGroup.AddService` and `Commit`), so
/// Home Assistant discovers it like an ESPHome device. Without Avahi the caller logs a warning and
/// the proxy is added by address instead (docs/ha-bluetooth-proxy.md).
struct AvahiAnnouncer: Sendable {
    let connection: DBusConnection
    let group: DBusObjectPath

    static let service = "org.freedesktop.Avahi"
    static let serviceType = "_esphomelib._tcp"

    /// The TXT record of an ESPHome device's announcement, as Home Assistant reads it: `mac`
    /// (12 lower-case hex digits, its unique id), `version`, `friendly_name`, `network`, `platform`,
    /// `board`, the project, and `api_encryption` when the API is encrypted.
    static func txt(_ configuration: APIServerConfiguration) -> [String] {
        var records = [
            "friendly_name=\(configuration.friendlyName)", "version=\(APIServer.esphomeVersion)",
            "mac=\(configuration.macAddress.lowercased().filter { $0 != ":" })", "platform=host", "board=gattway",
            "network=ethernet", "project_name=gattway.gattway", "project_version=\(configuration.version)",
        ]
        if case .noise = configuration.encryption {
            records.append("api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256")
        }
        return records
    }

    /// Connects to the system bus and publishes the service; throws when the bus or Avahi is
    /// missing or refuses (the caller's warning says why).
    static func announce(_ configuration: APIServerConfiguration, port: UInt16, on loop: EventLoop) async throws
        -> AvahiAnnouncer
    {
        let connection = try await DBusConnection.connect(to: .system, on: loop)
        do {
            let reply = try await connection.call(
                destination: service, path: "/", interface: "org.freedesktop.Avahi.Server", method: "EntryGroupNew",
                timeout: .seconds(5))
            guard let group = reply.first?.objectPath else {
                throw DBusError(.failed, "EntryGroupNew returned no object path")
            }
            let txt = DBusValue.array(
                .array(.byte), txt(configuration).map { .array(.byte, Array($0.utf8).map(DBusValue.byte)) })
            _ = try await connection.call(
                destination: service, path: group, interface: "org.freedesktop.Avahi.EntryGroup",
                method: "AddService",
                arguments: [
                    // Every interface (-1), IPv4 only (AVAHI_PROTO_INET, 0): the server listens on IPv4.
                    .int32(-1), .int32(0), .uint32(0), .string(configuration.name), .string(serviceType),
                    .string(""), .string(""), .uint16(port), txt,
                ], timeout: .seconds(5))
            _ = try await connection.call(
                destination: service, path: group, interface: "org.freedesktop.Avahi.EntryGroup", method: "Commit",
                timeout: .seconds(5))
            return AvahiAnnouncer(connection: connection, group: group)
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Withdraws the announcement (the group is freed) and closes the connection.
    func withdraw() async {
        _ = try? await connection.call(
            destination: Self.service, path: group, interface: "org.freedesktop.Avahi.EntryGroup", method: "Free",
            timeout: .seconds(2))
        await connection.close()
    }
}
