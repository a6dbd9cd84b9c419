import AptMethod
import Foundation

/// apt's transport through the download service: `/usr/lib/apt/methods/downloads` (and
/// `downloads+http`, `downloads+https`). apt starts it, writes `6xx` messages to its standard
/// input and reads its answers from its standard output (apt's doc/method.dbk); every item is a
/// task of the system service (`AptMethodRun`).
@main
struct AptMethodMain {
    /// Synchronous, its thread waiting for the work to end. An `async` main would leave the main
    /// thread to libdispatch's `dispatch_main`, which parks it inside `pthread_exit` on Linux:
    /// glibc passes over an exiting thread when it changes the process's user, so after
    /// entering apt's sandbox the main thread stayed root, and with it the process as the kernel
    /// sees it from outside (`/proc/PID`), which the service checks (`Sandbox`).
    static func main() {
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await work()
            done.signal()
        }
        done.wait()
    }

    static func work() async {
        signal(SIGPIPE, SIG_IGN)
        let output = MethodOutput()
        output.send(
            AptMessage(
                100, "Capabilities",
                [.init("Version", "1.2"), .init("Pipeline", "true"), .init("Send-Config", "true")]))
        let run = AptMethodRun(output: output)
        // apt interrupted (Ctrl-C reaches its whole process group) or stopped: no task is left
        // behind in the service.
        var handlers: [DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler {
                Task {
                    await run.aptWentAway()
                    exit(128 + number)
                }
            }
            source.resume()
            handlers.append(source)
        }
        for await message in input() { run.take(message) }
        // apt closed our input: it is done with us, or was interrupted.
        await run.aptWentAway()
        await run.finish()
        for handler in handlers { handler.cancel() }
    }

    /// apt's messages from standard input, read on a thread of their own until it is closed.
    static func input() -> AsyncStream<AptMessage> {
        let (stream, sink) = AsyncStream.makeStream(of: AptMessage.self)
        Thread.detachNewThread {
            var reader = AptMessageReader()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                for message in reader.take(buffer[..<count]) { sink.yield(message) }
                if reader.overflowed { break }
            }
            sink.finish()
        }
        return stream
    }
}
