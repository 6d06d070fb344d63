import Foundation
import SharedStoreSupport

/// Where a record's encode puts its properties: a box of values by name (an update, a single
/// insert) or of a row by position (a batch's records, ``RecordEncoder/encodeRow(_:memo:)``),
/// and what a batch learns of a record type to fill the next box faster.
extension RecordEncoder {
    /// Why a record's property cannot be written.
    enum Problem { case unknown, objectInAttribute(AttributeType), valueInRelationship }

    /// What a record's properties encoded to, sorted into values and relationships as they come
    /// (``Entity/recordSlots`` says which is which). `failure` names a property written through a
    /// nested container, which has no column, and `problem` the first property that cannot be
    /// written: the encode fails rather than drop either. A box without slots (a nested one)
    /// keeps nothing.
    ///
    /// A box lives for one encode on one thread (the encoder's containers are its only users), so
    /// its properties skip the runtime's exclusivity checks: they cost more than the rest of a
    /// property's trip through Codable.
    final class Box {
        let slots: [String: RecordSlot]
        let inserting: Bool
        /// The order the record type's keys came in last, learnt over a batch (nil: by name).
        let order: KeyOrder?
        /// The container the last encode asked for, by its key type: a record of the type asks
        /// for the same again, which costs two lookups of generic metadata and an allocation to
        /// make (about 900 instructions). Only a box a memo keeps has one (a cycle the memo
        /// breaks).
        @exclusivity(unchecked) var container: (key: ObjectIdentifier, holder: AnyObject)?
        /// Whether this is a memo's box, which keeps its container.
        @exclusivity(unchecked) var reused = false
        @exclusivity(unchecked) var values: [String: Value] = [:]
        @exclusivity(unchecked) var relationships: [String: ObjectID?] = [:]
        @exclusivity(unchecked) var failure: String?
        @exclusivity(unchecked) var problem: (String, Problem)?
        /// Set when capturing: every key's value, whatever the entity (``RecordEncoder/capture(_:)``).
        @exclusivity(unchecked) var captured: [String: Value]?
        /// A memo's box fills rows by position: how many attributes and to-ones they have.
        let shape: (attributes: Int, toOne: Int)?
        /// The attributes by position (a box with a ``shape``).
        @exclusivity(unchecked) var row: [Value?] = []
        /// The to-one relationships by position (a box with a ``shape``).
        @exclusivity(unchecked) var targets: [ObjectID?] = []
        init(
            slots: [String: RecordSlot], inserting: Bool, order: KeyOrder? = nil,
            shape: (attributes: Int, toOne: Int)? = nil
        ) {
            self.slots = slots
            self.inserting = inserting
            self.order = order
            self.shape = shape
            order?.position = 0
            if let shape {
                row = Array(repeating: nil, count: shape.attributes)
                targets = Array(repeating: nil, count: shape.toOne)
            } else {
                // Room for every property, made at that size (`reserveCapacity` is a call into the
                // standard library, not specialized: 1,100 instructions a record).
                values = Dictionary(minimumCapacity: slots.count)
            }
        }
        /// Made ready for the next record: nothing of the last one left.
        func reset() {
            order?.position = 0
            if let shape {
                // In place: the storage the last record left (or the writer gave back) is reused.
                // `Array(repeating:count:)` cost 1,800 instructions a record.
                InsertRow.clear(&row, to: shape.attributes)
                InsertRow.clear(&targets, to: shape.toOne)
            } else {
                values = Dictionary(minimumCapacity: slots.count)
            }
            if !relationships.isEmpty { relationships = [:] }
            failure = nil
            problem = nil
        }

        /// The values and relationships encoded, handed over whole (the box keeps no reference to
        /// them, so the writer changes them in place).
        func take() -> ([String: Value], [String: ObjectID?]) {
            let taken = (values, relationships)
            values = [:]
            relationships = [:]
            return taken
        }

        /// The row encoded (a box with a ``shape``), handed over whole.
        func takeRow() -> EncodedRow {
            let taken = EncodedRow(values: row, targets: targets, others: relationships)
            row = []
            targets = []
            relationships = [:]
            return taken
        }

