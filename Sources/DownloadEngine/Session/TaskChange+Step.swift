import Crypto
import DownloadModel

/// What each change a run reports does to its task: written once, here, for every owner.
extension TaskChange {
    /// The step that applies the change to its task; nil for a change that asks the scheduler
    /// for places and changes nothing of the task. `resumeDataKey` seals a failed download's
    /// resume data (made only for that change: the manager rebuilds the key on each call).
    func step(resumeDataKey: @autoclosure () -> SymmetricKey) -> TaskStep? {
        switch self {
        case .running(let run):
            return .quiet { $0.transfer = run }
        case .runEnded(let run):
            return .quiet { state in if state.transfer === run { state.transfer = nil } }
        case .fileOpened(let identity):
            return .checkpoint { state in
                guard state.record.partialFile != identity else { return false }
                state.record.partialFile = identity
                return true
            }
        case .responseReceived(let head):
            let learned = !head.mirrors.isEmpty || head.checksum != nil
            return .report(
                { state in
                    state.record.options.mirrors += head.mirrors
                    if let checksum = head.checksum { state.record.options.checksum = checksum }
                    state.bytesWritten = head.offset
                    state.record.finalURL = head.url
                    state.record.expectedLength = head.expectedLength
                    state.record.validator = head.validator
                    state.record.responseStatus = head.status
                    state.record.lastModified = head.lastModified
                    // The name the server suggests, unless the file is named already.
                    state.record.name(
                        inDirectory: HTTPHeaderRules.fileName(
                            contentDisposition: head.contentDisposition, url: head.url))
                    return true
                },
                events: { delegate, task, snapshot in
                    delegate.receivedResponse(task, snapshot, status: head.status)
                    if learned { delegate.optionsChanged(task, snapshot) }
                })
        case .followedDocument(let followed):
            return .report(
                { state in
                    state.record.options = followed.options(state.record.options, given: state.record.url)
                    state.record.url = followed.primary
                    state.record.finalURL = nil
                    // The group's first file is under its own name (a path below the directory,
                    // made by the group).
                    if followed.group != 0 { state.record.group = followed.group }
                    state.record.name(inDirectory: followed.name)
                    return true
                },
                events: { delegate, task, snapshot in
                    delegate.urlChanged(task, snapshot)
                    delegate.optionsChanged(task, snapshot)
                })
        case .durable(let position):
            return .checkpoint { state in
                // Only forward; a segmented download's offset is a count (`durableRanges`).
                guard position > state.record.durableOffset, position <= state.bytesWritten,
                    !state.record.state.isTerminal, state.record.segments == nil
                else { return false }
                state.record.durableOffset = position
                return true
            }
        case .durableRanges(let remaining, let length):
            return .checkpoint { state in
                guard !state.record.state.isTerminal, state.record.expectedLength == length,
                    state.record.segments != remaining
                else { return false }
                state.record.segments = remaining
                state.record.durableOffset = ByteRange.held(length: length, remaining: remaining)
                return true
            }
        case .durableWhole(let length):
            return .checkpoint { state in
                guard !state.record.state.isTerminal else { return false }
                state.record.segments = nil
                state.record.durableOffset = length
                state.record.expectedLength = length
                return true
            }
        case .reset(let reset):
            return .checkpoint { state in
                let recorded = state.record
                state.record.durableOffset = 0
                state.record.segments = nil
                if reset == .version {
                    state.record.metrics?.restarts += 1
                    state.bytesWritten = 0
                    state.record.validator = nil
                    state.record.expectedLength = -1
                }
                return recorded.durableOffset != state.record.durableOffset
                    || recorded.segments != state.record.segments || recorded.validator != state.record.validator
                    || recorded.expectedLength != state.record.expectedLength
            }
        case .sentWhole:
            return .checkpoint { state in
                guard !state.record.state.isTerminal, state.record.upload?.sentWhole != true else { return false }
                state.record.upload?.sentWhole = true
                return true
            }
        case .transaction(let transaction, let source):
            return .quiet { state in state.record.metrics?.add(transaction, from: source) }
        case .answered:
            return .quiet { state in
                if state.record.upload?.sentWhole == true { state.record.upload?.sentWhole = nil }
            }
        case .confirmed(let offset, let resumable):
            return .checkpoint { state in
                guard !state.record.state.isTerminal,
                    state.record.durableOffset != offset || state.record.upload?.resumable != resumable
                else { return false }
                state.record.upload?.resumable = resumable
                state.record.durableOffset = offset
                return true
            }
        case .replyBodyDelivered:
            return .quiet { state in state.record.upload?.newReplyBody = nil }
        case .position(let position):
            return .quiet { $0.bytesWritten = position }
        case .sourceReleased:
            return .quiet { $0.source = nil }
        case .resumed:
            return .move(to: .running, from: [.retrying])
        case .retrying(let error):
            // The error is cleared as the task leaves `retrying` for anything but `failed`
            // (`DownloadTaskRecord.enter`).
            return .move(to: .retrying, from: [.running]) { state in
                state.record.errorName = error.name
                state.record.errorMessage = error.message
            }
        case .finished(let destination, let length):
            return .move(
                to: .finished,
                { state in
                    state.record.resolvedPath = destination
                    state.record.durableOffset = length
                    state.bytesWritten = length
                    state.record.segments = nil
                },
                then: { delegate, task, snapshot in delegate.finished(task, snapshot, location: destination) })
        case .notModified:
            return .move(
                to: .finished,
                { state in
                    state.record.responseStatus = 304
                    state.record.durableOffset = 0
                    state.bytesWritten = 0
                    state.record.segments = nil
                },
                then: { delegate, task, snapshot in
                    delegate.finished(task, snapshot, location: snapshot.record.destination)
                })
        case .uploaded(let result, let length, let reply, let bodyKept):
            return .move(
                to: .finished,
                { state in
                    state.record.upload?.keep(result, bodyKept: bodyKept)
                    state.record.durableOffset = length
                    state.bytesWritten = length
                    state.record.resolvedPath = reply
                },
                then: { delegate, task, snapshot in delegate.finished(task, snapshot, location: reply ?? "") })
        case .failed(let error):
            let key = resumeDataKey()
            return .move(
                to: .failed,
                { state in
                    state.record.errorName = error.name
                    state.record.errorMessage = error.message
                    // What a failed task holds is what is durable: bytes written after the last
                    // checkpoint are not kept (and with nothing durable the partial file is gone).
                    state.bytesWritten = state.record.durableOffset
                    state.progressDelivered = state.record.durableOffset
                },
                then: { delegate, task, snapshot in
                    let resumable = snapshot.record.validator != nil && snapshot.durableOffset > 0
                    let resumeData = resumable ? try? ResumeData(record: snapshot.record).encoded(key: key) : nil
                    delegate.completed(task, snapshot, error: error, resumeData: resumeData)
                })
        case .uploadFailed(let error, let result):
            return .move(
                to: .failed,
                { state in
                    state.record.errorName = error.name
                    state.record.errorMessage = error.message
                    if let result { state.record.upload?.keep(result, bodyKept: true) }
                    state.progressDelivered = state.bytesWritten
                },
                then: { delegate, task, snapshot in
                    delegate.completed(task, snapshot, error: error, resumeData: nil)
                })
        case .stopped(let reason, let keepsUnconfirmed):
            let next = reason.stoppedState
            return .move(
                to: next,
                { state in
                    state.stopReason = nil
                    // A plain upload keeps nothing of an attempt: it starts again from byte 0; a
                    // resumable one keeps what the server confirmed.
                    if !keepsUnconfirmed {
                        state.bytesWritten = state.record.durableOffset
                        state.progressDelivered = state.record.durableOffset
                    }
                },
                then: { delegate, task, snapshot in
                    if next == .cancelled { delegate.completed(task, snapshot, error: .cancelled, resumeData: nil) }
                })
        case .yielding(let yielding):
            // Only `yielding` is this one's to set or clear (a queued task's reasons are the
            // network's); observers hear of a change only.
            return .report(
                { state in
                    let next: WaitingFor = yielding && state.record.state == .running ? .yielding : .nothing
                    guard state.waitingFor != next, state.waitingFor == .yielding || next == .yielding else {
                        return false
                    }
                    state.waitingFor = next
                    return true
                }, events: { delegate, task, snapshot in delegate.waitingChanged(task, snapshot) })
        case .short, .wantsConnections, .placeNotNeeded, .oneStream, .mayTakeMore:
            return nil
        }
    }
}
