import ArgumentParser

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel tasks (their partial files are removed); cancelling an ended task removes it from the list."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "Task ids or object paths.") var tasks: [TaskArgument]

    func validate() throws {
        if tasks.isEmpty { throw ValidationError("give the TASK to cancel (or several)") }
    }

    func run() async throws {
        try await service.run { proxy in
            try await service.forEach(tasks) { task in
                // Said as it is: an ended task is removed, not cancelled.
                let ended = (try? await proxy.status(task.path))?.isEnded ?? false
                try await proxy.cancel(task.path)
                print("\(ended ? "removed" : "cancelled") task \(Paths.id(task.path))")
            }
        }
    }
}
