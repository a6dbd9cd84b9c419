// Downloads one URL through the engine (SessionManager → TransferDelegate → pwrite) and exits.
// Timing, CPU and peak RSS are measured from outside by Benchmarks/engine-bench.sh, the same way
// as for curl, so the two are comparable.
//
// `engine-bench --small LAYER BASE-URL DIRECTORY COUNT`: many small downloads (BASE-URL/pN.bin),
// 64 at once, through one layer of the service (`SmallFilesLayer`); prints this process's CPU per
// task (Benchmarks/engine-bench.sh small).
import Crypto
import DownloadEngine
import DownloadModel
import Foundation
import NIOConcurrencyHelpers

final class Waiter: DownloadObserver, @unchecked Sendable {
    let done = NIOLockedValueBox<String?>(nil)
    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {
        done.withLockedValue { $0 = "finished" }
    }
    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {
        done.withLockedValue { $0 = "failed: \(error)" }
    }
}

let arguments = CommandLine.arguments
if arguments.count == 6, arguments[1] == "--small", let layer = SmallFilesLayer(rawValue: arguments[2]),
    let count = Int(arguments[5])
{
    try await SmallFilesRun(layer: layer, base: arguments[3], directory: arguments[4], count: count).run()
    exit(0)
}
guard arguments.count == 3 else {
    FileHandle.standardError.write(
        Data(
            "usage: engine-bench URL OUTPUT | engine-bench --small http|file|engine|store BASE-URL DIRECTORY COUNT\n"
                .utf8))
    exit(2)
}
let waiter = Waiter()
let manager = SessionManager(resumeDataKey: SymmetricKey(size: .bits256), delegate: EventDelivery(observers: [waiter]))
var options = DownloadOptions()
options.overwrite = true
try manager.create(
    DownloadRequest(
        owner: getuid(), session: "bench", url: arguments[1], destination: arguments[2], destinationIsDirectory: false,
        options: options
    ))
while waiter.done.withLockedValue({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
let result = waiter.done.withLockedValue { $0 } ?? ""
await manager.shutdown()
guard result == "finished" else {
    FileHandle.standardError.write(Data("engine-bench: \(result)\n".utf8))
    exit(1)
}
