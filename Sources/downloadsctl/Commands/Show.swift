import ArgumentParser
import DBus
import DownloadsClient
import ShownText
#if canImport(Glibc)
import Glibc
#endif

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a task's file in its folder, in your desktop's file manager.",
        discussion: """
            A finished download's file is shown selected in its folder (org.freedesktop.FileManager1 on your session \
            bus, as a browser's "Show in folder" does: Nautilus, Dolphin, Nemo…); a download not finished yet shows \
            the folder it goes to, an upload the file it sends.
            """
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The task's id or object path.") var task: TaskArgument

    func run() async throws {
        try await service.run { proxy in
            let status = try await proxy.status(task.path)
            // The file manager is on your desktop's bus, whichever bus the service is on.
            let session: Connection
            do {
                session = try await Connection.open(.session)
            } catch {
                throw CommandFailure(message: "no session bus to reach a file manager on (\(error))", status: 69)
            }
            defer { session.close() }
            let file = status.isUpload ? status.source : status.destination
            let folder = Self.folder(of: status.destination)
            do {
                if status.isUpload || status.state == "finished" {
                    try await FileManagerWindow.show(file, on: session)
                    print("showing \(DisplayText.escaped(file))")
                } else {
                    try await FileManagerWindow.showFolder(folder, on: session)
                    print("showing \(DisplayText.escaped(folder)) (task \(status.id) is \(status.state))")
                }
            } catch let error as BusError {
                throw CommandFailure(
                    message: "no file manager answered (\(error.name)): the file is \(DisplayText.escaped(file))",
                    status: 1)
            }
        }
    }

    /// The destination when it is a directory (a download named by its server), else the one holding it.
    static func folder(of destination: String) -> String {
        var info = stat()
        if stat(destination, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return destination }
        guard let slash = destination.lastIndex(of: "/") else { return destination }
        return slash == destination.startIndex ? "/" : String(destination[..<slash])
    }
}
