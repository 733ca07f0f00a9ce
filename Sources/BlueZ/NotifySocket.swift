import EventLoop

#if canImport(Glibc)
import Glibc
#endif

/// The socket `AcquireNotify` returns (one end of an `AF_UNIX SOCK_SEQPACKET` pair): each
/// datagram is one notification. Read on the loop thread through an ``EventLoop`` watch, without
/// blocking. Loop-confined: created, read and closed on the loop thread only (by the
/// ``CentralManager`` actor, whose executor is that thread).
final class NotifySocket {
    let fd: Int32
    let mtu: Int
    private let loop: EventLoop
    private var token: EventLoop.Token?
    private(set) var isOpen = true
    /// Not reading (flow control): datagrams wait in the kernel's socket buffer.
    private(set) var isPaused = false

    /// Takes ownership of `fd`; `onDatagram` gets each notification, `onClose` is called once
    /// when the peer hangs up (disconnect, bluetoothd exit). Both run on the loop thread.
    init(fd: Int32, mtu: Int, loop: EventLoop, onDatagram: @escaping ([UInt8]) -> Void, onClose: @escaping () -> Void) {
        self.fd = fd
        self.mtu = mtu
        self.loop = loop
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        token = loop.addWatch(fd: fd, events: .readable) { [weak self] events in
            guard let self, self.isOpen else { return }
            var buffer = [UInt8](repeating: 0, count: max(mtu, 517) + 16)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 {
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

    /// Stops reading until ``resume()``; the peer's further datagrams wait in the socket buffer.
    func pause() {
        guard isOpen, !isPaused, let token else { return }
        isPaused = true
        loop.updateWatch(token, events: [])
    }

    func resume() {
        guard isOpen, isPaused, let token else { return }
        isPaused = false
        loop.updateWatch(token, events: .readable)
    }

    /// Stops reading and closes the descriptor (BlueZ then unsubscribes). Idempotent.
    func close() {
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
