import DownloadModel

extension UploadRun {
    /// What the machine's action came to for the loop that sends: a request to send, the next
    /// action (after a retry's wait), or the task ended.
    enum ActionResult {
        case send(TransferStateMachine.Request)
        case next(TransferStateMachine.Action)
        case ended
    }

    /// Performs one action of the attempt machine (`uploadMachine`) other than sending, the same
    /// for a plain upload and a resumable one: stop, wait and retry, finish with the server's
    /// answer, fail. `resumesFrom` says in the retry's log line where the next attempt starts.
    func perform(
        _ action: TransferStateMachine.Action, machine: inout TransferStateMachine, spec: UploadSpec,
        reply: UploadDelegate.Result?, file: ReplyFile?, resumesFrom: @autoclosure () -> String
    ) async -> ActionResult {
        switch action {
        case .send(let request):
            return .send(request)
        case .stop(let reason):
            await stopped(reason, reply: file)
        case .retry(let delay, let error):
            owner.logger.info(
                "task \(task.id): \(error); sending again \(resumesFrom()) in \(String(format: "%.1f", delay)) s (retry \(machine.retries))"
            )
            guard await waitToRetry(after: error, delay: delay, file: file) else { return .ended }
            return .next(machine.retryDelayElapsed(offset: 0, validator: nil))
        case .finalize:
            guard let reply else {
                await failed(.internalError("an upload finished without an answer"), reply: nil, file: file)
                return .ended
            }
            await finished(reply, spec: spec, reply: file)
        case .fail(let error):
            await failed(error, reply: reply, file: file)
        case .restartFromZero:
            await failed(.internalError("an upload was asked to restart from zero"), reply: nil, file: file)
        case .finishUnchanged:
            // Only a download's request is conditional.
            await failed(.internalError("an upload was found not modified"), reply: nil, file: file)
        }
        return .ended
    }
}
