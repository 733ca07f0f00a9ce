/// One client of a Server-Sent Events response (`text/event-stream`): the events pushed into it
/// wait in a buffer of at most ``limit`` bytes until the client reads them. A client that falls
/// further behind than that — it does not read, or reads slower than events come — is dropped
/// (its connection closed), so a slow client can never grow memory. One write larger than the
/// limit (a second's events of several hundred devices) is still taken whole by a client that has
/// read everything before it: the buffer then holds that one write, bounded by its caller.
/// Loop-confined: made by a handler, fed and read on the loop thread.
public final class EventStream {
    /// The most bytes kept for the client at once.
    public let limit: Int
    private var pending: [UInt8] = []
    private var offset = 0
    /// Set by the server while it serves the stream (suspend, resume, close).
    var link: (any EventStreamLink)?
    public private(set) var isOpen = true
    /// Dropped for falling behind (rather than closed by the client or the stop).
    public private(set) var wasDropped = false
    /// Called once when the stream ends (client gone, dropped, or the server stopped).
    public var onClose: (() -> Void)?

    public init(limit: Int = 64 * 1024) {
        self.limit = limit
    }

    /// Bytes waiting for the client.
    public var bufferedBytes: Int { pending.count - offset }

    /// Queues one event (`event:` when `event` is given, one `data:` line per line of `data`).
    /// - Returns: false when the stream is closed or the event dropped it for falling behind.
    @discardableResult
    public func send(event: String? = nil, data: String) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.utf8.count + (event?.utf8.count ?? 0) + 16)
        if let event {
            bytes += "event: ".utf8
            bytes += event.utf8.lazy.filter { $0 != 0x0A && $0 != 0x0D }
            bytes.append(0x0A)
        }
        // One `data:` line per line of `data` (JSON has none: one line, copied whole).
        bytes += "data: ".utf8
        var data = data
        data.withUTF8 { text in
            var start = 0
            while let newline = text[start...].firstIndex(of: 0x0A) {
                bytes += text[start...newline]
                bytes += "data: ".utf8
                start = newline + 1
            }
            bytes += text[start...]
        }
        bytes += [0x0A, 0x0A]
        return write(bytes)
    }

    /// Queues events already written in the stream's format (each `event:`/`data:` lines and
    /// the blank line that ends it): the caller vouches for the format.
    @discardableResult
    public func send(events bytes: [UInt8]) -> Bool { write(bytes) }

    /// Queues a comment line (`: text`), which clients ignore: a keep-alive that also notices a
    /// client that went away.
    @discardableResult
    public func comment(_ text: String) -> Bool { write(Array(": \(Self.oneLine(text))\n\n".utf8)) }

    private func write(_ bytes: [UInt8]) -> Bool {
        guard isOpen else { return false }
        guard bufferedBytes == 0 || bufferedBytes + bytes.count <= limit else {
            wasDropped = true
            pending = []
            offset = 0
            link?.drop()
            finish()
            return false
        }
        if offset > 0, offset >= pending.count / 2 {
            pending.removeFirst(offset)
            offset = 0
        }
        pending += bytes
        link?.resume()
        return true
    }

    /// Up to `max` bytes for the client, taken off the buffer; empty when nothing waits.
    func take(max: Int) -> ArraySlice<UInt8> {
        let count = min(max, bufferedBytes)
        let slice = pending[offset..<(offset + count)]
        offset += count
        if offset == pending.count {
            pending = []
            offset = 0
        }
        return slice
    }

    /// The stream ended (the server tells it, or a drop).
    func finish() {
        guard isOpen else { return }
        isOpen = false
        link = nil
        let close = onClose
        onClose = nil
        close?()
    }

    private static func oneLine(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0 != "\n" && $0 != "\r" }.map(Character.init))
    }
}

/// What a stream asks of the server that serves it.
protocol EventStreamLink: AnyObject {
    /// Events wait: serve the connection again if it was suspended.
    func resume()
    /// Close the connection now.
    func drop()
}
