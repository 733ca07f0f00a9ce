import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The socket `AcquireNotify` returns (one end of an `AF_UNIX SOCK_SEQPACKET` pair): each
/// datagram is one notification. Read on the loop thread through an ``EventLoop`` watch, without
/// blocking. Loop-confined: created, read and closed on the loop thread only (by the
/// ``CentralManager`` actor, whose executor is that thread).
package final class NotifySocket {
    let fd: Int32
    let mtu: Int
    private let loop: EventLoop
    private var token: EventLoop.Token?
    package private(set) var isOpen = true
    /// Not reading (flow control): datagrams wait in the kernel's socket buffer.
    package private(set) var isPaused = false

    /// Takes ownership of `fd`; `onDatagram` gets each notification, `onClose` is called once
    /// when the peer hangs up (disconnect, bluetoothd exit). Both run on the loop thread.
    package init(
        fd: Int32, mtu: Int, loop: EventLoop, onDatagram: @escaping ([UInt8]) -> Void, onClose: @escaping () -> Void
    ) {
        self.fd = fd
        self.mtu = mtu
        self.loop = loop
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        token = loop.addWatch(fd: fd, events: .readable) { [weak self] events in
            guard let self, self.isOpen else { return }
            var buffer = [UInt8](repeating: 0, count: Self.capacity(mtu: mtu))
            while true {
                // MSG_TRUNC: the datagram's real length, also when it is longer than the buffer.
                let count = buffer.withUnsafeMutableBytes {
                    recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_TRUNC))
                }
                if count > buffer.count {
                    // Longer than any notification the MTU allows: dropped (and counted), never handed on cut.
                    self.oversizedDrops += 1
                    continue
                }
                // SOCK_SEQPACKET reads an empty datagram (an empty notification) as 0, like the
                // end: it is the end only when the peer hung up and no datagram waits.
                if count > 0 || (count == 0 && !Self.peerClosed(fd)) {
                    onDatagram(Array(buffer[0..<count]))
                    if self.isPaused || !self.isOpen { return }
                    continue
                }
                if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                    if events.contains(.hangup) || events.contains(.error) { break }
                    return
                }
                break  // 0 = the peer closed; other errors end the socket too
            }
            self.close()
            onClose()
        }
    }

    /// Datagrams dropped because they were longer than ``capacity(mtu:)``.
    package private(set) var oversizedDrops = 0

    /// The bytes read per datagram: the largest notification the MTU allows, with room to spare.
    /// The MTU comes from bluetoothd's `AcquireNotify` reply (a `q`, read as any integer): it is
    /// bounded to 16 bits, so a hostile value can neither overflow this nor size a huge buffer.
    package static func capacity(mtu: Int) -> Int { min(max(mtu, 517), Int(UInt16.max)) + 16 }

    /// After a read of 0 bytes: whether the peer hung up with no datagram waiting (the end), as
    /// opposed to an empty datagram having been read. Only a trailing empty datagram sent just
    /// before the peer closed is taken for the end.
    private static func peerClosed(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 0) >= 0, entry.revents & Int16(POLLHUP | POLLERR) != 0 else { return false }
        var waiting: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &waiting) != 0 || waiting == 0
    }

    /// Stops reading until ``resume()``; the peer's further datagrams wait in the socket buffer.
    package func pause() {
        guard isOpen, !isPaused, let token else { return }
        isPaused = true
        loop.updateWatch(token, events: [])
    }

    package func resume() {
        guard isOpen, isPaused, let token else { return }
        isPaused = false
        loop.updateWatch(token, events: .readable)
    }

    /// Stops reading and closes the descriptor (BlueZ then unsubscribes). Idempotent.
    package func close() {
        guard isOpen else { return }
        isOpen = false
        if let token { loop.removeWatch(token) }
        token = nil
        Glibc.close(fd)
    }

    deinit {
        if isOpen { Glibc.close(fd) }
    }
}
