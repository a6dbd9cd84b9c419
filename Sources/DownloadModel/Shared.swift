/// A value kept behind one reference: copies of the struct that holds it share it, and a change
/// makes a new one (copy on write, as `Array` does). For the large parts of a task's record that
/// rarely change (its options, an upload's description, an open question): a hundred thousand
/// queued tasks hold a pointer each instead of hundreds of bytes inline, and the snapshots and
/// copies made of a record do not copy them (Swift's `indirect`, for a struct's field).
@propertyWrapper
public struct Shared<Value: Sendable & Hashable>: Sendable, Hashable {
    private final class Box: Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    private var box: Box

    public init(wrappedValue: Value) {
        box = Box(wrappedValue)
    }

    public var wrappedValue: Value {
        get { box.value }
        set { box = Box(newValue) }
    }

    /// The box itself (`$name`): assigning another's makes two records share one value (the
    /// files of a group, rows of the store with the same options).
    public var projectedValue: Shared<Value> {
        get { self }
        set { self = newValue }
    }

    /// Whether `self` and `other` hold one copy of the value (not only equal values).
    public func sharesStorage(with other: Shared<Value>) -> Bool { box === other.box }

    public static func == (a: Shared<Value>, b: Shared<Value>) -> Bool {
        a.box === b.box || a.box.value == b.box.value
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(box.value)
    }
}

/// `Shared` for an optional value that is mostly absent (an upload's description on a download,
/// an open question, an answer): nil takes no box at all.
@propertyWrapper
public struct SharedIfAny<Wrapped: Sendable & Hashable>: Sendable, Hashable {
    private var shared: Shared<Wrapped>?

    public init(wrappedValue: Wrapped?) {
        shared = wrappedValue.map { Shared(wrappedValue: $0) }
    }

    public var wrappedValue: Wrapped? {
        get { shared?.wrappedValue }
        set { shared = newValue.map { Shared(wrappedValue: $0) } }
    }
}
