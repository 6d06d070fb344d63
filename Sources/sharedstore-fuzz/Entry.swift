import Foundation

#if FUZZING
    /// The target libFuzzer runs, from `SHAREDSTORE_FUZZ_TARGET`.
    private let selected: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["SHAREDSTORE_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(
                Data("error: set SHAREDSTORE_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue))\n".utf8))
            exit(2)
        }
        return target
    }()

    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        selected.run(bytes)
        return 0
    }

    /// SwiftPM links an executable's `main` to `<module>_main`, so libFuzzer's own `main` is not
    /// used: this one hands over to libFuzzer's driver (`LLVMFuzzerRunDriver`, found with dlsym:
    /// SwiftPM exports an executable's symbols).
    @_cdecl("sharedstore_fuzz_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        typealias Callback = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
        typealias Driver =
            @convention(c) (
                UnsafeMutablePointer<CInt>, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                Callback
            ) -> CInt
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "LLVMFuzzerRunDriver") else {
            FileHandle.standardError.write(
                Data("error: libFuzzer's driver is not linked in (build with -sanitize=fuzzer)\n".utf8))
            return 2
        }
        _ = selected
        var count = argc
        var arguments = argv
        return unsafeBitCast(symbol, to: Driver.self)(&count, &arguments, fuzzOneInput)
    }
#else
    /// Without libFuzzer: `sharedstore-fuzz TARGET FILE...` runs each file through the target and
    /// prints how many ran (a regression run over a corpus).
    @main
    enum Replay {
        static func main() {
            let args = Array(CommandLine.arguments.dropFirst())
            guard let name = args.first, let target = FuzzTarget(rawValue: name) else {
                let targets = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
                let usage = "usage: sharedstore-fuzz TARGET FILE... (targets: \(targets))\n"
                FileHandle.standardError.write(Data(usage.utf8))
                exit(2)
            }
            var count = 0
            for path in args.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else {
                    FileHandle.standardError.write(Data("error: cannot read \(path)\n".utf8))
                    exit(1)
                }
                target.run(Array(data))
                count += 1
            }
            print("\(name): \(count) inputs, no crash")
        }
    }
#endif
