/// A first-in first-out queue: ``append(_:)`` at the back, ``removeFirst()`` from the front, both
/// O(1) (append amortised), and indices that count from the oldest element.
///
/// A ring buffer: a removed element is released at once (a queue of byte arrays does not keep the
/// arrays it handed out), and the storage follows the queue's length — it doubles when full,
/// halves when three quarters of a large one stand empty, and is freed when the queue empties
/// after a burst (``retainedCapacity``), so a long run of appends and removals keeps it bounded by
/// the most elements queued at once, and a burst gone gives its memory back. A value type with
/// copy-on-write, like `Array`.
public struct FIFO<Element> {
    @usableFromInline var storage: Storage?

    /// Capacity an empty queue keeps for reuse; a larger buffer is freed when the queue empties.
    @inlinable public static var retainedCapacity: Int { 4096 }

    @inlinable public init() {}

    /// Elements queued.
    @inlinable public var count: Int {
        guard let storage else { return 0 }
        return storage.withUnsafeMutablePointerToHeader { $0.pointee.count }
    }

    @inlinable public var isEmpty: Bool { count == 0 }

    /// The oldest element.
    @inlinable public var first: Element? { isEmpty ? nil : self[0] }

    /// The newest element.
    @inlinable public var last: Element? { isEmpty ? nil : self[count - 1] }

    /// Elements the storage holds without growing.
    @inlinable public var capacity: Int {
        guard let storage else { return 0 }
        return storage.withUnsafeMutablePointerToHeader { $0.pointee.capacity }
    }

    /// Appends `element` at the back.
    @inlinable
    public mutating func append(_ element: Element) {
        if !isKnownUniquelyReferenced(&storage) { reallocate(capacity: Swift.max(16, capacity)) }
        if !storage.unsafelyUnwrapped.append(element) {
            reallocate(capacity: capacity * 2)
            _ = storage.unsafelyUnwrapped.append(element)
        }
    }

    /// Appends `elements` at the back, in order.
    @inlinable
    public mutating func append<S: Sequence>(contentsOf elements: S) where S.Element == Element {
        for element in elements { append(element) }
    }

    /// Removes and returns the oldest element; the queue must not be empty.
    @inlinable
    @discardableResult
    public mutating func removeFirst() -> Element {
        if !isKnownUniquelyReferenced(&storage) {
            precondition(storage != nil, "removeFirst() on an empty FIFO")
            reallocate(capacity: capacity)
        }
        let (element, remaining, capacity) = storage.unsafelyUnwrapped.withUnsafeMutablePointers {
            header, elements in
            let ring = header.pointee
            precondition(ring.count > 0, "removeFirst() on an empty FIFO")
            let element = (elements + ring.head).move()
            let remaining = ring.count - 1
            header.pointee.head = remaining == 0 ? 0 : Self.slot(ring.head + 1, ring.capacity)
            header.pointee.count = remaining
            return (element, remaining, ring.capacity)
        }
        if remaining == 0 {
            if capacity > Self.retainedCapacity { storage = nil }
        } else if capacity > Self.retainedCapacity, remaining <= capacity / 4 {
            reallocate(capacity: capacity / 2)
        }
        return element
    }

    /// Removes and returns the oldest element; nil when the queue is empty.
    @inlinable
    public mutating func popFirst() -> Element? {
        isEmpty ? nil : removeFirst()
    }

    /// Removes every element; the storage is freed unless `keepingCapacity` (and no larger than
    /// ``retainedCapacity``).
    @inlinable
    public mutating func removeAll(keepingCapacity: Bool = false) {
        guard keepingCapacity, capacity <= Self.retainedCapacity, isKnownUniquelyReferenced(&storage) else {
            storage = nil
            return
        }
        storage?.removeAll()
    }

    /// The storage slot of logical position `position` (below twice the capacity).
    @inlinable
    static func slot(_ position: Int, _ capacity: Int) -> Int {
        position >= capacity ? position - capacity : position
    }

