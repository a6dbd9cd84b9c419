import ArgumentParser

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel a task (its partial file is removed); cancelling an ended task removes it from the list."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument

    func run() async throws {
        try await service.run { proxy in
            try await proxy.cancel(task.path)
            print("cancelled task \(Paths.id(task.path))")
        }
    }
}
