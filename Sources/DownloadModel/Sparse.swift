/// A value that has an empty form (`init()`): what a `Sparse` holds without a box.
public protocol EmptyInitializable {
    init()
}

/// A value that is mostly empty kept behind one reference, made the first time a change leaves
/// it not empty (a change that leaves it empty, such as a nil set on an empty one, makes none):
/// copies of the struct that holds it share the box, and a change is made in place while this
/// copy is the box's only holder, in a new box otherwise (copy on write, as `Array` does). For
/// what a task's run learns (its validator, final URL, partial file, error, metrics): a hundred
/// thousand queued tasks that never ran hold a nil pointer each instead of 200 bytes inline,
/// and a running task changes its own box without allocating.
@propertyWrapper
public struct Sparse<Value: Sendable & Hashable & EmptyInitializable>: Sendable, Hashable {
    /// Changed only through `wrappedValue`'s `_modify`, which first makes sure no other copy holds it.
    private final class Box: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var box: Box?

    public init(wrappedValue: Value) {
        box = wrappedValue == Value() ? nil : Box(wrappedValue)
    }

    public var wrappedValue: Value {
        get { box?.value ?? Value() }
        _modify {
            if box == nil {
                // No box yet: the change is made on an empty value, boxed only if it is one no more.
                var value = Value()
                defer { if value != Value() { box = Box(value) } }
                yield &value
            } else {
                if !isKnownUniquelyReferenced(&box), let shared = box { box = Box(shared.value) }
                let held = box ?? Box(Value())
                box = held
                yield &held.value
            }
        }
    }

    /// The wrapper itself (`$name`): whether it holds a box.
    public var projectedValue: Sparse<Value> { self }

    /// Whether a box is held: a change that leaves an unboxed value empty takes none.
    public var isBoxed: Bool { box != nil }

    public static func == (a: Sparse<Value>, b: Sparse<Value>) -> Bool {
        a.box === b.box || a.wrappedValue == b.wrappedValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(wrappedValue)
    }
}
