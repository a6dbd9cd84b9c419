import ArgumentParser
import DownloadsAPI
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume paused or failed tasks, or continue a download from resume data (prints the task id)."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "Task ids or object paths.") var tasks: [TaskArgument] = []
    @Option(
        name: .customLong("resume-data"),
        help: ArgumentHelp("A file written by 'pause --resume-data'.", valueName: "file"))
    var resumeData: String?
    @Option(
        help: ArgumentHelp(
            "With --resume-data: continue through this proxy instead of the one the download had.", valueName: "url"))
    var proxy: String?
    @Flag(name: .customLong("no-proxy"), help: "With --resume-data: continue without a proxy.") var noProxy = false
    @Option(
        help: ArgumentHelp(
            "Continue at this URL (a fresh link to the same file): the bytes already fetched are kept when the server sends the same file, else it starts over.",
            valueName: "url"
        ))
    var url: String?

    func validate() throws {
        guard tasks.isEmpty != (resumeData == nil) else {
            throw ValidationError("give a TASK (or several) or --resume-data FILE (one of them)")
        }
        if url != nil && tasks.count > 1 { throw ValidationError("--url is the new URL of one task") }
        if noProxy && proxy != nil { throw ValidationError("--proxy and --no-proxy exclude each other") }
        if (noProxy || proxy != nil) && resumeData == nil {
            throw ValidationError("--proxy and --no-proxy go with --resume-data")
        }
    }

    func run() async throws {
        try await service.run { proxy in
            if !tasks.isEmpty {
                try await service.forEach(tasks) { task in
                    if let url {
                        try await proxy.setURL(task.path, url: url)
                        // A queued or retrying task carries on by itself at the new URL.
                        let state = try await proxy.status(task.path).state
                        guard state == "paused" || state == "failed" else {
                            print("task \(Paths.id(task.path)) carries on at the new URL")
                            return
                        }
                    }
                    try await proxy.resume(task.path)
                    print("resumed task \(Paths.id(task.path))")
                }
            } else if let resumeData {
                let path = Paths.absolute(resumeData)
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw CommandFailure(message: "cannot read the resume data in \(path)")
                }
                var options = TaskOptions()
                options.proxy = noProxy ? "direct://" : self.proxy
                options.url = url
                print(Paths.id(try await proxy.resume(resumeData: data, options: options)))
            }
        }
    }
}
