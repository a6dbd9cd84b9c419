import CDBus
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import NIOConcurrencyHelpers

/// Drives one libdbus connection. libdbus's watches are served by one I/O thread blocked in a
/// level-triggered `poll()` over the enabled watches and a wake-up pipe (written whenever a watch
/// changes), so no readiness is ever lost; its timeouts are Dispatch timers; its wake-up and
/// dispatch-status callbacks schedule a dispatch on one serial queue. No thread blocks inside
/// libdbus, so a message sent from any thread is written by that thread at once (or by the I/O
/// thread as soon as the socket drains): the `read_write_dispatch(-1)` trap cannot happen.
///
/// (Dispatch read/write sources were tried first: with a read and a write source on the same fd,
/// recreated on every write-watch toggle, a readable event was occasionally never delivered and
/// a reply sat in the socket until the call timed out.)
final class MainLoop: @unchecked Sendable {
    /// The `DBusConnection *`; this object holds its own reference.
    let raw: OpaquePointer
    let queue: DispatchQueue

    private struct Handle: Hashable, @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State {
        /// Every watch libdbus added (enabled or not).
        var watches: Set<Handle> = []
        var timeouts: [Handle: DispatchSourceTimer] = [:]
        var dispatchScheduled = false
        var installed = false
    }

    private let state = NIOLockedValueBox(State())
    /// [read end, write end] of the pipe that wakes the I/O thread.
    private let wakePipe: [Int32]
    private let ioQueue: DispatchQueue
    private let ioStopped = DispatchSemaphore(value: 0)

