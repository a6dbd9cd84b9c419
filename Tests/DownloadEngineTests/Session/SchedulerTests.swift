@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// The scheduler: priorities, limits, the network, fairness between users, connection places, tickets.
final class SchedulerTests: XCTestCase {
    func testSchedulerPrioritiesFIFOAndLimits() {
        var scheduler = Scheduler(maxRunning: 2, maxRunningPerSession: 2)
        scheduler.enqueue(1, session: SessionID(owner: 1, name: "a"), priority: .low)
        scheduler.enqueue(2, session: SessionID(owner: 1, name: "a"), priority: .normal)
        scheduler.enqueue(3, session: SessionID(owner: 1, name: "b"), priority: .high)
        scheduler.enqueue(4, session: SessionID(owner: 1, name: "b"), priority: .normal)
        XCTAssertEqual(scheduler.next(), [3, 2])
        XCTAssertEqual(scheduler.next(), [])
        scheduler.remove(3)
        XCTAssertEqual(scheduler.next(), [4])
        scheduler.remove(2)
        scheduler.remove(4)
        XCTAssertEqual(scheduler.next(), [1])
        var perSession = Scheduler(maxRunning: 10, maxRunningPerSession: 1)
        perSession.enqueue(1, session: SessionID(owner: 1, name: "a"), priority: .normal)
        perSession.enqueue(2, session: SessionID(owner: 1, name: "a"), priority: .normal)
        perSession.enqueue(3, session: SessionID(owner: 1, name: "b"), priority: .normal)
        XCTAssertEqual(perSession.next(), [1, 3])
    }

