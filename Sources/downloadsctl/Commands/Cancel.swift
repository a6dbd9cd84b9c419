import ArgumentParser

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel a task (its partial file is removed); cancelling an ended task removes it from the list."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument

    func run() async throws {
        try await service.run { proxy in
            // Said as it is: an ended task is removed, not cancelled.
            let ended = (try? await proxy.status(task.path))?.isEnded ?? false
            try await proxy.cancel(task.path)
            print("\(ended ? "removed" : "cancelled") task \(Paths.id(task.path))")
        }
    }
}