        /// A nested container's box: what it gets goes nowhere.
        static func discarding() -> Box { Box(slots: [:], inserting: false) }

        /// What `name` is to the entity: from the key order when the record asks its keys in the order
        /// the last one did (a comparison, not a hash), else from ``slots``.
        func slot(_ name: String) -> RecordSlot? {
            guard let order else { return slots[name] }
            defer { order.position += 1 }
            if order.position < order.names.count {
                if order.names[order.position] == name { return order.slots[order.position] }
                order.names.removeSubrange(order.position...)
                order.slots.removeSubrange(order.position...)
            }
            let slot = slots[name]
            order.names.append(name)
            order.slots.append(slot)
            return slot
        }

        func put(_ v: Value, _ name: String) { put(v, name, slot(name)) }

        func put(_ v: Value, _ name: String, _ slot: RecordSlot?) {
            if captured != nil {
                captured?[name] = v
                return
            }
            switch slot {
            case .attribute(_, let derived, let nullIsDefault, let index)?:
                // A record reads derived attributes; the save computes them.
                guard !derived, !(inserting && nullIsDefault && v.isNull) else { return }
                // A container kept past its record (its row taken) writes nowhere.
                if shape == nil { values[name] = v } else if index < row.count { row[index] = v }
            case .relationship?:
                guard v.isNull else { return note(name, .valueInRelationship) }
                if !inserting { relationships[name] = .some(nil) }
            case nil:
                if name != "id", !slots.isEmpty { note(name, .unknown) }
            }
        }

        func put(_ id: ObjectID, _ name: String, _ slot: RecordSlot?) {
            if captured != nil {
                captured?[name] = .integer(id.primaryKey)
                return
            }
            switch slot {
            case .attribute(let type, _, _, _)?: note(name, .objectInAttribute(type))
            case .relationship(let toOne)?:
                if shape == nil || toOne == nil {
                    relationships[name] = .some(id)
                } else if let toOne, toOne < targets.count {
                    targets[toOne] = id
                }
            case nil: if name != "id", !slots.isEmpty { note(name, .unknown) }
            }
        }

        private func note(_ name: String, _ problem: Problem) {
            if self.problem == nil { self.problem = (name, problem) }
        }
    }

    /// What a batch learnt of one record type: its entity, the order its keys come in, and the
    /// box its records take turns in. Used by one batch, on its thread: no exclusivity checks.
    final class Memo {
        /// The entity the record type maps to.
        let entity: Entity
        /// The order the type's keys came in last.
        let order = KeyOrder()
        @exclusivity(unchecked) private var reused: Box?
        init(entity: Entity) { self.entity = entity }

        /// The box each insert of the batch encodes into, made ready for a new record. The box
        /// does not point back at the memo (it holds the key order alone): a box a record's
        /// encoder kept past its batch still works, and the memo and its box are freed with the
        /// batch.
        func box() -> Box {
            if let reused {
                reused.reset()
                return reused
            }
            let made = Box(
                slots: entity.recordSlots, inserting: true, order: order,
                shape: (entity.attributes.count, entity.toOneRelationships.count))
            made.reused = true
            reused = made
            return made
        }

        // The box and its kept container hold each other: the cycle ends with the memo.
        deinit { reused?.container = nil }
    }

    /// The keys a record type encoded last, in order, with their slots: the records of a batch
    /// find their properties by comparing names (a record encodes its keys in one order). Used by
    /// one batch, on its thread: no exclusivity checks.
    final class KeyOrder {
        @exclusivity(unchecked) var names: [String] = []
        @exclusivity(unchecked) var slots: [RecordSlot?] = []
        @exclusivity(unchecked) var position = 0
    }

    /// A keyed container kept by a box for the records after the first.
    final class ContainerHolder<Key: CodingKey> {
        let container: KeyedEncodingContainer<Key>
        init(_ container: KeyedEncodingContainer<Key>) { self.container = container }
    }
}
