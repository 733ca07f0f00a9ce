import Bluetooth
import ESPHomeAPI
import Gateway
import HTTPServer
import JSON

/// The page's fleet and proxy views and a device's actions (docs/web-page.md): what a device's
/// page may send it, the sending — answered when the device's response comes, or 504 — the
/// fleet as this gateway sees it, and the Bluetooth proxy's clients, slots and scanner.
extension WebSite {
    /// Seconds a page's request waits for its response before 504: the longest a command may
    /// wait for its device (`commands.ttl`), plus a connect and two GATT operations.
    var sendTimeout: Double {
        min(
            300, config.commands.ttl + config.bluetooth.connectTimeout + 2 * config.bluetooth.gattTimeout + 2)
    }

    func viewRoutes() -> [(method: String, path: String, route: Route)] {
        var routes: [(method: String, path: String, route: Route)] = [
            (
                "GET", "/api/page/actions",
                { [unowned self] request, _ in
                    guard let device = request.queryValue("device") else { return notFound }
                    return found(gateway.assumeLoopIsolated { $0.pageActions(of: device) })
                }
            ),
            ("GET", "/api/page/fleet", { [unowned self] _, _ in found(gateway.assumeLoopIsolated { $0.pageFleet }) }),
            ("GET", "/api/page/proxy", { [unowned self] _, _ in found(proxyServer?().map(Self.proxyView)) }),
        ]
        for kind in Gateway.pageSendKinds.sorted() {
            routes.append(
                (
                    "POST", "/api/page/send/" + kind,
                    { [unowned self] request, identity in send(kind, request, identity) }
                ))
        }
        return routes
    }

    /// A device's action from its page: handed to the core as the MQTT message a client would
    /// send; answered with that message's response (200, its `status` saying ok or not) when it
    /// comes, 400 when it was not sent, 504 when no response came within ``sendTimeout``.
    private func send(_ kind: String, _ request: HTTPRequest, _ identity: HTTPAuth.Identity) -> HTTPReply {
        let reply = DeferredReply(timeout: sendTimeout)
        let box = ReplyBox(reply)
        let start = gateway.assumeLoopIsolated { gateway in
            gateway.pageSend(kind, body: request.body) { [unowned self] response in
                loop.preconditionInLoop()
                box.reply.answer(HTTPResponse(status: 200, contentType: "application/json", body: Self.bytes(response)))
            }
        }
        switch start {
        case .refused(let reason):
            counters.refused(.badRequest)
            return json(.object([("status", .string("error")), ("error", .string(reason))]), status: 400)
        case .waiting(let token):
            log(.notice, "web: \(kind) sent from the page (\(Self.name(identity))): page-\(token)")
            reply.onAbandon = { [unowned self] in
                log(.warning, "web: \(kind) from the page (page-\(token)) got no response within \(Int(sendTimeout)) s")
                gateway.assumeLoopIsolated { $0.pageSendAbandoned(token) }
            }
            return .deferred(reply)
        }
    }

    /// The Bluetooth proxy for the page: `{"name", "listen", "encrypted", "scanner": {"mode",
    /// "configured_mode", "state"}, "clients": [{"peer", "info", "api_version",
    /// "connected_s", "advertisements", "connection_slots"}], "slots": {"free", "total",
    /// "connections": [{"address", "client", "connected"}]}}`. No key, no password.
    static func proxyView(_ server: APIServer) -> JSONValue {
        let configuration = server.configuration
        let encrypted: Bool =
            switch configuration.encryption {
            case .plaintext: false
            default: true
            }
        let slots = server.connectionSlots
        let clients: [JSONValue] = server.clientSummaries.map { client in
            .object([
                ("peer", .string(client.peer)), ("info", client.info.map(JSONValue.string) ?? .null),
                ("api_version", client.apiVersion.map(JSONValue.string) ?? .null),
                ("connected_s", .number(client.connectedSeconds.rounded())),
                ("advertisements", .bool(client.subscribedAdvertisements)),
                ("connection_slots", .bool(client.subscribedConnections)),
            ])
        }
        let connections: [JSONValue] = server.connectionSummaries.map { connection in
            .object([
                ("address", .string(BluetoothAddress(rawValue: connection.address).description)),
                ("client", connection.client.map(JSONValue.string) ?? .null),
                ("connected", .bool(connection.connected)),
            ])
        }
        return .object([
            ("name", .string(configuration.name)),
            ("listen", .string("\(configuration.host):\(server.port)")), ("encrypted", .bool(encrypted)),
            (
                "scanner",
                .object([
                    ("mode", .string("\(server.scannerMode)")),
                    ("configured_mode", .string("\(server.configuredScannerMode)")),
                    ("state", .string("\(server.scannerState)")),
                ])
            ),
            ("clients", .array(clients)),
            (
                "slots",
                .object([
                    ("free", .number(Double(slots.free))), ("total", .number(Double(slots.limit))),
                    ("connections", .array(connections)),
                ])
            ),
        ])
    }

    static func bytes(_ value: JSONValue) -> [UInt8] {
        var bytes: [UInt8] = []
        value.write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}

/// A deferred reply handed to the core's answer closure (loop-confined, like the site).
private final class ReplyBox: @unchecked Sendable {
    let reply: DeferredReply
    init(_ reply: DeferredReply) { self.reply = reply }
}
