import Foundation
import Observation
import ReadLater
import SharedStore
import Testing

/// Hostile review 23: typed live queries from @MainActor code; the build must show no warning.
@MainActor @Observable final class Hostile23ViewModel {
    typealias Article = ReadLater.Records.Article
    var items: [Article] = []
    var observed: [Article] = []
    @ObservationIgnored var task: Task<Void, Never>?
    @ObservationIgnored var observation: Task<Void, Error>?
    let query: LiveQuery<Article>
    let observedQuery: LiveQuery<Article>
    let model: LiveRecordsModel<Article>

    /// One query per reader: the stream, the callback and the model each follow their own.
    init(container: Container, registry: TokenRegistry) throws {
        func unread() throws -> LiveQuery<Article> {
            try LiveQuery<Article>(
                container: container, registry: registry,
                request: FetchRequest(
                    Article.self, where: \Article.isRead == false, sortedBy: [.descending(\Article.createdAt)], limit: 5
                ))
        }
        query = try unread()
        observedQuery = try unread()
        model = LiveRecordsModel(try unread())
    }

    func start() {
        let query = query
        task = Task {
            do {
                for try await result in query.results(pollInterval: 0.05) {
                    items = result.diff.apply(to: items, new: result.objects)
                }
            } catch {}
        }
        observation = observedQuery.observe(pollInterval: 0.05) { result in
            Task { @MainActor in self.observed = result.records }
        }
        withObservationTracking {
            _ = model.records
        } onChange: {
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct Hostile23MainActorTests {
    @MainActor @Test func viewModelFollows() async throws {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        let vm = try Hostile23ViewModel(container: container, registry: try TokenRegistry(group: group.path))
        vm.start()
        let w = container.newContext(author: "W")
        for k in 0..<8 {
            try w.insert(
                ReadLater.Records.Article(
                    title: "t\(k)", url: "https://x.example/\(k)", createdAt: Date(timeIntervalSince1970: Double(k))))
        }
        try w.save()
        await waitObserving { vm.items.count == 5 }
        #expect(vm.items.map(\.title) == ["t7", "t6", "t5", "t4", "t3"])
        await waitObserving { vm.observed.count == 5 && vm.model.records.count == 5 }
        #expect(vm.observed.map(\.title) == ["t7", "t6", "t5", "t4", "t3"])
        #expect(vm.model.records.map(\.title) == ["t7", "t6", "t5", "t4", "t3"])
        vm.task?.cancel()
        vm.observation?.cancel()
        vm.model.stop()
    }
}