    init(connection raw: OpaquePointer, label: String) {
        dbus_connection_ref(raw)
        self.raw = raw
        self.queue = DispatchQueue(label: label)
        self.ioQueue = DispatchQueue(label: label + ".io")
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
        } else {
            fds = [-1, -1]
        }
        self.wakePipe = fds
    }

    deinit {
        for fd in wakePipe where fd >= 0 { close(fd) }
        dbus_connection_unref(raw)
    }

    /// Hands libdbus our callbacks. The callbacks hold this object unretained: `uninstall()`
    /// must run before it can go away (the owning `Connection` does that).
    func install() {
        state.withLockedValue { $0.installed = true }
        let context = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(
            raw,
            { watch, data in
                guard let watch, let data else { return 0 }
                MainLoop.from(data).refreshWatch(Handle(pointer: watch))
                return 1
            },
            { watch, data in
                guard let watch, let data else { return }
                MainLoop.from(data).removeWatch(Handle(pointer: watch))
            },
            { watch, data in
                guard let watch, let data else { return }
                MainLoop.from(data).refreshWatch(Handle(pointer: watch))
            },
            context, nil
        )
        dbus_connection_set_timeout_functions(
            raw,
            { timeout, data in
                guard let timeout, let data else { return 0 }
                MainLoop.from(data).refreshTimeout(Handle(pointer: timeout))
                return 1
            },
            { timeout, data in
                guard let timeout, let data else { return }
                MainLoop.from(data).removeTimeout(Handle(pointer: timeout))
            },
            { timeout, data in
                guard let timeout, let data else { return }
                MainLoop.from(data).refreshTimeout(Handle(pointer: timeout))
            },
            context, nil
        )
        dbus_connection_set_wakeup_main_function(
            raw,
            { data in
                guard let data else { return }
                MainLoop.from(data).wakeUp()
            },
            context, nil
        )
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, data in
                guard let data, status == DBUS_DISPATCH_DATA_REMAINS else { return }
                MainLoop.from(data).scheduleDispatch()
            },
            context, nil
        )
        ioQueue.async { [self] in self.ioLoop() }
        scheduleDispatch()
    }

    /// Takes our callbacks back from libdbus and stops every source.
    func uninstall() {
        let wasInstalled = state.withLockedValue { state -> Bool in
            let was = state.installed
            state.installed = false
            return was
        }
        guard wasInstalled else { return }
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(raw, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        state.withLockedValue { state in
            for timer in state.timeouts.values { timer.cancel() }
            state.watches = []
            state.timeouts = [:]
        }
        wakeIOThread()
        _ = ioStopped.wait(timeout: .now() + .seconds(5))
    }

    private static func from(_ data: UnsafeMutableRawPointer) -> MainLoop {
        Unmanaged<MainLoop>.fromOpaque(data).takeUnretainedValue()
    }

    // MARK: Watches

    private func refreshWatch(_ watch: Handle) {
        state.withLockedValue { _ = $0.watches.insert(watch) }
        wakeIOThread()
    }

    private func removeWatch(_ watch: Handle) {
        state.withLockedValue { _ = $0.watches.remove(watch) }
        wakeIOThread()
    }

    private func wakeIOThread() {
        guard wakePipe[1] >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(wakePipe[1], &byte, 1)
    }

    /// The I/O thread: poll the enabled watches' descriptors (level-triggered) and the wake-up
    /// pipe; when one is ready, let libdbus do the I/O with a non-blocking iteration, then
    /// schedule a dispatch. Watch pointers are only read under our lock (libdbus removes a watch
    /// from our set before it frees it, and may free it on any thread when the peer hangs up),
    /// so the thread never calls into a freed watch. Runs until `uninstall()`.
    private func ioLoop() {
        defer { ioStopped.signal() }
        var drain = [UInt8](repeating: 0, count: 64)
        while true {
            let interest: [pollfd]? = state.withLockedValue { state in
                guard state.installed else { return nil }
                var byDescriptor: [Int32: Int16] = [:]
                for watch in state.watches where dbus_watch_get_enabled(watch.pointer) != 0 {
                    let flags = dbus_watch_get_flags(watch.pointer)
                    var events: Int16 = 0
                    if flags & CDBUS_WATCH_READABLE != 0 { events |= Int16(POLLIN) }
                    if flags & CDBUS_WATCH_WRITABLE != 0 { events |= Int16(POLLOUT) }
                    byDescriptor[dbus_watch_get_unix_fd(watch.pointer), default: 0] |= events
                }
                return byDescriptor.map { pollfd(fd: $0.key, events: $0.value, revents: 0) }
            }
            guard let interest else { return }
            var descriptors = [pollfd(fd: wakePipe[0], events: Int16(POLLIN), revents: 0)] + interest
            let ready = poll(&descriptors, nfds_t(descriptors.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[0].revents != 0 {
                while read(wakePipe[0], &drain, drain.count) > 0 {}
            }
            guard descriptors.dropFirst().contains(where: { $0.revents != 0 }) else { continue }
            guard state.withLockedValue({ $0.installed }) else { return }
            // Reads and writes what it can without blocking (and notices a hang-up). If another
            // thread holds the I/O path this does nothing, and the next poll returns at once.
            _ = dbus_connection_read_write(raw, 0)
            scheduleDispatch()
            if dbus_connection_get_is_connected(raw) == 0 { return }
        }
    }

    // MARK: Timeouts

    private func refreshTimeout(_ timeout: Handle) {
        state.withLockedValue { state in
            state.timeouts.removeValue(forKey: timeout)?.cancel()
            guard dbus_timeout_get_enabled(timeout.pointer) != 0 else { return }
            let interval = max(1, Int(dbus_timeout_get_interval(timeout.pointer)))
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + .milliseconds(interval), repeating: .milliseconds(interval))
            timer.setEventHandler { [self] in self.handleTimeout(timeout) }
            timer.resume()
            state.timeouts[timeout] = timer
        }
    }

    private func removeTimeout(_ timeout: Handle) {
        state.withLockedValue { state in
            state.timeouts.removeValue(forKey: timeout)?.cancel()
        }
    }

    private func handleTimeout(_ timeout: Handle) {
        let live = state.withLockedValue { $0.timeouts[timeout] != nil && $0.installed }
        guard live else { return }
        _ = dbus_timeout_handle(timeout.pointer)
        dispatchAll()
    }

    /// The loop's state, for a log line when a call times out: which side is stuck.
    func diagnostics() -> String {
        let (watches, timeouts, installed) = state.withLockedValue { ($0.watches, $0.timeouts.count, $0.installed) }
        var parts = [
            "installed=\(installed)", "outgoing=\(dbus_connection_has_messages_to_send(raw) != 0)",
            "dispatch=\(dbus_connection_get_dispatch_status(raw).rawValue)", "timeouts=\(timeouts)",
        ]
        for watch in watches {
            let fd = dbus_watch_get_unix_fd(watch.pointer)
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN | POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, 0)
            parts.append(
                "watch(fd=\(fd) flags=\(dbus_watch_get_flags(watch.pointer)) enabled=\(dbus_watch_get_enabled(watch.pointer)) "
                    + "revents=\(descriptor.revents))"
            )
        }
        return parts.joined(separator: " ")
    }

    // MARK: Dispatch

    /// libdbus asks for the main loop to wake up: something is queued for writing that the
    /// sending thread could not write itself. Write it (without blocking) and dispatch.
    private func wakeUp() {
        queue.async { [self] in
            guard state.withLockedValue({ $0.installed }) else { return }
            _ = dbus_connection_read_write(raw, 0)
            dispatchAll()
        }
    }

    func scheduleDispatch() {
        let schedule = state.withLockedValue { state -> Bool in
            guard !state.dispatchScheduled else { return false }
            state.dispatchScheduled = true
            return true
        }
        guard schedule else { return }
        queue.async { [self] in
            state.withLockedValue { $0.dispatchScheduled = false }
            dispatchAll()
        }
    }

    /// Runs on `queue` only.
    private func dispatchAll() {
        while state.withLockedValue({ $0.installed }), dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }
}
