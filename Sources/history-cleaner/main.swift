import Foundation
import StoreCLI

exit(Targets.historyCleaner.run(CommandLine.arguments))
