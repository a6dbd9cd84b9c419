import CDBus
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import NIOConcurrencyHelpers

/// Drives one libdbus connection from Dispatch sources on one serial queue: libdbus's watches
/// become read/write sources, its timeouts become timers, and its wake-up and dispatch-status
/// callbacks schedule a dispatch on the queue. No thread ever blocks inside libdbus, so a message
/// sent from any thread is written by that thread at once (or, if the socket is full, by the
/// write source as soon as it drains): the `read_write_dispatch(-1)` trap cannot happen.
final class MainLoop: @unchecked Sendable {
    /// The `DBusConnection *`; this object holds its own reference.
    let raw: OpaquePointer
    let queue: DispatchQueue

    private struct Handle: Hashable, @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct WatchSources {
        var read: DispatchSourceRead?
        var write: DispatchSourceWrite?

        func cancel() {
            read?.cancel()
            write?.cancel()
        }
    }

    private struct State {
        var watches: [Handle: WatchSources] = [:]
        var timeouts: [Handle: DispatchSourceTimer] = [:]
        var dispatchScheduled = false
        var installed = false
    }

    private let state = NIOLockedValueBox(State())

    init(connection raw: OpaquePointer, label: String) {
        dbus_connection_ref(raw)
        self.raw = raw
        self.queue = DispatchQueue(label: label)
    }

    deinit { dbus_connection_unref(raw) }

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
            for sources in state.watches.values { sources.cancel() }
            for timer in state.timeouts.values { timer.cancel() }
            state.watches = [:]
            state.timeouts = [:]
        }
    }

    private static func from(_ data: UnsafeMutableRawPointer) -> MainLoop {
        Unmanaged<MainLoop>.fromOpaque(data).takeUnretainedValue()
    }

    // MARK: Watches

    private func refreshWatch(_ watch: Handle) {
        state.withLockedValue { state in
            state.watches[watch]?.cancel()
            var sources = WatchSources()
            if dbus_watch_get_enabled(watch.pointer) != 0 {
                let fd = dbus_watch_get_unix_fd(watch.pointer)
                let flags = dbus_watch_get_flags(watch.pointer)
                if flags & CDBUS_WATCH_READABLE != 0 {
                    let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
                    source.setEventHandler { [self] in self.handleWatch(watch, flags: CDBUS_WATCH_READABLE) }
                    source.resume()
                    sources.read = source
                }
                if flags & CDBUS_WATCH_WRITABLE != 0 {
                    let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
                    source.setEventHandler { [self] in self.handleWatch(watch, flags: CDBUS_WATCH_WRITABLE) }
                    source.resume()
                    sources.write = source
                }
            }
            state.watches[watch] = sources
        }
    }

    private func removeWatch(_ watch: Handle) {
        state.withLockedValue { state in
            state.watches.removeValue(forKey: watch)?.cancel()
        }
    }

    private func handleWatch(_ watch: Handle, flags: UInt32) {
        let live = state.withLockedValue { $0.watches[watch] != nil && $0.installed }
        guard live else { return }
        _ = dbus_watch_handle(watch.pointer, flags)
        dispatchAll()
        // libdbus skips a watch event when another thread holds the connection's I/O path (a
        // sender writing). The event would not be delivered again by an edge-triggered source,
        // so while the watch is enabled and its fd still ready, look again shortly.
        let stillLive = state.withLockedValue { $0.watches[watch] != nil && $0.installed }
        guard stillLive, dbus_watch_get_enabled(watch.pointer) != 0 else { return }
        let writing = flags & CDBUS_WATCH_WRITABLE != 0
        if writing && dbus_connection_has_messages_to_send(raw) == 0 { return }
        var descriptor = pollfd(fd: dbus_watch_get_unix_fd(watch.pointer), events: Int16(writing ? POLLOUT : POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) == 1, descriptor.revents & Int16(writing ? POLLOUT : POLLIN) != 0 else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(1)) { [self] in self.handleWatch(watch, flags: flags) }
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