    /// Moves (when unique) or copies the elements, oldest first, into new storage of `capacity`.
    @inlinable
    mutating func reallocate(capacity newCapacity: Int) {
        let new = Storage.make(capacity: Swift.max(newCapacity, count, 1))
        // Asked before `old` holds a second reference.
        let unique = isKnownUniquelyReferenced(&storage)
        guard let old = storage else {
            storage = new
            return
        }
        new.withUnsafeMutablePointers { newHeader, target in
            old.withUnsafeMutablePointers { header, source in
                let count = header.pointee.count
                let head = header.pointee.head
                let firstRun = Swift.min(count, header.pointee.capacity - head)
                if unique {
                    target.moveInitialize(from: source + head, count: firstRun)
                    (target + firstRun).moveInitialize(from: source, count: count - firstRun)
                    header.pointee.count = 0
                    header.pointee.head = 0
                } else {
                    target.initialize(from: source + head, count: firstRun)
                    (target + firstRun).initialize(from: source, count: count - firstRun)
                }
                newHeader.pointee.count = count
            }
        }
        storage = new
    }
}

extension FIFO {
    @usableFromInline
    struct Header {
        @usableFromInline var capacity: Int
        @usableFromInline var head: Int
        @usableFromInline var count: Int

        @inlinable init(capacity: Int) {
            self.capacity = capacity
            self.head = 0
            self.count = 0
        }
    }

    /// The ring: `count` elements from slot `head`, wrapping at `capacity`.
    @usableFromInline
    final class Storage: ManagedBuffer<Header, Element> {
        @inlinable
        static func make(capacity: Int) -> Storage {
            let buffer = Storage.create(minimumCapacity: capacity) { _ in Header(capacity: capacity) }
            return unsafeDowncast(buffer, to: Storage.self)
        }

        /// Appends `element` when there is room; false when full.
        @inlinable
        func append(_ element: Element) -> Bool {
            withUnsafeMutablePointers { header, elements in
                let ring = header.pointee
                guard ring.count < ring.capacity else { return false }
                (elements + FIFO.slot(ring.head + ring.count, ring.capacity)).initialize(to: element)
                header.pointee.count = ring.count + 1
                return true
            }
        }

        /// Deinitializes every element; the capacity stays.
        @inlinable
        func removeAll() {
            withUnsafeMutablePointers { header, elements in
                let count = header.pointee.count
                let head = header.pointee.head
                let firstRun = Swift.min(count, header.pointee.capacity - head)
                (elements + head).deinitialize(count: firstRun)
                elements.deinitialize(count: count - firstRun)
                header.pointee.count = 0
                header.pointee.head = 0
            }
        }

        deinit { removeAll() }
    }
}

extension FIFO: RandomAccessCollection, MutableCollection {
    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { count }

    /// The element `position` places behind the oldest (0: the oldest).
    @inlinable
    public subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < count, "FIFO index out of range")
            return storage.unsafelyUnwrapped.withUnsafeMutablePointers { header, elements in
                elements[Self.slot(header.pointee.head + position, header.pointee.capacity)]
            }
        }
        set {
            precondition(position >= 0 && position < count, "FIFO index out of range")
            if !isKnownUniquelyReferenced(&storage) { reallocate(capacity: capacity) }
            storage.unsafelyUnwrapped.withUnsafeMutablePointers { header, elements in
                elements[Self.slot(header.pointee.head + position, header.pointee.capacity)] = newValue
            }
        }
    }
}

extension FIFO: ExpressibleByArrayLiteral {
    @inlinable
    public init(arrayLiteral elements: Element...) {
        self.init()
        append(contentsOf: elements)
    }
}

extension FIFO: Equatable where Element: Equatable {
    @inlinable
    public static func == (lhs: FIFO, rhs: FIFO) -> Bool { lhs.elementsEqual(rhs) }
}

extension FIFO: CustomStringConvertible {
    public var description: String { Array(self).description }
}

extension FIFO: @unchecked Sendable where Element: Sendable {}