    /// A group's `parallel` caps its files at once (a short one still counts: it holds its
    /// place); the rest of the daemon's places go to other work meanwhile.
    func testAGroupRunsAtMostItsParallelFilesAtOnce() {
        var scheduler = Scheduler(maxRunning: 8, maxRunningPerSession: 8)
        let session = SessionID(owner: 1, name: "a")
        scheduler.limit(group: 7, parallel: 2)
        for id in 1...5 as ClosedRange<UInt64> { scheduler.enqueue(id, session: session, priority: .normal, group: 7) }
        scheduler.enqueue(6, session: session, priority: .normal)
        XCTAssertEqual(scheduler.next(), [1, 2, 6])
        XCTAssertEqual(scheduler.running(inGroup: 7), 2)
        scheduler.markShort(1)
        XCTAssertEqual(scheduler.next(), [], "a short file still holds one of the group's places")
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3])
        scheduler.limit(group: 7, parallel: 0)
        XCTAssertEqual(scheduler.next(), [4, 5])
        XCTAssertEqual(scheduler.running(inGroup: 7), 4)
    }

    /// A session at its limit with a long queue: nothing starts however often it is asked, a
    /// queued task removed leaves the queue's count right, and a place freed in that session
    /// starts its next task (or another session's, in the order of the rules).
    /// One user's task holding every connection place gives places back while another user
    /// waits, down to an equal share; a user alone keeps all of them (issue 45, finding 4).
    func testPlacesBeyondAnEqualShareGoToAUserWhoWaits() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4, maxConnections: 16)
        let nobody = SessionID(owner: 65534, name: "drip"), root = SessionID(owner: 0, name: "small")
        scheduler.enqueue(1, session: nobody, priority: .normal, connections: 16)
        XCTAssertEqual(scheduler.next(), [1])
        XCTAssertEqual(scheduler.connections(of: 1), 16)
        XCTAssertEqual(scheduler.reclaim(), [:], "alone, the user keeps every place")
        scheduler.enqueue(2, session: root, priority: .normal)
        XCTAssertEqual(scheduler.next(), [], "every place is taken")
        XCTAssertEqual(scheduler.reclaim(), [1: 1], "one place back for the user who waits")
        XCTAssertEqual(scheduler.next(), [2])
        XCTAssertEqual(scheduler.connections(of: 1), 15)
        // Another of root's tasks: root holds 1 of a share of 8, so more comes back.
        scheduler.enqueue(3, session: root, priority: .normal, connections: 4)
        XCTAssertEqual(scheduler.reclaim(), [1: 1])
        XCTAssertEqual(scheduler.next(), [3])
        XCTAssertEqual(scheduler.connections(of: 3), 1, "it starts with the place that is free")
        // A run that could not end a connection holds its place again.
        scheduler.regrant(1, 1)
        XCTAssertEqual(scheduler.connections(of: 1), 15)
        // A place a task cannot use goes back for good: it is not offered again.
        scheduler.giveBack(1, 5, forGood: true)
        XCTAssertEqual(scheduler.connections(of: 1), 10)
        let grown = scheduler.grow()
        XCTAssertEqual(grown[1], 1, "only the place taken for root comes back, not the five it gave up: \(grown)")
    }

    /// Two sandboxed apps of one user are two parties (a task's `app`): one app's download
    /// cannot take its user's whole share.
    func testTheAppsOfAUserShareLikeUsers() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4, maxConnections: 16)
        let player = SessionID(owner: 1000, name: "org.example.Player\u{1F}default")
        let maps = SessionID(owner: 1000, name: "org.example.Maps\u{1F}default")
        scheduler.enqueue(1, session: player, app: "org.example.Player", priority: .normal, connections: 16)
        XCTAssertEqual(scheduler.next(), [1])
        scheduler.enqueue(2, session: maps, app: "org.example.Maps", priority: .normal)
        XCTAssertEqual(scheduler.reclaim(), [1: 1], "another app of the same user waits")
        XCTAssertEqual(scheduler.next(), [2])
        // The host's own tasks of that user are a party of their own too.
        scheduler.enqueue(3, session: SessionID(owner: 1000, name: "default"), priority: .normal)
        XCTAssertEqual(scheduler.reclaim(), [1: 1])
        XCTAssertEqual(scheduler.next(), [3])
    }

    func testASessionAtItsLimitKeepsItsQueueUntilAPlaceFrees() {
        var scheduler = Scheduler(maxRunning: 8, maxRunningPerSession: 2)
        let a = SessionID(owner: 1, name: "a"), b = SessionID(owner: 1, name: "b")
        for id in UInt64(1)...100 { scheduler.enqueue(id, session: a, priority: .normal) }
        XCTAssertEqual(scheduler.next(), [1, 2])
        for _ in 0..<10 { XCTAssertEqual(scheduler.next(), []) }
        scheduler.remove(3)
        scheduler.remove(4)
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [5], "3 and 4 left the queue; 1's place goes to 5")
        scheduler.enqueue(200, session: b, priority: .low)
        XCTAssertEqual(scheduler.next(), [200], "another session's task is not held back by a's queue")
        for id in UInt64(5)...100 where id != 3 && id != 4 { scheduler.remove(id) }
        scheduler.remove(2)
        scheduler.remove(200)
        XCTAssertEqual(scheduler.next(), [])
        scheduler.enqueue(300, session: a, priority: .normal)
        XCTAssertEqual(scheduler.next(), [300], "the emptied queue counts nothing left over")
    }

    /// `earliest_begin`: a task is not started before its time, whatever places are free; the
    /// next time to look is the earliest still to come.
    func testATaskWaitsForItsBeginTime() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4)
        let session = SessionID(owner: 1, name: "a")
        scheduler.enqueue(1, session: session, priority: .high, notBefore: 1_000)
        scheduler.enqueue(2, session: session, priority: .normal, notBefore: 2_000)
        scheduler.enqueue(3, session: session, priority: .low)
        XCTAssertEqual(scheduler.nextBeginTime(after: 500), 1_000)
        XCTAssertEqual(scheduler.next(now: 500), [3], "only the task without a begin time")
        XCTAssertEqual(scheduler.beginTimesCome(by: 999), [])
        XCTAssertEqual(scheduler.beginTimesCome(by: 1_000), [1])
        XCTAssertEqual(scheduler.nextBeginTime(after: 1_000), 2_000)
        XCTAssertEqual(scheduler.next(now: 1_000), [1], "at its time, and not before")
        XCTAssertEqual(scheduler.nextBeginTime(after: 1_000), 2_000)
        scheduler.remove(2)
        XCTAssertNil(scheduler.nextBeginTime(after: 1_000), "a removed task is no reason to look again")
        XCTAssertEqual(scheduler.beginTimesCome(by: 5_000), [])
    }

    /// Tasks whose begin time is ahead of the wall clock wait apart from the queue (a look at the
    /// queue does not pass over them): they keep their place in the order, take a priority
    /// change, are removed, and start when their time comes, as tasks in the queue do.
    func testTasksBeginningAheadKeepTheirPlace() {
        var scheduler = Scheduler(maxRunning: 1, maxRunningPerSession: 1)
        let session = SessionID(owner: 1, name: "a")
        let ahead = WallClock.now + 86_400
        for id in UInt64(1)...1_000 { scheduler.enqueue(id, session: session, priority: .normal, notBefore: ahead) }
        scheduler.enqueue(2_000, session: session, priority: .low)
        scheduler.enqueue(1, session: session, priority: .normal, notBefore: ahead)  // once only
        XCTAssertEqual(scheduler.nextBeginTime(after: WallClock.now), ahead)
        var high = DownloadOptions()
        high.priority = .high
        scheduler.update(500, high)
        scheduler.remove(7)
        XCTAssertEqual(scheduler.next(), [2_000], "only the task without a begin time")
        scheduler.remove(2_000)
        XCTAssertEqual(scheduler.next(now: ahead), [500], "at their time, the higher priority first")
        scheduler.remove(500)
        var order: [UInt64] = []
        for _ in 1...998 {
            guard let id = scheduler.next(now: ahead).first else { break }
            order.append(id)
            scheduler.remove(id)
        }
        XCTAssertEqual(order, (UInt64(1)...1_000).filter { $0 != 7 && $0 != 500 }, "then first come, first started")
        XCTAssertEqual(scheduler.next(now: ahead), [])
        XCTAssertNil(scheduler.nextBeginTime(after: 0), "nothing left to look again for")
    }

    /// Begin times of tasks that started or went are forgotten lazily and the order is made
    /// again once they are half of it: what is left still begins in order, and a task whose time
    /// comes before ones already admitted is admitted too.
    func testBeginTimesOfTasksThatWentAreForgottenAndTheRestBeginInOrder() {
        var scheduler = Scheduler(maxRunning: 1, maxRunningPerSession: 1)
        let session = SessionID(owner: 1, name: "a")
        let ahead = WallClock.now + 86_400
        for id in UInt64(1)...200 {
            scheduler.enqueue(id, session: session, priority: .normal, notBefore: ahead + id % 2)
        }
        for id in UInt64(1)...150 { scheduler.remove(id) }
        XCTAssertEqual(scheduler.nextBeginTime(after: WallClock.now), ahead)
        XCTAssertEqual(scheduler.nextBeginTime(after: ahead), ahead + 1)
        XCTAssertEqual(scheduler.beginTimesCome(by: ahead), (UInt64(152)...200).filter { $0 % 2 == 0 })
        XCTAssertEqual(scheduler.next(now: ahead), [152], "the first of those left whose time came")
        scheduler.enqueue(300, session: session, priority: .high, notBefore: ahead - 1)
        scheduler.remove(152)
        XCTAssertEqual(scheduler.next(now: ahead), [300], "admitted though its time is before those admitted")
        scheduler.remove(300)
        var order: [UInt64] = []
        while let id = scheduler.next(now: ahead + 1).first {
            order.append(id)
            scheduler.remove(id)
        }
        XCTAssertEqual(order, Array(UInt64(151)...200).filter { $0 != 152 })
        XCTAssertNil(scheduler.nextBeginTime(after: 0))
        XCTAssertEqual(scheduler.beginTimesCome(by: ahead + 1), [])
    }

    /// A hundred thousand queued tasks are taken and removed one by one without a scan each.
    func testAHundredThousandQueuedTasksTakeNoScanEach() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4)
        let session = SessionID(owner: 1, name: "a")
        let ahead = WallClock.now + 86_400
        for id in UInt64(1)...100_000 {
            scheduler.enqueue(id, session: session, priority: .normal, notBefore: id % 2 == 0 ? ahead : nil)
        }
        XCTAssertEqual(scheduler.next(), [1, 3, 5, 7])
        for id in stride(from: UInt64(100_000), through: 9, by: -1) { scheduler.remove(id) }
        XCTAssertEqual(scheduler.next(now: ahead), [], "the places are taken")
        for id in [1, 3, 5, 7] as [UInt64] { scheduler.remove(id) }
        XCTAssertEqual(scheduler.next(now: ahead), [2, 4, 6, 8])
    }

    func testSchedulerStartsOnlyWhatTheNetworkAllows() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4)
        let session = SessionID(owner: 1, name: "a")
        scheduler.conditions.network = NetworkStatus(online: false)
        scheduler.enqueue(1, session: session, priority: .normal, allowMetered: false)
        scheduler.enqueue(2, session: session, priority: .normal)
        XCTAssertEqual(scheduler.next(), [], "nothing starts offline")
        scheduler.conditions.network = NetworkStatus(online: true, metered: true)
        XCTAssertEqual(scheduler.next(), [2], "on a metered network only tasks that allow it")
        var options = DownloadOptions()
        options.allowMetered = true
        scheduler.update(1, options)
        XCTAssertEqual(scheduler.next(), [1])
        XCTAssertEqual(NetworkStatus(online: false).waitingFor(allowMetered: true), .network)
        XCTAssertEqual(NetworkStatus(metered: true).waitingFor(allowMetered: false), .unmeteredNetwork)
        XCTAssertEqual(NetworkStatus(metered: true).waitingFor(allowMetered: true), .slot)
    }

    func testSchedulerStartsOnlyWhatPowerAllows() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4)
        let session = SessionID(owner: 1, name: "a")
        scheduler.conditions.power = PowerStatus(onBattery: true, powerSaver: true)
        scheduler.enqueue(1, session: session, priority: .normal, requiresACPower: true)
        scheduler.enqueue(2, session: session, priority: .normal, background: true)
        scheduler.enqueue(3, session: session, priority: .normal)
        XCTAssertEqual(scheduler.next(), [3], "on battery under power-saver only the unconditional task")
        scheduler.conditions.power.powerSaver = false
        XCTAssertEqual(scheduler.next(), [2], "the background task once the profile is not power-saver")
        var options = DownloadOptions()
        options.requiresACPower = false
        scheduler.update(1, options)
        XCTAssertEqual(scheduler.next(), [1], "no longer asking for mains power")

        var careful = DownloadOptions()
        careful.requiresACPower = true
        careful.background = true
        careful.allowMetered = false
        XCTAssertEqual(RunConditions(power: PowerStatus(onBattery: true)).waitingFor(careful), .acPower)
        XCTAssertEqual(RunConditions(power: PowerStatus(powerSaver: true)).waitingFor(careful), .powerSaver)
        XCTAssertEqual(
            RunConditions(network: NetworkStatus(metered: true), power: PowerStatus(onBattery: true)).waitingFor(
                careful),
            .unmeteredNetwork, "the network is said first")
        XCTAssertEqual(RunConditions().waitingFor(careful), .slot)
        XCTAssertFalse(RunConditions(power: PowerStatus(onBattery: true)).allows(careful))
        XCTAssertTrue(RunConditions().allows(careful))
    }

    func testSchedulerSharesPlacesFairlyBetweenUsers() {
        var scheduler = Scheduler(maxRunning: 3, maxRunningPerSession: 3)
        let a = SessionID(owner: 1000, name: "bulk"), b = SessionID(owner: 1001, name: "one"),
            c = SessionID(owner: 1002, name: "x")
        for id in 1...10 { scheduler.enqueue(UInt64(id), session: a, priority: .high) }
        scheduler.enqueue(11, session: b, priority: .low)
        XCTAssertEqual(scheduler.next(), [1, 11, 2], "user b's low-priority task is not kept waiting by a's high ones")
        scheduler.remove(11)
        scheduler.enqueue(12, session: c, priority: .normal)
        XCTAssertEqual(scheduler.next(), [12], "the place goes to the user with none running")
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3], "then back to a, in its own order")
    }

    /// The queue is kept in its order as tasks come and priorities change: a priority raised
    /// moves a task ahead of earlier ones, lowered behind later ones; FIFO within a priority.
    func testAChangedPriorityMovesATaskWithinTheQueue() {
        var scheduler = Scheduler(maxRunning: 1, maxRunningPerSession: 1)
        let a = SessionID(owner: 1000, name: "a")
        for id in 1...6 { scheduler.enqueue(UInt64(id), session: a, priority: id % 2 == 0 ? .high : .normal) }
        var high = DownloadOptions(), low = DownloadOptions()
        high.priority = .high
        low.priority = .low
        scheduler.update(5, high)
        scheduler.update(2, low)
        var order: [UInt64] = []
        while let id = scheduler.next().first {
            order.append(id)
            scheduler.remove(id)
        }
        XCTAssertEqual(order, [4, 5, 6, 1, 3, 2])
    }

    func testSchedulerCountsConnectionsAgainstTheirOwnLimit() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 3, maxConnections: 10)
        let a = SessionID(owner: 1000, name: "a"), b = SessionID(owner: 1000, name: "b")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 8)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 4)
        scheduler.enqueue(3, session: b, priority: .normal, connections: 2)
        scheduler.enqueue(4, session: b, priority: .normal, connections: 1)
        XCTAssertEqual(scheduler.next(), [1, 2], "8, then 2 of the 4 task 2 asked for, fill the 10; 3 and 4 wait")
        XCTAssertEqual([scheduler.connections(of: 1), scheduler.connections(of: 2)], [8, 2])
        XCTAssertEqual(scheduler.connectionCount, 10)
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3, 4], "2 + 2 + 1 of 10")
        XCTAssertEqual(scheduler.connectionCount, 5)
        scheduler.remove(2)
        scheduler.remove(3)
        scheduler.remove(4)
        scheduler.enqueue(5, session: a, priority: .normal, connections: 16)
        XCTAssertEqual(scheduler.next(), [5], "16 connections count as the 10 there are")
        XCTAssertEqual(scheduler.connectionCount, 10)
        var tasks = Scheduler(maxRunning: 2, maxRunningPerSession: 2, maxConnections: 16)
        for id in 6...8 { tasks.enqueue(UInt64(id), session: a, priority: .normal) }
        XCTAssertEqual(tasks.next(), [6, 7], "single streams are still held to the transfer limit")
    }

    func testALargeTaskIsNeverPassedByTheSmallerOnesBehindIt() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4, maxConnections: 16)
        let a = SessionID(owner: 1000, name: "a")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 8)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 8)
        XCTAssertEqual(scheduler.next(), [1, 2])
        scheduler.enqueue(3, session: a, priority: .normal, connections: 16)
        for id in 4...6 { scheduler.enqueue(UInt64(id), session: a, priority: .normal) }
        XCTAssertEqual(scheduler.next(), [], "no place is free")
        scheduler.remove(1)
        XCTAssertEqual(
            scheduler.next(), [3], "the 16-connection task starts with the 8 places free, before the single streams")
        XCTAssertEqual(scheduler.connections(of: 3), 8)
        scheduler.remove(2)
        XCTAssertEqual(scheduler.next(), [4, 5, 6], "then the single streams behind it")
    }

    func testPlacesNoQueuedTaskCanTakeGoToRunningTasksThatAskedForMore() {
        var scheduler = Scheduler(maxRunning: 3, maxRunningPerSession: 3, maxConnections: 8)
        let a = SessionID(owner: 1000, name: "a"), b = SessionID(owner: 1001, name: "b")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 6)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 4)
        XCTAssertEqual(scheduler.next(), [1, 2])
        XCTAssertEqual(scheduler.grow(), [:], "no place is free")
        XCTAssertEqual(scheduler.connections(of: 2), 2, "task 2 holds the 2 places left of the 4 it asked for")
        scheduler.enqueue(3, session: b, priority: .normal, connections: 4)
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3], "a queued task takes freed places first")
        XCTAssertEqual(scheduler.grow(), [2: 2], "the places it leaves go to the running task short of its connections")
        XCTAssertEqual(
            [scheduler.connections(of: 2), scheduler.connections(of: 3), scheduler.connectionCount], [4, 4, 8])
        scheduler.remove(2)
        scheduler.enqueue(5, session: a, priority: .normal)
        scheduler.enqueue(4, session: a, priority: .normal, connections: 6)
        XCTAssertEqual(scheduler.next(), [5, 4], "5 then 4 in user a's order, 4 on the 3 places left")
        XCTAssertEqual(scheduler.connections(of: 4), 3)
        XCTAssertEqual(scheduler.grow(), [:], "8 of 8")
        scheduler.giveBack(3, 2)
        XCTAssertEqual(scheduler.grow(), [3: 2], "places go to the user holding fewer (b: 2, a: 4), as in next()")
        scheduler.giveBack(3, 2)
        scheduler.settle(4)
        XCTAssertEqual(scheduler.connections(of: 4), 1, "one stream from now on: one place")
        XCTAssertEqual(scheduler.grow(), [3: 2], "and it is offered none again")
        XCTAssertEqual(scheduler.grow(), [:])
    }

    func testAStartTakenBackBeforeItTookEffectIsToldApartByItsTicket() throws {
        var scheduler = Scheduler(maxRunning: 1, maxRunningPerSession: 1)
        let a = SessionID(owner: 1000, name: "a")
        scheduler.enqueue(1, session: a, priority: .normal)
        XCTAssertEqual(scheduler.next(), [1])
        let first = try XCTUnwrap(scheduler.ticket(of: 1))
        // Paused and resumed before that start took effect: a new queue entry, started anew.
        scheduler.remove(1)
        scheduler.enqueue(1, session: a, priority: .normal)
        XCTAssertNil(scheduler.ticket(of: 1), "queued, not running")
        XCTAssertEqual(scheduler.next(), [1])
        let second = try XCTUnwrap(scheduler.ticket(of: 1))
        XCTAssertNotEqual(first, second)
        // The first start, refused, gives back nothing the second holds.
        scheduler.remove(1, ticket: first)
        XCTAssertEqual([scheduler.runningCount, scheduler.connectionCount], [1, 1])
        scheduler.remove(1, ticket: second)
        XCTAssertEqual([scheduler.runningCount, scheduler.connectionCount], [0, 0])
    }

    func testAShortTransferFreesItsPlaceButKeepsItsConnection() {
        var scheduler = Scheduler(maxRunning: 2, maxRunningPerSession: 2, maxConnections: 3)
        let session = SessionID(owner: 1, name: "")
        for id in 1...5 { scheduler.enqueue(UInt64(id), session: session, priority: .normal) }
        XCTAssertEqual(scheduler.next(), [1, 2])
        XCTAssertTrue(scheduler.markShort(1))
        XCTAssertFalse(scheduler.markShort(1), "once")
        XCTAssertEqual(scheduler.runningCount, 1)
        XCTAssertEqual(scheduler.transferCount, 2)
        XCTAssertEqual(scheduler.next(), [3], "its place in the session and the limit is free")
        XCTAssertTrue(scheduler.markShort(2))
        XCTAssertTrue(scheduler.markShort(3))
        XCTAssertEqual(scheduler.next(), [], "but not its connection: 3 of 3 taken")
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [4])
        XCTAssertEqual(scheduler.connectionCount, 3)
        XCTAssertFalse(scheduler.markShort(9), "not running")
    }
}
