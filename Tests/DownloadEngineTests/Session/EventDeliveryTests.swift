@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import NIOConcurrencyHelpers
import XCTest

/// The delivery of events in batches on its own: real tasks and the real delegate, events posted
/// from many threads at once, observers that check what they are given.
final class EventDeliveryTests: XCTestCase {
    /// The first observer, as the store: takes a batch, "commits" it when told the batch ended.
    final class Committing: DownloadObserver, Sendable {
        struct State {
            var taken: [Key] = []
            var committed = Set<Key>()
            var batches = 0
        }

        let state = NIOLockedValueBox(State())
        func taskDidCheckpoint(_ task: TaskSnapshot) { state.withLockedValue { $0.taken.append(Key(task)) } }
        func eventsWereDelivered() {
            state.withLockedValue { state in
                state.committed.formUnion(state.taken)
                state.taken = []
                state.batches += 1
            }
        }
    }

    /// The observer after it: every event it is given must be committed already, and each task's
    /// checkpoints come in the order they were posted.
    final class Checking: DownloadObserver, Sendable {
        struct State {
            var uncommitted = 0
            var outOfOrder = 0
            var last: [UInt64: Int64] = [:]
            var count = 0
        }

        let first: Committing
        let state = NIOLockedValueBox(State())
        init(after first: Committing) { self.first = first }

        func taskDidCheckpoint(_ task: TaskSnapshot) {
            let committed = first.state.withLockedValue { $0.committed.contains(Key(task)) }
            state.withLockedValue { state in
                if !committed { state.uncommitted += 1 }
                if let last = state.last[task.id], last >= task.durableOffset { state.outOfOrder += 1 }
                state.last[task.id] = task.durableOffset
                state.count += 1
            }
        }
    }

    struct Key: Hashable, Sendable {
        let id: UInt64
        let offset: Int64
        init(_ task: TaskSnapshot) {
            id = task.id
            offset = task.durableOffset
        }
    }

    static func task(_ id: UInt64) -> DownloadTask {
        DownloadTask(record: .plain(id, state: .running))
    }

    /// Posts checkpoint `n` of `task` as the engine does: the change and its event under eventOrder.
    static func checkpoint(_ task: DownloadTask, _ n: Int64, _ delegate: EventDelivery) {
        task.inEventOrder {
            let snapshot = task.update { $0.record.durableOffset = n }
            delegate.checkpointed(task, snapshot)
        }
    }

    /// 40 tasks, each posting 200 events from its own thread: the second observer is given an
    /// event only after the first ended the batch that held it, each task's events keep their
    /// order, and they come in far fewer batches than events.
    func testObserversAfterTheFirstSeeOnlyWhatItsBatchEnded() async {
        let first = Committing(), second = Checking(after: first)
        let delegate = EventDelivery(observers: [first, second])
        let tasks = (1...40).map { Self.task(UInt64($0)) }
        DispatchQueue.concurrentPerform(iterations: tasks.count) { index in
            for n in 1...200 { Self.checkpoint(tasks[index], Int64(n), delegate) }
        }
        for task in tasks { await delegate.eventsDelivered(after: task) }
        let checked = second.state.withLockedValue { $0 }
        XCTAssertEqual(checked.count, 40 * 200)
        XCTAssertEqual(checked.uncommitted, 0, "an observer after the first was given an event before its batch ended")
        XCTAssertEqual(checked.outOfOrder, 0)
        XCTAssertEqual(checked.last.values.sorted(), Array(repeating: 200, count: 40))
        let batches = first.state.withLockedValue { $0.batches }
        XCTAssertLessThan(batches, 40 * 200, "every event in a batch of its own")
    }

    /// `eventsDelivered(after:)` returns while another task keeps posting: a waiter is a place in
    /// the queue, not "once the queue is empty" (which never comes under load).
    func testAWaiterIsNotHeldBackByAnotherTasksStream() async {
        let first = Committing(), second = Checking(after: first)
        let delegate = EventDelivery(observers: [first, second])
        let busy = Self.task(1), waiting = Self.task(2)
        let stop = NIOLockedValueBox(false)
        let streaming = Thread {
            var n: Int64 = 0
            while !stop.withLockedValue({ $0 }) {
                n += 1
                Self.checkpoint(busy, n, delegate)
            }
        }
        streaming.start()
        defer { stop.withLockedValue { $0 = true } }
        while second.state.withLockedValue({ $0.count }) < 1000 { try? await Task.sleep(for: .milliseconds(1)) }
        Self.checkpoint(waiting, 1, delegate)
        let delivered = expectation(description: "the waiter's events were delivered")
        Task {
            await delegate.eventsDelivered(after: waiting)
            XCTAssertEqual(second.state.withLockedValue { $0.last[2] }, 1)
            delivered.fulfill()
        }
        await fulfillment(of: [delivered], timeout: 30)
    }
}
